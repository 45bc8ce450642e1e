"""Deterministic benchmark datasets, generated with pyarrow compute kernels only (no numpy needed).

Every value is a pure function of ``(seed, id, version, column)`` through a splitmix64 hash, so a
dataset is identical whatever the number of files, the chunking or the machine, and the upsert
generator can recompute any row.

Datasets (``python benchmarks/datagen.py --help``):

* append dataset: ``N`` rows in several Parquet files, ten columns::

      id BIGINT, ts TIMESTAMP (UTC, us; time-ordered by id over 30 days, +-30 min jitter),
      category STRING (12 values), payload STRING (~47 bytes, 40-50), amount DOUBLE (1 % null),
      qty INT, event_date DATE (= date of ts), active BOOLEAN, price DECIMAL(12,2), user_id BIGINT

* append dataset as JSON lines (``generate_append_json``): the same rows as the Parquet append
  dataset, one JSON-lines file per Parquet file, one object a line: ``ts`` as an ISO-8601 UTC
  string (``2025-01-01T00:20:06.685885Z``), ``event_date`` as ``YYYY-MM-DD``, ``price`` as a JSON
  number, ``amount`` null where it is null (the encodings Spark's JSON reader takes with
  ``SPARK_DDL``, as the Debezium files use).

* upsert dataset: a base of ``keys`` rows (ids 0..keys-1) and ``batches`` change batches of
  ``batch_size`` distinct keys each: 70 % updates and 10 % deletes of live keys, 20 % inserts of
  new keys. Written twice, as Parquet with an ``op`` column (``I``/``U``/``D``, plus ``batch`` and
  ``pos``) and as Debezium JSON lines (``op`` c/u/d, ``before``, ``after``, ``source`` with batch
  and pos, ``ts_ms``; SPEC 1.3 ``FORMAT = 'debezium-json'``), and the expected final table
  (``expected.parquet``, sorted by id).

* streaming producer: small Parquet files dropped into a directory at a fixed rate, each
  arrival logged, for commit-latency measurements.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

GOLDEN = 0x9E3779B97F4A7C15
U64 = pa.uint64()
TS_START_US = 1_735_689_600_000_000  # 2025-01-01T00:00:00Z
SPAN_US = 30 * 86_400 * 1_000_000  # ids are spread over 30 days
JITTER_US = 3_600 * 1_000_000  # +- 30 minutes
CATEGORIES = [
    "books", "games", "garden", "grocery", "health", "home",
    "kids", "music", "office", "outdoor", "sports", "tools",
]
WORDS = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "amber", "basil", "cedar", "dune",
    "ember", "fjord",
]
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("category", pa.string()),
        ("payload", pa.string()),
        ("amount", pa.float64()),
        ("qty", pa.int32()),
        ("event_date", pa.date32()),
        ("active", pa.bool_()),
        ("price", pa.decimal128(12, 2)),
        ("user_id", pa.int64()),
    ]
)
SPARK_DDL = (
    "id BIGINT, ts TIMESTAMP, category STRING, payload STRING, amount DOUBLE, qty INT, "
    "event_date DATE, active BOOLEAN, price DECIMAL(12,2), user_id BIGINT"
)
# the same rows as an Avro record (a Schema Registry's subject: benchmarks kafka_avro and
# registry_avro_decode)
AVRO_SCHEMA = {
    "type": "record",
    "name": "Event",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "category", "type": "string"},
        {"name": "payload", "type": "string"},
        {"name": "amount", "type": ["null", "double"]},
        {"name": "qty", "type": "int"},
        {"name": "event_date", "type": {"type": "int", "logicalType": "date"}},
        {"name": "active", "type": "boolean"},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "user_id", "type": "long"},
    ],
}
COLUMNS = [f.name for f in SCHEMA]
CHANGE_SCHEMA = pa.schema([("op", pa.string()), ("batch", pa.int32()), ("pos", pa.int32())] + list(SCHEMA))
MANIFEST = "_manifest.json"  # "_" prefix: Spark's file sources skip it


# ---------------------------------------------------------------------------------------- hashing
def _u64(v: int) -> pa.Scalar:
    return pa.scalar(v & 0xFFFFFFFFFFFFFFFF, U64)


def mix64(x: pa.Array, salt: int) -> pa.Array:
    """splitmix64 finalizer of ``x + salt * golden`` (uint64, wrapping arithmetic)."""
    z = pc.add(pc.cast(x, U64), _u64(salt * GOLDEN + GOLDEN))
    z = pc.multiply(pc.bit_wise_xor(z, pc.shift_right(z, _u64(30))), _u64(0xBF58476D1CE4E5B9))
    z = pc.multiply(pc.bit_wise_xor(z, pc.shift_right(z, _u64(27))), _u64(0x94D049BB133111EB))
    return pc.bit_wise_xor(z, pc.shift_right(z, _u64(31)))


def _below(h: pa.Array, m: int) -> pa.Array:
    """Uniform integer in [0, m) from a uint64 hash (m < 2**32), as int64."""
    return pc.cast(pc.shift_right(pc.multiply(pc.shift_right(h, _u64(32)), _u64(m)), _u64(32)), pa.int64())


_ARANGE: dict[int, pa.Array] = {}


def arange(n: int, start: int = 0) -> pa.Array:
    base = _ARANGE.get(n)
    if base is None:
        base = pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n)), 1) if n else pa.array([], pa.int64())
        if len(_ARANGE) < 8:
            _ARANGE[n] = base
    return pc.add(base, start) if start else base


def _decimal_from_cents(cents: pa.Array, precision: int = 12, scale: int = 2) -> pa.Array:
    """decimal128 from non-negative int64 unscaled values, by laying out the 16-byte words."""
    n = len(cents)
    cents = cents.combine_chunks() if isinstance(cents, pa.ChunkedArray) else cents
    zeros = pc.multiply(cents, 0)
    i = arange(2 * n)
    idx = pc.add(pc.divide(i, 2), pc.multiply(pc.bit_wise_and(i, 1), n))  # [0, n, 1, n+1, ...]
    flat = pc.take(pa.concat_arrays([cents, zeros]), idx)
    return pa.Array.from_buffers(pa.decimal128(precision, scale), n, [None, flat.buffers()[1]])


# ---------------------------------------------------------------------------------------- rows
def gen_rows(ids: pa.Array, seed: int = 42, version: int = 0, total_rows: int | None = None) -> pa.Table:
    """The ten-column rows for ``ids`` (int64). ``version`` > 0 gives an updated image of a row."""
    ids = pc.cast(ids, pa.int64())
    n = len(ids)
    span_rows = max(total_rows or 10_000_000, 1)

    def h(col: int) -> pa.Array:
        return mix64(ids, seed * 1_000_003 + version * 7_919 + col)

    step = SPAN_US / span_rows
    base_ts = pc.cast(pc.multiply(pc.cast(ids, pa.float64()), step), pa.int64())
    jitter = pc.subtract(_below(h(1), JITTER_US), JITTER_US // 2)
    ts_us = pc.add(pc.add(base_ts, jitter), TS_START_US)
    ts = pc.cast(ts_us, pa.timestamp("us", tz="UTC"))
    category = pc.take(pa.array(CATEGORIES), _below(h(2), len(CATEGORIES)))
    word = pc.take(pa.array(WORDS), _below(h(3), len(WORDS)))
    payload = pc.utf8_slice_codeunits(
        pc.binary_join_element_wise(word, pc.cast(h(4), pa.string()), pc.cast(h(5), pa.string()), "-"), 0, 50
    )
    amount = pc.divide(pc.cast(_below(h(6), 1_000_000_000), pa.float64()), 100.0)
    amount = pc.if_else(pc.equal(_below(h(7), 100), 0), pa.scalar(None, pa.float64()), amount)
    qty = pc.cast(_below(h(8), 1000), pa.int32())
    event_date = pc.cast(ts, pa.date32())
    active = pc.equal(pc.bit_wise_and(h(9), _u64(1)), _u64(0))
    price = _decimal_from_cents(_below(h(10), 100_000_000))
    user_id = _below(h(11), 100_000)
    arrays = [ids, ts, category, payload, amount, qty, event_date, active, price, user_id]
    arrays = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays]
    assert n == len(arrays[-1])
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


# ---------------------------------------------------------------------------------------- append dataset
@dataclass
class Dataset:
    """A generated dataset on disk (``manifest.json`` in ``path``)."""

    path: str
    rows: int
    seed: int
    files: list[str]
    file_bytes: int  # on-disk Parquet size of the input
    arrow_bytes: int  # logical (Arrow in-memory) size: the numerator of every MB/s figure
    schema_ddl: str = SPARK_DDL
    kind: str = "append"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def mib(self) -> float:
        return self.arrow_bytes / 2**20

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def load(cls, path: str | Path) -> Dataset:
        return cls(**json.loads((Path(path) / MANIFEST).read_text()))


def _write_parquet(table: pa.Table, path: Path, row_group: int = 256 * 1024) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    pq.write_table(table, tmp, compression="snappy", row_group_size=row_group)
    os.replace(tmp, path)


def generate_append(out: str | Path, rows: int, *, seed: int = 42, files: int | None = None,
                    chunk: int = 500_000, force: bool = False) -> Dataset:
    """``rows`` rows as ``files`` Parquet files (default: one per million rows, at least 4)."""
    out = Path(out)
    if not force and (out / MANIFEST).exists():
        ds = Dataset.load(out)
        if ds.rows == rows and ds.seed == seed and all(Path(f).exists() for f in ds.files):
            return ds
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.parquet"):
        old.unlink()
    nfiles = files or max(4, -(-rows // 1_000_000))
    nfiles = max(1, min(nfiles, rows)) if rows else 1
    per = -(-rows // nfiles) if rows else 0
    paths: list[str] = []
    arrow_bytes = 0
    for fi in range(nfiles):
        lo, hi = fi * per, min(rows, (fi + 1) * per)
        p = out / f"part-{fi:05d}.parquet"
        with pq.ParquetWriter(p.with_name("." + p.name + ".tmp"), SCHEMA, compression="snappy") as w:
            for c in range(lo, hi, chunk):
                t = gen_rows(arange(min(chunk, hi - c), c), seed, total_rows=rows)
                arrow_bytes += t.nbytes
                w.write_table(t, row_group_size=256 * 1024)
        os.replace(p.with_name("." + p.name + ".tmp"), p)
        paths.append(str(p))
    ds = Dataset(
        path=str(out), rows=rows, seed=seed, files=paths,
        file_bytes=sum(Path(p).stat().st_size for p in paths), arrow_bytes=arrow_bytes,
    )
    (out / MANIFEST).write_text(json.dumps(ds.to_dict(), indent=1))
    return ds


def _json_select(relation: str) -> str:
    """The SELECT rendering the ten columns as JSON-lines encodings (DuckDB, session time zone UTC)."""
    cols = []
    for c in COLUMNS:
        if c == "ts":
            cols.append(f"strftime({c}, '%Y-%m-%dT%H:%M:%S.%fZ') AS {c}")
        elif c == "event_date":
            cols.append(f"strftime({c}, '%Y-%m-%d') AS {c}")
        else:
            cols.append(c)
    return f"SELECT {', '.join(cols)} FROM {relation}"


def generate_append_json(parquet: Dataset, out: str | Path, *, force: bool = False) -> Dataset:
    """The rows of ``parquet`` (an append dataset) as JSON lines: one ``part-NNNNN.json`` per
    Parquet file, rows in the same order (``kind = 'append-json'``; ``arrow_bytes`` is the Parquet
    dataset's, so MB/s figures of both inputs count the same logical bytes)."""
    import duckdb

    out = Path(out)
    if not force and (out / MANIFEST).exists():
        try:
            ds = Dataset.load(out)
            if (ds.rows, ds.seed, ds.extra.get("source")) == (parquet.rows, parquet.seed, parquet.path) and all(
                    Path(f).exists() for f in ds.files):
                return ds
        except (TypeError, KeyError, ValueError):
            pass
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.json"):
        old.unlink()
    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    paths: list[str] = []
    for src in parquet.files:
        p = out / (Path(src).stem + ".json")
        tmp = p.with_name("." + p.name + ".tmp")
        select = _json_select(f"read_parquet('{src}')")
        con.execute(f"COPY ({select}) TO '{tmp}' (FORMAT JSON)")
        os.replace(tmp, p)
        paths.append(str(p))
    con.close()
    ds = Dataset(
        path=str(out), rows=parquet.rows, seed=parquet.seed, files=paths,
        file_bytes=sum(Path(p).stat().st_size for p in paths), arrow_bytes=parquet.arrow_bytes,
        kind="append-json", extra={"source": parquet.path, "format": "json"},
    )
    (out / MANIFEST).write_text(json.dumps(ds.to_dict(), indent=1))
    return ds


# ---------------------------------------------------------------------------------------- upsert dataset
@dataclass
class UpsertDataset:
    path: str
    keys: int
    batches: int
    batch_size: int
    seed: int
    base: Dataset
    change_files: list[str]  # changes/batch-NNN.parquet: op/batch/pos columns + the row
    debezium_files: list[str]  # debezium/batch-NNN.json: JSON lines (empty if not written)
    expected: str  # expected final table, Parquet sorted by id
    expected_rows: int
    mix: dict[str, int]
    kind: str = "upsert"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return d

    @classmethod
    def load(cls, path: str | Path) -> UpsertDataset:
        d = json.loads((Path(path) / MANIFEST).read_text())
        d["base"] = Dataset(**d["base"])
        return cls(**d)


def _mix_counts(batch_size: int) -> dict[str, int]:
    upd = batch_size * 70 // 100
    dele = batch_size * 10 // 100
    return {"update": upd, "delete": dele, "insert": batch_size - upd - dele}


def generate_upsert(out: str | Path, keys: int = 1_000_000, batches: int = 10, batch_size: int = 100_000,
                    *, seed: int = 7, debezium: bool = True, force: bool = False) -> UpsertDataset:
    out = Path(out)
    if not force and (out / MANIFEST).exists():
        try:
            u = UpsertDataset.load(out)
            if (u.keys, u.batches, u.batch_size, u.seed) == (keys, batches, batch_size, seed) and (
                bool(u.debezium_files) or not debezium
            ):
                return u
        except (TypeError, KeyError, ValueError):
            pass
    for sub in ("changes", "debezium"):
        (out / sub).mkdir(parents=True, exist_ok=True)
        for old in (out / sub).glob("*"):
            old.unlink()
    base = generate_append(out / "base", keys, seed=seed, files=max(2, -(-keys // 500_000)), force=force)
    mix = _mix_counts(batch_size)
    state = pa.concat_tables([pq.read_table(f) for f in base.files]).combine_chunks()
    next_id = keys
    change_files: list[str] = []
    deb_files: list[str] = []
    for b in range(batches):
        live = state.column("id").combine_chunks()
        order = pc.sort_indices(mix64(live, seed * 31 + b + 1))
        picked = pc.take(live, order.slice(0, mix["update"] + mix["delete"]))
        upd_ids, del_ids = picked.slice(0, mix["update"]), picked.slice(mix["update"])
        ins_ids = arange(mix["insert"], next_id)
        next_id += mix["insert"]
        upd_rows = gen_rows(upd_ids, seed, version=b + 1, total_rows=keys)
        ins_rows = gen_rows(ins_ids, seed, version=0, total_rows=keys)
        del_pos = pc.index_in(del_ids, value_set=live)
        del_rows = state.take(del_pos)
        upd_before = state.take(pc.index_in(upd_ids, value_set=live))
        ops = pa.concat_arrays([
            pa.array(["U"] * mix["update"]), pa.array(["I"] * mix["insert"]), pa.array(["D"] * mix["delete"]),
        ])
        body = pa.concat_tables([upd_rows, ins_rows, del_rows]).combine_chunks()
        # a deterministic shuffle of the batch; pos is the position in the change stream
        perm = pc.sort_indices(mix64(body.column("id"), seed * 131 + b))
        body = body.take(perm)
        ops = pc.take(ops, perm)
        n = body.num_rows
        changes = pa.Table.from_arrays(
            [ops, pa.array([b] * n, pa.int32()), pc.cast(arange(n), pa.int32())] + body.columns,
            schema=CHANGE_SCHEMA,
        )
        cp = out / "changes" / f"batch-{b:03d}.parquet"
        _write_parquet(changes, cp)
        change_files.append(str(cp))
        if debezium:
            before = pa.concat_tables([upd_before, ins_rows.slice(0, 0), del_rows]).combine_chunks()
            dp = out / "debezium" / f"batch-{b:03d}.json"
            _write_debezium(changes, before, upd_ids, del_ids, dp, b)
            deb_files.append(str(dp))
        # apply: drop updated and deleted keys, add updated and inserted rows
        gone = pa.concat_arrays([upd_ids, del_ids])
        keep = pc.invert(pc.is_in(state.column("id"), value_set=gone))
        state = pa.concat_tables([state.filter(keep), upd_rows, ins_rows]).combine_chunks()
    state = state.sort_by("id")
    exp = out / "expected.parquet"
    _write_parquet(state, exp)
    u = UpsertDataset(
        path=str(out), keys=keys, batches=batches, batch_size=batch_size, seed=seed, base=base,
        change_files=change_files, debezium_files=deb_files, expected=str(exp),
        expected_rows=state.num_rows, mix=mix,
    )
    (out / MANIFEST).write_text(json.dumps(u.to_dict(), indent=1))
    return u


def _write_debezium(changes: pa.Table, before_src: pa.Table, upd_ids: pa.Array, del_ids: pa.Array,
                    path: Path, batch: int) -> None:
    """Debezium JSON (schemas disabled): one event a line, in ``pos`` order.

    Encodings a Spark JSON reader takes with the SPARK_DDL schema: ts as ISO-8601 UTC string,
    event_date as ``YYYY-MM-DD``, price as a JSON number.
    """
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    con.register("c", changes)
    con.register("b", before_src)
    cols = ", ".join(
        f"'{c}': " + (
            f"strftime({{t}}.{c}, '%Y-%m-%dT%H:%M:%S.%fZ')" if c == "ts" else
            f"strftime({{t}}.{c}, '%Y-%m-%d')" if c == "event_date" else f"{{t}}.{c}"
        )
        for c in COLUMNS
    )
    after = "{" + cols.format(t="c") + "}"
    before = "{" + cols.format(t="b") + "}"
    ts_ms = TS_START_US // 1000 + SPAN_US // 1000 + batch * 60_000
    sql = f"""
    COPY (
      SELECT
        CASE WHEN c.op IN ('U', 'D') THEN {before} END AS before,
        CASE WHEN c.op IN ('I', 'U') THEN {after} END AS after,
        {{'version': 'icesql-bench', 'connector': 'bench', 'name': 'bench', 'db': 'bench',
          'table': 'items', 'batch': c.batch, 'pos': c.pos}} AS source,
        CASE c.op WHEN 'I' THEN 'c' WHEN 'U' THEN 'u' ELSE 'd' END AS op,
        {ts_ms} + c.pos // 1000 AS ts_ms
      FROM c LEFT JOIN b ON b.id = c.id AND c.op IN ('U', 'D')
      ORDER BY c.pos
    ) TO '{path}.tmp' (FORMAT JSON)
    """
    con.execute(sql)
    os.replace(f"{path}.tmp", path)
    con.close()


def apply_changes_python(base: pa.Table, changes: list[pa.Table]) -> pa.Table:
    """Reference semantics (slow, row by row; for small smoke checks): last change per key wins."""
    state = {r["id"]: r for r in base.to_pylist()}
    for ch in changes:
        for r in sorted(ch.to_pylist(), key=lambda r: r["pos"]):
            op = r.pop("op")
            r.pop("batch")
            r.pop("pos")
            if op == "D":
                state.pop(r["id"], None)
            else:
                state[r["id"]] = r
    return pa.Table.from_pylist([state[k] for k in sorted(state)], schema=SCHEMA)


# ---------------------------------------------------------------------------------------- streaming
def produce_stream(directory: str | Path, *, rows_per_file: int = 2_000, interval_s: float = 0.2,
                   duration_s: float = 30.0, seed: int = 11, start_id: int = 0,
                   stop: Any = None) -> list[dict[str, Any]]:
    """Drop small Parquet files into ``directory`` (atomic rename) every ``interval_s``.

    Returns the arrival log: file, first id, rows, wall time (epoch seconds) of the rename.
    ``stop`` may be a threading.Event ending production early.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    log: list[dict[str, Any]] = []
    t0 = time.monotonic()
    i = 0
    nid = start_id
    while time.monotonic() - t0 < duration_s and not (stop is not None and stop.is_set()):
        t = gen_rows(arange(rows_per_file, nid), seed, total_rows=10_000_000)
        p = d / f"f-{i:06d}.parquet"
        tmp = d / f".f-{i:06d}.parquet.tmp"
        pq.write_table(t, tmp, compression="snappy")
        os.replace(tmp, p)
        log.append({"file": p.name, "first_id": nid, "rows": rows_per_file, "t": time.time()})
        nid += rows_per_file
        i += 1
        nxt = t0 + i * interval_s
        time.sleep(max(0.0, nxt - time.monotonic()))
    return log


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=["append", "append-json", "upsert"])
    ap.add_argument("out")
    ap.add_argument("--rows", type=int, default=10_000_000, help="append: rows (default 10M)")
    ap.add_argument("--files", type=int, default=None)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--no-debezium", action="store_true")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    if a.kind in ("append", "append-json"):
        ds: Any = generate_append(a.out, a.rows, seed=42 if a.seed is None else a.seed, files=a.files, force=a.force)
        if a.kind == "append-json":  # the Parquet dataset in OUT, its JSON-lines rendering in OUT-json
            ds = generate_append_json(ds, f"{str(a.out).rstrip('/')}-json", force=a.force)
    else:
        ds = generate_upsert(a.out, a.keys, a.batches, a.batch_size, seed=7 if a.seed is None else a.seed,
                             debezium=not a.no_debezium, force=a.force)
    print(json.dumps({"seconds": round(time.perf_counter() - t0, 2), **ds.to_dict()}, default=str)[:2000])


if __name__ == "__main__":
    main()
