"""The vectorized Avro writer (``engine.formats.avro_encode``): files it writes from Arrow tables
read back by fastavro as the rows written, for every type pyiceberg maps an Iceberg schema to,
nulls at every level, every codec, sliced and chunked columns and several blocks; and its
encoding byte for byte what fastavro's own writer produces.

``python tests/engine/test_avro_encode.py`` times it against fastavro on a million rows.
"""

from __future__ import annotations

import bz2
import datetime
import decimal
import io
import json
import lzma
import math
import random
import sys
import time
import uuid
import zlib
from typing import Any, cast

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

from icesql.engine.iceberg.formats.avro_encode import CODECS, AvroEncoder
from icesql.engine.iceberg.formats.avro_schema import reference_repeated_names

UTC = datetime.timezone.utc
EPOCH = datetime.datetime(1970, 1, 1)

# ---------------------------------------------------------------------------------------------
# Helpers


def write(tables: pa.Table | list[pa.Table], schema: dict[str, Any], **options: Any) -> bytes:
    buf = io.BytesIO()
    encoder = AvroEncoder(buf, schema, **options)
    for t in tables if isinstance(tables, list) else [tables]:
        encoder.write(t)
        assert buf.tell() == len(buf.getvalue())
    encoder.close()
    assert not buf.closed
    return buf.getvalue()


def varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = z = 0
    while True:
        b = data[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos


def decompress(codec: str, payload: bytes) -> bytes:
    if codec == "null":
        return payload
    if codec == "deflate":
        return zlib.decompress(payload, -15)
    if codec == "zstandard":
        from backports import zstd

        return bytes(zstd.decompress(payload))
    if codec == "snappy":
        data, crc = payload[:-4], payload[-4:]
        size = 0
        for i, b in enumerate(data[:10]):  # snappy's preamble: the uncompressed length, a varint
            size |= (b & 0x7F) << (7 * i)
            if b < 0x80:
                break
        raw = pa.Codec("snappy").decompress(data, decompressed_size=size, asbytes=True)
        assert zlib.crc32(raw).to_bytes(4, "big") == crc
        return bytes(raw)
    if codec == "bzip2":
        return bz2.decompress(payload)
    if codec == "xz":
        return lzma.decompress(payload)
    raise AssertionError(codec)


def parse(data: bytes) -> tuple[dict[str, bytes], bytes, list[tuple[int, bytes]]]:
    """A container file's metadata, sync marker and blocks (row count, uncompressed payload),
    read independently of fastavro."""
    assert data[:4] == b"Obj\x01"
    pos, meta = 4, {}
    while True:
        count, pos = varint(data, pos)
        if count == 0:
            break
        for _ in range(count):
            n, pos = varint(data, pos)
            key = data[pos : pos + n].decode()
            pos += n
            n, pos = varint(data, pos)
            meta[key] = data[pos : pos + n]
            pos += n
    sync = data[pos : pos + 16]
    pos += 16
    codec = meta["avro.codec"].decode()
    blocks = []
    while pos < len(data):
        count, pos = varint(data, pos)
        size, pos = varint(data, pos)
        blocks.append((count, decompress(codec, data[pos : pos + size])))
        pos += size
        assert data[pos : pos + 16] == sync
        pos += 16
    return meta, sync, blocks


def zigzag(v: int) -> bytes:
    z, out = (v << 1) ^ (v >> 63), bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    return bytes(out + bytes([z]))


def as_null_codec(data: bytes) -> bytes:
    """The same file with uncompressed blocks (fastavro here cannot read snappy: no cramjam)."""
    meta, sync, blocks = parse(data)
    meta["avro.codec"] = b"null"
    out = bytearray(b"Obj\x01") + zigzag(len(meta))
    for k, v in meta.items():
        out += zigzag(len(k)) + k.encode() + zigzag(len(v)) + v
    out += b"\x00" + sync
    for count, block in blocks:
        out += zigzag(count) + zigzag(len(block)) + block + sync
    return bytes(out)


def read(data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if parse(data)[0]["avro.codec"] == b"snappy":
        data = as_null_codec(data)
    reader = fastavro.reader(io.BytesIO(data))
    records = cast(list[dict[str, Any]], list(reader))
    assert isinstance(reader.writer_schema, dict)
    return reader.writer_schema, records


def norm(v: Any) -> Any:
    """A value as fastavro reads it, from what Arrow's ``to_pylist`` gives (records and map
    entries as tuples of their values in order: Avro names differ from Arrow's)."""
    if isinstance(v, dict):
        return tuple(norm(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return type(v)(norm(x) for x in v)
    if isinstance(v, uuid.UUID):
        return v.bytes
    if isinstance(v, datetime.datetime) and v.tzinfo is None:
        return v.replace(tzinfo=UTC)
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return v


def check_round_trip(table: pa.Table, schema: dict[str, Any], **options: Any) -> bytes:
    data = write(table, schema, **options)
    _, records = read(data)
    assert len(records) == table.num_rows
    expected = [norm(tuple(r.values())) for r in table.to_pylist()]
    got = [norm(tuple(r.values())) for r in records]
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g == e, f"row {i}: {g} != {e}"
    return data


def fastavro_bytes(table: pa.Table, schema: dict[str, Any], native_maps: tuple[str, ...] = ()) -> bytes:
    """The rows encoded by fastavro's ``schemaless_writer``, one after the other (the columns
    ``native_maps`` being Avro maps, given to fastavro as dicts)."""
    parsed = fastavro.parse_schema(schema)
    names = [f["name"] for f in schema["fields"]]
    buf = io.BytesIO()
    for row in table.to_pylist():
        record = dict(zip(names, (to_fastavro(v) for v in row.values()), strict=True))
        for name in native_maps:
            if record[name] is not None:
                record[name] = {e["key"]: e["value"] for e in record[name]}
        fastavro.schemaless_writer(buf, parsed, record)
    return buf.getvalue()


def to_fastavro(v: Any) -> Any:
    if isinstance(v, list):
        return [to_fastavro(x) for x in v]
    if isinstance(v, tuple):  # a map entry, the record {key, value}
        return {"key": to_fastavro(v[0]), "value": to_fastavro(v[1])}
    if isinstance(v, dict):
        return {k: to_fastavro(x) for k, x in v.items()}
    if isinstance(v, uuid.UUID):
        return v.bytes
    return v


def payload(data: bytes) -> bytes:
    return b"".join(p for _, p in parse(data)[2])


# ---------------------------------------------------------------------------------------------
# Every Iceberg type, as pyiceberg gives the Avro and the Arrow schemas

ICEBERG = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "ts", TimestampType()),
    NestedField(3, "tz", TimestamptzType()),
    NestedField(4, "d", DecimalType(10, 2)),
    NestedField(5, "u", UUIDType()),
    NestedField(6, "f", FixedType(3)),
    NestedField(7, "b", BinaryType()),
    NestedField(8, "dt", DateType()),
    NestedField(9, "t", TimeType()),
    NestedField(
        10, "s", StructType(NestedField(11, "x", StringType()), NestedField(17, "big", DecimalType(38, 5)))
    ),
    NestedField(12, "l", ListType(13, IntegerType(), element_required=True)),
    NestedField(14, "m", MapType(15, StringType(), 16, DoubleType(), value_required=True)),
    NestedField(21, "bo", BooleanType()),
    NestedField(22, "fl", FloatType()),
    NestedField(23, "i", IntegerType()),
    NestedField(20, "a-b c", StringType()),
    NestedField(24, "u2", UUIDType(), required=True),
    NestedField(25, "ls", ListType(26, StructType(NestedField(27, "y", LongType())), element_required=True)),
)
# pyiceberg defines uuid_fixed at each of its uses: a schema fastavro (and Java) refuse as it is
PYICEBERG_AVRO = cast(dict[str, Any], AvroSchemaConversion().iceberg_to_avro(ICEBERG, schema_name="row"))
AVRO: dict[str, Any] = reference_repeated_names(PYICEBERG_AVRO)
ARROW = schema_to_pyarrow(ICEBERG)

LONG_EDGES = [0, 1, -1, 63, -64, 64, -65, (1 << 63) - 1, -(1 << 63)] + [
    s * ((1 << k) + d) for k in range(6, 63, 7) for d in (-1, 0) for s in (1, -1)
]
INT_EDGES = [0, -1, 1, (1 << 31) - 1, -(1 << 31), 1 << 20, -(1 << 27)]
TEXT = ["", "a", "héllo", "日本語のテキスト", "emoji 😀", "x" * 40, "long " * 60]


def every_type_rows(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rnd = random.Random(seed)

    def maybe(v: Any, p: float = 0.25) -> Any:
        return None if rnd.random() < p else v

    rows = []
    for i in range(n):
        us = rnd.randrange(-(10**17), 10**17)
        rows.append(
            {
                "id": LONG_EDGES[i]
                if i < len(LONG_EDGES)
                else rnd.randrange(-(1 << 63), 1 << 63) >> rnd.randrange(64),
                "ts": maybe(EPOCH + datetime.timedelta(microseconds=us // 100)),
                "tz": maybe((EPOCH + datetime.timedelta(microseconds=us // 10)).replace(tzinfo=UTC)),
                "d": maybe(
                    decimal.Decimal(
                        rnd.choice([rnd.randrange(-(10**10) + 1, 10**10), 10**10 - 1, -(10**10) + 1, 0, -1])
                    ).scaleb(-2)
                ),
                "u": maybe(uuid.UUID(int=rnd.getrandbits(128))),
                "f": maybe(bytes(rnd.randrange(256) for _ in range(3))),
                "b": maybe(bytes(rnd.randrange(256) for _ in range(rnd.choice([0, 1, 5, 17, 300])))),
                "dt": maybe(
                    datetime.date(1970, 1, 1) + datetime.timedelta(days=rnd.randrange(-700000, 2900000))
                ),
                "t": maybe(
                    datetime.time(
                        rnd.randrange(24), rnd.randrange(60), rnd.randrange(60), rnd.randrange(10**6)
                    )
                ),
                "s": maybe(
                    {
                        "x": maybe(rnd.choice(TEXT)),
                        "big": maybe(decimal.Decimal(rnd.randrange(-(10**38) + 1, 10**38)).scaleb(-5)),
                    }
                ),
                "l": maybe(
                    [
                        rnd.choice(INT_EDGES + [rnd.randrange(-1000, 1000)])
                        for _ in range(rnd.choice([0, 0, 1, 3, 40]))
                    ]
                ),
                "m": maybe(
                    [
                        (rnd.choice(TEXT) + str(k), rnd.uniform(-1e9, 1e9))
                        for k in range(rnd.choice([0, 1, 2, 7]))
                    ]
                ),
                "bo": maybe(rnd.random() < 0.5),
                "fl": maybe(rnd.choice([0.0, -1.5, 3.25, float("inf"), float("-inf"), float("nan"), 1e30])),
                "i": maybe(rnd.choice(INT_EDGES)),
                "a-b c": maybe(rnd.choice(TEXT)),
                "u2": uuid.UUID(int=rnd.getrandbits(128)),
                "ls": maybe([{"y": maybe(rnd.choice(LONG_EDGES))} for _ in range(rnd.choice([0, 2, 5]))]),
            }
        )
    return rows


@pytest.fixture(scope="module")
def every_type() -> pa.Table:
    return pa.Table.from_pylist(every_type_rows(400), schema=ARROW)


@pytest.mark.parametrize("codec", CODECS)
def test_every_type_round_trips(every_type: pa.Table, codec: str) -> None:
    data = check_round_trip(every_type, AVRO, codec=codec)
    assert parse(data)[0]["avro.codec"] == codec.encode()


def test_every_type_encodes_as_fastavro_does(every_type: pa.Table) -> None:
    assert payload(write(every_type, AVRO, codec="null")) == fastavro_bytes(every_type, AVRO)


def test_all_null_and_no_null_columns() -> None:
    rows = every_type_rows(50)
    nulls = [{k: (v if k in ("id", "u2") else None) for k, v in r.items()} for r in rows]
    check_round_trip(pa.Table.from_pylist(nulls, schema=ARROW), AVRO)
    full = [r for r in rows if all(v is not None for v in r.values())]
    check_round_trip(pa.Table.from_pylist(full, schema=ARROW), AVRO)


def test_writer_schema_keeps_iceberg_attributes(every_type: pa.Table) -> None:
    data = write(every_type, AVRO, metadata={"iceberg.schema": b"{}", "note": "text"})
    meta, _, _ = parse(data)
    assert meta["avro.schema"] == json.dumps(AVRO).encode()
    assert meta["iceberg.schema"] == b"{}" and meta["note"] == b"text"
    schema, _ = read(data)
    fields = {f["name"]: f for f in schema["fields"]}
    assert [f["field-id"] for f in schema["fields"]] == [f["field-id"] for f in AVRO["fields"]]
    assert fields["a_x2Db_x20c"]["iceberg-field-name"] == "a-b c"
    assert fields["l"]["type"][1]["element-id"] == 13
    assert fields["tz"]["type"][1]["adjust-to-utc"] is True
    assert fields["m"]["type"][1]["logicalType"] == "map"


def test_named_types_defined_again(every_type: pa.Table) -> None:
    fields = {f["name"]: f for f in AVRO["fields"]}
    assert fields["u"]["type"][1]["name"] == "uuid_fixed" and fields["u2"]["type"] == "uuid_fixed"
    # the encoder takes pyiceberg's schema too, with the same bytes
    as_given = write(every_type, PYICEBERG_AVRO, codec="null")
    assert parse(as_given)[0]["avro.schema"] == json.dumps(PYICEBERG_AVRO).encode()
    assert payload(as_given) == payload(write(every_type, AVRO, codec="null"))
    maps = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "a", "type": {"type": {"type": "fixed", "name": "f", "size": 1}}},
            {"name": "b", "type": {"type": "map", "values": {"type": "fixed", "name": "f", "size": 1}}},
        ],
    }
    assert reference_repeated_names(maps)["fields"][1]["type"]["values"] == "f"
    assert reference_repeated_names(NESTED) == NESTED
    with pytest.raises(ValueError, match="differently"):
        reference_repeated_names(
            {
                **AVRO,
                "fields": [
                    *AVRO["fields"],
                    {"name": "z", "type": {"type": "fixed", "name": "uuid_fixed", "size": 3}},
                ],
            }
        )


# ---------------------------------------------------------------------------------------------
# Nulls at every level: a hand-written schema (pyiceberg 0.12 writes optional list elements and
# map values without their "null" branch), with native Avro maps, unions with null second and
# named types referred to by name


NESTED: dict[str, Any] = {
    "type": "record",
    "name": "nested",
    "namespace": "test.ns",
    "fields": [
        {"name": "k", "type": "int"},
        {"name": "li", "type": ["null", {"type": "array", "items": ["null", "long"]}], "default": None},
        {
            "name": "ls",
            "type": [
                "null",
                {
                    "type": "array",
                    "items": [
                        "null",
                        {
                            "type": "record",
                            "name": "point",
                            "fields": [
                                {"name": "x", "type": ["null", "double"]},
                                {"name": "tags", "type": ["null", {"type": "array", "items": "string"}]},
                                {"name": "h", "type": {"type": "fixed", "name": "hash4", "size": 4}},
                            ],
                        },
                    ],
                },
            ],
        },
        {"name": "p", "type": ["point", "null"]},
        {"name": "h2", "type": ["null", "test.ns.hash4"]},
        {
            "name": "mm",
            "type": ["null", {"type": "map", "values": ["null", {"type": "array", "items": "int"}]}],
        },
        {"name": "ll", "type": {"type": "array", "items": {"type": "array", "items": ["null", "string"]}}},
        {
            "name": "lm",
            "type": [
                "null",
                {
                    "type": "array",
                    "logicalType": "map",
                    "items": {
                        "type": "record",
                        "name": "kv",
                        "fields": [
                            {"name": "key", "type": "long"},
                            {"name": "value", "type": ["null", "bytes"]},
                        ],
                    },
                },
            ],
        },
        {
            "name": "e",
            "type": ["null", {"type": "enum", "name": "color", "symbols": ["RED", "GREEN", "BLUE"]}],
        },
    ],
}
POINT = pa.struct([("x", pa.float64()), ("tags", pa.list_(pa.string())), ("h", pa.binary(4))])
NESTED_ARROW = pa.schema(
    [
        ("k", pa.int32()),
        ("li", pa.large_list(pa.int64())),
        ("ls", pa.list_(POINT)),
        ("p", POINT),
        ("h2", pa.binary(4)),
        ("mm", pa.map_(pa.string(), pa.list_(pa.int32()))),
        ("ll", pa.list_(pa.list_(pa.large_string()))),
        ("lm", pa.map_(pa.int64(), pa.binary())),
        ("e", pa.string()),
    ]
)


def nested_rows(n: int, seed: int = 3) -> list[dict[str, Any]]:
    rnd = random.Random(seed)

    def maybe(v: Any, p: float = 0.3) -> Any:
        return None if rnd.random() < p else v

    def point() -> dict[str, Any]:
        tags = maybe([rnd.choice(TEXT) for _ in range(rnd.randrange(4))])
        return {
            "x": maybe(rnd.uniform(-5, 5)),
            "tags": tags,
            "h": bytes(rnd.randrange(256) for _ in range(4)),
        }

    def count() -> int:
        return rnd.choice([0, 0, 1, 2, 6])

    return [
        {
            "k": rnd.choice(INT_EDGES),
            "li": maybe([maybe(rnd.choice(LONG_EDGES)) for _ in range(count())]),
            "ls": maybe([maybe(point()) for _ in range(count())]),
            "p": maybe(point()),
            "h2": maybe(b"\x00\xff\x10\x80"),
            "mm": maybe(
                [(f"k{j}", maybe([rnd.randrange(-300, 300) for _ in range(count())])) for j in range(count())]
            ),
            "ll": [[maybe(rnd.choice(TEXT)) for _ in range(count())] for _ in range(count())],
            "lm": maybe(
                [(rnd.choice(LONG_EDGES), maybe(bytes(range(rnd.randrange(20))))) for _ in range(count())]
            ),
            "e": maybe(rnd.choice(["RED", "GREEN", "BLUE"])),
        }
        for _ in range(n)
    ]


def norm_nested(record: dict[str, Any]) -> tuple[Any, ...]:
    """A fastavro record of NESTED as ``norm`` gives an Arrow row (native maps come back as dicts)."""
    values = list(record.values())
    if values[5] is not None:
        values[5] = [(k, v) for k, v in values[5].items()]
    result: tuple[Any, ...] = norm(tuple(values))
    return result


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy"])
def test_nulls_at_every_level(codec: str) -> None:
    table = pa.Table.from_pylist(nested_rows(500), schema=NESTED_ARROW)
    data = write(table, NESTED, codec=codec)
    _, records = read(data)
    assert [norm_nested(r) for r in records] == [norm(tuple(r.values())) for r in table.to_pylist()]
    if codec == "null":
        assert payload(data) == fastavro_bytes(table, NESTED, native_maps=("mm",))


def test_dictionary_and_view_columns() -> None:
    table = pa.Table.from_pylist(nested_rows(60), schema=NESTED_ARROW)
    e = table.column("e").combine_chunks().dictionary_encode()
    ll = table.column("ll").cast(pa.list_(pa.list_(pa.string_view())))
    changed = table.set_column(8, "e", e).set_column(6, "ll", ll)
    assert payload(write(changed, NESTED, codec="null")) == payload(write(table, NESTED, codec="null"))


# ---------------------------------------------------------------------------------------------
# Numbers: varints of every length, decimals, the Arrow types given for Avro's


FLAT = {
    "type": "record",
    "name": "flat",
    "fields": [
        {"name": "l", "type": "long", "field-id": 1},
        {"name": "i", "type": ["null", "int"], "field-id": 2},
        {"name": "s", "type": "string"},
        {
            "name": "d",
            "type": {
                "type": "fixed",
                "name": "dec",
                "size": 16,
                "logicalType": "decimal",
                "precision": 38,
                "scale": 0,
            },
        },
        {
            "name": "db",
            "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 3}],
        },
        {"name": "x", "type": "double"},
        {"name": "y", "type": ["float", "null"]},
        {"name": "b", "type": "boolean"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    ],
}


def flat_table(longs: list[int], seed: int = 1) -> pa.Table:
    rnd = random.Random(seed)
    n = len(longs)
    decimals = [
        rnd.choice([0, -1, 1, 127, 128, -128, -129, 10**37, -(10**37), rnd.randrange(-(10**38) + 1, 10**38)])
        for _ in range(n)
    ]
    scaled = [
        rnd.choice([0, 1, -1, 255, -256, 10**19, -(10**19) + 1, rnd.randrange(-(10**17), 10**17)])
        for _ in range(n)
    ]
    return pa.table(
        {
            "l": pa.array(longs, pa.int64()),
            "i": pa.array([rnd.choice(INT_EDGES + [None]) for _ in range(n)], pa.int32()),
            "s": pa.array([rnd.choice(TEXT) for _ in range(n)], pa.large_string()),
            "d": pa.array([decimal.Decimal(v) for v in decimals], pa.decimal128(38, 0)),
            "db": pa.array(
                [rnd.choice([decimal.Decimal(v).scaleb(-3), None]) for v in scaled], pa.decimal128(20, 3)
            ),
            "x": pa.array([rnd.choice([0.0, -0.0, 1e-300, -2.5, 1e308]) for _ in range(n)], pa.float64()),
            "y": pa.array([rnd.choice([None, 1.5, -3.0]) for _ in range(n)], pa.float32()),
            "b": pa.array([rnd.random() < 0.5 for _ in range(n)]),
            "ts": pa.array([rnd.randrange(-(10**16), 10**16) for _ in range(n)], pa.timestamp("us")),
        }
    )


def test_varints_of_every_length_match_fastavro() -> None:
    longs = LONG_EDGES + [v + d for v in LONG_EDGES for d in (-1, 1) if -(1 << 63) <= v + d < (1 << 63)]
    table = flat_table(longs)
    data = check_round_trip(table, FLAT)
    assert payload(write(table, FLAT, codec="null")) == fastavro_bytes(table, FLAT)
    # columns of a single length (the one-copy paths) as well as mixed ones
    for v in (0, 100, 10_000, -(1 << 40), 1 << 62, -(1 << 63)):
        uniform = flat_table([v] * 50)
        assert payload(write(uniform, FLAT, codec="null")) == fastavro_bytes(uniform, FLAT)
    assert data


@pytest.mark.parametrize("lengths", [(0, 0), (1, 1), (7, 7), (0, 3), (0, 20), (5, 16), (0, 5000)])
def test_strings_of_every_length(lengths: tuple[int, int]) -> None:
    rnd = random.Random(lengths[1])
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "a", "type": "string"},
            {"name": "b", "type": ["null", "bytes"]},
            {"name": "c", "type": {"type": "array", "items": "string"}},
        ],
    }

    def text() -> str:
        alphabet = "a" if lengths == (1, 1) else "aé日😀"  # (1, 1): one byte each
        return "".join(rnd.choice(alphabet) for _ in range(rnd.randint(*lengths)))

    n = 300
    table = pa.table(
        {
            "a": pa.array(["", *(text() for _ in range(n - 2)), ""], pa.string()),
            "b": pa.array(
                [None if rnd.random() < 0.2 else text().encode() for _ in range(n)], pa.large_binary()
            ),
            "c": pa.array(
                [[text() for _ in range(rnd.randrange(4))] for _ in range(n)], pa.list_(pa.string())
            ),
        }
    )
    for part in (table, table.slice(1), table.slice(17, 100)):
        assert payload(write(part, schema, codec="null")) == fastavro_bytes(part, schema)


def test_arrow_types_converted_to_the_avro_ones() -> None:
    table = flat_table(list(range(-50, 50)))
    other = table.set_column(0, "l", table.column("l").cast(pa.int16()))
    other = other.set_column(5, "x", other.column("x").cast(pa.float32()).cast(pa.float64()))
    whole_ms = pa.array([v * 1000 for v in range(-50, 50)], pa.timestamp("us"))
    other = other.set_column(8, "ts", whole_ms)
    ms = other.set_column(8, "ts", other.column("ts").cast(pa.timestamp("ms")))
    assert payload(write(ms, FLAT, codec="null")) == payload(write(other, FLAT, codec="null"))
    check_round_trip(other, FLAT)


def test_other_arrow_inputs() -> None:
    """Arrow types other than pyiceberg's, for the Avro types they can hold."""
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "fl", "type": {"type": "array", "items": "long"}},
            {
                "name": "d16",
                "type": {
                    "type": "fixed",
                    "name": "d16",
                    "size": 16,
                    "logicalType": "decimal",
                    "precision": 38,
                    "scale": 2,
                },
            },
            {
                "name": "d3",
                "type": {
                    "type": "fixed",
                    "name": "d3",
                    "size": 3,
                    "logicalType": "decimal",
                    "precision": 5,
                    "scale": 1,
                },
            },
            {"name": "fb", "type": {"type": "fixed", "name": "f2", "size": 2}},
            {"name": "dt", "type": {"type": "int", "logicalType": "date"}},
            {"name": "t", "type": {"type": "long", "logicalType": "time-micros"}},
            {"name": "u", "type": "long"},
            {"name": "bs", "type": "bytes"},
            {"name": "x", "type": "double"},
            {"name": "y", "type": "float"},
            {"name": "ds", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
            {"name": "e", "type": {"type": "enum", "name": "e", "symbols": ["A", "B", "C"]}},
            {"name": "us", "type": {"type": "string", "logicalType": "uuid"}},
        ],
    }
    uuids = [uuid.UUID(int=0), uuid.UUID(int=(1 << 128) - 1), uuid.uuid4(), uuid.uuid4()]
    decimals = [decimal.Decimal(v) for v in ("-1.00", "0.00", "123456.78", "-99999999.99")]
    given = pa.table(
        {
            "fl": pa.array([[1, -2], [3, 4], [0, 0], [-(1 << 30), 1 << 30]], pa.list_(pa.int32(), 2)),
            "d16": pa.array(decimals, pa.decimal64(10, 2)),
            "d3": pa.array(
                [decimal.Decimal(v) for v in ("-1.5", "0", "8388.6", "-8388.6")], pa.decimal32(5, 1)
            ),
            "fb": pa.array([b"ab", b"\x00\x01", b"zz", b"\xff\xfe"], pa.binary()),
            "dt": pa.array([0, 86400000, -86400000 * 365, 86400000 * 20000], pa.date64()),
            "t": pa.array([0, 1000, 86399999, 5], pa.time32("ms")),
            "u": pa.array([0, 1, 2**32, 2**62], pa.uint64()),
            "bs": pa.array([b"ab", b"\x00\x01", b"zz", b"\xff\xfe"], pa.binary(2)),
            "x": pa.array([1.5, -2.25, 0.0, 1e30], pa.float32()),
            "y": pa.array([1.5, -2.25, 0.0, 3.0], pa.float64()),
            "ds": pa.array(decimals, pa.decimal128(10, 2)),  # rescaled to 3 digits
            "e": pa.array([2, 0, 1, 2], pa.int8()),  # enum indexes
            "us": pa.array(uuids, pa.uuid()),  # as text
        }
    )
    given = pa.concat_tables([given.slice(2, 1), given]).combine_chunks().slice(1)  # at an offset
    canonical = pa.table(
        {
            "fl": pa.array([[1, -2], [3, 4], [0, 0], [-(1 << 30), 1 << 30]], pa.list_(pa.int64())),
            "d16": pa.array(decimals, pa.decimal128(38, 2)),
            "d3": pa.array(
                [decimal.Decimal(v) for v in ("-1.5", "0", "8388.6", "-8388.6")], pa.decimal128(5, 1)
            ),
            "fb": pa.array([b"ab", b"\x00\x01", b"zz", b"\xff\xfe"], pa.binary(2)),
            "dt": pa.array([0, 1, -365, 20000], pa.int32()).cast(pa.date32()),
            "t": pa.array([0, 1000000, 86399999000, 5000], pa.time64("us")),
            "u": pa.array([0, 1, 2**32, 2**62], pa.int64()),
            "bs": pa.array([b"ab", b"\x00\x01", b"zz", b"\xff\xfe"], pa.binary()),
            "x": pa.array([1.5, -2.25, 0.0, float(np.float32(1e30))], pa.float64()),
            "y": pa.array([1.5, -2.25, 0.0, 3.0], pa.float32()),
            "ds": pa.array([d.quantize(decimal.Decimal("0.001")) for d in decimals], pa.decimal128(12, 3)),
            "e": pa.array(["C", "A", "B", "C"]),
            "us": pa.array([str(u) for u in uuids]),
        }
    )
    assert payload(write(given, schema, codec="null")) == fastavro_bytes(canonical, schema)
    batches = given.to_batches()
    assert payload(write(batches[0], schema, codec="null")) == fastavro_bytes(canonical, schema)
    with pytest.raises(ValueError, match="does not fit"):
        write(
            pa.table({"d": pa.array([decimal.Decimal("838861.0")], pa.decimal128(8, 1))}),
            {**schema, "fields": [schema["fields"][2]]},
        )


def test_sliced_and_chunked_columns(every_type: pa.Table) -> None:
    expected = every_type.slice(37, 300)
    # chunks of different sizes and a slice starting inside one
    chunked = pa.concat_tables([every_type.slice(0, 50), every_type.slice(50, 7), every_type.slice(57, 343)])
    assert chunked.column(0).num_chunks == 3
    sliced = chunked.slice(37, 300)
    assert payload(write(sliced, AVRO, codec="null")) == fastavro_bytes(expected, AVRO)
    # every column a slice of a longer array, each at its own offset
    columns = []
    for i, col in enumerate(every_type.columns):
        longer = pa.concat_arrays([col.combine_chunks().slice(0, i + 1), col.combine_chunks()])
        columns.append(longer.slice(i + 1 + 37, 300))
    offset = pa.Table.from_arrays(columns, schema=ARROW)
    assert payload(write(offset, AVRO, codec="null")) == fastavro_bytes(expected, AVRO)
    check_round_trip(sliced, AVRO, codec="zstandard")


def test_names_of_columns_do_not_matter(every_type: pa.Table) -> None:
    renamed = every_type.rename_columns([f"c{i}" for i in range(every_type.num_columns)])
    assert payload(write(renamed, AVRO, codec="null")) == payload(write(every_type, AVRO, codec="null"))


# ---------------------------------------------------------------------------------------------
# Blocks, several writes, the container


@pytest.mark.parametrize("codec", ["null", "zstandard", "deflate"])
def test_several_writes_and_blocks(every_type: pa.Table, codec: str) -> None:
    buf = io.BytesIO()
    encoder = AvroEncoder(buf, AVRO, codec=codec, block_bytes=2000)
    parts = [
        every_type.slice(0, 1),
        every_type.slice(1, 150),
        every_type.slice(151, 0),
        every_type.slice(151),
    ]
    written = 0
    for part in parts:
        encoder.write(part)
        written += part.num_rows
        # nothing buffered: the file so far is complete, with every row written
        assert buf.tell() == len(buf.getvalue())
        assert len(read(buf.getvalue())[1]) == written
    encoder.close()
    data = buf.getvalue()
    _, _, blocks = parse(data)
    assert len(blocks) > 10 and encoder.blocks_written == len(blocks)
    assert sum(c for c, _ in blocks) == every_type.num_rows == encoder.rows_written
    for count, block in blocks:
        assert len(block) <= 2000 or count == 1
    _, records = read(data)
    assert [norm(tuple(r.values())) for r in records] == [
        norm(tuple(r.values())) for r in every_type.to_pylist()
    ]


def test_a_huge_row_makes_its_own_block() -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "b", "type": "bytes"}]}
    values = [b"a", b"b" * 5000, b"c", b"d", b"e" * 3000]
    data = write(pa.table({"b": pa.array(values, pa.binary())}), schema, codec="null", block_bytes=100)
    counts = [c for c, _ in parse(data)[2]]
    assert counts == [1, 1, 2, 1]
    assert [r["b"] for r in read(data)[1]] == values


def test_empty_table_and_header() -> None:
    data = write(pa.Table.from_pylist([], schema=ARROW), AVRO, codec="deflate")
    meta, sync, blocks = parse(data)
    assert blocks == [] and data.endswith(sync) and len(sync) == 16
    buf = io.BytesIO()
    assert AvroEncoder(buf, AVRO).sync_marker == buf.getvalue()[-16:]
    assert read(data)[1] == []
    assert parse(write([], AVRO))[1] != sync  # a random marker per file


def test_deflate_level_is_used(every_type: pa.Table) -> None:
    fast = write(every_type, AVRO, codec="deflate", level=1)
    best = write(every_type, AVRO, codec="deflate", level=9)
    assert len(best) < len(fast)
    assert payload(fast) == payload(best)


def test_unknown_codec() -> None:
    with pytest.raises(ValueError, match="lz4.*null, deflate, zstandard, snappy"):
        AvroEncoder(io.BytesIO(), AVRO, codec="lz4")


def test_bad_input_is_refused() -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]}
    with pytest.raises(ValueError, match="null"):
        write(pa.table({"a": pa.array([1, None], pa.int32())}), schema)
    with pytest.raises(ValueError, match="range"):
        write(pa.table({"a": pa.array([1 << 40], pa.int64())}), schema)
    with pytest.raises(ValueError, match="2 columns"):
        write(pa.table({"a": [1], "b": [2]}), schema)
    with pytest.raises(ValueError, match="unknown Avro type"):
        AvroEncoder(io.BytesIO(), {"type": "record", "name": "r", "fields": [{"name": "a", "type": "nope"}]})
    with pytest.raises(ValueError, match="enum"):
        write(
            pa.table({"e": ["RED", "PINK"]}),
            {
                "type": "record",
                "name": "r",
                "fields": [
                    NESTED["fields"][-1] | {"type": {"type": "enum", "name": "c", "symbols": ["RED"]}}
                ],
            },
        )


# ---------------------------------------------------------------------------------------------
# Speed: python tests/engine/test_avro_encode.py [rows]


def bench_table(n: int) -> tuple[pa.Table, dict[str, Any]]:
    rng = np.random.default_rng(0)
    unscaled = rng.integers(-(10**9), 10**9, n)
    decimals = np.stack([unscaled, unscaled >> 63], axis=1)
    table = pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "ts": pa.array(1_700_000_000_000_000 + rng.integers(0, 10**12, n), pa.timestamp("us")),
            "name": pa.array([f"name-{i:05d}" for i in rng.integers(0, 10**5, n)], pa.large_string()),
            "x": pa.array(rng.standard_normal(n)),
            "amount": pa.Array.from_buffers(
                pa.decimal128(10, 2), n, [None, pa.py_buffer(decimals.tobytes())]
            ),
            "qty": pa.array(rng.integers(-1000, 1000, n).astype(np.int32), mask=rng.random(n) < 0.2),
        }
    )
    iceberg = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "ts", TimestampType()),
        NestedField(3, "name", StringType()),
        NestedField(4, "x", DoubleType()),
        NestedField(5, "amount", DecimalType(10, 2)),
        NestedField(6, "qty", IntegerType()),
    )
    return table, cast(dict[str, Any], AvroSchemaConversion().iceberg_to_avro(iceberg, schema_name="bench"))


def main(n: int) -> None:
    table, schema = bench_table(n)
    for codec in ("null", "zstandard"):
        best = math.inf
        for _ in range(3):
            buf = io.BytesIO()
            t0 = time.perf_counter()
            encoder = AvroEncoder(buf, schema, codec=codec)
            encoder.write(table)
            encoder.close()
            best = min(best, time.perf_counter() - t0)
        size = buf.tell()
        t0 = time.perf_counter()
        records = table.to_pylist()
        t1 = time.perf_counter()
        out = io.BytesIO()
        fastavro.writer(out, fastavro.parse_schema(schema), records, codec=codec)
        t2 = time.perf_counter()
        slow = t2 - t0
        print(
            f"{codec:>9}: AvroEncoder {best:.3f} s = {n / best / 1e6:.2f} M rows/s ({size / 1e6:.1f} MB); "
            f"fastavro {slow:.2f} s (to_pylist {t1 - t0:.2f} + write {t2 - t1:.2f}) = {n / slow / 1e6:.3f} M rows/s "
            f"({out.tell() / 1e6:.1f} MB): {slow / best:.0f}x"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
