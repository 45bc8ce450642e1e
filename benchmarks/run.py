"""icesql benchmark suite -- the one command.

    .venv/bin/python benchmarks/run.py [--rows N] [--quick]
        [--only append,e2e,upsert,index,streaming,commit,scaling,views,frontend,kafka,formats]
        [--out benchmarks/results/<stamp>.json] [--repeat N] [--update-readme]

Every measurement runs in its own child process (memory of its whole process tree sampled from
/proc); icesql and its peers run one after the other on the same data on the same machine, and
figures are reported as ratios against the peers first, absolute numbers after. icesql runs go
through the hooks in ``benchmarks/icesql_hooks.py``; until the engine lands they report "n/a", and
a ratio is only computed when both of its sides ran. The formats section (issue 38: Parquet, ORC and
Avro, icesql against Spark 3.5 + Iceberg Java) runs only when named in ``--only``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import baselines as B  # noqa: E402
from benchmarks import datagen  # noqa: E402

SECTIONS = ["append", "e2e", "upsert", "index", "streaming", "commit", "scaling", "views", "frontend", "kafka",
            "kafka_avro", "formats", "tables"]
# run without --only: every section but formats (12 more 10M-row writes, 36 with --repeat 3; its
# Parquet cells repeat the append section's icesql vs Spark+Iceberg Java) and kafka_avro (13M Avro
# records produced one AvroSerializer call at a time, half an hour): ask for them by name
# and tables (issue 53: 100 tables x 20k changes by three runners, each table verified: an hour)
DEFAULT_SECTIONS = [s for s in SECTIONS if s not in ("formats", "kafka_avro", "tables")]
FILE_FORMATS = ("parquet", "orc", "avro")
VERDICT = {True: "met", False: "MISSED", None: "n/a"}
RAW_PARQUET = ("spark4_parquet", "spark35_parquet", "pyarrow_parquet")
README = Path(__file__).resolve().parent / "README.md"
MARK_START, MARK_END = "<!-- results:start -->", "<!-- results:end -->"


# ------------------------------------------------------------------------------------------ config
class Config:
    def __init__(self, a: argparse.Namespace) -> None:
        q = a.quick
        # the append section runs each size (issue 11: 1M and 10M rows in one run); --rows N: one size
        self.append_rows: list[int] = ([a.rows] if a.rows else [int(x) for x in a.append_rows.split(",")]
                                       if a.append_rows else [200_000] if q else [1_000_000, 10_000_000])
        self.rows: int = max(self.append_rows)
        self.keys, self.batches, self.batch_size = (100_000, 3, 10_000) if q else (1_000_000, 10, 100_000)
        if a.upsert_keys:
            self.keys = a.upsert_keys
            self.batch_size = max(10, a.upsert_keys // 10)
        self.stream_seconds: float = a.stream_seconds or (20.0 if q else 60.0)
        self.stream_rows_per_file, self.stream_interval = 2_000, 0.2
        self.commits = 30 if q else 100  # the p50 of the last 10 shows how a commit grows with history
        self.scaling = [int(x) for x in a.scaling.split(",")] if a.scaling else (
            [100_000, 500_000] if q else [1_000_000, 5_000_000, 20_000_000])
        self.e2e_rows: int = a.e2e_rows or self.rows
        self.e2e_formats = [x for x in a.e2e_formats.split(",") if x]
        self.e2e_upsert_batches: int | None = a.e2e_upsert_batches or (2 if q else None)  # None: all
        self.index_keys = [int(x) for x in a.index_keys.split(",")] if a.index_keys else (
            [100_000] if q else [1_000_000, 10_000_000])
        self.views_rows: int = a.views_rows or (200_000 if q else 1_000_000)
        # kafka (issue 35): N records pre-produced; at N >= 10M icesql also runs at 1M (flat memory)
        self.kafka_records: int = a.kafka_records or (200_000 if q else 10_000_000)
        self.kafka_flat: list[int] = ([int(x) for x in a.kafka_flat_records.split(",") if x]
                                      if a.kafka_flat_records is not None
                                      else [1_000_000] if self.kafka_records >= 10_000_000 else [])
        # kafka_avro (issue 52): 2M records; icesql's Avro run again at 1M and 10M (flat memory)
        self.kafka_avro_records: int = a.kafka_avro_records or (20_000 if q else 2_000_000)
        self.kafka_avro_flat: list[int] = ([int(x) for x in a.kafka_avro_flat_records.split(",") if x]
                                           if a.kafka_avro_flat_records is not None
                                           else [10_000, 50_000] if q else [1_000_000, 10_000_000])
        self.kafka_avro_broker: str = a.kafka_avro_broker
        self.kafka_broker: str = a.kafka_broker
        self.upsert_kafka_broker: str = a.upsert_kafka_broker
        # tables (issue 53): N tables x M changes each
        self.tables: int = a.tables or (10 if q else 100)
        self.table_changes: int = a.table_changes or (2_000 if q else 20_000)
        self.tables_source_options: str = a.tables_source_options
        self.tables_sink_options: str = a.tables_sink_options
        self.upsert_sink_options: str = a.upsert_sink_options
        lat_s = a.kafka_latency_seconds if a.kafka_latency_seconds is not None else (20.0 if q else 60.0)
        self.kafka_latency: tuple[int, float] | None = (a.kafka_latency_rate, lat_s) if lat_s > 0 else None
        known = {"unpartitioned": False, "day_ts": True}
        self.layouts: tuple[bool, ...] = tuple(known[x] for x in a.layouts.split(",") if x)
        self.codec: str = a.codec
        self.write_formats: list[str] = [x for x in a.write_formats.split(",") if x]
        self.repeat: int = a.repeat
        self.keep: bool = a.keep
        self.data = Path(a.data_dir)
        self.work = Path(a.work_dir)
        self.skip = set(filter(None, (a.skip or "").split(",")))
        self.spark_conf: dict[str, str] = dict(kv.split("=", 1) for kv in a.conf)

    def to_dict(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else sorted(v) if isinstance(v, set) else v)
                for k, v in vars(self).items()}


def _best_of(fn: Callable[[Path], dict[str, Any]], cfg: Config, workdir: Path) -> dict[str, Any]:
    """Run ``fn`` ``cfg.repeat`` times in fresh work dirs; keep the fastest (best of N: on a shared
    machine the noise only ever adds time). Every run's time is kept in ``repeat_seconds``."""
    runs: list[dict[str, Any]] = []
    for i in range(cfg.repeat):
        wd = workdir if cfg.repeat == 1 else workdir.with_name(f"{workdir.name}-r{i}")
        shutil.rmtree(wd, ignore_errors=True)
        r = fn(wd)
        runs.append(r)
        if r.get("status") != "ok":
            return r
    runs.sort(key=lambda r: r.get("seconds") or 0)
    pick = runs[0]
    if cfg.repeat > 1:
        pick["repeat_seconds"] = [r.get("seconds") for r in runs]
    return pick


def _clean(cfg: Config, wd: Path) -> None:
    """Remove a run's work dir (and its ``-rN`` siblings from --repeat) unless --keep."""
    if not cfg.keep:
        shutil.rmtree(wd, ignore_errors=True)
        for sib in wd.parent.glob(wd.name + "-r*"):
            shutil.rmtree(sib, ignore_errors=True)


def _say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _brief(r: dict[str, Any]) -> str:
    if r.get("status") != "ok":
        return f"{r.get('status')}: {r.get('reason') or r.get('error') or ''}"[:160]
    bits = [f"{r['seconds']}s" if r.get("seconds") is not None else ""]
    if r.get("rows_per_s"):
        bits.append(f"{r['rows_per_s']:,} rows/s")
    if r.get("peak_rss_mb"):
        bits.append(f"peak {r['peak_rss_mb']} MB")
    return ", ".join(b for b in bits if b)


# ------------------------------------------------------------------------------------------ sections
def section_append(cfg: Config, rows: int | None = None, layouts: tuple[bool, ...] | None = None,
                   runners: tuple[str, ...] | None = None) -> dict[str, Any]:
    rows = rows or cfg.rows
    layouts = cfg.layouts if layouts is None else layouts
    _say(f"append: generating {rows:,} rows")
    t0 = time.perf_counter()
    ds = datagen.generate_append(cfg.data / f"append-{rows}", rows)
    gen_s = time.perf_counter() - t0
    c = cfg.codec
    all_runners: dict[str, Callable[[Path, bool], dict[str, Any]]] = {
        "icesql": lambda wd, p: B.icesql_append(ds, wd, p, c, cfg.spark_conf),
        "icesql_spark_path": lambda wd, p: B.icesql_append(ds, wd, p, c, cfg.spark_conf, arrow=False),
        "spark35_iceberg": lambda wd, p: B.spark_iceberg_append(ds, wd, p, c, cfg.spark_conf),
        "spark4_parquet": lambda wd, p: B.spark_parquet_append(ds, wd, p, c, "4", cfg.spark_conf),
        "spark35_parquet": lambda wd, p: B.spark_parquet_append(ds, wd, p, c, "35", cfg.spark_conf),
        "pyarrow_parquet": lambda wd, p: B.pyarrow_append(ds, wd, p, c),
        "pyiceberg_append": lambda wd, p: B.pyiceberg_append(ds, wd, p, c),
    }
    out: dict[str, Any] = {"dataset": {"rows": ds.rows, "input_files": len(ds.files), "input_mb": round(ds.file_bytes / 2**20, 1),
                                       "arrow_mb": round(ds.mib, 1), "path": ds.path, "generate_seconds": round(gen_s, 1)}}
    for part in layouts:
        layout = "partitioned_day_ts" if part else "unpartitioned"
        res: dict[str, Any] = {}
        for name, fn in all_runners.items():
            if name in cfg.skip or (runners and name not in runners):
                continue
            wd = cfg.work / f"append-{rows}-{layout}-{name}"
            r = _best_of(lambda w, fn=fn, part=part: fn(w, part), cfg, wd)
            r["name"] = name
            res[name] = r
            _say(f"append {rows:,} {layout} {name}: {_brief(r)}")
            _clean(cfg, wd)
        out[layout] = res
    return out


READERS = (("duckdb", B.read_duckdb), ("datafusion", B.read_datafusion), ("java", B.read_java))


def _reads(cfg: Config, metadata: str, expected: str, wd: Path, label: str, out: dict[str, Any]) -> None:
    """Full reads of one table by DuckDB, DataFusion and the Java reader (each its own process)."""
    for rname, rfn in READERS:
        if f"{rname}_read" in cfg.skip:
            continue
        rr = rfn(metadata, expected, wd / f"read-{rname}-{label}", label)
        rr["name"] = f"{rname}_read_{label}"
        _say(f"upsert read {label} with {rname}: {_brief(rr)} matches_expected={rr.get('matches_expected')}")
        out[f"{rname}_read_{label}"] = rr


def section_upsert(cfg: Config) -> dict[str, Any]:
    """MODE UPSERT vs MERGE INTO: the timed phase (one process each, warm), the same batches as fresh
    processes (``*_e2e``), and full reads of icesql's table against the same rows compacted (a fresh
    table holding the expected rows, ``compacted_reference``; the measured table is never compacted)
    and of the MERGE table (context)."""
    _say(f"upsert: generating {cfg.keys:,} keys + {cfg.batches} x {cfg.batch_size:,} changes")
    t0 = time.perf_counter()
    u = datagen.generate_upsert(cfg.data / f"upsert-{cfg.keys}-{cfg.batches}x{cfg.batch_size}", cfg.keys,
                                cfg.batches, cfg.batch_size)
    out: dict[str, Any] = {"dataset": {"keys": u.keys, "batches": u.batches, "batch_size": u.batch_size,
                                       "mix": u.mix, "expected_rows": u.expected_rows, "path": u.path,
                                       "generate_seconds": round(time.perf_counter() - t0, 1),
                                       "kafka_broker": _broker_name(cfg.upsert_kafka_broker)}}
    # --upsert-sink-options: the WITH options of every icesql sink of the section
    upsert = functools.partial(B.icesql_upsert, sink_options=cfg.upsert_sink_options)
    writers = [("icesql", upsert), ("icesql_running", functools.partial(upsert, running=True)),
               # context: the same sinks given a SparkSession (Spark's streaming query, Spark's jobs)
               ("icesql_on_spark", functools.partial(upsert, on_spark=True)),
               ("icesql_running_on_spark", functools.partial(upsert, running=True, on_spark=True)),
               # context: the running sink with a 0.25 s trigger (ICESQL_TRIGGER_INTERVAL): its batches
               # start at most once an interval, so at the default 1 s a batch shorter than that is timed
               # at about 1 s (the file arrives just after the last batch's commit)
               ("icesql_running_trigger_250ms", functools.partial(upsert, running=True, trigger=0.25)),
               ("spark35_merge", B.spark_iceberg_merge),
               # issue 55: the same upserts into an Iceberg v3 table (deletion vectors)
               ("icesql_v3", functools.partial(upsert, format_version=3))]
    for name, fn in writers:
        _upsert_writer(cfg, u, out, name, lambda wd, fn=fn: fn(u, wd, cfg.spark_conf))
    e2e = functools.partial(B.icesql_e2e_upsert, sink_options=cfg.upsert_sink_options)
    for name, fn in (("icesql_e2e", e2e), ("spark35_merge_e2e", B.spark_iceberg_e2e_merge)):
        if "e2e" not in cfg.skip:
            _upsert_writer(cfg, u, out, name, lambda wd, fn=fn: fn(u, wd, cfg.spark_conf, cfg.e2e_upsert_batches))
    _kafka_upsert_writers(cfg, u, out)
    return out


def _kafka_upsert_writers(cfg: Config, u: Any, out: dict[str, Any]) -> None:
    """The same changes from a Debezium topic (issue 39's Kafka upserts), after the others, each
    writer with a broker of its own that runs only while it does (``--upsert-kafka-broker``; an
    idle noida-db holding a topic takes CPU from whatever runs beside it); then, for context, what that broker serves one
    plain consumer of the same records."""
    modes = {"icesql_kafka": {}, "icesql_kafka_running": {"running": True}, "icesql_kafka_e2e": None}
    for name, kw in modes.items():
        if name in cfg.skip or (kw is None and "e2e" in cfg.skip):
            continue

        def run(wd: Path, name: str = name, kw: dict[str, Any] | None = kw) -> dict[str, Any]:
            # a broker per run (with --repeat too): a second run on the same topic would read the first's records
            with _upsert_broker(cfg, name) as broker:
                if broker is None:
                    return {"name": name, "status": "n/a", "reason": f"{cfg.upsert_kafka_broker} missing (pip install -e '.[test]')"}
                bs = str(broker.bootstrap)
                if kw is None:
                    r = B.icesql_e2e_upsert(u, wd, cfg.spark_conf, cfg.e2e_upsert_batches, kafka=bs,
                                            sink_options=cfg.upsert_sink_options)
                else:
                    # the broker's CPU during the timed batches, reported beside them (it shares the cores)
                    r = B.icesql_upsert(u, wd, cfg.spark_conf, kafka=bs, broker_pid=broker.pid,
                                        sink_options=cfg.upsert_sink_options, **kw)
                if name == "icesql_kafka" and r.get("status") == "ok" and "kafka_raw_consume" not in out:
                    raw = B.run_worker("kafka_raw_consume", B.PROJECT_PY, "benchmarks.kafka:raw_consume",
                                       {"bootstrap": bs, "topic": "changes", "records": u.batches * u.batch_size},
                                       cfg.work / "upsert-kafka-raw")
                    out["kafka_raw_consume"] = {**raw, "name": "kafka_raw_consume"}
                    _say(f"upsert kafka_raw_consume (one consumer, the whole topic): {_brief(raw)}")
                return r

        _upsert_writer(cfg, u, out, name, run)


def _broker_name(kind: str) -> str:
    from benchmarks.kafka import BROKERS

    return BROKERS.get(kind, kind)


@contextlib.contextmanager
def _upsert_broker(cfg: Config, name: str) -> Iterator[Any]:
    """A fresh broker on loopback for one Kafka upsert writer (``tests.support.kafka.Broker``, of
    ``--upsert-kafka-broker``'s kind; None: missing)."""
    from tests.support import kafka as K

    if K.missing_reason(cfg.upsert_kafka_broker):
        yield None
        return
    bdir = cfg.work / f"upsert-broker-{name}"
    shutil.rmtree(bdir, ignore_errors=True)
    broker = K.Broker(cfg.upsert_kafka_broker, bdir).start()
    try:
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(bdir, ignore_errors=True)


def _upsert_writer(cfg: Config, u: Any, out: dict[str, Any], name: str, fn: Callable[[Path], dict[str, Any]]) -> None:
    """One upsert writer (skipped when named in --skip) in a fresh work directory, its table then
    read back by every reader (``_reads``: rows checked against the expected state)."""
    if name in cfg.skip:
        return
    wd = cfg.work / f"upsert-{name}"
    shutil.rmtree(wd, ignore_errors=True)
    # --repeat N: the fastest of N runs (each in a fresh work dir; every time kept), as append does
    r = _best_of(fn, cfg, wd) if cfg.repeat > 1 else fn(wd)
    r["name"] = name
    _say(f"upsert {name}{' (fresh process per batch)' if name.endswith('_e2e') else ''}: {_brief(r)}")
    out[name] = r
    if r.get("status") == "ok" and r.get("metadata") and not name.endswith("_e2e"):
        if name == "icesql":
            _reads(cfg, r["metadata"], u.expected, wd, "icesql", out)
            if "compacted_reference" not in cfg.skip:
                ref = B.reference_table(r["metadata"], u.expected, wd / "reference", cfg.codec)
                ref["name"] = "compacted_reference"
                out["compacted_reference"] = ref
                _say(f"upsert compacted reference: {ref.get('status')} {ref.get('files')} file(s) "
                     f"{ref.get('rows_in_table')} rows {ref.get('error') or ''}")
                if ref.get("status") == "ok":
                    _reads(cfg, ref["metadata"], u.expected, wd, "compacted", out)
        elif name in ("icesql_running", "icesql_v3") or "merge_read" not in cfg.skip:
            _reads(cfg, r["metadata"], u.expected, wd, name, out)
    _clean(cfg, wd)


def section_e2e(cfg: Config) -> dict[str, Any]:
    """Fresh processes as a user runs them: ``icesql --home <fresh> run append.sql --once`` against a
    fresh Spark 3.5 + Iceberg Java process on the same files, Parquet and JSON lines, both layouts;
    ``seconds`` = the whole process's wall time."""
    rows = cfg.e2e_rows
    _say(f"e2e: generating {rows:,} rows (Parquet, then JSON lines)")
    ds = datagen.generate_append(cfg.data / f"append-{rows}", rows)
    inputs = {"parquet": ds}
    if B.NO_SCHEMA in cfg.e2e_formats:
        inputs[B.NO_SCHEMA] = ds  # the same files, read by a source without a SCHEMA
    if "json" in cfg.e2e_formats:
        inputs["json"] = datagen.generate_append_json(ds, cfg.data / f"append-{rows}-json")
    out: dict[str, Any] = {"dataset": {fmt: {"rows": d.rows, "input_files": len(d.files),
                                             "input_mb": round(d.file_bytes / 2**20, 1), "path": d.path}
                                       for fmt, d in inputs.items()}}
    c = cfg.codec
    runners: dict[str, Callable[..., dict[str, Any]]] = {
        "icesql_cli": lambda d, fmt, wd, p: B.icesql_e2e_append(d, fmt, wd, p, c, cfg.spark_conf),
        # the same command on Spark's streaming query (what a run --once was before it ran without Spark)
        "icesql_cli_on_spark": lambda d, fmt, wd, p: B.icesql_e2e_append(d, fmt, wd, p, c, cfg.spark_conf,
                                                                         env={"ICESQL_LOCAL_RUN": "0"}),
        "spark35_iceberg_submit": lambda d, fmt, wd, p: B.spark_iceberg_e2e_append(d, fmt, wd, p, c, cfg.spark_conf),
    }
    for fmt in cfg.e2e_formats:
        d = inputs.get(fmt)
        if d is None:
            continue
        out[fmt] = {}
        for part in cfg.layouts:
            layout = "partitioned_day_ts" if part else "unpartitioned"
            res: dict[str, Any] = {}
            for name, fn in runners.items():
                if name in cfg.skip:
                    continue
                wd = cfg.work / f"e2e-{rows}-{fmt}-{layout}-{name}"
                r = _best_of(lambda w, fn=fn, part=part, d=d, fmt=fmt: fn(d, fmt, w, part), cfg, wd)
                r["name"] = name
                res[name] = r
                _say(f"e2e {fmt} {layout} {name}: {_brief(r)} {r.get('warning') or ''}")
                _clean(cfg, wd)
            out[fmt][layout] = res
    return out


def section_formats(cfg: Config, rows: int | None = None) -> dict[str, Any]:
    """Output formats (issue 38): the append section's dataset (``--rows``, default its largest,
    10M) written by icesql (``FORMAT = '<fmt>'``) and by Spark 3.5 + Iceberg Java
    (``write.format.default``) as Parquet, ORC and Avro, each with ``write.<fmt>.compression-codec`` =
    ``--codec``, both layouts, one run after the other, best of ``--repeat``. Every cell's table is
    checked (``baselines.check_format``: manifests, extensions and first bytes of the data files
    say ``fmt``, the manifests hold every row); a cell that wrote anything else is an error and
    reports no rate."""
    rows = rows or cfg.rows
    _say(f"formats: generating {rows:,} rows")
    t0 = time.perf_counter()
    ds = datagen.generate_append(cfg.data / f"append-{rows}", rows)
    c = cfg.codec
    runners: dict[str, Callable[[Path, bool, str], dict[str, Any]]] = {
        # the default of a scheduled `run --once` of a FILES append: in process, without Spark
        "icesql": lambda wd, p, f: B.icesql_append(ds, wd, p, c, cfg.spark_conf, fmt=f, local=True),
        "spark35_iceberg": lambda wd, p, f: B.spark_iceberg_append(ds, wd, p, c, cfg.spark_conf, fmt=f),
        # context: icesql handed a SparkSession (the Arrow path in Spark's tasks)
        "icesql_on_spark": lambda wd, p, f: B.icesql_append(ds, wd, p, c, cfg.spark_conf, fmt=f),
    }
    out: dict[str, Any] = {"dataset": {"rows": ds.rows, "input_files": len(ds.files),
                                       "input_mb": round(ds.file_bytes / 2**20, 1), "arrow_mb": round(ds.mib, 1),
                                       "path": ds.path, "generate_seconds": round(time.perf_counter() - t0, 1)},
                           "codec": c, "formats": list(cfg.write_formats)}
    for part in cfg.layouts:
        layout = "partitioned_day_ts" if part else "unpartitioned"
        out[layout] = {}
        for fmt in cfg.write_formats:
            res: dict[str, Any] = {}
            for name, fn in runners.items():
                if name in cfg.skip:
                    continue
                wd = cfg.work / f"formats-{rows}-{layout}-{fmt}-{name}"
                r = _best_of(lambda w, fn=fn, part=part, fmt=fmt: B.check_format(fn(w, part, fmt), fmt, rows),
                             cfg, wd)
                r["name"] = name
                res[name] = r
                _say(f"formats {rows:,} {layout} {fmt} {name}: {_brief(r)}"
                     + (f", {r.get('files')} files, {round((r.get('bytes') or 0) / 2**20, 1)} MB, "
                        f"format checked: {r.get('format_verified')}" if r.get("status") == "ok" else ""))
                _clean(cfg, wd)
            out[layout][fmt] = res
            row = _formats_ratio_rows(layout, fmt, res)
            _say(f"formats {layout} {fmt}: " + "; ".join(
                f"{what} {x['value']}x (goal {x['goal']}: {VERDICT[x['met']]})"
                for what, x in zip(("speed", "memory"), row, strict=True)))
    return out


def section_index(cfg: Config) -> dict[str, Any]:
    """Key index rebuild (the upsert's index of KEY -> file and position) at each of ``--index-keys``."""
    out: dict[str, Any] = {}
    if not B.index_available():  # no datasets generated for nothing
        for n in cfg.index_keys:
            out[str(n)] = {"name": f"icesql_index_{n}", "status": "n/a", "reason": B.INDEX_NA}
        _say(f"index build: {B.INDEX_NA}")
        return out
    for n in cfg.index_keys:
        ds = datagen.generate_append(cfg.data / f"append-{n}", n)
        wd = cfg.work / f"index-{n}"
        shutil.rmtree(wd, ignore_errors=True)
        r = B.icesql_index_build(ds, wd, cfg.spark_conf)
        r["name"] = f"icesql_index_{n}"
        out[str(n)] = r
        _say(f"index build {n:,} keys: {_brief(r)}")
        _clean(cfg, wd)
    return out


def section_views(cfg: Config) -> dict[str, Any]:
    """The Spark-path writer experiment (views and Spark tables): today's mapInArrow writer vs Spark's
    own Parquet writer with Iceberg field ids + icesql's statistics from the footers, same commit."""
    rows = cfg.views_rows
    ds = datagen.generate_append(cfg.data / f"append-{rows}", rows)
    out: dict[str, Any] = {"dataset": {"rows": ds.rows, "input_files": len(ds.files), "path": ds.path}}
    for part in cfg.layouts:
        layout = "partitioned_day_ts" if part else "unpartitioned"
        res: dict[str, Any] = {}
        for method in ("mapinarrow", "spark_writer"):
            if method in cfg.skip:
                continue
            wd = cfg.work / f"views-{rows}-{layout}-{method}"
            r = _best_of(lambda w, m=method, part=part: B.views_write(ds, w, m, part, cfg.codec, cfg.spark_conf),
                         cfg, wd)
            r["name"] = method
            res[method] = r
            _say(f"views {layout} {method}: {_brief(r)} ids_ok={r.get('ids_ok')} pruned_ok={r.get('pruned_scan_ok')}")
            _clean(cfg, wd)
        out[layout] = res
    return out


def section_streaming(cfg: Config) -> dict[str, Any]:
    out: dict[str, Any] = {"producer": {"rows_per_file": cfg.stream_rows_per_file, "interval_s": cfg.stream_interval,
                                        "seconds": cfg.stream_seconds}}
    runs: list[tuple[str, Callable[[Path], dict[str, Any]]]] = [
        ("icesql_period_1s", lambda wd: B.icesql_streaming(wd, cfg.stream_seconds, cfg.stream_rows_per_file,
                                                           cfg.stream_interval, None, cfg.spark_conf)),
        ("icesql_period_1s_min_size_8MiB", lambda wd: B.icesql_streaming(
            wd, cfg.stream_seconds, cfg.stream_rows_per_file, cfg.stream_interval, "8MiB", cfg.spark_conf)),
        ("spark35_iceberg_trigger_1s", lambda wd: B.spark_iceberg_streaming(
            wd, cfg.stream_seconds, cfg.stream_rows_per_file, cfg.stream_interval, "1 second", cfg.spark_conf)),
    ]
    for name, fn in runs:
        if name in cfg.skip or name.split("_")[0] in cfg.skip:
            continue
        wd = cfg.work / f"stream-{name}"
        shutil.rmtree(wd, ignore_errors=True)
        r = fn(wd)
        r["name"] = name
        _say(f"streaming {name}: {r.get('status')} p50={r.get('latency_p50_s')} p99={r.get('latency_p99_s')} "
             f"snapshots/min={r.get('snapshots_per_min')} {r.get('reason') or r.get('error') or ''}")
        out[name] = r
        _clean(cfg, wd)
    return out


def section_commit(cfg: Config) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, fn in (("icesql_local", B.icesql_commit), ("pyiceberg_local", B.pyiceberg_commit)):
        wd = cfg.work / f"commit-{name}"
        shutil.rmtree(wd, ignore_errors=True)
        out[name] = {"name": name, **fn(wd, "local", cfg.commits)}
        _say(f"commit {name}: {out[name].get('status')} p50={out[name].get('p50_ms')} ms")
        _clean(cfg, wd)
    try:
        from tests.support.weed import WeedServer, WeedUnavailable
    except ImportError as e:
        out["rest"] = {"status": "n/a", "reason": f"tests.support.weed: {e}"}
        return out
    try:
        server = WeedServer.start()
    except WeedUnavailable as e:
        out["rest"] = {"status": "n/a", "reason": str(e)[:300]}
        return out
    try:
        rest = {"uri": server.iceberg_uri, "warehouse": server.table_bucket, "key": server.access_key,
                "s3_endpoint": server.s3_endpoint}
        for name, fn in (("icesql_rest", B.icesql_commit), ("pyiceberg_rest", B.pyiceberg_commit)):
            wd = cfg.work / f"commit-{name}"
            shutil.rmtree(wd, ignore_errors=True)
            out[name] = {"name": name, **fn(wd, "rest", cfg.commits, rest, server.secret_key)}
            _say(f"commit {name}: {out[name].get('status')} p50={out[name].get('p50_ms')} ms "
                 f"{out[name].get('error') or ''}")
            _clean(cfg, wd)
    finally:
        server.stop()
    return out


def section_scaling(cfg: Config) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in cfg.scaling:
        r = section_append(cfg, n, (False,), ("icesql", "spark35_iceberg", "pyarrow_parquet"))
        out[str(n)] = r["unpartitioned"]
    return out


def section_frontend(cfg: Config) -> dict[str, Any]:
    """The front-end cases of ``benchmarks/frontend.py`` (one implementation; 5 runs each here)."""
    from benchmarks import frontend

    res: dict[str, Any] = {}
    for r in frontend.measure(runs=5, echo=False):
        r.pop("samples", None)
        res[r["name"]] = r
        _say(f"frontend {r['name']}: {r.get('status')} p50={r.get('p50_ms')} ms {r.get('reason', '')[:100]}")
    res["parse_throughput"] = {"status": "n/a", "reason": "see benchmarks/parse.py and benchmarks/RESULTS_parse.md"}
    return res


def section_kafka(cfg: Config) -> dict[str, Any]:
    """Kafka into Iceberg (issue 35): N JSON records pre-produced to noida-db, read by (a) one raw
    confluent-kafka consumer, (b) confluent-kafka + pyarrow.json + Parquet in one process and
    ``icesql run --once`` (fresh processes, one after the other); icesql again at 1M when N >= 10M
    (flat memory), and the produce-to-snapshot latency at 10,000 records/s (``benchmarks/kafka.py``)."""
    from benchmarks import kafka

    _say(f"kafka: {cfg.kafka_records:,} records, flat-memory sizes {cfg.kafka_flat}, latency {cfg.kafka_latency}")
    return kafka.measure(cfg.kafka_records, cfg.work / "kafka", cfg.spark_conf, flat_sizes=tuple(cfg.kafka_flat),
                         latency=cfg.kafka_latency, skip=frozenset(cfg.skip), say=_say, keep=cfg.keep,
                         broker_kind=cfg.kafka_broker)


def section_kafka_avro(cfg: Config) -> dict[str, Any]:
    """Kafka Avro from a Schema Registry (issue 52): N append-dataset records framed by confluent's
    AvroSerializer (the stand-in registry), read by ``icesql run --once`` (Avro, and the same records
    as JSON) and by one process of confluent-kafka + AvroDeserializer + pyarrow Parquet; icesql's
    Avro run again at the flat-memory sizes (``benchmarks/kafka_avro.py``)."""
    from benchmarks import kafka_avro

    _say(f"kafka_avro: {cfg.kafka_avro_records:,} records, flat-memory sizes {cfg.kafka_avro_flat}")
    return kafka_avro.measure(cfg.kafka_avro_records, cfg.work / "kafka_avro", cfg.spark_conf,
                              flat_sizes=tuple(cfg.kafka_avro_flat), skip=frozenset(cfg.skip), say=_say,
                              keep=cfg.keep, broker_kind=cfg.kafka_avro_broker)


def section_tables(cfg: Config) -> dict[str, Any]:
    """One sink, many tables (issue 53): N tables' Debezium changes (``benchmarks/tables.py``) by
    (a) ``icesql run --once`` of one routed upsert sink over one source of every table's events,
    (b) ``icesql run --once`` of N sources and N upsert sinks in one script, (c) one Spark 3.5 +
    Iceberg Java process creating each table from its base and MERGE INTO its changes; fresh
    processes one after the other, then every table of each checked against the replay."""
    from benchmarks import tables as T

    n, m = cfg.tables, cfg.table_changes
    _say(f"tables: generating {n} tables x {m:,} changes (cached)")
    d = T.generate(cfg.data / f"tables-{n}x{m}", n, m)
    out: dict[str, Any] = {"dataset": {
        "tables": d.tables, "changes_per_table": d.changes, "base_keys_per_table": d.base, "events": d.events,
        "routed_files": d.routed_files, "routed_mb": round(d.routed_bytes / 2**20, 1),
        "per_table_mb": round(d.per_table_bytes / 2**20, 1), "expected_rows": sum(d.expected_rows.values()),
        "columns_min_max": [min(len(c) for c in d.columns.values()), max(len(c) for c in d.columns.values())],
        "path": d.path, "generate_seconds": d.generate_seconds, "source_options": cfg.tables_source_options,
        "sink_options": cfg.tables_sink_options}}
    so, sk = cfg.tables_source_options, cfg.tables_sink_options
    runners = (("icesql_routed", lambda wd: T.icesql_routed(d, wd, cfg.spark_conf, so, sink_options=sk)),
               ("icesql_separate", lambda wd: T.icesql_separate(d, wd, cfg.spark_conf, so, sink_options=sk)),
               ("spark35_merge_tables", lambda wd: T.spark_merge(d, wd, cfg.spark_conf)))
    for name, fn in runners:
        if name in cfg.skip:
            continue
        wd = cfg.work / f"tables-{name}"
        shutil.rmtree(wd, ignore_errors=True)
        load_before = round(os.getloadavg()[0], 1)
        r = fn(wd)
        r.update({"name": name, "load_before": load_before, "load_after": round(os.getloadavg()[0], 1)})
        _say(f"tables {name}: {_brief(r)}")
        if "verify" not in cfg.skip:
            r = T.verify(d, r, wd)
            _say(f"tables {name} verified: {r.get('verified') or r.get('error')}")
        r.pop("metadata", None)
        out[name] = r
        _clean(cfg, wd)
    return out


SECTION_FUNCS: dict[str, Callable[[Config], dict[str, Any]]] = {
    "append": section_append, "e2e": section_e2e, "upsert": section_upsert, "index": section_index,
    "streaming": section_streaming, "commit": section_commit, "scaling": section_scaling,
    "views": section_views, "frontend": section_frontend, "kafka": section_kafka,
    "kafka_avro": section_kafka_avro, "formats": section_formats, "tables": section_tables,
}


# ------------------------------------------------------------------------------------------ ratios
def _ok(r: Any) -> bool:
    return isinstance(r, dict) and r.get("status") == "ok" and bool(r.get("seconds") or r.get("p50_ms"))


def _ok_stream(r: Any) -> bool:
    return isinstance(r, dict) and r.get("status") == "ok" and r.get("latency_p50_s") is not None


def _get(res: dict[str, Any], name: str) -> dict[str, Any]:
    """The run ``name`` of a section, or a stand-in that names it (a ratio row shows both sides)."""
    r = res.get(name)
    return r if isinstance(r, dict) else {"name": name, "status": "not run"}


def _ratio_row(label: str, num: Any, den: Any, value: Callable[[dict, dict], float], goal: str,
               check: Callable[[float], bool] | None, ok: Callable[[Any], bool] = _ok,
               sides: str | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"ratio": label, "goal": goal, "value": None, "met": None,
                           "sides": sides or f"{(num or {}).get('name', '?')} / {(den or {}).get('name', '?')}"}
    if ok(num) and ok(den):
        v = value(num, den)
        row["value"] = round(v, 2)
        row["met"] = check(v) if check else None
    return row


def compute_ratios(sections: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for ap_name, ap in _append_sections(sections):
        rows += _append_ratios(ap_name, ap)
    rows += _other_ratios(sections)
    rows += _formats_ratios(sections.get("formats") or {})
    return rows


def _wrong_output(r: dict[str, Any]) -> bool:
    return r.get("status") == "error" and str(r.get("error", "")).startswith("WRONG OUTPUT")


def _formats_ratio_rows(layout: str, fmt: str, res: dict[str, Any]) -> list[dict[str, Any]]:
    """One (layout, format) cell: icesql's rate / Java's (>= 1.5x) and icesql's peak RSS / Java's
    (<= 1x). A cell where icesql wrote the wrong output (``check_format``) is MISSED, not n/a."""
    ice, java = _get(res, "icesql"), _get(res, "spark35_iceberg")
    rows = [_ratio_row(f"formats {layout} {fmt}: icesql vs Spark+Iceberg Java (rows/s)", ice, java, _speed,
                       f">= {FORMATS_VS_JAVA:g}x", lambda v: v >= FORMATS_VS_JAVA),
            _ratio_row(f"formats {layout} {fmt}: icesql peak memory / Spark+Iceberg Java's", ice, java, _mem_ratio,
                       "<= 1x", lambda v: v <= 1.0, ok=_has_mem)]
    for row in rows:
        row.update({"layout": layout, "format": fmt})
        for side in (ice, java):
            if _wrong_output(side):
                row["sides"] += f" ({side.get('name')}: {side['error'][:160]})"
                if side is ice:
                    row["met"] = False
    return rows


def _formats_ratios(fm: dict[str, Any]) -> list[dict[str, Any]]:
    if not fm or fm.get("status") in ("error", "n/a"):
        return []
    rows: list[dict[str, Any]] = []
    for layout in ("unpartitioned", "partitioned_day_ts"):
        for fmt, res in (fm.get(layout) or {}).items():
            if isinstance(res, dict):
                rows += _formats_ratio_rows(layout, fmt, res)
    return rows


def _append_sections(sections: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``append`` and, in a combined render, ``append <rows>`` sections (one per dataset size)."""
    return [(k, v) for k, v in sections.items()
            if (k == "append" or k.startswith("append ")) and isinstance(v, dict)]


def _speed(a: dict[str, Any], b: dict[str, Any]) -> float:
    """How many times faster ``a`` is than ``b`` (time of b / time of a)."""
    return b["seconds"] / a["seconds"]


def _time_ratio(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Time of ``a`` / time of ``b`` (lower is better for a)."""
    return a["seconds"] / b["seconds"]


def _mem_ratio(a: dict[str, Any], b: dict[str, Any]) -> float:
    return a["peak_rss_mb"] / b["peak_rss_mb"]


def _has_mem(r: Any) -> bool:
    return _ok(r) and bool(r.get("peak_rss_mb"))


def _pss_ratio(a: dict[str, Any], b: dict[str, Any]) -> float:
    return a["peak_pss_mb"] / b["peak_pss_mb"]


def _has_pss(r: Any) -> bool:
    return _ok(r) and bool(r.get("peak_pss_mb"))


# The goals (issue 11 "What it must show", issue 12 for the upsert).
APPEND_VS_JAVA, APPEND_VS_PYARROW = 2.0, 0.6
# issue 39: a running sink >= 3x MERGE INTO, one run --once per batch >= 2x, fresh processes >= 1.5x,
# peak memory <= MERGE INTO's in every mode
UPSERT_VS_MERGE, UPSERT_ONCE_VS_MERGE, UPSERT_E2E_VS_MERGE, READ_VS_COMPACTED = 3.0, 2.0, 1.5, 1.5
UPSERT_KAFKA_VS_MERGE = 2.0  # issue 54: upserts from a Kafka topic >= 2x MERGE INTO (running and once per batch)
E2E_VS_JAVA = 2.0
FORMATS_VS_JAVA = 1.5  # issue 38: >= 1.5x Iceberg Java's rate in every (layout, format) cell, memory <= Java's
FLAT_MEMORY = 1.25  # "memory must stay flat as rows grow": peak RSS at the largest size / the smallest
KAFKA_VS_PYARROW = 0.8  # issue 54 (was 0.6, issue 35): icesql run --once >= 0.8x of one process consuming + writing Parquet
KAFKA_P50_S, KAFKA_P99_S = 1.0, 2.0  # issue 54 (issue 35 asked 1.5 / 3.0 s at 5k/s): produce-to-snapshot latency at 10k records/s, MAXIMUM PERIOD = '1s'
# issue 52: icesql from Avro through the registry >= 2x one process of confluent-kafka + AvroDeserializer
# + pyarrow Parquet, and >= the same records as JSON through icesql
KAFKA_AVRO_VS_BASELINE, KAFKA_AVRO_VS_JSON = 2.0, 1.0
# issue 53: one routed sink's wall time <= 0.2x of N separate sinks', its peak RSS <= 2 GB, and >= 3x
# Spark + Iceberg Java MERGE INTO per table
TABLES_VS_SEPARATE, TABLES_PEAK_MB, TABLES_VS_MERGE = 0.2, 2048, 3.0


def _append_ratios(ap_name: str, ap: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    speed = _speed
    for layout_key in ("unpartitioned", "partitioned_day_ts"):
        res = ap.get(layout_key)
        if not res:
            continue
        layout = layout_key if ap_name == "append" else f"{ap_name.removeprefix('append ')} rows {layout_key}"
        ice, java, pya = _get(res, "icesql"), _get(res, "spark35_iceberg"), _get(res, "pyarrow_parquet")
        raw = [res[k] for k in RAW_PARQUET if _ok(_get(res, k))]
        best = min(raw, key=lambda r: r["seconds"]) if raw else None
        rows.append(_ratio_row(f"append {layout}: icesql vs Spark+Iceberg Java", ice, java,
                               speed, f">= {APPEND_VS_JAVA:g}x", lambda v: v >= APPEND_VS_JAVA))
        rows.append(_ratio_row(f"append {layout}: icesql vs one-process pyarrow", ice, pya, speed,
                               f">= {APPEND_VS_PYARROW:g}x", lambda v: v >= APPEND_VS_PYARROW))
        rows.append(_ratio_row(f"append {layout}: icesql peak memory / Spark+Iceberg Java's (lower is better)",
                               ice, java, _mem_ratio, "<= 1x", lambda v: v <= 1.0, ok=_has_mem))
        rows.append(_ratio_row(f"append {layout}: (context) icesql peak PSS / Spark+Iceberg Java's (shared pages "
                               "counted once)", ice, java, _pss_ratio, "-", None, ok=_has_pss))
        rows.append(_ratio_row(f"append {layout}: Arrow path gain, icesql vs icesql_spark_path "
                               "(ICESQL_ARROW_PATH=0)", ice, _get(res, "icesql_spark_path"), speed, "-", None))
        rows.append(_ratio_row(f"append {layout}: (context) icesql_spark_path vs Spark+Iceberg Java",
                               _get(res, "icesql_spark_path"), java, speed, "-", None))
        rows.append(_ratio_row(f"append {layout}: icesql vs pyiceberg append", ice, _get(res, "pyiceberg_append"),
                               speed, "-", None))
        rows.append(_ratio_row(f"append {layout}: (context) icesql vs best raw Parquet", ice, best, speed, "-", None))
        rows.append(_ratio_row(f"append {layout}: (context) Spark+Iceberg Java vs best raw Parquet",
                               java, best, speed, "-", None))
        rows.append(_ratio_row(f"append {layout}: (context) pyiceberg append vs best raw Parquet",
                               _get(res, "pyiceberg_append"), best, speed, "-", None))
    return rows


def _other_ratios(sections: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    speed = _speed
    e2e = sections.get("e2e", {})
    for fmt in ("parquet", B.NO_SCHEMA, "json"):
        for layout, res in (e2e.get(fmt) or {}).items():
            if not isinstance(res, dict):
                continue
            ice, java = _get(res, "icesql_cli"), _get(res, "spark35_iceberg_submit")
            rows.append(_ratio_row(f"e2e {fmt} {layout}: icesql run --once vs Spark+Iceberg Java (fresh processes)",
                                   ice, java, speed, f">= {E2E_VS_JAVA:g}x", lambda v: v >= E2E_VS_JAVA))
            # issue 54: peak memory (the process tree) at or below Java's on both executors
            on_spark = _get(res, "icesql_cli_on_spark")
            rows.append(_ratio_row(f"e2e {fmt} {layout}: icesql peak memory / Spark+Iceberg Java's",
                                   ice, java, _mem_ratio, "<= 1x", lambda v: v <= 1.0, ok=_has_mem))
            rows.append(_ratio_row(f"e2e {fmt} {layout}: icesql on Spark (ICESQL_LOCAL_RUN=0) peak memory / "
                                   "Spark+Iceberg Java's", on_spark, java, _mem_ratio, "<= 1x", lambda v: v <= 1.0,
                                   ok=_has_mem))
            rows.append(_ratio_row(f"e2e {fmt} {layout}: (context) icesql on Spark (ICESQL_LOCAL_RUN=0) vs "
                                   "Spark+Iceberg Java", on_spark, java, speed, "-", None))
    up = sections.get("upsert", {})
    if up:
        modes = (
            ("a running sink (Session.start, batches as they arrive)", "icesql_running", "spark35_merge",
             UPSERT_VS_MERGE),
            ("one run(once=True) per batch", "icesql", "spark35_merge", UPSERT_ONCE_VS_MERGE),
            ("a fresh process per batch (icesql run --once / spark-submit)", "icesql_e2e", "spark35_merge_e2e",
             UPSERT_E2E_VS_MERGE),
        )
        for what, ice, merge, goal in modes:
            rows.append(_ratio_row(f"upsert: {what}, icesql vs Spark+Iceberg Java MERGE INTO (merge-on-read)",
                                   _get(up, ice), _get(up, merge), speed, f">= {goal:g}x",
                                   lambda v, goal=goal: v >= goal))
            rows.append(_ratio_row(f"upsert: {what}, icesql peak memory / MERGE INTO's", _get(up, ice),
                                   _get(up, merge), _mem_ratio, "<= 1x", lambda v: v <= 1.0, ok=_has_mem))
        for what, ice, merge, goal in modes:  # the same changes from a Debezium Kafka topic
            kafka = ice.replace("icesql", "icesql_kafka")
            goal = goal if ice == "icesql_e2e" else UPSERT_KAFKA_VS_MERGE
            rows.append(_ratio_row(f"upsert from Kafka: {what}, icesql vs MERGE INTO (from files)",
                                   _get(up, kafka), _get(up, merge), speed, f">= {goal:g}x",
                                   lambda v, goal=goal: v >= goal))
            rows.append(_ratio_row(f"upsert from Kafka: {what}, icesql peak memory / MERGE INTO's", _get(up, kafka),
                                   _get(up, merge), _mem_ratio, "<= 1x", lambda v: v <= 1.0, ok=_has_mem))
        for what, ice in (("a running sink on Spark (a SparkSession given)", "icesql_running_on_spark"),
                          ("one run(once=True) per batch on Spark (a SparkSession given)", "icesql_on_spark"),
                          ("a running sink with a 0.25 s trigger (ICESQL_TRIGGER_INTERVAL)",
                           "icesql_running_trigger_250ms")):
            rows.append(_ratio_row(f"upsert: (context) {what} vs MERGE INTO",
                                   _get(up, ice), _get(up, "spark35_merge"), speed, "-", None))
        for rd in ("duckdb", "datafusion", "java"):
            rows.append(_ratio_row(f"upsert read, {rd}: icesql table / the same rows compacted (time, lower is better)",
                                   _get(up, f"{rd}_read_icesql"), _get(up, f"{rd}_read_compacted"), _time_ratio,
                                   f"<= {READ_VS_COMPACTED:g}x", lambda v: v <= READ_VS_COMPACTED))
        for rd in ("duckdb", "datafusion", "java"):
            rows.append(_ratio_row(f"upsert read, {rd}: the running sink's table / the same rows compacted",
                                   _get(up, f"{rd}_read_icesql_running"), _get(up, f"{rd}_read_compacted"),
                                   _time_ratio, f"<= {READ_VS_COMPACTED:g}x", lambda v: v <= READ_VS_COMPACTED))
        for rd in ("duckdb", "datafusion", "java"):
            rows.append(_ratio_row(f"upsert read, {rd}: (context) icesql table vs the MERGE table",
                                   _get(up, f"{rd}_read_icesql"), _get(up, f"{rd}_read_spark35_merge"), speed,
                                   "-", None))
    cm = sections.get("commit", {})
    if cm:
        lat = lambda a, b: b["p50_ms"] / a["p50_ms"]  # noqa: E731
        for cat in ("local", "rest"):
            rows.append(_ratio_row(f"commit {cat}: icesql vs pyiceberg append (p50)", _get(cm, f"icesql_{cat}"),
                                   _get(cm, f"pyiceberg_{cat}"), lat, "-", None))
        for cat in ("local", "rest"):
            row = _ratio_row(f"commit {cat}: icesql vs pyiceberg append (p50 of the last 10, table history grown)",
                             _get(cm, f"icesql_{cat}"), _get(cm, f"pyiceberg_{cat}"),
                             lambda a, b: b["last10_p50_ms"] / a["last10_p50_ms"], "-", None,
                             ok=lambda r: _ok(r) and bool(r.get("last10_p50_ms")))
            rows.append(row)
        ice = _get(cm, "icesql_local")
        rows.append({"ratio": "commit local: icesql p50 (absolute)", "goal": "<= 50 ms", "sides": "icesql_local",
                     "value": ice.get("p50_ms") if _ok(ice) else None,
                     "met": (ice["p50_ms"] <= 50) if _ok(ice) else None})
    st = sections.get("streaming", {})
    if st:
        for q in ("p50", "p99"):
            key = f"latency_{q}_s"
            for k in ("icesql_period_1s", "icesql_period_1s_min_size_8MiB"):
                num, den = _get(st, k), _get(st, "spark35_iceberg_trigger_1s")
                # issue 11: with MAXIMUM PERIOD = '1s', arrival -> snapshot no worse than the peer's
                goal = k == "icesql_period_1s"
                row = _ratio_row(f"streaming: {k} vs Spark+Iceberg Java trigger 1s ({q} latency, "
                                 "higher = icesql faster)", num, den,
                                 lambda a, b, key=key: b[key] / a[key] if a[key] else float("inf"),
                                 ">= 1x" if goal else "-", (lambda v: v >= 1.0) if goal else None,
                                 ok=lambda r, key=key: _ok_stream(r) and r.get(key) is not None)
                row["sides"] = f"{k} / spark35_iceberg_trigger_1s"
                rows.append(row)
    sc = sections.get("scaling", {})
    if sc:
        sizes = sorted(int(k) for k in sc)
        for name in ("icesql", "spark35_iceberg", "pyarrow_parquet"):
            lo, hi = _get(sc[str(sizes[0])], name), _get(sc[str(sizes[-1])], name)
            rows.append(_ratio_row(f"scaling {name}: time growth {sizes[0]:,} -> {sizes[-1]:,} rows "
                                   f"(linear = {sizes[-1] / sizes[0]:g})", hi, lo,
                                   lambda a, b: a["seconds"] / b["seconds"], "-", None))
            flat = name == "icesql"
            rows.append(_ratio_row(f"scaling {name}: peak RSS growth {sizes[0]:,} -> {sizes[-1]:,} rows", hi, lo,
                                   _mem_ratio, f"<= {FLAT_MEMORY:g}x (flat)" if flat else "-",
                                   (lambda v: v <= FLAT_MEMORY) if flat else None, ok=_has_mem))
            rows.append(_ratio_row(f"scaling {name}: (context) peak PSS growth {sizes[0]:,} -> {sizes[-1]:,} rows",
                                   hi, lo, _pss_ratio, "-", None, ok=_has_pss))
    rows += _kafka_ratios(sections.get("kafka") or {})
    rows += _kafka_avro_ratios(sections.get("kafka_avro") or {})
    rows += _tables_ratios(sections.get("tables") or {})
    fe = sections.get("frontend", {})
    if fe:
        floor = fe.get("python_startup_floor")
        for k in ("icesql_help", "shell_time_to_prompt"):
            rows.append(_ratio_row(f"front-end: {k} vs bare python start-up", fe.get(k), floor,
                                   lambda a, b: a["p50_ms"] / b["p50_ms"], "-", None))
        for k, limit in (("icesql_help", 300), ("shell_time_to_prompt", 1000)):
            r = fe.get(k)
            rows.append({"ratio": f"front-end: {k} p50 ms (absolute)", "goal": f"< {limit} ms", "sides": k,
                         "value": r.get("p50_ms") if _ok(r) else None,
                         "met": (r["p50_ms"] < limit) if _ok(r) else None})
    vw = sections.get("views", {})
    for layout in ("unpartitioned", "partitioned_day_ts"):
        res = vw.get(layout) or {}
        if res:
            rows.append(_ratio_row(f"views {layout}: Spark's Parquet writer + footer statistics vs mapInArrow "
                                   "(speed; keep the faster)", _get(res, "spark_writer"), _get(res, "mapinarrow"),
                                   speed, "-", None))
            rows.append(_ratio_row(f"views {layout}: Spark's Parquet writer peak memory / mapInArrow's",
                                   _get(res, "spark_writer"), _get(res, "mapinarrow"), _mem_ratio, "-", None,
                                   ok=_has_mem))
    ix = sections.get("index", {})
    for n, r in sorted(((int(k), v) for k, v in ix.items() if k.isdigit()), key=lambda x: x[0]):
        rows.append({"ratio": f"index build {n:,} keys: seconds (absolute)", "goal": "-", "sides": r.get("name"),
                     "value": r.get("seconds") if _ok(r) else None, "met": None})
    return rows


def _kafka_ratios(kf: dict[str, Any]) -> list[dict[str, Any]]:
    if not kf or kf.get("status") in ("error", "n/a"):
        return []
    rows: list[dict[str, Any]] = []
    n = (kf.get("dataset") or {}).get("records")
    ice, pya, raw = _get(kf, "icesql_cli"), _get(kf, "pyarrow_parquet"), _get(kf, "raw_consume")
    rows.append(_ratio_row(f"kafka {_fmt(n)} records: icesql run --once vs one-process confluent-kafka + pyarrow "
                           "Parquet (speed = time of (b) / time of icesql)", ice, pya, _speed,
                           f">= {KAFKA_VS_PYARROW:g}x", lambda v: v >= KAFKA_VS_PYARROW))
    rows.append(_ratio_row(f"kafka {_fmt(n)} records: (context) icesql vs the raw consume rate (a)", ice, raw,
                           _speed, "-", None))
    rows.append(_ratio_row(f"kafka {_fmt(n)} records: (context) icesql time to its last commit vs (b)",
                           {**ice, "seconds": ice.get("to_last_commit_s")}, pya, _speed, "-", None,
                           ok=lambda r: _ok(r) and bool(r.get("seconds"))))
    rows.append(_ratio_row(f"kafka {_fmt(n)} records: (context) icesql peak memory / (b)'s", ice, pya, _mem_ratio,
                           "-", None, ok=_has_mem))
    for small in (kf.get("dataset") or {}).get("flat_sizes") or []:
        lo = _get(kf, f"icesql_cli_{small}")
        rows.append(_ratio_row(f"kafka: icesql peak RSS growth {small:,} -> {_fmt(n)} records", ice, lo, _mem_ratio,
                               f"<= {FLAT_MEMORY:g}x (flat)", lambda v: v <= FLAT_MEMORY, ok=_has_mem))
    lat = kf.get("icesql_latency")
    if isinstance(lat, dict):
        for q, limit in (("p50", KAFKA_P50_S), ("p99", KAFKA_P99_S)):
            v = lat.get(f"latency_{q}_s") if _ok_stream(lat) else None
            rows.append({"ratio": f"kafka: produce-to-snapshot latency {q} s at {lat.get('rate')} records/s, "
                                  "MAXIMUM PERIOD = '1s' (absolute)", "goal": f"<= {limit:g} s",
                         "sides": "icesql_latency", "value": v, "met": (v <= limit) if v is not None else None})
    return rows


def _tables_ratios(tb: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 53's goals; a side whose tables did not equal the replay is an error (no figure)."""
    if not tb or tb.get("status") in ("error", "n/a"):
        return []
    routed, sep, merge = _get(tb, "icesql_routed"), _get(tb, "icesql_separate"), _get(tb, "spark35_merge_tables")
    n = (tb.get("dataset") or {}).get("tables", "N")
    rows = [_ratio_row(f"tables: one routed sink's wall time / {n} separate sinks' (lower is better)", routed, sep,
                       _time_ratio, f"<= {TABLES_VS_SEPARATE:g}x", lambda v: v <= TABLES_VS_SEPARATE),
            {"ratio": "tables: one routed sink's peak RSS, MB (absolute)", "goal": f"<= {TABLES_PEAK_MB} MB",
             "sides": "icesql_routed", "value": routed.get("peak_rss_mb") if _has_mem(routed) else None,
             "met": (routed["peak_rss_mb"] <= TABLES_PEAK_MB) if _has_mem(routed) else None},
            _ratio_row(f"tables: one routed sink vs Spark+Iceberg Java MERGE INTO per table ({n} tables, one process)",
                       routed, merge, _speed, f">= {TABLES_VS_MERGE:g}x", lambda v: v >= TABLES_VS_MERGE),
            _ratio_row(f"tables: (context) {n} separate sinks vs MERGE INTO per table", sep, merge, _speed, "-", None),
            _ratio_row("tables: (context) routed sink peak memory / separate sinks'", routed, sep, _mem_ratio, "-",
                       None, ok=_has_mem),
            _ratio_row("tables: (context) routed sink peak memory / MERGE INTO's", routed, merge, _mem_ratio, "-",
                       None, ok=_has_mem)]
    for row in rows:
        for side in (routed, sep, merge):
            if _wrong_output(side) and side.get("name") in row["sides"]:
                row["sides"] += f" ({side.get('name')}: {side['error'][:160]})"
                if side is routed:
                    row["met"] = False
    return rows


def _tables_markdown(tb: dict[str, Any]) -> list[str]:
    d = tb.get("dataset") or {}
    rows = []
    for k, r in tb.items():
        if k == "dataset" or not isinstance(r, dict):
            continue
        note = r.get("error") or r.get("warning") or ""
        rows.append([k, r.get("status"), r.get("seconds", r.get("unverified_seconds")), _mem(r),
                     r.get("tables_verified"), r.get("rows_in_tables"), r.get("in_process_seconds"),
                     f"{r.get('load_before')} -> {r.get('load_after')}", str(note)[:120]])
    return ["", "### One sink, many tables (absolute)", "",
            f"{d.get('tables')} tables of {d.get('columns_min_max')} columns, each {_fmt(d.get('base_keys_per_table'))} "
            f"base keys (snapshot events) + {_fmt(d.get('changes_per_table'))} changes (70 % updates, 20 % inserts "
            f"half reusing deleted keys, 10 % deletes): {_fmt(d.get('events'))} Debezium events, "
            f"{d.get('routed_mb')} MB as Kafka Connect JSON with schemas ({d.get('routed_files')} files, every table "
            f"interleaved), {d.get('per_table_mb')} MB as plain Debezium JSON (a file per table); "
            f"{_fmt(d.get('expected_rows'))} rows at the end. Source options: `{d.get('source_options') or '-'}`, sink options: "
            f"`{d.get('sink_options') or '-'}`. "
            "Every run a fresh process, one after the other; seconds = the whole process (JVM start included); "
            "memory = peak RSS of the process tree in MB; verified = tables whose row count and checksum equal "
            "the replay's (Iceberg Java reads each).", "",
            _table(["run", "status", "seconds", "peak RSS MB", "tables verified", "rows", "in-process s",
                    "load 1-min before -> after", "note"], rows)]


def _kafka_avro_ratios(ka: dict[str, Any]) -> list[dict[str, Any]]:
    if not ka or ka.get("status") in ("error", "n/a"):
        return []
    d = ka.get("dataset") or {}
    n = d.get("records")
    ice, js, base = _get(ka, "icesql_avro"), _get(ka, "icesql_json"), _get(ka, "avro_baseline")
    rows = [_ratio_row(f"kafka_avro {_fmt(n)} records: icesql run --once (Avro, registry) vs one process of "
                       "confluent-kafka + AvroDeserializer + pyarrow Parquet (speed)", ice, base, _speed,
                       f">= {KAFKA_AVRO_VS_BASELINE:g}x", lambda v: v >= KAFKA_AVRO_VS_BASELINE),
            _ratio_row(f"kafka_avro {_fmt(n)} records: icesql run --once, Avro vs the same records as JSON (speed)",
                       ice, js, _speed, f">= {KAFKA_AVRO_VS_JSON:g}x", lambda v: v >= KAFKA_AVRO_VS_JSON),
            _ratio_row(f"kafka_avro {_fmt(n)} records: (context) icesql Avro peak memory / the baseline's", ice, base,
                       _mem_ratio, "-", None, ok=_has_mem),
            _ratio_row(f"kafka_avro {_fmt(n)} records: (context) icesql Avro peak memory / icesql JSON's", ice, js,
                       _mem_ratio, "-", None, ok=_has_mem)]
    sizes = sorted({int(n or 0), *(d.get("flat_sizes") or [])})
    if len(sizes) > 1:
        def at(k: int) -> Any:
            return ice if k == n else _get(ka, f"icesql_avro_{k}")

        rows.append(_ratio_row(f"kafka_avro: icesql Avro peak RSS growth {sizes[0]:,} -> {sizes[-1]:,} records",
                               at(sizes[-1]), at(sizes[0]), _mem_ratio, f"<= {FLAT_MEMORY:g}x (flat)",
                               lambda v: v <= FLAT_MEMORY, ok=_has_mem))
    return rows


# ------------------------------------------------------------------------------------------ report
def machine_info() -> dict[str, Any]:
    def first(cmd: list[str]) -> str:
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            return (p.stdout + p.stderr).strip().splitlines()[0]
        except Exception as e:  # noqa: BLE001
            return f"? ({e})"

    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem_kb = int(next(x for x in Path("/proc/meminfo").read_text().splitlines()
                          if x.startswith("MemTotal")).split()[1])
    except (OSError, StopIteration, ValueError):
        mem_kb = 0
    ver = "import pyspark, pyarrow; print(pyspark.__version__, pyarrow.__version__)"
    here = Path(sys.executable).resolve() == Path(B.PROJECT_PY).resolve()

    def project(cmd: list[str], *dists: str) -> str:
        """A version of the project venv: read in this process when it is that venv (no child)."""
        if here:
            from importlib.metadata import PackageNotFoundError, version

            try:
                return " ".join(version(d) for d in dists)
            except PackageNotFoundError:
                pass
        return first(cmd)

    return {
        "nproc": os.cpu_count(), "cpu": cpu, "mem_gib": round(mem_kb / 2**20, 1),
        "os": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
        "java": first(["java", "-version"]),
        "project_venv_pyspark_pyarrow": project([B.PROJECT_PY, "-c", ver], "pyspark", "pyarrow"),
        "harness_pyspark_pyarrow": first([B.HARNESS_PY, "-c", ver]) if Path(B.HARNESS_PY).exists() else "n/a",
        "pyiceberg": project([B.PROJECT_PY, "-c", "import pyiceberg; print(pyiceberg.__version__)"], "pyiceberg"),
        "duckdb": project([B.PROJECT_PY, "-c", "import duckdb; print(duckdb.__version__)"], "duckdb"),
        "loadavg_start": os.getloadavg(),
    }


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_fmt(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _mem(r: dict[str, Any]) -> str:
    k = r.get("peak_rss_mb_by_kind") or {}
    parts = [f"{n.replace('python_workers', 'py-workers').replace('driver_python', 'py')} {int(v)}"
             for n, v in k.items() if n != "other" and v]
    if not r.get("peak_rss_mb"):
        return "n/a"
    out = f"{int(r['peak_rss_mb'])} ({', '.join(parts)})" if parts else f"{int(r['peak_rss_mb'])}"
    return f"{out}; PSS {int(r['peak_pss_mb'])}" if r.get("peak_pss_mb") else out


def _files(r: dict[str, Any]) -> str:
    if not r.get("files"):
        return "n/a"
    s = f"{r['files']} ({r.get('file_mb_min')}/{r.get('file_mb_median')}/{r.get('file_mb_max')} MB)"
    if r.get("delete_files"):
        s += f" + {r['delete_files']} delete"
    return s


def render_markdown(res: dict[str, Any]) -> str:
    m = res["machine"]
    out = [f"Run {res['started']} - `{res['command']}` - {res['total_seconds']:.0f} s",
           f"Machine: {m['nproc']} cores `{m['cpu']}`, {m['mem_gib']} GiB, {m['os']}; {m['java']}; "
           f"Python {m['python']}; project venv pyspark/pyarrow {m['project_venv_pyspark_pyarrow']}; "
           f"harness pyspark/pyarrow {m['harness_pyspark_pyarrow']}; pyiceberg {m['pyiceberg']}; "
           f"duckdb {m['duckdb']}; load average at start {m['loadavg_start']}, at end {m.get('loadavg_end')}.",
           ""]
    ratios = sorted(res["ratios"], key=lambda r: r["goal"] == "-")  # goal rows first, order kept
    goals = [r for r in ratios if r["goal"] != "-"]
    met = sum(1 for r in goals if r["met"] is True)
    missed = sum(1 for r in goals if r["met"] is False)
    if goals:
        out += [f"**Goals: {met} met, {missed} missed, {len(goals) - met - missed} not measured** "
                f"(of {len(goals)}; a goal is only judged when both of its sides ran).", ""]
    out += ["### Ratios (goal rows first; n/a = a side did not run)", ""]

    def verdict(r: dict[str, Any]) -> str:
        if r["goal"] == "-":
            return "-"
        return {True: "met", False: "MISSED", None: "n/a"}[r["met"]]

    out.append(_table(["ratio", "sides", "value", "goal", "met"],
                      [[r["ratio"], r["sides"], (f"{r['value']}x" if r["value"] is not None and "absolute" not in r["ratio"]
                                                 else r["value"]), r["goal"], verdict(r)] for r in ratios]))
    secs = {k: v for k, v in res["sections"].items() if isinstance(v, dict)}
    for name, sec in list(secs.items()):  # a section that crashed as a whole: say so, render the rest
        if sec.get("status") == "error":
            out += ["", f"### {name}: error", "", f"`{str(sec.get('error'))[:300]}`"]
            del secs[name]
    secs = {k: {n: r for n, r in v.items() if isinstance(r, dict)} for k, v in secs.items()}
    ap_rows = []
    fallbacks = []  # files the Arrow path left to Spark's readers, per icesql run (issue 11)
    appends = _append_sections(secs)
    for sec_name, sec in tuple(appends) + tuple(
            (f"scaling {k}", {"unpartitioned": v}) for k, v in secs.get("scaling", {}).items()):
        for layout in ("unpartitioned", "partitioned_day_ts"):
            for r in (sec.get(layout) or {}).values():
                ap_rows.append([sec_name, layout.replace("partitioned_day_ts", "day(ts)"), r["name"],
                                r.get("status"), r.get("seconds"), r.get("rows_per_s"), r.get("mb_per_s"),
                                _files(r), _mem(r), r.get("wall_seconds")])
                if r.get("path") == "arrow" and r.get("fallback_files") is not None:
                    fallbacks.append(f"{sec_name} {layout.replace('partitioned_day_ts', 'day(ts)')} "
                                     f"{r['name']}: {r['fallback_files']}")
    if ap_rows:
        dsl = [sec.get("dataset", {}) for _, sec in appends] or [{}]
        out += ["", "### Append (absolute)", "",
                "Datasets: " + "; ".join(
                    f"{_fmt(ds.get('rows'))} rows, {ds.get('input_files')} input Parquet files "
                    f"({ds.get('input_mb')} MB snappy, {ds.get('arrow_mb')} MB in Arrow = the MB of MB/s)"
                    for ds in dsl) + ". seconds = the timed write (input read included; session start and warm-up excluded); "
                "wall = the whole child process; memory = peak RSS of the process tree in MB (jvm, py-workers, py; "
                "PSS = the peak of its proportional set size, each shared page divided among the processes "
                "that map it, where recorded).",
                "", _table(["section", "layout", "runner", "status", "seconds", "rows/s", "MB/s",
                            "data files (min/median/max)", "peak RSS MB", "wall s"], ap_rows)]
        if fallbacks:
            out += ["", "Files the Arrow path left to Spark's readers (fallbacks, as `SHOW SINK STATUS` "
                    "counts them): " + "; ".join(fallbacks) + "."]
    e2e = secs.get("e2e")
    if e2e:
        erows = []
        for fmt in ("parquet", B.NO_SCHEMA, "json"):
            for layout, runs in (e2e.get(fmt) or {}).items():
                for r in (runs or {}).values():
                    note = r.get("warning") or r.get("error") or r.get("reason") or ""
                    erows.append([fmt, layout.replace("partitioned_day_ts", "day(ts)"), r.get("name"), r.get("status"),
                                  r.get("seconds"), r.get("rows_per_s"), r.get("session_seconds"), _files(r), _mem(r),
                                  str(note)[:100]])
        if erows:
            dsd = res["sections"]["e2e"].get("dataset") or {}
            out += ["", "### End to end, fresh processes (absolute)", "",
                    "Inputs: " + "; ".join(f"{fmt}: {_fmt(d.get('rows'))} rows in {d.get('input_files')} files "
                                           f"({d.get('input_mb')} MB)" for fmt, d in dsd.items())
                    + ". seconds = the whole process's wall time (Python, JVM and Spark start, table creation, "
                    "the write and the commit); `icesql --home <fresh> run append.sql --once` against a fresh "
                    "Spark 3.5 + Iceberg Java process (`workers/spark_iceberg.e2e_append`); memory = peak RSS of "
                    "the process tree in MB; session s = SparkSession start as the process saw it (icesql: n/a).",
                    "", _table(["input", "layout", "runner", "status", "seconds (wall)", "rows/s", "session s",
                                "data files", "peak RSS MB", "note"], erows)]
    up = secs.get("upsert")
    if up:
        d = up["dataset"]
        urows = []
        for k, r in up.items():
            if k == "dataset":
                continue
            urows.append([k, r.get("status"), r.get("seconds"), r.get("changes_per_s"), r.get("batch_p50_s"),
                          r.get("count_seconds"), _files(r), r.get("rows_in_table") or r.get("rows"),
                          r.get("matches_expected", r.get("rows_match")), _mem(r), r.get("wall_seconds"),
                          r.get("processing_s", ""), r.get("broker_cpu_s", "")])
        out += ["", "### Upsert (absolute)", "",
                f"{_fmt(d['keys'])} keys, {d['batches']} batches x {_fmt(d['batch_size'])} changes "
                f"({d['mix']}), {_fmt(d['expected_rows'])} rows expected. seconds = sum of the batch "
                "commits (base load excluded) for writers (`*_e2e`: sum of the wall times of one fresh process "
                "per batch), full scan of every column for readers (`<reader>_read_<table>`; `compacted` = a "
                "fresh table holding the expected rows, no delete files). A running sink's batch is timed from "
                "the file's arrival to the commit that holds it; batch start to commit s = the part from the "
                "batch's start (the rest is the wait for its 1 s trigger: batches start at most once an "
                "interval). broker CPU s = the CPU time the Kafka writers' broker "
                f"({d.get('kafka_broker', _broker_name('noida'))}, on the same two cores) used during their timed "
                "batches.", "",
                _table(["run", "status", "seconds", "changes/s", "batch p50 s", "count s", "files",
                        "rows", "matches expected", "peak RSS MB", "wall s", "batch start to commit s",
                        "broker CPU s"], urows)]
    ix = secs.get("index")
    if ix:
        out += ["", "### Key index build (absolute)", "",
                "The engine's rebuild of an upsert sink's key index (KEY -> data file and position) from a "
                "table of N keys (`icesql_hooks.measure_index_build`); memory = peak RSS of the measuring "
                "process tree (SparkSession + build).", "",
                _table(["keys", "status", "seconds", "keys/s", "shards", "index MB", "peak RSS MB", "note"],
                       [[k, r.get("status"), r.get("seconds"), r.get("keys_per_s"), r.get("shards"), r.get("index_mb"),
                         _mem(r), str(r.get("reason") or r.get("error") or "")[:120]] for k, r in ix.items()])]
    vw = secs.get("views")
    if vw:
        vrows = []
        for layout in ("unpartitioned", "partitioned_day_ts"):
            for r in (vw.get(layout) or {}).values():
                checks = "ok" if r.get("ids_ok") and r.get("pruned_scan_ok") and not r.get("nulls_in_ts_price_date") \
                    else ("n/a" if r.get("ids_ok") is None else "WRONG")
                vrows.append([layout.replace("partitioned_day_ts", "day(ts)"), r.get("name"), r.get("status"),
                              r.get("seconds"), r.get("spark_write_seconds"), r.get("footer_stats_seconds"),
                              r.get("commit_seconds"), _files(r), _mem(r), checks])
        out += ["", "### Views / Spark tables: the Spark-path writer (absolute)", "",
                "Same DataFrame (the append dataset through a view's `SELECT`); seconds = write + statistics + "
                "commit. mapinarrow = icesql's BatchWriter; spark_writer = Spark's Parquet writer with "
                "`parquet.field.id` + statistics from the footers; checks = rows, ids, no stray nulls and a "
                "partition-pruned scan read back.", "",
                _table(["layout", "method", "status", "seconds", "Spark write s", "footer stats s", "commit s",
                        "data files", "peak RSS MB", "checks"], vrows)]
    st = secs.get("streaming")
    if st:
        srows = [[k, r.get("status"), r.get("latency_p50_s"), r.get("latency_p99_s"), r.get("snapshots_per_min"),
                  r.get("data_files_per_min"), r.get("commit_interval_p50_s"), r.get("rows_committed"), _mem(r)]
                 for k, r in st.items() if k != "producer"]
        p = st["producer"]
        out += ["", "### Streaming (absolute)", "",
                f"Producer: one {p['rows_per_file']:,}-row Parquet file every {p['interval_s']} s for "
                f"{p['seconds']} s. Latency = file renamed into place -> first snapshot holding its rows.", "",
                _table(["run", "status", "latency p50 s", "p99 s", "snapshots/min", "data files/min",
                        "commit interval p50 s", "rows committed", "peak RSS MB"], srows)]
    cm = secs.get("commit")
    if cm:
        crows = [[k, r.get("status"), r.get("p50_ms"), r.get("append_p99_ms", r.get("p99_ms")),
                  r.get("last10_p50_ms"), r.get("n"), r.get("add_files_p50_ms"), r.get("reason") or r.get("error") or ""]
                 for k, r in cm.items()]
        out += ["", "### Commit overhead (absolute, ms per commit of a 100-row file)", "",
                _table(["run", "status", "p50 ms", "p99 ms", "p50 of the last 10 ms", "commits",
                        "add_files p50 ms (pre-written file)", "note"], crows)]
    fm = res["sections"].get("formats")
    if isinstance(fm, dict) and fm.get("status") not in ("error", "n/a"):
        out += _formats_markdown(fm, res["ratios"])
    kf = secs.get("kafka")
    if kf:
        out += _kafka_markdown(kf)
    ka = secs.get("kafka_avro")
    if isinstance(ka, dict) and ka.get("dataset"):
        out += _kafka_avro_markdown(ka)
    tb = secs.get("tables")
    if isinstance(tb, dict) and tb.get("dataset"):
        out += _tables_markdown(tb)
    fe = secs.get("frontend")
    if fe:
        out += ["", "### Front-end (absolute)", "",
                _table(["measure", "status", "p50 ms", "note"],
                       [[k, r.get("status"), r.get("p50_ms"), (r.get("reason") or "")[:80]] for k, r in fe.items()])]
    return "\n".join(out) + "\n"


def _formats_markdown(fm: dict[str, Any], ratios: list[dict[str, Any]]) -> list[str]:
    """The formats section (issue 38): one row per (layout, format) with both goals, then every run."""
    d = fm.get("dataset") or {}
    verdict = VERDICT
    by_cell: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in ratios:
        if r.get("format") and r.get("layout"):
            by_cell.setdefault((r["layout"], r["format"]), []).append(r)
    goal_rows, run_rows = [], []
    for layout in ("unpartitioned", "partitioned_day_ts"):
        for fmt, res in (fm.get(layout) or {}).items():
            if not isinstance(res, dict):
                continue
            ice, java = _get(res, "icesql"), _get(res, "spark35_iceberg")
            cell = by_cell.get((layout, fmt)) or []
            speed, mem = (cell[0] if cell else {}), (cell[1] if len(cell) > 1 else {})
            note = "; ".join(f"{r.get('name')}: {r.get('error') or r.get('reason')}"[:160]
                             for r in (ice, java) if r.get("status") != "ok")
            goal_rows.append([layout.replace("partitioned_day_ts", "day(ts)"), fmt,
                              ice.get("rows_per_s"), java.get("rows_per_s"),
                              f"{speed['value']}x" if speed.get("value") is not None else None,
                              verdict[speed.get("met")],
                              ice.get("peak_rss_mb"), java.get("peak_rss_mb"),
                              f"{mem['value']}x" if mem.get("value") is not None else None, verdict[mem.get("met")],
                              note])
            for name in ("icesql", "spark35_iceberg", "icesql_on_spark"):
                r = _get(res, name)
                if name not in res:
                    continue
                own_pq = _get((fm.get(layout) or {}).get("parquet") or {}, name)
                vs_pq = round(r["seconds"] / own_pq["seconds"], 2) if fmt != "parquet" and _ok(r) and _ok(own_pq) else None
                run_rows.append([layout.replace("partitioned_day_ts", "day(ts)"), fmt, name, r.get("status"),
                                 r.get("seconds"), r.get("rows_per_s"), r.get("mb_per_s"), _files(r),
                                 round(r["bytes"] / 2**20, 1) if r.get("bytes") else None, vs_pq, _mem(r),
                                 r.get("wall_seconds"), r.get("format_verified") or "NO",
                                 str(r.get("error") or r.get("reason") or r.get("warning") or "")[:120]])
    return ["", "### Output formats (issue 38)", "",
            f"{_fmt(d.get('rows'))} rows (the append section's dataset, {d.get('input_files')} input Parquet files, "
            f"{d.get('arrow_mb')} MB in Arrow) written by icesql (`CREATE SINK ... WITH (FORMAT = '<format>', "
            f"PROPERTIES = ('write.<format>.compression-codec' = '{fm.get('codec')}'))`, run once in its own process "
            "without Spark, as `icesql run --once` runs a FILES append; `icesql_on_spark`, for context: the same "
            "sink handed a SparkSession, the Arrow path in Spark's tasks) and by Spark 3.5 + "
            "Iceberg Java (`write.format.default` = the format, the same codec property), one after the other in "
            "the same run; rows/s = rows / the timed write (as in the append section); memory = peak RSS of the "
            "process tree in MB. Goals: icesql >= 1.5x Java's rate and peak RSS <= Java's, in every cell. Every "
            "table is checked: the manifests' file_format, the files' extensions and first bytes all say the "
            "format and the manifests hold every row (a cell that wrote anything else is an error: no rate).", "",
            _table(["layout", "format", "icesql rows/s", "Java rows/s", "speed", ">= 1.5x", "icesql peak RSS MB",
                    "Java peak RSS MB", "memory", "<= 1x", "note"], goal_rows),
            "", "Every run (time vs own Parquet = this format's seconds / the same writer's Parquet seconds):", "",
            _table(["layout", "format", "runner", "status", "seconds", "rows/s", "MB/s", "data files (min/median/max)",
                    "MB written", "time vs own Parquet", "peak RSS MB", "wall s", "format checked", "note"], run_rows)]


def _kafka_markdown(kf: dict[str, Any]) -> list[str]:
    d = kf.get("dataset") or {}
    prod = [r for k, r in kf.items() if k.startswith("produce_")]
    krows = []
    for k, r in kf.items():
        if k == "dataset" or k.startswith("produce_") or k == "icesql_latency" or not isinstance(r, dict):
            continue
        note = r.get("error") or r.get("warning") or ""
        krows.append([k, r.get("status"), r.get("records"), r.get("seconds"), r.get("rows_per_s"),
                      r.get("to_last_commit_s"), r.get("rows_in_table", r.get("rows_in_files", r.get("records"))),
                      _files(r), _mem(r), str(note)[:100]])
    out = ["", "### Kafka into Iceberg (absolute)", "",
           f"{_fmt(d.get('records'))} JSON records of about 100 bytes (`{d.get('sample')}`) in {d.get('partitions')} "
           f"partitions of {d.get('broker')} on loopback, pre-produced (not counted): "
           + "; ".join(f"{_fmt(p.get('records'))} in {p.get('seconds')} s ({_fmt(p.get('records_per_s'))}/s)"
                       for p in prod)
           + " by one confluent-kafka Producer (linger.ms=50, no compression). Every run a fresh process, one after "
           "the other; seconds = the whole process (icesql: `icesql --home <fresh> run pipeline.sql --once`, "
           "start to exit; to last commit = start to the newest snapshot's timestamp-ms); rows = the table's "
           "record count (icesql) or the Parquet files' (b); memory = peak RSS of the process tree in MB.", "",
           _table(["run", "status", "records", "seconds", "records/s", "to last commit s", "rows", "files",
                   "peak RSS MB", "note"], krows)]
    lat = kf.get("icesql_latency")
    if isinstance(lat, dict):
        out += ["", f"Latency: `icesql run pipeline.sql` with `{lat.get('sink')}`, a producer at {lat.get('rate')} "
                f"records/s for {lat.get('seconds_produced')} s (each record's `ts` = its produce time); latency = the "
                "timestamp-ms of the snapshot that added the record's data file - its produce time.", "",
                _table(["run", "status", "p50 s", "p99 s", "max s", "records measured", "snapshots/min",
                        "peak RSS MB", "note"],
                       [["icesql_latency", lat.get("status"), lat.get("latency_p50_s"), lat.get("latency_p99_s"),
                         lat.get("latency_max_s"), lat.get("records_measured"), lat.get("snapshots_per_min"),
                         _mem(lat), str(lat.get("error") or lat.get("warning") or "")[:100]]])]
        tr = lat.get("triggers") or {}
        if tr:
            out += ["", f"Its triggers (Spark's event log): {tr.get('triggers')}, {tr.get('triggers_with_records')} "
                    f"with records; p50 of those: trigger {tr.get('triggerExecution_p50_ms')} ms = addBatch "
                    f"{tr.get('addBatch_p50_ms')} + queryPlanning {tr.get('queryPlanning_p50_ms')} + walCommit "
                    f"{tr.get('walCommit_p50_ms')} + commitOffsets {tr.get('commitOffsets_p50_ms')} + latestOffset "
                    f"{tr.get('latestOffset_p50_ms')} ms; {tr.get('tasks')} tasks, p50 {tr.get('task_seconds_p50')} s "
                    f"each ({tr.get('task_jvm_cpu_seconds_p50')} s of JVM CPU)."]
    return out


def _kafka_avro_markdown(ka: dict[str, Any]) -> list[str]:
    d = ka.get("dataset") or {}
    prod = [r for k, r in ka.items() if k.startswith("produce_") and isinstance(r, dict)]
    krows = []
    for k, r in ka.items():
        if k == "dataset" or k.startswith("produce_") or not isinstance(r, dict) or "wall_seconds" not in r:
            continue
        note = r.get("error") or r.get("warning") or ""
        krows.append([k, r.get("status"), r.get("records"), r.get("seconds"), r.get("rows_per_s"),
                      r.get("to_last_commit_s"), r.get("rows_in_table", r.get("rows_in_files")), _mem(r),
                      f"{r.get('load_before')} -> {r.get('load_after')}", str(note)[:100]])
    return ["", "### Kafka Avro from a Schema Registry (absolute)", "",
            f"{_fmt(d.get('records'))} records of the append dataset in {d.get('partitions')} partitions of "
            f"{d.get('broker')} on loopback, framed by confluent-kafka's AvroSerializer against the stand-in "
            "registry, and the same records as JSON; pre-produced (not counted): "
            + "; ".join(f"{_fmt(p.get('records'))} in {p.get('seconds')} s ({_fmt(p.get('records_per_s'))}/s, "
                        f"{p.get('value_bytes_avg')} bytes each)" for p in prod)
            + ". Every run a fresh process, one after the other; seconds = the whole process; memory = peak RSS "
            "of the process tree in MB.", "",
            _table(["run", "status", "records", "seconds", "records/s", "to last commit s", "rows", "peak RSS MB",
                    "load 1-min before -> after", "note"], krows)]


def update_readme(md: str, json_path: Path) -> None:
    if not README.exists():
        return
    text = README.read_text()
    if MARK_START not in text or MARK_END not in text:
        return
    head, rest = text.split(MARK_START, 1)
    _, tail = rest.split(MARK_END, 1)
    block = f"{MARK_START}\n<!-- written by run.py --update-readme from {json_path.name} -->\n\n{md}\n{MARK_END}"
    README.write_text(head + block + tail)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="icesql benchmark suite (ratios against peers, same run, same machine)")
    ap.add_argument("--rows", type=int, default=None,
                    help="one append dataset size (default: --append-rows; --quick: 200k); also the e2e default")
    ap.add_argument("--append-rows", default=None,
                    help="comma list of append dataset sizes, each its own section (default 1M,10M)")
    ap.add_argument("--quick", action="store_true", help="small sizes everywhere (a few minutes)")
    ap.add_argument("--only", default=",".join(DEFAULT_SECTIONS),
                    help=f"comma list of {SECTIONS} (default: all but formats)")
    ap.add_argument("--skip", default="", help="runner names to skip, e.g. spark35_parquet,pyiceberg_append")
    ap.add_argument("--out", default=None, help="JSON output (default benchmarks/results/<stamp>.json; .md beside it)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per append measurement; the fastest is kept")
    ap.add_argument("--codec", default="zstd",
                    help="codec for every writer (default zstd, Iceberg's Parquet default); the formats section "
                         "puts it in write.<format>.compression-codec")
    ap.add_argument("--write-formats", default=",".join(FILE_FORMATS),
                    help="data file formats of the formats section: parquet,orc,avro (default all three)")
    ap.add_argument("--upsert-keys", type=int, default=None)
    ap.add_argument("--stream-seconds", type=float, default=None)
    ap.add_argument("--scaling", default=None, help="comma list of row counts (default 1M,5M,20M)")
    ap.add_argument("--layouts", default="unpartitioned,day_ts",
                    help="table layouts of append, e2e and views: unpartitioned,day_ts (default both)")
    ap.add_argument("--e2e-rows", type=int, default=None, help="e2e dataset rows (default: --rows)")
    ap.add_argument("--e2e-formats", default="parquet,json",
                    help="e2e inputs: parquet,json (default both), parquet-noschema (the Parquet files, "
                    "a source without a SCHEMA)")
    ap.add_argument("--e2e-upsert-batches", type=int, default=None,
                    help="change batches the upsert's fresh-process runs apply (default all; --quick: 2)")
    ap.add_argument("--index-keys", default=None, help="comma list of key counts for the index build (default 1M,10M)")
    ap.add_argument("--views-rows", type=int, default=None, help="rows of the views writer experiment (default 1M)")
    ap.add_argument("--kafka-records", type=int, default=None,
                    help="records pre-produced for the kafka section (default 10M, --quick 200k; at >= 10M "
                         "icesql also runs 1M for the flat-memory goal)")
    ap.add_argument("--kafka-flat-records", default=None,
                    help="comma list of smaller record counts icesql also runs for the flat-memory goal "
                         "(default 1M when --kafka-records >= 10M, else none; '' for none)")
    ap.add_argument("--kafka-latency-seconds", type=float, default=None,
                    help="seconds the kafka latency producer runs (default 60, --quick 20; 0: skip)")
    ap.add_argument("--kafka-latency-rate", type=int, default=10_000,
                    help="records/s the kafka latency producer sends (default 10,000: issue 54)")
    ap.add_argument("--kafka-avro-records", type=int, default=None,
                    help="records of the kafka_avro section (issue 52; default 2M, --quick 20k)")
    ap.add_argument("--kafka-avro-flat-records", default=None,
                    help="comma list of other record counts icesql's Avro run also reads for the flat-memory goal "
                         "(default 1M,10M; --quick 10k,50k; '' for none)")
    ap.add_argument("--kafka-broker", default="noida", choices=("noida", "tansu"),
                    help="the kafka section's broker (default noida-db; tansu: tansu 0.6.0 on memory://, which "
                         "sizes its Fetch answers by the fetch limits: the flat-memory goal's broker)")
    ap.add_argument("--upsert-kafka-broker", default="tansu", choices=("noida", "tansu"),
                    help="the broker of the upsert section's Kafka writers (default tansu 0.6.0 on memory://, which "
                         "like Apache Kafka appends and holds fetches; noida-db saves all its data after every "
                         "change, 9-15 s of a core during the writers' timed batches on these two cores)")
    ap.add_argument("--kafka-avro-broker", default="noida", choices=("noida", "tansu"),
                    help="the kafka_avro section's broker (default noida-db, as the kafka section; tansu: "
                         "tansu 0.6.0 on memory://)")
    ap.add_argument("--tables", type=int, default=None,
                    help="tables of the tables section (issue 53; default 100, --quick 10)")
    ap.add_argument("--table-changes", type=int, default=None,
                    help="changes per table of the tables section (default 20k, --quick 2k; plus a base of a quarter)")
    ap.add_argument("--tables-source-options", default="",
                    help="extra options of every icesql source of the tables section, e.g. "
                         "\"MAX BYTES PER TRIGGER = '256MiB'\" (default none)")
    ap.add_argument("--upsert-sink-options", default="",
                    help="the WITH options of every icesql sink of the upsert section, e.g. "
                         "'MAXIMUM DELETE FILES = 2' (default none: the sink's defaults)")
    ap.add_argument("--tables-sink-options", default="",
                    help="the WITH options of every icesql sink of the tables section, e.g. "
                         "\"COMMIT INTERVAL = '10m'\" (default none: every batch commits)")
    ap.add_argument("--pss", type=float, default=None, metavar="SECONDS",
                    help="also sample the process tree's PSS every SECONDS (costs the measured run CPU: off by default)")
    ap.add_argument("--conf", action="append", default=[], help="extra Spark setting key=value (every Spark run)")
    ap.add_argument("--data-dir", default="/tmp/icesql-bench/data", help="generated datasets (cached)")
    ap.add_argument("--work-dir", default="/tmp/icesql-bench/work", help="tables written by the runs")
    ap.add_argument("--keep", action="store_true", help="keep the written tables")
    ap.add_argument("--update-readme", action="store_true", help="write the tables into benchmarks/README.md")
    ap.add_argument("--render", metavar="JSON[,JSON...]", default=None,
                    help="only recompute ratios and tables from earlier results files (several: their sections "
                         "are combined, later files win; written to --out or the last file)")
    a = ap.parse_args(argv)
    if a.pss:
        from benchmarks import procmon

        procmon.PSS_EVERY = a.pss
    if a.render:
        srcs = [Path(x) for x in a.render.split(",")]
        runs = [json.loads(x.read_text()) for x in srcs]
        res = runs[-1]
        if len(runs) > 1:  # sections of later files win; every command is kept
            res = {**runs[-1], "sections": {}, "command": " ; ".join(r["command"] for r in runs),
                   "started": " + ".join(r["started"] for r in runs),
                   "total_seconds": sum(r.get("total_seconds", 0) for r in runs)}
            n_append = sum(1 for r in runs if "append" in r["sections"])
            for r in runs:
                secs = dict(r["sections"])
                if n_append > 1 and isinstance(secs.get("append"), dict):  # keep every dataset size
                    rows_n = (secs["append"].get("dataset") or {}).get("rows")
                    secs[f"append {rows_n:,}" if rows_n else "append ?"] = secs.pop("append")
                res["sections"].update(secs)
        res["ratios"] = compute_ratios(res["sections"])
        dst = Path(a.out) if a.out else srcs[-1]
        dst.write_text(json.dumps(res, indent=1, default=str))
        md = render_markdown(res)
        dst.with_suffix(".md").write_text(md)
        print(md)
        if a.update_readme:
            update_readme(md, dst)
        return 0
    only = [s.strip() for s in a.only.split(",") if s.strip()]
    bad = [s for s in only if s not in SECTIONS]
    if bad:
        ap.error(f"unknown section(s) {bad}; choose from {SECTIONS}")
    bad_formats = [x for x in a.write_formats.split(",") if x and x not in FILE_FORMATS]
    if bad_formats:
        ap.error(f"unknown format(s) {bad_formats}; choose from {','.join(FILE_FORMATS)}")
    bad_layouts = [x for x in a.layouts.split(",") if x and x not in ("unpartitioned", "day_ts")]
    if bad_layouts:
        ap.error(f"unknown layout(s) {bad_layouts}; choose from unpartitioned,day_ts")
    cfg = Config(a)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(a.out) if a.out else Path(__file__).resolve().parent / "results" / f"{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    cfg.work.mkdir(parents=True, exist_ok=True)
    cmd = "python benchmarks/run.py" + ("" if argv is None and len(sys.argv) == 1 else
                                        " " + shlex.join(sys.argv[1:] if argv is None else argv))
    res: dict[str, Any] = {"command": cmd, "started": stamp, "machine": machine_info(), "config": cfg.to_dict(),
                           "sections": {}}
    t0 = time.perf_counter()
    for s in only:
        try:
            if s == "append" and len(cfg.append_rows) > 1:  # one section per size, as --render combines them
                for n in cfg.append_rows:
                    res["sections"][f"append {n:,}"] = section_append(cfg, n)
                    out.write_text(json.dumps(res, indent=1, default=str))
                continue
            res["sections"][s] = SECTION_FUNCS[s](cfg)
        except Exception as e:  # noqa: BLE001 - one broken section must not lose the others
            import traceback

            traceback.print_exc()
            res["sections"][s] = {"status": "error", "error": f"{type(e).__name__}: {e}"}
        out.write_text(json.dumps(res, indent=1, default=str))  # partial results survive a crash
    res["total_seconds"] = round(time.perf_counter() - t0, 1)
    res["machine"]["loadavg_end"] = os.getloadavg()
    res["ratios"] = compute_ratios(res["sections"])
    out.write_text(json.dumps(res, indent=1, default=str))
    md = render_markdown(res)
    out.with_suffix(".md").write_text(md)
    print("\n" + md)
    print(f"results: {out} and {out.with_suffix('.md')}")
    if a.update_readme:
        update_readme(md, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
