"""``icesql_kafka``: Kafka topics as a Spark streaming data source (a Python data source over
confluent-kafka / librdkafka; Spark's own Kafka connector is not needed). icesql's own process runs
the same reader without Spark (``backends.local``), over the same checkpoint.

Spark keeps the query's offsets (``offsets.py``: per topic-partition, ``{"0": next offset, ...}``
for one topic, Spark's Kafka source's ``{"topic": {"0": next offset}}`` for many) in its
checkpoint and asks for the latest offset once per trigger; each micro-batch is planned as
offset ranges (``OffsetRange``), a long range split so that every core reads, and each task reads
its ranges with its own consumer (``read_range``) and yields Arrow record batches with Spark's
Kafka schema (``RECORD_SCHEMA``: key, value, topic, partition, offset, timestamp, timestampType,
headers). Decoding the values into rows is the relation's work (``relation``).

What makes a batch exact
    * Reads are ``isolation.level = read_committed``: records of aborted transactions never reach
      a batch, and offset gaps (transaction markers, compacted topics) are normal.
    * The end of a batch is the true log end: ``log_end`` takes the larger of ListOffsets and the
      high watermark a Fetch response carries (one broker here, tansu, answers ListOffsets with
      the newest batch's base offset + 1, which under-reports the end of batched produces).
    * A range is read until the first record at or past its end, or the partition's end of log at
      or past it: the same range always yields the same records, so Spark's replay of a batch
      after a crash reads exactly what the first attempt read.
    * Records below a partition's log start (deleted by retention before the sink read them) fail
      the batch with one line naming the topic, partition and lost range (``DataLossError``), or
      with ``on_data_loss=continue`` (ON DATA LOSS = 'continue') are skipped with a warning naming
      them; the Arrow path counts them with the skipped records.
    * Partitions added while the query runs appear at the next trigger and are read from offset 0;
      so do the topics a source of many topics finds at a refresh (``KafkaStreamReader``).

Options (strings). Spark redacts option values whose keys match its redaction pattern
(``secret``, ``password``, ``token``, ...): librdkafka settings travel as ``kafka.<setting>``, and
the secret ones as ``secret.kafka.<setting>`` so that no plan, log or UI shows them.

* ``topic``, or Spark's ``subscribe`` (a comma list) / ``subscribePattern`` and
  ``kafka.metadata.max.age.ms`` (``subscription``); ``seed``: a JSON file (written by the sink
  before the query starts, ``progress.KafkaProgress``) with the offsets a new checkpoint starts
  from when the table already holds some of the topics; ``start`` ('earliest' | 'latest') and
  ``start_ts`` (epoch ms) otherwise;
* ``max_records``: at most this many offsets per trigger, shared among partitions by their lag;
  ``max_bytes``: about this many bytes per trigger (records of the mean size of a sample taken
  when the query starts);
* ``parallelism``: the cores to keep busy; ``piece_records``: the longest range one task reads;
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from icesql.engine.sources.kafka.offsets import Offsets, PartitionKey, dump, parse, records_between
from icesql.engine.sources.kafka.subscription import Subscription
from icesql.engine.sources.kafka.topic import TopicView, conf_from_options, log_lost, read_range

NAME = "icesql_kafka"
RECORD_SCHEMA = StructType(  # Spark's own Kafka source schema
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
        ),
    ]
)
PIECE_SCHEMA = StructType(  # mode=pieces: the offset ranges of a batch, read by the sink's tasks
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("start", LongType()),
        StructField("end", LongType()),
    ]
)
DEFAULT_PIECE_RECORDS = 500_000
MIN_PIECE_RECORDS = 20_000

log = logging.getLogger("icesql.kafka")


# --------------------------------------------------------------------------- the broker's view


def share(start: Mapping[PartitionKey, int], end: Mapping[PartitionKey, int], budget: int) -> Offsets:
    """At most ``budget`` offsets from ``start`` toward ``end``, shared among the partitions in
    proportion to their lag (every partition with lag moves when the budget allows)."""
    lag = {k: max(0, e - start.get(k, 0)) for k, e in end.items()}
    total = sum(lag.values())
    if total <= budget:
        return dict(end)
    out = {k: start.get(k, 0) for k in end}
    left = budget
    for k in sorted(lag, key=lambda q: (-lag[q], q)):
        take = min(lag[k], max(1, budget * lag[k] // total), left)
        out[k] += take
        left -= take
        if left <= 0:
            break
    return out


# --------------------------------------------------------------------------- planning

Range = tuple[str, int, int, int]  # topic, partition, start, end


class OffsetRange(InputPartition):
    """One task's ranges: ``(topic, partition, start, end)`` (picklable)."""

    def __init__(self, ranges: Sequence[Range]) -> None:
        super().__init__(ranges)
        self.ranges = tuple(ranges)


def plan_ranges(
    start: Mapping[PartitionKey, int], end: Mapping[PartitionKey, int], parallelism: int, piece_records: int
) -> list[OffsetRange]:
    """Split the batch's ranges so that every core reads, and pack short ones together so that
    no more tasks run than cores need: each task reads at most ``size`` records (the batch over
    the cores, at least ``MIN_PIECE_RECORDS``, at most ``piece_records``). A small trigger of six
    partitions is then one or two tasks, not six (a task's fixed cost - a Python worker, a
    broker round trip - is most of a small trigger's time); so is one of six topics."""
    spans = [(t, p, start.get((t, p), 0), e) for (t, p), e in sorted(end.items()) if e > start.get((t, p), 0)]
    total = sum(e - s for _, _, s, e in spans)
    if not spans:
        return []
    size = min(piece_records, max(MIN_PIECE_RECORDS, -(-total // max(1, parallelism))))
    tasks: list[list[Range]] = []
    held = size  # records in the last task (full: start a new one)
    for t, p, s, e in spans:
        while s < e:
            n = min(e - s, size)
            if held + n > size:
                tasks.append([])
                held = 0
            tasks[-1].append((t, p, s, s + n))
            held += n
            s += n
    return [OffsetRange(ranges) for ranges in tasks]


# --------------------------------------------------------------------------- the data source


def read_seed(path: str | None) -> dict[str, Any] | None:
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        data: dict[str, Any] = json.load(f)
    return data


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The planner: the query's offsets (``offsets``), each trigger's end, its ranges.

    A source of many topics lists them at most every ``Subscription.refresh`` seconds (a
    metadata request for every topic of the cluster; the triggers between ask only the log ends
    of the partitions listed), so a topic created while the sink runs is read within one refresh,
    from its start (offset 0: records retention deleted before it was found are lost records, as
    for a partition added later). A topic that a request finds gone, and the metadata confirms, is
    logged once and leaves the offsets (its committed records stay in the table; created again,
    it is a new topic); the ranges of a batch planned before it went are not read. A source of one
    topic lists its partitions every trigger, and fails when its topic is gone. (This runs in
    Spark's Python process on Spark: the lines a user reads about new and deleted topics are the
    driver's, ``progress.KafkaProgress.staged``.)"""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.sub = Subscription.from_options(options)
        self.topic = self.sub.single  # None: many topics (Spark's form of the offsets)
        self.conf = conf_from_options(options)
        self.parallelism = int(options.get("parallelism") or 2)
        self.piece_records = int(options.get("piece_records") or DEFAULT_PIECE_RECORDS)
        self.max_records = int(options["max_records"]) if options.get("max_records") else None
        self.max_bytes = int(options["max_bytes"]) if options.get("max_bytes") else None
        self._record_bytes: float | None = None  # sampled once, for MAX BYTES PER TRIGGER
        self.view = TopicView(self.conf, self.sub)
        self._target: Offsets | None = None
        self.pieces = options.get("mode") == "pieces"
        self._listed: list[PartitionKey] | None = None  # many topics: the last listing ...
        self._listed_at = 0.0  # ... and when (monotonic)
        self._gone: set[str] = set()  # topics found deleted (logged once)
        self._behind: set[PartitionKey] = set()  # partitions found ending below their offset (logged once)

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    # ------------------------------------------------------------------ the source's topics

    def _partitions(self, *, fresh: bool = False) -> list[PartitionKey]:
        """The topic-partitions the source reads: every trigger for one topic, at most every
        refresh interval (or when ``fresh``) for many."""
        if self.topic is not None:
            return self.view.partitions()
        now = time.monotonic()
        if fresh or self._listed is None or now - self._listed_at >= self.sub.refresh:
            listed = self.view.partitions()
            topics = {t for t, _ in listed}
            known = {t for t, _ in self._listed or ()}
            if self._listed is not None and topics - known:
                log.debug("%s: new topics %s, read from their start", self.sub.describe(), sorted(topics - known))
            self._gone -= topics  # created again: a new topic
            self._listed, self._listed_at = listed, now
        return self._listed

    def _live(self, offsets: Mapping[PartitionKey, int]) -> Offsets:
        """``offsets`` less the topics that were deleted (each logged once, when found): those
        the listing no longer has, or a request found gone, and the metadata confirms."""
        if self.topic is not None:
            return dict(offsets)
        suspects = self.view.missing | {t for t, _ in offsets}
        listed = {t for t, _ in self._partitions(fresh=bool(self.view.missing))}
        self.view.missing.clear()
        for t in sorted(suspects - listed - self._gone):
            if self.view.gone(t):  # the sink's own warning follows (``progress``: the driver's log)
                self._gone.add(t)
                log.info("%s: topic '%s' is gone (deleted): left out of the offsets", self.sub.describe(), t)
        return {k: o for k, o in offsets.items() if k[0] not in self._gone}

    def _ends(self, parts: Sequence[PartitionKey]) -> Offsets:
        ends = self.view.ends(parts)
        if self.view.missing:  # a topic went since the listing: list again, confirm, leave it out
            ends = self._live(ends)
        return ends

    # ------------------------------------------------------------------ Spark's calls

    def initialOffset(self) -> dict[str, Any]:
        parts = self._partitions()
        seed = read_seed(self.options.get("seed"))
        if seed is not None and seed.get("offsets") is not None:
            known = self._live(parse(seed["offsets"], self.topic))
            starts = self.view.starts([k for k in parts if k not in known])
            return dump({**starts, **known}, self.topic)
        ts = self.options.get("start_ts")
        if ts:
            return dump(self.view.at_time(parts, int(ts)), self.topic)
        if self.options.get("start") == "latest":
            return dump(self._ends(parts), self.topic)
        return dump(self.view.starts(parts), self.topic)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._ends(self._partitions(fresh=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        end = dict(self._target) if self._target is not None else self._ends(self._partitions())
        begin = self._live(parse(start, self.topic))  # after the ends: a topic they found gone is confirmed
        end = {k: o for k, o in end.items() if k[0] not in self._gone}
        for k in begin:  # a partition never disappears but with its topic; its end never moves back
            if end.get(k, begin[k]) < begin[k] and k not in self._behind:
                self._behind.add(k)
                log.warning(
                    "topic '%s' partition %d ends at offset %d, below the %d the sink has read up to (the topic "
                    "was deleted and created again, or the broker lost records): records below %d are not read",
                    k[0], k[1], end[k], begin[k], begin[k],
                )  # fmt: skip
            end[k] = max(end.get(k, begin[k]), begin[k])
        budget = self.max_records
        if self.max_bytes and records_between(begin, end):
            if self._record_bytes is None:
                self._record_bytes = self.view.record_bytes(begin, end)
            by_bytes = max(1, int(self.max_bytes // max(1.0, self._record_bytes)))
            budget = min(budget, by_bytes) if budget else by_bytes
        if budget:
            end = share(begin, end, budget)
        return dump(end, self.topic)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, until = parse(start, self.topic), parse(end, self.topic)
        live = self._live(until)
        for t in sorted({t for t, _ in until} - {t for t, _ in live}):
            spans = [(p, begin.get((t, p), 0), o) for (u, p), o in sorted(until.items()) if u == t]
            skipped = ", ".join(f"partition {p} records {s}-{e - 1}" for p, s, e in spans if e > s)
            if skipped:
                log.warning("topic '%s' was deleted before %s were read: they are not in the table", t, skipped)
        return plan_ranges(begin, live, self.parallelism, self.piece_records)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, OffsetRange)
        for t, p, s, e in partition.ranges:
            if self.pieces:  # the Arrow path: the sink's tasks read the range (``arrow``)
                yield (t, p, s, e)
            else:
                yield from read_range(self.conf, t, p, s, e, on_lost=_on_lost(self.options))

    def commit(self, end: dict[str, Any]) -> None:
        pass  # the table holds the offsets (``progress``); CONSUMER GROUP follows its commits

    def stop(self) -> None:
        self.view.close()


class KafkaDataSource(DataSource):
    """Registered as ``icesql_kafka`` (``register(spark)``)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return RECORD_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return KafkaStreamReader(dict(self.options))  # mode=pieces: PIECE_SCHEMA rows

    def reader(self, schema: Any) -> Any:
        return KafkaRangeReader(dict(self.options))


class KafkaRangeReader(DataSourceReader):
    """The batch reader: the exact ranges of ``ranges`` (JSON ``[[topic, partition, start, end],
    ...]``), or from the partitions' starts (``start`` = 'earliest') up to ``limit`` records per
    partition, capped at the log end when the read is planned (``SELECT`` previews)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.conf = conf_from_options(options)

    def partitions(self) -> Sequence[InputPartition]:
        if self.options.get("ranges"):  # exact ranges: what the Arrow path could not decode
            ranges = json.loads(self.options["ranges"])
            return [OffsetRange([(str(t), int(p), int(s), int(e))]) for t, p, s, e in ranges]
        view = TopicView(self.conf, Subscription.from_options(self.options))
        try:
            parts = view.partitions()
            ends = view.ends(parts)
            if self.options.get("start_ts"):
                begin = view.at_time(parts, int(self.options["start_ts"]))
            elif self.options.get("start") == "latest":
                begin = dict(ends)
            else:
                begin = view.starts(parts)
        finally:
            view.close()
        limit = int(self.options.get("limit") or 0)
        if limit:
            ends = {k: min(e, begin.get(k, 0) + limit) for k, e in ends.items()}
        return plan_ranges(begin, ends, int(self.options.get("parallelism") or 2), DEFAULT_PIECE_RECORDS)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, OffsetRange)
        for t, p, s, e in partition.ranges:
            yield from read_range(self.conf, t, p, s, e, on_lost=_on_lost(self.options))


def _on_lost(options: Mapping[str, str]) -> Callable[[str, int, int, int], None] | None:
    # Spark's readers log a lost range (they have no counter to add it to; the Arrow path counts)
    return log_lost if options.get("on_data_loss") == "continue" else None


def register(spark: Any) -> None:
    """Register the data source with ``spark`` (once per session)."""
    from icesql.engine.backends.spark.session import register_data_source

    register_data_source(spark, KafkaDataSource)


__all__ = [
    "NAME",
    "PIECE_SCHEMA",
    "RECORD_SCHEMA",
    "KafkaDataSource",
    "OffsetRange",
    "conf_from_options",
    "plan_ranges",
    "read_range",
    "register",
    "share",
]
