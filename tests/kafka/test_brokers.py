"""What the KAFKA source engine relies on from the two test brokers (noida-db, tansu), measured
through confluent-kafka: the faults of each are asserted as observed, so a broker upgrade that
changes them shows up here first. /tmp/kafka-facts.md (copied into the commit message) has the
numbers behind each test."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import OFFSET_END, KafkaError, KafkaException, TopicPartition

from tests.support import kafka as K
from tests.support.kafka import Broker, Record

# -m slow (CI's time, 44 s): like the store servers' smoke tests, these test the brokers and the
# client without icesql; tests/kafka runs icesql's KAFKA source against the same two brokers
pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(120)]


def _records(n: int, partitions: int = 3) -> list[Record]:
    return [
        Record(
            f"k{i}".encode(),
            b'{"id": %d, "pad": "%s"}' % (i, b"x" * 80),
            [("n", str(i).encode())],
            i % partitions,
        )
        for i in range(n)
    ]


def _counts(rows: list[K.Consumed]) -> dict[int, int]:
    out: dict[int, int] = {}
    for r in rows:
        out[r.partition] = out.get(r.partition, 0) + 1
    return out


@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4", "zstd"])
def test_keys_headers_nulls_round_trip(
    kafka_broker: Broker, topic_name: str, compression: str | None
) -> None:
    """Keys, headers (repeated names, empty and null values), null values (tombstones), empty
    values and binary keys come back exactly, under every codec the source must decode."""
    b = kafka_broker.bootstrap
    K.create_topic(b, topic_name, 3)
    recs = [
        Record(b"k1", b"v1", [("h", b"a"), ("h", b"b"), ("empty", b"")], 0),
        Record(None, b"no key", None, 0),
        Record(b"tomb", None, None, 1),
        Record(b"", b"", None, 1),
        Record(b"nullh", b"x", [("n", None)], 2),
        Record(b"\x00\xff", "ünï ✓".encode(), [("ü", "ö".encode())], 2),
    ] + _records(300)
    delivered = K.produce(b, topic_name, recs, compression=compression, linger_ms=20)
    assert len(delivered) == len(recs)
    got = K.replay(b, topic_name)
    by_value = {(r.partition, r.key, r.value): r for r in got}
    assert len(got) == len(recs)
    for want in recs:
        row = by_value[(want.partition, want.key, want.value)]
        assert list(row.headers) == list(want.headers or []), want
    assert by_value[(1, b"tomb", None)].value is None
    assert by_value[(1, b"", b"")].value == b""  # empty stays empty, not null
    assert all(r.timestamp_type == 1 and r.timestamp > 0 for r in got)


def test_idempotent_producer(kafka_broker: Broker, topic_name: str) -> None:
    b = kafka_broker.bootstrap
    K.create_topic(b, topic_name, 3)
    K.produce(b, topic_name, _records(1500), idempotent=True, linger_ms=20)
    got = K.replay(b, topic_name)
    assert len(got) == len({r.key for r in got}) == 1500
    assert _counts(got) == {0: 500, 1: 500, 2: 500}


def test_list_offsets_versus_fetch_high_watermark(kafka_broker: Broker, topic_name: str) -> None:
    """noida's ListOffsets(latest) is the log end. tansu's is the newest batch's base offset + 1,
    so with multi-record batches (linger.ms=50) it falls short; the high watermark of a Fetch
    response (the EOF offset, ``get_watermark_offsets(cached=True)``) is right on both. This is
    why the source takes max(ListOffsets, Fetch HW) as a batch's end: planning from ListOffsets
    alone silently lags on tansu (it also makes OFFSET_END / 'latest' start short there)."""
    b = kafka_broker.bootstrap
    K.create_topic(b, topic_name, 3)
    K.produce(b, topic_name, _records(3000), linger_ms=50)
    listed = K.list_offsets(b, topic_name)
    hw = K.fetch_high_watermarks(b, topic_name)
    assert hw == {0: 1000, 1: 1000, 2: 1000}
    assert K.log_end(b, topic_name) == hw
    assert all(low == 0 for low, _ in listed.values())
    if kafka_broker.kind == "noida":
        assert {p: hi for p, (_, hi) in listed.items()} == hw
    else:  # known fault: short by (size of the newest batch - 1)
        assert all(1 <= hi < hw[p] for p, (_, hi) in listed.items()), listed

    # a consumer's own cached watermark, after one fetch, is the Fetch high watermark
    consumer = K._consumer(b)
    try:
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        deadline = time.monotonic() + 10
        while (msg := consumer.poll(0.5)) is None or msg.error() is not None:
            assert time.monotonic() < deadline
        assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), cached=True) == (0, 1000)

        # OFFSET_END resolves through ListOffsets: on tansu it starts inside the last batch
        consumer.assign([TopicPartition(topic_name, 1, OFFSET_END)])
        tail: list[Any] = []
        while not (tail and tail[-1].error() is not None):  # up to the EOF event
            tail += consumer.consume(2000, timeout=0.1)
            assert time.monotonic() < deadline + 10
        tail = [m for m in tail if m.error() is None]
        if kafka_broker.kind == "noida":
            assert tail == []
        else:
            assert tail and tail[-1].offset() == 999
    finally:
        consumer.close()


def test_transactions_committed_and_aborted(kafka_broker: Broker, topic_name: str) -> None:
    """Each commit/abort marker takes one offset per partition (gaps at 5, 11, 15). noida hides
    aborted records from read_committed; tansu delivers them (known fault), so its tables can
    hold aborted records and the engine's tests must not expect otherwise there."""
    b = kafka_broker.bootstrap
    K.create_topic(b, topic_name, 2)
    first = K.produce_transaction(
        b, topic_name, [(b"k", b"c1-%d" % i, None, i % 2) for i in range(10)], commit=True
    )
    aborted = K.produce_transaction(
        b, topic_name, [(b"k", b"ab-%d" % i, None, i % 2) for i in range(10)], commit=False
    )
    last = K.produce_transaction(
        b, topic_name, [(b"k", b"c2-%d" % i, None, i % 2) for i in range(6)], commit=True
    )
    assert sorted(d.offset for d in first if d.partition == 0) == [0, 1, 2, 3, 4]
    assert sorted(d.offset for d in aborted if d.partition == 0) == [6, 7, 8, 9, 10]
    assert sorted(d.offset for d in last if d.partition == 0) == [12, 13, 14]
    assert K.log_end(b, topic_name) == {0: 16, 1: 16}

    uncommitted = K.replay(b, topic_name, "read_uncommitted")
    committed = K.replay(b, topic_name, "read_committed")
    assert len(uncommitted) == 26
    assert [r.offset for r in uncommitted if r.partition == 0] == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 12, 13, 14]
    if kafka_broker.kind == "noida":
        assert [r.value for r in committed if r.partition == 0] == [
            b"c1-0", b"c1-2", b"c1-4", b"c1-6", b"c1-8", b"c2-0", b"c2-2", b"c2-4",
        ]  # fmt: skip
        assert [r.offset for r in committed if r.partition == 1] == [0, 1, 2, 3, 4, 12, 13, 14]
    else:  # known fault: read_committed sees the aborted records too
        assert committed == uncommitted


def test_open_transaction_holds_read_committed_back(kafka_broker: Broker, topic_name: str) -> None:
    """With a transaction open, the Fetch LSO (what read_committed stops at) stays before it on
    both brokers while the high watermark includes it."""
    from confluent_kafka import Producer

    b = kafka_broker.bootstrap
    K.create_topic(b, topic_name, 1)
    K.produce(b, topic_name, [b"a", b"b", b"c"])
    producer = Producer({"bootstrap.servers": b, "transactional.id": topic_name, "linger.ms": 5})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic_name, value=b"open-%d" % i, partition=0)
    assert producer.flush(30) == 0
    try:
        assert K.fetch_high_watermarks(b, topic_name) == {0: 7}
        assert K.fetch_high_watermarks(b, topic_name, isolation="read_committed") == {0: 3}
        assert [r.value for r in K.replay(b, topic_name, timeout=10)] == [b"a", b"b", b"c"]
    finally:
        producer.abort_transaction(30)


def test_offsets_for_times(kafka_broker: Broker, topic_name: str) -> None:
    """START TIMESTAMP: noida seeks right; tansu answers the earliest offset for every timestamp
    (even one after the last record), so on tansu a timestamp start reads from the beginning."""
    b = kafka_broker.bootstrap
    K.create_topic(b, topic_name, 1)
    base = int(time.time() * 1000) - 100_000
    for j in range(5):  # five batches, 10 s apart
        K.produce(
            b,
            topic_name,
            [Record(None, b"v", timestamp=base + j * 10_000 + i) for i in range(10)],
            linger_ms=50,
        )
    consumer = K._consumer(b)
    try:
        found = [
            consumer.offsets_for_times([TopicPartition(topic_name, 0, base + delta)], timeout=10)[0].offset
            for delta in (-1, 5, 25_000, 60_000)
        ]
    finally:
        consumer.close()
    assert found == ([0, 5, 30, -1] if kafka_broker.kind == "noida" else [0, 0, 0, 0])
    assert [r.timestamp - base for r in K.replay(b, topic_name)][:3] == [0, 1, 2]


def test_add_partitions(kafka_broker: Broker, topic_name: str) -> None:
    """CreatePartitions works on noida (new partitions start at offset 0); tansu does not offer
    the API at all, so added-partition tests run on noida only."""
    b = kafka_broker.bootstrap
    K.create_topic(b, topic_name, 2)
    K.produce(b, topic_name, [(None, b"x", None, p) for p in range(2)])
    if kafka_broker.kind == "tansu":
        with pytest.raises(KafkaException) as e:
            K.add_partitions(b, topic_name, 4, timeout=10)
        assert e.value.args[0].code() == KafkaError._UNSUPPORTED_FEATURE
        return
    K.add_partitions(b, topic_name, 4)
    assert K.partitions_of(b, topic_name) == [0, 1, 2, 3]
    K.produce(b, topic_name, [(None, b"y", None, p) for p in range(4)])
    got = K.replay(b, topic_name)
    assert sorted((r.partition, r.offset) for r in got) == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (3, 0)]


def test_retention_gap(kafka_broker: Broker, topic_name: str) -> None:
    """delete_records moves the log start on noida; reading below it with
    auto.offset.reset=error gives _AUTO_OFFSET_RESET (how a source detects lost records), with
    'earliest' librdkafka skips the gap silently. tansu does not implement DeleteRecords (its
    handler panics, the client sees a transport failure, the broker keeps serving) nor retention,
    so retention-gap tests run on noida only."""
    b = kafka_broker.bootstrap
    K.create_topic(b, topic_name, 2)
    K.produce(b, topic_name, [(None, b"v%d" % i, None, i % 2) for i in range(100)])
    if kafka_broker.kind == "tansu":
        with pytest.raises(KafkaException):
            K.delete_records(b, topic_name, {0: 20}, timeout=10)
        assert K.list_offsets(b, topic_name)[0][0] == 0
        assert len(K.replay(b, topic_name)) == 100
        return
    assert K.delete_records(b, topic_name, {0: 20, 1: 30}) == {0: 20, 1: 30}
    assert {p: lo for p, (lo, _) in K.list_offsets(b, topic_name).items()} == {0: 20, 1: 30}
    got = K.replay(b, topic_name)
    assert (min(r.offset for r in got if r.partition == 0), len(got)) == (20, 50)

    seen: list[Any] = []
    consumer = K._consumer(b, **{"auto.offset.reset": "error"})
    try:
        consumer.assign([TopicPartition(topic_name, 0, 5)])
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                seen.append(msg)
    finally:
        consumer.close()
    assert seen and seen[0].error() is not None
    assert seen[0].error().code() == KafkaError._AUTO_OFFSET_RESET
    assert "out of range" in str(seen[0].error()).lower()


def test_consumer_group_offsets(kafka_broker: Broker, topic_name: str) -> None:
    b = kafka_broker.bootstrap
    K.create_topic(b, topic_name, 1)
    K.produce(b, topic_name, [b"x"] * 10)
    group = f"g-{topic_name}"
    consumer = K._consumer(b, **{"group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 7)], asynchronous=False)
    finally:
        consumer.close()
    consumer = K._consumer(b, **{"group.id": group})
    try:
        assert [tp.offset for tp in consumer.committed([TopicPartition(topic_name, 0)], timeout=10)] == [7]
    finally:
        consumer.close()


def _survives_restart(broker: Broker, topic: str) -> None:
    b = broker.bootstrap
    K.create_topic(b, topic, 3)
    K.produce(b, topic, _records(600), linger_ms=20)
    K.produce_transaction(b, topic, [(None, b"aborted", None, 0)], commit=False)
    K.produce_transaction(b, topic, [(None, b"committed", None, 0)], commit=True)
    before = K.replay(b, topic, "read_uncommitted")
    ends = K.log_end(b, topic)
    broker.restart()
    assert K.replay(b, topic, "read_uncommitted") == before
    assert K.log_end(b, topic) == ends
    K.produce(b, topic, [(None, b"late", None, 1)])
    if broker.kind == "noida":
        time.sleep(1.5)  # noida saves about once a second: a SIGKILL right after an ack loses records
    broker.restart(graceful=False)
    after = K.replay(b, topic, "read_uncommitted")
    assert set(before) <= set(after)
    assert [r.value for r in after if r not in set(before)] == [b"late"]


def test_noida_restart_keeps_data(noida_broker: Broker, topic_name: str) -> None:
    """noida keeps records, offsets and transaction state across SIGTERM and (for data older than
    about a second) SIGKILL restarts on the same port and data directory."""
    _survives_restart(noida_broker, topic_name)
    committed = K.replay(noida_broker.bootstrap, topic_name)
    assert [r.value for r in committed if r.partition == 0][-1] == b"committed"
    assert b"aborted" not in {r.value for r in committed}


@pytest.mark.weed
def test_tansu_s3_restart_keeps_data(tansu_s3: Broker, topic_name: str) -> None:
    """tansu on weed mini's S3 keeps everything across SIGTERM and SIGKILL restarts."""
    _survives_restart(tansu_s3, topic_name)


def test_fetch_size_limits(kafka_broker: Broker, topic_name: str) -> None:
    """tansu honours fetch.max.bytes / max.partition.fetch.bytes; noida answers a Fetch with
    everything from the fetch offset to the log end, and librdkafka drops a response larger than
    receive.message.max.bytes and retries forever with no error event (the consumer just gets
    nothing). So the source must set receive.message.max.bytes far above its backlog per consumer
    (default 100 MB: a 1M-record topic of 100 B records already stalls) - scaled down here."""
    b = kafka_broker.bootstrap
    K.create_topic(b, topic_name, 2)
    # batches of at most 16 KB: a broker returns a whole batch even when it is above the limits
    records = [(None, b"x" * 100, None, i % 2) for i in range(6000)]
    K.produce(b, topic_name, records, linger_ms=5, config={"batch.size": 16384})
    limits = {
        "receive.message.max.bytes": 200_000,
        "fetch.max.bytes": 100_000,
        "max.partition.fetch.bytes": 50_000,
        "message.max.bytes": 100_000,
    }
    consumer = K._consumer(b, **limits)
    got = 0
    try:
        consumer.assign([TopicPartition(topic_name, p, 0) for p in (0, 1)])
        deadline = time.monotonic() + (4 if kafka_broker.kind == "noida" else 20)
        while got < 6000 and time.monotonic() < deadline:
            got += sum(m.error() is None for m in consumer.consume(10_000, timeout=0.1))
    finally:
        consumer.close()
    assert got == (0 if kafka_broker.kind == "noida" else 6000)
    assert len(K.replay(b, topic_name)) == 6000  # the helpers lift the limit
