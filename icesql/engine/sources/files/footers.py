"""The schema Spark 4 infers for a directory of Parquet files (``spark.read.option('mergeSchema',
'true').parquet(dir).schema``), worked out from the files' footers alone, so a source without a
SCHEMA needs no Spark to learn its columns (issue 54).

Spark's rules, each checked against Spark itself (``tests/engine/test_parquet_footers.py``):

* a file's columns come from its Parquet schema, never from the Arrow schema pyarrow stores beside
  it (a dictionary, ``large_string`` or a time zone name there changes nothing): INT32/INT64 by
  their integer annotation (``INT(8)`` -> byte, ``INT(16)`` -> short, unsigned ones one size up:
  ``UINT8`` -> short, ``UINT16`` -> int, ``UINT32`` -> long, ``UINT64`` -> decimal(20,0)); a
  DECIMAL of any physical type -> decimal(p,s) (more than 38 digits: an error); DATE; TIMESTAMP of
  millis or micros -> timestamp when adjusted to UTC, else timestamp_ntz
  (``spark.sql.parquet.inferTimestampNTZ.enabled``, on by default); INT96 -> timestamp; STRING,
  ENUM and JSON -> string; BSON and unannotated byte arrays (fixed or not) -> binary; the NULL
  annotation (pyarrow's all-None column) -> int. TIME, nanosecond timestamps, FLOAT16 and INTERVAL
  are refused, as Spark refuses them. Field ids and the writer's ``required`` are ignored: a
  file source's schema is nullable throughout (Spark's ``asNullable``), down to array elements
  and map values.
* a directory's files are merged in the order of their full paths (Spark sorts the listing),
  case-insensitively, the first spelling of a name kept: columns in first-seen order, a struct's
  fields likewise, decimals of one scale to the larger precision; any other pair of different
  types (int and bigint, float and double, timestamp and timestamp_ntz, ...) is Spark's
  ``CANNOT_MERGE_SCHEMAS`` (``MergeError``; ``files.relation`` widens where Iceberg allows).

A type no rule above covers raises ``types.Unsupported``: the source is read by Spark's own reader.

ORC (``orc_footer``; not a FILES format yet): the file's footer protobuf is read here (pyarrow
leaves out ORC's type attributes), each ORC kind as Spark's ORC reader maps it (``varchar`` and
``char`` -> string, ``timestamp`` and ``timestamp with local time zone`` -> timestamp, a ``long``
Spark marks ``spark.sql.catalyst.type = timestamp_ntz`` -> timestamp_ntz), nullable throughout;
checked against Spark in ``tests/engine/test_orc_footers.py``. Spark's ORC reader takes a
directory's schema from one file (the first its listing gives) unless asked to merge them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from icesql.engine.sources.types import Unsupported

JsonType = Any  # a Spark data type as StructType.jsonValue() writes it: "long", {"type": "struct", ...}

MAX_PRECISION = 38  # Spark's DecimalType.MAX_PRECISION


class MergeError(Exception):
    """Spark would refuse these files: a type it cannot read, or two files it cannot merge. The
    message is worded as Spark's own (its error class first)."""


# --------------------------------------------------------------------------- one file


SPARK_METADATA_KEY = b"org.apache.spark.sql.parquet.row.metadata"


def parquet_file_schema(footer: Any) -> dict[str, Any]:
    """The Spark StructType JSON Spark reads one file as, from its footer (a
    ``pyarrow.parquet.FileMetaData``)."""
    import json

    stored = (footer.metadata or {}).get(SPARK_METADATA_KEY)
    if stored is not None:
        # a file Spark wrote carries Spark's schema, which Spark reads instead of the Parquet one
        # (ParquetUtils.readSchemaFromFooter): types, names and field metadata as Spark wrote them
        try:
            spark_schema = json.loads(stored)
        except ValueError:
            spark_schema = None
        if isinstance(spark_schema, dict) and spark_schema.get("type") == "struct":
            return as_nullable(spark_schema)
    schema = footer.schema  # the Parquet schema: its leaves carry the physical and logical types
    leaves = iter([schema.column(i) for i in range(len(schema))])
    # Arrow's reading of the groups (structs, lists with Parquet's backward-compatible shapes,
    # maps) gives the nesting; each leaf's type is Spark's, from the leaf itself
    fields = [_field(f.name, f.type, leaves) for f in schema.to_arrow_schema()]
    if next(leaves, None) is not None:  # pragma: no cover - an Arrow type that is not one column per leaf
        raise Unsupported("a Parquet schema whose Arrow shape does not match its columns")
    return {"type": "struct", "fields": fields}


def as_nullable(t: JsonType) -> JsonType:
    """``t`` with every field, element and value nullable (Spark's ``DataType.asNullable``)."""
    if not isinstance(t, dict):
        return t
    if t["type"] == "struct":
        return {**t, "fields": [{**f, "type": as_nullable(f["type"]), "nullable": True} for f in t["fields"]]}
    if t["type"] == "array":
        return {**t, "elementType": as_nullable(t["elementType"]), "containsNull": True}
    if t["type"] == "map":
        return {
            **t,
            "keyType": as_nullable(t["keyType"]),
            "valueType": as_nullable(t["valueType"]),
            "valueContainsNull": True,
        }
    return t


def _field(name: str, arrow_type: Any, leaves: Iterator[Any]) -> dict[str, Any]:
    return {"name": name, "type": _type(arrow_type, leaves), "nullable": True, "metadata": {}}


def _type(t: Any, leaves: Iterator[Any]) -> JsonType:
    """Arrow's shape of a Parquet group (struct, list, map), Spark's type of each leaf."""
    import pyarrow as pa

    if pa.types.is_struct(t):
        return {
            "type": "struct",
            "fields": [_field(t.field(i).name, t.field(i).type, leaves) for i in range(t.num_fields)],
        }
    if pa.types.is_map(t):
        key = _type(t.key_type, leaves)
        value = _type(t.item_type, leaves)
        return {"type": "map", "keyType": key, "valueType": value, "valueContainsNull": True}
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    ):
        return {"type": "array", "elementType": _type(t.value_type, leaves), "containsNull": True}
    if isinstance(t, pa.ExtensionType) and _is_nested(t.storage_type):
        return _type(t.storage_type, leaves)
    column = next(leaves, None)
    if column is None:  # pragma: no cover - see parquet_file_schema
        raise Unsupported("a Parquet schema whose Arrow shape does not match its columns")
    return leaf_type(column)


def _is_nested(t: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_nested(t))


def leaf_type(column: Any) -> JsonType:
    """Spark's type of a Parquet leaf column (a ``pyarrow.parquet.ColumnSchema``): Spark 4's
    ``ParquetToSparkSchemaConverter`` with its default settings."""
    import json

    physical = column.physical_type
    logical = json.loads(column.logical_type.to_json())
    kind = logical.get("Type", "None")

    def illegal() -> MergeError:
        what = f"{physical} ({kind.upper()}{_logical_detail(logical)})"
        return MergeError(f"[PARQUET_TYPE_ILLEGAL] Illegal Parquet type: {what}. SQLSTATE: 42846")

    if kind == "Decimal":
        precision, scale = int(logical["precision"]), int(logical["scale"])
        if precision > MAX_PRECISION:
            raise MergeError(
                f"[DECIMAL_PRECISION_EXCEEDS_MAX_PRECISION] Decimal precision {precision} exceeds max "
                f"precision {MAX_PRECISION}. SQLSTATE: 22003"
            )
        return f"decimal({precision},{scale})"
    if physical == "BOOLEAN" and kind == "None":
        return "boolean"
    if physical == "FLOAT" and kind == "None":
        return "float"
    if physical == "DOUBLE" and kind == "None":
        return "double"
    if physical == "INT96" and kind == "None":
        return "timestamp"  # spark.sql.parquet.int96AsTimestamp
    if physical == "INT32":
        if kind == "None":
            return "integer"
        if kind == "Null":
            return "integer"  # what Spark makes of a column that is None in every row
        if kind == "Date":
            return "date"
        if kind == "Int":
            return _INT32[(int(logical["bitWidth"]), bool(logical["isSigned"]))]
        raise illegal()
    if physical == "INT64":
        if kind == "None":
            return "long"
        if kind == "Int" and int(logical["bitWidth"]) == 64:
            return "long" if logical["isSigned"] else "decimal(20,0)"
        if kind == "Timestamp" and logical["timeUnit"] in ("milliseconds", "microseconds"):
            return "timestamp" if logical["isAdjustedToUTC"] else "timestamp_ntz"
        if kind == "Time":
            raise MergeError("[UNSUPPORTED_TIME_TYPE] The data type TIME is not supported. SQLSTATE: 0A000")
        raise illegal()
    if physical == "BYTE_ARRAY":
        if kind in ("String", "Enum", "JSON"):
            return "string"
        if kind in ("None", "BSON"):
            return "binary"  # spark.sql.parquet.binaryAsString is off
        raise illegal()
    if physical == "FIXED_LEN_BYTE_ARRAY":
        if kind == "None":
            return "binary"
        if kind == "Interval":
            raise MergeError(
                "[PARQUET_TYPE_NOT_SUPPORTED] Parquet type not yet supported: "
                "FIXED_LEN_BYTE_ARRAY (INTERVAL). SQLSTATE: 42846"
            )
        raise illegal()
    raise Unsupported(f"Parquet type {physical} ({kind})")


_INT32 = {
    (8, True): "byte",
    (16, True): "short",
    (32, True): "integer",
    (8, False): "short",
    (16, False): "integer",
    (32, False): "long",
}


def _logical_detail(logical: Mapping[str, Any]) -> str:
    unit = {"milliseconds": "MILLIS", "microseconds": "MICROS", "nanoseconds": "NANOS"}.get(
        str(logical.get("timeUnit")), ""
    )
    if not unit:
        return ""
    return f"({unit},{str(bool(logical.get('isAdjustedToUTC'))).lower()})"


# --------------------------------------------------------------------------- a directory


def merged_schema(schemas: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """Spark's ``StructType.merge`` of the files' schemas, in the order given (Spark's: by full
    path); None for no file (Spark: "Unable to infer schema")."""
    merged: dict[str, Any] | None = None
    for schema in schemas:
        if merged is None:
            merged = schema
            continue
        try:
            merged = _merge(merged, schema)
        except _Incompatible:
            raise MergeError(
                f'[CANNOT_MERGE_SCHEMAS] Failed merging schemas: Initial schema: "{sql_of(merged)}" '
                f'Schema that cannot be merged with the initial schema: "{sql_of(schema)}". SQLSTATE: 42KD9'
            ) from None
    return merged


class _Incompatible(Exception):
    pass


def _merge(left: JsonType, right: JsonType) -> JsonType:
    if left == right:
        return left
    if isinstance(left, dict) and isinstance(right, dict) and left["type"] == right["type"]:
        if left["type"] == "struct":
            fields = [dict(f) for f in left["fields"]]
            at = {f["name"].lower(): i for i, f in enumerate(fields)}
            for f in right["fields"]:
                i = at.get(f["name"].lower())
                if i is None:
                    at[f["name"].lower()] = len(fields)
                    fields.append(f)
                else:
                    fields[i]["type"] = _merge(fields[i]["type"], f["type"])
            return {"type": "struct", "fields": fields}
        if left["type"] == "array":
            return {**left, "elementType": _merge(left["elementType"], right["elementType"])}
        if left["type"] == "map":
            return {
                **left,
                "keyType": _merge(left["keyType"], right["keyType"]),
                "valueType": _merge(left["valueType"], right["valueType"]),
            }
    decimals = _DECIMAL.fullmatch(str(left)), _DECIMAL.fullmatch(str(right))
    if decimals[0] and decimals[1] and decimals[0]["s"] == decimals[1]["s"]:
        return f"decimal({max(int(decimals[0]['p']), int(decimals[1]['p']))},{decimals[0]['s']})"
    raise _Incompatible()


_DECIMAL = re.compile(r"decimal\((?P<p>\d+),(?P<s>\d+)\)")

_SQL = {
    "boolean": "BOOLEAN",
    "byte": "TINYINT",
    "short": "SMALLINT",
    "integer": "INT",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "string": "STRING",
    "binary": "BINARY",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP_NTZ",
}
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def sql_of(t: JsonType) -> str:
    """A type as Spark's error messages write it (``DataType.sql``): ``STRUCT<x: BIGINT>``."""
    if isinstance(t, str):
        return _SQL.get(t) or t.upper()
    if t["type"] == "struct":
        fields = ", ".join(
            f"{f['name'] if _PLAIN_NAME.fullmatch(f['name']) else '`' + f['name'].replace('`', '``') + '`'}: "
            f"{sql_of(f['type'])}"
            for f in t["fields"]
        )
        return f"STRUCT<{fields}>"
    if t["type"] == "array":
        return f"ARRAY<{sql_of(t['elementType'])}>"
    return f"MAP<{sql_of(t['keyType'])}, {sql_of(t['valueType'])}>"


def parquet_directory_schema(footers: Sequence[tuple[str, Any]]) -> dict[str, Any] | None:
    """The schema Spark infers with ``mergeSchema`` for a directory's data files (path, footer:
    a ``pyarrow.parquet.FileMetaData``), merged in path order as Spark does; None for no file."""
    return merged_schema(parquet_file_schema(footer) for _, footer in sorted(footers, key=lambda f: f[0]))


__all__ = [
    "SPARK_METADATA_KEY",
    "MergeError",
    "as_nullable",
    "orc_file_schema",
    "orc_footer",
    "leaf_type",
    "merged_schema",
    "parquet_directory_schema",
    "parquet_file_schema",
    "sql_of",
]


# --------------------------------------------------------------------------- ORC

# ORC's type kinds (orc_proto.proto, Type.Kind)
_ORC_KINDS = {
    0: "boolean",
    1: "byte",
    2: "short",
    3: "integer",
    4: "long",
    5: "float",
    6: "double",
    7: "string",
    8: "binary",
    9: "timestamp",
    15: "date",
    16: "string",  # VARCHAR(n): Spark reads it as a string
    17: "string",  # CHAR(n) likewise
    18: "timestamp",  # TIMESTAMP_INSTANT (ORC's "timestamp with local time zone")
}
_ORC_LIST, _ORC_MAP, _ORC_STRUCT, _ORC_DECIMAL = 10, 11, 12, 14
# Spark keeps the Catalyst type ORC has no kind of in a type attribute (OrcUtils)
CATALYST_TYPE_ATTRIBUTE = "spark.sql.catalyst.type"


def orc_file_schema(tail: bytes, compression: str, footer_length: int) -> dict[str, Any]:
    """The Spark StructType JSON Spark's ORC reader gives a file, from the file's footer:
    ``tail`` is the file's last bytes (at least footer, postscript and its length byte),
    ``compression`` and ``footer_length`` as ``pyarrow.orc.ORCFile`` reports them.
    The footer's protobuf is read here because pyarrow does not expose ORC's type attributes,
    where Spark records a ``timestamp_ntz`` column (stored as ORC's ``long``)."""
    postscript_length = tail[-1]
    end = len(tail) - 1 - postscript_length
    footer = _orc_decompress(tail[end - footer_length : end], compression)
    types = [_orc_type(body) for number, body in _protobuf(footer) if number == 4]
    if not types:
        raise Unsupported("an ORC file without types")
    root = _orc_spark_type(types, 0)
    if not isinstance(root, dict) or root.get("type") != "struct":
        raise Unsupported("an ORC file whose root is not a struct")
    return as_nullable(root)


def _orc_spark_type(types: list[dict[str, Any]], at: int) -> JsonType:
    t = types[at]
    kind, subtypes = t["kind"], t["subtypes"]
    attribute = t["attributes"].get(CATALYST_TYPE_ATTRIBUTE)
    if kind == _ORC_STRUCT:
        return {
            "type": "struct",
            "fields": [
                {"name": name, "type": _orc_spark_type(types, sub), "nullable": True, "metadata": {}}
                for name, sub in zip(t["names"], subtypes, strict=True)
            ],
        }
    if kind == _ORC_LIST:
        return {"type": "array", "elementType": _orc_spark_type(types, subtypes[0]), "containsNull": True}
    if kind == _ORC_MAP:
        return {
            "type": "map",
            "keyType": _orc_spark_type(types, subtypes[0]),
            "valueType": _orc_spark_type(types, subtypes[1]),
            "valueContainsNull": True,
        }
    if kind == _ORC_DECIMAL:
        return f"decimal({t['precision']},{t['scale']})"
    if attribute == "timestamp_ntz" and kind in (4, 9):
        return "timestamp_ntz"  # Spark writes its timestamp_ntz as ORC's long, saying so here
    if attribute is not None and attribute.startswith("interval"):
        raise Unsupported(f"an ORC column Spark wrote as {attribute}")
    if kind not in _ORC_KINDS:
        raise Unsupported(f"ORC type kind {kind}")  # a union
    return _ORC_KINDS[kind]


def _orc_type(body: bytes) -> dict[str, Any]:
    t: dict[str, Any] = {
        "kind": 0,
        "subtypes": [],
        "names": [],
        "attributes": {},
        "precision": 38,
        "scale": 10,
    }
    for number, value in _protobuf(body):
        if number == 1:
            t["kind"] = value
        elif number == 2:
            t["subtypes"] += _packed(value) if isinstance(value, bytes) else [value]
        elif number == 3:
            t["names"].append(bytes(value).decode())
        elif number == 5:
            t["precision"] = value
        elif number == 6:
            t["scale"] = value
        elif number == 7:
            pair = dict(_protobuf(value))
            t["attributes"][bytes(pair.get(1, b"")).decode()] = bytes(pair.get(2, b"")).decode()
    return t


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _protobuf(data: bytes) -> Iterator[tuple[int, Any]]:
    """A protobuf message's fields, in order: (field number, int or bytes)."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            yield number, value
        elif wire == 2:
            length, at = _varint(data, at)
            yield number, data[at : at + length]
            at += length
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        else:
            raise Unsupported(f"an ORC footer with protobuf wire type {wire}")


def _packed(data: bytes) -> list[int]:
    out, at = [], 0
    while at < len(data):
        value, at = _varint(data, at)
        out.append(value)
    return out


def _orc_decompress(data: bytes, compression: str) -> bytes:
    """ORC's compressed stream: chunks behind a 3-byte header (length << 1 | original)."""
    if compression.upper() in ("NONE", "UNCOMPRESSED"):
        return data
    import zlib

    import pyarrow as pa

    out, at = bytearray(), 0
    while at < len(data):
        header = data[at] | data[at + 1] << 8 | data[at + 2] << 16
        at += 3
        length, original = header >> 1, header & 1
        chunk = data[at : at + length]
        at += length
        if original:
            out += chunk
        elif compression.upper() == "ZLIB":
            out += zlib.decompressobj(-15).decompress(chunk)
        elif compression.upper() == "ZSTD":
            out += pa.Codec("zstd").decompress(chunk, decompressed_size=_zstd_size(chunk)).to_pybytes()
        elif compression.upper() == "SNAPPY":
            size, _ = _varint(chunk, 0)  # a raw snappy block starts with its length
            out += pa.Codec("snappy").decompress(chunk, decompressed_size=size).to_pybytes()
        elif compression.upper() == "LZ4":
            size = _lz4_size(chunk)
            out += pa.Codec("lz4_raw").decompress(chunk, decompressed_size=size).to_pybytes()[:size]
        else:
            raise Unsupported(f"an ORC footer compressed with {compression}")
    return bytes(out)


def _lz4_length(block: bytes, at: int, n: int) -> tuple[int, int]:
    """An LZ4 sequence's literal or match length from its token's nibble ``n`` (15: more bytes
    follow at ``at``, added while they are 255); (the length, where reading goes on)."""
    if n == 15:
        while True:
            more = block[at]
            at += 1
            n += more
            if more != 255:
                break
    return n, at


def _lz4_size(block: bytes) -> int:
    """The decompressed size of a raw LZ4 block (ORC's LZ4 states none): its sequences walked."""
    at = size = 0
    while at < len(block):
        token = block[at]
        at += 1
        literals, at = _lz4_length(block, at, token >> 4)
        at += literals
        size += literals
        if at >= len(block):  # the last sequence holds literals only
            return size
        at += 2  # the match's offset
        match, at = _lz4_length(block, at, token & 15)
        size += match + 4
    return size


def _zstd_size(frame: bytes) -> int:
    """The content size a zstd frame's header states (ORC Java always writes it)."""
    descriptor = frame[4]
    size_flag, single = descriptor >> 6, (descriptor >> 5) & 1
    if size_flag == 0 and not single:
        raise Unsupported("a zstd frame without its size")
    at = 5 + (0 if single else 1) + (0, 1, 2, 4)[descriptor & 3]
    width = (1, 2, 4, 8)[size_flag]
    size = int.from_bytes(frame[at : at + width], "little")
    return size + 256 if width == 2 else size


def orc_footer(f: Any) -> dict[str, Any]:
    """``orc_file_schema`` of an open ORC file (a seekable binary file)."""
    import pyarrow.orc as po

    orc = po.ORCFile(f)
    tail_length = orc.file_footer_length + orc.file_postscript_length + 1
    f.seek(orc.file_length - tail_length)
    tail = f.read(tail_length)
    return orc_file_schema(tail, orc.compression, orc.file_footer_length)
