"""Segments: an encoded column as per-row byte lengths and a write that puts every row's bytes at its
start in one output buffer by numpy scatters (zero-width, one byte, fixed-width matrices, zigzag
varints, ragged byte strings, concatenations, optional values).
"""

from __future__ import annotations

import numpy as np


class Segment:
    __slots__ = ("lengths",)
    lengths: np.ndarray  # int64, bytes per row

    def write(self, out: np.ndarray, starts: np.ndarray) -> None:
        """Put every row's bytes in ``out`` from ``starts`` (int64 per row; not modified)."""
        raise NotImplementedError


class Zeros(Segment):
    """Bytes that are all 0 (a null branch, an array's end): nothing to write, ``out`` starts zeroed."""

    __slots__ = ()

    def __init__(self, lengths: np.ndarray) -> None:
        self.lengths = lengths

    def write(self, out: np.ndarray, starts: np.ndarray) -> None:
        pass


class ByteSegment(Segment):
    """One byte per row: ``value`` (a constant or a uint8 per row)."""

    __slots__ = ("value",)

    def __init__(self, n: int, value: int | np.ndarray) -> None:
        self.lengths, self.value = np.ones(n, dtype=np.int64), value

    def write(self, out: np.ndarray, starts: np.ndarray) -> None:
        if not isinstance(self.value, int) or self.value:
            out[starts] = self.value


def void_dtype(width: int) -> np.dtype:
    return np.dtype((np.void, width))


def rows_view(a: np.ndarray, width: int) -> np.ndarray:
    """``a`` (1-d uint8, contiguous) seen as one ``width``-byte value at every byte position: a
    numpy fancy index on it moves whole runs of bytes, one index per row."""
    return np.ndarray(shape=(len(a) - width + 1,), dtype=void_dtype(width), buffer=a, strides=(1,))


def copy_rows(
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
            rows_view(out, longest)[starts] = rows_view(src, longest)[src_starts]
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
        to, frm = rows_view(out, k), rows_view(src, k)
        to[d] = frm[s]
        tail = lengths[rows] - k
        d += tail
        s += tail
        to[d] = frm[s]


class Matrix(Segment):
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
    def fixed(cls, matrix: np.ndarray) -> Matrix:
        n, width = matrix.shape
        return cls(matrix, np.full(n, width, dtype=np.int64), 0, (width, width))

    def prefixed(self, byte: int) -> Matrix:
        """The same rows, each after ``byte``."""
        n, width = self.matrix.shape
        span = (self.shortest + 1, self.longest + 1)
        if self.first:
            self.matrix[:, self.first - 1] = byte
            return Matrix(self.matrix, self.lengths + 1, self.first - 1, span)
        m = np.empty((n, width + 1), dtype=np.uint8)
        m[:, 0] = byte
        m[:, 1:] = self.matrix
        return Matrix(m, self.lengths + 1, 0, span)

    @property
    def uniform(self) -> bool:
        return self.shortest == self.longest

    def joined(self, other: Matrix) -> Matrix:
        """This matrix's rows (all of one length) followed by ``other``'s, in one matrix (with a
        spare column first, for a prefix): one write instead of two."""
        n, w = len(self.lengths), self.longest
        m = np.empty((n, 1 + w + other.longest), dtype=np.uint8)
        m[:, 1 : 1 + w] = self.matrix[:, self.first : self.first + w]
        m[:, 1 + w :] = other.matrix[:, other.first : other.first + other.longest]
        span = (w + other.shortest, w + other.longest)
        return Matrix(m, self.lengths + other.lengths, 1, span)

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
            rows_view(out, w)[starts] = np.ndarray(
                (n,), dtype=void_dtype(w), buffer=flat, offset=first, strides=(width,)
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
                rows_view(out, w)[starts[rows]] = rows_view(flat, w)[src]


# The continuation bits of a varint of each length, in its first 8 bytes as a little-endian uint64
VARINT_MORE = np.array([0, 0] + [int("80" * min(k, 8), 16) for k in range(1, 10)], dtype=np.uint64)


def varints(values: np.ndarray) -> Matrix:
    """Avro ints and longs: zigzag varints of an int64 column (a matrix with a spare column first)."""
    v = values.astype(np.int64, copy=False)
    n = len(v)
    z = np.left_shift(v, 1).view(np.uint64)
    z ^= (v >> 63).view(np.uint64)
    if n == 0:
        return Matrix(np.zeros((0, 8), dtype=np.uint8), np.zeros(0, dtype=np.int64), 1)
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
        return Matrix(m, lengths, 1, span)
    # bytes 7..: a spare byte for a prefix (a union's branch), then the varint's bytes
    m = np.empty((n, 24 if width > 8 else 16), dtype=np.uint8)
    packed = z & np.uint64(0x7F)
    part = np.empty_like(z)
    for k in range(1, min(width, 8)):
        np.left_shift(z, np.uint64(k), out=part)
        part &= np.uint64(0x7F << (8 * k))
        packed |= part
    packed |= VARINT_MORE[width] if shortest == width else VARINT_MORE[lengths]
    m.view("<u8")[:, 1] = packed
    if width > 8:
        m[:, 16] = ((z >> np.uint64(56)) & np.uint64(0x7F)).astype(np.uint8) | (
            (lengths > 9).view(np.uint8) << 7
        )
        m[:, 17] = (z >> np.uint64(63)).astype(np.uint8)
    return Matrix(m, lengths, 8, span)


class Ragged(Segment):
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
            copy_rows(out, starts, self.data, o[:-1], lengths)
            return
        # short rows: a destination for every byte, by a cumulative sum of the steps between them
        rows = np.flatnonzero(lengths)
        to, length = starts[rows], lengths[rows]
        step = np.ones(total, dtype=np.int64)
        step[0] = to[0]
        step[o[rows[1:]] - o[0]] = to[1:] - to[:-1] - length[:-1] + 1
        out[np.cumsum(step, out=step)] = self.data[o[0] : o[-1]]


class Concat(Segment):
    """Segments one after the other in every row."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[Segment], n: int, lengths: np.ndarray | None = None) -> None:
        # nested sequences flattened, and runs of matrices of one length a row joined
        self.parts: list[Segment] = []
        for p in parts:
            for q in p.parts if isinstance(p, Concat) else [p]:
                last = self.parts[-1] if self.parts else None
                if isinstance(q, Matrix) and isinstance(last, Matrix) and last.uniform and q.uniform:
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


class Some(Segment):
    """A segment of some of the rows (``rows``, ascending); the others have ``base`` zero bytes."""

    __slots__ = ("inner", "rows")

    def __init__(self, inner: Segment, rows: np.ndarray, n: int, base: int = 0) -> None:
        self.inner, self.rows = inner, rows
        self.lengths = np.full(n, base, dtype=np.int64)
        self.lengths[rows] = inner.lengths

    def write(self, out: np.ndarray, starts: np.ndarray) -> None:
        self.inner.write(out, starts[self.rows])


def prefixed(seg: Segment, byte: int) -> Segment:
    """``seg`` with ``byte`` before every row, in its first matrix where there is one."""
    if isinstance(seg, Matrix):
        return seg.prefixed(byte)
    if isinstance(seg, Concat) and seg.parts:
        return Concat([prefixed(seg.parts[0], byte), *seg.parts[1:]], 0, seg.lengths + 1)
    n = len(seg.lengths)
    return Concat([ByteSegment(n, byte), seg], n, seg.lengths + 1)


def materialize(seg: Segment) -> tuple[np.ndarray, np.ndarray]:
    """The segment's bytes and per-row offsets (int64, one more than rows)."""
    offsets = np.zeros(len(seg.lengths) + 1, dtype=np.int64)
    np.cumsum(seg.lengths, out=offsets[1:])
    out = np.zeros(int(offsets[-1]), dtype=np.uint8)
    seg.write(out, offsets[:-1])
    return out, offsets
