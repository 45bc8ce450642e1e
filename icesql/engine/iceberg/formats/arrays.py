"""Rebuilding Arrow columns with some leaf types changed (nested ones too): what the ORC and Avro
formats need to hand pyarrow and fastavro the physical types they take (a UUID as bytes, a time
of day as a long) and to turn what they read back into Iceberg's Arrow types."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

# A leaf conversion: the converted array, or None to keep it as it is
Leaf = Callable[[pa.Array], "pa.Array | None"]
# A field conversion: the converted field (type and metadata), or None to keep it
FieldFn = Callable[[pa.Field], "pa.Field | None"]


def _nested(t: pa.DataType) -> bool:
    return pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t)


def convert_array(arr: pa.Array, leaf: Leaf) -> pa.Array:
    """``arr`` with ``leaf`` applied to every primitive array in it."""
    t = arr.type
    if pa.types.is_struct(t):
        children = [convert_array(arr.field(i), leaf) for i in range(t.num_fields)]
        fields = [t.field(i).with_type(c.type) for i, c in enumerate(children)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_map(t):
        keys, items = convert_array(arr.keys, leaf), convert_array(arr.items, leaf)
        mtype = pa.map_(t.key_field.with_type(keys.type), t.item_field.with_type(items.type))
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=mtype, mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        values = convert_array(arr.values, leaf)
        cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        ltype = (pa.large_list if cls is pa.LargeListArray else pa.list_)(t.value_field.with_type(values.type))
        return cls.from_arrays(arr.offsets, values, type=ltype, mask=arr.is_null() if arr.null_count else None)
    out = leaf(arr)
    return arr if out is None else out


def convert_table(table: pa.Table, schema: pa.Schema, leaf: Leaf) -> pa.Table:
    """``table``'s columns with ``leaf`` applied, under ``schema`` (names and metadata)."""
    columns = []
    for col in table.columns:
        chunks = [convert_array(c, leaf) for c in col.chunks]
        columns.append(pa.chunked_array(chunks, type=chunks[0].type) if chunks else col)
    return pa.Table.from_arrays(columns, schema=schema)


def convert_field(f: pa.Field, fn: FieldFn) -> pa.Field:
    """``f`` with ``fn`` applied to itself and every field nested in it (children first)."""
    t = f.type
    if pa.types.is_struct(t):
        t = pa.struct([convert_field(t.field(i), fn) for i in range(t.num_fields)])
    elif pa.types.is_map(t):
        t = pa.map_(convert_field(t.key_field, fn), convert_field(t.item_field, fn))
    elif pa.types.is_large_list(t):
        t = pa.large_list(convert_field(t.value_field, fn))
    elif pa.types.is_list(t):
        t = pa.list_(convert_field(t.value_field, fn))
    f = f.with_type(t)
    out = fn(f)
    return f if out is None else out


def convert_schema(schema: pa.Schema, fn: FieldFn) -> pa.Schema:
    return pa.schema([convert_field(f, fn) for f in schema], metadata=schema.metadata)


def any_leaf(schema: pa.Schema, test: Callable[[pa.DataType], bool]) -> bool:
    """Whether some primitive type in ``schema`` passes ``test``."""

    def walk(t: Any) -> bool:
        if pa.types.is_struct(t):
            return any(walk(t.field(i).type) for i in range(t.num_fields))
        if pa.types.is_map(t):
            return walk(t.key_type) or walk(t.item_type)
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return walk(t.value_type)
        return test(t)

    return any(walk(f.type) for f in schema)


__all__ = ["any_leaf", "convert_array", "convert_field", "convert_schema", "convert_table"]
