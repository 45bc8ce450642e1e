"""The Spark-path writer experiment: how a view's (or a Spark table's) rows become Iceberg data files.

Views and Spark tables keep Spark's row path (only FILES sources have the Arrow-native one). Two
ways to write the same DataFrame into the same icesql table, both ending in icesql's commit
(``icesql.engine.commit.snapshot.commit``, one append snapshot):

* ``mapinarrow`` -- today's path: ``icesql.engine.sink.batch.BatchWriter`` (the sink's writer of a
  micro-batch): ``mapInArrow`` hands the rows to Python workers, where ``DataFileWriter`` writes
  Parquet with field ids and computes the statistics while writing.
* ``spark_writer`` -- Spark 4's own Parquet writer: each column carries its Iceberg field id in
  the ``parquet.field.id`` column metadata (Spark writes it into the file schema,
  ``spark.sql.parquet.fieldId.write.enabled``), timestamps as ``TIMESTAMP_MICROS`` (Spark's default
  INT96 is not Iceberg), then the driver reads each written file's footer with pyarrow and turns it
  into icesql's statistics (``pyiceberg.io.pyarrow.data_file_statistics_from_parquet_metadata``, as
  ``icesql/engine/iceberg/writer.py`` does). ``day(ts)``: ``partitionBy`` on a computed ``ts_day`` column
  (``to_date(ts)`` in the UTC session time zone = Iceberg's ``day`` transform); the directory value
  (``ts_day=2025-01-01``, which is also Iceberg's own path for that partition) is mapped to the
  partition value Iceberg stores (days since 1970-01-01).

Same input for both, as a view gives it: the append dataset through ``spark.read.parquet``, a
temporary view and a trivial ``SELECT`` of its columns. Timed: write + statistics + commit (session
start, warm-up and table creation apart, as in every other Spark runner).
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.workers.common import file_stats, spark_session, throughput, warm_up

FIELD_ID = "parquet.field.id"


def _table(workdir: str, df: Any, partitioned: bool, codec: str) -> Any:
    """A fresh icesql-shaped table (icesql's Spark -> Iceberg schema mapping) in a local catalog."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import DayTransform

    from icesql.engine.iceberg.schema import spark_schema_json, spark_to_iceberg_schema

    wh = Path(workdir) / "warehouse"
    wh.mkdir(parents=True, exist_ok=True)
    cat = SqlCatalog("cat", uri=f"sqlite:///{wh / 'catalog.db'}", warehouse=wh.as_uri())
    cat.create_namespace("bench")
    schema = spark_to_iceberg_schema(spark_schema_json(df.schema))
    spec = PartitionSpec()
    if partitioned:
        ts = schema.find_field("ts")
        spec = PartitionSpec(PartitionField(source_id=ts.field_id, field_id=1000, transform=DayTransform(),
                                            name="ts_day"))
    return cat.create_table("bench.v", schema=schema, partition_spec=spec,
                            properties={"format-version": "2", "write.parquet.compression-codec": codec})


def _mapinarrow(df: Any, table: Any) -> list[Any]:
    from icesql.engine.iceberg.writer import WriteSpec, WrittenFile
    from icesql.engine.sink.batch import BatchWriter

    writer = BatchWriter(WriteSpec.from_table(table), upsert=False, key=[], equality_ids=[], sink="v",
                         relation="view", key_enforced=True)
    rows = writer(df, 0)
    return [WrittenFile.loads(r["file"]) for r in rows if r["content"] == 0]


def _day(value: str) -> int:
    return (dt.date.fromisoformat(value) - dt.date(1970, 1, 1)).days


def _spark_writer(spark: Any, df: Any, table: Any, partitioned: bool, codec: str,
                  timings: dict[str, float]) -> list[Any]:
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import (
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
    )
    from pyspark.sql import functions as F

    from icesql.engine.iceberg.writer import WrittenFile

    schema = table.schema()
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    spark.conf.set("spark.sql.parquet.fieldId.write.enabled", "true")
    cols = [F.col(f"`{c}`").alias(c, metadata={FIELD_ID: schema.find_field(c).field_id}) for c in df.columns]
    out = df.select(*cols)
    location = table.location().rstrip("/")
    local = location.removeprefix("file://")
    target = f"{local}/data/spark-{uuid.uuid4().hex[:12]}"
    t0 = time.perf_counter()
    if partitioned:
        out = out.withColumn("ts_day", F.to_date(F.col("ts")))
        out.write.option("compression", codec).partitionBy("ts_day").parquet(target)
    else:
        out.write.option("compression", codec).parquet(target)
    timings["spark_write_seconds"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    plan = compute_statistics_plan(schema, dict(table.metadata.properties))
    mapping = parquet_path_to_id_mapping(schema)
    files: list[Any] = []
    for p in sorted(Path(target).rglob("*.parquet")):
        if p.name.startswith((".", "_")):
            continue
        md = pq.read_metadata(p)
        s = data_file_statistics_from_parquet_metadata(parquet_metadata=md, stats_columns=plan,
                                                       parquet_column_mapping=mapping).to_serialized_dict()
        partition: tuple[Any, ...] = ()
        if partitioned:
            part = next(x for x in p.relative_to(target).parts if x.startswith("ts_day="))
            partition = (_day(part.split("=", 1)[1]),)
        files.append(WrittenFile(
            content=0, file_path=("file://" if location.startswith("file://") else "") + str(p),
            record_count=int(s.get("record_count", md.num_rows)), file_size_in_bytes=p.stat().st_size,
            partition=partition, spec_id=table.spec().spec_id,
            column_sizes=dict(s.get("column_sizes") or {}), value_counts=dict(s.get("value_counts") or {}),
            null_value_counts=dict(s.get("null_value_counts") or {}),
            nan_value_counts=dict(s.get("nan_value_counts") or {}),
            lower_bounds=dict(s.get("lower_bounds") or {}), upper_bounds=dict(s.get("upper_bounds") or {}),
            split_offsets=tuple(s["split_offsets"]) if s.get("split_offsets") else None,
        ))
    timings["footer_stats_seconds"] = round(time.perf_counter() - t0, 3)
    return files


def write(files: list[str], rows: int, arrow_bytes: int, workdir: str, method: str, partitioned: bool = False,
          codec: str = "zstd", conf: dict[str, str] | None = None, smoke: bool = False,
          verify: bool = True) -> dict[str, Any]:
    """Write the dataset through a view with ``method`` (``mapinarrow`` | ``spark_writer``), commit."""
    import pyspark

    from icesql.engine.commit.snapshot import CommitRequest, commit

    if method not in ("mapinarrow", "spark_writer"):
        raise ValueError(f"unknown method {method!r}")
    spark, session_s = spark_session(f"bench-views-{method}", conf=conf)
    warm_s = 0.0 if smoke else warm_up(spark, files, Path(workdir) / "warmup")
    spark.read.parquet(*files).createOrReplaceTempView("src")
    df = spark.sql("SELECT id, ts, category, payload, amount, qty, event_date, active, price, user_id FROM src")
    t0 = time.perf_counter()
    table = _table(workdir, df, partitioned, codec)
    create_s = time.perf_counter() - t0
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    written = _mapinarrow(df, table) if method == "mapinarrow" else _spark_writer(
        spark, df, table, partitioned, codec, timings)
    write_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    res = commit(table, CommitRequest(data_files=tuple(written), delete_files=(), sink_id=str(uuid.uuid4()),
                                      sink_version=1, progress=0, reason="batch"))
    commit_s = time.perf_counter() - t1
    secs = time.perf_counter() - t0
    out = throughput(rows, arrow_bytes, secs)
    out.update(file_stats(sizes=[f.file_size_in_bytes for f in written]))
    table.refresh()
    out.update({
        "engine": f"Spark {pyspark.__version__}: " + (
            "icesql BatchWriter (mapInArrow + DataFileWriter)" if method == "mapinarrow"
            else "Spark's Parquet writer with parquet.field.id + footer statistics"),
        "method": method, "partitioned": partitioned, "codec": codec,
        "session_seconds": round(session_s, 2), "warmup_seconds": warm_s, "create_seconds": round(create_s, 3),
        "write_seconds": round(write_s, 3), "commit_seconds": round(commit_s, 3), **timings,
        "committed_rows": res.rows, "metadata": str(table.metadata_location),
    })
    if verify:  # the committed table reads back: rows, ids and per-column null counts from the files
        t0 = time.perf_counter()
        got = table.scan(selected_fields=("id", "ts", "price", "event_date")).to_arrow()
        import pyarrow.compute as pc

        out["rows_in_table"] = got.num_rows
        out["ids_ok"] = got.num_rows == rows and pc.sum(got.column("id")).as_py() == rows * (rows - 1) // 2
        out["nulls_in_ts_price_date"] = sum(got.column(c).null_count for c in ("ts", "price", "event_date"))
        # a scan pruned by partition values and column bounds sees exactly the rows it should
        import pyarrow as pa
        import pyarrow.parquet as pq

        cut = dt.datetime(2025, 1, 10, tzinfo=dt.timezone.utc)
        ts = pa.concat_arrays([c for f in files for c in pq.read_table(f, columns=["ts"]).column("ts").chunks])
        want = pc.sum(pc.greater_equal(ts, pa.scalar(cut, ts.type))).as_py() or 0
        scan = table.scan(row_filter=f"ts >= '{cut.isoformat()}'", selected_fields=("id",))
        out["pruned_scan_files"] = len(list(scan.plan_files()))
        out["pruned_scan_ok"] = scan.to_arrow().num_rows == want
        out["verify_seconds"] = round(time.perf_counter() - t0, 2)
    if not smoke:  # a smoke run shares its session with other hooks
        spark.stop()
    return out
