"""The Schema Registry Avro decoder: Spark's column types for Avro schemas, and records written by
fastavro and by confluent-kafka's AvroSerializer read back exactly (resolution between versions and
bad bodies: test_registry_avro_evolution)."""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import random
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from icesql.engine.connections.registry import RegisteredSchema
from icesql.engine.sources.registry import kinds
from icesql.engine.sources.registry.avro import AvroDecoder
from icesql.engine.sources.registry.kinds import Unresolvable
from icesql.engine.sources.types import arrow_schema
from tests.support.registry_avro import decode, encode, field, record, reg, roundtrip

UTC = dt.timezone.utc


# --------------------------------------------------------------------------- columns


def test_columns_follow_sparks_avro_mapping() -> None:
    s = record(
        ("b", "boolean"),
        ("i", "int"),
        ("l", "long"),
        ("f", "float"),
        ("d", "double"),
        ("by", "bytes"),
        ("s", "string"),
        ("e", {"type": "enum", "name": "E", "symbols": ["A", "B"]}),
        ("fx", {"type": "fixed", "name": "F", "size": 4}),
        ("dec", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 3}),
        (
            "decf",
            {
                "type": "fixed",
                "name": "DF",
                "size": 16,
                "logicalType": "decimal",
                "precision": 38,
                "scale": 2,
            },
        ),
        ("day", {"type": "int", "logicalType": "date"}),
        ("tm", {"type": "int", "logicalType": "time-millis"}),
        ("tu", {"type": "long", "logicalType": "time-micros"}),
        ("tsm", {"type": "long", "logicalType": "timestamp-millis"}),
        ("tsu", {"type": "long", "logicalType": "timestamp-micros"}),
        ("ltm", {"type": "long", "logicalType": "local-timestamp-millis"}),
        ("ltu", {"type": "long", "logicalType": "local-timestamp-micros"}),
        ("u", {"type": "string", "logicalType": "uuid"}),
        ("n", ["null", "string"]),
        ("n2", ["string", "null"]),
        ("il", ["int", "long"]),
        ("fd", ["null", "float", "double"]),
        ("many", ["null", "int", "string"]),
        ("a", {"type": "array", "items": ["null", "int"]}),
        ("m", {"type": "map", "values": "long"}),
        ("r", record(("x", "int"), ("y", ["null", "double"]), name="Inner")),
    )
    assert AvroDecoder.columns(reg(s)) == {
        "type": "struct",
        "fields": [
            field("b", "boolean", False),
            field("i", "integer", False),
            field("l", "long", False),
            field("f", "float", False),
            field("d", "double", False),
            field("by", "binary", False),
            field("s", "string", False),
            field("e", "string", False),
            field("fx", "binary", False),
            field("dec", "decimal(10,3)", False),
            field("decf", "decimal(38,2)", False),
            field("day", "date", False),
            field("tm", "integer", False),
            field("tu", "long", False),
            field("tsm", "timestamp", False),
            field("tsu", "timestamp", False),
            field("ltm", "timestamp_ntz", False),
            field("ltu", "timestamp_ntz", False),
            field("u", "string", False),
            field("n", "string", True),
            field("n2", "string", True),
            field("il", "long", False),
            field("fd", "double", True),
            field(
                "many",
                {
                    "type": "struct",
                    "fields": [field("member0", "integer", True), field("member1", "string", True)],
                },
                True,
            ),
            field("a", {"type": "array", "elementType": "integer", "containsNull": True}, False),
            field(
                "m",
                {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": False},
                False,
            ),
            field(
                "r",
                {"type": "struct", "fields": [field("x", "integer", False), field("y", "double", True)]},
                False,
            ),
        ],
    }
    # the Arrow form the decoder gives
    schema = arrow_schema(AvroDecoder.columns(reg(s)))
    assert schema.field("tsu").type == pa.timestamp("us", tz="UTC")
    assert schema.field("ltu").type == pa.timestamp("us")
    assert schema.field("decf").type == pa.decimal128(38, 2)
    assert schema.field("m").type == pa.map_(pa.string(), pa.int64())
    assert schema.field("a").type == pa.list_(pa.field("element", pa.int32()))
    assert kinds.columns(reg(s)) == AvroDecoder.columns(reg(s))


def test_named_types_namespaces_and_references_resolve() -> None:
    address = {
        "type": "record",
        "name": "Address",
        "namespace": "com.shop",
        "fields": [{"name": "city", "type": "string"}],
    }
    country = {"type": "enum", "name": "Country", "namespace": "com.shop", "symbols": ["FR", "NL"]}
    with_country = {
        **address,
        "fields": [*address["fields"], {"name": "country", "type": "com.shop.Country"}],
    }
    order = {
        "type": "record",
        "name": "Order",
        "namespace": "com.shop",
        "fields": [
            {"name": "ship", "type": "Address"},  # same namespace: short name
            {"name": "bill", "type": ["null", "com.shop.Address"]},
        ],
    }
    # a reference that itself refers to another one, listed first
    refs = (("com.shop.Address", json.dumps(with_country)), ("com.shop.Country", json.dumps(country)))
    schema = reg(order, refs)
    inner = {"type": "struct", "fields": [field("city", "string", False), field("country", "string", False)]}
    assert AvroDecoder.columns(schema)["fields"] == [field("ship", inner, False), field("bill", inner, True)]
    named: dict[str, Any] = {}
    fastavro.parse_schema(country, named_schemas=named)
    fastavro.parse_schema(with_country, named_schemas=named)
    rows = [
        {"ship": {"city": "Lyon", "country": "FR"}, "bill": None},
        {"ship": {"city": "x", "country": "NL"}, "bill": {"city": "y", "country": "FR"}},
    ]
    batch, bad = AvroDecoder(schema, schema).decode(encode(order, rows, named))
    assert bad == [] and batch.to_pylist() == rows


def test_schemas_without_spark_columns_are_unresolvable() -> None:
    linked = record(("v", "int"), ("next", ["null", "R"]))
    with pytest.raises(Unresolvable, match="recursive"):
        AvroDecoder.columns(reg(linked))
    with pytest.raises(Unresolvable, match="not a record|a source's schema must be a record"):
        AvroDecoder.columns(reg("string"))
    with pytest.raises(Unresolvable, match="wider than Spark"):
        AvroDecoder.columns(reg(record(("d", {"type": "bytes", "logicalType": "decimal", "precision": 40}))))
    with pytest.raises(Unresolvable, match="unknown|neither"):
        AvroDecoder.columns(reg(record(("x", "com.Missing"))))


# --------------------------------------------------------------------------- values


def test_primitives_extremes_unicode_and_nulls() -> None:
    s = record(
        ("b", "boolean"),
        ("i", "int"),
        ("l", "long"),
        ("f", "float"),
        ("d", "double"),
        ("by", "bytes"),
        ("s", "string"),
        ("ni", ["null", "int"]),
        ("ns", ["string", "null"]),
    )
    ints = [0, 1, -1, 2**31 - 1, -(2**31), 63, -64, 64, -65]
    longs = [0, 2**63 - 1, -(2**63), 2**56, -(2**56) - 1, 2**35, 1, -1, 2**62]
    doubles = [math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.7976931348623157e308, 0.1, -2.5, 1e-300]
    floats = [
        math.nan,
        math.inf,
        -math.inf,
        3.4028234663852886e38,
        1.401298464324817e-45,
        0.5,
        -0.0,
        1.0,
        2.0,
    ]
    strings = [
        "",
        "plain",
        "été",
        "日本語テキスト",
        "emoji 🧊🔥",
        "nul\x00inside",
        "x" * 13,
        "y" * 5000,
        "a\u0301",
    ]
    rows = [
        {
            "b": i % 2 == 0,
            "i": ints[i],
            "l": longs[i],
            "f": floats[i],
            "d": doubles[i],
            "by": bytes(range(i * 7 % 256, min(256, i * 7 % 256 + 20))),
            "s": strings[i],
            "ni": None if i % 3 == 0 else ints[i],
            "ns": None if i % 2 else strings[i],
        }
        for i in range(9)
    ]
    got = roundtrip(s, rows)
    for g, r in zip(got, rows, strict=True):
        for k in ("f", "d"):
            assert (math.isnan(g[k]) and math.isnan(r[k])) or (
                g[k] == r[k] and math.copysign(1, g[k]) == math.copysign(1, r[k])
            )
        assert {k: v for k, v in g.items() if k not in ("f", "d")} == {
            k: v for k, v in r.items() if k not in ("f", "d")
        }
    assert pa.array([r["f"] for r in rows], pa.float32()).to_pylist()[3] == got[3]["f"]


def test_logical_types_equal_fastavros_values_in_arrow() -> None:
    dec = {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 10}
    decf = {"type": "fixed", "name": "D16", "size": 16, "logicalType": "decimal", "precision": 38, "scale": 0}
    dec_small = {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}
    s = record(
        ("dec", dec),
        ("decf", decf),
        ("small", ["null", dec_small]),
        ("day", {"type": "int", "logicalType": "date"}),
        ("tsm", {"type": "long", "logicalType": "timestamp-millis"}),
        ("tsu", {"type": "long", "logicalType": "timestamp-micros"}),
        ("ltm", {"type": "long", "logicalType": "local-timestamp-millis"}),
        ("ltu", {"type": "long", "logicalType": "local-timestamp-micros"}),
        ("u", {"type": "string", "logicalType": "uuid"}),
    )
    top = Decimal("9999999999999999999999999999.9999999999")
    bottom = Decimal("-9999999999999999999999999999.9999999999")  # not -top: unary minus rounds to 28 digits
    stamps = [
        dt.datetime(1970, 1, 1, tzinfo=UTC),
        dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
        dt.datetime(1, 1, 1, tzinfo=UTC),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
        dt.datetime(2024, 2, 29, 12, 30, 15, 123000, tzinfo=UTC),
    ]
    rows = [
        {
            "dec": [top, bottom, Decimal(0), Decimal("-0.0000000001"), Decimal("12345.6789")][i],
            "decf": [Decimal(10**38 - 1), Decimal(-(10**38) + 1), Decimal(0), Decimal(-1), Decimal(2**64)][i],
            "small": [Decimal("99.99"), None, Decimal("-99.99"), Decimal("0.01"), Decimal("-0.01")][i],
            "day": [
                dt.date(1970, 1, 1),
                dt.date(1, 1, 1),
                dt.date(9999, 12, 31),
                dt.date(1969, 12, 31),
                dt.date(2000, 2, 29),
            ][i],
            "tsm": stamps[i],
            "tsu": stamps[i] + dt.timedelta(microseconds=7 * (i != 3)),
            "ltm": stamps[i].replace(tzinfo=None),
            "ltu": stamps[i].replace(tzinfo=None),
            "u": "7b0ed9d4-3c1e-4b6c-9d76-8a9f2a0b1c2d",
        }
        for i in range(5)
    ]
    bodies = encode(s, rows)
    batch, bad = decode(s, s, bodies)
    assert bad == []
    parsed = fastavro.parse_schema(s)
    expected = [fastavro.schemaless_reader(io.BytesIO(b), parsed, None) for b in bodies]
    for name in ("dec", "decf", "small", "day", "tsm", "tsu", "ltm", "ltu"):
        want = pa.array([e[name] for e in expected], batch.schema.field(name).type)
        assert batch.column(name).equals(want), name
    assert batch.column("u").to_pylist() == [str(e["u"]) for e in expected]


def test_time_of_day_stays_integer_and_far_timestamps() -> None:
    plain = record(("tm", "int"), ("tu", "long"), ("tsm", "long"), ("tsu", "long"))
    logical = record(
        ("tm", {"type": "int", "logicalType": "time-millis"}),
        ("tu", {"type": "long", "logicalType": "time-micros"}),
        ("tsm", {"type": "long", "logicalType": "timestamp-millis"}),
        ("tsu", {"type": "long", "logicalType": "timestamp-micros"}),
    )
    rows = [
        {
            "tm": 86_399_999,
            "tu": 86_399_999_999,
            "tsm": -(2**62) // 1000,
            "tsu": 2**63 - 1,
        },  # far past/future
        {"tm": 0, "tu": 0, "tsm": 2**63 - 1, "tsu": 0},  # millis beyond what micros can hold
        {"tm": 1, "tu": 1, "tsm": -1, "tsu": -(2**63)},
    ]
    batch, bad = decode(logical, logical, encode(plain, rows))
    assert bad == [(1, "timestamp out of range")]
    assert batch.column("tm").to_pylist() == [86_399_999, 1]
    assert batch.column("tu").to_pylist() == [86_399_999_999, 1]
    assert batch.column("tsm").cast(pa.int64()).to_pylist() == [-(2**62) // 1000 * 1000, -1000]
    assert batch.column("tsu").cast(pa.int64()).to_pylist() == [2**63 - 1, -(2**63)]


def test_nested_records_arrays_maps_enums_fixed() -> None:
    point = record(("x", "double"), ("y", ["null", "double"]), name="Point")
    color = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}
    s = record(
        ("points", {"type": "array", "items": point}),
        ("grid", {"type": "array", "items": {"type": "array", "items": ["null", "int"]}}),
        ("tags", {"type": "map", "values": ["null", "string"]}),
        ("deep", {"type": "map", "values": {"type": "array", "items": "Point"}}),
        ("color", color),
        ("colors", {"type": "array", "items": "Color"}),
        ("id", {"type": "fixed", "name": "Id", "size": 4}),
        ("opt", ["null", record(("a", "int"), ("b", {"type": "map", "values": "int"}), name="Opt")]),
        ("many", ["null", "int", "string", "Point"]),
        ("il", ["int", "long"]),
    )
    rows: list[dict[str, Any]] = [
        {
            "points": [{"x": 1.0, "y": None}, {"x": -2.5, "y": 3.0}],
            "grid": [[1, None, 3], [], [None]],
            "tags": {"k": "v", "ünï": None, "": "empty key"},
            "deep": {"a": [{"x": 0.0, "y": 1.0}], "b": []},
            "color": "GREEN",
            "colors": ["BLUE", "RED"],
            "id": b"\x00\xff\x10\x7f",
            "opt": {"a": 7, "b": {"z": -1}},
            "many": 42,
            "il": 5,
        },
        {
            "points": [],
            "grid": [],
            "tags": {},
            "deep": {},
            "color": "RED",
            "colors": [],
            "id": b"abcd",
            "opt": None,
            "many": "text",
            "il": 2**40,
        },
        {
            "points": [{"x": 9.0, "y": None}] * 40,
            "grid": [[i] for i in range(30)],
            "tags": {f"k{i}": str(i) for i in range(25)},
            "deep": {"p": [{"x": 1.0, "y": None}] * 3},
            "color": "BLUE",
            "colors": ["RED"] * 17,
            "id": b"\x01\x02\x03\x04",
            "opt": {"a": -(2**31), "b": {}},
            "many": {"x": 1.5, "y": None},
            "il": -3,
        },
        {
            "points": [],
            "grid": [],
            "tags": {},
            "deep": {},
            "color": "RED",
            "colors": [],
            "id": b"wxyz",
            "opt": None,
            "many": None,
            "il": 0,
        },
    ]
    got = roundtrip(s, rows)
    for g, r in zip(got, rows, strict=True):
        assert g["points"] == r["points"] and g["grid"] == r["grid"]
        assert dict(g["tags"]) == r["tags"] and list(g["tags"]) == list(r["tags"].items())
        assert {k: v for k, v in g["deep"]} == r["deep"]
        assert (g["color"], g["colors"], g["id"], g["il"]) == (r["color"], r["colors"], r["id"], r["il"])
        assert g["opt"] == (
            None if r["opt"] is None else {"a": r["opt"]["a"], "b": list(r["opt"]["b"].items())}
        )
    members = [g["many"] for g in got]
    assert members == [
        {"member0": 42, "member1": None, "member2": None},
        {"member0": None, "member1": "text", "member2": None},
        {"member0": None, "member1": None, "member2": {"x": 1.5, "y": None}},
        None,
    ]


def test_negative_block_counts_are_read() -> None:
    """Writers may frame array/map blocks with a negative count followed by the block's byte size."""
    s = record(("a", {"type": "array", "items": "long"}), ("m", {"type": "map", "values": "int"}))
    # a: one block of -2 items (size 2) [1, 2], then one block of 1 item [3]; m: {"k": 5} as -1 (size 3)
    body = bytes([3, 4, 2, 4, 2, 6, 0]) + bytes([1, 6, 2]) + b"k" + bytes([10, 0])
    batch, bad = decode(s, s, [body])
    assert bad == [] and batch.to_pylist() == [{"a": [1, 2, 3], "m": [("k", 5)]}]


def test_confluent_serializer_bodies_decode() -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema = record(
        ("id", "long"),
        ("name", "string"),
        ("score", ["null", "double"]),
        ("at", {"type": "long", "logicalType": "timestamp-millis"}),
        ("price", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}),
        ("labels", {"type": "map", "values": "string"}),
        name="Reading",
        namespace="com.example",
    )
    client = SchemaRegistryClient.new_client({"url": "mock://avro-decoder-test"})
    serialize = AvroSerializer(client, json.dumps(schema), conf={"auto.register.schemas": True})
    ctx = SerializationContext("readings", MessageField.VALUE)
    rows = [
        {
            "id": 1,
            "name": "ünïcode",
            "score": None,
            "at": dt.datetime(1960, 5, 1, 3, 4, 5, 6000, tzinfo=UTC),
            "price": Decimal("-1234567.89"),
            "labels": {"a": "b"},
        },
        {
            "id": -(2**63),
            "name": "",
            "score": 0.25,
            "at": dt.datetime(2100, 1, 1, tzinfo=UTC),
            "price": Decimal("0.01"),
            "labels": {},
        },
    ]
    framed = [serialize(r, ctx) for r in rows]
    assert all(f is not None and f[0] == 0 for f in framed)
    sid = int.from_bytes(framed[0][1:5], "big")  # type: ignore[index]
    registered = client.get_schema(sid)
    writer = RegisteredSchema(registered.schema_type or "AVRO", registered.schema_str, id=sid)
    decoder = kinds.decoder(writer, writer)
    batch, bad = decoder.decode([f[5:] for f in framed])  # type: ignore[index]
    assert bad == []
    got = batch.to_pylist()
    for g, r in zip(got, rows, strict=True):
        assert g["labels"] == list(r["labels"].items())
        assert {k: v for k, v in g.items() if k != "labels"} == {k: v for k, v in r.items() if k != "labels"}


leaf = record(("k", "string"), ("v", ["null", "double"]), ("flag", "boolean"), name="Leaf")
NESTED = record(
    ("i", "int"),
    ("l", "long"),
    ("f", "float"),
    ("by", "bytes"),
    ("e", {"type": "enum", "name": "E", "symbols": ["X", "Y", "Z"]}),
    ("fx", {"type": "fixed", "name": "F8", "size": 8}),
    ("leaves", {"type": "array", "items": leaf}),
    ("m", {"type": "map", "values": ["null", {"type": "array", "items": "long"}]}),
    ("opt", ["null", "Leaf"]),
    ("nested", {"type": "array", "items": {"type": "map", "values": "Leaf"}}),
)


def test_random_records_equal_fastavros_reading() -> None:
    """fastavro's own random records of a nested schema: icesql's batch equals fastavro's decoding
    of the same bodies turned into Arrow."""
    from fastavro.utils import generate_many

    s = NESTED
    rows = list(generate_many(s, 300))
    bodies = encode(s, rows)
    batch, bad = decode(s, s, bodies)
    assert bad == []
    parsed = fastavro.parse_schema(s)
    want = [fastavro.schemaless_reader(io.BytesIO(b), parsed, None) for b in bodies]
    assert batch.equals(pa.RecordBatch.from_pylist(want, schema=batch.schema))


def test_mutated_nested_bodies_never_raise_and_agree_with_fastavro() -> None:
    from fastavro.utils import generate_many

    good = encode(NESTED, list(generate_many(NESTED, 40)))
    rnd = random.Random(4)
    bodies = []
    for _ in range(400):
        b = bytearray(rnd.choice(good))
        for _ in range(rnd.randint(1, 3)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        bodies.append(bytes(b[: rnd.randint(0, len(b))] if rnd.random() < 0.2 else b))
    batch, bad = decode(NESTED, NESTED, bodies)
    bad_rows = {i for i, _ in bad}
    kept = [i for i in range(len(bodies)) if i not in bad_rows]
    parsed = fastavro.parse_schema(NESTED)
    want = []
    for i in kept:
        buf = io.BytesIO(bodies[i])
        want.append(fastavro.schemaless_reader(buf, parsed, None))
        assert buf.tell() == len(bodies[i])
    assert batch.equals(pa.RecordBatch.from_pylist(want, schema=batch.schema))
    assert 0 < len(bad_rows) < len(bodies)
