"""Avro's binary encoding read a column at a time.

All the bodies of a batch sit in one buffer; every read advances one position per record with numpy
(a varint for a million records is a handful of array operations, not a million Python calls), so a
record's fields are read column after column. A body that does not decode (it ends too early, a
length or a union branch is out of range, a string is not UTF-8, trailing bytes) marks its record
bad with a reason; its later reads stay inside its own body and give values that are dropped, so the
columns of all records stay aligned until the good rows are kept at the end.

Nodes are built by ``avro.AvroDecoder`` from the writer and reader schemas (the resolution happens
there); each reads the writer's encoding and gives an Arrow array of the reader's column type.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_PAD = 16  # zero bytes around the bodies, so 8-byte windows never leave the buffer
_MASK4 = np.array([(1 << (8 * i)) - 1 for i in range(5)], np.uint32)
_SEVEN = np.uint64(0x7F)
_SEVEN_F = np.uint64(0xFF)
_ONE = np.uint64(1)
_HIGH = np.uint64(0x8080808080808080)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
# packing 8 groups of 7 bits held in 8 bytes: pairs into 14 bits, 14 into 28, 28 into 56
_G1, _G2 = np.uint64(0x007F007F007F007F), np.uint64(0x3FFF3FFF3FFF3FFF)
_G3, _G4 = np.uint64(0x00003FFF00003FFF), np.uint64(0x0FFFFFFF0FFFFFFF)
_G5 = np.uint64(0x000000000FFFFFFF)
_S = {k: np.uint64(k) for k in (1, 2, 4, 8, 56, 63)}
_INT32 = (-(2**31), 2**31 - 1)
_INLINE = 12  # binary_view keeps values up to 12 bytes inside the view
MAX_BATCH_BYTES = 2**31 - 1 - 2 * _PAD


class Wire:
    """The bodies of one batch, and which of them turned out bad (first reason kept)."""

    def __init__(self, bodies: Sequence[bytes]) -> None:
        n = len(bodies)
        lengths = np.fromiter(map(len, bodies), np.int64, n)
        self.ends = np.cumsum(lengths) + _PAD
        if n and self.ends[-1] > MAX_BATCH_BYTES:
            raise OverflowError("binary views address the buffer with 32-bit offsets: decode in parts")
        self.starts = self.ends - lengths
        joined = b"".join(itertools.chain((bytes(_PAD),), bodies, (bytes(_PAD),)))  # one copy
        self.data = pa.py_buffer(joined)
        self.buf = np.frombuffer(joined, np.uint8)
        self.ok = np.ones(n, bool)
        self.reasons: dict[int, str] = {}

    def words(self, dtype: str) -> np.ndarray:
        """The buffer as ``dtype`` values starting at every byte (unaligned, overlapping)."""
        width = np.dtype(dtype).itemsize
        return np.ndarray((len(self.buf) - width + 1,), dtype, self.buf, 0, (1,))

    def fail(self, rows: np.ndarray, reason: str) -> None:
        for row in rows[self.ok[rows]].tolist():
            self.reasons[row] = reason
        self.ok[rows] = False

    def top(self) -> Rows:
        n = len(self.ends)
        return Rows(self, np.arange(n, dtype=np.int64), self.starts.copy(), self.ends)


class Rows:
    """The records a node reads: their batch index, read position and body end."""

    def __init__(self, wire: Wire, rows: np.ndarray, pos: np.ndarray, ends: np.ndarray) -> None:
        self.wire, self.rows, self.pos, self.ends = wire, rows, pos, ends

    def __len__(self) -> int:
        return len(self.rows)

    def subset(self, sel: np.ndarray) -> Rows:
        return Rows(self.wire, self.rows[sel], self.pos[sel], self.ends[sel])

    def fail(self, mask: np.ndarray, reason: str) -> None:
        if mask.any():
            self.wire.fail(self.rows[mask], reason)

    def advance(self, width: np.ndarray | int) -> np.ndarray:
        """Positions of the next ``width`` bytes of each record; those that would pass their body's end
        are marked truncated and read nothing."""
        start = self.pos
        end = start + width
        over = end > self.ends
        if over.any():
            self.fail(over, "truncated")
            end = np.where(over, self.ends, end)
            start = np.where(over, self.ends, start)
        self.pos = end
        return start

    def varint(self) -> np.ndarray:
        """The next varint of each record, unsigned (up to 10 bytes): the 8 bytes at each position as
        one word, the first byte without a continuation bit found by bit tricks, and the 7-bit groups
        packed in three steps (rows with 9 or 10 bytes take one more word)."""
        p = self.pos  # never past the body's end (advance keeps it there)
        u8 = self.wire.words("<u8")
        w = u8[p]
        first = w & _SEVEN_F
        if not (first & _HIGH).any():  # one byte each (small ints, lengths, union branches)
            self.advance(1)
            return first
        stop = ~w & _HIGH
        last = stop & (~stop + _ONE)  # the lowest stop bit (0: none in these 8 bytes)
        size = (np.bitwise_count(last - _ONE).astype(np.int64) + 1) // 8
        x = w & (last + last - _ONE) & _LOW7
        x = (x & _G1) | ((x >> _S[1]) & ~_G1 & _G2)
        x = (x & _G3) | ((x >> _S[2]) & ~_G3 & _G4)
        x = (x & _G5) | ((x >> _S[4]) & ~_G5)
        long_ = np.flatnonzero(last == 0)
        if long_.size:
            tail = u8[p[long_] + 8]
            b8, b9 = tail & _SEVEN_F, (tail >> _S[8]) & _SEVEN_F
            nine = b8 < 0x80
            ten = ~nine & (b9 < 0x80)
            x[long_] |= (b8 & _SEVEN) << _S[56]
            x[long_] |= np.where(nine, 0, (b9 & _ONE) << _S[63])
            size[long_] = np.where(nine, 9, 10)
            wrong = ~nine & ~ten
            if wrong.any():
                mask = np.zeros(len(p), bool)
                mask[long_[wrong]] = True
                self.fail(mask, "varint longer than 10 bytes")
        self.advance(size)
        return x

    def long(self) -> np.ndarray:
        """Avro's zig-zag long."""
        u = self.varint()
        return (u >> np.uint64(1)).astype(np.int64) ^ -(u & np.uint64(1)).astype(np.int64)

    def int(self) -> np.ndarray:
        v = self.long()
        out = (v < _INT32[0]) | (v > _INT32[1])
        if out.any():
            self.fail(out, "int out of range")
            v = np.where(out, 0, v)
        return v

    def fixed(self, dtype: str) -> np.ndarray:
        """The next value of numpy type ``dtype`` (a float, a double) of each record."""
        start = self.advance(np.dtype(dtype).itemsize)
        return self.wire.words(dtype)[start]

    def length(self) -> np.ndarray:
        """A byte or block count: zero or more, and for byte counts within the body."""
        n = self.long()
        neg = n < 0
        if neg.any():
            self.fail(neg, "negative length")
            n = np.where(neg, 0, n)
        return n

    def bytes_at(self) -> tuple[np.ndarray, np.ndarray]:
        """Start and length of the next bytes/string value of each record."""
        n = self.length()
        over = self.pos + n > self.ends
        if over.any():
            self.fail(over, "truncated")
            n = np.where(over, 0, n)
        return self.advance(n), n


def binary(wire: Wire, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary_view array of the slices (start, length) of the batch buffer: its 16-byte views
    (length, then the value itself up to 12 bytes, else its prefix and offset) built a column at a
    time; casting it copies the values once."""
    k = len(starts)
    u4 = wire.words("<u4")
    views = np.empty((k, 4), np.uint32)
    views[:, 0] = lengths
    views[:, 1] = u4[starts] & _MASK4[np.clip(lengths, 0, 4)]
    views[:, 2] = u4[starts + 4] & _MASK4[np.clip(lengths - 4, 0, 4)]
    views[:, 3] = u4[starts + 8] & _MASK4[np.clip(lengths - 8, 0, 4)]
    long_ = lengths > _INLINE
    if long_.any():
        views[long_, 2] = 0  # data buffer 0
        views[long_, 3] = starts[long_]
    return pa.Array.from_buffers(pa.binary_view(), k, [None, pa.py_buffer(views), wire.data])


# --------------------------------------------------------------------------- nodes


class Node:
    """Reads one writer type and gives the reader's column type ``out``."""

    out: pa.DataType

    def read(self, r: Rows) -> pa.Array:
        raise NotImplementedError


class NullNode(Node):
    def __init__(self, out: pa.DataType) -> None:
        self.out = out

    def read(self, r: Rows) -> pa.Array:
        return pa.nulls(len(r), self.out)


class BoolNode(Node):
    out = pa.bool_()

    def read(self, r: Rows) -> pa.Array:
        b = r.fixed("u1")
        r.fail(b > 1, "boolean byte not 0 or 1")
        return pa.array(b == 1)


class IntNode(Node):
    """int or long, to integer, long, float or double; ``times`` turns millis into micros (checked)."""

    def __init__(self, out: pa.DataType, is_int: bool, times: int = 1) -> None:
        self.out, self.is_int, self.times = out, is_int, times

    def read(self, r: Rows) -> pa.Array:
        v = r.int() if self.is_int else r.long()
        if self.times != 1:
            limit = np.iinfo(np.int64).max // self.times
            over = np.abs(v) > limit
            if over.any():
                r.fail(over, "timestamp out of range")
                v = np.where(over, 0, v)
            v = v * self.times
        if pa.types.is_floating(self.out):
            return pa.array(v.astype(self.out.to_pandas_dtype()))
        if pa.types.is_int32(self.out) or pa.types.is_date32(self.out):
            return pa.array(v.astype(np.int32)).view(self.out)
        return pa.array(v).view(self.out)


class FloatNode(Node):
    def __init__(self, out: pa.DataType, width: int) -> None:
        self.out, self.width = out, width

    def read(self, r: Rows) -> pa.Array:
        v = r.fixed("<f4" if self.width == 4 else "<f8")
        return pa.array(v.astype(self.out.to_pandas_dtype()))


class BytesNode(Node):
    """bytes or string (``width`` set: fixed), to binary or to string (checked UTF-8)."""

    def __init__(self, out: pa.DataType, width: int | None = None) -> None:
        self.out, self.width = out, width

    def read(self, r: Rows) -> pa.Array:
        if self.width is None:
            starts, lengths = r.bytes_at()
        else:
            starts = r.advance(self.width)
            lengths = r.pos - starts  # 0 where the body ended first
        arr = binary(r.wire, starts, lengths)
        if not pa.types.is_string(self.out):
            return arr.cast(pa.binary())
        try:
            return arr.cast(pa.string())
        except pa.ArrowInvalid:
            arr = arr.cast(pa.binary())
            values = arr.to_pylist()
            bad = np.zeros(len(values), bool)
            for i, v in enumerate(values):
                try:
                    v.decode("utf-8")
                except UnicodeDecodeError:
                    bad[i] = True
            r.fail(bad, "string not UTF-8")
            return pc.if_else(pa.array(bad), pa.scalar(b"", pa.binary()), arr).cast(pa.string())


class DecimalNode(Node):
    """Big-endian two's complement unscaled values (bytes, or fixed of ``width``) to decimal128;
    values beyond the precision are bad (Spark refuses them)."""

    def __init__(self, out: pa.DataType, width: int | None = None) -> None:
        self.out, self.width = out, width

    def read(self, r: Rows) -> pa.Array:
        if self.width is None:
            starts, lengths = r.bytes_at()
        else:
            starts = r.advance(self.width)
            lengths = r.pos - starts  # 0 where the body ended first
        words, over = decimal_words(r.wire, starts, lengths, self.out.precision)
        if over.any():
            r.fail(over, f"decimal exceeds precision {self.out.precision}")
            words[over] = 0
        return pa.Array.from_buffers(self.out, len(starts), [None, pa.py_buffer(words)])


def decimal_words(
    wire: Wire, starts: np.ndarray, lengths: np.ndarray, precision: int
) -> tuple[np.ndarray, np.ndarray]:
    """decimal128's (low, high) words of the big-endian two's complement slices of the buffer, and
    which values have more than ``precision`` digits."""
    k = len(starts)
    # up to 8 bytes: the big-endian 8-byte word ending with the value, its extra high bytes
    # shifted out with sign extension
    drop = 8 * (8 - np.clip(lengths, 1, 8))
    lo = (wire.words(">i8")[starts + lengths - 8].astype(np.int64) << drop) >> drop
    lo = np.where(lengths > 0, lo, 0)
    hi = lo >> 63
    for i in np.flatnonzero(lengths > 8).tolist():  # rare: wider than a long
        value = int.from_bytes(bytes(wire.buf[starts[i] : starts[i] + lengths[i]]), "big", signed=True)
        if not -(2**127) <= value < 2**127:
            value = 10**38  # caught by the precision check below
        lo[i] = _signed64(value & (2**64 - 1))
        hi[i] = _signed64((value >> 64) & (2**64 - 1))
    ulo, uhi = lo.view(np.uint64), hi.view(np.uint64)
    neg = hi < 0
    alo = np.where(neg, ~ulo + np.uint64(1), ulo)
    ahi = np.where(neg, ~uhi + (alo == 0).astype(np.uint64), uhi)
    lim_hi, lim_lo = divmod(10**precision, 2**64)
    over = (ahi > np.uint64(lim_hi)) | ((ahi == np.uint64(lim_hi)) & (alo >= np.uint64(lim_lo)))
    words = np.empty((k, 2), np.int64)
    words[:, 0], words[:, 1] = lo, hi
    return words, over


def _signed64(u: int) -> int:
    return u - 2**64 if u >= 2**63 else u


class EnumNode(Node):
    """Writer symbol index to the reader's symbol (None: not in the reader's symbols, no default)."""

    out = pa.string()

    def __init__(self, symbols: Sequence[str | None]) -> None:
        self.symbols = pa.array([s or "" for s in symbols], pa.string())
        self.missing = np.array([s is None for s in symbols] + [True])

    def read(self, r: Rows) -> pa.Array:
        i = r.long()
        out = (i < 0) | (i >= len(self.symbols))
        i = np.where(out, len(self.symbols), i)
        r.fail(self.missing[i] & ~out, "enum symbol not in the reader's schema")
        r.fail(out, "enum index out of range")
        return self.symbols.take(pa.array(np.where(out, 0, i)))


class RecordNode(Node):
    """Writer fields in writer order (None: skipped, read and dropped); the reader's columns are
    ``sources[i]``: an int (the writer field read) or a one-row default array repeated."""

    def __init__(self, out: pa.DataType, fields: Sequence[Node], sources: Sequence[int | pa.Array]) -> None:
        self.out, self.fields, self.sources = out, list(fields), list(sources)

    def columns(self, r: Rows) -> list[pa.Array]:
        read = [f.read(r) for f in self.fields]
        zeros = None
        cols = []
        for s in self.sources:
            if isinstance(s, int):
                cols.append(read[s])
            else:
                zeros = pa.array(np.zeros(len(r), np.int64)) if zeros is None else zeros
                cols.append(s.take(zeros))
        return cols

    def read(self, r: Rows) -> pa.Array:
        return pa.StructArray.from_arrays(self.columns(r), fields=list(self.out))


class BlocksNode(Node):
    """Arrays and maps: blocks of items until a zero count; a map's items are (string key, value)."""

    def __init__(self, out: pa.DataType, item: Node, key: Node | None = None) -> None:
        self.out, self.item, self.key = out, item, key

    def read(self, r: Rows) -> pa.Array:
        n = len(r)
        counts = np.zeros(n, np.int64)
        owners: list[np.ndarray] = []
        keys: list[pa.Array] = []
        values: list[pa.Array] = []
        active = np.arange(n)
        while active.size:
            sub = r.subset(active)
            c = sub.long()
            neg = c < 0
            if neg.any():  # a negative count is followed by the block's size in bytes
                c = np.abs(c)
                sized = sub.subset(np.flatnonzero(neg))
                sized.long()
                sub.pos[neg] = sized.pos
            # every item but a null takes a byte, so a larger count than the bytes left is corrupt
            left = np.maximum(sub.ends - sub.pos, 0)
            huge = c > (left if self.min_size() else left * 1_000_000)
            if huge.any():
                sub.fail(huge, "block count beyond the body")
                c = np.where(huge, 0, c)
            remaining = c.copy()
            live = np.flatnonzero(remaining > 0)
            while live.size:
                items = sub.subset(live)
                if self.key is not None:
                    keys.append(self.key.read(items))
                values.append(self.item.read(items))
                owners.append(active[live])
                sub.pos[live] = items.pos
                remaining[live] -= 1
                live = live[remaining[live] > 0]
            counts[active] += c
            r.pos[active] = sub.pos
            active = active[(c > 0) & r.wire.ok[r.rows[active]]]
        owner = np.concatenate(owners) if owners else np.zeros(0, np.int64)
        order = pa.array(np.argsort(owner, kind="stable"))
        offsets = pa.array(np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=n))]).astype(np.int32))
        vals = _concat(values, self.item.out).take(order)
        if self.key is not None:
            return pa.MapArray.from_arrays(
                offsets, _concat(keys, pa.string()).take(order), vals, type=self.out
            )
        return pa.ListArray.from_arrays(offsets, vals, type=self.out)

    def min_size(self) -> bool:
        """Whether every item takes at least one byte (bounds a corrupt count by the body's size)."""
        return not isinstance(self.item, NullNode) or self.key is not None


def _concat(parts: list[pa.Array], t: pa.DataType) -> pa.Array:
    return pa.concat_arrays(parts) if parts else pa.array([], t)


class UnionNode(Node):
    """A writer union: a branch index, then that branch (None: null; a str: why its records are bad)."""

    def __init__(self, out: pa.DataType, branches: Sequence[Node | str | None]) -> None:
        self.out, self.branches = out, list(branches)

    def read(self, r: Rows) -> pa.Array:
        n = len(r)
        b = r.long()
        out = (b < 0) | (b >= len(self.branches))
        if out.any():
            r.fail(out, "union branch out of range")
            b = np.where(out, -1, b)
        index = np.full(n, -1, np.int64)
        pieces: list[pa.Array] = []
        done = 0
        for k, branch in enumerate(self.branches):
            sel = np.flatnonzero(b == k)
            if not sel.size or branch is None:
                continue
            if isinstance(branch, str):
                r.fail(b == k, branch)
                continue
            sub = r.subset(sel)
            pieces.append(branch.read(sub))
            r.pos[sel] = sub.pos
            index[sel] = done + np.arange(sel.size)
            done += sel.size
        if done == n and len(pieces) == 1:
            return pieces[0]
        return _concat(pieces, self.out).take(pa.array(index, mask=index < 0))


class MemberNode(Node):
    """A value read into one member of the reader's union of several types (a struct of members)."""

    def __init__(self, out: pa.DataType, node: Node, member: int) -> None:
        self.out, self.node, self.member = out, node, member

    def read(self, r: Rows) -> pa.Array:
        v = self.node.read(r)
        fields = list(self.out)
        kids = [v if i == self.member else pa.nulls(len(r), f.type) for i, f in enumerate(fields)]
        return pa.StructArray.from_arrays(kids, fields=fields)


class CastNode(Node):
    """A promotion the reader's column type asks for (int to long, float to double, string/bytes)."""

    def __init__(self, out: pa.DataType, node: Node) -> None:
        self.out, self.node = out, node

    def read(self, r: Rows) -> pa.Array:
        return self.node.read(r).cast(self.out)


__all__ = [
    "MAX_BATCH_BYTES",
    "BlocksNode",
    "BoolNode",
    "BytesNode",
    "CastNode",
    "DecimalNode",
    "EnumNode",
    "FloatNode",
    "IntNode",
    "MemberNode",
    "Node",
    "NullNode",
    "RecordNode",
    "Rows",
    "UnionNode",
    "Wire",
    "binary",
    "decimal_words",
]
