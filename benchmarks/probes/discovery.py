"""Probe: what does the Python data source's per-query start-up cost, against Spark's own file
source discovering the same files?

Both ways run a streaming query to the end (``availableNow``) over the same directory, in one
warm Spark session, taking turns; each micro-batch's tasks read their files with pyarrow and
count the rows (the same work both ways):

* ``python-source``: icesql's ``icesql_files`` Python data source (today's Arrow path): the
  pieces come from the source's ``read`` in a task;
* ``spark-listing``: Spark's ``binaryFile`` source without its content column lists the files and
  keeps the offsets; ``foreachBatch`` collects the paths in the driver and runs the tasks over a
  local DataFrame of pieces (``createDataFrame(...).mapInArrow``).

Usage: ``.venv/bin/python benchmarks/probes/discovery.py [INPUT_DIR] [ROUNDS]`` (default: the
1M-row append dataset of ``benchmarks/run.py``, 3 rounds). Prints seconds per query, start to end.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

COUNT_SCHEMA = "n long"


def _count(batches: Any) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 0
    for b in batches:
        for path in b.column("path").to_pylist():
            n += pq.read_table(path.removeprefix("file:")).num_rows
    yield pa.RecordBatch.from_pydict({"n": pa.array([n], pa.int64())})


def python_source(spark: Any, src: Path, scratch: Path) -> int:
    from icesql.engine.files.source import NAME, PIECE_SCHEMA, register

    register(spark)
    total: list[int] = []

    def batch(df: Any, _id: int) -> None:
        total.extend(r.n for r in df.mapInArrow(_count, COUNT_SCHEMA).collect())

    df = (
        spark.readStream.format(NAME)
        .schema(PIECE_SCHEMA)
        .options(path=str(src), format="parquet", log=str(scratch / "log"), parallelism="2")
        .load()
    )
    q = df.writeStream.foreachBatch(batch).option("checkpointLocation", str(scratch / "cp"))
    q.trigger(availableNow=True).start().awaitTermination()
    return sum(total)


def spark_listing(spark: Any, src: Path, scratch: Path) -> int:
    total: list[int] = []

    def batch(df: Any, _id: int) -> None:
        files = sorted((r.path, r.length) for r in df.collect())
        halves = [files[0::2], files[1::2]]  # one task per core, as pieces.balance would
        rows = [(f[0], i) for i, h in enumerate(halves) for f in h]
        # hash-partitioned by task: both tasks may land in one partition (never to this way's gain)
        pieces = spark.createDataFrame(rows, "path string, task int").repartition(2, "task")
        total.extend(r.n for r in pieces.mapInArrow(_count, COUNT_SCHEMA).collect())

    df = (
        spark.readStream.format("binaryFile")
        .schema("path string, modificationTime timestamp, length long, content binary")
        .option("pathGlobFilter", "*.parquet")
        .load(str(src))
        .select("path", "length", "modificationTime")
    )
    q = df.writeStream.foreachBatch(batch).option("checkpointLocation", str(scratch / "cp"))
    q.trigger(availableNow=True).start().awaitTermination()
    return sum(total)


def main() -> None:
    from icesql.engine.spark import get_spark

    src = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/icesql-bench/data/append-1000000")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    spark = get_spark()
    ways = {"python-source": python_source, "spark-listing": spark_listing}
    times: dict[str, list[float]] = {k: [] for k in ways}
    for r in range(rounds + 1):  # round 0 warms both ways up and is not counted
        for name, way in ways.items():
            scratch = Path(tempfile.mkdtemp(prefix="icesql-probe-"))
            try:
                t0 = time.monotonic()
                rows = way(spark, src, scratch)
                dt = time.monotonic() - t0
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            if r:
                times[name].append(dt)
            print(f"round {r} {name}: {dt:.2f} s ({rows:,} rows)", flush=True)
    for name, ts in times.items():
        print(f"{name}: median {statistics.median(ts):.2f} s, best {min(ts):.2f} s over {len(ts)}")


if __name__ == "__main__":
    main()
