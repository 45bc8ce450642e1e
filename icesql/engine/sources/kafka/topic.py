"""A Kafka topic through confluent-kafka (librdkafka), without Spark: a topic's partitions and their
true log ends (TopicView), exact reads of offset ranges into Arrow batches with Spark's Kafka record
schema (read_range, one kept consumer per worker), the librdkafka settings carried in options, and
Kafka's failures and lost records in one line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from itertools import chain, compress, count, repeat
from operator import is_not
from typing import Any

from icesql.engine.sources.kafka.offsets import Offsets, PartitionKey
from icesql.engine.sources.kafka.subscription import Subscription

log = logging.getLogger("icesql.kafka")

CONF_PREFIX = "kafka."
SECRET_PREFIX = "secret.kafka."
BATCH_RECORDS = 50_000  # records per Arrow batch a task yields
BATCH_BYTES = 64 << 20  # ... or fewer, when their buffers would pass this
CONSUME_RECORDS = 10_000  # messages per consume() call
METADATA_TIMEOUT = 15.0
READ_STALL = 60.0  # seconds a range may go without a record before its task fails
GONE_CHECK = 5.0  # ... and between two looks, meanwhile, at whether its topic was deleted
# How long a broker may hold a fetch that finds no record (fetch.wait.max.ms). icesql never
# waits there for records to come: a range read asks only for offsets the log holds, the planner
# for the log's end. librdkafka keeps one fetch in flight per broker and sends the next one, past
# a range's last record, as that record arrives; a broker that honours the wait (Apache Kafka,
# tansu; noida-db answers at once) holds it that long, and the next range assigned to the same
# kept reader waits it out before its first record: with 100 ms, 0.10 s of each partition range's
# 0.12 s on tansu (benchmarks/probes/kafka_range_reads.py).
FETCH_WAIT_MS = 5


class DataLossError(RuntimeError):
    """Records a batch must read are gone (retention deleted them before the sink read them)."""


UNAVAILABLE = "ICESQL-KAFKA-UNAVAILABLE: "  # transient (``failures``: retried)
REFUSED = "ICESQL-KAFKA-REFUSED: "  # final: credentials or ACLs


def unknown_topic(err: Any) -> bool:
    """Whether a librdkafka error (or None) says the topic or partition does not exist."""
    from confluent_kafka import KafkaError

    codes = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC)
    return err is not None and hasattr(err, "code") and err.code() in codes


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


def new_consumer(conf: Mapping[str, str], **extra: Any) -> Any:
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
        "fetch.wait.max.ms": FETCH_WAIT_MS,
        # a broker returns at least one whole record batch whatever the fetch limits (noida-db
        # even the whole remainder of a partition): below that size a consumer stalls silently
        "receive.message.max.bytes": 2147483647,
        "logger": logging.getLogger("icesql.kafka.librdkafka"),
        **extra,
    }
    return Consumer(settings)


class TopicView:
    """The planner's requests: the partitions, log starts and true log ends of a source's topics
    (``subscription.Subscription``), keyed by (topic, partition).

    Its requests borrow a consumer from the idle readers the range reads keep (``_reader``,
    ``_release``) and give it back: in a run without Spark the planner and the tasks share their
    librdkafka clients (the first range read takes the client the planner connected, and the
    planner the one a range read left), instead of one client more, connected and bootstrapped
    for the planner alone. On Spark the planner is in the driver and keeps its one client there.

    A source of many topics lists every topic of the cluster and keeps those it reads (one
    metadata request whatever their number; a pattern needs every name anyway), and outlives the
    deletion of one: a request that finds a topic gone leaves its partitions out of
    the answer and adds the topic to ``missing`` (the reader confirms it with ``gone``). A source
    of one topic fails there, as it always has."""

    def __init__(self, conf: Mapping[str, str], subscription: Subscription) -> None:
        self.conf = dict(conf)
        self.sub = subscription
        self.missing: set[str] = set()  # topics found gone by a request since the caller looked

    @contextlib.contextmanager
    def _client(self) -> Iterator[Any]:
        """A consumer for one request (or a few in a row), unassigned: back to the idle readers
        after it, closed after a failure (its state is not known)."""
        c = _reader(self.conf)
        ok = False
        try:
            yield c
            ok = True
        finally:
            _release(self.conf, c, reuse=ok)

    def close(self) -> None:
        """Nothing of its own to close: its clients are the idle readers'."""

    def partitions(self) -> list[PartitionKey]:
        from confluent_kafka import KafkaException

        topic = self.sub.single
        try:
            with self._client() as c:
                md = c.list_topics(topic=topic, timeout=METADATA_TIMEOUT)
        except KafkaException as e:
            raise kafka_failure(f"{self.sub.describe()}: metadata", e.args[0] if e.args else e) from None
        if topic is not None:
            t = md.topics.get(topic)
            if t is None or t.error is not None or not t.partitions:
                why = t.error if t is not None and t.error is not None else "no such topic"
                raise RuntimeError(f"topic '{topic}' cannot be read: {why}")
            return [(topic, p) for p in sorted(t.partitions)]
        # a topic still being created (no leader yet: an error) is read from the next listing
        return sorted(
            (name, p)
            for name, t in md.topics.items()
            if self.sub.reads(name) and t.error is None
            for p in t.partitions
        )

    def gone(self, topic: str) -> bool:
        """Whether the cluster says ``topic`` does not exist (asked by name: a topic left out of one
        listing of every topic is not taken for deleted on that alone)."""
        from confluent_kafka import KafkaException

        try:
            with self._client() as c:
                md = c.list_topics(topic=topic, timeout=METADATA_TIMEOUT)
        except KafkaException:
            return False
        t = md.topics.get(topic)
        return t is None or unknown_topic(t.error)

    def _watermarks(
        self, tps: Sequence[PartitionKey], *, cached: bool = False, c: Any = None
    ) -> dict[PartitionKey, tuple[int, int]]:
        if c is None:
            with self._client() as borrowed:
                return self._watermarks(tps, cached=cached, c=borrowed)
        from confluent_kafka import KafkaException, TopicPartition

        out = {}
        for t, p in tps:
            if t in self.missing:
                continue
            try:
                lo, hi = c.get_watermark_offsets(
                    TopicPartition(t, p), timeout=METADATA_TIMEOUT, cached=cached
                )
            except KafkaException as e:
                err = e.args[0] if e.args else None
                if self.sub.single is None and unknown_topic(err):
                    self.missing.add(t)  # deleted since the topics were listed
                    continue
                raise
            out[(t, p)] = (max(0, int(lo)), max(0, int(hi)))
        return out

    def starts(self, tps: Sequence[PartitionKey]) -> Offsets:
        return {k: lo for k, (lo, _) in self._watermarks(tps).items()}

    def ends(self, tps: Sequence[PartitionKey]) -> Offsets:
        """Each partition's log end (the last stable offset: read_committed), the larger of what
        ListOffsets says and what a Fetch from that position finds."""
        with self._client() as c:
            return self._ends(c, tps)

    def _ends(self, c: Any, tps: Sequence[PartitionKey]) -> Offsets:
        from confluent_kafka import KafkaError, TopicPartition

        listed: Offsets = {k: hi for k, (_, hi) in self._watermarks(tps, c=c).items()}
        # a fetch at the listed end answers with the true high watermark (and, read_committed,
        # the last stable offset): a record at or past the listed end means ListOffsets lied
        c.assign([TopicPartition(t, p, o) for (t, p), o in listed.items()])
        ends = dict(listed)
        pending = set(listed)
        lied: set[PartitionKey] = set()  # partitions with a record at or past the listed end
        deadline = time.monotonic() + METADATA_TIMEOUT
        try:
            while pending and time.monotonic() < deadline:
                for m in c.consume(num_messages=len(pending), timeout=0.5):
                    k = (m.topic(), m.partition())
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF and k in pending:
                            # the end of what read_committed can read (the last stable offset)
                            ends[k] = max(ends[k], int(m.offset()))
                            pending.discard(k)
                        elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                            pending.discard(k)  # the listed end is past the log: the listing stands
                        continue
                    if k in pending:
                        ends[k] = max(ends[k], int(m.offset()) + 1)
                        lied.add(k)
                        pending.discard(k)
            # where ListOffsets under-reported, the Fetch response's watermark is the end (a
            # partition that answered with its end of log keeps that: under an open transaction
            # the high watermark is past what read_committed may read)
            for k, (_, hw) in self._watermarks(sorted(lied), cached=True, c=c).items():
                if hw >= 0:
                    ends[k] = max(ends[k], hw)
        finally:
            c.unassign()
        if pending:
            log.debug(
                "%s: no fetch answer for partitions %s; ListOffsets taken",
                self.sub.describe(),
                sorted(pending),
            )
        return ends

    def record_bytes(
        self, at: Mapping[PartitionKey, int], end: Mapping[PartitionKey, int], sample: int = 200
    ) -> float:
        """The mean size (key + value + headers) of up to ``sample`` records from the partition
        with the most records between ``at`` and ``end``: what MAX BYTES PER TRIGGER divides."""
        t, p = max(end, key=lambda q: end[q] - at.get(q, 0))
        with self._client() as c:
            return self._record_bytes(c, t, p, at.get((t, p), 0), sample)

    @staticmethod
    def _record_bytes(c: Any, t: str, p: int, at: int, sample: int) -> float:
        from confluent_kafka import KafkaError, TopicPartition

        c.assign([TopicPartition(t, p, at)])
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

    def at_time(self, tps: Sequence[PartitionKey], ts_ms: int) -> Offsets:
        """The first offset at or after ``ts_ms`` per partition (the log end where none is)."""
        from confluent_kafka import TopicPartition

        with self._client() as c:
            found = c.offsets_for_times(
                [TopicPartition(t, p, int(ts_ms)) for t, p in tps], timeout=METADATA_TIMEOUT
            )
        ends = None
        out: Offsets = {}
        for tp in found:
            k = (tp.topic, tp.partition)
            if self.sub.single is None and unknown_topic(tp.error):
                self.missing.add(tp.topic)
            elif tp.offset is None or tp.offset < 0:
                ends = ends or self.ends(tps)
                if k in ends:
                    out[k] = ends[k]
            else:
                out[k] = int(tp.offset)
        return out


def read_range(
    conf: Mapping[str, str],
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    on_lost: Callable[[str, int, int, int], None] | None = None,
    columns: Collection[str] | None = None,
) -> Iterator[Any]:
    """The records of offsets [start, end) of one partition as Arrow batches (``RECORD_SCHEMA``).

    ``columns``: the record columns the caller reads (None: all); the others come as nulls (a
    record's timestamp and headers cost more to take from librdkafka than its value).
    Records retention deleted before they were read raise ``DataLossError``; with ``on_lost``
    (ON DATA LOSS = 'continue') the read goes on from the log start and ``on_lost(topic,
    partition, first, end)`` is told the lost offsets [first, end). A range whose topic was
    deleted (found when the broker answers that it does not know the topic, or when the read makes
    no progress for ``GONE_CHECK`` seconds and the metadata says so) ends with a warning: replayed,
    its batch would fail again and again."""
    from confluent_kafka import KafkaError, Message, TopicPartition

    if end <= start:
        return
    _freeze_once()
    schema = _arrow_schema()
    wanted = frozenset(schema.names if columns is None else columns)
    c = _reader(conf)
    finished = False
    try:
        c.assign([TopicPartition(topic, partition, start)])
        held: list[Any] = []  # record batches not yet yielded
        held_rows = held_bytes = 0
        pos = start
        last_progress = looked = time.monotonic()
        done = False
        while not done:
            # never more than the range still needs: consume() waits out its timeout for as many
            # as it is asked, and a range ending at the log end has no more to give (a 1 s wait
            # per range was most of a small trigger's time)
            msgs = c.consume(num_messages=max(1, min(CONSUME_RECORDS, end - pos)), timeout=0.2)
            if not msgs:
                now = time.monotonic()
                # a fetch from a deleted topic answers nothing at all (noida-db): look now and then
                if now - max(last_progress, looked) > GONE_CHECK:
                    looked = now
                    done = _partition_gone(c, topic, partition)
                    if done:
                        log_deleted(topic, partition, pos, end)
                if not done and now - last_progress > READ_STALL:
                    raise RuntimeError(
                        f"{UNAVAILABLE}topic '{topic}' partition {partition}: no record for {READ_STALL:.0f}s at "
                        f"offset {pos} of the range {start}-{end - 1}|END"
                    )
            # the records between error events (almost always one: the end of the partition), a
            # column at a time with C loops over the messages (``map``): a Python step per record
            # was most of a range's read
            errors = list(map(Message.error, msgs))
            # (``is not``: a KafkaError compared with None raises)
            events = list(compress(count(), map(is_not, errors, repeat(None))))
            i = 0
            for j in [*events, len(msgs)]:
                if j > i:
                    before = pos
                    pos, done, chunks = _records(msgs[i:j], topic, partition, end, pos, wanted, schema)
                    for chunk in chunks:
                        size = chunk.get_total_buffer_size()
                        if held and held_bytes + size > BATCH_BYTES:
                            yield _joined(held)
                            held, held_rows, held_bytes = [], 0, 0
                        held.append(chunk)
                        held_rows += chunk.num_rows
                        held_bytes += size
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
                if unknown_topic(err) and _partition_gone(c, topic, partition):
                    log_deleted(topic, partition, pos, end)
                    done = True
                    break
                raise kafka_failure(f"topic '{topic}' partition {partition}", err)
            if held_rows >= BATCH_RECORDS and not done:
                yield _joined(held)
                held, held_rows, held_bytes = [], 0, 0
        finished = True
    finally:
        # the whole range read, the reader goes back to the idle ones (unassigned) before the
        # last batch is handed on: assigned at the log end while the caller works on that batch,
        # it would go on fetching there, a fetch every FETCH_WAIT_MS
        _release(conf, c, reuse=finished)
    if held:
        yield _joined(held)


# confluent-kafka gives a Python object per record, which the cyclic garbage collector tracks: the
# 10,000 of a consume() call outlive two young collections while they are made, so they reach the
# oldest generation and set off a full collection every few calls, each walking every object of the
# process (modules, pyarrow, pyiceberg: some 200k). In a 2M-record run those took 3.3 s of 9.2 s of
# CPU, holding the GIL. ``gc.freeze`` once, before the first range, takes the objects alive then out
# of the collector's walks (cyclic garbage among them is never freed: a one-time, bounded cost).
_FROZEN = threading.Event()


def _freeze_once() -> None:
    import gc

    if not _FROZEN.is_set():
        _FROZEN.set()
        gc.freeze()


def _records(
    msgs: list[Any], topic: str, partition: int, end: int, pos: int, wanted: frozenset[str], schema: Any
) -> tuple[int, bool, Any]:
    """Records without errors of [``pos``, ``end``) of ``topic``/``partition`` only: (the next
    position, whether the range is done, their record batches)."""
    import bisect

    from confluent_kafka import Message

    if set(map(Message.partition, msgs)) != {partition} or set(map(Message.topic, msgs)) != {topic}:
        # a reused reader's earlier assignment (librdkafka drops those; be sure)
        msgs = [m for m in msgs if m.partition() == partition and m.topic() == topic]
    done = False
    if msgs and msgs[-1].offset() >= end:
        offsets: list[Any] = list(map(Message.offset, msgs))
        msgs, done = msgs[: bisect.bisect_left(offsets, end)], True
    if not msgs:
        return pos, done, []
    nxt = msgs[-1].offset() + 1
    return nxt, done or nxt >= end, _batches(msgs, topic, partition, wanted, schema)


def _batches(msgs: list[Any], topic: str, partition: int, wanted: frozenset[str], schema: Any) -> list[Any]:
    """``records_batch`` of ``msgs``, in halves while their keys or values are more bytes than one
    binary array holds."""
    try:
        return [records_batch(msgs, topic, partition, wanted, schema)]
    except OverflowError:
        if len(msgs) == 1:
            raise
        half = len(msgs) // 2
        return _batches(msgs[:half], topic, partition, wanted, schema) + _batches(
            msgs[half:], topic, partition, wanted, schema
        )


def records_batch(
    msgs: Sequence[Any], topic: str, partition: int, wanted: Collection[str], schema: Any
) -> Any:
    """confluent-kafka messages (records, no error events) of one partition as a batch of
    ``schema`` (``RECORD_SCHEMA``), the columns not ``wanted`` null. One C loop over the messages
    per column (``map`` over the unbound method) and the bytes joined into one buffer: building
    the columns from Python lists (``pa.array`` of bytes objects) cost a microsecond a record."""
    import numpy as np
    import pyarrow as pa
    from confluent_kafka import Message

    n = len(msgs)
    arrays = []
    for f in schema:
        name = f.name
        if name not in wanted:
            arrays.append(pa.nulls(n, f.type))
        elif name in ("key", "value"):
            arrays.append(_binary(list(map(Message.key if name == "key" else Message.value, msgs))))
        elif name == "topic":
            arrays.append(pa.repeat(pa.scalar(topic, f.type), n))
        elif name == "partition":
            arrays.append(pa.repeat(pa.scalar(partition, f.type), n))
        elif name == "offset":
            arrays.append(pa.array(np.fromiter(map(Message.offset, msgs), np.int64, n)))
        elif name in ("timestamp", "timestampType"):
            # (kind, ms): kind 0 is "not available"; a kind is Spark's timestampType + 1
            stamps = np.fromiter(chain.from_iterable(map(Message.timestamp, msgs)), np.int64, 2 * n)
            kind, ms = stamps[0::2], stamps[1::2]
            if name == "timestamp":
                present = (kind != 0) & (ms >= 0)
                us = pa.array(ms * 1000, pa.int64(), mask=~present)
                arrays.append(us.view(f.type))
            else:
                arrays.append(pa.array((kind - 1).astype(np.int32), f.type, mask=kind == 0))
        else:  # headers: few records carry any
            heads: list[Any] = list(map(Message.headers, msgs))
            if heads.count(None) == n:
                arrays.append(pa.nulls(n, f.type))
                continue
            listed = [[{"key": k, "value": v} for k, v in h] if h is not None else None for h in heads]
            arrays.append(pa.array(listed, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _binary(items: list[Any]) -> Any:
    """``items`` as one Arrow binary array: the bytes joined, offsets from their lengths."""
    import numpy as np
    import pyarrow as pa

    n = len(items)
    nulls = items.count(None)
    present = list(compress(items, map(is_not, items, repeat(None)))) if nulls else items
    lengths = np.fromiter(map(len, present), np.int64, n - nulls)
    valid = None
    if nulls:
        mask = np.fromiter(map(is_not, items, repeat(None)), np.bool_, n)
        full = np.zeros(n, np.int64)
        full[mask] = lengths
        lengths = full
        valid = pa.py_buffer(np.packbits(mask, bitorder="little"))
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > 2**31 - 1:
        raise OverflowError("more bytes than a binary array's 32-bit offsets reach")
    data = b"".join(present)
    return pa.BinaryArray.from_buffers(
        pa.binary(), n, [valid, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)], null_count=nulls
    )


def _joined(batches: list[Any]) -> Any:
    """One record batch of ``batches`` (those of one read, in order)."""
    import pyarrow as pa

    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches(max_chunksize=None)[0]


# A task's consumer outlives its range: the next range this Python worker reads (the same task's
# next piece, or a later trigger's task, since Spark reuses its Python workers) skips the
# connection and bootstrap a new librdkafka client pays - most of a small trigger's read. One
# idle consumer per connection per worker thread, unassigned (so it prefetches nothing) between
# ranges: a Spark Python worker reads with one thread, a run without Spark (``local_query``) with
# one per core, and a thread that found no idle consumer paid a new one and closed it after its
# range (about a second of a 100k-record batch).
# The consumers of a connection no range read used for ``IDLE_READER_SECONDS`` are closed (at the
# next read of any connection): a long-lived process (a server, a routed sink) would otherwise keep
# a librdkafka client per connection it ever read, each with its threads and sockets, reconnecting
# for ever to a broker that is gone.
_IDLE_READERS: dict[tuple[tuple[str, str], ...], list[Any]] = {}
_IDLE_USED: dict[tuple[tuple[str, str], ...], float] = {}  # when a read of the connection last took or gave one
IDLE_READER_SECONDS = 300.0


_IDLE_LOCK = threading.Lock()


def _unused(key: tuple[tuple[str, str], ...]) -> list[Any]:
    """(Under ``_IDLE_LOCK``.) Note ``key`` as used now; take out the idle consumers of the
    connections unused for ``IDLE_READER_SECONDS``, for the caller to close."""
    now = time.monotonic()
    _IDLE_USED[key] = now
    stale = [k for k, used in _IDLE_USED.items() if now - used > IDLE_READER_SECONDS]
    out: list[Any] = []
    for k in stale:
        out += _IDLE_READERS.pop(k, [])
        del _IDLE_USED[k]
    return out


def _close_all(consumers: list[Any]) -> None:
    for c in consumers:
        try:
            c.close()
        except Exception:  # noqa: BLE001 - a consumer nobody uses any more
            log.debug("closing an unused Kafka reader failed", exc_info=True)


def _reader(conf: Mapping[str, str]) -> Any:
    key = tuple(sorted(conf.items()))
    with _IDLE_LOCK:
        idle = _IDLE_READERS.get(key)
        c = idle.pop() if idle else None
        unused = _unused(key)
    _close_all(unused)
    return c if c is not None else new_consumer(conf)


def _release(conf: Mapping[str, str], c: Any, *, reuse: bool) -> None:
    """Back to the idle consumers after a whole range was read (at most one per core); closed
    after a failure or an abandoned read (its state is not known), or when enough are idle."""
    key = tuple(sorted(conf.items()))
    if reuse:
        try:
            c.unassign()
            with _IDLE_LOCK:
                idle = _IDLE_READERS.setdefault(key, [])
                unused = _unused(key)
                kept = len(idle) < (os.cpu_count() or 1)
                if kept:
                    idle.append(c)
            _close_all(unused)
            if kept:
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


def _partition_gone(c: Any, topic: str, partition: int) -> bool:
    """Whether the cluster says the partition does not exist (its topic deleted, or deleted and
    created again with fewer partitions)."""
    try:
        md = c.list_topics(topic=topic, timeout=10)
    except Exception:  # noqa: BLE001 - the read goes on waiting; a stall still fails it
        return False
    t = md.topics.get(topic)
    return t is None or unknown_topic(t.error) or (t.error is None and partition not in t.partitions)


def log_deleted(topic: str, partition: int, first: int, end: int) -> None:
    log.warning(
        "topic '%s' partition %d was deleted before records %d-%d were read: they are not in the table",
        topic,
        partition,
        first,
        end - 1,
    )


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
