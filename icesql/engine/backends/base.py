"""The seam between what a sink does and where it runs: a ``Backend`` and the ``Frame`` it holds a
batch's rows in.

A sink's batch writers (``sink.batch.BatchWriter``, ``index.upsert.IndexedUpsertWriter``) and the
key index's rebuild (``index.build``) are written once, against ``Frame``: the few operations they
need - keep the last change per KEY, drop deletes, group rows by key-index shard, run a task over
each group, collect the small result rows. Two implementations stand behind it:

* ``backends.spark.frames`` - a Spark DataFrame (classic or Connect): ``mapInArrow`` tasks on the
  executors, a window for the last change per KEY, ``repartition`` by Spark's own hash; a
  source's batches planned in this process and handed to Spark as DataFrames of their pieces
  (``backends.spark.planned``);
* ``backends.local.frames`` - Arrow tables in this process: each task a thread (the readers and
  writers are Arrow's C++, which runs outside the GIL), the same last change per KEY
  (``base.changelog.last_per_key``) and the same shards (``backends.hashing``: Spark's xxhash64
  reproduced), so a key lands where Spark would put it.

Sources see the ``Backend`` only to make their streams (``stream``: a registered Python data
source on Spark, its reader in this process), their counters (``accumulator``) and the session's
reading settings; what only Spark can read they ask for with ``spark_for``, which in this process
raises ``SparkNeeded`` and the sink restarts on Spark. Only the sink and the facade choose a
backend (``backend_of``); the rest sees a ``Backend`` or a ``Frame``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol


class Frame(Protocol):
    """A batch's rows where its backend holds them."""

    @property
    def in_process(self) -> bool:
        """Whether the frame's tasks run in this process (so they may share what they gather)."""
        ...

    @property
    def columns(self) -> list[str]: ...

    def select(self, names: Sequence[str]) -> Frame:
        """The frame with only ``names``, in that order."""
        ...

    def without_deletes(self) -> Frame:
        """The changes less the deletes (``__op = 'd'``): what an append of a changelog keeps."""
        ...

    def last_per_key(self, key: Sequence[str]) -> Frame:
        """The last change of each KEY in the changelog's order; changes with a null in the KEY all
        stay (the writer fails the batch on them, or drops and counts them)."""
        ...

    def by_shard(self, key: Sequence[str], shards: int, table_schema: Any) -> Frame:
        """The rows with their key-index shard (``index.task.SHARD``: Spark's
        ``pmod(xxhash64(KEY), shards)`` of the KEY cast to the table's types), one group per shard."""
        ...

    def map(self, task: Callable[[Any], Any], schema: Any) -> Frame:
        """``task`` (Arrow batches in, Arrow batches out) over each group of the frame; ``schema``:
        its output's Spark schema."""
        ...

    def rows(self) -> list[dict[str, Any]]:
        """The frame's rows as dicts (small rows only: the files a task wrote)."""
        ...

    def arrow(self) -> Any:
        """The frame's rows as one Arrow table in this process (a routed sink reads each message
        with its own schema here: a batch of messages, not a table's rows)."""
        ...


class Backend(Protocol):
    """Where a sink's batches run."""

    name: str  # 'spark', 'connect' or 'local'

    @property
    def parallelism(self) -> int:
        """The cores a batch keeps busy."""
        ...

    @property
    def time_zone(self) -> str:
        """The session time zone zoneless timestamps are read in."""
        ...

    @property
    def timestamp_type(self) -> str:
        """What a plain TIMESTAMP is: 'TIMESTAMP_LTZ' or 'TIMESTAMP_NTZ'."""
        ...

    def frame(self, columns: Mapping[str, Sequence[Any]], partitions: int) -> Frame:
        """A frame of a few rows made here (``columns`` of strings), in ``partitions`` groups."""
        ...

    def spark_for(self, reason: str) -> Any:
        """The Spark session, to read what only Spark's readers can (``reason`` says what); in
        this process ``backends.local.query.SparkNeeded(reason)``: the sink restarts on Spark."""
        ...

    def stream(
        self,
        name: str,
        schema: Any,
        options: Mapping[str, str],
        *,
        register: Callable[[Any], None],
        reader: Callable[[], Any],
        needs_spark: Callable[[BaseException], str | None],
        cheap_checks: bool = True,
    ) -> Any:
        """A source's stream of pieces: its ``reader()`` (a ``DataSourceStreamReader``) called by
        ``local.query.LocalQuery`` in this process, each batch's pieces handed to Spark as a
        DataFrame (``spark.planned``) or read by tasks that are threads here; Spark's own streaming
        query of the Python data source ``name`` (``register`` registers it; ``schema`` its Spark
        schema) read with ``options`` where that loop cannot run (Spark Connect, a checkpoint not on
        this machine, ``ICESQL_PLANNED_BATCHES=0``); with
        ``needs_spark(pieces)`` saying when a batch must move to Spark and ``cheap_checks`` whether
        listing is cheap enough to do as often as an idle running sink likes."""
        ...

    def accumulator(self, initial: Any, param: Any = None) -> Any:
        """An accumulator tasks add to and the driver reads between batches (``param``: Spark's
        ``AccumulatorParam``, None for a number); None where the executor keeps none (Spark Connect)."""
        ...

    def start_query(
        self,
        stream: Any,
        foreach_batch: Callable[[Any, int], None],
        *,
        checkpoint: str,
        name: str,
        interval: float | None,
    ) -> Any:
        """Start the streaming query of ``stream`` (the relation's streaming frame): each micro-batch
        handed to ``foreach_batch(batch, batch_id)``, its progress in Spark's checkpoint format at
        ``checkpoint``; ``interval``: seconds between batches of a running query, None for a bounded
        run (Spark's ``Trigger.AvailableNow``). Returns the query (``isActive``, ``stop``,
        ``awaitTermination``, ``exception``)."""
        ...


def backend_of(spark: Any, local: Any) -> Backend:
    """The backend of a sink running on ``spark``, or in this process when ``local`` (a
    ``backends.local.query.LocalSession``) is given."""
    if local is not None:
        from icesql.engine.backends.local.frames import LocalBackend

        return LocalBackend(local)
    from icesql.engine.backends.spark.frames import SparkBackend

    return SparkBackend(spark)


def as_frame(rows: Any) -> Frame:
    """A batch's rows as a ``Frame``: a frame as it is, the decoded changes of a batch run in this
    process (``backends.local.query.LocalRows``), or a Spark DataFrame."""
    from icesql.engine.backends.local.frames import LocalFrame
    from icesql.engine.backends.local.query import LocalRows
    from icesql.engine.backends.spark.frames import SparkFrame

    if isinstance(rows, LocalRows):
        return LocalFrame.of_rows(rows)
    if isinstance(rows, (LocalFrame, SparkFrame)):
        return rows
    return SparkFrame(rows)  # a DataFrame (a Spark batch is never a frame of this process)


__all__ = ["Backend", "Frame", "as_frame", "backend_of"]
