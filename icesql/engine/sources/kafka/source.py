"""``icesql_kafka``: a Kafka topic as a Spark streaming data source (a Python data source over
confluent-kafka / librdkafka; Spark's own Kafka connector is not needed).

Spark keeps the query's offsets (``offsets.py``: ``{"0": next offset, ...}`` per partition) in its
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
    * Partitions added while the query runs appear at the next trigger and are read from offset 0.

Options (strings). Spark redacts option values whose keys match its redaction pattern
(``secret``, ``password``, ``token``, ...): librdkafka settings travel as ``kafka.<setting>``, and
the secret ones as ``secret.kafka.<setting>`` so that no plan, log or UI shows them.

* ``topic``; ``seed``: a JSON file (written by the sink before the query starts,
  ``progress.KafkaProgress``) with the offsets a new checkpoint starts from when the table already
  holds some of the topic; ``start`` ('earliest' | 'latest') and ``start_ts`` (epoch ms) otherwise;
* ``max_records``: at most this many offsets per trigger, shared among partitions by their lag;
  ``max_bytes``: about this many bytes per trigger (records of the mean size of a sample taken
  when the query starts);
* ``parallelism``: the cores to keep busy; ``piece_records``: the longest range one task reads;
"""

from __future__ import annotations

import json
import logging
import os
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

from icesql.engine.sources.kafka.offsets import Offsets, dump, parse, records_between
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


def share(start: Mapping[int, int], end: Mapping[int, int], budget: int) -> Offsets:
    """At most ``budget`` offsets from ``start`` toward ``end``, shared among the partitions in
    proportion to their lag (every partition with lag moves when the budget allows)."""
    lag = {p: max(0, e - start.get(p, 0)) for p, e in end.items()}
    total = sum(lag.values())
    if total <= budget:
        return dict(end)
    out = {p: start.get(p, 0) for p in end}
    left = budget
    for p in sorted(lag, key=lambda q: (-lag[q], q)):
        take = min(lag[p], max(1, budget * lag[p] // total), left)
        out[p] += take
        left -= take
        if left <= 0:
            break
    return out


# --------------------------------------------------------------------------- planning


class OffsetRange(InputPartition):
    """One task's ranges: ``(partition, start, end)`` of one topic (picklable)."""

    def __init__(self, topic: str, ranges: Sequence[tuple[int, int, int]]) -> None:
        super().__init__(ranges)
        self.topic = topic
        self.ranges = tuple(ranges)


def plan_ranges(
    topic: str, start: Mapping[int, int], end: Mapping[int, int], parallelism: int, piece_records: int
) -> list[OffsetRange]:
    """Split the batch's ranges so that every core reads, and pack short ones together so that
    no more tasks run than cores need: each task reads at most ``size`` records (the batch over
    the cores, at least ``MIN_PIECE_RECORDS``, at most ``piece_records``). A small trigger of six
    partitions is then one or two tasks, not six (a task's fixed cost - a Python worker, a
    broker round trip - is most of a small trigger's time)."""
    spans = [(p, start.get(p, 0), e) for p, e in sorted(end.items()) if e > start.get(p, 0)]
    total = sum(e - s for _, s, e in spans)
    if not spans:
        return []
    size = min(piece_records, max(MIN_PIECE_RECORDS, -(-total // max(1, parallelism))))
    tasks: list[list[tuple[int, int, int]]] = []
    held = size  # records in the last task (full: start a new one)
    for p, s, e in spans:
        while s < e:
            n = min(e - s, size)
            if held + n > size:
                tasks.append([])
                held = 0
            tasks[-1].append((p, s, s + n))
            held += n
            s += n
    return [OffsetRange(topic, ranges) for ranges in tasks]


# --------------------------------------------------------------------------- reading


# --------------------------------------------------------------------------- the data source


def read_seed(path: str | None) -> dict[str, Any] | None:
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        data: dict[str, Any] = json.load(f)
    return data


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.topic = options["topic"]
        self.conf = conf_from_options(options)
        self.parallelism = int(options.get("parallelism") or 2)
        self.piece_records = int(options.get("piece_records") or DEFAULT_PIECE_RECORDS)
        self.max_records = int(options["max_records"]) if options.get("max_records") else None
        self.max_bytes = int(options["max_bytes"]) if options.get("max_bytes") else None
        self._record_bytes: float | None = None  # sampled once, for MAX BYTES PER TRIGGER
        self.view = TopicView(self.conf, self.topic)
        self._target: Offsets | None = None
        self.pieces = options.get("mode") == "pieces"

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    def initialOffset(self) -> dict[str, int]:
        parts = self.view.partitions()
        seed = read_seed(self.options.get("seed"))
        if seed is not None and seed.get("offsets") is not None:
            known = parse(seed["offsets"])
            starts = self.view.starts([p for p in parts if p not in known])
            return dump({**starts, **known})
        ts = self.options.get("start_ts")
        if ts:
            return dump(self.view.at_time(parts, int(ts)))
        if self.options.get("start") == "latest":
            return dump(self.view.ends(parts))
        return dump(self.view.starts(parts))

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.view.ends(self.view.partitions())

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        begin = parse(start)
        if self._target is not None:
            end = dict(self._target)
        else:
            end = self.view.ends(self.view.partitions())
        for p in begin:  # a partition never disappears; its end never moves back
            end[p] = max(end.get(p, begin[p]), begin[p])
        budget = self.max_records
        if self.max_bytes and records_between(begin, end):
            if self._record_bytes is None:
                self._record_bytes = self.view.record_bytes(begin, end)
            by_bytes = max(1, int(self.max_bytes // max(1.0, self._record_bytes)))
            budget = min(budget, by_bytes) if budget else by_bytes
        if budget:
            end = share(begin, end, budget)
        return dump(end)

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return plan_ranges(self.topic, parse(start), parse(end), self.parallelism, self.piece_records)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, OffsetRange)
        for p, s, e in partition.ranges:
            if self.pieces:  # the Arrow path: the sink's tasks read the range (``arrow``)
                yield (partition.topic, p, s, e)
            else:
                yield from read_range(self.conf, partition.topic, p, s, e, on_lost=_on_lost(self.options))

    def commit(self, end: dict[str, int]) -> None:
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
    """The batch reader: the offsets between ``start`` and ``end`` (JSON options), or from the
    partitions' starts (``start`` = 'earliest') up to ``limit`` records per partition, capped at
    the log end when the read is planned (``SELECT`` previews)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.topic = options["topic"]
        self.conf = conf_from_options(options)

    def partitions(self) -> Sequence[InputPartition]:
        if self.options.get("ranges"):  # exact ranges: what the Arrow path could not decode
            ranges = json.loads(self.options["ranges"])
            return [OffsetRange(self.topic, [(int(p), int(s), int(e))]) for p, s, e in ranges]
        view = TopicView(self.conf, self.topic)
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
            ends = {p: min(e, begin.get(p, 0) + limit) for p, e in ends.items()}
        return plan_ranges(
            self.topic, begin, ends, int(self.options.get("parallelism") or 2), DEFAULT_PIECE_RECORDS
        )

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, OffsetRange)
        for p, s, e in partition.ranges:
            yield from read_range(self.conf, partition.topic, p, s, e, on_lost=_on_lost(self.options))


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
