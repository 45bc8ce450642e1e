"""Spark 3.5 + the Iceberg Java library (harness venv): append, MERGE INTO, read, streaming.

Catalog: Iceberg's Hadoop catalog ``local`` on a local warehouse directory (no catalog
service, the cheapest Java commit path). Tables are format version 2 with the codec given
(default zstd, Iceberg's own default) and otherwise default properties
(``write.target-file-size-bytes`` 512 MiB, ``write.distribution-mode`` hash for partitioned tables).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.workers.common import file_stats, latest_metadata, spark_session, throughput, warm_up

COLS = ["id", "ts", "category", "payload", "amount", "qty", "event_date", "active", "price", "user_id"]


def _iceberg_files(spark: Any, table: str) -> dict[str, Any]:
    rows = spark.sql(f"SELECT content, file_size_in_bytes FROM {table}.files").collect()
    data = [r.file_size_in_bytes for r in rows if r.content == 0]
    deletes = [r.file_size_in_bytes for r in rows if r.content != 0]
    out = file_stats(sizes=data)
    out.update(file_stats(sizes=deletes, prefix="delete_"))
    out["snapshots"] = spark.sql(f"SELECT count(*) AS n FROM {table}.snapshots").collect()[0].n
    return out


def table_properties(codec: str, fmt: str | None = None) -> dict[str, str]:
    """The appended table's properties: format version 2 and ``codec`` for the data files'
    format; ``fmt`` ('parquet' | 'orc' | 'avro', the formats section) also sets
    ``write.format.default`` (without it Iceberg writes Parquet, its default)."""
    props = {"format-version": "2", f"write.{fmt or 'parquet'}.compression-codec": codec}
    if fmt:
        props["write.format.default"] = fmt
    return props


def append(files: list[str], rows: int, arrow_bytes: int, workdir: str, partitioned: bool = False,
           codec: str = "zstd", conf: dict[str, str] | None = None, fmt: str | None = None) -> dict[str, Any]:
    """Append the Parquet ``files`` to a new table ``local.bench.t`` (timed: the append alone; the
    table is created empty first). ``fmt``: the data files' format (``write.format.default``)."""
    wh = Path(workdir) / "warehouse"
    spark, session_s = spark_session("bench-iceberg-append", iceberg_warehouse=str(wh), conf=conf)
    import pyspark
    from pyspark.sql.functions import col, days

    warm_s = warm_up(spark, files, Path(workdir) / "warmup")
    df = spark.read.parquet(*files)
    t0 = time.perf_counter()
    w = df.limit(0).writeTo("local.bench.t").using("iceberg")
    for k, v in table_properties(codec, fmt).items():
        w = w.tableProperty(k, v)
    if partitioned:
        w = w.partitionedBy(days(col("ts")))
    w.create()
    create_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    df.writeTo("local.bench.t").append()
    secs = time.perf_counter() - t0
    out = throughput(rows, arrow_bytes, secs)
    n = spark.table("local.bench.t").count()
    out.update(_iceberg_files(spark, "local.bench.t"))
    out.update({
        "engine": f"Spark {pyspark.__version__} + Iceberg Java (Hadoop catalog)",
        "session_seconds": round(session_s, 2), "create_seconds": round(create_s, 2),
        "warmup_seconds": warm_s,
        "rows_in_table": n, "codec": codec, "partitioned": partitioned, "file_format": fmt or "parquet",
        "metadata": latest_metadata(wh / "bench" / "t"),
    })
    spark.stop()
    return out


def merge_sql(t: str, source: str = "s") -> str:
    """One change batch (``op`` I/U/D, one change per key) into ``t`` with MERGE INTO."""
    sets = ", ".join(f"t.{c} = s.{c}" for c in COLS if c != "id")
    cols = ", ".join(COLS)
    vals = ", ".join(f"s.{c}" for c in COLS)
    return f"""
        MERGE INTO {t} t USING {source} s ON t.id = s.id
        WHEN MATCHED AND s.op = 'D' THEN DELETE
        WHEN MATCHED THEN UPDATE SET {sets}
        WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT ({cols}) VALUES ({vals})
    """


MOR = {"format-version": "2", "write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read",
       "write.merge.mode": "merge-on-read"}


def merge(base_files: list[str], change_files: list[str], expected_rows: int, workdir: str,
          conf: dict[str, str] | None = None, codec: str = "zstd") -> dict[str, Any]:
    """Load the base, then one ``MERGE INTO`` per change batch (merge-on-read, position deletes)."""
    wh = Path(workdir) / "warehouse"
    spark, session_s = spark_session("bench-iceberg-merge", iceberg_warehouse=str(wh), conf=conf)
    import pyspark

    t = "local.bench.u"
    warm_s = warm_up(spark, base_files, Path(workdir) / "warmup")
    base = spark.read.parquet(*base_files)
    t0 = time.perf_counter()
    (base.writeTo(t).using("iceberg")
     .tableProperty("format-version", "2")
     .tableProperty("write.parquet.compression-codec", codec)
     .tableProperty("write.delete.mode", "merge-on-read")
     .tableProperty("write.update.mode", "merge-on-read")
     .tableProperty("write.merge.mode", "merge-on-read")
     .create())
    load_s = time.perf_counter() - t0
    per_batch: list[float] = []
    changes = 0
    for f in change_files:
        src = spark.read.parquet(f)
        src.createOrReplaceTempView("s")
        changes += src.count()  # outside the timed part; keeps the file in the page cache, as for icesql
        t0 = time.perf_counter()
        spark.sql(merge_sql(t))
        per_batch.append(time.perf_counter() - t0)
    secs = sum(per_batch)
    n = spark.table(t).count()
    out = {
        "engine": f"Spark {pyspark.__version__} + Iceberg Java MERGE INTO (merge-on-read)",
        "seconds": round(secs, 3), "changes": changes,
        "changes_per_s": round(changes / secs) if secs else None,
        "batch_seconds": [round(x, 3) for x in per_batch],
        "batch_p50_s": round(sorted(per_batch)[len(per_batch) // 2], 3) if per_batch else None,
        "load_seconds": round(load_s, 2), "session_seconds": round(session_s, 2), "warmup_seconds": warm_s,
        "rows_in_table": n, "expected_rows": expected_rows, "rows_match": n == expected_rows,
        "metadata": latest_metadata(wh / "bench" / "u"),
    }
    out.update(_iceberg_files(spark, t))
    spark.stop()
    return out


def read(metadata: str, expected: str | None = None, conf: dict[str, str] | None = None,
         scratch: str | None = None) -> dict[str, Any]:
    """The Java reader: count, then a full scan of every column (noop sink), then an exact compare
    (after the usual warm-up on the expected Parquet file, when given)."""
    spark, session_s = spark_session("bench-iceberg-read", iceberg_warehouse="/tmp", conf=conf)
    loc = metadata if "://" in metadata else "file://" + metadata
    warm_s = warm_up(spark, [expected], Path(scratch) / "warmup") if expected and scratch else None
    t0 = time.perf_counter()
    n = spark.read.format("iceberg").load(loc).count()
    count_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    spark.read.format("iceberg").load(loc).write.format("noop").mode("overwrite").save()
    scan_s = time.perf_counter() - t0
    out: dict[str, Any] = {"engine": "Iceberg Java 1.10 via Spark 3.5", "rows": n,
                           "count_seconds": round(count_s, 3), "seconds": round(scan_s, 3),
                           "session_seconds": round(session_s, 2), "warmup_seconds": warm_s}
    if expected:
        t0 = time.perf_counter()
        got = spark.read.format("iceberg").load(loc).select(*COLS)
        exp = spark.read.parquet(expected).select(*COLS)
        missing = exp.exceptAll(got).count()
        extra = got.exceptAll(exp).count()
        out.update({"verify_seconds": round(time.perf_counter() - t0, 2), "missing_rows": missing,
                    "extra_rows": extra, "matches_expected": missing == 0 and extra == 0})
    spark.stop()
    return out


def stream(source_dir: str, workdir: str, duration_s: float, trigger: str = "1 second",
           conf: dict[str, str] | None = None, codec: str = "zstd", schema_ddl: str = "") -> dict[str, Any]:
    """Structured Streaming from a Parquet directory into Iceberg, trigger = ``trigger``.

    Runs for ``duration_s`` (the parent produces files meanwhile), then stops; the parent computes
    latencies from the snapshot log (``metadata``) and its arrival log.
    """
    wh = Path(workdir) / "warehouse"
    spark, session_s = spark_session("bench-iceberg-stream", iceberg_warehouse=str(wh), conf=conf)
    import pyspark

    spark.sql(f"CREATE TABLE local.bench.s ({schema_ddl}) USING iceberg "
              f"TBLPROPERTIES ('format-version'='2', 'write.parquet.compression-codec'='{codec}')")
    src = spark.readStream.schema(schema_ddl).parquet(source_dir)
    q = (src.writeStream.format("iceberg").outputMode("append").trigger(processingTime=trigger)
         .option("checkpointLocation", str(Path(workdir) / "checkpoint")).toTable("local.bench.s"))
    deadline = time.time() + 120
    while not q.recentProgress and time.time() < deadline:  # the first (empty) trigger ran
        time.sleep(0.1)
    Path(workdir, "ready").write_text(str(time.time()))
    t0 = time.time()
    while time.time() - t0 < duration_s:
        time.sleep(0.5)
    q.processAllAvailable()
    q.stop()
    out = {"engine": f"Spark {pyspark.__version__} + Iceberg Java Structured Streaming",
           "session_seconds": round(session_s, 2), "trigger": trigger,
           "metadata": latest_metadata(wh / "bench" / "s"),
           "rows_in_table": spark.table("local.bench.s").count()}
    out.update(_iceberg_files(spark, "local.bench.s"))
    spark.stop()
    return out


# ------------------------------------------------------------------------------------------ end to end
# Fresh processes as a user runs them (``run.py --only e2e`` and the upsert section's e2e part):
# the parent times the whole process; nothing is warmed up, the SparkSession start is included.


def e2e_append(files: list[str], fmt: str, schema_ddl: str, workdir: str, partitioned: bool = False,
               codec: str = "zstd", conf: dict[str, str] | None = None) -> dict[str, Any]:
    """Read ``files`` (``parquet`` / ``json``, with ``schema_ddl``) and append them to a new Iceberg
    table (Hadoop catalog): what a ``spark-submit`` job of Spark 3.5 + Iceberg Java does."""
    t_start = time.perf_counter()
    wh = Path(workdir) / "warehouse"
    spark, session_s = spark_session("bench-iceberg-e2e", iceberg_warehouse=str(wh), conf=conf)
    import pyspark

    part = "PARTITIONED BY (days(ts))" if partitioned else ""
    spark.sql(f"CREATE TABLE local.bench.t ({schema_ddl}) USING iceberg {part} "
              f"TBLPROPERTIES ('format-version'='2', 'write.parquet.compression-codec'='{codec}')")
    t0 = time.perf_counter()
    spark.read.schema(schema_ddl).format(fmt).load(files).writeTo("local.bench.t").append()
    write_s = time.perf_counter() - t0
    out = {"engine": f"Spark {pyspark.__version__} + Iceberg Java (Hadoop catalog), fresh process",
           "format": fmt, "partitioned": partitioned, "session_seconds": round(session_s, 2),
           "write_seconds": round(write_s, 3), "metadata": latest_metadata(wh / "bench" / "t")}
    spark.stop()
    out["in_process_seconds"] = round(time.perf_counter() - t_start, 3)
    return out


def e2e_merge_setup(base_files: list[str], workdir: str, conf: dict[str, str] | None = None,
                    codec: str = "zstd") -> dict[str, Any]:
    """The MERGE target with the base rows (merge-on-read), untimed set-up of the e2e upsert."""
    wh = Path(workdir) / "warehouse"
    spark, session_s = spark_session("bench-iceberg-merge-setup", iceberg_warehouse=str(wh), conf=conf)
    w = spark.read.parquet(*base_files).writeTo("local.bench.u").using("iceberg")
    for k, v in {**MOR, "write.parquet.compression-codec": codec}.items():
        w = w.tableProperty(k, v)
    w.create()
    out = {"session_seconds": round(session_s, 2), "metadata": latest_metadata(wh / "bench" / "u")}
    spark.stop()
    return out


def e2e_merge_batch(change_file: str, workdir: str, conf: dict[str, str] | None = None) -> dict[str, Any]:
    """One change batch by ``MERGE INTO`` in a fresh process (as a scheduled job would run it)."""
    wh = Path(workdir) / "warehouse"
    spark, session_s = spark_session("bench-iceberg-merge-batch", iceberg_warehouse=str(wh), conf=conf)
    spark.read.parquet(change_file).createOrReplaceTempView("s")
    t0 = time.perf_counter()
    spark.sql(merge_sql("local.bench.u"))
    out = {"session_seconds": round(session_s, 2), "merge_seconds": round(time.perf_counter() - t0, 3),
           "metadata": latest_metadata(wh / "bench" / "u")}
    spark.stop()
    return out
