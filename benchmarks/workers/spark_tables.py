"""Spark 3.5 + Iceberg Java (harness venv) for the many-tables benchmark (``benchmarks/tables.py``).

``merge_all``: one process for every table: create the table from its base (merge-on-read, as
``spark_iceberg.merge``), then one ``MERGE INTO`` of all its changes, the last change per key taken
by ``row_number()`` over ``seq`` inside the MERGE's source (a MERGE needs one source row per target
row; a CDC batch holds several changes of a key). ``verify``: each table's row count and checksum
(the sum of xxhash64 of every row's columns as text) against its expected Parquet.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.workers.common import spark_session

MOR = {"format-version": "2", "write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read",
       "write.merge.mode": "merge-on-read", "write.parquet.compression-codec": "zstd"}


def merge_sql(t: str, columns: list[str]) -> str:
    sets = ", ".join(f"t.{c} = s.{c}" for c in columns if c != "id")
    cols = ", ".join(columns)
    vals = ", ".join(f"s.{c}" for c in columns)
    return f"""
        MERGE INTO {t} t
        USING (SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY id ORDER BY seq DESC) AS rn__ FROM s)
               WHERE rn__ = 1) s
        ON t.id = s.id
        WHEN MATCHED AND s.op = 'D' THEN DELETE
        WHEN MATCHED THEN UPDATE SET {sets}
        WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT ({cols}) VALUES ({vals})
    """


def merge_all(tables: list[dict[str, Any]], workdir: str, conf: dict[str, str] | None = None) -> dict[str, Any]:
    wh = Path(workdir) / "warehouse"
    spark, session_s = spark_session("bench-tables-merge", iceberg_warehouse=str(wh), conf=conf)
    import pyspark

    create_s = merge_s = 0.0
    per: dict[str, float] = {}
    for t in tables:
        name = f"local.db.{t['name']}"
        t0 = time.perf_counter()
        w = spark.read.parquet(t["base"]).writeTo(name).using("iceberg")
        for k, v in MOR.items():
            w = w.tableProperty(k, v)
        w.create()
        t1 = time.perf_counter()
        spark.read.parquet(t["changes"]).createOrReplaceTempView("s")
        spark.sql(merge_sql(name, t["columns"]))
        t2 = time.perf_counter()
        create_s += t1 - t0
        merge_s += t2 - t1
        per[t["name"]] = round(t2 - t0, 3)
    out = {"engine": f"Spark {pyspark.__version__} + Iceberg Java: per table CREATE from its base + MERGE INTO "
                     "(merge-on-read), one process", "session_seconds": round(session_s, 2),
           "create_seconds": round(create_s, 2), "merge_seconds": round(merge_s, 2),
           "in_process_seconds": round(create_s + merge_s, 2), "table_seconds": per}
    spark.stop()
    return out


def _checksum(spark: Any, df: Any, columns: list[str]) -> tuple[int, int]:
    from pyspark.sql import functions as F

    text = [F.coalesce(F.col(c).cast("string"), F.lit("\\N")) for c in columns]
    h = F.xxhash64(F.concat_ws("|", *text)).cast("decimal(38,0)")
    row = df.select(h.alias("h")).agg(F.count(F.lit(1)).alias("n"), F.sum("h").alias("s")).collect()[0]
    return int(row.n), int(row.s or 0)


def verify(tables: list[dict[str, Any]]) -> dict[str, Any]:
    spark, session_s = spark_session("bench-tables-verify", iceberg_warehouse="/tmp")
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    for t in tables:
        loc = t["metadata"] if "://" in t["metadata"] else "file://" + t["metadata"]
        try:
            got = _checksum(spark, spark.read.format("iceberg").load(loc), t["columns"])
        except Exception as e:  # noqa: BLE001 - reported per table
            out[t["name"]] = {"match": False, "error": f"{type(e).__name__}: {e}"[:300]}
            continue
        exp = _checksum(spark, spark.read.parquet(t["expected"]), t["columns"])
        out[t["name"]] = {"match": got == exp, "rows": got[0], "expected_rows": exp[0],
                          **({} if got == exp else {"checksum": str(got[1]), "expected_checksum": str(exp[1])})}
    res = {"tables": out, "session_seconds": round(session_s, 2), "seconds": round(time.perf_counter() - t0, 2)}
    spark.stop()
    return res
