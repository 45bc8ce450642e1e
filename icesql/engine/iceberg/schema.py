"""Spark ↔ Iceberg ↔ Arrow types.

Spark schemas travel as ``StructType.jsonValue()`` dicts (or their JSON text), so neither the
driver nor an executor needs a live Spark session to convert them. The conversion follows the
mapping Spark's own Iceberg integration uses:

=================  =========================
Spark              Iceberg
=================  =========================
boolean            boolean
byte, short, int   int
long               long
float, double      float, double
decimal(p, s)      decimal(p, s)
string, char/var   string
binary             binary
date               date
timestamp          timestamptz (UTC instant)
timestamp_ntz      timestamp (no zone)
time(p)            time
struct/array/map   struct/list/map (nested)
=================  =========================

KEY columns become identifier fields, which Iceberg requires to be ``required``.

Arrow helpers turn a batch Spark produced (``mapInArrow``) into the table's Arrow schema with
``PARQUET:field_id`` metadata: columns are matched by name (exactly, then case-insensitively),
optional columns the batch lacks are filled with nulls, and types are cast (int8 → int32,
timestamps to UTC microseconds, strings to large strings, ...).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyiceberg.schema import Schema, assign_fresh_schema_ids
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from icesql.errors import ExecutionError

SparkSchemaJson = Mapping[str, Any] | str

_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_CHAR = re.compile(r"^(char|varchar)\(\s*\d+\s*\)$")
_TIME = re.compile(r"^time(\(\s*\d+\s*\))?$")

_SIMPLE: dict[str, IcebergType] = {
    "boolean": BooleanType(),
    "byte": IntegerType(),
    "short": IntegerType(),
    "integer": IntegerType(),
    "int": IntegerType(),
    "long": LongType(),
    "bigint": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "string": StringType(),
    "binary": BinaryType(),
    "date": DateType(),
    "timestamp": TimestamptzType(),
    "timestamp_ltz": TimestamptzType(),
    "timestamp_ntz": TimestampType(),
}


class _Ids:
    def __init__(self) -> None:
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n


def _load(spark_schema: SparkSchemaJson) -> Mapping[str, Any]:
    data = json.loads(spark_schema) if isinstance(spark_schema, str) else spark_schema
    if not isinstance(data, Mapping) or data.get("type") != "struct":
        raise ExecutionError("a Spark schema must be a struct (StructType.jsonValue())")
    return data


def spark_type_to_iceberg(spark_type: Any, path: str = "value", ids: _Ids | None = None) -> IcebergType:
    """One Spark type (its ``jsonValue()`` form) as an Iceberg type; nested ids from ``ids``."""
    ids = ids or _Ids()
    if isinstance(spark_type, str):
        name = spark_type.strip().lower()
        if name in _SIMPLE:
            return _SIMPLE[name]
        if m := _DECIMAL.match(name):
            precision, scale = int(m.group(1)), int(m.group(2))
            if precision > 38:
                raise ExecutionError(f"column '{path}': decimal precision {precision} is above Iceberg's 38")
            return DecimalType(precision, scale)
        if name == "decimal":
            return DecimalType(10, 0)
        if _CHAR.match(name):
            return StringType()
        if _TIME.match(name):
            return TimeType()
        if name in ("void", "null"):
            raise ExecutionError(
                f"column '{path}' has type NULL (void), which Iceberg cannot store",
                hint="cast it to a concrete type in the view, e.g. CAST(NULL AS STRING)",
            )
        raise ExecutionError(f"column '{path}' has Spark type '{spark_type}', which Iceberg cannot store")
    if isinstance(spark_type, Mapping):
        kind = spark_type.get("type")
        if kind == "struct":
            return StructType(*_fields(spark_type, path, ids))
        if kind == "array":
            element_id = ids.next()
            element = spark_type_to_iceberg(spark_type["elementType"], f"{path}.element", ids)
            return ListType(element_id, element, element_required=not spark_type.get("containsNull", True))
        if kind == "map":
            key_id, value_id = ids.next(), ids.next()
            key = spark_type_to_iceberg(spark_type["keyType"], f"{path}.key", ids)
            value = spark_type_to_iceberg(spark_type["valueType"], f"{path}.value", ids)
            return MapType(
                key_id, key, value_id, value, value_required=not spark_type.get("valueContainsNull", True)
            )
        if kind == "udt" and "sqlType" in spark_type:
            return spark_type_to_iceberg(spark_type["sqlType"], path, ids)
    raise ExecutionError(f"column '{path}' has Spark type {spark_type!r}, which Iceberg cannot store")


def _fields(struct: Mapping[str, Any], prefix: str, ids: _Ids) -> list[NestedField]:
    raw = list(struct.get("fields", []))
    field_ids = [ids.next() for _ in raw]  # siblings first, then their children (Iceberg's order)
    out = []
    for fid, f in zip(field_ids, raw, strict=True):
        name = f["name"]
        path = f"{prefix}.{name}" if prefix else name
        ftype = spark_type_to_iceberg(f["type"], path, ids)
        out.append(NestedField(fid, name, ftype, required=not f.get("nullable", True)))
    return out


def spark_to_iceberg_schema(spark_schema: SparkSchemaJson, key: Sequence[str] = ()) -> Schema:
    """An Iceberg schema for a Spark schema, with fresh field ids; ``key`` columns become required
    identifier fields (matched case-insensitively, top-level primitive columns only)."""
    data = _load(spark_schema)
    fields = _fields(data, "", _Ids())
    by_lower = {f.name.lower(): f for f in fields}
    key_ids: list[int] = []
    for k in key:
        f = next((x for x in fields if x.name == k), None) or by_lower.get(k.lower())
        if f is None:
            raise ExecutionError(f"KEY column '{k}' is not a column of the source")
        if not isinstance(f.field_type, PrimitiveType) or isinstance(f.field_type, (FloatType, DoubleType)):
            raise ExecutionError(
                f"KEY column '{k}' has type {f.field_type}, which cannot be an identifier field"
            )
        key_ids.append(f.field_id)
    fields = [
        NestedField(f.field_id, f.name, f.field_type, required=True, doc=f.doc)
        if f.field_id in key_ids
        else f
        for f in fields
    ]
    schema = Schema(*fields, identifier_field_ids=key_ids)
    return assign_fresh_schema_ids(schema)


# --------------------------------------------------------------------------- compatibility


def _can_promote(source: IcebergType, target: IcebergType) -> bool:
    if source == target:
        return True
    if isinstance(source, IntegerType) and isinstance(target, LongType):
        return True
    if isinstance(source, FloatType) and isinstance(target, DoubleType):
        return True
    if isinstance(source, DecimalType) and isinstance(target, DecimalType):
        return source.scale == target.scale and source.precision <= target.precision
    if isinstance(source, StringType) and isinstance(target, UUIDType):
        return False
    if isinstance(source, BinaryType) and isinstance(target, FixedType):
        return False
    return False


def _compare(source: IcebergType, target: IcebergType, path: str, problems: list[str]) -> None:
    if isinstance(source, StructType) and isinstance(target, StructType):
        _compare_structs(source.fields, target.fields, path, problems)
    elif isinstance(source, ListType) and isinstance(target, ListType):
        _compare(source.element_type, target.element_type, f"{path}.element", problems)
    elif isinstance(source, MapType) and isinstance(target, MapType):
        _compare(source.key_type, target.key_type, f"{path}.key", problems)
        _compare(source.value_type, target.value_type, f"{path}.value", problems)
    elif not _can_promote(source, target):
        problems.append(f"column '{path}' is {source} in the source but {target} in the table")


def _compare_structs(
    source: Iterable[NestedField], target: Iterable[NestedField], prefix: str, problems: list[str]
) -> None:
    target_fields = list(target)
    matched: set[int] = set()
    for sf in source:
        tf = _match_field(sf.name, target_fields)
        path = f"{prefix}.{sf.name}" if prefix else sf.name
        if tf is None:
            problems.append(f"column '{path}' is not in the table")
            continue
        matched.add(tf.field_id)
        _compare(sf.field_type, tf.field_type, path, problems)
    for tf in target_fields:
        if tf.required and tf.field_id not in matched:
            path = f"{prefix}.{tf.name}" if prefix else tf.name
            problems.append(f"required column '{path}' of the table is missing from the source")


def _match_field(name: str, fields: Sequence[NestedField]) -> NestedField | None:
    for f in fields:
        if f.name == name:
            return f
    lower = name.lower()
    for f in fields:
        if f.name.lower() == lower:
            return f
    return None


def schema_additions(table_schema: Schema, source: Schema) -> tuple[list[tuple[tuple[str, ...], IcebergType]], list[tuple[tuple[str, ...], IcebergType]]]:
    """What additive evolution would change so that ``table_schema`` takes rows of ``source``:
    (columns to add: path and type, top-level or nested in a struct; columns to widen: path and
    the wider type, for int -> bigint, float -> double and a decimal's precision up). Anything
    else (a narrowed or changed type) is left to ``compatibility_problems``."""
    adds: list[tuple[tuple[str, ...], IcebergType]] = []
    widen: list[tuple[tuple[str, ...], IcebergType]] = []

    def walk(table_fields: Sequence[NestedField], source_fields: Sequence[NestedField], path: tuple[str, ...]) -> None:
        for sf in source_fields:
            tf = _match_field(sf.name, table_fields)
            if tf is None:
                adds.append(((*path, sf.name), sf.field_type))
            elif isinstance(tf.field_type, StructType) and isinstance(sf.field_type, StructType):
                walk(tf.field_type.fields, sf.field_type.fields, (*path, tf.name))
            elif tf.field_type != sf.field_type and _can_promote(tf.field_type, sf.field_type):
                widen.append(((*path, tf.name), sf.field_type))

    walk(table_schema.fields, source.fields, ())
    return adds, widen


def compatibility_problems(table_schema: Schema, source: Schema | SparkSchemaJson) -> list[str]:
    """Why rows of ``source`` cannot be written into a table of ``table_schema`` (empty: they can).

    Every problem names its column: a source column the table lacks, a type that cannot be
    promoted (int → long, float → double and widening a decimal's precision are fine), a
    required table column the source does not provide. Nullability of provided columns is
    checked when writing (a null in a required column fails the write naming the column).
    """
    src = source if isinstance(source, Schema) else spark_to_iceberg_schema(source)
    problems: list[str] = []
    _compare_structs(src.fields, table_schema.fields, "", problems)
    return problems


# Iceberg v3 types a table may have that icesql does not write: no Spark or source type maps to
# them (Spark 3.5 has microsecond timestamps only and no variant or geo types), and ``unknown``
# columns must not be stored in data files (the spec), which icesql's Parquet writer would do.
UNWRITABLE_TYPES = {
    "timestamp_ns": "nanosecond timestamps",
    "timestamptz_ns": "nanosecond timestamps",
    "unknown": "the unknown type (never stored in data files)",
    "variant": "variant",
    "geometry": "geometry",
    "geography": "geography",
}


def unwritable_columns(table_schema: Schema) -> list[str]:
    """The table's columns (nested ones by dotted path) whose type icesql cannot write, as
    ``"column 'path' (type)"``; empty when it can write them all."""
    out: list[str] = []

    def walk(fields: Iterable[Any], prefix: str) -> None:
        for f in fields:
            path = prefix + f.name
            kind = str(f.field_type).split("(")[0]
            if kind in UNWRITABLE_TYPES:
                out.append(f"column '{path}' ({f.field_type})")
            t = f.field_type
            if isinstance(t, StructType):
                walk(t.fields, path + ".")
            elif isinstance(t, ListType):
                walk([t.element_field], path + ".")
            elif isinstance(t, MapType):
                walk([t.key_field, t.value_field], path + ".")

    walk(table_schema.fields, "")
    return out


# --------------------------------------------------------------------------- arrow


def arrow_schema(schema: Schema) -> pa.Schema:
    """The table's Arrow schema with ``PARQUET:field_id`` metadata on every field."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    return schema_to_pyarrow(schema, include_field_ids=True)


def _find_child(struct_type: pa.StructType | pa.Schema, name: str) -> int:
    names = list(struct_type.names)
    if name in names:
        return names.index(name)
    lower = [n.lower() for n in names]
    if name.lower() in lower:
        return lower.index(name.lower())
    return -1


def _conform(array: pa.Array, target: pa.Field, path: str) -> pa.Array:
    """Cast ``array`` to ``target``'s type, matching nested struct fields by name."""
    ttype = target.type
    atype = array.type
    if isinstance(array, pa.ChunkedArray):
        return pa.chunked_array([_conform(c, target, path) for c in array.chunks], type=ttype)
    if pa.types.is_struct(ttype) and pa.types.is_struct(atype):
        children = []
        for i in range(ttype.num_fields):
            tf = ttype.field(i)
            j = _find_child(atype, tf.name)
            if j < 0:
                if not tf.nullable:
                    raise ExecutionError(f"required column '{path}.{tf.name}' is missing from the data")
                children.append(pa.nulls(len(array), type=tf.type))
            else:
                children.append(_conform(array.field(j), tf, f"{path}.{tf.name}"))
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(ttype), mask=mask)
    if (pa.types.is_list(ttype) or pa.types.is_large_list(ttype)) and (
        pa.types.is_list(atype) or pa.types.is_large_list(atype)
    ):
        if pa.types.is_struct(ttype.value_type):
            values = _conform(array.values, ttype.value_field, f"{path}.element")
            offsets = array.offsets
            if pa.types.is_large_list(ttype):
                offsets = offsets.cast(pa.int64())
                cls = pa.LargeListArray
            else:
                offsets = offsets.cast(pa.int32())
                cls = pa.ListArray
            if array.offset or len(values) != offsets[-1].as_py() - offsets[0].as_py():
                array = pa.concat_arrays([array])  # normalise slices
                return _conform(array, target, path)
            mask = array.is_null() if array.null_count else None
            return cls.from_arrays(offsets, values, type=ttype, mask=mask)
    try:
        return array.cast(ttype)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ExecutionError(f"column '{path}': cannot convert {atype} to {ttype}: {exc}") from None


def to_table_batch(batch: pa.RecordBatch | pa.Table, target: pa.Schema) -> pa.RecordBatch | pa.Table:
    """``batch`` in the table's Arrow schema (``target``, from ``arrow_schema``): columns matched
    by name, optional columns the batch lacks filled with nulls, nulls in required columns refused
    with an error naming the column."""
    columns = []
    for tf in target:
        j = _find_child(batch.schema, tf.name)
        if j < 0:
            if not tf.nullable:
                raise ExecutionError(f"required column '{tf.name}' is missing from the data")
            columns.append(pa.nulls(batch.num_rows, type=tf.type))
            continue
        col = batch.column(j)
        if not tf.nullable and col.null_count:
            raise ExecutionError(
                f"column '{tf.name}' is required (NOT NULL / KEY) but the data has {col.null_count} null value(s)"
            )
        columns.append(_conform(col, tf, tf.name))
    if isinstance(batch, pa.Table):
        return pa.Table.from_arrays(columns, schema=target)
    return pa.RecordBatch.from_arrays(columns, schema=target)


def spark_schema_json(schema: Any) -> dict[str, Any]:
    """``StructType.jsonValue()`` for a Spark StructType (or pass a dict / JSON text through)."""
    if isinstance(schema, Mapping):
        return dict(schema)
    if isinstance(schema, str):
        return dict(json.loads(schema))
    return dict(schema.jsonValue())


__all__ = [
    "arrow_schema",
    "compatibility_problems",
    "spark_schema_json",
    "spark_to_iceberg_schema",
    "spark_type_to_iceberg",
    "to_table_batch",
]
