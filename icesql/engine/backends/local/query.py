"""A sink's streaming query without Spark, run in this process.

A scheduled ``run --once`` spends 10-20 s starting Spark around a few seconds of work, and a
running upsert sink spends most of each small batch in Spark's jobs and Python workers; on the
Arrow path Spark does little of the work itself: a Python streaming source's reader plans the
batch (``files.source.FilesStreamReader``: the file log, the pieces; the Kafka offset ranges), the
sink's Arrow tasks read, decode and write the data (``files.task``, ``index.task.ShardTask``), the
driver stages and commits. Here the same reader and the same tasks run in this process, without a
JVM:

* ``LocalStreamFrame`` stands where the source's streaming DataFrame stands (``sources.Relation``);
  the runner starts it through the backend (``local.frames.LocalBackend.start_query``), as it starts Spark's,
  so the sink's lifecycle - staging, commits, recovery, maintenance - is the one code path;
* ``LocalQuery`` is Spark's micro-batch loop - under ``Trigger.AvailableNow`` for a bounded run,
  under a processing-time trigger for a running sink - over the same checkpoint in Spark's own
  format (``backends.checkpoint``): a batch's offsets are written before it runs and its commit after
  the sink staged it, a batch planned and not committed is replayed with the same offsets, and a
  later run on Spark takes up where this one stopped (and the other way round);
* ``LocalPieces`` is one batch of pieces: the DataFrame methods the Arrow path's batch writer
  calls (``mapInArrow`` then ``collect``, or ``LocalRows.groups`` for the decoded changes an upsert
  reduces across the batch: ``local.frames.LocalFrame``), each task Spark would run a thread here (the
  readers and writers are Arrow's C++, which runs outside the GIL); ``map_in_threads`` runs the
  later stages' tasks (an upsert's shards, a key index rebuild) the same way.

The same loop runs a sink's batches on Spark (``spark.planned.PlannedStream``): the reader plans
each batch here and Spark gets its pieces as a DataFrame, so that no Python data source runs in
Spark's own Python processes; ``stop`` then cancels the running batch's Spark jobs.

What needs Spark is never done here: a piece the Arrow readers cannot read exactly as Spark would
(the Arrow path then reads that file with Spark's reader) stops the batch before it stages
anything with ``SparkNeeded``, and the supervisor restarts the sink at once on Spark, which
replays that batch from the checkpoint. Which sinks may run here is the source kind's to say
(``source_kinds.SourceProgress.runs_locally``).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icesql.engine.base.restarts import RestartAtOnce

log = logging.getLogger("icesql.sink")

IDLE_CHECK = (
    0.1  # seconds between a running query's looks at an idle source (``LocalStreamFrame.idle_check``)
)


@dataclass(frozen=True)
class LocalSession:
    """What a run without Spark takes from the Spark session it stands in for: the cores a batch
    keeps busy, the time zone zoneless timestamps are read in, what a plain TIMESTAMP is."""

    parallelism: int
    time_zone: str = "UTC"
    timestamp_type: str = "TIMESTAMP_LTZ"
    shuffle_partitions: str = "200"  # what Spark's session would record in a new checkpoint (its default)

    @staticmethod
    def from_conf(master: str, conf: Mapping[str, Any]) -> LocalSession | None:
        """The session a local master (``local``, ``local[N]``, ``local[*]``) and ``conf`` (icesql's
        defaults and the user's ``--conf``) make; None for any other master (a cluster runs the
        work where it is, not here) or when Spark would read settings of its own
        (``SPARK_CONF_DIR``, ``$SPARK_HOME/conf/spark-defaults.conf``)."""
        found = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
        if found is None or _spark_defaults_file():
            return None
        cores = found.group(1)
        if cores is None:
            parallelism = 1
        elif cores == "*":
            parallelism = os.cpu_count() or 1
        else:
            parallelism = int(cores)
        values = {str(k): str(v) for k, v in conf.items()}
        if values.get("spark.default.parallelism", "").isdigit():
            parallelism = int(values["spark.default.parallelism"])
        return LocalSession(
            parallelism=max(1, parallelism),
            time_zone=values.get("spark.sql.session.timeZone") or "UTC",
            timestamp_type=values.get("spark.sql.timestampType") or "TIMESTAMP_LTZ",
            shuffle_partitions=values.get("spark.sql.shuffle.partitions") or "200",  # Spark's default
        )


def _spark_defaults_file() -> bool:
    from icesql import settings

    if settings.SPARK_CONF_DIR.get():
        return True
    home = settings.SPARK_HOME.get()
    return bool(home) and Path(str(home), "conf", "spark-defaults.conf").exists()


class SparkNeeded(RestartAtOnce):
    """A batch needs Spark (a file only Spark's reader reads exactly): the sink restarts at once
    on Spark, which replays the batch from the checkpoint (a running sink too: it stays on Spark
    for the rest of the process)."""

    running_too = True


class LocalPieces:
    """One micro-batch of a Python streaming source, as a DataFrame of pieces the Arrow path's
    batch writer maps and collects; each of the batch's partitions runs as a thread."""

    def __init__(
        self,
        reader: Any,
        partitions: Sequence[Any],
        arrow_schema: Any,
        needs_spark: Callable[[BaseException], str | None],
        parallelism: int = 1,
    ) -> None:
        self.reader = reader
        self.partitions = list(partitions)
        self.arrow_schema = arrow_schema
        self.needs_spark = needs_spark
        self.parallelism = parallelism  # the cores the session stands for

    def mapInArrow(self, task: Callable[[Any], Any], schema: Any) -> LocalRows:  # noqa: N802 - PySpark's name
        return LocalRows(self, task, schema)

    def select(self, *names: str) -> _Selected:
        return _Selected(self, names)

    def filter(self, condition: Any) -> LocalPieces:
        raise SparkNeeded("the batch needs Spark's reader")  # pragma: no cover - needs_spark stops first

    def batch(self, partition: Any) -> Any:
        """The pieces of one partition, as one Arrow batch."""
        import pyarrow as pa

        names = self.arrow_schema.names
        rows = [dict(zip(names, r, strict=True)) for r in self.reader.read(partition)]
        return pa.RecordBatch.from_pylist(rows, self.arrow_schema)


class _Selected:
    def __init__(self, pieces: LocalPieces, names: Sequence[str]) -> None:
        self.pieces = pieces
        self.names = list(names)

    def collect(self) -> list[Any]:
        from types import SimpleNamespace

        return [
            SimpleNamespace(**{n: r[n] for n in self.names})
            for p in self.pieces.partitions
            for r in self.pieces.batch(p).to_pylist()
        ]


class LocalRows:
    """What a task mapped over a batch's pieces gives (``LocalPieces.mapInArrow``): collected as
    rows (the files an append's tasks wrote), or kept in their tasks' groups (``groups``: the decoded
    changes an upsert reduces across the batch, ``local.frames.LocalFrame``)."""

    def __init__(self, pieces: LocalPieces, task: Callable[[Any], Any], schema: Any) -> None:
        self.pieces = pieces
        self.task = task
        self.schema = schema  # of the task's output (a Spark StructType)
        self.parallelism = pieces.parallelism  # for the batch's work after the pieces' tasks

    def groups(self) -> list[list[Any]]:
        """Each task's output batches, one list per piece partition (as Spark's partitions of the
        mapped DataFrame)."""
        parts = self.pieces.partitions
        why: str | None = None
        try:
            # as many at a time as the session has cores, as Spark's local[N] runs its tasks (a
            # Kafka batch's three ranges in three threads on two cores took 3.4-4.4 s, in two 2.8-3.0 s)
            threads = min(len(parts), self.parallelism)
            from icesql.engine.backends.local.threads import map_in_threads

            outputs = map_in_threads(self.task, [[self.pieces.batch(p)] for p in parts], threads)
        except Exception as e:
            why = self.pieces.needs_spark(e)
            if why is None:
                raise
        if why is not None:  # raised here, outside the handler: the task's marked error is not its context
            raise SparkNeeded(f"{why}: the sink restarts on Spark, which reads it")
        return outputs

    def _batches(self) -> list[Any]:
        return [b for out in self.groups() for b in out]

    def collect(self) -> list[Any]:
        from icesql.engine.base.values import Row

        return [Row(list(r), list(r.values())) for b in self._batches() for r in b.to_pylist()]


class LocalQuery:
    """Spark's micro-batch loop under ``Trigger.AvailableNow`` for one Python streaming source's
    reader, in a thread of this process, over a local checkpoint in Spark's format. The methods
    the runner calls on Spark's ``StreamingQuery``: ``awaitTermination``, ``stop``, ``isActive``."""

    def __init__(
        self,
        frame: LocalStreamFrame,
        foreach_batch: Callable[[Any, int], None],
        checkpoint: str,
        name: str,
        interval: float | None = None,
        first_conf: dict[str, str] | None = None,
    ) -> None:
        from icesql.engine.backends.checkpoint import CheckpointLog, local_path

        root = local_path(checkpoint)
        if root is None:
            raise ValueError(f"a query run without Spark needs a local checkpoint, not {checkpoint}")
        self.frame = frame
        self.foreach_batch = foreach_batch
        self.log = CheckpointLog(root, first_conf)  # the session's settings a new checkpoint records
        self.name = name
        self.interval = interval  # seconds between triggers of a running query; None: AvailableNow
        self.recentProgress: list[dict[str, Any]] = []  # noqa: N815 - PySpark's name
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"icesql-local-{name}", daemon=True)

    def start(self) -> LocalQuery:
        self._thread.start()
        return self

    @property
    def isActive(self) -> bool:  # noqa: N802 - PySpark's name
        return self._thread.is_alive()

    def stop(self) -> None:
        """No batch starts after this, and the one running ends before this returns: its Spark
        jobs cancelled, as Spark's ``stop`` interrupts its batch (tasks that are threads of this
        process cannot be; their batch is short)."""
        self._stop.set()
        if threading.current_thread() is not self._thread and self._thread.is_alive():
            self.frame.cancel(self.name)
            self._thread.join()

    @property
    def executor(self) -> str:
        """Where the batches' tasks run: 'local' (threads of this process) or 'spark'."""
        return self.frame.executor

    def awaitTermination(self, timeout: float | None = None) -> bool:  # noqa: N802 - PySpark's name
        self._thread.join(timeout)
        if self._error is not None:
            raise self._error
        return not self._thread.is_alive()

    def _run(self) -> None:
        reader = self.frame.make_reader()
        try:
            self._loop(reader)
        except BaseException as e:  # noqa: BLE001 - handed to awaitTermination, as Spark does
            if self._stop.is_set() and self.frame.interrupted(e):
                log.info("query %s: its batch was interrupted by stop", self.name)
            else:
                self._error = e
        finally:
            try:
                reader.stop()
            except Exception:  # noqa: BLE001
                log.debug("query %s: stopping the reader failed", self.name, exc_info=True)

    def _loop(self, reader: Any) -> None:
        planned, committed = self.log.planned(), self.log.committed()
        self.log.ensure_metadata()
        if self.interval is None:
            reader.prepareForTriggerAvailableNow()
        if not planned:
            batch_id, start = 0, reader.initialOffset()
        else:
            last = planned[-1]
            if last in committed:
                batch_id, start = last + 1, self._offset(last)
                reader.commit(start)
            else:  # planned and not committed: replayed with the offsets it was planned with
                before = self._offset(last - 1) if last > 0 else reader.initialOffset()
                self._batch(reader, last, before, self._offset(last))
                batch_id, start = last + 1, self._offset(last)
        limit = reader.getDefaultReadLimit()
        while not self._stop.is_set():
            started = time.monotonic()
            end = reader.latestOffset(start, limit)
            checked = time.monotonic() - started
            ran = end != start
            if ran:
                self.log.write_offsets(batch_id, end)
                self._batch(reader, batch_id, start, end)
                start, batch_id = end, batch_id + 1
            elif self.interval is None:
                break
            self._progress(batch_id - 1, ran)
            if self.interval is None:
                continue
            if ran:  # the next trigger, as Spark's ProcessingTime: at once if late
                self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))
            else:  # an idle source: looked at again sooner, a batch still at most once an interval
                self._stop.wait(self.frame.idle_check(self.interval, checked))

    def _progress(self, batch_id: int, ran: bool) -> None:
        """A trigger's record (``StreamingQuery.recentProgress``: the last 100; an idle source's
        checks at most one a second)."""
        now = time.time()
        if not ran and self.recentProgress and not self.recentProgress[-1]["ranBatch"]:
            if now - self.recentProgress[-1]["timestamp"] < 1.0:
                return
        self.recentProgress.append({"batchId": batch_id, "ranBatch": ran, "timestamp": now})
        del self.recentProgress[:-100]

    def _offset(self, batch_id: int) -> dict[str, Any]:
        offset = self.log.offset(batch_id)
        if offset is None:
            raise ValueError(f"the checkpoint {self.log.root} has no offsets for batch {batch_id}")
        return offset

    def _batch(self, reader: Any, batch_id: int, start: dict[str, Any], end: dict[str, Any]) -> None:
        pieces = self.frame.batch(reader, reader.partitions(start, end), self.name)
        self.foreach_batch(pieces, batch_id)
        self.log.write_commit(batch_id)
        reader.commit(end)


class LocalStreamFrame:
    """Where a source's streaming DataFrame stands when its sink runs without Spark: what the
    runner reads of it (``isStreaming``) and what ``LocalQuery`` needs (a new reader, the schema of
    its rows, which failures need Spark, a batch's frame of pieces); ``local.frames.LocalBackend.start_query``
    starts it. On Spark, ``spark.planned.PlannedStream`` is the same with Spark's frames."""

    isStreaming = True  # noqa: N815 - PySpark's name
    executor = "local"

    def __init__(
        self,
        make_reader: Callable[[], Any],
        schema: Any,
        needs_spark: Callable[[BaseException], str | None],
        *,
        parallelism: int | None = None,
        cheap_checks: bool = True,
    ) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.parallelism = max(1, parallelism or os.cpu_count() or 1)
        self.make_reader = make_reader
        self.schema = schema  # the reader's rows (a Spark StructType)
        self.arrow_schema = to_arrow_schema(schema)
        self.needs_spark = needs_spark
        # a look for new data costs no more than the time it takes (a local directory, a Kafka
        # ListOffsets), not a billed request (an object store's listing)
        self.cheap_checks = cheap_checks

    def batch(self, reader: Any, partitions: Sequence[Any], query: str) -> Any:
        """One batch's pieces as the frame the sink's batch writer takes (``query``: the query's name)."""
        return LocalPieces(reader, partitions, self.arrow_schema, self.needs_spark, self.parallelism)

    def cancel(self, query: str) -> None:
        """Stop the running batch's tasks (threads finish theirs: nothing to do)."""

    def interrupted(self, exc: BaseException) -> bool:
        """Whether ``exc``, raised by a batch after ``cancel``, is the cancel's (never, here)."""
        return False

    def idle_check(self, interval: float, took: float) -> float:
        """Seconds until a running query looks again at a source that had nothing new, when the
        look took ``took`` seconds. Spark's processing-time trigger looks once an interval, so a
        batch arriving just after a look waits the whole interval; here a source whose looks are
        cheap is looked at every ``IDLE_CHECK`` seconds, or ten times the look's own time (at
        most a tenth of a core), never less often than the interval. A batch still starts at
        most once an interval (the wait after a batch is Spark's), so batches and their files
        are no smaller than on Spark; only the wait of a batch arriving at an idle sink is."""
        if not self.cheap_checks:
            return interval
        return min(interval, max(IDLE_CHECK, 10 * took))


__all__ = ["LocalPieces", "LocalQuery", "LocalRows", "LocalSession", "LocalStreamFrame", "SparkNeeded"]
