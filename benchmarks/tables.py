"""Many tables, one sink (issue 53's benchmark): data generator and runners.

    python benchmarks/tables.py --tables 100 --table-changes 20000     # generate (cached) and print

``run.py --only tables`` runs the section: ``N`` tables of random schemas (3-10 columns of long,
int, string, double, decimal(10,2), timestamp, date; the key ``id`` a long, int or string), each a
base of ``changes // 4`` keys (snapshot events, ``op`` r) and ``changes`` changes: 70 % updates
and 10 % deletes of live keys, 20 % inserts (half of them reusing a deleted key when there is one),
so a key may change many times. Written three ways from one replay:

* ``routed/``: every table's events interleaved at random (one topic holding a whole database,
  Debezium's topic routing), Kafka Connect JSON with ``schemas.enable`` (the shape of
  ``tests/support/connect_events.py``: MicroTimestamp, io.debezium.time.Date, Decimal as base64),
  in files of ``ROUTED_FILE_EVENTS`` lines whose mtimes follow their order: the routed sink's input.
* ``per_table/<t>/events.json``: the same changes of one table as plain Debezium JSON (schemas
  off; ts as ISO-8601, dates as ``YYYY-MM-DD``, decimals as JSON numbers, as ``datagen``'s upsert
  files), read with a declared ``SCHEMA``: what a user writes today, one source and sink a table.
* ``merge/<t>/base.parquet`` + ``changes.parquet`` (``op`` I/U/D, ``seq`` = the change's position):
  Spark 3.5 + Iceberg Java creates each table from its base and ``MERGE INTO``s its changes.

and ``expected/<t>.parquet``, each table's final state (the replay), against which every runner's
tables are checked (count + checksum per table, by Iceberg Java: ``workers/spark_tables.verify``).

With a FILES source a change carries no record key (a Kafka record's key names each table's
primary key), so the routed sink's ``KEY (id)`` keys every table: here every table's key is one
column ``id`` of varied type, no composite keys (they need the Kafka source).
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import os
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MANIFEST = "manifest.json"
ROUTED_FILE_EVENTS = 20_000  # events per file of the routed stream
VALUE_KINDS = ("long", "int", "string", "double", "decimal", "ts", "date")
KEY_KINDS = ("long", "int", "string")
SPARK_DDL_TYPE = {"long": "BIGINT", "int": "INT", "string": "STRING", "double": "DOUBLE",
                  "decimal": "DECIMAL(10,2)", "ts": "TIMESTAMP", "date": "DATE"}
TS0_US = 1_735_689_600_000_000  # 2025-01-01T00:00:00Z
YEAR_US = 365 * 86_400 * 1_000_000
EPOCH = dt.datetime(1970, 1, 1)
DAY0 = dt.date(1970, 1, 1)
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
         "kilo", "lima", "mike", "november", "oscar", "papa")


# ------------------------------------------------------------------------------------------ schemas
def table_columns(rng: random.Random) -> list[tuple[str, str]]:
    """3-10 columns: ``id`` (the key) then 2-9 of mixed types."""
    cols = [("id", rng.choice(KEY_KINDS))]
    for j in range(rng.randint(2, 9)):
        kind = rng.choice(VALUE_KINDS)
        cols.append((f"c{j}_{kind}", kind))
    return cols


def spark_ddl(columns: list[tuple[str, str]]) -> str:
    return ", ".join(f"{c} {SPARK_DDL_TYPE[k]}" for c, k in columns)


def _value(rng: random.Random, kind: str) -> Any:
    """A value in its raw form: decimal as cents, ts as microseconds, date as days (int)."""
    r = rng.random()
    if kind != "string" and r < 0.03:
        return None  # a few nulls in every non-key column
    if kind == "long":
        return rng.randrange(-(10**12), 10**12)
    if kind == "int":
        return rng.randrange(-(10**6), 10**6)
    if kind == "string":
        return f"{WORDS[rng.randrange(len(WORDS))]}-{rng.randrange(10**6)}"
    if kind == "double":
        return round(rng.uniform(-1e6, 1e6), 3)
    if kind == "decimal":
        return rng.randrange(-(10**9), 10**9)
    if kind == "ts":
        return TS0_US + rng.randrange(YEAR_US)
    return 20_089 + rng.randrange(365)  # date: 2025 as days


def _key_value(kind: str, k: int) -> Any:
    return f"k{k:08d}" if kind == "string" else k


# Kafka Connect JSON (schemas.enable) and plain Debezium JSON encodings of one raw value
def _connect(kind: str, v: Any) -> Any:
    if v is None or kind != "decimal":
        return v  # ts: micros (MicroTimestamp), date: days (io.debezium.time.Date)
    n = max(1, (v.bit_length() + 8) // 8)
    return base64.b64encode(v.to_bytes(n, "big", signed=True)).decode()


def _plain(kind: str, v: Any) -> Any:
    if v is None:
        return None
    if kind == "decimal":
        return v / 100  # a JSON number; repr is the shortest text of the cents
    if kind == "ts":
        return (EPOCH + dt.timedelta(microseconds=v)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if kind == "date":
        return (DAY0 + dt.timedelta(days=v)).isoformat()
    return v


CONNECT_TYPES = {
    "int": {"type": "int32"},
    "long": {"type": "int64"},
    "double": {"type": "float64"},
    "string": {"type": "string"},
    "date": {"type": "int32", "name": "io.debezium.time.Date"},
    "ts": {"type": "int64", "name": "io.debezium.time.MicroTimestamp"},
    "decimal": {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
                "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
}


def connect_schema(db: str, table: str, columns: list[tuple[str, str]]) -> dict[str, Any]:
    """The value schema of a Debezium event of ``db.table`` (as ``tests/support/connect_events``)."""
    row = {"type": "struct", "name": f"srv.{db}.{table}.Value", "optional": True,
           "fields": [{**CONNECT_TYPES[k], "optional": c != "id", "field": c} for c, k in columns]}
    return {
        "type": "struct", "name": f"srv.{db}.{table}.Envelope", "optional": False,
        "fields": [
            {**row, "field": "before"}, {**row, "field": "after"},
            {"type": "struct", "field": "source", "optional": False, "fields": [
                {"type": "string", "field": "db", "optional": False},
                {"type": "string", "field": "schema", "optional": True},
                {"type": "string", "field": "table", "optional": True},
                {"type": "int64", "field": "lsn", "optional": True}]},
            {"type": "string", "field": "op", "optional": False},
            {"type": "int64", "field": "ts_ms", "optional": True},
        ],
    }


# ------------------------------------------------------------------------------------------ dataset
@dataclass
class TablesDataset:
    path: str
    tables: int
    changes: int  # per table
    base: int  # base keys per table
    seed: int
    names: list[str]
    ddl: dict[str, str]  # table -> Spark DDL of its columns
    columns: dict[str, list[str]]
    expected_rows: dict[str, int]
    events: int  # every event of every table (base + changes)
    routed_files: int
    routed_bytes: int
    per_table_bytes: int
    generate_seconds: float

    @property
    def routed_dir(self) -> str:
        return str(Path(self.path) / "routed")

    def per_table_dir(self, name: str) -> str:
        return str(Path(self.path) / "per_table" / name)

    def merge_files(self, name: str) -> tuple[str, str]:
        d = Path(self.path) / "merge" / name
        return str(d / "base.parquet"), str(d / "changes.parquet")

    def expected(self, name: str) -> str:
        return str(Path(self.path) / "expected" / f"{name}.parquet")

    @classmethod
    def load(cls, path: str | Path) -> TablesDataset:
        return cls(**json.loads((Path(path) / MANIFEST).read_text()))


def _arrow_columns(columns: list[tuple[str, str]], rows: list[dict[str, Any]]) -> Any:
    """Rows of raw values as an Arrow table of the columns' types."""
    from decimal import Decimal

    import pyarrow as pa

    arrays, names = [], []
    for c, k in columns:
        vals = [r.get(c) for r in rows]
        if k == "long":
            a = pa.array(vals, pa.int64())
        elif k == "int":
            a = pa.array(vals, pa.int32())
        elif k == "string":
            a = pa.array(vals, pa.string())
        elif k == "double":
            a = pa.array(vals, pa.float64())
        elif k == "decimal":
            a = pa.array([None if v is None else Decimal(v).scaleb(-2) for v in vals], pa.decimal128(10, 2))
        elif k == "ts":
            a = pa.array(vals, pa.int64()).cast(pa.timestamp("us"))
        else:
            a = pa.array(vals, pa.int32()).cast(pa.date32())
        arrays.append(a)
        names.append(c)
    return pa.Table.from_arrays(arrays, names=names)


def _table_events(i: int, name: str, columns: list[tuple[str, str]], base: int, changes: int,
                  seed: int) -> list[tuple[str, dict[str, Any] | None, dict[str, Any] | None]]:
    """The replay of one table: its (op, before, after) events, base then changes; raw values."""
    rng = random.Random(seed * 1_000_003 + i)
    kkind = columns[0][1]
    state: dict[Any, dict[str, Any]] = {}
    live: list[Any] = []  # keys alive (random picks); pos kept in ``where``
    where: dict[Any, int] = {}
    deleted: list[Any] = []
    next_key = 0
    out: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None]] = []

    def row(key: Any) -> dict[str, Any]:
        return {"id": key, **{c: _value(rng, k) for c, k in columns[1:]}}

    def add(key: Any, r: dict[str, Any]) -> None:
        state[key] = r
        where[key] = len(live)
        live.append(key)

    def remove(key: Any) -> dict[str, Any]:
        p = where.pop(key)
        last = live.pop()
        if last != key:
            live[p] = last
            where[last] = p
        return state.pop(key)

    for _ in range(base):
        key = _key_value(kkind, next_key)
        next_key += 1
        r = row(key)
        add(key, r)
        out.append(("r", None, r))
    for _ in range(changes):
        x = rng.random()
        if live and x < 0.7:  # update
            key = live[rng.randrange(len(live))]
            old, new = state[key], row(key)
            state[key] = new
            out.append(("u", old, new))
        elif live and x < 0.8:  # delete
            key = live[rng.randrange(len(live))]
            old = remove(key)
            deleted.append(key)
            out.append(("d", old, None))
        else:  # insert: half reuse a deleted key
            if deleted and rng.random() < 0.5:
                key = deleted.pop(rng.randrange(len(deleted)))
            else:
                key = _key_value(kkind, next_key)
                next_key += 1
            r = row(key)
            add(key, r)
            out.append(("c", None, r))
    return out


def generate(out: str | Path, tables: int = 100, changes: int = 20_000, *, base: int | None = None,
             seed: int = 53, force: bool = False) -> TablesDataset:
    """Generate (or load, when already on disk with the same parameters) the dataset."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out)
    base = changes // 4 if base is None else base
    if not force and (out / MANIFEST).exists():
        try:
            d = TablesDataset.load(out)
            if (d.tables, d.changes, d.base, d.seed) == (tables, changes, base, seed):
                return d
        except (TypeError, KeyError, ValueError):
            pass
    t_start = time.perf_counter()
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    for sub in ("routed", "per_table", "merge", "expected", "tmp"):
        (out / sub).mkdir(parents=True)
    rng = random.Random(seed)
    specs = {f"t{i:03d}": table_columns(rng) for i in range(tables)}
    names = list(specs)
    n_events = base + changes
    # the interleaving: a random order of every table's events (each table's own order kept);
    # an event's lsn is its position in the whole stream
    order = [i for i in range(tables) for _ in range(n_events)]
    rng.shuffle(order)
    lsns: list[list[int]] = [[] for _ in range(tables)]
    for pos, i in enumerate(order):
        lsns[i].append(pos)
    expected_rows: dict[str, int] = {}
    per_table_bytes = 0
    for i, name in enumerate(names):
        columns = specs[name]
        kinds = dict(columns)
        events = _table_events(i, name, columns, base, changes, seed)
        schema = json.dumps(connect_schema("db", name, columns), separators=(",", ":"))
        head = '{"schema":' + schema + ',"payload":'

        def img(r: dict[str, Any] | None, enc: Any, kinds: dict[str, str] = kinds) -> Any:
            return None if r is None else {c: enc(k, r[c]) for c, k in kinds.items()}

        state: dict[Any, dict[str, Any]] = {}
        merge_base: list[dict[str, Any]] = []
        merge_changes: list[dict[str, Any]] = []
        pt = Path(out, "per_table", name)
        pt.mkdir()
        with open(out / "tmp" / f"{name}.json", "w") as fw, open(pt / "events.json", "w") as fp:
            for (op, before, after), lsn in zip(events, lsns[i], strict=True):
                ts_ms = 1_750_000_000_000 + lsn
                source = {"db": "db", "schema": "public", "table": name, "lsn": lsn}
                payload = {"before": img(before, _connect), "after": img(after, _connect), "source": source,
                           "op": op, "ts_ms": ts_ms}
                fw.write(head + json.dumps(payload, separators=(",", ":")) + "}\n")
                fp.write(json.dumps({"before": img(before, _plain), "after": img(after, _plain),
                                     "source": source, "op": op, "ts_ms": ts_ms}, separators=(",", ":")) + "\n")
                r = after if after is not None else before
                assert r is not None
                if op == "r":
                    merge_base.append(after)  # type: ignore[arg-type]
                else:
                    merge_changes.append({"op": {"c": "I", "u": "U", "d": "D"}[op], "seq": lsn, **r})
                if op == "d":
                    del state[r["id"]]
                else:
                    state[r["id"]] = r
        per_table_bytes += (pt / "events.json").stat().st_size
        md = out / "merge" / name
        md.mkdir()
        pq.write_table(_arrow_columns(columns, merge_base), md / "base.parquet")
        ch = _arrow_columns(columns, merge_changes)
        ch = ch.add_column(0, "seq", pa.array([c["seq"] for c in merge_changes], pa.int64()))
        ch = ch.add_column(0, "op", pa.array([c["op"] for c in merge_changes], pa.string()))
        pq.write_table(ch, md / "changes.parquet")
        final = sorted(state.values(), key=lambda r: (str(r["id"]) if columns[0][1] == "string" else r["id"]))
        pq.write_table(_arrow_columns(columns, final), out / "expected" / f"{name}.parquet")
        expected_rows[name] = len(final)
    # the routed stream: every table's events in the interleaved order, in files whose mtimes follow it
    readers = [open(out / "tmp" / f"{n}.json") for n in names]  # noqa: SIM115
    routed_files = routed_bytes = 0
    try:
        for f0 in range(0, len(order), ROUTED_FILE_EVENTS):
            p = out / "routed" / f"events-{routed_files:05d}.json"
            with open(p, "w") as fo:
                for i in order[f0:f0 + ROUTED_FILE_EVENTS]:
                    fo.write(readers[i].readline())
            stamp = 1_700_000_000 + routed_files
            os.utime(p, (stamp, stamp))
            routed_files += 1
            routed_bytes += p.stat().st_size
    finally:
        for r in readers:
            r.close()
    shutil.rmtree(out / "tmp")
    d = TablesDataset(path=str(out), tables=tables, changes=changes, base=base, seed=seed, names=names,
                      ddl={n: spark_ddl(c) for n, c in specs.items()},
                      columns={n: [c for c, _ in cols] for n, cols in specs.items()},
                      expected_rows=expected_rows, events=len(order), routed_files=routed_files,
                      routed_bytes=routed_bytes, per_table_bytes=per_table_bytes,
                      generate_seconds=round(time.perf_counter() - t_start, 1))
    (out / MANIFEST).write_text(json.dumps(asdict(d), indent=1))
    return d


# ------------------------------------------------------------------------------------------ runners
def _connection(wh: Path) -> str:
    return f"CREATE CONNECTION IF NOT EXISTS cat TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');\n"


def _with(sink_options: str) -> str:
    return f" WITH ({sink_options})" if sink_options else ""


def routed_script(d: TablesDataset, path: Path, wh: Path, source_options: str = "", sink_options: str = "") -> Path:
    """One source of every table's events (no SCHEMA: they carry theirs), one routed upsert sink."""
    opts = f", {source_options}" if source_options else ""
    path.write_text(
        _connection(wh)
        + f"CREATE SOURCE IF NOT EXISTS cdc FROM FILES '{d.routed_dir}' (FORMAT = 'debezium-json'{opts});\n"
        + "CREATE SINK IF NOT EXISTS k FROM cdc INTO ICEBERG CATALOG cat (NAMESPACE = 'db', TABLE = '{table}')\n"
        + f"  KEY (id) MODE UPSERT{_with(sink_options)};\n")
    return path


def separate_script(d: TablesDataset, path: Path, wh: Path, source_options: str = "", sink_options: str = "") -> Path:
    """A source (declared SCHEMA) and an upsert sink per table, in one script."""
    opts = f", {source_options}" if source_options else ""
    parts = [_connection(wh)]
    for n in d.names:
        parts.append(f"CREATE SOURCE IF NOT EXISTS s_{n} FROM FILES '{d.per_table_dir(n)}' "
                     f"(FORMAT = 'debezium-json', SCHEMA = '{d.ddl[n]}'{opts});\n"
                     f"CREATE SINK IF NOT EXISTS k_{n} FROM s_{n} INTO ICEBERG CATALOG cat "
                     f"(NAMESPACE = 'db', TABLE = '{n}') KEY (id) MODE UPSERT{_with(sink_options)};\n")
    path.write_text("".join(parts))
    return path


def _icesql(name: str, d: TablesDataset, workdir: Path, make_script: Any, conf: dict[str, str] | None,
            timeout: float, source_options: str, sink_options: str) -> dict[str, Any]:
    """``icesql --home <fresh> run <script> --once``, the script from ``make_script(d, path,
    warehouse, source_options, sink_options)``."""
    from benchmarks import baselines as B

    wh = workdir / "warehouse"
    wh.mkdir(parents=True, exist_ok=True)
    script = make_script(d, workdir / f"{name.removeprefix('icesql_')}.sql", wh, source_options, sink_options)
    r = B.run_icesql_cli(name, workdir / "home", ["run", str(script), "--once", *B._conf_args(conf)], workdir,
                         timeout=timeout)
    r["seconds"] = r.get("wall_seconds")
    r["metadata"] = {n: B.newest_metadata(wh / "db" / n) for n in d.names}
    r["source_options"], r["sink_options"] = source_options, sink_options
    return r


def icesql_routed(d: TablesDataset, workdir: Path, conf: dict[str, str] | None = None,
                  source_options: str = "", timeout: float = 7200, sink_options: str = "") -> dict[str, Any]:
    """(a) ``icesql --home <fresh> run routed.sql --once``: one source, one routed sink."""
    r = _icesql("icesql_routed", d, workdir, routed_script, conf, timeout, source_options, sink_options)
    r["engine"] = "icesql run --once: one FILES debezium-json source without SCHEMA, one routed upsert sink"
    return r


def icesql_separate(d: TablesDataset, workdir: Path, conf: dict[str, str] | None = None,
                    source_options: str = "", timeout: float = 7200, sink_options: str = "") -> dict[str, Any]:
    """(b) ``icesql --home <fresh> run separate.sql --once``: a source and upsert sink per table."""
    r = _icesql("icesql_separate", d, workdir, separate_script, conf, timeout, source_options, sink_options)
    r["engine"] = f"icesql run --once: {d.tables} FILES debezium-json sources with SCHEMA, {d.tables} upsert sinks"
    return r


def spark_merge(d: TablesDataset, workdir: Path, conf: dict[str, str] | None = None,
                timeout: float = 7200) -> dict[str, Any]:
    """(c) one Spark 3.5 + Iceberg Java process: per table, create from its base, MERGE INTO its changes."""
    from benchmarks import baselines as B

    if not B.harness_available():
        return {"name": "spark35_merge_tables", "status": "n/a", "reason": "harness missing (iceberg-readers-setup)"}
    tables = [{"name": n, "base": d.merge_files(n)[0], "changes": d.merge_files(n)[1], "columns": d.columns[n]}
              for n in d.names]
    r = B.run_worker("spark35_merge_tables", B.HARNESS_PY, "spark_tables:merge_all",
                     {"tables": tables, "workdir": str(workdir), "conf": conf or {}}, workdir, timeout=timeout)
    r["seconds"] = r.get("wall_seconds")
    r["metadata"] = {n: B.newest_metadata(workdir / "warehouse" / "db" / n) for n in d.names}
    return r


def verify(d: TablesDataset, r: dict[str, Any], workdir: Path, timeout: float = 3600) -> dict[str, Any]:
    """Every table of a run against the replay: row count and checksum by Iceberg Java (one process)."""
    from benchmarks import baselines as B

    if r.get("status") != "ok":
        return r
    metas = r.get("metadata") or {}
    missing = [n for n in d.names if not metas.get(n)]
    tables = [{"name": n, "metadata": metas[n], "expected": d.expected(n), "columns": d.columns[n]}
              for n in d.names if metas.get(n)]
    v = B.run_worker(f"verify_{r.get('name')}", B.HARNESS_PY, "spark_tables:verify", {"tables": tables},
                     workdir / "verify", timeout=timeout)
    r["verify_wall_seconds"] = v.get("wall_seconds")
    if v.get("status") != "ok":
        r["status"] = "error"
        r["error"] = f"verification failed: {v.get('error')}"
        r["unverified_seconds"] = r.pop("seconds", None)
        return r
    per = v.get("tables") or {}
    bad = {n: t for n, t in per.items() if not t.get("match")}
    r["tables_verified"] = len(per) - len(bad)
    r["rows_in_tables"] = sum(t.get("rows") or 0 for t in per.values())
    r["expected_rows"] = sum(d.expected_rows.values())
    if missing or bad:
        r["status"] = "error"
        what = ([f"{len(missing)} tables missing ({', '.join(missing[:5])})"] if missing else []) + (
            [f"{len(bad)} tables differ, e.g. " + "; ".join(f"{n}: {t}" for n, t in list(bad.items())[:3])]
            if bad else [])
        r["error"] = "WRONG OUTPUT: " + "; ".join(what)
        r["unverified_seconds"] = r.pop("seconds", None)
        r["mismatches"] = dict(list(bad.items())[:20])
    else:
        r["verified"] = f"{len(per)} tables: counts and checksums equal the replay's"
    return r


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="generate the many-tables dataset (issue 53), cached")
    ap.add_argument("--tables", type=int, default=100)
    ap.add_argument("--table-changes", type=int, default=20_000)
    ap.add_argument("--out", default=None)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args(argv)
    out = a.out or f"/tmp/icesql-bench/data/tables-{a.tables}x{a.table_changes}"
    d = generate(out, a.tables, a.table_changes, force=a.force)
    print(json.dumps({k: v for k, v in asdict(d).items() if k not in ("ddl", "columns", "expected_rows", "names")},
                     indent=1))


if __name__ == "__main__":
    main()
