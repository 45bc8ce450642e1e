"""The Schema Registry Avro decoder across schema versions (the Avro specification's resolution:
defaults, promotions, aliases, unions, enums; pairs that cannot resolve name the field), and bad
bodies reported by index instead of raised."""

from __future__ import annotations

import datetime as dt
import io
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
from tests.support.registry_avro import decode, encode, record, reg

UTC = dt.timezone.utc


# --------------------------------------------------------------------------- evolution


def test_reader_fields_missing_in_writer_take_their_defaults() -> None:
    v1 = record(("id", "long"), ("name", "string"))
    v2 = record(
        ("id", "long"),
        ("note", ["null", "string"], {"default": None}),
        ("name", "string"),
        ("count", "int", {"default": 7}),
        ("label", "string", {"default": "néant"}),
        ("raw", "bytes", {"default": "\u00ff\u0000"}),
        ("kind", {"type": "enum", "name": "K", "symbols": ["A", "B"]}, {"default": "B"}),
        ("tags", {"type": "array", "items": "string"}, {"default": ["x", "y"]}),
        ("attrs", {"type": "map", "values": "long"}, {"default": {"k": 1}}),
        ("pos", record(("x", "int"), ("y", "int", {"default": 3}), name="Pos"), {"default": {"x": 1}}),
        (
            "price",
            {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
            {"default": "\u0004\u00d2"},
        ),
        ("opt", ["long", "null"], {"default": 5}),
    )
    batch, bad = decode(v1, v2, encode(v1, [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]))
    assert bad == []
    assert batch.to_pylist()[1] == {
        "id": 2,
        "note": None,
        "name": "b",
        "count": 7,
        "label": "néant",
        "raw": b"\xff\x00",
        "kind": "B",
        "tags": ["x", "y"],
        "attrs": [("k", 1)],
        "pos": {"x": 1, "y": 3},
        "price": Decimal("12.34"),
        "opt": 5,
    }


def test_promotions_aliases_and_skipped_fields() -> None:
    writer = record(
        ("a", "int"),
        ("b", "float"),
        ("c", "int"),
        ("d", "long"),
        ("e", "string"),
        ("f", "bytes"),
        ("old_name", "string"),
        ("gone", {"type": "map", "values": {"type": "array", "items": ["null", "string"]}}),
        ("gone2", ["null", "long", record(("q", "string"), name="Q")]),
        ("wide", {"type": "bytes", "logicalType": "decimal", "precision": 60, "scale": 2}),
        ("g", "int"),
        ("h", ["null", "int"]),
    )
    reader = record(
        ("a", "long"),
        ("b", "double"),
        ("c", "double"),
        ("d", "float"),
        ("e", "bytes"),
        ("f", "string"),
        ("new_name", "string", {"aliases": ["old_name"]}),
        ("g", ["null", "long"]),
        ("h", ["null", "string", "long"]),
    )
    rows = [
        {
            "a": -(2**31),
            "b": 0.1,
            "c": 2**31 - 1,
            "d": 2**53 + 1,
            "e": "ü",
            "f": b"ok",
            "old_name": "n",
            "gone": {"k": [None, "v"]},
            "gone2": {"q": "w"},
            "wide": Decimal("1" * 50),
            "g": 3,
            "h": None,
        },
        {
            "a": 5,
            "b": math.inf,
            "c": -1,
            "d": -7,
            "e": "",
            "f": b"",
            "old_name": "",
            "gone": {},
            "gone2": 9,
            "wide": Decimal("-0.01"),
            "g": -3,
            "h": 4,
        },
    ]
    batch, bad = decode(writer, reader, encode(writer, rows))
    assert bad == []
    got = batch.to_pylist()
    assert got[0]["a"] == -(2**31) and got[0]["b"] == float(pa.scalar(0.1, pa.float32()).as_py())
    assert got[0]["c"] == 2**31 - 1
    assert [g["d"] for g in got] == pa.array([2**53 + 1, -7], pa.int64()).cast(
        pa.float32(), safe=False
    ).to_pylist()
    assert [(g["e"], g["f"], g["new_name"], g["g"]) for g in got] == [
        ("ü".encode(), "ok", "n", 3),
        (b"", "", "", -3),
    ]
    assert [g["h"] for g in got] == [None, {"member0": None, "member1": 4}]
    assert batch.schema.names == ["a", "b", "c", "d", "e", "f", "new_name", "g", "h"]


def test_union_branch_of_the_same_logical_type_is_picked() -> None:
    w = record(("v", "long"), ("t", {"type": "long", "logicalType": "timestamp-micros"}))
    ts = {"type": "long", "logicalType": "timestamp-millis"}
    r = record(("v", ["null", ts, "long"]), ("t", ["null", "long", ts]))
    batch, bad = decode(w, r, encode(w, [{"v": 5, "t": 1_000_001}]))
    assert bad == []
    assert batch.column("v").to_pylist() == [{"member0": None, "member1": 5}]
    assert batch.column("t").to_pylist() == [
        {"member0": None, "member1": dt.datetime(1970, 1, 1, 0, 0, 1, 1, tzinfo=UTC)}
    ]


def test_nested_record_and_enum_evolution() -> None:
    w = record(
        ("inner", record(("x", "int"), ("dropped", "string"), name="In")),
        ("e", {"type": "enum", "name": "E", "symbols": ["A", "B", "NEW"]}),
        ("strict", {"type": "enum", "name": "S", "symbols": ["P", "Q"]}),
    )
    r = record(
        ("inner", record(("x", "long"), ("added", "double", {"default": 1.5}), name="In")),
        ("e", {"type": "enum", "name": "E", "symbols": ["B", "A", "OTHER"], "default": "OTHER"}),
        ("strict", {"type": "enum", "name": "S", "symbols": ["P"]}),
    )
    rows = [
        {"inner": {"x": 1, "dropped": "z"}, "e": "NEW", "strict": "P"},
        {"inner": {"x": 2, "dropped": ""}, "e": "A", "strict": "Q"},
    ]
    batch, bad = decode(w, r, encode(w, rows))
    assert bad == [(1, "enum symbol not in the reader's schema")]
    assert batch.to_pylist() == [{"inner": {"x": 1, "added": 1.5}, "e": "OTHER", "strict": "P"}]


def test_nullable_writer_read_as_required_reader() -> None:
    w = record(("s", ["null", "string"]))
    r = record(("s", "string"))
    batch, bad = decode(w, r, encode(w, [{"s": "a"}, {"s": None}, {"s": "c"}]))
    assert batch.column("s").to_pylist() == ["a", "c"]
    assert bad == [(1, "null in field 's', which the reader's schema does not allow")]
    # and the other way: a required writer field read as nullable
    batch, bad = decode(r, w, encode(r, [{"s": "x"}]))
    assert bad == [] and batch.to_pylist() == [{"s": "x"}]


@pytest.mark.parametrize(
    ("writer_field", "reader_field", "message"),
    [
        (None, ("must", "string"), "field 'must' is not in the writer's schema and has no default"),
        (("v", "string"), ("v", "int"), "field 'v': string cannot be read as int"),
        (("v", "long"), ("v", "int"), "field 'v': long cannot be read as int"),
        (("v", "double"), ("v", "float"), "field 'v': double cannot be read as float"),
        (
            ("v", "long"),
            ("v", {"type": "long", "logicalType": "timestamp-micros"}),
            r"field 'v': long cannot be read as long \(timestamp-micros\)",
        ),
        (
            ("v", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}),
            ("v", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3}),
            "field 'v'",
        ),
        (
            ("v", {"type": "fixed", "name": "F", "size": 4}),
            ("v", {"type": "fixed", "name": "F", "size": 8}),
            "field 'v'",
        ),
        (("v", ["null", "string"]), ("v", ["null", "int"]), "field 'v'"),
        (
            ("v", record(("a", "int"), name="A")),
            ("v", record(("a", "int"), name="B")),
            "field 'v': record A cannot be read as record B",
        ),
        (
            ("v", record(("a", "int"), name="A")),
            ("v", record(("a", "int"), ("b", "int"), name="A")),
            "field 'v.b' is not in the writer's schema and has no default",
        ),
        (
            ("v", {"type": "array", "items": "string"}),
            ("v", {"type": "array", "items": "long"}),
            r"field 'v\[\]'",
        ),
    ],
)
def test_unresolvable_pairs_name_the_field(writer_field: Any, reader_field: Any, message: str) -> None:
    w = record(("id", "long"), *([writer_field] if writer_field else []))
    r = record(("id", "long"), reader_field)
    with pytest.raises(Unresolvable, match=message):
        AvroDecoder(reg(w), reg(r))


def test_bad_default_is_unresolvable() -> None:
    w = record(("id", "long"))
    r = record(("id", "long"), ("n", "int", {"default": "seven"}))
    with pytest.raises(Unresolvable, match="not a valid Avro schema: Default value <seven>"):
        AvroDecoder(reg(w), reg(r))


def test_kinds_route_avro_and_refuse_mixed_types() -> None:
    s = reg(record(("id", "long")))
    assert isinstance(kinds.decoder(s, s), AvroDecoder)
    with pytest.raises(Unresolvable):
        kinds.decoder(RegisteredSchema("JSON", "{}"), s)


# --------------------------------------------------------------------------- bad bodies

RICH = record(
    ("id", "long"),
    ("ts", {"type": "long", "logicalType": "timestamp-micros"}),
    ("s", "string"),
    ("n", ["null", "double"]),
    ("flag", "boolean"),
    ("price", {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}),
    ("tags", {"type": "array", "items": "string"}),
    ("m", {"type": "map", "values": "int"}),
    ("fx", {"type": "fixed", "name": "Fx", "size": 3}),
    ("e", {"type": "enum", "name": "En", "symbols": ["A", "B"]}),
    ("f", "float"),
)


def rich_rows(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": i * 7919,
            "ts": dt.datetime(2020, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=i),
            "s": f"row {i} ✓",
            "n": None if i % 3 == 0 else i / 4,
            "flag": i % 2 == 1,
            "price": Decimal(i * 101) / 100,
            "tags": ["t"] * (i % 3),
            "m": {"k": i} if i % 2 else {},
            "fx": bytes([i % 256, 1, 2]),
            "e": "AB"[i % 2],
            "f": 1.5,
        }
        for i in range(n)
    ]


def test_truncated_bodies_are_bad_by_index_and_good_rows_keep_order() -> None:
    bodies = encode(RICH, rich_rows(6))
    full = bodies[2]
    cut = [full[:k] for k in range(len(full))]  # every strict prefix, the empty body included
    mixed = [bodies[0], *cut, bodies[1], full + b"\x00", b"\xff" * 30, bodies[3]]
    batch, bad = decode(RICH, RICH, mixed)
    assert batch.column("id").to_pylist() == [0, 7919, 3 * 7919]
    assert [i for i, _ in bad] == list(range(1, len(cut) + 1)) + [len(cut) + 2, len(cut) + 3]
    assert {reason for _, reason in bad[:-2]} <= {
        "truncated",
        "bytes left after the record",
        "block count beyond the body",
    }
    assert bad[-2][1] == "bytes left after the record"


def test_garbage_never_raises_and_agrees_with_fastavro() -> None:
    parsed = fastavro.parse_schema(RICH)
    good = encode(RICH, rich_rows(20))
    rnd = random.Random(52)
    bodies: list[bytes] = []
    for _ in range(600):
        b = bytearray(rnd.choice(good))
        for _ in range(rnd.randint(1, 4)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        bodies.append(
            bytes(b) if rnd.random() < 0.8 else bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 60)))
        )
    batch, bad = decode(RICH, RICH, bodies)
    bad_rows = {i for i, _ in bad}
    assert batch.num_rows == len(bodies) - len(bad_rows)
    kept = [i for i in range(len(bodies)) if i not in bad_rows]
    for i, row in zip(kept, batch.to_pylist(), strict=True):
        buf = io.BytesIO(bodies[i])
        want = fastavro.schemaless_reader(buf, parsed, None)
        assert buf.tell() == len(bodies[i])
        assert row["id"] == want["id"] and row["s"] == want["s"] and row["price"] == want["price"]
        assert row["ts"] == want["ts"] and row["tags"] == want["tags"] and dict(row["m"]) == want["m"]
    assert all(reason and len(reason) < 80 for _, reason in bad)


def test_empty_batch() -> None:
    batch, bad = decode(RICH, RICH, [])
    assert batch.num_rows == 0 and bad == []


def test_batches_over_the_view_limit_decode_in_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    from icesql.engine.sources.registry import avro_wire

    bodies = encode(RICH, rich_rows(9))
    bodies[4] = bodies[4][:-1]
    monkeypatch.setattr(avro_wire, "MAX_BATCH_BYTES", 3 * max(map(len, bodies)))
    batch, bad = decode(RICH, RICH, bodies)
    assert [i for i, _ in bad] == [4]
    assert batch.column("id").to_pylist() == [i * 7919 for i in range(9) if i != 4]
