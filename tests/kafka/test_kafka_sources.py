"""KAFKA source behaviours on noida-db (the broker with transactions, CreatePartitions and
DeleteRecords; tansu has none of the last two and delivers aborted records to read_committed
consumers, see test_brokers.py): formats, transactions, compression, bad records, an added
partition, a retention gap, Debezium change feeds, a consumer group, and a sink created again in
a new icesql home. Every table is compared with the replay of its topic."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.engine import Engine
from icesql.errors import IcesqlError
from icesql.plan import (
    Column,
    KafkaConnectionPlan,
    KafkaInclude,
    KafkaMetadata,
    KafkaSourceSpec,
    OnError,
    SinkMode,
    SinkPlan,
    SourceFormat,
    SourceKind,
    SourcePlan,
)
from tests.support import kafka as K
from tests.support.pipeline_helpers import Objects, State, dbz, load_table, local_catalog, spark_for_tests

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def spark() -> Any:
    return spark_for_tests()


def _source(
    topic: str, schema: str | None = "id BIGINT, v STRING", fmt: SourceFormat = SourceFormat.JSON, **kw: Any
) -> SourcePlan:
    spec_kw = {k: kw.pop(k) for k in list(kw) if k in KafkaSourceSpec.__dataclass_fields__}
    return SourcePlan(
        name="src",
        source_kind=SourceKind.KAFKA,
        format=fmt,
        schema=schema,
        kafka=KafkaSourceSpec(connection="k", topic=topic, **spec_kw),
        **kw,
    )


def _run(
    home: Path, spark: Any, bootstrap: str, source: SourcePlan, state: State | None = None, **sink_kw: Any
) -> Engine:
    sink = SinkPlan(
        name="s", relation="src", catalog_connection="cat", namespace=("ns",), table="t", **sink_kw
    )
    objects = Objects(
        {"cat": local_catalog(warehouse=home / "warehouse"), "k": KafkaConnectionPlan("k", (bootstrap,))},  # type: ignore[dict-item]
        {source.name: source},
    )
    eng = Engine(
        home,
        objects=objects,
        secrets=lambda n: "x",
        state=state or State(home / "state.json"),
        spark=spark,
        trigger_interval=0.2,
    )
    eng.run([sink], once=True)
    return eng


def _table(home: Path, name: str = "ns.t") -> list[dict[str, Any]]:
    return load_table(home, name, home / "warehouse").scan().to_arrow().to_pylist()


def _json(i: int, **extra: Any) -> bytes:
    return json.dumps({"id": i, "v": f"v{i}", **extra}).encode()


def test_transactions_compression_and_formats(tmp_path: Path, spark: Any, noida: Any) -> None:
    b = noida.bootstrap
    K.create_topic(b, "tx", 3)
    K.produce_transaction(b, "tx", [(None, _json(i)) for i in range(0, 50)], commit=True)
    K.produce_transaction(b, "tx", [(None, _json(i)) for i in range(1000, 1050)], commit=False)  # aborted
    for n, codec in enumerate(("gzip", "snappy", "lz4", "zstd")):
        K.produce(
            b, "tx", [(None, _json(i)) for i in range(100 * (n + 1), 100 * (n + 1) + 30)], compression=codec
        )
    K.produce(b, "tx", [(None, _json(2000), [("h", b"1")], None)], idempotent=True)
    home = tmp_path / "h"
    _run(home, spark, b, _source("tx"))
    ids = sorted(r["id"] for r in _table(home))
    expect = sorted(json.loads(c.value)["id"] for c in K.replay(b, "tx"))
    assert ids == expect
    assert not [i for i in ids if 1000 <= i < 1050]  # the aborted transaction never lands
    assert len(ids) == 50 + 4 * 30 + 1

    # text, bytes and csv read the same topic's values; INCLUDE brings key, headers, timestamp
    K.create_topic(b, "raw", 2)
    K.produce(
        b,
        "raw",
        [(f"k{i}".encode(), f"{i},name {i}".encode(), [("h", str(i).encode())], None) for i in range(20)],
    )
    inc = (
        KafkaInclude(KafkaMetadata.KEY, "k"),
        KafkaInclude(KafkaMetadata.HEADERS, "hs"),
        KafkaInclude(KafkaMetadata.TIMESTAMP, "ts"),
    )
    _run(tmp_path / "text", spark, b, _source("raw", None, SourceFormat.TEXT, include=inc))
    rows = sorted(_table(tmp_path / "text"), key=lambda r: r["k"])
    assert rows[0]["value"] == "0,name 0" and rows[0]["k"] == "k0"
    assert rows[0]["hs"] == [{"key": "h", "value": b"0"}] and rows[0]["ts"] is not None
    _run(tmp_path / "bytes", spark, b, _source("raw", None, SourceFormat.BYTES))
    assert sorted(r["value"] for r in _table(tmp_path / "bytes"))[0] == b"0,name 0"
    _run(tmp_path / "csv", spark, b, _source("raw", "id BIGINT, name STRING", SourceFormat.CSV))
    assert sorted((r["id"], r["name"]) for r in _table(tmp_path / "csv"))[:2] == [
        (0, "name 0"),
        (1, "name 1"),
    ]


def test_bad_records_fail_skip_and_dead_letter(tmp_path: Path, spark: Any, noida: Any) -> None:
    b = noida.bootstrap
    K.create_topic(b, "bad", 1)
    K.produce(
        b, "bad", [(b"a", _json(1)), (b"key-7", b"{not json"), (b"c", _json(3)), (b"d", b'{"id": "x"}')]
    )
    with pytest.raises(IcesqlError) as e:
        _run(tmp_path / "fail", spark, b, _source("bad"))
    msg = e.value.message
    assert "topic 'bad' partition 0 offset 1" in msg and "key 'key-7'" in msg, msg
    eng = _run(tmp_path / "skip", spark, b, _source("bad", on_error=OnError.SKIP))
    assert sorted(r["id"] for r in _table(tmp_path / "skip")) == [1, 3]
    assert eng is not None
    _run(tmp_path / "dl", spark, b, _source("bad"), on_error=OnError.DEAD_LETTER)
    assert sorted(r["id"] for r in _table(tmp_path / "dl")) == [1, 3]
    letters = sorted(_table(tmp_path / "dl", "ns.t_dead_letters"), key=lambda r: r["record"])
    assert [(r["file"], r["record"]) for r in letters] == [("bad/0", 1), ("bad/0", 3)]
    assert letters[0]["raw"] == "{not json" and "key-7" in letters[0]["error"]


def test_added_partition_and_a_retention_gap(tmp_path: Path, spark: Any, noida: Any) -> None:
    b = noida.bootstrap
    K.create_topic(b, "grow", 2)
    K.produce(b, "grow", [(None, _json(i)) for i in range(40)])
    home = tmp_path / "h"
    state = State(home / "state.json")
    _run(home, spark, b, _source("grow"), state)
    K.add_partitions(b, "grow", 4)
    K.produce(b, "grow", [(None, _json(i), None, 2 + i % 2) for i in range(40, 60)])  # only the new ones
    _run(home, spark, b, _source("grow"), state)
    assert sorted(r["id"] for r in _table(home)) == list(range(60))

    # retention deletes records no sink read yet: the sink stops, naming the range
    K.produce(b, "grow", [(None, _json(i), None, 0) for i in range(60, 70)])
    low = K.delete_records(b, "grow", {0: K.log_end(b, "grow")[0] - 3})
    with pytest.raises(IcesqlError) as e:
        _run(home, spark, b, _source("grow"), state)
    assert "topic 'grow' partition 0" in e.value.message and "deleted" in e.value.message, e.value.message
    assert str(low[0] - 1) in e.value.message

    # ON DATA LOSS = 'continue': the sink reads on from the log start and counts what was lost
    # (the warning naming the range is logged by the task that met it, in a Python worker)
    held = {int(k): v for k, v in _offsets(home).items()}
    _run(home, spark, b, _source("grow", on_data_loss="continue"), state)
    survivors = [
        json.loads(c.value)["id"] for c in K.replay(b, "grow") if c.partition == 0 and c.offset >= low[0]
    ]
    assert sorted(r["id"] for r in _table(home)) == sorted([*range(60), *survivors])
    assert state.data["s"]["skipped_records"] == low[0] - held[0]
    assert {int(k): v for k, v in _offsets(home).items()} == K.log_end(b, "grow")


def test_once_with_nothing_new_starts_no_query(
    tmp_path: Path, spark: Any, noida: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A scheduled ``run --once`` that finds no record past the committed offsets says so and
    starts no query (``precheck``: log ends asked without Spark); a record in any partition,
    one the run did not know of included, makes it run."""
    b = noida.bootstrap
    K.create_topic(b, "idle", 2)
    K.produce(b, "idle", [(None, _json(i)) for i in range(20)])
    home = tmp_path / "h"
    state = State(home / "state.json")
    assert _run(home, spark, b, _source("idle"), state).status() != []
    with caplog.at_level("INFO", logger="icesql.engine"):
        eng = _run(home, spark, b, _source("idle"), state)
    assert eng.status() == []  # no runner, so no streaming query
    assert "sink s: nothing new to read (no record in topic idle past the committed offsets" in caplog.text
    assert state.data["s"]["status"] == "stopped"

    K.add_partitions(b, "idle", 3)
    K.produce(b, "idle", [(None, _json(20), None, 2)])  # only in the partition the last run did not have
    assert _run(home, spark, b, _source("idle"), state).status() != []
    assert sorted(r["id"] for r in _table(home)) == list(range(21))
    assert _run(home, spark, b, _source("idle"), state).status() == []


def _offsets(home: Path) -> dict[str, int]:
    from icesql.engine.sources.kafka.offsets import SUMMARY_KEY

    snap = load_table(home, "ns.t", home / "warehouse").current_snapshot()
    assert snap is not None and snap.summary is not None
    return dict(json.loads(snap.summary.additional_properties[SUMMARY_KEY])["offsets"])


def test_debezium_topic_upsert(tmp_path: Path, spark: Any, noida: Any) -> None:
    b = noida.bootstrap
    K.create_topic(b, "cdc", 2)
    events = [dbz("c", None, {"id": i, "v": f"a{i}"}, lsn=i) for i in range(10)]
    events += [
        dbz("u", {"id": i, "v": f"a{i}"}, {"id": i, "v": f"b{i}"}, lsn=100 + i) for i in range(0, 10, 2)
    ]
    events += [dbz("d", {"id": 3, "v": "a3"}, None, lsn=200)]
    recs: list[Any] = [
        (json.dumps({"id": (e["after"] or e["before"])["id"]}).encode(), json.dumps(e).encode())
        for e in events
    ]
    recs.append((b'{"id": 3}', None))  # Debezium's tombstone after a delete: no row
    K.produce(b, "cdc", recs)
    home = tmp_path / "h"
    _run(home, spark, b, _source("cdc", fmt=SourceFormat.DEBEZIUM_JSON), key=("id",), mode=SinkMode.UPSERT)
    got = {r["id"]: r["v"] for r in _table(home)}
    expect = {i: (f"b{i}" if i % 2 == 0 else f"a{i}") for i in range(10) if i != 3}
    assert got == expect


def test_consumer_group_and_a_new_home(tmp_path: Path, spark: Any, noida: Any) -> None:
    b = noida.bootstrap
    K.create_topic(b, "grp", 2)
    K.produce(b, "grp", [(None, _json(i)) for i in range(30)])
    home = tmp_path / "h"
    _run(home, spark, b, _source("grp", group_id="icesql-watchers"))
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": b, "group.id": "icesql-watchers"})
    try:
        committed = {
            tp.partition: tp.offset
            for tp in c.committed([TopicPartition("grp", p) for p in (0, 1)], timeout=10)
        }
    finally:
        c.close()
    assert committed == K.log_end(b, "grp")

    # the whole home is lost but the table is not (another home, the same warehouse): the sink,
    # created again with a new id, reads on from the offsets the table holds
    K.produce(b, "grp", [(None, _json(i)) for i in range(30, 45)])
    new_home = tmp_path / "h2"
    new_home.mkdir()
    shutil.copytree(home / "warehouse", new_home / "warehouse")
    _run(new_home, spark, b, _source("grp"), State(new_home / "state.json"))
    assert sorted(r["id"] for r in _table(new_home)) == list(range(45))


def test_key_columns_from_json_keys(tmp_path: Path, spark: Any, noida: Any) -> None:
    from icesql.plan import KafkaEnvelope

    b = noida.bootstrap
    K.create_topic(b, "keyed", 2)
    recs = [
        (json.dumps({"tenant": "t1", "uid": i % 5}).encode(), json.dumps({"name": f"n{i}"}).encode())
        for i in range(20)
    ]
    recs.append((json.dumps({"tenant": "t1", "uid": 2}).encode(), None))
    K.produce(b, "keyed", recs)
    src = _source(
        "keyed",
        "name STRING",
        envelope=KafkaEnvelope.UPSERT,
        key_format=SourceFormat.JSON,
        key_schema="tenant STRING, uid INT",
        key_columns=(Column("tenant", "string"), Column("uid", "int")),
    )
    _run(tmp_path / "h", spark, b, src, key=("tenant", "uid"), mode=SinkMode.UPSERT)
    got = sorted((r["tenant"], r["uid"], r["name"]) for r in _table(tmp_path / "h"))
    assert got == [("t1", 0, "n15"), ("t1", 1, "n16"), ("t1", 3, "n18"), ("t1", 4, "n19")]


def test_arrow_path_equals_sparks_parsers(
    tmp_path: Path, spark: Any, noida: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The FILES tests' tricky-value corpus as Kafka values: the Arrow path (tasks decode with
    Arrow) and Spark's parsers give the same table and the same dead letters; what Arrow is not
    sure of goes to Spark's parsers, range by range."""
    from tests.engine.test_arrow_differential import FALLBACK_JSON, GOOD_JSON, JSON_SCHEMA

    b = noida.bootstrap
    K.create_topic(b, "corpus", 3)
    values: list[bytes] = []
    for lines in [*GOOD_JSON.values(), *FALLBACK_JSON.values()]:
        values += [(x if isinstance(x, str) else json.dumps(x)).encode() for x in lines]
    values.append(b'{\n  "id": 77,\n  "name": "pretty\\nprinted"\n}')  # line breaks between tokens
    values.append(b"   ")  # a blank value
    K.produce(b, "corpus", [(str(i).encode(), v) for i, v in enumerate(values)])
    tables = {}
    for arrow in ("1", "0"):
        monkeypatch.setenv("ICESQL_ARROW_PATH", arrow)
        home = tmp_path / f"arrow{arrow}"
        eng = _run(
            home,
            spark,
            b,
            _source(
                "corpus",
                JSON_SCHEMA,
                include=(
                    KafkaInclude(KafkaMetadata.PARTITION, "part"),
                    KafkaInclude(KafkaMetadata.OFFSET, "off"),
                ),
            ),
            on_error=OnError.DEAD_LETTER,
        )
        runner = eng.runner("s")
        assert runner.status_row()["path"] == ("arrow" if arrow == "1" else "spark")
        if arrow == "1":
            assert runner.fallback_files > 0  # the ranges with the corpus's hard cases
        rows = sorted(_table(home), key=lambda r: (r["part"], r["off"]))
        letters = sorted((r["record"], r["reason"], r["raw"]) for r in _table(home, "ns.t_dead_letters"))
        tables[arrow] = (rows, letters)

    def same(x: Any) -> str:  # NaN equals NaN here (the corpus has NaN scores)
        return json.dumps(x, default=str, sort_keys=True)

    assert same(tables["1"][0]) == same(tables["0"][0])
    assert same(tables["1"][1]) == same(tables["0"][1])
    assert len(tables["1"][0]) > 20


def test_a_worker_reads_ranges_with_one_kept_consumer(noida: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Consecutive ranges (and the last, ending at the log end) read exactly their records with
    one consumer kept idle between them, given back before the range's last batch is handed on
    (assigned at the log end meanwhile, it would go on fetching there); a read abandoned half-way
    closes its consumer instead."""
    from icesql.engine.sources.kafka import topic as S

    b = noida.bootstrap
    K.create_topic(b, "reuse", 2)
    K.produce(b, "reuse", [(None, _json(i), None, i % 2) for i in range(400)])
    conf = {"bootstrap.servers": b}
    S._IDLE_READERS.clear()
    first = [
        r for batch in S.read_range(conf, "reuse", 0, 0, 120) for r in batch.column("offset").to_pylist()
    ]
    (kept,) = S._IDLE_READERS.values()
    assert first == list(range(120)) and len(kept) == 1
    consumer = kept[0]
    rest = [
        r for batch in S.read_range(conf, "reuse", 0, 120, 200) for r in batch.column("offset").to_pylist()
    ]
    assert rest == list(range(120, 200))  # the log end: nothing waited for beyond it
    assert list(S._IDLE_READERS.values()) == [[consumer]]  # the same consumer again
    # a range of two batches: the reader is in use while the first is handed on, idle (and
    # unassigned) by the time the last is
    monkeypatch.setattr(S, "CONSUME_RECORDS", 100)
    monkeypatch.setattr(S, "BATCH_RECORDS", 50)
    reading = S.read_range(conf, "reuse", 1, 0, 200)
    batches = [next(reading)]
    assert list(S._IDLE_READERS.values()) == [[]]
    batches.append(next(reading))
    assert list(S._IDLE_READERS.values()) == [[consumer]] and consumer.assignment() == []
    assert [r for b in batches for r in b.column("offset").to_pylist()] == list(range(200))
    assert next(reading, None) is None
    reading = S.read_range(conf, "reuse", 1, 0, 200)
    next(reading)
    reading.close()  # abandoned half-way: its state is not known, so it is not kept
    assert list(S._IDLE_READERS.values()) == [[]]
    # two threads reading at once (a run without Spark) keep a consumer each
    from concurrent.futures import ThreadPoolExecutor

    def read(p: int) -> int:
        return sum(b.num_rows for b in S.read_range(conf, "reuse", p, 0, 200))

    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(read, [0, 1])) == [200, 200]
    (idle,) = S._IDLE_READERS.values()
    assert len(idle) == min(2, os.cpu_count() or 1)


def test_the_idle_readers_of_a_connection_no_read_uses_are_closed(
    noida: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection's idle consumer stays while its ranges are read; once no read of it took or
    gave one for ``IDLE_READER_SECONDS``, the next read (of any connection) closes it."""
    from icesql.engine.sources.kafka import topic as S

    b = noida.bootstrap
    K.create_topic(b, "unused", 1)
    K.produce(b, "unused", [(None, _json(i), None, 0) for i in range(10)])
    old, new = {"bootstrap.servers": b, "client.id": "old"}, {"bootstrap.servers": b, "client.id": "new"}
    S._IDLE_READERS.clear()
    S._IDLE_USED.clear()
    assert sum(x.num_rows for x in S.read_range(old, "unused", 0, 0, 10)) == 10
    (kept,) = S._IDLE_READERS[tuple(sorted(old.items()))]
    assert sum(x.num_rows for x in S.read_range(new, "unused", 0, 0, 10)) == 10
    assert S._IDLE_READERS[tuple(sorted(old.items()))] == [kept]  # within the time: kept
    monkeypatch.setattr(S, "IDLE_READER_SECONDS", 0.5)
    time.sleep(1.0)
    assert sum(x.num_rows for x in S.read_range(new, "unused", 0, 0, 10)) == 10
    assert tuple(sorted(old.items())) not in S._IDLE_READERS
    assert len(S._IDLE_READERS[tuple(sorted(new.items()))]) == 1  # the connection in use keeps its own
    with pytest.raises(RuntimeError):
        kept.assignment()  # closed


def test_the_planner_and_the_range_reads_share_their_consumers(noida: Any) -> None:
    """The planner's requests (partitions, log ends, a record sample) borrow a consumer from the
    idle readers and give it back; the next range read takes that same client (already connected)
    and the planner the one a read left: in a run without Spark one librdkafka client serves both
    where there were two."""
    from icesql.engine.sources.kafka import topic as S
    from icesql.engine.sources.kafka.subscription import Subscription

    b = noida.bootstrap
    K.create_topic(b, "shared", 2)
    K.produce(b, "shared", [(None, _json(i), None, i % 2) for i in range(100)])
    conf = {"bootstrap.servers": b}
    S._IDLE_READERS.clear()
    view = S.TopicView(conf, Subscription(topic="shared"))
    tps = view.partitions()
    assert tps == [("shared", 0), ("shared", 1)]
    (idle,) = S._IDLE_READERS.values()
    assert len(idle) == 1
    planners = idle[0]
    assert view.ends(tps) == {("shared", 0): 50, ("shared", 1): 50}
    assert view.record_bytes({}, {("shared", 0): 50}) > 0
    assert list(S._IDLE_READERS.values()) == [[planners]]  # the one client, every time
    rows = sum(batch.num_rows for batch in S.read_range(conf, "shared", 0, 0, 50))
    assert rows == 50
    assert list(S._IDLE_READERS.values()) == [[planners]]  # the read took it and gave it back
    view.close()  # owns none: the idle client stays for the next read
    assert list(S._IDLE_READERS.values()) == [[planners]]


def test_a_range_reads_every_record_as_a_consumer_sees_it_and_only_the_columns_asked(noida: Any) -> None:
    """read_range's columns (built a column at a time from the messages) against a plain consumer's
    replay of the topic: null and empty keys and values, headers with a null value, both timestamp
    kinds' fields; the columns a caller does not ask for come as nulls; a range starting and ending
    mid-partition reads exactly its offsets."""
    from icesql.engine.sources.kafka import topic as S

    b = noida.bootstrap
    K.create_topic(b, "columns", 2)
    now_ms = int(time.time() * 1000) - 10_000  # recent: older records fall to the broker's retention
    records = [
        K.Record(
            key=None if i % 7 == 0 else (b"" if i % 9 == 0 else f"k{i}".encode()),
            value=None if i % 11 == 0 else (b"" if i % 13 == 0 else _json(i)),
            headers=[("h", b"x"), ("n", None)] if i % 5 == 0 else None,
            partition=i % 2,
            timestamp=now_ms + i,
        )
        for i in range(3000)
    ]
    K.produce(b, "columns", records)
    seen = K.replay(b, "columns")
    conf = {"bootstrap.servers": b}
    for p, start, end in [(0, 0, 1500), (1, 7, 1400)]:
        got = [r for batch in S.read_range(conf, "columns", p, start, end) for r in batch.to_pylist()]
        want = [c for c in seen if c.partition == p and start <= c.offset < end]
        assert [
            (r["topic"], r["partition"], r["offset"], r["key"], r["value"], r["timestampType"]) for r in got
        ] == [(c.topic, c.partition, c.offset, c.key, c.value, c.timestamp_type - 1) for c in want]
        assert [int(r["timestamp"].timestamp() * 1000) for r in got] == [c.timestamp for c in want]
        assert [[(h["key"], h["value"]) for h in r["headers"] or []] for r in got] == [
            list(c.headers) for c in want
        ]
        some = [
            r
            for batch in S.read_range(conf, "columns", p, start, end, columns=("value", "offset"))
            for r in batch.to_pylist()
        ]
        assert [(r["offset"], r["value"]) for r in some] == [(r["offset"], r["value"]) for r in got]
        assert {r["key"] for r in some} == {r["timestamp"] for r in some} == {r["headers"] for r in some} == {None}
