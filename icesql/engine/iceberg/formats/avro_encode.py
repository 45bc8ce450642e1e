"""Avro object container files written straight from Arrow tables, with numpy and no Python loop
per row: what Iceberg's Avro data files need, several million rows a second where fastavro (a
Python dict per row) writes about a hundred thousand.

Every value is encoded column by column. An encoded column is a *segment*: per row, how many bytes
it takes (``lengths``) and a ``write(out, starts)`` that puts every row's bytes at its start in one
output buffer, by numpy scatters (a zigzag varint of a whole int64 column at once, floats and
fixed values as ``(rows, width)`` byte matrices, strings and binaries taken from the Arrow buffers
with per-byte destinations). A record is its fields' segments one after the other; an optional
field (the union ``["null", T]``) is a branch byte plus ``T`` encoded on the non-null rows only;
an array (and a map) encodes its elements as a record at element level, turns them into bytes,
and regroups them per row with the list offsets. The table is encoded a slice of rows at a time,
about a block's worth, so memory stays proportional to ``block_bytes``.

Supported Avro: every primitive type (with the logical types date, time-micros/millis,
timestamp-micros/millis/nanos and their local-timestamp forms, decimal on fixed and on bytes, uuid
on fixed and on string), fixed, enum, record, array, map, unions of ``null`` and one other type
(the null branch first or not), and named types referred to by their name. Not supported: unions
of two or more non-null types. Arrow input: what pyiceberg's ``schema_to_pyarrow`` gives, plus
other widths and units of the same kinds (cast or widened), dictionary and view arrays.

pyiceberg's ``iceberg_to_avro`` defines a named type again at every use (``uuid_fixed``): Avro
readers refuse that, ``reference_repeated_names`` turns the repeats into references.
"""

from __future__ import annotations

import bz2
import json
import lzma
import os
import zlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MAGIC = b"Obj\x01"
CODECS = ("null", "deflate", "zstandard", "snappy", "bzip2", "xz")

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
# The Arrow unit a temporal logical type is counted in (a column in another unit is cast to it)
_UNITS = {
    "time-millis": "ms",
    "time-micros": "us",
    "timestamp-millis": "ms",
    "timestamp-micros": "us",
    "timestamp-nanos": "ns",
    "local-timestamp-millis": "ms",
    "local-timestamp-micros": "us",
    "local-timestamp-nanos": "ns",
}
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


class Stream(Protocol):
    def write(self, data: Any, /) -> Any: ...

    def tell(self) -> int: ...


# ---------------------------------------------------------------------------------------------
# The schema, parsed once into nodes (named types resolved, so the same object for every use)


class _Node:
    __slots__ = ()


class _Prim(_Node):
    __slots__ = ("kind", "logical", "scale")

    def __init__(self, kind: str, logical: str | None = None, scale: int = 0) -> None:
        self.kind, self.logical, self.scale = kind, logical, scale


class _Fixed(_Node):
    __slots__ = ("size", "logical", "scale")

    def __init__(self, size: int, logical: str | None, scale: int) -> None:
        self.size, self.logical, self.scale = size, logical, scale


class _Enum(_Node):
    __slots__ = ("symbols",)

    def __init__(self, symbols: list[str]) -> None:
        self.symbols = symbols


class _Record(_Node):
    __slots__ = ("name", "fields")

    def __init__(self, name: str) -> None:
        self.name = name
        self.fields: list[tuple[str, _Node]] = []


class _Array(_Node):
    __slots__ = ("items",)

    def __init__(self, items: _Node) -> None:
        self.items = items


class _Map(_Node):
    __slots__ = ("values",)

    def __init__(self, values: _Node) -> None:
        self.values = values


class _Union(_Node):
    __slots__ = ("branches", "null_index", "value_index")

    def __init__(self, branches: list[_Node]) -> None:
        self.branches = branches
        nulls = [i for i, b in enumerate(branches) if isinstance(b, _Prim) and b.kind == "null"]
        values = [i for i in range(len(branches)) if i not in nulls]
        if len(branches) > 63:
            raise ValueError("Avro unions of more than 63 branches are not supported")
        self.null_index = nulls[0] if nulls else None
        self.value_index = values[0] if len(values) == 1 else None
        if len(values) > 1:
            raise NotImplementedError("Avro unions of several non-null types are not supported")


class _SchemaParser:
    def __init__(self) -> None:
        self.names: dict[str, _Node] = {}

    def parse(self, s: Any, ns: str) -> _Node:
        if isinstance(s, str):
            return _Prim(s) if s in _PRIMITIVES else self._lookup(s, ns)
        if isinstance(s, list):
            return _Union([self.parse(b, ns) for b in s])
        if not isinstance(s, dict):
            raise ValueError(f"not an Avro schema: {s!r}")
        t = s.get("type")
        if isinstance(t, (dict, list)):
            return self.parse(t, ns)
        if t in ("record", "error"):
            name, inner = self._fullname(s, ns)
            rec = _Record(name)
            self._register(name, rec)
            rec.fields = [(str(f["name"]), self.parse(f["type"], inner)) for f in s["fields"]]
            return rec
        if t == "fixed":
            name, _ = self._fullname(s, ns)
            node: _Node = _Fixed(int(s["size"]), s.get("logicalType"), int(s.get("scale", 0)))
            self._register(name, node)
            return node
        if t == "enum":
            name, _ = self._fullname(s, ns)
            node = _Enum([str(x) for x in s["symbols"]])
            self._register(name, node)
            return node
        if t == "array":
            return _Array(self.parse(s["items"], ns))
        if t == "map":
            return _Map(self.parse(s["values"], ns))
        if t in _PRIMITIVES:
            return _Prim(str(t), s.get("logicalType"), int(s.get("scale", 0)))
        if isinstance(t, str):
            return self._lookup(t, ns)
        raise ValueError(f"not an Avro schema: {s!r}")

    @staticmethod
    def _fullname(s: dict[str, Any], ns: str) -> tuple[str, str]:
        """The type's full name and the namespace its own fields' names are resolved in."""
        name = str(s["name"])
        if "." in name:
            return name, name.rsplit(".", 1)[0]
        space = s.get("namespace", ns) or ""
        return (f"{space}.{name}" if space else name), space

    def _register(self, name: str, node: _Node) -> None:
        # pyiceberg defines a named type again where it is used again (uuid_fixed, decimal_P_S):
        # the last definition is the one a later reference means
        self.names[name] = node

    def _lookup(self, name: str, ns: str) -> _Node:
        if "." not in name and ns and f"{ns}.{name}" in self.names:
            return self.names[f"{ns}.{name}"]
        if name in self.names:
            return self.names[name]
        raise ValueError(f"unknown Avro type {name!r}")


# ---------------------------------------------------------------------------------------------
# Segments: one encoded column, per row a run of bytes


class _Seg:
    __slots__ = ("lengths",)
    lengths: np.ndarray  # int64, bytes per row

    def write(self, out: np.ndarray, starts: np.ndarray) -> None:
        """Put every row's bytes in ``out`` from ``starts`` (int64 per row; not modified)."""
        raise NotImplementedError


class _Zeros(_Seg):
    """Bytes that are all 0 (a null branch, an array's end): nothing to write, ``out`` starts zeroed."""

    __slots__ = ()

    def __init__(self, lengths: np.ndarray) -> None:
        self.lengths = lengths

    def write(self, out: np.ndarray, starts: np.ndarray) -> None:
        pass


class _Byte(_Seg):
    """One byte per row: ``value`` (a constant or a uint8 per row)."""

    __slots__ = ("value",)

    def __init__(self, n: int, value: int | np.ndarray) -> None:
        self.lengths, self.value = np.ones(n, dtype=np.int64), value

    def write(self, out: np.ndarray, starts: np.ndarray) -> None:
        if not isinstance(self.value, int) or self.value:
            out[starts] = self.value


def _void(width: int) -> np.dtype:
    return np.dtype((np.void, width))


def _rows_view(a: np.ndarray, width: int) -> np.ndarray:
    """``a`` (1-d uint8, contiguous) seen as one ``width``-byte value at every byte position: a
    numpy fancy index on it moves whole runs of bytes, one index per row."""
    return np.ndarray(shape=(len(a) - width + 1,), dtype=_void(width), buffer=a, strides=(1,))


def _copy_rows(
    out: np.ndarray, starts: np.ndarray, src: np.ndarray, src_starts: np.ndarray, lengths: np.ndarray
) -> None:
    """``out[starts[i]:starts[i] + lengths[i]] = src[src_starts[i]:...]`` for every row ``i``.

    Rows of one length are one numpy assignment of that many bytes a row. Otherwise rows are
    sorted (a radix sort) into the classes ``[k, 2k)`` of lengths, ``k`` a power of two, and each
    class is two assignments of ``k`` bytes a row: the row's first ``k`` bytes and its last ``k``,
    which overlap and together cover the row, never writing outside it."""
    if len(lengths) == 0:
        return
    shortest, longest = int(lengths.min()), int(lengths.max())
    if longest == 0:
        return
    if shortest == longest:
        if longest == 1:
            out[starts] = src[src_starts]
        else:
            _rows_view(out, longest)[starts] = _rows_view(src, longest)[src_starts]
        return
    classes = np.frexp(lengths)[1].astype(np.uint8)  # 0 for 0, c for [2**(c-1), 2**c)
    order = np.argsort(classes, kind="stable")
    bounds = np.zeros(66, dtype=np.int64)
    np.cumsum(np.bincount(classes, minlength=65), out=bounds[1:])
    for c in range(1, int(classes.max()) + 1):
        a, b = bounds[c], bounds[c + 1]
        if a == b:
            continue
        rows = order[a:b]
        d, s = starts[rows], src_starts[rows]
        if c == 1:
            out[d] = src[s]
            continue
        k = 1 << (c - 1)
        to, frm = _rows_view(out, k), _rows_view(src, k)
        to[d] = frm[s]
        tail = lengths[rows] - k
        d += tail
        s += tail
        to[d] = frm[s]


class _Matrix(_Seg):
    """Short runs of bytes (fixed values, varints): row ``i``'s ``lengths[i]`` bytes are at the
    start of row ``i`` of a uint8 matrix from column ``first``."""

    __slots__ = ("matrix", "first", "shortest", "longest")

    def __init__(
        self, matrix: np.ndarray, lengths: np.ndarray, first: int = 0, span: tuple[int, int] | None = None
    ) -> None:
        self.matrix, self.lengths, self.first = matrix, lengths, first
        if span is None:
            n = len(lengths)
            span = (int(lengths.min()), int(lengths.max())) if n else (0, 0)
        self.shortest, self.longest = span

    @classmethod
    def fixed(cls, matrix: np.ndarray) -> _Matrix:
        n, width = matrix.shape
        return cls(matrix, np.full(n, width, dtype=np.int64), 0, (width, width))

    def prefixed(self, byte: int) -> _Matrix:
        """The same rows, each after ``byte``."""
        n, width = self.matrix.shape
        span = (self.shortest + 1, self.longest + 1)
        if self.first:
            self.matrix[:, self.first - 1] = byte
            return _Matrix(self.matrix, self.lengths + 1, self.first - 1, span)
        m = np.empty((n, width + 1), dtype=np.uint8)
        m[:, 0] = byte
        m[:, 1:] = self.matrix
        return _Matrix(m, self.lengths + 1, 0, span)

    @property
    def uniform(self) -> bool:
        return self.shortest == self.longest

    def joined(self, other: _Matrix) -> _Matrix:
        """This matrix's rows (all of one length) followed by ``other``'s, in one matrix (with a
        spare column first, for a prefix): one write instead of two."""
        n, w = len(self.lengths), self.longest
        m = np.empty((n, 1 + w + other.longest), dtype=np.uint8)
        m[:, 1 : 1 + w] = self.matrix[:, self.first : self.first + w]
        m[:, 1 + w :] = other.matrix[:, other.first : other.first + other.longest]
        span = (w + other.shortest, w + other.longest)
        return _Matrix(m, self.lengths + other.lengths, 1, span)

    def write(self, out: np.ndarray, starts: np.ndarray) -> None:
        m, first, lengths = self.matrix, self.first, self.lengths
        n, width = m.shape
        if self.longest == 0 or n == 0:
            return
        if self.longest <= 4:  # a byte at a time: one-byte numpy scatters are the fastest
            for k in range(self.longest):
                if k < self.shortest:
                    out[starts + k] = m[:, first + k]
                else:
                    rows = np.flatnonzero(lengths > k)
                    out[starts[rows] + k] = m[rows, first + k]
            return
        if not m.flags.c_contiguous:
            m = np.ascontiguousarray(m)
        flat = m.reshape(-1)
        if self.uniform:
            w = self.longest
            _rows_view(out, w)[starts] = np.ndarray(
                (n,), dtype=_void(w), buffer=flat, offset=first, strides=(width,)
            )
            return
        # rows grouped by length (a radix sort), one write of each length
        order = np.argsort(lengths.astype(np.uint16), kind="stable")
        bounds = np.zeros(self.longest + 2, dtype=np.int64)
        np.cumsum(np.bincount(lengths, minlength=self.longest + 1), out=bounds[1:])
        for w in range(max(1, self.shortest), self.longest + 1):
            rows = order[bounds[w] : bounds[w + 1]]
            if len(rows) == 0:
                continue
            src = rows * width + first
            if w == 1:
                out[starts[rows]] = flat[src]
            else:
                _rows_view(out, w)[starts[rows]] = _rows_view(flat, w)[src]


# The continuation bits of a varint of each length, in its first 8 bytes as a little-endian uint64
_MORE = np.array([0, 0] + [int("80" * min(k, 8), 16) for k in range(1, 10)], dtype=np.uint64)


def _varints(values: np.ndarray) -> _Matrix:
    """Avro ints and longs: zigzag varints of an int64 column (a matrix with a spare column first)."""
    v = values.astype(np.int64, copy=False)
    n = len(v)
    z = np.left_shift(v, 1).view(np.uint64)
    z ^= (v >> 63).view(np.uint64)
    if n == 0:
        return _Matrix(np.zeros((0, 8), dtype=np.uint8), np.zeros(0, dtype=np.int64), 1)
    low, top = int(z.min()), int(z.max())
    width = max(1, -(-top.bit_length() // 7))
    shortest = max(1, -(-low.bit_length() // 7))
    if shortest == width:
        lengths = np.full(n, width, dtype=np.int64)
    else:
        lengths = np.ones(n, dtype=np.int64)
        for k in range(shortest, width):
            lengths += z >= np.uint64(1 << (7 * k))
        lengths += shortest - 1
    span = (shortest, width)
    if width == 1:
        m = np.empty((n, 2), dtype=np.uint8)
        m[:, 1] = z
        return _Matrix(m, lengths, 1, span)
    # bytes 7..: a spare byte for a prefix (a union's branch), then the varint's bytes
    m = np.empty((n, 24 if width > 8 else 16), dtype=np.uint8)
    packed = z & np.uint64(0x7F)
    part = np.empty_like(z)
    for k in range(1, min(width, 8)):
        np.left_shift(z, np.uint64(k), out=part)
        part &= np.uint64(0x7F << (8 * k))
        packed |= part
    packed |= _MORE[width] if shortest == width else _MORE[lengths]
    m.view("<u8")[:, 1] = packed
    if width > 8:
        m[:, 16] = ((z >> np.uint64(56)) & np.uint64(0x7F)).astype(np.uint8) | (
            (lengths > 9).view(np.uint8) << 7
        )
        m[:, 17] = (z >> np.uint64(63)).astype(np.uint8)
    return _Matrix(m, lengths, 8, span)


class _Ragged(_Seg):
    """A run of bytes per row, row ``i`` being ``data[offsets[i]:offsets[i + 1]]``."""

    __slots__ = ("data", "offsets")

    def __init__(self, data: np.ndarray, offsets: np.ndarray) -> None:
        self.data, self.offsets = data, offsets
        self.lengths = np.diff(offsets)

    def write(self, out: np.ndarray, starts: np.ndarray) -> None:
        o, lengths = self.offsets, self.lengths
        n = len(lengths)
        total = int(o[-1] - o[0]) if n else 0
        if total == 0:
            return
        if total > 12 * n or lengths.min() == lengths.max():
            _copy_rows(out, starts, self.data, o[:-1], lengths)
            return
        # short rows: a destination for every byte, by a cumulative sum of the steps between them
        rows = np.flatnonzero(lengths)
        to, length = starts[rows], lengths[rows]
        step = np.ones(total, dtype=np.int64)
        step[0] = to[0]
        step[o[rows[1:]] - o[0]] = to[1:] - to[:-1] - length[:-1] + 1
        out[np.cumsum(step, out=step)] = self.data[o[0] : o[-1]]


class _Seq(_Seg):
    """Segments one after the other in every row."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[_Seg], n: int, lengths: np.ndarray | None = None) -> None:
        # nested sequences flattened, and runs of matrices of one length a row joined
        self.parts: list[_Seg] = []
        for p in parts:
            for q in p.parts if isinstance(p, _Seq) else [p]:
                last = self.parts[-1] if self.parts else None
                if isinstance(q, _Matrix) and isinstance(last, _Matrix) and last.uniform and q.uniform:
                    self.parts[-1] = last.joined(q)
                else:
                    self.parts.append(q)
        if lengths is None:
            lengths = np.zeros(n, dtype=np.int64)
            for p in parts:
                lengths += p.lengths
        self.lengths = lengths

    def write(self, out: np.ndarray, starts: np.ndarray) -> None:
        at = starts
        for i, p in enumerate(self.parts):
            p.write(out, at)
            if i + 1 < len(self.parts):
                at = at + p.lengths


class _Some(_Seg):
    """A segment of some of the rows (``rows``, ascending); the others have ``base`` zero bytes."""

    __slots__ = ("inner", "rows")

    def __init__(self, inner: _Seg, rows: np.ndarray, n: int, base: int = 0) -> None:
        self.inner, self.rows = inner, rows
        self.lengths = np.full(n, base, dtype=np.int64)
        self.lengths[rows] = inner.lengths

    def write(self, out: np.ndarray, starts: np.ndarray) -> None:
        self.inner.write(out, starts[self.rows])


def _prefixed(seg: _Seg, byte: int) -> _Seg:
    """``seg`` with ``byte`` before every row, in its first matrix where there is one."""
    if isinstance(seg, _Matrix):
        return seg.prefixed(byte)
    if isinstance(seg, _Seq) and seg.parts:
        return _Seq([_prefixed(seg.parts[0], byte), *seg.parts[1:]], 0, seg.lengths + 1)
    n = len(seg.lengths)
    return _Seq([_Byte(n, byte), seg], n, seg.lengths + 1)


def _materialize(seg: _Seg) -> tuple[np.ndarray, np.ndarray]:
    """The segment's bytes and per-row offsets (int64, one more than rows)."""
    offsets = np.zeros(len(seg.lengths) + 1, dtype=np.int64)
    np.cumsum(seg.lengths, out=offsets[1:])
    out = np.zeros(int(offsets[-1]), dtype=np.uint8)
    seg.write(out, offsets[:-1])
    return out, offsets


# ---------------------------------------------------------------------------------------------
# Arrow columns to segments


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
    unit = _UNITS.get(logical or "")
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


def _floats(arr: pa.Array, kind: str, path: str) -> _Seg:
    target = pa.float32() if kind == "float" else pa.float64()
    if arr.type != target:
        if not (pa.types.is_floating(arr.type) or pa.types.is_integer(arr.type)):
            raise TypeError(f"{path}: an Arrow {arr.type} column cannot be written as an Avro {kind}")
        arr = arr.cast(target)
    dtype = "<f4" if kind == "float" else "<f8"
    values = _buffer(arr, 1, dtype, len(arr), arr.offset)
    return _Matrix.fixed(values.view(np.uint8).reshape(len(arr), -1))


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


def _fixed(node: _Fixed, arr: pa.Array, path: str) -> _Seg:
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
            return _Matrix.fixed(np.ascontiguousarray(kept))
        sign = np.where(be[:, :1] >= 0x80, np.uint8(0xFF), np.uint8(0))
        return _Matrix.fixed(np.hstack([np.repeat(sign, size - width, axis=1), be]))
    if pa.types.is_fixed_size_binary(t):
        if t.byte_width != size:
            raise TypeError(f"{path}: an Arrow {t} column cannot be written as an Avro fixed({size})")
        return _Matrix.fixed(_buffer(arr, 1, np.uint8, n * size, arr.offset * size).reshape(n, size))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        data, offsets = _binary(arr)
        if np.any(np.diff(offsets) != size):
            raise ValueError(f"{path}: a value is not {size} bytes long, the size of its Avro fixed")
        return _Matrix.fixed(data[offsets[0] : offsets[-1]].reshape(n, size))
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


def _uuid_text(arr: pa.Array) -> _Seg:
    """16-byte UUIDs as Avro strings: their 36-character text (after the length, 36)."""
    n = len(arr)
    raw = _buffer(arr, 1, np.uint8, n * 16, arr.offset * 16).reshape(n, 16)
    m = np.full((n, 37), ord("-"), dtype=np.uint8)
    m[:, 0] = 72  # the varint of 36
    digits = np.empty((n, 32), dtype=np.uint8)
    digits[:, 0::2] = _HEX[raw >> 4]
    digits[:, 1::2] = _HEX[raw & 15]
    m[:, 1 + _UUID_DIGITS] = digits
    return _Matrix.fixed(m)


def _bytes(arr: pa.Array, node: _Prim, path: str) -> _Seg:
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
    ragged = _Ragged(data, offsets)
    return _Seq([_varints(ragged.lengths), ragged], n)


def _decimal_bytes(be: np.ndarray) -> _Seg:
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
    ragged = _Ragged(np.ascontiguousarray(be)[keep], offsets)
    return _Seq([_varints(lengths), ragged], n)


def _enum(node: _Enum, arr: pa.Array, path: str) -> _Seg:
    if pa.types.is_integer(arr.type):
        index = _ints(arr, None, path)
        bad = (index < 0) | (index >= len(node.symbols))
    else:
        found = pc.index_in(arr, value_set=pa.array(node.symbols, type=arr.type))
        bad = found.is_null().to_numpy(zero_copy_only=False)
        index = found.fill_null(0).to_numpy(zero_copy_only=False)
    if np.any(bad):
        raise ValueError(f"{path}: a value is not one of the Avro enum's symbols {node.symbols}")
    return _varints(np.asarray(index, dtype=np.int64))


def _repeated(arr: pa.Array, path: str, elements: Callable[[pa.Array], _Seg]) -> _Seg:
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
    data, item_offsets = _materialize(elements(values))
    counts = np.diff(offsets)
    items = _Ragged(data, item_offsets[offsets - first])
    return _Seq([_varints(counts), items, _Zeros((counts > 0).astype(np.int64))], n)


def _record(node: _Record, columns: list[pa.Array], n: int, path: str) -> _Seg:
    if len(columns) != len(node.fields):
        raise ValueError(
            f"{path or 'the table'}: {len(columns)} columns for the {len(node.fields)} fields "
            f"of the Avro record {node.name}"
        )
    parts = [
        _encode(f, col, f"{path}.{name}" if path else name)
        for (name, f), col in zip(node.fields, columns, strict=True)
    ]
    return _Seq(parts, n)


def _encode(node: _Node, arr: pa.Array, path: str) -> _Seg:
    n = len(arr)
    if n == 0:
        return _Zeros(np.zeros(0, dtype=np.int64))
    arr = _plain(arr)
    if isinstance(node, _Union):
        return _union(node, arr, path)
    if isinstance(node, _Prim) and node.kind == "null":
        if arr.null_count != n:
            raise ValueError(f"{path}: a value that is not null where the Avro schema has type 'null'")
        return _Zeros(np.zeros(n, dtype=np.int64))
    _required(arr, path)
    if isinstance(node, _Prim):
        kind = node.kind
        if kind in ("int", "long"):
            values = _ints(arr, node.logical, path)
            if kind == "int" and (values.min() < _INT32_MIN or values.max() > _INT32_MAX):
                raise ValueError(f"{path}: a value out of the range of an Avro int")
            return _varints(values)
        if kind == "boolean":
            if not pa.types.is_boolean(arr.type):
                raise TypeError(f"{path}: an Arrow {arr.type} column cannot be written as an Avro boolean")
            return _Matrix.fixed(np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.uint8).reshape(n, 1))
        if kind in ("float", "double"):
            return _floats(arr, kind, path)
        return _bytes(arr, node, path)
    if isinstance(node, _Fixed):
        return _fixed(node, arr, path)
    if isinstance(node, _Record):
        if not pa.types.is_struct(arr.type):
            raise TypeError(f"{path}: an Arrow {arr.type} column cannot be written as an Avro record")
        return _record(node, [arr.field(i) for i in range(arr.type.num_fields)], n, path)
    if isinstance(node, _Array):
        items = node.items
        return _repeated(arr, path, lambda values: _encode(items, values, path + "[]"))
    if isinstance(node, _Map):
        key, value = _Prim("string"), node.values

        def entries(values: pa.Array) -> _Seg:
            values = _plain(values)
            if not pa.types.is_struct(values.type) or values.type.num_fields != 2:
                raise TypeError(f"{path}: an Arrow {arr.type} column cannot be written as an Avro map")
            parts = [
                _encode(key, values.field(0), path + ".key"),
                _encode(value, values.field(1), path + ".value"),
            ]
            return _Seq(parts, len(values))

        return _repeated(arr, path, entries)
    if isinstance(node, _Enum):
        return _enum(node, arr, path)
    raise TypeError(f"{path}: unsupported Avro type {type(node).__name__}")


def _union(node: _Union, arr: pa.Array, path: str) -> _Seg:
    n, nulls = len(arr), arr.null_count
    ni, vi = node.null_index, node.value_index
    if vi is None:  # only null
        return _encode(node.branches[0], arr, path) if len(node.branches) == 1 else _Byte(n, 2 * (ni or 0))
    if nulls == 0 or ni is None:
        return _prefixed(_encode(node.branches[vi], arr, path), 2 * vi)
    if nulls == n:
        return _Byte(n, 2 * ni)
    valid = arr.is_valid()
    mask = valid.to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(mask)
    inner = _encode(node.branches[vi], _fixed_width_take(arr, rows) or arr.filter(valid), path)
    if ni == 0:  # null rows are the byte 0, what the buffer already holds
        return _Some(_prefixed(inner, 2 * vi), rows, n, base=1)
    branch = np.where(mask, np.uint8(2 * vi), np.uint8(2 * ni))
    return _Seq([_Byte(n, branch), _Some(inner, rows, n)], n)


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


# ---------------------------------------------------------------------------------------------
# The container


def _varint(value: int) -> bytes:
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _compressor(codec: str, level: int | None) -> Callable[[memoryview], bytes | memoryview]:
    """A block's bytes as the codec stores them."""
    if codec == "null":
        return lambda data: data
    if codec == "deflate":

        def deflate(data: memoryview) -> bytes:
            c = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, -15)
            return c.compress(data) + c.flush()

        return deflate
    if codec == "zstandard":
        zstd = pa.Codec("zstd", compression_level=level)
        return lambda data: bytes(zstd.compress(data, asbytes=True))
    if codec == "snappy":
        snappy = pa.Codec("snappy")

        def snappy_crc(data: memoryview) -> bytes:
            crc = zlib.crc32(data) & 0xFFFFFFFF
            return bytes(snappy.compress(data, asbytes=True)) + crc.to_bytes(4, "big")

        return snappy_crc
    if codec == "bzip2":
        return lambda data: bz2.compress(data, 9 if level is None else level)
    if codec == "xz":
        return lambda data: lzma.compress(data, preset=6 if level is None else level)
    raise ValueError(f"unsupported Avro codec {codec!r}: the supported codecs are {', '.join(CODECS)}")


def reference_repeated_names(schema: Any) -> Any:
    """``schema`` with every named type (record, fixed, enum) defined again replaced by its name.

    pyiceberg's ``iceberg_to_avro`` defines ``uuid_fixed`` (and ``decimal_P_S``, ...) again at
    every use, which Avro's parsers (fastavro's, Java's) refuse: "redefined named type". A type
    defined again differently is an error."""
    seen: dict[str, Any] = {}

    def walk(s: Any, ns: str) -> Any:
        if isinstance(s, list):
            return [walk(b, ns) for b in s]
        if not isinstance(s, dict):
            return s
        t = s.get("type")
        if t in ("record", "error", "fixed", "enum") and "name" in s:
            name, inner = _SchemaParser._fullname(s, ns)
            if name in seen:
                if seen[name] != s:
                    raise ValueError(f"the Avro type {name!r} is defined twice, differently")
                return name
            seen[name] = s
            if t in ("record", "error"):
                return {**s, "fields": [{**f, "type": walk(f["type"], inner)} for f in s["fields"]]}
            return s
        out = dict(s)
        if isinstance(t, (dict, list)):
            out["type"] = walk(t, ns)
        if t == "array":
            out["items"] = walk(s["items"], ns)
        elif t == "map":
            out["values"] = walk(s["values"], ns)
        return out

    return walk(schema, "")


class AvroEncoder:
    """Writes one Avro object container file to a binary stream (anything with write() and tell()).

    The header is written at once: the magic, the file metadata (``avro.schema``, the JSON of
    ``avro_schema`` as given, Iceberg's attributes such as "field-id" kept; ``avro.codec``; then
    ``metadata``) and a random 16-byte sync marker. ``write`` encodes a table's rows (its columns
    in the order of the record's fields, matched by position, not name) into blocks of about
    ``block_bytes`` uncompressed, split between rows (a row larger than that is a block of its
    own), and writes them before it returns: nothing is buffered, so ``stream.tell()`` is the
    file's size after every ``write``. ``close`` writes nothing and leaves the stream open.

    ``codec``: one of ``CODECS``; ``level`` the compression level (None: the codec's default,
    zstd 1 as pyarrow's, deflate zlib's 6, bzip2 9, xz 6; snappy has none). ``rows_written`` and
    ``blocks_written`` count what was written so far.
    """

    def __init__(
        self,
        stream: Stream,
        avro_schema: dict[str, Any],
        *,
        codec: str = "zstandard",
        level: int | None = None,
        block_bytes: int = 1 << 20,
        metadata: Mapping[str, bytes | str] | None = None,
    ) -> None:
        self._compress = _compressor(codec, level)
        root = _SchemaParser().parse(avro_schema, "")
        if not isinstance(root, _Record):
            raise ValueError("the Avro schema of a data file must be a record")
        self._root = root
        self._stream = stream
        self._block_bytes = max(1, int(block_bytes))
        self._sync = os.urandom(16)
        self._closed = False
        self.rows_written = 0
        self.blocks_written = 0
        meta: dict[str, bytes] = {
            "avro.schema": json.dumps(avro_schema).encode(),
            "avro.codec": codec.encode(),
        }
        for key, value in (metadata or {}).items():
            if key in meta:
                raise ValueError(f"the metadata key {key!r} is the writer's own")
            meta[key] = value.encode() if isinstance(value, str) else bytes(value)
        header = bytearray(MAGIC)
        header += _varint(len(meta))
        for key, value in meta.items():
            k = key.encode()
            header += _varint(len(k)) + k + _varint(len(value)) + value
        header += b"\x00" + self._sync
        stream.write(bytes(header))

    @property
    def sync_marker(self) -> bytes:
        return self._sync

    def write(self, table: pa.Table | pa.RecordBatch) -> None:
        """Encodes ``table``'s rows (columns in the order of the Avro record's fields, matched by
        position) and writes them as blocks of about ``block_bytes`` before compression."""
        if self._closed:
            raise ValueError("the Avro file is closed")
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        n = table.num_rows
        if table.num_columns != len(self._root.fields):
            raise ValueError(
                f"{table.num_columns} columns for the {len(self._root.fields)} fields of the Avro record"
            )
        if n == 0:
            return
        target = max(self._block_bytes, min(4 * self._block_bytes, 1 << 24), 1 << 18)
        rows = max(1, min(n, target // max(1, table.nbytes // n)))
        carry: tuple[np.ndarray, np.ndarray] | None = None
        start = 0
        while start < n:
            m = min(rows, n - start)
            part = table.slice(start, m)
            columns = [_array(part.column(i)) for i in range(part.num_columns)]
            data, offsets = _materialize(_record(self._root, columns, m, ""))
            start += m
            size = int(offsets[-1])
            rows = max(1, min(rows * 8, int(target * m / max(1, size))))
            if carry is not None:
                data = np.concatenate([carry[0], data])
                offsets = np.concatenate([carry[1][:-1], offsets + carry[1][-1]])
            carry = self._blocks(data, offsets, final=start >= n)

    def _blocks(
        self, data: np.ndarray, offsets: np.ndarray, final: bool
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Writes the rows as blocks; the last rows, if less than a block and not ``final``, are
        returned to go with the next rows."""
        n = len(offsets) - 1
        a = 0
        while a < n:
            b = int(np.searchsorted(offsets, offsets[a] + self._block_bytes, side="right")) - 1
            b = max(b, a + 1)
            if b >= n and not final and offsets[n] - offsets[a] < self._block_bytes:
                return data[offsets[a] :].copy(), offsets[a:] - offsets[a]
            self._block(data[offsets[a] : offsets[b]], b - a)
            a = b
        return None

    def _block(self, data: np.ndarray, count: int) -> None:
        payload = self._compress(data.data)
        self._stream.write(_varint(count) + _varint(len(payload)))
        self._stream.write(payload)
        self._stream.write(self._sync)
        self.rows_written += count
        self.blocks_written += 1

    def close(self) -> None:
        """Ends the file (nothing is buffered, so nothing is written); the stream stays open."""
        self._closed = True

    def __enter__(self) -> AvroEncoder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _array(column: pa.ChunkedArray) -> pa.Array:
    if column.num_chunks == 1:
        return column.chunk(0)
    return column.combine_chunks()
