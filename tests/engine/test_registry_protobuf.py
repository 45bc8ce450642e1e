"""The Protobuf decoder of registry-framed Kafka records (issue 52): records made by confluent-kafka's
own ProtobufSerializer against a mock:// registry, read back as Spark's from_protobuf reads them."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import message_factory

from icesql.engine.connections.registry import RegisteredSchema
from icesql.engine.sources.registry import kinds
from icesql.engine.sources.registry.kinds import Unresolvable
from icesql.engine.sources.registry.protobuf import ProtobufDecoder, compile_schema, message_of
from icesql.engine.sources.types import arrow_schema

UTC = dt.timezone.utc

SCALARS = """syntax = "proto3";
package icesql.test;
message Scalars {
  int32 i32 = 1; int64 i64 = 2; uint32 u32 = 3; uint64 u64 = 4; sint32 s32 = 5; sint64 s64 = 6;
  fixed32 f32 = 7; fixed64 f64 = 8; sfixed32 sf32 = 9; sfixed64 sf64 = 10;
  float fl = 11; double db = 12; bool b = 13; string s = 14; bytes by = 15;
}
"""

RICH = """syntax = "proto3";
package icesql.test;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
enum Color { COLOR_NONE = 0; RED = 1; GREEN = 2; }
message Order {
  int64 id = 1;
  Customer customer = 2;
  repeated int32 qty = 3;
  repeated string tags = 4;
  repeated Line lines = 5;
  map<string, int64> counts = 6;
  map<int32, Line> by_pos = 7;
  Color color = 8;
  repeated Color colors = 9;
  oneof payment { string card = 10; int64 account = 11; }
  google.protobuf.Timestamp at = 12;
  google.protobuf.Duration took = 13;
  google.protobuf.Int32Value maybe_int = 14;
  google.protobuf.StringValue maybe_str = 15;
  google.protobuf.BoolValue maybe_bool = 16;
  optional int32 opt = 17;
  message Customer { string name = 1; Address address = 2; }
  message Address { string city = 1; int32 zip = 2; }
}
message Line { string sku = 1; double price = 2; }
"""

ADDRESS = """syntax = "proto3";
package shared;
message Address { string city = 1; string country = 2; }
"""

WITH_IMPORT = """syntax = "proto3";
package icesql.test;
import "shared/address.proto";
message Shipment { string id = 1; shared.Address to = 2; repeated shared.Address stops = 3; }
"""


def classes(text: str, referenced: tuple[tuple[str, str], ...] = ()) -> Any:
    """Generated-message classes of a .proto text, built by the decoder's own compile path."""
    fd = compile_schema(RegisteredSchema("PROTOBUF", text, referenced=referenced))

    class Classes:
        def __getattr__(self, name: str) -> Any:
            return message_factory.GetMessageClass(message_of(fd, name))

    return Classes()


def registered(client: Any, subject: str, version: int | None = None) -> RegisteredSchema:
    """A subject's schema as the registry client hands it over, references resolved."""
    found = client.get_latest_version(subject) if version is None else client.get_version(subject, version)
    refs: list[tuple[str, str]] = []

    def walk(schema: Any) -> None:
        for ref in schema.references or ():
            dep = client.get_version(ref.subject, ref.version).schema
            walk(dep)
            refs.append((ref.name, dep.schema_str))

    walk(found.schema)
    return RegisteredSchema(
        "PROTOBUF", found.schema.schema_str, id=found.schema_id, subject=subject, referenced=tuple(refs)
    )


def produce(
    messages: list[Any], topic: str = "t", client: Any = None
) -> tuple[RegisteredSchema, list[bytes]]:
    """The messages as the real serializer frames them; the bodies without the 5-byte prefix."""
    client = client or SchemaRegistryClient.new_client({"url": "mock://test"})
    ser = ProtobufSerializer(type(messages[0]), client, {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    framed = [ser(m, ctx) for m in messages]
    assert all(f[0] == 0 for f in framed)
    return registered(client, f"{topic}-value"), [f[5:] for f in framed]


def decode(
    writer: RegisteredSchema, bodies: list[bytes], reader: RegisteredSchema | None = None, **kw: Any
) -> Any:
    reader = reader or writer
    d = ProtobufDecoder(writer, reader, **kw)
    batch, bad = d.decode(bodies)
    assert batch.schema == arrow_schema(ProtobufDecoder.columns(reader, **kw))
    return batch, bad


# --------------------------------------------------------------------------- scalars


def test_every_scalar_at_its_extremes_and_unicode() -> None:
    Scalars = classes(SCALARS).Scalars
    hi = Scalars(
        i32=2**31 - 1,
        i64=2**63 - 1,
        u32=2**32 - 1,
        u64=2**64 - 1,
        s32=-(2**31),
        s64=-(2**63),
        f32=2**32 - 1,
        f64=2**64 - 1,
        sf32=-(2**31),
        sf64=-(2**63),
        fl=3.4028234663852886e38,
        db=-1.7976931348623157e308,
        b=True,
        s="héllo wörld ✓ 日本 😀 \u0000 end",
        by=b"\x00\xff\x80binary",
    )
    lo = Scalars(
        i32=-(2**31),
        i64=-(2**63),
        u32=1,
        u64=1,
        s32=2**31 - 1,
        s64=2**63 - 1,
        f32=1,
        f64=1,
        sf32=2**31 - 1,
        sf64=2**63 - 1,
        fl=float("-inf"),
        db=5e-324,
        s="x",
        by=b"\x01",
    )
    odd = Scalars(fl=float("nan"), db=-0.0, s="\U0010ffff")
    writer, bodies = produce([hi, lo, odd, Scalars()])
    batch, bad = decode(writer, bodies)
    assert bad == []
    rows = batch.to_pylist()
    # unsigned values read as Java reads them (Spark's default, without upcast.unsigned.ints)
    assert rows[0] == {
        "i32": 2**31 - 1,
        "i64": 2**63 - 1,
        "u32": -1,
        "u64": -1,
        "s32": -(2**31),
        "s64": -(2**63),
        "f32": -1,
        "f64": -1,
        "sf32": -(2**31),
        "sf64": -(2**63),
        "fl": pytest.approx(3.4028234663852886e38),
        "db": -1.7976931348623157e308,
        "b": True,
        "s": "héllo wörld ✓ 日本 😀 \u0000 end",
        "by": b"\x00\xff\x80binary",
    }
    assert rows[1]["i32"] == -(2**31) and rows[1]["u64"] == 1 and rows[1]["fl"] == float("-inf")
    assert rows[1]["db"] == 5e-324 and rows[1]["sf64"] == 2**63 - 1
    assert math.isnan(rows[2]["fl"]) and rows[2]["s"] == "\U0010ffff"
    # -0.0 is sent (its bits are not zero) and reads as itself; the other zeros read null
    assert rows[2]["db"] == 0.0 and math.copysign(1.0, rows[2]["db"]) == -1.0
    assert rows[2]["i32"] is None and rows[2]["b"] is None
    # proto3 zero values read null: from_protobuf's default (emit.default.values off)
    assert rows[3] == dict.fromkeys(rows[3])


def test_columns_map_types_as_spark_does() -> None:
    cols = ProtobufDecoder.columns(RegisteredSchema("PROTOBUF", SCALARS))
    types = {f["name"]: f["type"] for f in cols["fields"]}
    assert types == {
        "i32": "integer",
        "i64": "long",
        "u32": "integer",
        "u64": "long",
        "s32": "integer",
        "s64": "long",
        "f32": "integer",
        "f64": "long",
        "sf32": "integer",
        "sf64": "long",
        "fl": "float",
        "db": "double",
        "b": "boolean",
        "s": "string",
        "by": "binary",
    }
    assert all(f["nullable"] for f in cols["fields"])
    rich = {
        f["name"]: f["type"] for f in ProtobufDecoder.columns(RegisteredSchema("PROTOBUF", RICH))["fields"]
    }
    assert rich["customer"] == {
        "type": "struct",
        "fields": [
            {"name": "name", "type": "string", "nullable": True, "metadata": {}},
            {
                "name": "address",
                "type": {
                    "type": "struct",
                    "fields": [
                        {"name": "city", "type": "string", "nullable": True, "metadata": {}},
                        {"name": "zip", "type": "integer", "nullable": True, "metadata": {}},
                    ],
                },
                "nullable": True,
                "metadata": {},
            },
        ],
    }
    assert rich["qty"] == {"type": "array", "elementType": "integer", "containsNull": False}
    assert rich["counts"] == {
        "type": "map",
        "keyType": "string",
        "valueType": "long",
        "valueContainsNull": False,
    }
    assert rich["by_pos"]["valueType"]["type"] == "struct"
    assert rich["color"] == "string" and rich["colors"]["elementType"] == "string"
    assert rich["card"] == "string" and rich["account"] == "long"  # a oneof's fields: plain columns
    assert rich["at"] == "timestamp"
    assert rich["took"] == {
        "type": "struct",
        "fields": [
            {"name": "seconds", "type": "long", "nullable": True, "metadata": {}},
            {"name": "nanos", "type": "integer", "nullable": True, "metadata": {}},
        ],
    }
    assert (rich["maybe_int"], rich["maybe_str"], rich["maybe_bool"]) == ("integer", "string", "boolean")
    # the kinds registry gives the same
    assert kinds.columns(RegisteredSchema("PROTOBUF", RICH)) == ProtobufDecoder.columns(
        RegisteredSchema("PROTOBUF", RICH)
    )


# --------------------------------------------------------------------------- nested, repeated, maps


def test_nested_repeated_maps_enums_oneof_timestamp_wrappers() -> None:
    c = classes(RICH)
    Order, Line = c.Order, c.Line
    full = Order(
        id=7,
        qty=[1, 0, -3],
        tags=["a", "", "ü"],
        counts={"x": 1, "zero": 0},
        color=2,
        colors=[0, 1, 2],
        card="4111",
        opt=0,
    )
    full.customer.name = "Zoë"
    full.customer.address.city = "Zürich"
    full.lines.add(sku="A", price=1.5)
    full.lines.add()
    full.by_pos[3].sku = "B"
    full.by_pos[4].CopyFrom(Line())
    full.at.seconds, full.at.nanos = 1_700_000_000, 123_456_789
    full.took.seconds, full.took.nanos = 90, 5
    full.maybe_int.value = 0  # present, zero: reads 0 (the wrapper is there)
    full.maybe_str.value = "w"
    other = Order(id=8, account=0, colors=[5])  # 5: a number the enum lacks
    other.at.seconds, other.at.nanos = -1, 999_999_999
    writer, bodies = produce([full, other, Order()])
    batch, bad = decode(writer, bodies)
    assert bad == []
    a, b, empty = batch.to_pylist()
    assert a["id"] == 7
    assert a["customer"] == {"name": "Zoë", "address": {"city": "Zürich", "zip": None}}
    assert a["qty"] == [1, 0, -3] and a["tags"] == ["a", "", "ü"]  # inside arrays, values as they are
    assert a["lines"] == [{"sku": "A", "price": 1.5}, {"sku": None, "price": None}]
    assert sorted(a["counts"]) == [("x", 1), ("zero", 0)]
    assert sorted(a["by_pos"], key=lambda kv: kv[0]) == [
        (3, {"sku": "B", "price": None}),
        (4, {"sku": None, "price": None}),
    ]
    assert a["color"] == "GREEN" and a["colors"] == ["COLOR_NONE", "RED", "GREEN"]
    assert a["card"] == "4111" and a["account"] is None
    assert a["at"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC)
    assert a["took"] == {"seconds": 90, "nanos": 5}
    assert (a["maybe_int"], a["maybe_str"], a["maybe_bool"]) == (0, "w", None)
    assert a["opt"] == 0  # proto3 optional: present, so 0 and not null
    assert b["card"] is None and b["account"] == 0  # a oneof member set to zero is present
    assert b["colors"] == ["UNKNOWN_ENUM_VALUE_Color_5"]
    assert b["at"] == dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    assert b["customer"] is None and b["lines"] == [] and b["counts"] == []
    assert empty == {
        **dict.fromkeys(empty),
        "qty": [],
        "tags": [],
        "lines": [],
        "counts": [],
        "by_pos": [],
        "colors": [],
    }


def test_proto2_required_and_declared_defaults() -> None:
    text = """syntax = "proto2";
package icesql.test;
message Legacy { required int64 id = 1; optional string name = 2 [default = "anon"];
                 optional int32 n = 3; optional int32 zero = 4 [default = 0]; }
"""
    Legacy = classes(text).Legacy
    writer, bodies = produce([Legacy(id=0), Legacy(id=1, name="x", n=0)])
    cols = ProtobufDecoder.columns(writer)
    assert [(f["name"], f["nullable"]) for f in cols["fields"]] == [
        ("id", False),
        ("name", True),
        ("n", True),
        ("zero", True),
    ]
    batch, bad = decode(writer, bodies)
    assert bad == []
    # Spark's hasDefaultValue: a declared default is read when the field is absent
    assert batch.to_pylist() == [
        {"id": 0, "name": "anon", "n": None, "zero": 0},
        {"id": 1, "name": "x", "n": 0, "zero": 0},
    ]
    # a required field missing from the bytes: the body does not parse
    _, bad = ProtobufDecoder(writer, writer).decode([b"\x00" + Legacy(name="y").SerializePartialToString()])
    assert [i for i, _ in bad] == [0]


def test_an_import_by_reference_as_descriptor_and_as_proto_text() -> None:
    refs = (("shared/address.proto", ADDRESS),)
    Shipment = classes(WITH_IMPORT, refs).Shipment
    s = Shipment(id="s1")
    s.to.city, s.to.country = "Köln", "DE"
    s.stops.add(city="Bonn")
    writer, bodies = produce([s])
    # the Python serializer registered the import under its own subject, as a base64 descriptor
    assert [name for name, _ in writer.referenced] == ["shared/address.proto"]
    expected = [
        {"id": "s1", "to": {"city": "Köln", "country": "DE"}, "stops": [{"city": "Bonn", "country": None}]}
    ]
    batch, bad = decode(writer, bodies)
    assert (batch.to_pylist(), bad) == (expected, [])
    # what the registry's REST API (and a Java producer) gives: .proto text, the import as text
    as_text = RegisteredSchema("PROTOBUF", WITH_IMPORT, referenced=refs)
    batch, bad = decode(as_text, bodies)
    assert (batch.to_pylist(), bad) == (expected, [])
    batch, _ = decode(writer, bodies, reader=as_text)  # a descriptor writer read as a text reader
    assert batch.to_pylist() == expected
    with pytest.raises(Unresolvable, match="shared/address.proto"):
        ProtobufDecoder.columns(RegisteredSchema("PROTOBUF", WITH_IMPORT))


# --------------------------------------------------------------------------- message indexes


def test_message_index_picks_the_writers_message() -> None:
    text = """syntax = "proto3";
package icesql.test;
message First { int32 a = 1; }
message Second { string b = 1; message Inner { int64 c = 1; } }
"""
    c = classes(text)
    client = SchemaRegistryClient.new_client({"url": "mock://index"})
    first, first_bodies = produce([c.First(a=1)], topic="first", client=client)
    second, second_bodies = produce([c.Second(b="x")], topic="second", client=client)
    inner, inner_bodies = produce([getattr(c, "Second.Inner")(c=9)], topic="inner", client=client)
    assert first_bodies[0][:1] == b"\x00"
    assert second_bodies[0][:2] == b"\x02\x02"  # one index (zigzag 1), index 1 (zigzag 2)
    assert inner_bodies[0][:3] == b"\x04\x02\x00"  # two indexes: 1, then nested 0
    # the source reads the file's first message by default, or the one it names
    assert [f["name"] for f in ProtobufDecoder.columns(second)["fields"]] == ["a"]
    batch, bad = decode(second, second_bodies, message="Second")
    assert (batch.to_pylist(), bad) == ([{"b": "x"}], [])
    batch, bad = decode(inner, inner_bodies, message="icesql.test.Second.Inner")
    assert (batch.to_pylist(), bad) == ([{"c": 9}], [])
    # a record of another message than the one the source reads is a bad record, not a wrong row
    batch, bad = decode(first, first_bodies + second_bodies + first_bodies)
    assert batch.to_pylist() == [{"a": 1}, {"a": 1}]
    assert [i for i, _ in bad] == [1] and "icesql.test.Second" in bad[0][1]


def test_truncated_and_garbage_bodies_are_bad_records() -> None:
    c = classes(RICH)
    good = c.Order(id=1, tags=["long enough to truncate"])
    writer, bodies = produce([good])
    body = bodies[0]
    batch, bad = ProtobufDecoder(writer, writer).decode(
        [body, body[:-5], b"", b"\x00\xff\xff\xff", b"\x80", b"\x02\x7e", body, b"\x00\x0a\x05ab"]
    )
    assert [r["id"] for r in batch.to_pylist()] == [1, 1]
    assert [i for i, _ in bad] == [1, 2, 3, 4, 5, 7]
    reasons = dict(bad)
    assert "does not parse" in reasons[1] and "empty body" in reasons[2]
    assert "truncated" in reasons[4] and "names no message" in reasons[5]
    # an Arrow array of bodies works as well as a list
    batch, bad = ProtobufDecoder(writer, writer).decode(pa.array([body, None], pa.binary()))
    assert batch.num_rows == 1 and [i for i, _ in bad] == [1]


def test_a_timestamp_beyond_sparks_range_is_a_bad_record() -> None:
    c = classes(RICH)
    far = c.Order(id=2)
    far.at.seconds = 2**62
    writer, bodies = produce([c.Order(id=1), far, c.Order(id=3)])
    batch, bad = ProtobufDecoder(writer, writer).decode(bodies)
    assert [r["id"] for r in batch.to_pylist()] == [1, 3]
    assert [i for i, _ in bad] == [1]


# --------------------------------------------------------------------------- evolution


V1 = """syntax = "proto3";
package icesql.test;
message Event { int64 id = 1; string name = 2; int32 count = 3; Meta meta = 4; }
message Meta { string source = 1; }
"""


def _versions(v2: str) -> tuple[RegisteredSchema, RegisteredSchema]:
    return RegisteredSchema("PROTOBUF", V1, version=1), RegisteredSchema("PROTOBUF", v2, version=2)


def test_evolution_by_field_number() -> None:
    added = V1.replace("Meta meta = 4;", "Meta meta = 4; string region = 5; repeated int64 ids = 6;")
    v1, v2 = _versions(added)
    Event1, Event2 = classes(V1).Event, classes(added).Event
    w1, old = produce([Event1(id=1, name="a", count=2)], topic="ev1")
    w2, new = produce([Event2(id=2, name="b", count=3, region="eu", ids=[1])], topic="ev2")
    # old records read by the new schema: the added fields are absent
    batch, bad = decode(w1, old, reader=v2)
    assert (batch.to_pylist(), bad) == (
        [{"id": 1, "name": "a", "count": 2, "meta": None, "region": None, "ids": []}],
        [],
    )
    # new records read by the old schema: the fields it does not know are skipped
    batch, bad = decode(w2, new, reader=v1)
    assert (batch.to_pylist(), bad) == ([{"id": 2, "name": "b", "count": 3, "meta": None}], [])
    # a field removed (its number reserved) and one renamed: by number, the rename reads on
    removed = V1.replace("string name = 2;", "reserved 2;").replace("int32 count = 3;", "int32 total = 3;")
    batch, _ = decode(w1, old, reader=RegisteredSchema("PROTOBUF", removed))
    assert batch.to_pylist() == [{"id": 1, "total": 2, "meta": None}]
    # the int32/int64 group reads one as the other
    widened = V1.replace("int32 count = 3;", "int64 count = 3;")
    batch, _ = decode(w1, old, reader=RegisteredSchema("PROTOBUF", widened))
    assert batch.to_pylist()[0]["count"] == 2


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (
            ("string name = 2;", "int64 name = 2;"),
            "field 'name' (number 2) changes type from string to int64",
        ),
        (("int32 count = 3;", "repeated int32 count = 3;"), "field 'count' (number 3) is singular"),
        (
            ("int32 count = 3;", "double count = 3;"),
            "field 'count' (number 3) changes type from int32 to double",
        ),
        (("string source = 1;", "bytes source = 1; int32 x = 2;"), None),  # string/bytes: one group
        (
            ("message Meta { string source = 1; }", "message Meta { int32 source = 1; }"),
            "field 'meta.source'",
        ),
        (
            ("Meta meta = 4;", "string meta = 4;"),
            "field 'meta' (number 4) changes type from icesql.test.Meta to string",
        ),
    ],
)
def test_an_incompatible_type_change_is_unresolvable(change: tuple[str, str], words: str | None) -> None:
    v1, v2 = _versions(V1.replace(*change))
    if words is None:
        ProtobufDecoder(v1, v2)
        return
    with pytest.raises(Unresolvable, match=words.replace("(", r"\(").replace(")", r"\)")):
        kinds.decoder(v1, v2)


def test_schema_errors_are_clear() -> None:
    with pytest.raises(Unresolvable, match="does not compile"):
        ProtobufDecoder.columns(RegisteredSchema("PROTOBUF", 'syntax = "proto3"; message { int32 a = 1; }'))
    recursive = 'syntax = "proto3"; message Node { int32 v = 1; Node next = 2; }'
    with pytest.raises(Unresolvable, match="field 'next' makes message Node recursive"):
        ProtobufDecoder.columns(RegisteredSchema("PROTOBUF", recursive))
    with pytest.raises(Unresolvable, match="has no message 'Nope'"):
        ProtobufDecoder.columns(RegisteredSchema("PROTOBUF", V1), message="Nope")
    other = RegisteredSchema("PROTOBUF", V1.replace("message Event", "message Renamed"))
    with pytest.raises(Unresolvable, match="no message icesql.test.Event"):
        ProtobufDecoder(other, RegisteredSchema("PROTOBUF", V1))
    with pytest.raises(Unresolvable, match="cannot be read as"):
        kinds.decoder(RegisteredSchema("JSON", "{}"), RegisteredSchema("PROTOBUF", V1))


def test_well_known_imports_the_registry_leaves_out_of_the_references() -> None:
    # google/type and google/protobuf files come from the installed modules, in both schema forms
    text = """syntax = "proto3";
package icesql.test;
import "google/type/date.proto";
import "google/protobuf/timestamp.proto";
message Booking { google.type.Date day = 1; google.protobuf.Timestamp at = 2; }
"""
    Booking = classes(text).Booking
    b = Booking()
    b.day.year, b.day.month, b.day.day = 2024, 2, 29
    writer, bodies = produce([b])
    assert writer.referenced == ()  # the serializer skips known types
    for schema in (writer, RegisteredSchema("PROTOBUF", text)):
        batch, bad = decode(schema, bodies)
        assert (batch.to_pylist(), bad) == ([{"day": {"year": 2024, "month": 2, "day": 29}, "at": None}], [])
