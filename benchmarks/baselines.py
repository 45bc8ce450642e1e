"""Parent-side runners: each starts one worker in a child process and returns its result dict.

Every runner takes the dataset (``datagen.Dataset`` / ``UpsertDataset``) and a fresh work
directory, and returns a dict with at least ``name``, ``status`` (``ok`` / ``n/a`` / ``error``),
``seconds`` (the timed phase), ``wall_seconds`` (the whole child, JVM start included) and the
memory peaks of the child's process tree (see ``procmon``). The icesql runners call the hooks in
``icesql_hooks.py`` the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import datagen
from benchmarks.procmon import run_monitored
from benchmarks.workers.common import HARNESS

ROOT = Path(__file__).resolve().parent.parent
ENTRY = str(Path(__file__).resolve().parent / "workers" / "entry.py")
PROJECT_PY = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv/bin/python").exists() else sys.executable
HARNESS_PY = str(HARNESS / "venv" / "bin" / "python")


def harness_available() -> bool:
    return Path(HARNESS_PY).exists() and all(
        (HARNESS / "jars" / j).exists() for j in ("iceberg-spark-runtime.jar", "jackson-iceberg-shaded.jar")
    )


def _child_env(python: str, env: dict[str, str] | None = None) -> dict[str, str]:
    e = dict(os.environ)
    e.update({"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python, "PYTHONPATH": str(ROOT)})
    e.pop("SPARK_HOME", None)  # each venv brings its own Spark
    e.update(env or {})
    return e


def run_worker(name: str, python: str, target: str, args: dict[str, Any], workdir: str | Path, *,
               timeout: float = 3600, env: dict[str, str] | None = None) -> dict[str, Any]:
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if not Path(python).exists():
        return {"name": name, "status": "n/a", "reason": f"interpreter {python} missing"}
    res = run_monitored([python, ENTRY, target, json.dumps(args)], env=_child_env(python, env), cwd=str(workdir),
                        timeout=timeout, log_path=workdir / f"{name}.log")
    return {"name": name, **res}


def run_icesql_cli(name: str, home: Path, args: list[str], workdir: Path, *, timeout: float = 3600,
                   env: dict[str, str] | None = None) -> dict[str, Any]:
    """``icesql --home <home> <args>`` as a user runs it: a fresh process (``python -m icesql``, the
    console script's entry point, with this checkout on PYTHONPATH), its whole wall time and the
    peak RSS of its process tree (JVM and Python workers included). Output goes to ``<name>.log``."""
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = [PROJECT_PY, "-m", "icesql", "--home", str(home), *args]
    res = run_monitored(cmd, env=_child_env(PROJECT_PY, env), cwd=str(workdir), timeout=timeout,
                        log_path=workdir / f"{name}.log", result_line=False)
    return {"name": name, "command": "icesql --home <home> " + " ".join(args), **res}


def newest_metadata(table_dir: str | Path) -> str | None:
    """The newest metadata file of a table directory: Hadoop tables' ``vN.metadata.json`` and
    pyiceberg's ``NNNNN-<uuid>.metadata.json`` both start with their version number."""
    import re

    best: tuple[int, str] | None = None
    for p in Path(table_dir, "metadata").glob("*.metadata.json"):
        m = re.match(r"v?(\d+)", p.name)
        if m and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), str(p))
    return best[1] if best else None


def table_facts(metadata: str, columns: tuple[str, ...] = ("ts", "event_date", "price")) -> dict[str, Any]:
    """What a table holds, read from its manifests (pyiceberg, no data read): rows of the live data
    files, file sizes, delete files, snapshots, and the null counts of ``columns`` (a reader that
    failed to parse a value writes a null: the check that both sides read the input alike)."""
    from pyiceberg.table import StaticTable

    from benchmarks.workers.common import file_stats

    t = StaticTable.from_metadata(metadata)
    snap = t.current_snapshot()
    live = [e.data_file for m in (snap.manifests(t.io) if snap else [])
            for e in m.fetch_manifest_entry(t.io, discard_deleted=True)]
    data = [f for f in live if int(f.content) == 0]
    ids = {c: t.schema().find_field(c).field_id for c in columns if c in t.schema().column_names}
    out: dict[str, Any] = {"rows_in_table": sum(f.record_count for f in data), "snapshots": len(t.metadata.snapshots),
                           "metadata": metadata,
                           "nulls": {c: sum((f.null_value_counts or {}).get(i, 0) for f in data) for c, i in ids.items()}}
    out.update(file_stats(sizes=[f.file_size_in_bytes for f in data]))
    out.update(file_stats(sizes=[f.file_size_in_bytes for f in live if int(f.content) != 0], prefix="delete_"))
    return out


# The first bytes of a data file of each format (Parquet "PAR1", ORC "ORC", Avro object container "Obj\x01").
FORMAT_MAGIC = {"parquet": b"PAR1", "orc": b"ORC", "avro": b"Obj\x01"}


def _local_path(path: str) -> Path | None:
    """A data file's local path (``file:/x``, ``file:///x`` or ``/x``); None when not local."""
    if path.startswith("file:"):
        path = "/" + path.removeprefix("file:").lstrip("/")
    return Path(path) if path.startswith("/") else None


def _sniff(path: Path) -> str:
    """The format a file's first bytes say ('parquet' | 'orc' | 'avro'), or what they are."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        return f"unreadable ({type(e).__name__})"
    return next((fmt for fmt, magic in FORMAT_MAGIC.items() if head.startswith(magic)), f"unknown {head!r}")


def data_file_formats(metadata: str) -> dict[str, Any]:
    """The live data files of a table as its manifests list them (pyiceberg, no data read): count
    per manifest ``file_format``, per file name extension and per format the files' first bytes
    say (local files), their rows and bytes."""
    from collections import Counter

    from pyiceberg.table import StaticTable

    t = StaticTable.from_metadata(metadata)
    snap = t.current_snapshot()
    data = [e.data_file for m in (snap.manifests(t.io) if snap else [])
            for e in m.fetch_manifest_entry(t.io, discard_deleted=True) if int(e.data_file.content) == 0]
    fmts = Counter(str(getattr(f.file_format, "value", f.file_format)).lower() for f in data)
    exts = Counter(Path(f.file_path).suffix.lower().lstrip(".") or "(none)" for f in data)
    local = [_local_path(f.file_path) for f in data]
    magic = Counter(_sniff(p) if p else "not local" for p in local)
    return {"manifest_formats": dict(fmts), "file_extensions": dict(exts), "file_magic": dict(magic),
            "rows_in_manifests": sum(f.record_count for f in data), "data_files": len(data),
            "data_bytes": sum(f.file_size_in_bytes for f in data)}


def check_format(r: dict[str, Any], fmt: str, rows: int) -> dict[str, Any]:
    """Check a finished append wrote ``rows`` rows in data files of ``fmt`` only (manifests'
    ``file_format``, file extensions and the files' first bytes); otherwise the run becomes an
    error (``WRONG OUTPUT``) and loses its rate: a cell of the formats section must not report the
    speed of the wrong format."""
    if r.get("status") != "ok":
        return r
    problems: list[str] = []
    if not r.get("metadata"):
        problems.append("no table metadata in the result")
    else:
        try:
            r.update(data_file_formats(str(r["metadata"])))
        except Exception as e:  # noqa: BLE001 - reported as the cell's error
            problems.append(f"manifests unreadable: {type(e).__name__}: {e}"[:300])
    if not problems:
        for what in ("manifest_formats", "file_extensions", "file_magic"):
            if set(r[what]) != {fmt}:
                problems.append(f"{what} {r[what]}")
        if r["rows_in_manifests"] != rows:
            problems.append(f"{r['rows_in_manifests']} rows in the manifests, {rows} expected")
    if problems:
        r["status"] = "error"
        r["error"] = f"WRONG OUTPUT ({fmt} expected): " + "; ".join(problems)
        r["unverified_seconds"] = r.pop("seconds", None)
        for k in ("rows_per_s", "mb_per_s"):
            r.pop(k, None)
    else:
        r["format_verified"] = fmt
    return r


def _append_args(ds: datagen.Dataset, workdir: Path, partitioned: bool, codec: str) -> dict[str, Any]:
    return {"files": ds.files, "rows": ds.rows, "arrow_bytes": ds.arrow_bytes, "workdir": str(workdir),
            "partitioned": partitioned, "codec": codec}


# ------------------------------------------------------------------------------------------ append
def spark_iceberg_append(ds: datagen.Dataset, workdir: Path, partitioned: bool = False, codec: str = "zstd",
                         conf: dict[str, str] | None = None, fmt: str | None = None) -> dict[str, Any]:
    """Spark 3.5 + Iceberg Java appends ``ds`` to a new table; ``fmt`` ('parquet' | 'orc' | 'avro'):
    the table's ``write.format.default`` and ``write.<fmt>.compression-codec`` = ``codec``."""
    if not harness_available():
        return {"name": "spark35_iceberg", "status": "n/a", "reason": "harness missing (iceberg-readers-setup)"}
    a = _append_args(ds, workdir, partitioned, codec) | {"conf": conf or {}} | ({"fmt": fmt} if fmt else {})
    return run_worker("spark35_iceberg", HARNESS_PY, "spark_iceberg:append", a, workdir)


def spark_parquet_append(ds: datagen.Dataset, workdir: Path, partitioned: bool = False, codec: str = "zstd",
                         spark: str = "4", conf: dict[str, str] | None = None) -> dict[str, Any]:
    py = PROJECT_PY if spark == "4" else HARNESS_PY
    name = "spark4_parquet" if spark == "4" else "spark35_parquet"
    a = _append_args(ds, workdir, partitioned, codec) | {"conf": conf or {}}
    return run_worker(name, py, "spark_parquet:append", a, workdir)


def pyarrow_append(ds: datagen.Dataset, workdir: Path, partitioned: bool = False,
                   codec: str = "zstd") -> dict[str, Any]:
    return run_worker("pyarrow_parquet", PROJECT_PY, "pyarrow_write:append",
                      _append_args(ds, workdir, partitioned, codec), workdir)


def pyiceberg_append(ds: datagen.Dataset, workdir: Path, partitioned: bool = False,
                     codec: str = "zstd") -> dict[str, Any]:
    return run_worker("pyiceberg_append", PROJECT_PY, "pyiceberg_append:append",
                      _append_args(ds, workdir, partitioned, codec), workdir)


def icesql_append(ds: datagen.Dataset, workdir: Path, partitioned: bool = False, codec: str = "zstd",
                  conf: dict[str, str] | None = None, arrow: bool = True, fmt: str | None = None,
                  local: bool = False) -> dict[str, Any]:
    """icesql's APPEND sink; ``arrow=False`` runs it with ``ICESQL_ARROW_PATH=0`` (Spark's reader
    and the ``mapInArrow`` writer: the path before the Arrow-native data plane). ``fmt``
    ('parquet' | 'orc' | 'avro'): the sink's ``FORMAT``, ``codec`` in ``write.<fmt>.compression-codec``."""
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    a = {"source_dir": ds.path, "files": ds.files, "rows": ds.rows, "arrow_bytes": ds.arrow_bytes,
         "home": str(home), "partitioned": partitioned, "codec": codec, "spark_conf": conf or {}}
    if fmt:
        a["fmt"] = fmt
    if local:  # in this process without Spark: what `icesql run --once` does for a FILES append
        a["local"] = True
    name = "icesql" if arrow else "icesql_spark_path"
    r = run_worker(name, PROJECT_PY, "benchmarks.icesql_hooks:run_icesql_append", a, workdir,
                   env={"ICESQL_ARROW_PATH": "1" if arrow else "0"})
    want = "arrow" if arrow else "spark"
    if r.get("status") == "ok" and r.get("path") not in (None, want):
        r["warning"] = f"ran on the {r.get('path')} path, {want} expected"
    if local and r.get("status") == "ok" and r.get("spark_started"):
        r["warning"] = "asked to run without Spark, but the run started Spark"
    return r


# ------------------------------------------------------------------------------------------ upsert
def spark_iceberg_merge(u: datagen.UpsertDataset, workdir: Path, conf: dict[str, str] | None = None) -> dict[str, Any]:
    if not harness_available():
        return {"name": "spark35_merge", "status": "n/a", "reason": "harness missing"}
    a = {"base_files": u.base.files, "change_files": u.change_files, "expected_rows": u.expected_rows,
         "workdir": str(workdir), "conf": conf or {}}
    return run_worker("spark35_merge", HARNESS_PY, "spark_iceberg:merge", a, workdir)


def icesql_upsert(u: datagen.UpsertDataset, workdir: Path, conf: dict[str, str] | None = None, *,
                  running: bool = False, on_spark: bool = False, kafka: str | None = None,
                  format_version: int = 2, broker_pid: int | None = None,
                  trigger: float | None = None, sink_options: str = "") -> dict[str, Any]:
    """``running``: the sink left running (``Session.start``) while the batches arrive, instead of
    one ``run(once=True)`` per batch. ``format_version`` 3: an Iceberg v3 table (deletion vectors). ``on_spark``: the session is given a SparkSession (the sink
    runs as Spark's streaming query) instead of running in the worker's process without Spark.
    ``kafka``: the changes come from a Debezium topic on this broker instead of files
    (``broker_pid``: its process, whose CPU time during the timed batches is reported).
    ``trigger``: a running sink's trigger interval in seconds (``ICESQL_TRIGGER_INTERVAL``; 1 s
    unset). ``sink_options``: more WITH options of the upsert sink (``MAXIMUM DELETE FILES = 2``)."""
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    a = {"base_files": u.base.files, "base_dir": u.base.path, "change_files": u.change_files,
         "debezium_files": u.debezium_files, "expected_rows": u.expected_rows, "home": str(home),
         "spark_conf": conf or {}, "running": running, "on_spark": on_spark, "kafka": kafka,
         "format_version": format_version, "broker_pid": broker_pid, "sink_options": sink_options}
    name = (("icesql_running_upsert" if running else "icesql_upsert") + ("_on_spark" if on_spark else "")
            + ("_kafka" if kafka else "") + ("_v3" if format_version == 3 else "")
            + (f"_trigger_{int(trigger * 1000)}ms" if trigger else ""))
    env = {"ICESQL_TRIGGER_INTERVAL": str(trigger)} if trigger else None
    return run_worker(name, PROJECT_PY, "benchmarks.icesql_hooks:run_icesql_upsert", a, workdir, env=env)


READ_TIMEOUT_S = float(os.environ.get("ICESQL_BENCH_READ_TIMEOUT", "120"))


def read_duckdb(metadata: str, expected: str | None, workdir: Path, label: str,
                timeout: float = READ_TIMEOUT_S) -> dict[str, Any]:
    """DuckDB reads the table; capped at ``timeout`` s (DuckDB 1.5's iceberg extension took more than
    11 minutes on a 1M-row table with 10 equality-delete files; the cap reports it instead)."""
    # the harness venv carries the avro extension the iceberg extension needs; fall back to the project's
    py = HARNESS_PY if Path(HARNESS_PY).exists() else PROJECT_PY
    return run_worker(f"duckdb_read_{label}", py, "duckdb_read:read",
                      {"metadata": metadata, "expected": expected}, workdir, timeout=timeout)


def read_java(metadata: str, expected: str | None, workdir: Path, label: str) -> dict[str, Any]:
    if not harness_available():
        return {"name": f"java_read_{label}", "status": "n/a", "reason": "harness missing"}
    return run_worker(f"java_read_{label}", HARNESS_PY, "spark_iceberg:read",
                      {"metadata": metadata, "expected": expected, "scratch": str(workdir)}, workdir,
                      timeout=READ_TIMEOUT_S)


# ------------------------------------------------------------------------------------------ streaming
def _snapshots(metadata: str) -> list[dict[str, Any]]:
    m = json.loads(Path(metadata.removeprefix("file://")).read_text())
    return sorted(m.get("snapshots", []), key=lambda s: s["timestamp-ms"])


def streaming_metrics(metadata: str, arrivals: list[dict[str, Any]]) -> dict[str, Any]:
    """End-to-end latency (file renamed into place -> first snapshot holding all rows up to it),
    assuming files are committed in arrival order; snapshots and data files per minute.

    Only snapshots that bring new rows count: a compaction's rewrite (operation ``replace``, e.g. a
    running sink's maintenance) adds as many records as it removes, and counting them would make
    files look committed before they were."""
    all_snaps = _snapshots(metadata)
    rewrites = [s for s in all_snaps if s.get("summary", {}).get("operation") == "replace"]
    snaps = [s for s in all_snaps
             if s.get("summary", {}).get("operation") != "replace"
             and int(s.get("summary", {}).get("added-records", 0)) > 0]
    if not snaps or not arrivals:
        return {"snapshots": len(snaps), "rewrite_snapshots": len(rewrites)}
    cum: list[tuple[float, int]] = []
    total = 0
    for s in snaps:
        total += int(s["summary"]["added-records"])
        cum.append((s["timestamp-ms"] / 1000.0, total))
    lat: list[float] = []
    rows = 0
    j = 0
    for a in arrivals:
        rows += a["rows"]
        while j < len(cum) and cum[j][1] < rows:
            j += 1
        if j == len(cum):
            break
        lat.append(max(0.0, cum[j][0] - a["t"]))
    first, last = arrivals[0]["t"], cum[-1][0]
    minutes = max((last - first) / 60.0, 1e-9)
    window = [s for s in snaps if s["timestamp-ms"] / 1000.0 >= first]
    files = sum(int(s["summary"].get("added-data-files", 0)) for s in window)
    lat.sort()
    gaps = [b[0] - a[0] for a, b in zip(cum, cum[1:], strict=False)]
    return {
        "files_produced": len(arrivals), "rows_produced": rows, "rows_committed": total,
        "latency_p50_s": round(statistics.median(lat), 3) if lat else None,
        "latency_p99_s": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 3) if lat else None,
        "latency_n": len(lat),
        "snapshots": len(snaps), "rewrite_snapshots": len(rewrites),
        "snapshots_per_min": round(len(window) / minutes, 1),
        "data_files_per_min": round(files / minutes, 1),
        "commit_interval_p50_s": round(statistics.median(gaps), 3) if gaps else None,
    }


def run_streaming(name: str, python: str, target: str, args: dict[str, Any], workdir: Path, *,
                  duration_s: float, rows_per_file: int, interval_s: float) -> dict[str, Any]:
    """Start the streaming worker, wait for its ready file, produce files for ``duration_s``."""
    source = workdir / "inbox"
    source.mkdir(parents=True, exist_ok=True)
    ready = workdir / "ready"
    box: dict[str, Any] = {}
    t = threading.Thread(target=lambda: box.update(res=run_worker(
        name, python, target, {**args, "duration_s": duration_s + 3}, workdir,
        timeout=duration_s + 600)), daemon=True)
    t.start()
    deadline = time.time() + 300
    while not ready.exists() and t.is_alive() and time.time() < deadline:
        time.sleep(0.2)
    arrivals: list[dict[str, Any]] = []
    if ready.exists():
        arrivals = datagen.produce_stream(source, rows_per_file=rows_per_file, interval_s=interval_s,
                                          duration_s=duration_s)
    t.join()
    res = box.get("res", {"name": name, "status": "error", "error": "worker thread died"})
    if res.get("status") == "ok" and res.get("metadata"):
        res.update(streaming_metrics(res["metadata"], arrivals))
    res.update({"rows_per_file": rows_per_file, "file_interval_s": interval_s})
    return res


def spark_iceberg_streaming(workdir: Path, duration_s: float, rows_per_file: int, interval_s: float,
                            trigger: str = "1 second", conf: dict[str, str] | None = None) -> dict[str, Any]:
    if not harness_available():
        return {"name": "spark35_iceberg_stream", "status": "n/a", "reason": "harness missing"}
    a = {"source_dir": str(workdir / "inbox"), "workdir": str(workdir), "trigger": trigger,
         "conf": conf or {}, "schema_ddl": datagen.SPARK_DDL}
    return run_streaming("spark35_iceberg_stream", HARNESS_PY, "spark_iceberg:stream", a, workdir,
                         duration_s=duration_s, rows_per_file=rows_per_file, interval_s=interval_s)


def icesql_streaming(workdir: Path, duration_s: float, rows_per_file: int, interval_s: float,
                     min_size: str | None = None, conf: dict[str, str] | None = None) -> dict[str, Any]:
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    a = {"source_dir": str(workdir / "inbox"), "home": str(home), "max_period": "1s", "min_size": min_size,
         "ready_file": str(workdir / "ready"), "spark_conf": conf or {}}
    name = "icesql_stream" + ("_minsize" if min_size else "")
    return run_streaming(name, PROJECT_PY, "benchmarks.icesql_hooks:run_icesql_streaming", a, workdir,
                         duration_s=duration_s, rows_per_file=rows_per_file, interval_s=interval_s)


# ------------------------------------------------------------------------------------------ commit
def pyiceberg_commit(workdir: Path, catalog: str = "local", commits: int = 30,
                     rest: dict[str, str] | None = None, secret: str = "") -> dict[str, Any]:
    return run_worker(f"pyiceberg_commit_{catalog}", PROJECT_PY, "pyiceberg_append:commit_overhead",
                      {"workdir": str(workdir), "commits": commits, "catalog": catalog, "rest": rest},
                      workdir, env={"BENCH_REST_SECRET": secret})


def icesql_commit(workdir: Path, catalog: str = "local", commits: int = 30,
                  rest: dict[str, str] | None = None, secret: str = "") -> dict[str, Any]:
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    return run_worker(f"icesql_commit_{catalog}", PROJECT_PY, "benchmarks.icesql_hooks:measure_commit_overhead",
                      {"home": str(home), "catalog": catalog, "commits": commits, "rest": rest},
                      workdir, env={"BENCH_REST_SECRET": secret})


# ------------------------------------------------------------------------------------------ end to end
# Fresh processes as a user runs them: ``seconds`` is the whole process wall time (Python and JVM
# start, SparkSession, table creation, the write and the commit); nothing is warmed up.

NO_SCHEMA = "parquet-noschema"  # the e2e input: the Parquet files, a source without a SCHEMA (issue 54)


def e2e_append_script(path: Path, source_dir: str, fmt: str, warehouse: Path, partitioned: bool,
                      codec: str = "zstd") -> Path:
    """The script a user would write for the append: a local catalog, a FILES source with the
    benchmark schema, an APPEND sink (``IF NOT EXISTS``: the same script runs again and again)."""
    part = " PARTITION BY (day(ts))" if partitioned else ""
    # parquet-noschema: the Parquet files as most users declare them, the schema from their footers
    options = "FORMAT = 'parquet'" if fmt == NO_SCHEMA else f"FORMAT = '{fmt}', SCHEMA = '{datagen.SPARK_DDL}'"
    path.write_text(
        f"CREATE CONNECTION IF NOT EXISTS cat TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{warehouse}');\n"
        f"CREATE SOURCE IF NOT EXISTS src FROM FILES '{source_dir}'\n"
        f"  ({options});\n"
        f"CREATE SINK IF NOT EXISTS k FROM src INTO ICEBERG CATALOG cat (NAMESPACE = 'bench', TABLE = 't')\n"
        f"  MODE APPEND{part} WITH (PROPERTIES = ('write.parquet.compression-codec' = '{codec}'));\n")
    return path


def _conf_args(conf: dict[str, str] | None) -> list[str]:
    """The baselines' Spark settings (``workers.common.spark_session``) as ``icesql --conf`` flags,
    so both fresh processes run with the same Spark settings."""
    settings = {"spark.driver.memory": "4g", **(conf or {})}
    return [a for k, v in settings.items() for a in ("--conf", f"{k}={v}")]


def _e2e_facts(r: dict[str, Any], table_dir: Path, rows: int) -> dict[str, Any]:
    r["seconds"] = r.get("wall_seconds")  # the figure of an end-to-end run: the whole process
    meta = newest_metadata(table_dir)
    if r.get("status") == "ok" and meta:
        try:
            r.update(table_facts(meta))
        except Exception as e:  # noqa: BLE001 - reported, the run's time stays
            r["facts_error"] = f"{type(e).__name__}: {e}"[:300]
        if r.get("rows_in_table") != rows:
            r["status"] = "error"
            r["error"] = f"table holds {r.get('rows_in_table')} rows, {rows} expected"
        elif any(r.get("nulls", {}).values()):
            r["warning"] = f"nulls where the input has none: {r['nulls']} (a value was not parsed)"
    if r.get("seconds") and r.get("status") == "ok":
        r["rows_per_s"] = round(rows / r["seconds"])
    return r


def icesql_e2e_append(ds: datagen.Dataset, fmt: str, workdir: Path, partitioned: bool = False,
                      codec: str = "zstd", conf: dict[str, str] | None = None,
                      env: dict[str, str] | None = None) -> dict[str, Any]:
    """``icesql --home <fresh> run append.sql --once`` on ``ds`` (``fmt``: parquet | json)."""
    home, wh = workdir / "home", workdir / "warehouse"
    wh.mkdir(parents=True, exist_ok=True)
    script = e2e_append_script(workdir / "append.sql", ds.path, fmt, wh, partitioned, codec)
    r = run_icesql_cli("icesql_cli", home, ["run", str(script), "--once", *_conf_args(conf)], workdir, env=env)
    r.update({"format": fmt, "partitioned": partitioned, "rows": ds.rows})
    return _e2e_facts(r, wh / "bench" / "t", ds.rows)


def spark_iceberg_e2e_append(ds: datagen.Dataset, fmt: str, workdir: Path, partitioned: bool = False,
                             codec: str = "zstd", conf: dict[str, str] | None = None) -> dict[str, Any]:
    """A fresh Spark 3.5 + Iceberg Java process reading ``ds`` and appending it to a new table."""
    if not harness_available():
        return {"name": "spark35_iceberg_submit", "status": "n/a", "reason": "harness missing"}
    # the Java job reads the Parquet files with the schema given, as such a job is written
    a = {"files": ds.files, "fmt": "parquet" if fmt == NO_SCHEMA else fmt, "schema_ddl": datagen.SPARK_DDL,
         "workdir": str(workdir),
         "partitioned": partitioned, "codec": codec, "conf": conf or {}}
    r = run_worker("spark35_iceberg_submit", HARNESS_PY, "spark_iceberg:e2e_append", a, workdir)
    r.update({"format": fmt, "partitioned": partitioned, "rows": ds.rows})
    return _e2e_facts(r, workdir / "warehouse" / "bench" / "t", ds.rows)


def _copy_in(src: str, inbox: Path) -> None:
    tmp = inbox / ("." + Path(src).name + ".tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, inbox / Path(src).name)


def icesql_e2e_upsert(u: datagen.UpsertDataset, workdir: Path, conf: dict[str, str] | None = None,
                      batches: int | None = None, kafka: str | None = None, sink_options: str = "") -> dict[str, Any]:
    """The upsert as a scheduled job runs it: per change batch, the Debezium file lands in the inbox
    and a fresh ``icesql --home <home> run upsert.sql --once`` applies it (the sum of the processes'
    wall times is ``seconds``). Set-up (untimed, recorded): one run on the empty inbox creates the
    table (KEY (id) as its identifier field), ``load.sql`` appends the base rows. ``kafka`` (a
    bootstrap address): the batch's lines are produced to a Debezium topic instead (one transaction,
    untimed) and the source reads the topic. ``sink_options``: more WITH options of the upsert sink."""
    home, wh, inbox = workdir / "home", workdir / "warehouse", workdir / "inbox"
    for d in (wh, inbox):
        d.mkdir(parents=True, exist_ok=True)
    conn = f"CREATE CONNECTION IF NOT EXISTS cat TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');\n"
    target = "INTO ICEBERG CATALOG cat (NAMESPACE = 'bench', TABLE = 'u')"
    upsert = workdir / "upsert.sql"
    producer = None
    if kafka:
        from benchmarks.kafka import FileProducer

        producer = FileProducer(kafka, "changes_e2e")
        source = (f"CREATE CONNECTION IF NOT EXISTS k TO KAFKA (BROKER = '{kafka}');\n"
                  f"CREATE SOURCE IF NOT EXISTS ch FROM KAFKA CONNECTION k (TOPIC = 'changes_e2e', "
                  f"FORMAT = 'debezium-json', SCHEMA = '{datagen.SPARK_DDL}');\n")
    else:
        source = (f"CREATE SOURCE IF NOT EXISTS ch FROM FILES '{inbox}' (FORMAT = 'debezium-json', "
                  f"SCHEMA = '{datagen.SPARK_DDL}');\n")
    with_ = f" WITH ({sink_options})" if sink_options else ""
    upsert.write_text(conn + source + f"CREATE SINK IF NOT EXISTS u FROM ch {target} KEY (id) MODE UPSERT{with_};\n")
    load = workdir / "load.sql"
    load.write_text(conn + f"CREATE SOURCE IF NOT EXISTS base FROM FILES '{u.base.path}' (FORMAT = 'parquet', "
                    f"SCHEMA = '{datagen.SPARK_DDL}');\nCREATE SINK IF NOT EXISTS load FROM base {target} "
                    "MODE APPEND;\n")
    conf_args = _conf_args(conf)
    out: dict[str, Any] = {"name": "icesql_e2e", "engine": "icesql run --once, one fresh process per batch"
                           + (", from a Debezium Kafka topic" if kafka else "")}
    for step, script in (("create", upsert), ("load", load)):
        r = run_icesql_cli(f"icesql_e2e_{step}", home, ["run", str(script), "--once", *conf_args], workdir)
        out[f"{step}_wall_seconds"] = r.get("wall_seconds")
        if r.get("status") != "ok":
            return {**out, "status": "error", "error": f"{step}: {r.get('error')}", "stderr_tail": r.get("stderr_tail")}
    walls: list[float] = []
    peaks: list[float] = []
    for i, f in enumerate(u.debezium_files[:batches]):
        if producer is not None:
            producer.send(f)
        else:
            _copy_in(f, inbox)
        r = run_icesql_cli(f"icesql_e2e_batch{i:03d}", home, ["run", str(upsert), "--once", *conf_args], workdir)
        if r.get("status") != "ok":
            return {**out, "status": "error", "error": f"batch {i}: {r.get('error')}",
                    "stderr_tail": r.get("stderr_tail"), "batch_wall_seconds": walls}
        walls.append(r["wall_seconds"])
        peaks.append(r.get("peak_rss_mb") or 0)
    return {**out, **_batch_summary(walls, peaks, u, newest_metadata(wh / "bench" / "u"))}


def _batch_summary(walls: list[float], peaks: list[float], u: datagen.UpsertDataset,
                   meta: str | None) -> dict[str, Any]:
    changes = len(walls) * u.batch_size
    secs = sum(walls)
    return {"status": "ok", "seconds": round(secs, 2), "batches": len(walls), "changes": changes,
            "changes_per_s": round(changes / secs) if secs else None,
            "batch_wall_seconds": walls, "batch_p50_s": round(statistics.median(walls), 2) if walls else None,
            "peak_rss_mb": max(peaks) if peaks else None, "metadata": meta,
            "note": "seconds = sum of the per-batch processes' wall times (JVM start included)"}


def spark_iceberg_e2e_merge(u: datagen.UpsertDataset, workdir: Path, conf: dict[str, str] | None = None,
                            batches: int | None = None) -> dict[str, Any]:
    """The same batches by Spark 3.5 + Iceberg Java: one fresh process per ``MERGE INTO`` (the base
    loaded by a set-up process, untimed)."""
    if not harness_available():
        return {"name": "spark35_merge_e2e", "status": "n/a", "reason": "harness missing"}
    out: dict[str, Any] = {"name": "spark35_merge_e2e",
                           "engine": "Spark 3.5 + Iceberg Java MERGE INTO, one fresh process per batch"}
    r = run_worker("spark35_merge_e2e_setup", HARNESS_PY, "spark_iceberg:e2e_merge_setup",
                   {"base_files": u.base.files, "workdir": str(workdir), "conf": conf or {}}, workdir)
    out["load_wall_seconds"] = r.get("wall_seconds")
    if r.get("status") != "ok":
        return {**out, "status": "error", "error": f"setup: {r.get('error')}"}
    walls: list[float] = []
    peaks: list[float] = []
    for i, f in enumerate(u.change_files[:batches]):
        r = run_worker(f"spark35_merge_e2e_batch{i:03d}", HARNESS_PY, "spark_iceberg:e2e_merge_batch",
                       {"change_file": f, "workdir": str(workdir), "conf": conf or {}}, workdir)
        if r.get("status") != "ok":
            return {**out, "status": "error", "error": f"batch {i}: {r.get('error')}", "batch_wall_seconds": walls}
        walls.append(r["wall_seconds"])
        peaks.append(r.get("peak_rss_mb") or 0)
    return {**out, **_batch_summary(walls, peaks, u, newest_metadata(workdir / "warehouse" / "bench" / "u"))}


# ------------------------------------------------------------------------------------------ upsert reads
def read_datafusion(metadata: str, expected: str | None, workdir: Path, label: str,
                    timeout: float = READ_TIMEOUT_S) -> dict[str, Any]:
    return run_worker(f"datafusion_read_{label}", PROJECT_PY, "datafusion_read:read",
                      {"metadata": metadata, "expected": expected}, workdir, timeout=timeout)


def reference_table(metadata: str, expected: str, workdir: Path, codec: str = "zstd") -> dict[str, Any]:
    """The compacted reference: the expected rows in one append to a fresh table with the same schema
    (``workers/pyiceberg_append.reference_table``); the measured table is never compacted."""
    return run_worker("compacted_reference", PROJECT_PY, "pyiceberg_append:reference_table",
                      {"metadata": metadata, "expected": expected, "workdir": str(workdir), "codec": codec},
                      workdir)


# ------------------------------------------------------------------------------------------ key index
INDEX_NA = "n/a until the key index lands (no icesql.engine.index.build)"


def index_available() -> bool:
    """Whether this checkout's engine has the key index builder (looked up without importing it)."""
    import importlib.util

    try:
        return importlib.util.find_spec("icesql.engine.index.build") is not None
    except ImportError:
        return False


def icesql_index_build(ds: datagen.Dataset, workdir: Path, conf: dict[str, str] | None = None) -> dict[str, Any]:
    """The key index rebuild of a ``ds.rows``-key table: set-up process (pyiceberg writes the table,
    untimed), then the measured process (SparkSession + ``build_index``; peak RSS of its tree)."""
    if not index_available():  # no set-up for nothing (the hook says the same in its own process)
        return {"name": "icesql_index_build", "status": "n/a", "reason": INDEX_NA}
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    prep = run_worker("icesql_index_prepare", PROJECT_PY, "benchmarks.icesql_hooks:prepare_index_table",
                      {"files": ds.files, "rows": ds.rows, "home": str(home)}, workdir)
    if prep.get("status") != "ok":
        return {**prep, "name": "icesql_index_build"}
    r = run_worker("icesql_index_build", PROJECT_PY, "benchmarks.icesql_hooks:measure_index_build",
                   {"home": str(home), "keys": ds.rows, "spark_conf": conf or {}}, workdir)
    r["prepare_seconds"] = prep.get("seconds")
    return r


# ------------------------------------------------------------------------------------------ views writer
def views_write(ds: datagen.Dataset, workdir: Path, method: str, partitioned: bool = False, codec: str = "zstd",
                conf: dict[str, str] | None = None) -> dict[str, Any]:
    """The Spark-path writer experiment (``workers/views_writer.py``): ``method`` = ``mapinarrow``
    (today's BatchWriter) or ``spark_writer`` (Spark's Parquet writer + footer statistics)."""
    a = {"files": ds.files, "rows": ds.rows, "arrow_bytes": ds.arrow_bytes, "workdir": str(workdir),
         "method": method, "partitioned": partitioned, "codec": codec, "conf": conf or {}}
    return run_worker(f"views_{method}", PROJECT_PY, "views_writer:write", a, workdir)
