"""The JSON Schema decoder of registry-framed Kafka records (issue 52): records made by confluent-kafka's
own JSONSerializer against a mock:// registry, read columnar by icesql's Spark-exact JSON reader."""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from icesql.engine.connections.registry import RegisteredSchema
from icesql.engine.sources.registry import kinds
from icesql.engine.sources.registry.jsonschema import JsonSchemaDecoder
from icesql.engine.sources.registry.kinds import Unresolvable
from icesql.engine.sources.types import arrow_schema

UTC = dt.timezone.utc

EVERYTHING: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Everything",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "i32": {"type": "integer", "connect.type": "int32"},
        "i16": {"type": "integer", "connect.type": "int16"},
        "i8": {"type": "integer", "connect.type": "int8"},
        "d": {"type": "number"},
        "f": {"type": "number", "connect.type": "float32"},
        "ok": {"type": "boolean"},
        "s": {"type": ["string", "null"]},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "raw": {"type": "string", "connect.type": "bytes"},
        "maybe": {"oneOf": [{"type": "null"}, {"type": "integer", "connect.type": "int64"}]},
        "color": {"enum": ["RED", "GREEN"]},
        "nothing": {"type": "null"},
        "address": {"$ref": "#/definitions/Address"},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
        "qty": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["id", "ok"],
    "definitions": {
        "Address": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
            "required": ["city"],
        }
    },
    "$defs": {
        "Line": {"type": "object", "properties": {"sku": {"type": "string"}, "n": {"type": "integer"}}}
    },
}


def field(name: str, t: Any, nullable: bool = True) -> dict[str, Any]:
    return {"name": name, "type": t, "nullable": nullable, "metadata": {}}


def produce(
    schema: dict[str, Any] | str,
    records: list[Any],
    topic: str = "t",
    client: Any = None,
    references: list[SchemaReference] | None = None,
) -> tuple[RegisteredSchema, list[bytes]]:
    """The records as the real serializer frames them (it validates them against the schema), the
    bodies without the 5-byte prefix, and the schema as the registry hands it over."""
    client = client or SchemaRegistryClient.new_client({"url": "mock://json"})
    text = schema if isinstance(schema, str) else json.dumps(schema)
    ser = JSONSerializer(Schema(text, "JSON", references or []), client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    framed = [ser(r, ctx) for r in records]
    assert all(f[0] == 0 for f in framed)
    found = client.get_latest_version(f"{topic}-value")
    referenced = tuple(
        (ref.name, client.get_version(ref.subject, ref.version).schema.schema_str)
        for ref in found.schema.references or ()
    )
    registered = RegisteredSchema("JSON", found.schema.schema_str, id=found.schema_id, referenced=referenced)
    return registered, [f[5:] for f in framed]


def decode(writer: RegisteredSchema, bodies: list[bytes], reader: RegisteredSchema | None = None) -> Any:
    reader = reader or writer
    batch, bad = kinds.decoder(writer, reader).decode(bodies)
    assert batch.schema == arrow_schema(kinds.columns(reader))
    return batch, bad


def test_columns_map_json_schema_to_spark_types() -> None:
    cols = JsonSchemaDecoder.columns(RegisteredSchema("JSON", json.dumps(EVERYTHING)))
    assert cols == {
        "type": "struct",
        "fields": [
            field("id", "long", nullable=False),
            field("i32", "integer"),
            field("i16", "short"),
            field("i8", "byte"),
            field("d", "double"),
            field("f", "float"),
            field("ok", "boolean", nullable=False),
            field("s", "string"),
            field("at", "timestamp"),
            field("day", "date"),
            field("raw", "binary"),
            field("maybe", "long"),
            field("color", "string"),
            field(
                "address",
                {
                    "type": "struct",
                    "fields": [field("city", "string", nullable=False), field("zip", "string")],
                },
            ),
            field(
                "lines",
                {
                    "type": "array",
                    "elementType": {"type": "struct", "fields": [field("sku", "string"), field("n", "long")]},
                    "containsNull": True,
                },
            ),
            field("qty", {"type": "array", "elementType": "long", "containsNull": True}),
        ],
    }


def test_every_type_at_its_extremes_through_the_real_serializer() -> None:
    records = [
        {
            "id": 2**63 - 1,
            "i32": -(2**31),
            "i16": 32767,
            "i8": -128,
            "d": 1.7976931348623157e308,
            "f": 1.5,
            "ok": True,
            "s": 'héllo ✓ 日本 😀 \u0000 "quoted" \\ end',
            "at": "2024-02-29T23:59:59.123456Z",
            "day": "2024-02-29",
            "raw": base64.b64encode(b"\x00\xff\x80").decode(),
            "maybe": -(2**63),
            "color": "GREEN",
            "nothing": None,
            "address": {"city": "Zürich", "zip": "8000"},
            "lines": [{"sku": "A", "n": 0}, {"sku": "B"}],
            "qty": [1, -1, 0],
        },
        {"id": -(2**63), "ok": False, "d": 5e-324, "s": None, "at": "1969-12-31T23:59:59+01:00", "lines": []},
        {"id": 0, "ok": True, "d": -0.0, "s": "", "at": "2024-01-01 10:00:00", "qty": []},
    ]
    writer, bodies = produce(EVERYTHING, records)
    batch, bad = decode(writer, bodies)
    assert bad == []
    a, b, c = batch.to_pylist()
    assert a == {
        "id": 2**63 - 1,
        "i32": -(2**31),
        "i16": 32767,
        "i8": -128,
        "d": 1.7976931348623157e308,
        "f": 1.5,
        "ok": True,
        "s": 'héllo ✓ 日本 😀 \u0000 "quoted" \\ end',
        "at": dt.datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=UTC),
        "day": dt.date(2024, 2, 29),
        "raw": b"\x00\xff\x80",
        "maybe": -(2**63),
        "color": "GREEN",
        "address": {"city": "Zürich", "zip": "8000"},
        "lines": [{"sku": "A", "n": 0}, {"sku": "B", "n": None}],
        "qty": [1, -1, 0],
    }
    assert b["id"] == -(2**63) and b["ok"] is False and b["d"] == 5e-324 and b["s"] is None
    assert b["at"] == dt.datetime(1969, 12, 31, 22, 59, 59, tzinfo=UTC) and b["lines"] == []
    assert b["address"] is None and b["qty"] is None  # absent: null (JSON has no zero values to emit)
    assert c["s"] == "" and c["qty"] == [] and c["d"] == 0.0
    # no zone: the session's, as Spark's JSON reader reads it
    assert c["at"] == dt.datetime(2024, 1, 1, 10, 0, tzinfo=UTC)


def test_a_referenced_schema() -> None:
    client = SchemaRegistryClient.new_client({"url": "mock://json-refs"})
    address = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}}}
    client.register_schema("address", Schema(json.dumps(address), "JSON"))
    main = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "to": {"$ref": "address.json"}},
        "required": ["id"],
    }
    writer, bodies = produce(
        main,
        [{"id": 1, "to": {"city": "Köln", "country": "DE"}}],
        client=client,
        references=[SchemaReference("address.json", "address", 1)],
    )
    assert [name for name, _ in writer.referenced] == ["address.json"]
    batch, bad = decode(writer, bodies)
    assert (batch.to_pylist(), bad) == ([{"id": 1, "to": {"city": "Köln", "country": "DE"}}], [])
    # a pointer into the referenced schema, and an absolute $ref URL ending in the reference's name
    deep = RegisteredSchema(
        "JSON",
        json.dumps(
            {
                "type": "object",
                "properties": {"c": {"$ref": "https://example.com/s/address.json#/properties/city"}},
            }
        ),
        referenced=writer.referenced,
    )
    assert JsonSchemaDecoder.columns(deep)["fields"] == [field("c", "string")]
    with pytest.raises(Unresolvable, match="no reference supplies"):
        JsonSchemaDecoder.columns(RegisteredSchema("JSON", json.dumps(main)))


def test_bodies_that_do_not_read_are_bad_records_with_a_reason() -> None:
    schema = {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "at": {"type": "string", "format": "date-time"},
            "raw": {"type": "string", "connect.type": "bytes"},
            "inner": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]},
        },
        "required": ["id"],
    }
    writer, good = produce(schema, [{"id": 1}, {"id": 2, "inner": {"k": "v"}}])
    bodies = [
        good[0],
        b'{"id": "one"}',  # another type than the schema's
        b'{"id": 3',  # truncated
        b"\xff\xfe garbage",
        b"",
        b"[1, 2]",  # not an object
        b'{"id": 4, "at": "yesterday"}',  # a timestamp Spark would not read
        b'{"at": "2024-01-01T00:00:00Z"}',  # a required property missing
        b'{"id": 18446744073709551616}',  # beyond a long
        b'{"id": 5, "raw": "not base64!"}',
        b'{"id": 6, "inner": {}}',  # a required nested property missing
        None,
        good[1],
        b'{"id": 7}\n{"id": 8}',  # two records in one body
    ]
    batch, bad = decode(writer, bodies)
    assert [r["id"] for r in batch.to_pylist()] == [1, 2]
    assert [i for i, _ in bad] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13]
    reasons = dict(bad)
    assert "does not read" in reasons[1] and "blank" in reasons[4]
    assert reasons[7] == "required property 'id' is missing or null"
    assert reasons[10] == "required property 'inner.k' is missing or null"
    assert reasons[11] == "a null body"
    # an Arrow array of bodies, and a batch where every body is good
    batch, bad = JsonSchemaDecoder(writer, writer).decode(pa.array(good, pa.binary()))
    assert (batch.num_rows, bad) == (2, [])
    batch, bad = JsonSchemaDecoder(writer, writer).decode([b"nope"])
    assert batch.num_rows == 0 and [i for i, _ in bad] == [0]


# --------------------------------------------------------------------------- evolution

V1 = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["id"],
}


def _with(**props: Any) -> RegisteredSchema:
    schema = json.loads(json.dumps(V1))
    for name, prop in props.items():
        if prop is None:
            del schema["properties"][name]
        else:
            schema["properties"][name] = prop
    return RegisteredSchema("JSON", json.dumps(schema))


def test_evolution_by_property_name() -> None:
    writer, bodies = produce(V1, [{"id": 1, "name": "a", "n": 2}])
    # added by the reader: null, or its default
    reader = _with(region={"type": "string", "default": "eu"}, score={"type": "number"})
    batch, bad = decode(writer, bodies, reader)
    assert (batch.to_pylist(), bad) == ([{"id": 1, "name": "a", "n": 2, "region": "eu", "score": None}], [])
    # removed by the reader: ignored
    batch, _ = decode(writer, bodies, _with(name=None))
    assert batch.to_pylist() == [{"id": 1, "n": 2}]
    # an integer read as a number widens
    batch, _ = decode(writer, bodies, _with(n={"type": "number"}))
    assert batch.to_pylist()[0]["n"] == 2.0


@pytest.mark.parametrize(
    ("prop", "words"),
    [
        ("name", {"type": "integer"}),
        ("n", {"type": "string"}),
        ("n", {"type": "object", "properties": {"x": {"type": "integer"}}}),
        ("name", {"type": "string", "format": "date-time"}),
    ],
)
def test_a_type_change_is_unresolvable(prop: str, words: dict[str, Any]) -> None:
    with pytest.raises(Unresolvable, match=f"property '{prop}' changes type"):
        kinds.decoder(RegisteredSchema("JSON", json.dumps(V1)), _with(**{prop: words}))
    # and the other way round
    with pytest.raises(Unresolvable, match=f"property '{prop}' changes type"):
        JsonSchemaDecoder(_with(**{prop: words}), RegisteredSchema("JSON", json.dumps(V1)))


def test_a_nested_type_change_names_the_path() -> None:
    old = _with(inner={"type": "object", "properties": {"k": {"type": "number"}}})
    new = _with(inner={"type": "object", "properties": {"k": {"type": "integer"}}})
    with pytest.raises(Unresolvable, match="property 'inner.k' changes type from double to long"):
        JsonSchemaDecoder(old, new)
    JsonSchemaDecoder(new, old)  # an integer read as a number: fine


@pytest.mark.parametrize(
    ("prop", "words"),
    [
        ({"type": "object", "additionalProperties": {"type": "integer"}}, "without properties"),
        ({"type": ["string", "integer"]}, "any of"),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "oneOf of several types"),
        ({"type": "array"}, "without one items schema"),
        ({"$ref": "#"}, "recursive"),
        ({"$ref": "#/definitions/Nope"}, "points at nothing"),
        ({}, "has no type"),
    ],
)
def test_schemas_no_column_holds_are_unresolvable(prop: dict[str, Any], words: str) -> None:
    with pytest.raises(Unresolvable, match=words):
        JsonSchemaDecoder.columns(_with(x=prop))


def test_not_an_object_schema() -> None:
    with pytest.raises(Unresolvable, match="not an object schema"):
        JsonSchemaDecoder.columns(RegisteredSchema("JSON", '{"type": "string"}'))
    with pytest.raises(Unresolvable, match="not JSON"):
        JsonSchemaDecoder.columns(RegisteredSchema("JSON", "{nope"))
