"""Probe: what does the Python data source's per-query start-up cost, against Spark's own file
source discovering the same files?

Both ways run a streaming query to the end (``availableNow``) over the same directory, in one
warm Spark session, taking turns; each micro-batch's tasks read their files with pyarrow and
count the rows (the same work both ways):

* ``python-source``: icesql's ``icesql_files`` Python data source (today's Arrow path): the
  pieces come from the source's ``read`` in a task;
* ``simple-reader``: a ``SimpleDataSourceStreamReader`` (a Python data source whose rows the
  streaming source's runner hands the JVM with the partitions, so no task reads them in a Python
  worker) lists the files and yields one row per file with its task number; ``foreachBatch``
  spreads the single partition it gets over one task per core (``repartition(2)``, a shuffle in
  the JVM) and runs ``mapInArrow``: the piece-reading Python workers of ``python-source`` gone;
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
    from icesql.engine.sources.files.source import NAME, PIECE_SCHEMA, register

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


def _simple_source() -> Any:
    from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

    class Reader(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, path: str) -> None:
            self.path = path
            self.target: int | None = None

        def _files(self) -> list[str]:
            return sorted(str(p) for p in Path(self.path).glob("*.parquet"))

        def prepareForTriggerAvailableNow(self) -> None:
            self.target = len(self._files())

        def initialOffset(self) -> dict[str, int]:
            return {"n": 0}

        def read(self, start: dict[str, int]) -> Any:
            files = self._files()
            end = len(files) if self.target is None else min(self.target, len(files))
            return self.readBetweenOffsets(start, {"n": end}), {"n": end}

        def readBetweenOffsets(self, start: dict[str, int], end: dict[str, int]) -> Any:
            files = self._files()[start["n"] : end["n"]]
            return iter([(f, i % 2) for i, f in enumerate(files)])

        def commit(self, end: dict[str, int]) -> None:
            pass

    class Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "icesql_probe_simple"

        def schema(self) -> str:
            return "path string, task int"

        def simpleStreamReader(self, schema: Any) -> Any:
            return Reader(self.options["path"])

    return Source


_simple_registered: list[Any] = []


def simple_reader(spark: Any, src: Path, scratch: Path) -> int:
    if not _simple_registered:
        spark.dataSource.register(_simple_source())
        _simple_registered.append(spark)
    total: list[int] = []

    def batch(df: Any, _id: int) -> None:
        total.extend(r.n for r in df.repartition(2).mapInArrow(_count, COUNT_SCHEMA).collect())

    df = spark.readStream.format("icesql_probe_simple").option("path", str(src)).load()
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
    from icesql.engine.backends.spark.session import get_spark

    src = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/icesql-bench/data/append-1000000")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    spark = get_spark()
    ways = {"python-source": python_source, "simple-reader": simple_reader, "spark-listing": spark_listing}
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
