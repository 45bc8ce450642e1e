"""KAFKA sources end to end on local Spark against both test brokers (noida-db, tansu): the
table read back equals the replay of the topic, exactly once across runs, a lost checkpoint and
a lost icesql home, with the offsets each commit records in its snapshot summary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.engine import Engine
from icesql.plan import (
    Column,
    KafkaConnectionPlan,
    KafkaEnvelope,
    KafkaInclude,
    KafkaMetadata,
    KafkaSourceSpec,
    SinkMode,
    SinkPlan,
    SourceFormat,
    SourceKind,
    SourcePlan,
)
from tests.support import kafka as K
from tests.support.pipeline_helpers import Objects, State, load_table, local_catalog, spark_for_tests
from tests.support.readers import canonical_digest, read_datafusion, read_duckdb, read_java
from tests.support.require import missing

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SCHEMA = "id BIGINT, name STRING, amount DOUBLE"


def _source(topic: str, **kw: Any) -> SourcePlan:
    spec_kw = {k: kw.pop(k) for k in list(kw) if k in KafkaSourceSpec.__dataclass_fields__}
    fmt = kw.pop("format", SourceFormat.JSON)
    schema = kw.pop("schema", SCHEMA)
    return SourcePlan(
        name="events",
        source_kind=SourceKind.KAFKA,
        format=fmt,
        schema=schema,
        kafka=KafkaSourceSpec(connection="k", topic=topic, **spec_kw),
        **kw,
    )


def _sink(**kw: Any) -> SinkPlan:
    return SinkPlan(
        name="s", relation="events", catalog_connection="cat", namespace=("ns",), table="t", **kw
    )


def _run(home: Path, spark: Any, bootstrap: str, source: SourcePlan, sink: SinkPlan, state: State) -> Engine:
    objects = Objects(
        {"cat": local_catalog(warehouse=home / "warehouse"), "k": KafkaConnectionPlan("k", (bootstrap,))},  # type: ignore[dict-item]
        {source.name: source},
    )
    eng = Engine(home, objects=objects, secrets=lambda n: "x", state=state, spark=spark, trigger_interval=0.2)
    eng.run([sink], once=True)
    return eng


def _rows(home: Path) -> list[dict[str, Any]]:
    t = load_table(home, "ns.t", home / "warehouse")
    return sorted(t.scan().to_arrow().to_pylist(), key=lambda r: (r.get("id") or 0, json.dumps(r, default=str)))


def _offsets(home: Path) -> dict[str, Any]:
    t = load_table(home, "ns.t", home / "warehouse")
    snap = t.current_snapshot()
    return json.loads(snap.summary.additional_properties["icesql.kafka-offsets"])


@pytest.fixture(scope="module")
def spark() -> Any:
    return spark_for_tests()


@pytest.fixture()
def broker(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    kind = request.param
    reason = K.missing_reason(kind)
    if reason:
        missing(reason)
    with K.broker(kind, tmp_path / "broker") as b:
        yield b


@pytest.mark.parametrize("broker", ["noida", "tansu"], indirect=True)
def test_json_append_exactly_once_across_runs_and_a_lost_home(tmp_path: Path, spark: Any, broker: Any) -> None:
    K.create_topic(broker.bootstrap, "orders", 3)
    first = [(str(i).encode(), json.dumps({"id": i, "name": f"n{i}", "amount": i / 4}).encode()) for i in range(300)]
    K.produce(broker.bootstrap, "orders", first, linger_ms=50)
    home = tmp_path / "home"
    state = State(home / "state.json")
    src, sink = _source("orders"), _sink()
    _run(home, spark, broker.bootstrap, src, sink, state)
    assert [r["id"] for r in _rows(home)] == list(range(300))
    assert sum(_offsets(home)["offsets"].values()) == 300

    # more records; a second run reads only them
    more = [(None, json.dumps({"id": i, "name": f"n{i}", "amount": 1.5}).encode()) for i in range(300, 450)]
    K.produce(broker.bootstrap, "orders", more, linger_ms=50)
    _run(home, spark, broker.bootstrap, src, sink, state)
    assert [r["id"] for r in _rows(home)] == list(range(450))

    # the checkpoint is lost: the sink resumes from the offsets the table holds
    shutil.rmtree(home / "sinks")
    K.produce(broker.bootstrap, "orders", [(None, json.dumps({"id": 450, "name": "x", "amount": 0}).encode())])
    _run(home, spark, broker.bootstrap, src, sink, state)
    rows = _rows(home)
    assert [r["id"] for r in rows] == list(range(451))
    assert rows[7] == {"id": 7, "name": "n7", "amount": 1.75}
    ends = K.log_end(broker.bootstrap, "orders")
    assert _offsets(home) == {"topic": "orders", "offsets": {str(p): o for p, o in sorted(ends.items())}}
    # what other engines read: DuckDB and iceberg-rust (DataFusion) see the same rows
    meta = load_table(home, "ns.t", home / "warehouse").metadata_location
    assert sorted(r[0] for r in read_duckdb(meta, "id")) == list(range(451))
    assert sorted(r[0] for r in read_datafusion(meta, "id")) == list(range(451))


@pytest.mark.parametrize("broker", ["noida", "tansu"], indirect=True)
def test_upsert_envelope_with_tombstones_and_include(tmp_path: Path, spark: Any, broker: Any) -> None:
    K.create_topic(broker.bootstrap, "users", 3)
    recs: list[Any] = []
    for i in range(40):
        recs.append((f"u{i % 10}".encode(), json.dumps({"name": f"v{i}", "amount": float(i)}).encode()))
    recs.append((b"u3", None))  # tombstone: deletes u3
    recs.append((b"u4", None))
    recs.append((b"u4", json.dumps({"name": "back", "amount": 1.0}).encode()))
    K.produce(broker.bootstrap, "users", recs, linger_ms=50)
    home = tmp_path / "home"
    src = _source(
        "users",
        schema="name STRING, amount DOUBLE",
        envelope=KafkaEnvelope.UPSERT,
        key_columns=(Column("key", "string"),),
        include=(KafkaInclude(KafkaMetadata.PARTITION, "part"), KafkaInclude(KafkaMetadata.OFFSET, "off")),
    )
    sink = _sink(key=("key",), mode=SinkMode.UPSERT)
    _run(home, spark, broker.bootstrap, src, sink, State(home / "state.json"))
    rows = {r["key"]: r for r in load_table(home, "ns.t", home / "warehouse").scan().to_arrow().to_pylist()}
    expect = {f"u{k}": f"v{30 + k}" for k in range(10) if k != 3}
    expect["u4"] = "back"
    assert {k: r["name"] for k, r in rows.items()} == expect
    replayed = {(c.partition, c.offset) for c in K.replay(broker.bootstrap, "users")}
    assert all((r["part"], r["off"]) in replayed for r in rows.values())
    meta = load_table(home, "ns.t", home / "warehouse").metadata_location
    for read in (read_duckdb, read_datafusion):  # position deletes applied by every reader
        assert sorted(read(meta, "key, name")) == sorted(expect.items())


@pytest.mark.java
@pytest.mark.parametrize("broker", ["noida"], indirect=True)
def test_java_reads_a_kafka_upsert_table(tmp_path: Path, spark: Any, broker: Any) -> None:
    """The strictest reader, Iceberg Java, reads an ENVELOPE UPSERT table (position deletes) and an
    append table written from a topic as the replay of the topic says."""
    K.create_topic(broker.bootstrap, "jusers", 3)
    recs: list[Any] = [(f"u{i % 20}".encode(), json.dumps({"name": f"v{i}", "amount": float(i)}).encode()) for i in range(200)]
    recs += [(b"u5", None), (b"u6", None)]
    K.produce(broker.bootstrap, "jusers", recs, linger_ms=50)
    home = tmp_path / "home"
    src = _source(
        "jusers", schema="name STRING, amount DOUBLE", envelope=KafkaEnvelope.UPSERT, key_columns=(Column("key", "string"),)
    )
    state = State(home / "state.json")
    _run(home, spark, broker.bootstrap, src, _sink(key=("key",), mode=SinkMode.UPSERT), state)
    K.produce(broker.bootstrap, "jusers", [(b"u7", json.dumps({"name": "late", "amount": 0.5}).encode())])
    _run(home, spark, broker.bootstrap, src, _sink(key=("key",), mode=SinkMode.UPSERT), state)
    latest: dict[str, Any] = {}
    for c in K.replay(broker.bootstrap, "jusers"):
        k = c.key.decode()
        if c.value is None:
            latest.pop(k, None)
        else:
            latest[k] = json.loads(c.value)
    want = canonical_digest([{"key": k, **v} for k, v in latest.items()])
    got = read_java(load_table(home, "ns.t", home / "warehouse").metadata_location)
    assert got["digest"] == want["digest"], (got["rows"], want["rows"])


@pytest.mark.parametrize("kind", ["noida", "tansu-s3"])
def test_broker_restart_loses_nothing(tmp_path: Path, spark: Any, kind: str, request: pytest.FixtureRequest) -> None:
    """A broker stopped and started again between runs (noida keeps its data on disk; tansu keeps
    it on weed's S3): the sink reads on from the table's offsets, nothing lost or repeated."""
    reason = K.missing_reason("tansu" if kind.startswith("tansu") else kind)
    if reason:
        missing(reason)
    extra: dict[str, Any] = {}
    if kind == "tansu-s3":
        extra["s3"] = K.S3Storage.on_weed(request.getfixturevalue("weed"))
    with K.broker(kind, tmp_path / "broker", **extra) as b:
        K.create_topic(b.bootstrap, "rs", 2)
        K.produce(b.bootstrap, "rs", [(None, json.dumps({"id": i, "name": "a", "amount": 1.0}).encode()) for i in range(100)])
        home = tmp_path / "home"
        state = State(home / "state.json")
        _run(home, spark, b.bootstrap, _source("rs"), _sink(), state)
        b.restart()  # SIGTERM and start on the same port and data
        K.produce(b.bootstrap, "rs", [(None, json.dumps({"id": i, "name": "b", "amount": 2.0}).encode()) for i in range(100, 150)])
        _run(home, spark, b.bootstrap, _source("rs"), _sink(), state)
        assert [r["id"] for r in _rows(home)] == list(range(150))


def test_network_cuts_lose_and_repeat_nothing(tmp_path: Path, spark: Any) -> None:
    """tansu behind a fault proxy that it advertises, so every connection of the sink (the
    planner's, every task's) goes through it: while a run reads a topic in many triggers, its
    connections are reset and new ones refused for a few seconds, twice. The run rides it out
    (librdkafka reconnects; a batch that fails is retried by the supervisor) and the table
    equals the replay of the topic, each record once."""
    import threading
    import time

    from tests.support.faultproxy import FaultProxy

    reason = K.missing_reason("tansu")
    if reason:
        missing(reason)
    broker_port, proxy_port = K.free_port(), K.free_port()
    with (
        FaultProxy({"kafka": ("127.0.0.1", broker_port)}, ports={"kafka": proxy_port}) as proxy,
        K.broker("tansu", tmp_path / "broker", port=broker_port, advertised_port=proxy_port),
    ):
        boot = f"127.0.0.1:{proxy_port}"
        K.create_topic(boot, "cut", 3)
        K.produce(boot, "cut", [(None, json.dumps({"id": i, "name": "n", "amount": 1.0}).encode()) for i in range(3000)])
        home = tmp_path / "home"
        state = State(home / "state.json")
        cuts: list[str] = []
        cut_at: list[float] = []

        def cut() -> None:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and not state.data.get("s", {}).get("commits"):
                time.sleep(0.1)
            for refuse in (4.0, 3.0):
                cut_at.append(time.time())
                cuts.append(f"reset {proxy.reset_connections()} connection(s), refuse new ones {refuse}s")
                proxy.drop_new(refuse)
                time.sleep(refuse + 2.0)

        cutter = threading.Thread(target=cut, daemon=True)
        cutter.start()
        _run(home, spark, boot, _source("cut", max_records_per_trigger=100), _sink(), state)
        cutter.join(timeout=60)
        assert len(cuts) == 2, cuts
        assert proxy.stats["kafka"]["connections_reset"] > 0, proxy.events
        # the run was still reading when the brokers went away: it committed after the refusal
        assert state.data["s"]["last_commit_at"] > cut_at[0] + 4.0, (cuts, state.data["s"])
        ids = [r["id"] for r in _rows(home)]
        assert ids == sorted(json.loads(c.value)["id"] for c in K.replay(boot, "cut"))
        assert ids == list(range(3000))
        assert {int(p): o for p, o in _offsets(home)["offsets"].items()} == K.log_end(boot, "cut")
