"""Spark row schemas as Arrow types, and conversions that give exactly what Spark's readers give.

The Arrow path must produce the same rows as Spark's JSON, CSV and Parquet readers. Arrow's own
parsers agree with Spark's on most input but not on all (timestamps without a zone, CSV booleans
and infinities, numbers in string fields, ...), so text formats read the columns whose parsing
differs as strings, and ``convert`` turns them into the target type accepting only the spellings
for which the result is known to equal Spark's; anything else raises ``Fallback``, and the file
goes through Spark's own parser instead (``fallback``). A value Spark would reject is never
silently accepted, and a value Spark accepts is either converted identically or falls back.

Spark types travel as ``StructType.jsonValue()`` (no Spark needed on the executors).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_CHAR = re.compile(r"^(var)?char\(\s*\d+\s*\)$")

_SIMPLE: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "byte": pa.int8(),
    "short": pa.int16(),
    "integer": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}


_TIME = re.compile(r"^time(\(\s*\d+\s*\))?$")


class Fallback(Exception):
    """Arrow cannot give exactly Spark's answer for this input: let Spark's parser read the file."""


class Unsupported(Exception):
    """A type or an option the Arrow path does not handle at all: the source uses Spark's path."""


def arrow_type(spark_type: Any) -> pa.DataType:
    """The Arrow type of a Spark type (its ``jsonValue()`` form)."""
    if isinstance(spark_type, str):
        name = spark_type.strip().lower()
        if name in _SIMPLE:
            return _SIMPLE[name]
        m = _DECIMAL.match(name)
        if m:
            return pa.decimal128(int(m.group(1)), int(m.group(2)))
        if name == "decimal":
            return pa.decimal128(10, 0)
        if _CHAR.match(name):
            return pa.string()
        if _TIME.match(name):  # Spark 4.1's TIME; a routed sink's Kafka Connect Time columns
            return pa.time64("us")
        raise Unsupported(f"type {spark_type}")
    if isinstance(spark_type, Mapping):
        kind = spark_type.get("type")
        if kind == "struct":
            return pa.struct([arrow_field(f) for f in spark_type.get("fields", [])])
        if kind == "array":
            return pa.list_(pa.field("element", arrow_type(spark_type["elementType"])))
        if kind == "map":
            return pa.map_(arrow_type(spark_type["keyType"]), arrow_type(spark_type["valueType"]))
    raise Unsupported(f"type {spark_type!r}")


def arrow_field(f: Mapping[str, Any]) -> pa.Field:
    return pa.field(f["name"], arrow_type(f["type"]), nullable=bool(f.get("nullable", True)))


def arrow_schema(struct: Mapping[str, Any]) -> pa.Schema:
    """The Arrow schema of a Spark row schema (``StructType.jsonValue()``)."""
    return pa.schema([arrow_field(f) for f in struct.get("fields", [])])


# --------------------------------------------------------------------------- read types


def _contains(t: pa.DataType, pred: Any) -> bool:
    if pred(t):
        return True
    if pa.types.is_struct(t):
        return any(_contains(t.field(i).type, pred) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _contains(t.value_type, pred)
    if pa.types.is_map(t):
        return _contains(t.key_type, pred) or _contains(t.item_type, pred)
    return False


def _is_temporal(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t) or pa.types.is_date(t)


def json_read_type(t: pa.DataType) -> pa.DataType:
    """What Arrow's JSON reader is asked to produce for a column of type ``t``: dates and
    timestamps as strings (converted by ``convert``), the rest as is."""
    if _is_temporal(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, json_read_type(f.type), f.nullable) for f in t])
    if pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, json_read_type(t.value_type)))
    return t


def check_json_supported(schema: pa.Schema) -> None:
    """Maps (Arrow's JSON reader has none) and binary (Spark reads base64 text) take Spark's path."""
    for f in schema:
        if _contains(f.type, pa.types.is_map):
            raise Unsupported(f"column '{f.name}' is a map")
        if _contains(f.type, lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t)):
            raise Unsupported(f"column '{f.name}' is binary")


def check_csv_supported(schema: pa.Schema) -> None:
    for f in schema:
        if pa.types.is_nested(f.type):
            raise Unsupported(f"column '{f.name}' is nested")
        if pa.types.is_binary(f.type):
            raise Unsupported(f"column '{f.name}' is binary")


# --------------------------------------------------------------------------- conversions

# Spellings Spark's parsers give the same value for as Arrow's casts do (anything else falls back).
_INT = r"^-?[0-9]+$"
_FLOAT = r"^-?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_DECIMAL_TEXT = r"^-?([0-9]+(\.[0-9]*)?|\.[0-9]+)$"
_DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
# yyyy-MM-dd[ T]HH:mm[:ss[.f{1,9}]][zone], zone = Z | +HH | +HHMM | +HH:MM
_TIMESTAMP = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?)?"
    r"(Z|[+-][0-9]{2}(:?[0-9]{2})?)?$"
)
_ZONE = r"(Z|[+-][0-9]{2}(:?[0-9]{2})?)$"
# the spellings _normalize_timestamps leaves as they are: yyyy-MM-ddTHH:mm:ss[.f{1,6}][zone]
_CANONICAL = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}(:?[0-9]{2})?)?$"
)
_CANONICAL_ZONED = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}(:?[0-9]{2})?)$"
)


def _every(values: pa.Array, pattern: str) -> bool:
    """Whether every value (nulls aside) matches ``pattern``."""
    return bool(pc.all(pc.fill_null(pc.match_substring_regex(values, pattern), True), min_count=0).as_py())


def _all_match(values: pa.Array, pattern: str) -> None:
    if not _every(values, pattern):
        raise Fallback(f"a value does not read as {pattern}")


def _normalize_timestamps(values: pa.Array) -> tuple[pa.Array, pa.Array]:
    """ISO text Arrow's cast parses, and a mask of the values that carry their own zone."""
    # text as JSON writers spell it (date T time with seconds, at most 6 decimals) is left as is
    # by the rewrites below: one regex pass instead of six
    if _every(values, _CANONICAL_ZONED):
        return values, pc.is_valid(values)
    if _every(values, _CANONICAL):
        return values, pc.match_substring_regex(values, _ZONE)
    _all_match(values, _TIMESTAMP)
    text = pc.replace_substring_regex(values, r"^([0-9]{4}-[0-9]{2}-[0-9]{2}) ", r"\1T")
    # a date alone is midnight; a time without seconds gets them (Arrow needs HH:MM:SS)
    text = pc.replace_substring_regex(text, r"^([0-9]{4}-[0-9]{2}-[0-9]{2})$", r"\1T00:00:00")
    text = pc.replace_substring_regex(text, r"(T[0-9]{2}:[0-9]{2})(Z|[+-].*)?$", r"\1:00\2")
    # Spark keeps microseconds: digits beyond the sixth are dropped (not rounded)
    text = pc.replace_substring_regex(text, r"(\.[0-9]{6})[0-9]+", r"\1")
    zoned = pc.match_substring_regex(text, _ZONE)
    return text, zoned


def _timestamps(values: pa.Array, target: pa.DataType, session_tz: str) -> pa.Array:
    text, zoned = _normalize_timestamps(values)
    try:
        if target.tz is None:  # timestamp_ntz: a zone in the text is not Spark's spelling
            if pc.any(pc.fill_null(zoned, False), min_count=0).as_py():
                raise Fallback("a TIMESTAMP_NTZ value with a zone")
            return pc.cast(text, target)
        if pc.all(zoned, min_count=0).as_py():  # each value carries its zone (nulls aside)
            return pc.cast(text, target)
        with_zone = pc.cast(pc.if_else(zoned, text, pa.scalar(None, pa.string())), target)
        local = pc.cast(pc.if_else(zoned, pa.scalar(None, pa.string()), text), pa.timestamp("us"))
        local = pc.assume_timezone(local, session_tz, ambiguous="earliest", nonexistent="earliest")
        return pc.if_else(zoned, with_zone, pc.cast(local, target))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise Fallback(str(e)) from None


def convert(
    values: pa.Array, target: pa.DataType, *, session_tz: str = "UTC", text: bool = False
) -> pa.Array:
    """``values`` (as Arrow's reader produced them) in ``target``'s type, as Spark would read them.

    ``text``: the values are the raw text of a CSV field (every primitive arrives as a string).
    Raises ``Fallback`` when a value's spelling is not known to give Spark's result.
    """
    if isinstance(values, pa.ChunkedArray):
        chunks = [convert(c, target, session_tz=session_tz, text=text) for c in values.chunks]
        return pa.chunked_array(chunks, type=target)
    if values.type == target:
        return values
    if pa.types.is_struct(target) and pa.types.is_struct(values.type):
        # flatten: the children of this slice, with the parent's nulls (their slots may hold junk)
        by_name = dict(zip([f.name for f in values.type], values.flatten(), strict=True))
        children = [convert(by_name[f.name], f.type, session_tz=session_tz, text=text) for f in target]
        mask = values.is_null() if values.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_list(target) and pa.types.is_list(values.type):
        # flatten: only the elements of the lists present (a null list's slots may hold junk)
        inner = convert(values.flatten(), target.value_type, session_tz=session_tz, text=text)
        lengths = pc.fill_null(pc.list_value_length(values), 0).cast(pa.int32())
        offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(lengths)])
        mask = values.is_null() if values.null_count else None
        return pa.ListArray.from_arrays(offsets, inner, type=target, mask=mask)
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        return _from_text(values, target, session_tz, text)
    raise Fallback(f"{values.type} where {target} is expected")


_TRUE = ("true",)
_FALSE = ("false",)


def _from_text(values: pa.Array, target: pa.DataType, session_tz: str, csv_text: bool) -> pa.Array:
    if pa.types.is_timestamp(target):
        return _timestamps(values, target, session_tz)
    if pa.types.is_date(target):
        _all_match(values, _DATE)
        try:
            return pc.cast(values, target)
        except pa.ArrowInvalid as e:
            raise Fallback(str(e)) from None
    if not csv_text:
        raise Fallback(f"text where {target} is expected")
    try:
        if pa.types.is_integer(target):
            _all_match(values, _INT)
            return pc.cast(values, target)
        if pa.types.is_floating(target):
            _all_match(values, _FLOAT)  # NaN and the infinities are spelled differently: Spark's
            return pc.cast(values, target)
        if pa.types.is_decimal(target):
            _all_match(values, _DECIMAL_TEXT)
            return pc.cast(values, target)
        if pa.types.is_boolean(target):
            lowered = pc.utf8_lower(values)
            known = pc.or_(pc.is_in(lowered, value_set=pa.array(_TRUE + _FALSE)), pc.is_null(lowered))
            if not pc.all(known, min_count=0).as_py():
                raise Fallback("a boolean not spelled true or false")
            return pc.equal(lowered, "true")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:  # overflow, too many digits
        raise Fallback(str(e)) from None
    raise Unsupported(f"CSV column of type {target}")


__all__ = [
    "Fallback",
    "Unsupported",
    "arrow_schema",
    "arrow_type",
    "check_csv_supported",
    "check_json_supported",
    "convert",
    "json_read_type",
]
