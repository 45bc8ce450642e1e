"""Spark's own Parquet writer (a physical-limit proxy): the same input, no table format.

Partitioned variant: Hive-style ``partitionBy(ts_day)`` with ``ts_day = to_date(ts)`` in UTC,
the plain-Parquet equivalent of Iceberg's ``day(ts)``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.workers.common import file_stats, spark_session, throughput, warm_up


def append(files: list[str], rows: int, arrow_bytes: int, workdir: str, partitioned: bool = False,
           codec: str = "zstd", conf: dict[str, str] | None = None) -> dict[str, Any]:
    import pyspark
    from pyspark.sql.functions import col, to_date

    conf = {"spark.sql.parquet.compression.codec": codec, **(conf or {})}
    spark, session_s = spark_session("bench-spark-parquet", conf=conf)
    out_dir = Path(workdir) / "out"
    warm_s = warm_up(spark, files, Path(workdir) / "warmup")
    df = spark.read.parquet(*files)
    t0 = time.perf_counter()
    if partitioned:
        df.withColumn("ts_day", to_date(col("ts"))).write.partitionBy("ts_day").parquet(str(out_dir))
    else:
        df.write.parquet(str(out_dir))
    secs = time.perf_counter() - t0
    out = throughput(rows, arrow_bytes, secs)
    out.update(file_stats(root=out_dir))
    out.update({"engine": f"Spark {pyspark.__version__} Parquet writer", "session_seconds": round(session_s, 2), "warmup_seconds": warm_s,
                "codec": codec, "partitioned": partitioned})
    spark.stop()
    return out
