"""A bounded run of a KAFKA append sink without Spark (``engine.local_query``): the rows' schema
built in Python is the one Spark's decoding gives, and runs with and without Spark take turns on
one checkpoint, every record once. The SIGKILL loop runs on both paths in
``test_kafka_crash.py``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.backends.checkpoint import CheckpointLog
from icesql.engine.base.changelog import INTERNAL_COLUMNS
from icesql.engine.engine import Engine
from icesql.engine.sources.kafka.records import decode_records
from icesql.engine.sources.kafka.relation import local_row_schema
from icesql.engine.sources.kafka.source import RECORD_SCHEMA
from icesql.plan import (
    Column,
    KafkaConnectionPlan,
    KafkaEnvelope,
    KafkaInclude,
    KafkaMetadata,
    KafkaSourceSpec,
    OnError,
    SinkPlan,
    SourceFormat,
    SourceKind,
    SourcePlan,
)
from tests.support import kafka as K
from tests.support.pipeline_helpers import (
    SPARK_TEST_CONF,
    Objects,
    State,
    load_table,
    local_catalog,
    spark_for_tests,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SCHEMA = "id BIGINT, name STRING, amount DECIMAL(10,2), at TIMESTAMP, tags ARRAY<STRING>, p STRUCT<x: INT>"
ALL = tuple(
    KafkaInclude(what, name)
    for what, name in (
        (KafkaMetadata.PARTITION, "part"),
        (KafkaMetadata.OFFSET, "off"),
        (KafkaMetadata.TIMESTAMP, "kts"),
        (KafkaMetadata.HEADERS, "hdrs"),
    )
)


@pytest.fixture(scope="module")
def spark() -> Any:
    return spark_for_tests()


def _source(topic: str, **spec: Any) -> SourcePlan:
    return SourcePlan(
        name="events",
        source_kind=SourceKind.KAFKA,
        format=SourceFormat.JSON,
        schema=SCHEMA,
        kafka=KafkaSourceSpec(connection="k", topic=topic, **spec),
    )


def _variant(name: str) -> SourcePlan:
    """Sources whose rows a run without Spark builds: appends, ENVELOPE UPSERT with each KEY
    FORMAT, Debezium values, text and bytes values, with INCLUDE columns."""
    key = (KafkaInclude(KafkaMetadata.KEY, "k"),)
    json_key = {"key_format": SourceFormat.JSON, "key_schema": "tenant STRING, uid INT",
                "key_columns": (Column("tenant", "string"), Column("uid", "int"))}
    return {
        "upsert-text-key": lambda: _source("t", envelope=KafkaEnvelope.UPSERT, key_columns=(Column("key", "string"),),
                                           include=ALL[:2]),
        "upsert-bytes-key": lambda: _source("t", envelope=KafkaEnvelope.UPSERT, key_format=SourceFormat.BYTES,
                                            key_columns=(Column("key", "binary"),), include=key),
        "upsert-json-key": lambda: _source("t", envelope=KafkaEnvelope.UPSERT, include=key + ALL, **json_key),
        "json-include-json-key": lambda: _source("t", include=key, key_format=SourceFormat.JSON,
                                                 key_schema="tenant STRING, uid INT"),
        "debezium": lambda: replace(_source("t", include=ALL[:2]), format=SourceFormat.DEBEZIUM_JSON),
        "text": lambda: replace(_source("t", include=key), format=SourceFormat.TEXT, schema=None),
        "bytes-upsert": lambda: replace(_source("t", envelope=KafkaEnvelope.UPSERT, key_columns=(Column("k", "string"),)),
                                        format=SourceFormat.BYTES, schema=None),
    }[name]()


@pytest.mark.parametrize("include", [(), ALL[:1], ALL[1:3], ALL], ids=["none", "partition", "offset-ts", "all"])
def test_the_rows_schema_without_spark_is_sparks(spark: Any, include: tuple[KafkaInclude, ...]) -> None:
    plan = _source("t", include=include)
    records = spark.createDataFrame([], RECORD_SCHEMA)
    df, changelog = decode_records(spark, records, plan, OnError.FAIL, None, None)
    sparks = [f for f in df.schema.fields if f.name not in INTERNAL_COLUMNS]
    assert not changelog
    assert list(local_row_schema(plan, "TIMESTAMP_LTZ").fields) == sparks


@pytest.mark.parametrize(
    "variant",
    ["upsert-text-key", "upsert-bytes-key", "upsert-json-key", "json-include-json-key", "debezium", "text", "bytes-upsert"],
)
def test_changelog_and_other_rows_schemas_without_spark_are_sparks(spark: Any, variant: str) -> None:
    plan = _variant(variant)
    records = spark.createDataFrame([], RECORD_SCHEMA)
    df, _ = decode_records(spark, records, plan, OnError.FAIL, None, None)
    sparks = [f for f in df.schema.fields if f.name not in INTERNAL_COLUMNS]
    assert list(local_row_schema(plan, "TIMESTAMP_LTZ").fields) == sparks


def test_what_is_left_to_spark() -> None:
    csv = replace(_source("t"), format=SourceFormat.CSV)
    assert local_row_schema(csv, "TIMESTAMP_LTZ") is None  # Spark's CSV parser
    odd_key = _source("t", envelope=KafkaEnvelope.UPSERT, key_format=SourceFormat.JSON, key_schema="a MAP<STRING, INT")
    assert local_row_schema(odd_key, "TIMESTAMP_LTZ") is None  # a KEY SCHEMA only Spark parses


def _records(start: int, end: int) -> list[tuple[bytes, bytes]]:
    return [
        (
            str(i).encode(),
            json.dumps(
                {"id": i, "name": f"n{i}", "amount": f"{i}.25", "at": "2026-11-27T10:00:00Z", "tags": ["a"], "p": {"x": i}}
            ).encode(),
        )
        for i in range(start, end)
    ]


def _run(
    home: Path, bootstrap: str, topic: str, spark: Any, caplog: pytest.LogCaptureFixture, **spec: Any
) -> Engine:
    """A bounded run of sink ``s`` over ``topic`` (or the topics of ``spec``), on Spark or not."""
    objects = Objects(
        {"cat": local_catalog(warehouse=home / "warehouse"), "k": KafkaConnectionPlan("k", (bootstrap,))},  # type: ignore[dict-item]
        {"events": _source(topic, **{"include": ALL[:3], "max_records_per_trigger": 40, **spec})},
    )
    sink = SinkPlan(name="s", relation="events", catalog_connection="cat", namespace=("ns",), table="t")
    eng = Engine(
        home,
        objects=objects,
        secrets=lambda n: "x",
        state=State(home / "state.json"),
        spark=spark,
        spark_master="local[2]",
        spark_conf=SPARK_TEST_CONF,
        trigger_interval=0.2,
    )
    caplog.clear()
    with caplog.at_level("INFO", logger="icesql.engine"):
        eng.run([sink], once=True)
    assert ("sink s: runs in this process, without starting Spark" in caplog.text) == (spark is None)
    assert (eng._spark is None) == (spark is None)
    return eng


def test_runs_with_and_without_spark_take_turns_on_one_checkpoint(
    spark: Any, noida: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topic = "local-turns"
    K.create_topic(noida.bootstrap, topic, 2)
    home = tmp_path / "home"
    K.produce(noida.bootstrap, topic, _records(0, 100))
    _run(home, noida.bootstrap, topic, None, caplog)  # a new checkpoint, three batches of <= 40
    K.produce(noida.bootstrap, topic, _records(100, 150))
    _run(home, noida.bootstrap, topic, spark, caplog)  # Spark takes up after them
    K.produce(noida.bootstrap, topic, _records(150, 180))
    _run(home, noida.bootstrap, topic, None, caplog)  # and the run without Spark after Spark
    rows = load_table(home, "ns.t", home / "warehouse").scan().to_arrow().to_pylist()
    assert sorted(r["id"] for r in rows) == list(range(180))
    assert len({(r["part"], r["off"]) for r in rows}) == 180  # every record once, by its position
    (checkpoint,) = (home / "sinks").glob("*/checkpoint-kafka")
    log = CheckpointLog(checkpoint)
    assert log.planned() == log.committed() and len(log.planned()) >= 6


def test_runs_over_many_topics_take_turns_on_one_checkpoint(
    spark: Any, noida: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same over a TOPIC PATTERN, a topic created between two runs: Spark continues the
    checkpoint of a run without it, and the other way round, every record of every topic once."""
    spec = {
        "topic_pattern": r"turns\..*",
        "include": (*ALL[:3], KafkaInclude(KafkaMetadata.TOPIC, "topic")),
    }
    K.create_topic(noida.bootstrap, "turns.a", 2)
    K.create_topic(noida.bootstrap, "turns.b", 1)
    home = tmp_path / "home"
    K.produce(noida.bootstrap, "turns.a", _records(0, 70))
    K.produce(noida.bootstrap, "turns.b", _records(1000, 1030))
    _run(home, noida.bootstrap, "", None, caplog, **spec)
    K.create_topic(noida.bootstrap, "turns.c", 1)
    K.produce(noida.bootstrap, "turns.c", _records(2000, 2025))
    K.produce(noida.bootstrap, "turns.a", _records(70, 100))
    _run(home, noida.bootstrap, "", spark, caplog, **spec)
    K.produce(noida.bootstrap, "turns.b", _records(1030, 1050))
    K.produce(noida.bootstrap, "turns.c", _records(2025, 2030))
    _run(home, noida.bootstrap, "", None, caplog, **spec)
    rows = load_table(home, "ns.t", home / "warehouse").scan().to_arrow().to_pylist()
    assert sorted(r["id"] for r in rows) == [*range(100), *range(1000, 1050), *range(2000, 2030)]
    assert len({(r["topic"], r["part"], r["off"]) for r in rows}) == len(rows)  # every record once
    assert {r["topic"] for r in rows if r["id"] >= 2000} == {"turns.c"}
    (checkpoint,) = (home / "sinks").glob("*/checkpoint-kafka")
    log = CheckpointLog(checkpoint)
    assert log.planned() == log.committed() and len(log.planned()) >= 6
    assert log.offset(log.planned()[-1]) == {
        t: {str(p): o for p, o in K.log_end(noida.bootstrap, t).items()} for t in ("turns.a", "turns.b", "turns.c")
    }
