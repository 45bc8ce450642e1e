"""Helpers shared by the workers (standard library only at import time)."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HARNESS = Path(os.environ.get("ICESQL_HARNESS", "/tmp/icesql-harness"))
ICEBERG_JARS = [HARNESS / "jars/iceberg-spark-runtime.jar", HARNESS / "jars/jackson-iceberg-shaded.jar"]
MB = 2**20


def machine() -> str:
    """The machine line of a results file: platform, CPUs, Python."""
    import platform

    return f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def file_stats(paths: Iterable[str | Path] | None = None, *, root: str | Path | None = None,
               sizes: Iterable[int] | None = None, prefix: str = "") -> dict[str, Any]:
    """Count and size distribution of data files (given, or every ``*.parquet`` under ``root``)."""
    if sizes is None:
        if paths is None:
            paths = [p for p in Path(root).rglob("*.parquet") if not p.name.startswith(".")] if root else []
        sizes = [Path(p).stat().st_size for p in paths]
    sizes = sorted(sizes)
    if not sizes:
        return {prefix + "files": 0, prefix + "bytes": 0}
    return {
        prefix + "files": len(sizes),
        prefix + "bytes": sum(sizes),
        prefix + "file_mb_min": round(sizes[0] / MB, 3),
        prefix + "file_mb_median": round(statistics.median(sizes) / MB, 3),
        prefix + "file_mb_max": round(sizes[-1] / MB, 3),
    }


def throughput(rows: int, arrow_bytes: int, seconds: float) -> dict[str, Any]:
    return {
        "seconds": round(seconds, 3),
        "rows": rows,
        "rows_per_s": round(rows / seconds) if seconds > 0 else None,
        "mb_per_s": round(arrow_bytes / MB / seconds, 1) if seconds > 0 else None,
    }


def spark_session(app: str, *, iceberg_warehouse: str | None = None, conf: dict[str, str] | None = None,
                  jars: list[Path] | None = None) -> tuple[Any, float]:
    """A local SparkSession (same settings for every Spark baseline); returns it and its start time.

    ``iceberg_warehouse`` adds the harness Iceberg runtime and a Hadoop catalog ``local`` on that
    directory, plus the Iceberg SQL extensions (MERGE INTO).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    t0 = time.perf_counter()
    b = SparkSession.builder.appName(app)
    settings = {
        "spark.master": "local[*]",
        "spark.driver.memory": "4g",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.pyspark.python": sys.executable,
    }
    jars = list(jars or [])
    if iceberg_warehouse:
        jars += ICEBERG_JARS
        settings.update({
            "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            "spark.sql.catalog.local": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.local.type": "hadoop",
            "spark.sql.catalog.local.warehouse": str(iceberg_warehouse),
        })
    if jars:
        settings["spark.jars"] = ",".join(str(j) for j in jars)
    settings.update(conf or {})
    for k, v in settings.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark, time.perf_counter() - t0


def warm_up(spark: Any, files: list[str], scratch: str | Path) -> float:
    """Read one input file and write it as Parquet to ``scratch`` (then delete it), so the timed
    phase does not pay for class loading and the first JIT of the read and write paths (every
    Spark-based runner, icesql included, calls this before timing)."""
    import shutil

    t0 = time.perf_counter()
    spark.read.parquet(files[0]).write.mode("overwrite").parquet(str(scratch))
    shutil.rmtree(scratch, ignore_errors=True)
    return round(time.perf_counter() - t0, 2)


def latest_metadata(table_dir: str | Path) -> str:
    """Newest ``vN.metadata.json`` of a Hadoop-catalog table."""
    meta = sorted(Path(table_dir, "metadata").glob("v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0]))
    return str(meta[-1])
