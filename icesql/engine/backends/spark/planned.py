"""A sink's micro-batches on Spark, planned in icesql's process.

On the Arrow path Spark reads no data of a source itself: the source's reader plans a batch
(``files.source.FilesStreamReader``: the file log, the pieces; the Kafka offset ranges) and the
sink's ``mapInArrow`` tasks read, decode and write them. Run as Spark's Structured Streaming
query, the reader is a Python data source, and Spark starts Python processes only to run it: the
streaming source's runner, a planning worker and its daemon, and in each task a worker that hands
the task its few piece rows, beside the worker that writes them - 0.8 GB of a 2.2 GB peak at 10M
rows (benchmarks/README.md, issue 54).

Here the micro-batch loop that runs sinks without Spark (``local.query.LocalQuery``: the same
offsets and commits in Spark's checkpoint format, the same trigger) plans each batch with the
reader in this process, and Spark gets the batch's pieces as rows of its own plan
(``pieces_frame``: one partition per group of pieces, as the data source's partitions), so a task
starts one Python worker, the writer's. Spark's own streaming query still runs the source where
the loop cannot: a checkpoint that is not on this machine, Spark Connect (``frames.SparkBackend``),
a DataFrame use of the stream other than starting it (a view over the source), or
``ICESQL_PLANNED_BATCHES=0``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from icesql.engine.backends.local.query import LocalStreamFrame


def plans_batches(spark: Any) -> bool:
    """Whether a sink's batches on ``spark`` are planned here (a local checkpoint given): on
    classic Spark unless ``ICESQL_PLANNED_BATCHES=0``; Spark Connect runs its own query."""
    from icesql import settings
    from icesql.engine.backends.spark.session import is_connect

    return settings.PLANNED_BATCHES.enabled() and not is_connect(spark)


class PlannedStream(LocalStreamFrame):
    """A source's stream on Spark whose batches the driver plans (``local.query.LocalQuery``):
    each batch a Spark DataFrame of its pieces. Anything else asked of it is asked of Spark's
    own streaming DataFrame of the source (``streaming_frame``), made the first time."""

    executor = "spark"

    def __init__(self, spark: Any, make_stream: Callable[[], Any], *args: Any, **kwargs: Any) -> None:
        """``make_stream()``: Spark's streaming DataFrame of the source; the rest as ``LocalStreamFrame``'s."""
        super().__init__(*args, **kwargs)
        self.spark = spark
        self._make_stream = make_stream
        self._stream: Any = None

    def streaming_frame(self) -> Any:
        """Spark's streaming DataFrame of the source (its Python data source)."""
        if self._stream is None:
            self._stream = self._make_stream()
        return self._stream

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.streaming_frame(), name)

    def batch(self, reader: Any, partitions: Sequence[Any], query: str) -> Any:
        """The batch's pieces as a Spark DataFrame, one partition per group; its jobs in the
        query's job group, so that ``cancel`` stops them."""
        self.spark.sparkContext.setJobGroup(query, f"icesql query {query}", interruptOnCancel=True)
        return pieces_frame(self.spark, self.schema, [list(reader.read(p)) for p in partitions])

    def cancel(self, query: str) -> None:
        self.spark.sparkContext.cancelJobGroup(query)

    def interrupted(self, exc: BaseException) -> bool:
        text = str(exc)
        return "cancelled" in text or "SparkContext was shut down" in text or "InterruptedException" in text


def pieces_frame(spark: Any, schema: Any, groups: Sequence[Sequence[Sequence[Any]]]) -> Any:
    """A DataFrame of ``schema``'s rows, each group of ``groups`` one partition. Made of Spark's
    own expressions - a range of one row per partition, each row its group's rows out of one JSON
    literal (``from_json``) - so no Python worker reads them, as a DataFrame made from Python rows
    needs in each task. (A union of one-partition frames is one partition: Spark zips children
    that share a partitioning.)"""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType

    names = schema.names
    groups = list(groups) or [[]]
    text = json.dumps(
        [[dict(zip(names, r, strict=True)) for r in rows] for rows in groups], separators=(",", ":")
    )
    every = F.from_json(F.lit(text), ArrayType(ArrayType(schema)))
    n = len(groups)
    return spark.range(0, n, 1, n).select(F.inline(F.element_at(every, F.col("id").cast("int") + 1)))


__all__ = ["PlannedStream", "pieces_frame", "plans_batches"]
