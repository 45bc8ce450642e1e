"""Schema evolution from a Confluent Schema Registry (issue 52): v1 records, then v2 (a field added
with a default), then v3 (int promoted to long), then an incompatible v4 (a field removed without
a default). After each step: the table's schema, and the rows DuckDB and DataFusion read; at v4
the one-line error naming topic, subject, both versions and the field (ON ERROR 'fail'), or the
records skipped (ON ERROR 'skip'). Records come from the real ``AvroSerializer`` against the
stand-in registry (tests/support/registry.py), into noida-db; the sink runs in this process (the
same decoding runs in Spark's tasks: tests/conformance/test_registry.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.errors import IcesqlError
from tests.support import kafka as K
from tests.support.pipeline_helpers import load_table
from tests.support.readers import read_datafusion, read_duckdb
from tests.support.registry import RegistryServer, schema_registry

pytestmark = pytest.mark.kafka

__all__ = ["schema_registry"]


def _v(fields: list[dict[str, Any]]) -> str:
    return json.dumps({"type": "record", "name": "Item", "namespace": "shop", "fields": fields})


ID = {"name": "id", "type": "long"}
NAME = {"name": "name", "type": "string"}
V1 = _v([ID, NAME])
V2 = _v([ID, NAME, {"name": "qty", "type": ["null", "int"], "default": None}])
V3 = _v([ID, NAME, {"name": "qty", "type": ["null", "long"], "default": None}])
V4 = _v([ID, {"name": "qty", "type": ["null", "long"], "default": None}])  # name removed, no default


def _produce(
    noida: Any, registry: RegistryServer, topic: str, schema: str, rows: list[dict[str, Any]]
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    ser = AvroSerializer(SchemaRegistryClient({"url": registry.url}), schema)
    ctx = SerializationContext(topic, MessageField.VALUE)
    K.produce(noida.bootstrap, topic, [(str(r["id"]).encode(), ser(r, ctx)) for r in rows])


def _state(home: Path, wh: Path) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
    table = load_table(home, "n.t", warehouse=wh, catalog_name="lake")
    schema = [(f.name, str(f.field_type)) for f in table.schema().fields]
    rows = read_duckdb(table.metadata_location)
    assert read_datafusion(table.metadata_location) == rows
    return schema, sorted(rows, key=repr)


def _setup(home: Path, wh: Path, noida: Any, registry: RegistryServer, topic: str, on_error: str) -> None:
    registry.register(f"{topic}-value", V1)
    K.create_topic(noida.bootstrap, topic, 1)
    with icesql.Session(home=home) as s:
        s.execute(
            f"CREATE CONNECTION k TO KAFKA (BROKER = '{noida.bootstrap}');"
            f"CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = '{registry.url}');"
            f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');"
            f"CREATE SOURCE reg FROM KAFKA CONNECTION k (TOPIC = '{topic}', ON ERROR = '{on_error}') "
            "FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY CONNECTION csr;"
            "CREATE SINK s FROM reg INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't')"
        )


def _run(home: Path) -> None:
    with icesql.Session(home=home) as s:
        s.run(once=True, sinks=["s"])
        assert s.engine._spark is None


def test_v1_v2_v3_widen_the_table_and_an_incompatible_v4_stops_the_sink(
    noida: Any, schema_registry: RegistryServer, tmp_path: Path
) -> None:
    home, wh, topic = tmp_path / "home", tmp_path / "wh", "evolve"
    _setup(home, wh, noida, schema_registry, topic, "fail")
    _produce(noida, schema_registry, topic, V1, [{"id": i, "name": f"n{i}"} for i in range(3)])
    _run(home)
    assert _state(home, wh) == ([("id", "long"), ("name", "string")], [(i, f"n{i}") for i in range(3)])

    _produce(noida, schema_registry, topic, V2, [{"id": i, "name": f"n{i}", "qty": i * 10} for i in (3, 4)])
    _run(home)
    schema, rows = _state(home, wh)
    assert schema == [("id", "long"), ("name", "string"), ("qty", "int")]
    assert rows == sorted([*((i, f"n{i}", None) for i in range(3)), (3, "n3", 30), (4, "n4", 40)], key=repr)

    _produce(noida, schema_registry, topic, V3, [{"id": 5, "name": "n5", "qty": 2**40}])
    _run(home)
    schema, rows = _state(home, wh)
    assert schema == [("id", "long"), ("name", "string"), ("qty", "long")]
    assert (5, "n5", 2**40) in rows and len(rows) == 6

    v4 = schema_registry.register(f"{topic}-value", V4)
    _produce(noida, schema_registry, topic, V4, [{"id": 6, "qty": 1}])
    with icesql.Session(home=home) as s, pytest.raises(IcesqlError) as ei:
        s.run(once=True, sinks=["s"])
    message = ei.value.message
    assert "\n" not in message
    for words in (
        f"topic {topic}",
        f"schema id {v4['id']}",
        f"subject {topic}-value version 4",
        "version 3",
        "'name'",
    ):
        assert words in message, (words, message)
    assert len(_state(home, wh)[1]) == 6  # nothing of v4 landed


def test_an_incompatible_version_is_skipped_under_on_error_skip(
    noida: Any, schema_registry: RegistryServer, tmp_path: Path
) -> None:
    home, wh, topic = tmp_path / "home", tmp_path / "wh", "evolve-skip"
    _setup(home, wh, noida, schema_registry, topic, "skip")
    _produce(noida, schema_registry, topic, V1, [{"id": 0, "name": "a"}])
    schema_registry.register(f"{topic}-value", V4)
    _produce(noida, schema_registry, topic, V4, [{"id": 1, "qty": 1}])
    _produce(noida, schema_registry, topic, V1, [{"id": 2, "name": "c"}])
    with icesql.Session(home=home) as s:
        s.run(once=True, sinks=["s"])
        assert s.engine.runner("s").status_row()["skipped_records"] == 1
    assert _state(home, wh) == ([("id", "long"), ("name", "string")], [(0, "a"), (2, "c")])
