"""Arrow columns encoded as Avro segments, a column at a time: ints and floats, fixed and decimals,
strings, binaries and uuids, enums, records, arrays and maps, unions with null.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icesql.engine.iceberg.formats.avro_schema import (
    UNITS,
    AvroArray,
    AvroEnum,
    AvroFixed,
    AvroMap,
    AvroNode,
    AvroPrim,
    AvroRecord,
    AvroUnion,
)
from icesql.engine.iceberg.formats.avro_segments import (
    ByteSegment,
    Concat,
    Matrix,
    Ragged,
    Segment,
    Some,
    Zeros,
    materialize,
    prefixed,
    varints,
)

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def _plain(arr: pa.Array) -> pa.Array:
    """``arr`` without the wrappings that do not change its values (extension, dictionary, views)."""
    t = arr.type
    if isinstance(t, pa.BaseExtensionType):
        return _plain(arr.storage)
    if pa.types.is_dictionary(t):
        return _plain(arr.dictionary_decode())
    if pa.types.is_string_view(t):
        return arr.cast(pa.large_string())
    if pa.types.is_binary_view(t):
        return arr.cast(pa.large_binary())
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return arr.cast(pa.large_list(t.value_field))
    return arr


def _buffer(arr: pa.Array, i: int, dtype: Any, count: int, first: int) -> np.ndarray:
    """``count`` values of ``dtype`` of the array's buffer ``i``, from value ``first``."""
    buf = arr.buffers()[i]
    dt = np.dtype(dtype)
    return np.frombuffer(buf, dtype=dt, count=count, offset=first * dt.itemsize)


def _required(arr: pa.Array, path: str) -> None:
    if arr.null_count:
        raise ValueError(f"{path}: {arr.null_count} null value(s) where the Avro schema has no 'null' branch")


def _ints(arr: pa.Array, logical: str | None, path: str) -> np.ndarray:
    t = arr.type
    unit = UNITS.get(logical or "")
    if unit is not None:
        if pa.types.is_timestamp(t) and t.unit != unit:
            arr = arr.cast(pa.timestamp(unit, t.tz))
        elif pa.types.is_time(t) and t.unit != unit:
            arr = arr.cast(pa.time32(unit) if unit in ("s", "ms") else pa.time64(unit))
        elif pa.types.is_duration(t) and t.unit != unit:
            arr = arr.cast(pa.duration(unit))
    elif logical == "date" and pa.types.is_date64(t):
        arr = arr.cast(pa.date32())
    t = arr.type
    n = len(arr)
    if pa.types.is_boolean(t):
        return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)
    if pa.types.is_integer(t) or pa.types.is_temporal(t):
        width = t.bit_width // 8
        kind = "u" if pa.types.is_unsigned_integer(t) else "i"
        return _buffer(arr, 1, f"<{kind}{width}", n, arr.offset).astype(np.int64, copy=False)
    raise TypeError(f"{path}: an Arrow {t} column cannot be written as an Avro int or long")


def _floats(arr: pa.Array, kind: str, path: str) -> Segment:
    target = pa.float32() if kind == "float" else pa.float64()
    if arr.type != target:
        if not (pa.types.is_floating(arr.type) or pa.types.is_integer(arr.type)):
            raise TypeError(f"{path}: an Arrow {arr.type} column cannot be written as an Avro {kind}")
        arr = arr.cast(target)
    dtype = "<f4" if kind == "float" else "<f8"
    values = _buffer(arr, 1, dtype, len(arr), arr.offset)
    return Matrix.fixed(values.view(np.uint8).reshape(len(arr), -1))


def _big_endian(arr: pa.Array) -> np.ndarray:
    """A decimal column's unscaled values as ``(rows, bytes)`` big-endian two's complement."""
    width = arr.type.bit_width // 8
    raw = _buffer(arr, 1, np.uint8, len(arr) * width, arr.offset * width)
    return raw.reshape(len(arr), width)[:, ::-1]


def _rescaled(arr: pa.Array, scale: int) -> pa.Array:
    t = arr.type
    if t.scale == scale:
        return arr
    wide = pa.decimal128(38, scale) if t.bit_width <= 128 else pa.decimal256(76, scale)
    return arr.cast(wide)


def _fixed(node: AvroFixed, arr: pa.Array, path: str) -> Segment:
    t, n, size = arr.type, len(arr), node.size
    if pa.types.is_decimal(t):
        be = _big_endian(_rescaled(arr, node.scale))
        width = be.shape[1]
        if size <= width:
            kept = be[:, width - size :]
            if size < width:  # the bytes left out must be the sign's
                sign = np.where(kept[:, :1] >= 0x80, np.uint8(0xFF), np.uint8(0))
                if not np.array_equal(be[:, : width - size], np.broadcast_to(sign, (n, width - size))):
                    raise ValueError(f"{path}: a decimal does not fit the {size} bytes of its Avro fixed")
            return Matrix.fixed(np.ascontiguousarray(kept))
        sign = np.where(be[:, :1] >= 0x80, np.uint8(0xFF), np.uint8(0))
        return Matrix.fixed(np.hstack([np.repeat(sign, size - width, axis=1), be]))
    if pa.types.is_fixed_size_binary(t):
        if t.byte_width != size:
            raise TypeError(f"{path}: an Arrow {t} column cannot be written as an Avro fixed({size})")
        return Matrix.fixed(_buffer(arr, 1, np.uint8, n * size, arr.offset * size).reshape(n, size))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        data, offsets = _binary(arr)
        if np.any(np.diff(offsets) != size):
            raise ValueError(f"{path}: a value is not {size} bytes long, the size of its Avro fixed")
        return Matrix.fixed(data[offsets[0] : offsets[-1]].reshape(n, size))
    raise TypeError(f"{path}: an Arrow {t} column cannot be written as an Avro fixed({size})")


def _binary(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string or binary column's data buffer and its rows' offsets in it (int64)."""
    t = arr.type
    large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
    offsets = _buffer(arr, 1, "<i8" if large else "<i4", len(arr) + 1, arr.offset).astype(np.int64)
    buf = arr.buffers()[2]
    data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, dtype=np.uint8)
    return data, offsets


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


_UUID_DIGITS = np.array([i for i in range(36) if i not in (8, 13, 18, 23)])


def _uuid_text(arr: pa.Array) -> Segment:
    """16-byte UUIDs as Avro strings: their 36-character text (after the length, 36)."""
    n = len(arr)
    raw = _buffer(arr, 1, np.uint8, n * 16, arr.offset * 16).reshape(n, 16)
    m = np.full((n, 37), ord("-"), dtype=np.uint8)
    m[:, 0] = 72  # the varint of 36
    digits = np.empty((n, 32), dtype=np.uint8)
    digits[:, 0::2] = _HEX[raw >> 4]
    digits[:, 1::2] = _HEX[raw & 15]
    m[:, 1 + _UUID_DIGITS] = digits
    return Matrix.fixed(m)


def _bytes(arr: pa.Array, node: AvroPrim, path: str) -> Segment:
    t, n = arr.type, len(arr)
    if node.logical == "decimal" and pa.types.is_decimal(t):
        return _decimal_bytes(_big_endian(_rescaled(arr, node.scale)))
    if (
        node.kind == "string"
        and node.logical == "uuid"
        and pa.types.is_fixed_size_binary(t)
        and t.byte_width == 16
    ):
        return _uuid_text(arr)
    if pa.types.is_fixed_size_binary(t):
        width = t.byte_width
        data = _buffer(arr, 1, np.uint8, n * width, arr.offset * width)
        offsets = np.arange(n + 1, dtype=np.int64) * width
    elif (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        data, offsets = _binary(arr)
    else:
        raise TypeError(f"{path}: an Arrow {t} column cannot be written as Avro bytes or string")
    ragged = Ragged(data, offsets)
    return Concat([varints(ragged.lengths), ragged], n)


def _decimal_bytes(be: np.ndarray) -> Segment:
    """Decimals as Avro bytes: the shortest big-endian two's complement of each unscaled value."""
    n, width = be.shape
    sign = np.where(be[:, :1] >= 0x80, np.uint8(0xFF), np.uint8(0))
    # byte j is redundant if it is all sign and byte j + 1 has the sign's top bit
    redundant = (be[:, :-1] == sign) & ((be[:, 1:] & 0x80) == (sign & 0x80))
    skip = np.cumprod(redundant, axis=1).sum(axis=1)
    keep = np.arange(width)[None, :] >= skip[:, None]
    lengths = (width - skip).astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ragged = Ragged(np.ascontiguousarray(be)[keep], offsets)
    return Concat([varints(lengths), ragged], n)


def _enum(node: AvroEnum, arr: pa.Array, path: str) -> Segment:
    if pa.types.is_integer(arr.type):
        index = _ints(arr, None, path)
        bad = (index < 0) | (index >= len(node.symbols))
    else:
        found = pc.index_in(arr, value_set=pa.array(node.symbols, type=arr.type))
        bad = found.is_null().to_numpy(zero_copy_only=False)
        index = found.fill_null(0).to_numpy(zero_copy_only=False)
    if np.any(bad):
        raise ValueError(f"{path}: a value is not one of the Avro enum's symbols {node.symbols}")
    return varints(np.asarray(index, dtype=np.int64))


def _repeated(arr: pa.Array, path: str, elements: Callable[[pa.Array], Segment]) -> Segment:
    """An Avro array or map (one block of items, then 0) of a list or map column."""
    t, n = arr.type, len(arr)
    if pa.types.is_fixed_size_list(t):
        offsets = np.arange(n + 1, dtype=np.int64) * t.list_size + arr.offset * t.list_size
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    else:
        raise TypeError(f"{path}: an Arrow {t} column cannot be written as an Avro array or map")
    first, last = int(offsets[0]), int(offsets[-1])
    values = arr.values.slice(first, last - first)
    data, item_offsets = materialize(elements(values))
    counts = np.diff(offsets)
    items = Ragged(data, item_offsets[offsets - first])
    return Concat([varints(counts), items, Zeros((counts > 0).astype(np.int64))], n)


def encode_record(node: AvroRecord, columns: list[pa.Array], n: int, path: str) -> Segment:
    if len(columns) != len(node.fields):
        raise ValueError(
            f"{path or 'the table'}: {len(columns)} columns for the {len(node.fields)} fields "
            f"of the Avro record {node.name}"
        )
    parts = [
        encode_column(f, col, f"{path}.{name}" if path else name)
        for (name, f), col in zip(node.fields, columns, strict=True)
    ]
    return Concat(parts, n)


def encode_column(node: AvroNode, arr: pa.Array, path: str) -> Segment:
    n = len(arr)
    if n == 0:
        return Zeros(np.zeros(0, dtype=np.int64))
    arr = _plain(arr)
    if isinstance(node, AvroUnion):
        return _union(node, arr, path)
    if isinstance(node, AvroPrim) and node.kind == "null":
        if arr.null_count != n:
            raise ValueError(f"{path}: a value that is not null where the Avro schema has type 'null'")
        return Zeros(np.zeros(n, dtype=np.int64))
    _required(arr, path)
    if isinstance(node, AvroPrim):
        kind = node.kind
        if kind in ("int", "long"):
            values = _ints(arr, node.logical, path)
            if kind == "int" and (values.min() < _INT32_MIN or values.max() > _INT32_MAX):
                raise ValueError(f"{path}: a value out of the range of an Avro int")
            return varints(values)
        if kind == "boolean":
            if not pa.types.is_boolean(arr.type):
                raise TypeError(f"{path}: an Arrow {arr.type} column cannot be written as an Avro boolean")
            return Matrix.fixed(np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.uint8).reshape(n, 1))
        if kind in ("float", "double"):
            return _floats(arr, kind, path)
        return _bytes(arr, node, path)
    if isinstance(node, AvroFixed):
        return _fixed(node, arr, path)
    if isinstance(node, AvroRecord):
        if not pa.types.is_struct(arr.type):
            raise TypeError(f"{path}: an Arrow {arr.type} column cannot be written as an Avro record")
        return encode_record(node, [arr.field(i) for i in range(arr.type.num_fields)], n, path)
    if isinstance(node, AvroArray):
        items = node.items
        return _repeated(arr, path, lambda values: encode_column(items, values, path + "[]"))
    if isinstance(node, AvroMap):
        key, value = AvroPrim("string"), node.values

        def entries(values: pa.Array) -> Segment:
            values = _plain(values)
            if not pa.types.is_struct(values.type) or values.type.num_fields != 2:
                raise TypeError(f"{path}: an Arrow {arr.type} column cannot be written as an Avro map")
            parts = [
                encode_column(key, values.field(0), path + ".key"),
                encode_column(value, values.field(1), path + ".value"),
            ]
            return Concat(parts, len(values))

        return _repeated(arr, path, entries)
    if isinstance(node, AvroEnum):
        return _enum(node, arr, path)
    raise TypeError(f"{path}: unsupported Avro type {type(node).__name__}")


def _union(node: AvroUnion, arr: pa.Array, path: str) -> Segment:
    n, nulls = len(arr), arr.null_count
    ni, vi = node.null_index, node.value_index
    if vi is None:  # only null
        return encode_column(node.branches[0], arr, path) if len(node.branches) == 1 else ByteSegment(n, 2 * (ni or 0))
    if nulls == 0 or ni is None:
        return prefixed(encode_column(node.branches[vi], arr, path), 2 * vi)
    if nulls == n:
        return ByteSegment(n, 2 * ni)
    valid = arr.is_valid()
    mask = valid.to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(mask)
    inner = encode_column(node.branches[vi], _fixed_width_take(arr, rows) or arr.filter(valid), path)
    if ni == 0:  # null rows are the byte 0, what the buffer already holds
        return Some(prefixed(inner, 2 * vi), rows, n, base=1)
    branch = np.where(mask, np.uint8(2 * vi), np.uint8(2 * ni))
    return Concat([ByteSegment(n, branch), Some(inner, rows, n)], n)


def _fixed_width_take(arr: pa.Array, rows: np.ndarray) -> pa.Array | None:
    """The rows ``rows`` of a column of fixed-width values (numbers, dates and times, decimals,
    fixed binaries), without nulls; None for other columns (Arrow's filter is slower for these)."""
    t = arr.type
    if not (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_date(t)
        or pa.types.is_time(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_duration(t)
    ):
        return None
    width = t.bit_width // 8
    values = _buffer(arr, 1, np.uint8, len(arr) * width, arr.offset * width).reshape(len(arr), width)
    taken = np.take(values, rows, axis=0)
    return pa.Array.from_buffers(t, len(rows), [None, pa.py_buffer(taken)])
