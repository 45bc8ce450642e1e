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
import threading
import time
import uuid
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
CONF_PREFIX = "kafka."
SECRET_PREFIX = "secret.kafka."
DEFAULT_PIECE_RECORDS = 500_000
MIN_PIECE_RECORDS = 20_000
BATCH_RECORDS = 10_000  # records per Arrow batch a task yields
METADATA_TIMEOUT = 15.0
READ_STALL = 60.0  # seconds a range may go without a record before its task fails

log = logging.getLogger("icesql.kafka")


class DataLossError(RuntimeError):
    """Records a batch must read are gone (retention deleted them before the sink read them)."""


UNAVAILABLE = "ICESQL-KAFKA-UNAVAILABLE: "  # transient (``failures``: retried)
REFUSED = "ICESQL-KAFKA-REFUSED: "  # final: credentials or ACLs


def kafka_failure(where: str, err: Any) -> RuntimeError:
    """A librdkafka error as a marked error the driver's failure rules recognise."""
    from confluent_kafka import KafkaError

    code = err.code() if hasattr(err, "code") else None
    text = err.str() if hasattr(err, "str") else str(err)
    refused = {
        KafkaError._AUTHENTICATION,
        KafkaError._SSL,
        getattr(KafkaError, "SASL_AUTHENTICATION_FAILED", -10_000),
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
    marker = REFUSED if code in refused else UNAVAILABLE
    return RuntimeError(f"{marker}{where}: {text}|END")


def kafka_options(conf: Mapping[str, Any], secret_keys: frozenset[str]) -> dict[str, str]:
    """librdkafka settings as data source options (secret ones under a name Spark redacts)."""
    return {
        (SECRET_PREFIX if k in secret_keys else CONF_PREFIX) + k: str(v)
        for k, v in conf.items()
        if k != "logger"
    }


def conf_from_options(options: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in options.items():
        if k.startswith(SECRET_PREFIX):
            out[k[len(SECRET_PREFIX) :]] = v
        elif k.startswith(CONF_PREFIX):
            out[k[len(CONF_PREFIX) :]] = v
    return out


def _consumer(conf: Mapping[str, str], **extra: Any) -> Any:
    from confluent_kafka import Consumer

    settings: dict[str, Any] = {
        **conf,
        # assign() never joins the group: the id only satisfies librdkafka
        "group.id": extra.pop("group_id", None) or f"icesql-reader-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 50,
        # a broker returns at least one whole record batch whatever the fetch limits (noida-db
        # even the whole remainder of a partition): below that size a consumer stalls silently
        "receive.message.max.bytes": 2147483647,
        "logger": logging.getLogger("icesql.kafka.librdkafka"),
        **extra,
    }
    return Consumer(settings)


# --------------------------------------------------------------------------- the broker's view


class TopicView:
    """The planner's consumer: partitions, log starts and true log ends of one topic."""

    def __init__(self, conf: Mapping[str, str], topic: str) -> None:
        self.conf = dict(conf)
        self.topic = topic
        self._c: Any = None

    @property
    def consumer(self) -> Any:
        if self._c is None:
            self._c = _consumer(self.conf)
        return self._c

    def close(self) -> None:
        if self._c is not None:
            try:
                self._c.close()
            finally:
                self._c = None

    def partitions(self) -> list[int]:
        from confluent_kafka import KafkaException

        try:
            md = self.consumer.list_topics(topic=self.topic, timeout=METADATA_TIMEOUT)
        except KafkaException as e:
            raise kafka_failure(f"topic '{self.topic}' metadata", e.args[0] if e.args else e) from None
        t = md.topics.get(self.topic)
        if t is None or t.error is not None or not t.partitions:
            why = t.error if t is not None and t.error is not None else "no such topic"
            raise RuntimeError(f"topic '{self.topic}' cannot be read: {why}")
        return sorted(t.partitions)

    def starts(self, parts: Sequence[int]) -> Offsets:
        from confluent_kafka import TopicPartition

        out = {}
        for p in parts:
            lo, _ = self.consumer.get_watermark_offsets(
                TopicPartition(self.topic, p), timeout=METADATA_TIMEOUT, cached=False
            )
            out[p] = max(0, int(lo))
        return out

    def ends(self, parts: Sequence[int]) -> Offsets:
        """Each partition's log end (the last stable offset: read_committed), the larger of what
        ListOffsets says and what a Fetch from that position finds."""
        from confluent_kafka import KafkaError, TopicPartition

        c = self.consumer
        listed: Offsets = {}
        for p in parts:
            _, hi = c.get_watermark_offsets(TopicPartition(self.topic, p), timeout=METADATA_TIMEOUT, cached=False)
            listed[p] = max(0, int(hi))
        # a fetch at the listed end answers with the true high watermark (and, read_committed,
        # the last stable offset): a record at or past the listed end means ListOffsets lied
        c.assign([TopicPartition(self.topic, p, listed[p]) for p in parts])
        ends = dict(listed)
        pending = set(parts)
        lied: set[int] = set()  # partitions with a record at or past the listed end
        deadline = time.monotonic() + METADATA_TIMEOUT
        try:
            while pending and time.monotonic() < deadline:
                for m in c.consume(num_messages=len(pending), timeout=0.5):
                    p = m.partition()
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF and p in pending:
                            # the end of what read_committed can read (the last stable offset)
                            ends[p] = max(ends[p], int(m.offset()))
                            pending.discard(p)
                        elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                            pending.discard(p)  # the listed end is past the log: the listing stands
                        continue
                    if p in pending:
                        ends[p] = max(ends[p], int(m.offset()) + 1)
                        lied.add(p)
                        pending.discard(p)
            # where ListOffsets under-reported, the Fetch response's watermark is the end (a
            # partition that answered with its end of log keeps that: under an open transaction
            # the high watermark is past what read_committed may read)
            for p in sorted(lied):
                _, hw = c.get_watermark_offsets(TopicPartition(self.topic, p), cached=True)
                if hw is not None and hw >= 0:
                    ends[p] = max(ends[p], int(hw))
        finally:
            c.unassign()
        if pending:
            log.debug("topic %s: no fetch answer for partitions %s; ListOffsets taken", self.topic, sorted(pending))
        return ends

    def record_bytes(self, at: Mapping[int, int], end: Mapping[int, int], sample: int = 200) -> float:
        """The mean size (key + value + headers) of up to ``sample`` records from the partition
        with the most records between ``at`` and ``end``: what MAX BYTES PER TRIGGER divides."""
        from confluent_kafka import KafkaError, TopicPartition

        p = max(end, key=lambda q: end[q] - at.get(q, 0))
        c = self.consumer
        c.assign([TopicPartition(self.topic, p, at.get(p, 0))])
        sizes: list[int] = []
        deadline = time.monotonic() + METADATA_TIMEOUT
        try:
            while len(sizes) < sample and time.monotonic() < deadline:
                msgs = c.consume(num_messages=sample, timeout=0.5)
                for m in msgs:
                    if m.error() is None:
                        hs = sum(len(k) + len(v or b"") for k, v in (m.headers() or []))
                        sizes.append(len(m.key() or b"") + len(m.value() or b"") + hs)
                    elif m.error().code() == KafkaError._PARTITION_EOF:
                        deadline = 0.0
        finally:
            c.unassign()
        return sum(sizes) / len(sizes) if sizes else 1.0

    def at_time(self, parts: Sequence[int], ts_ms: int) -> Offsets:
        """The first offset at or after ``ts_ms`` per partition (the log end where none is)."""
        from confluent_kafka import TopicPartition

        found = self.consumer.offsets_for_times(
            [TopicPartition(self.topic, p, int(ts_ms)) for p in parts], timeout=METADATA_TIMEOUT
        )
        ends = None
        out: Offsets = {}
        for tp in found:
            if tp.offset is None or tp.offset < 0:
                ends = ends or self.ends(parts)
                out[tp.partition] = ends[tp.partition]
            else:
                out[tp.partition] = int(tp.offset)
        return out


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


def read_range(
    conf: Mapping[str, str],
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    on_lost: Callable[[str, int, int, int], None] | None = None,
) -> Iterator[Any]:
    """The records of offsets [start, end) of one partition as Arrow batches (``RECORD_SCHEMA``).

    Records retention deleted before they were read raise ``DataLossError``; with ``on_lost``
    (ON DATA LOSS = 'continue') the read goes on from the log start and ``on_lost(topic,
    partition, first, end)`` is told the lost offsets [first, end)."""
    import pyarrow as pa
    from confluent_kafka import KafkaError, TopicPartition

    if end <= start:
        return
    schema = _arrow_schema()
    c = _reader(conf)
    finished = False
    try:
        c.assign([TopicPartition(topic, partition, start)])
        cols: dict[str, list[Any]] = {n: [] for n in schema.names}
        pos = start
        last_progress = time.monotonic()
        done = False
        while not done:
            # never more than the range still needs: consume() waits out its timeout for as many
            # as it is asked, and a range ending at the log end has no more to give (a 1 s wait
            # per range was most of a small trigger's time)
            msgs = c.consume(num_messages=max(1, min(BATCH_RECORDS, end - pos)), timeout=0.2)
            if not msgs and time.monotonic() - last_progress > READ_STALL:
                raise RuntimeError(
                    f"{UNAVAILABLE}topic '{topic}' partition {partition}: no record for {READ_STALL:.0f}s at "
                    f"offset {pos} of the range {start}-{end - 1}|END"
                )
            # the records between error events, a column at a time (a loop over the records with
            # its checks was most of a range's read: 0.9 s of 1.6 s for 100k records)
            events = [k for k, m in enumerate(msgs) if m.error() is not None]
            i = 0
            for j in [*events, len(msgs)]:
                if j > i:
                    before = pos
                    pos, done = _append_records(cols, msgs[i:j], topic, partition, end, pos)
                    if pos != before:
                        last_progress = time.monotonic()
                if done or j == len(msgs):
                    break
                m, i = msgs[j], j + 1
                if m.topic() is not None and (m.partition() != partition or m.topic() != topic):
                    continue  # a reused reader's earlier assignment (librdkafka drops those; be sure)
                err = m.error()
                code = err.code()
                if code == KafkaError._PARTITION_EOF:
                    done = m.offset() >= end
                    if done:
                        break
                    continue
                if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    lo = _log_start(c, topic, partition)
                    if on_lost is None or lo is None or lo <= pos:
                        gone = min(end, lo) if lo is not None and lo > pos else None
                        raise DataLossError(lost_message(topic, partition, pos, gone))
                    on_lost(topic, partition, pos, min(lo, end))
                    if lo >= end:
                        done = True
                        break
                    pos = lo
                    last_progress = time.monotonic()
                    c.assign([TopicPartition(topic, partition, lo)])
                    break  # the records fetched so far belong to the old position
                raise kafka_failure(f"topic '{topic}' partition {partition}", err)
            if len(cols["offset"]) >= BATCH_RECORDS or (done and cols["offset"]):
                yield pa.RecordBatch.from_pydict(cols, schema=schema)
                cols = {n: [] for n in schema.names}
        finished = True
    finally:
        _release(conf, c, reuse=finished)


def _append_records(
    cols: dict[str, list[Any]], msgs: list[Any], topic: str, partition: int, end: int, pos: int
) -> tuple[int, bool]:
    """Records without errors onto ``cols``, those of [``pos``, ``end``) of ``topic``/``partition``
    only; (the next position, whether the range is done)."""
    import bisect

    # a reused reader's earlier assignment (librdkafka drops those; be sure)
    msgs = [m for m in msgs if m.partition() == partition and m.topic() == topic]
    offsets = [m.offset() for m in msgs]
    done = False
    if offsets and offsets[-1] >= end:
        cut = bisect.bisect_left(offsets, end)
        msgs, offsets, done = msgs[:cut], offsets[:cut], True
    if not msgs:
        return pos, done
    n = len(msgs)
    stamps = [m.timestamp() for m in msgs]
    headers = [m.headers() for m in msgs]
    cols["key"] += [m.key() for m in msgs]
    cols["value"] += [m.value() for m in msgs]
    cols["topic"] += [topic] * n
    cols["partition"] += [partition] * n
    cols["offset"] += offsets
    cols["timestamp"] += [ts * 1000 if kind and ts is not None and ts >= 0 else None for kind, ts in stamps]
    cols["timestampType"] += [max(0, kind - 1) if kind else None for kind, _ in stamps]
    cols["headers"] += [[{"key": k, "value": v} for k, v in h] if h is not None else None for h in headers]
    nxt = offsets[-1] + 1
    return nxt, done or nxt >= end


# A task's consumer outlives its range: the next range this Python worker reads (the same task's
# next piece, or a later trigger's task, since Spark reuses its Python workers) skips the
# connection and bootstrap a new librdkafka client pays - most of a small trigger's read. One
# idle consumer per connection per worker thread, unassigned (so it prefetches nothing) between
# ranges: a Spark Python worker reads with one thread, a run without Spark (``local_query``) with
# one per core, and a thread that found no idle consumer paid a new one and closed it after its
# range (about a second of a 100k-record batch).
_IDLE_READERS: dict[tuple[tuple[str, str], ...], list[Any]] = {}
_IDLE_LOCK = threading.Lock()


def _reader(conf: Mapping[str, str]) -> Any:
    with _IDLE_LOCK:
        idle = _IDLE_READERS.get(tuple(sorted(conf.items())))
        c = idle.pop() if idle else None
    return c if c is not None else _consumer(conf, **{"fetch.wait.max.ms": 100})


def _release(conf: Mapping[str, str], c: Any, *, reuse: bool) -> None:
    """Back to the idle consumers after a whole range was read (at most one per core); closed
    after a failure or an abandoned read (its state is not known), or when enough are idle."""
    key = tuple(sorted(conf.items()))
    if reuse:
        try:
            c.unassign()
            with _IDLE_LOCK:
                idle = _IDLE_READERS.setdefault(key, [])
                if len(idle) < (os.cpu_count() or 1):
                    idle.append(c)
                    return
        except Exception:  # noqa: BLE001 - a consumer that cannot unassign is closed instead
            log.debug("an idle Kafka reader could not be kept", exc_info=True)
    c.close()


def _log_start(c: Any, topic: str, partition: int) -> int | None:
    from confluent_kafka import TopicPartition

    try:
        lo, _ = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    except Exception:  # noqa: BLE001 - the caller says what it can without it
        return None
    return int(lo)


def lost_message(topic: str, partition: int, first: int, end: int | None) -> str:
    lost = f"{first}-{end - 1}" if end is not None else f"from {first}"
    return (
        f"topic '{topic}' partition {partition}: records {lost} were deleted (retention) before the sink "
        "read them"
    )


def log_lost(topic: str, partition: int, first: int, end: int) -> None:
    """ON DATA LOSS = 'continue': one warning line per lost range (in the task that met it)."""
    log.warning("%s; skipped (ON DATA LOSS = 'continue')", lost_message(topic, partition, first, end))


def _arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("timestampType", pa.int32()),
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ]
    )


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
        return plan_ranges(self.topic, begin, ends, int(self.options.get("parallelism") or 2), DEFAULT_PIECE_RECORDS)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, OffsetRange)
        for p, s, e in partition.ranges:
            yield from read_range(self.conf, partition.topic, p, s, e, on_lost=_on_lost(self.options))


def _on_lost(options: Mapping[str, str]) -> Callable[[str, int, int, int], None] | None:
    # Spark's readers log a lost range (they have no counter to add it to; the Arrow path counts)
    return log_lost if options.get("on_data_loss") == "continue" else None


_registered: set[int] = set()
_register_lock = threading.Lock()


def register(spark: Any) -> None:
    """Register the data source with ``spark`` (once per session)."""
    key = id(spark)
    with _register_lock:
        if key in _registered:
            return
        spark.dataSource.register(KafkaDataSource)
        _registered.add(key)


__all__ = [
    "NAME",
    "PIECE_SCHEMA",
    "RECORD_SCHEMA",
    "DataLossError",
    "KafkaDataSource",
    "OffsetRange",
    "conf_from_options",
    "kafka_options",
    "plan_ranges",
    "read_range",
    "register",
    "share",
]
