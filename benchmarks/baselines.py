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


def run_worker(name: str, python: str, target: str, args: dict[str, Any], workdir: str | Path, *,
               timeout: float = 3600, env: dict[str, str] | None = None) -> dict[str, Any]:
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if not Path(python).exists():
        return {"name": name, "status": "n/a", "reason": f"interpreter {python} missing"}
    e = dict(os.environ)
    e.update({"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python, "PYTHONPATH": str(ROOT)})
    e.pop("SPARK_HOME", None)  # each venv brings its own Spark
    e.update(env or {})
    res = run_monitored([python, ENTRY, target, json.dumps(args)], env=e, cwd=str(workdir), timeout=timeout,
                        log_path=workdir / f"{name}.log")
    return {"name": name, **res}


def _append_args(ds: datagen.Dataset, workdir: Path, partitioned: bool, codec: str) -> dict[str, Any]:
    return {"files": ds.files, "rows": ds.rows, "arrow_bytes": ds.arrow_bytes, "workdir": str(workdir),
            "partitioned": partitioned, "codec": codec}


# ------------------------------------------------------------------------------------------ append
def spark_iceberg_append(ds: datagen.Dataset, workdir: Path, partitioned: bool = False, codec: str = "zstd",
                         conf: dict[str, str] | None = None) -> dict[str, Any]:
    if not harness_available():
        return {"name": "spark35_iceberg", "status": "n/a", "reason": "harness missing (iceberg-readers-setup)"}
    a = _append_args(ds, workdir, partitioned, codec) | {"conf": conf or {}}
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
                  conf: dict[str, str] | None = None) -> dict[str, Any]:
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    a = {"source_dir": ds.path, "files": ds.files, "rows": ds.rows, "arrow_bytes": ds.arrow_bytes,
         "home": str(home), "partitioned": partitioned, "codec": codec, "spark_conf": conf or {}}
    return run_worker("icesql", PROJECT_PY, "benchmarks.icesql_hooks:run_icesql_append", a, workdir)


# ------------------------------------------------------------------------------------------ upsert
def spark_iceberg_merge(u: datagen.UpsertDataset, workdir: Path, conf: dict[str, str] | None = None) -> dict[str, Any]:
    if not harness_available():
        return {"name": "spark35_merge", "status": "n/a", "reason": "harness missing"}
    a = {"base_files": u.base.files, "change_files": u.change_files, "expected_rows": u.expected_rows,
         "workdir": str(workdir), "conf": conf or {}}
    return run_worker("spark35_merge", HARNESS_PY, "spark_iceberg:merge", a, workdir)


def icesql_upsert(u: datagen.UpsertDataset, workdir: Path, conf: dict[str, str] | None = None) -> dict[str, Any]:
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    a = {"base_files": u.base.files, "base_dir": u.base.path, "change_files": u.change_files,
         "debezium_files": u.debezium_files, "expected_rows": u.expected_rows, "home": str(home),
         "spark_conf": conf or {}}
    return run_worker("icesql_upsert", PROJECT_PY, "benchmarks.icesql_hooks:run_icesql_upsert", a, workdir)


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
    assuming files are committed in arrival order; snapshots and data files per minute."""
    snaps = [s for s in _snapshots(metadata) if int(s.get("summary", {}).get("added-records", 0)) > 0]
    if not snaps or not arrivals:
        return {"snapshots": len(snaps)}
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
        "snapshots": len(snaps), "snapshots_per_min": round(len(window) / minutes, 1),
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
