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

from icesql.engine.iceberg.formats.avro_columns import encode_record
from icesql.engine.iceberg.formats.avro_schema import AvroRecord, SchemaParser
from icesql.engine.iceberg.formats.avro_segments import materialize

MAGIC = b"Obj\x01"
CODECS = ("null", "deflate", "zstandard", "snappy", "bzip2", "xz")



class Stream(Protocol):
    def write(self, data: Any, /) -> Any: ...

    def tell(self) -> int: ...


# ---------------------------------------------------------------------------------------------
# The schema, parsed once into nodes (named types resolved, so the same object for every use)


# ---------------------------------------------------------------------------------------------
# Segments: one encoded column, per row a run of bytes


# ---------------------------------------------------------------------------------------------
# Arrow columns to segments


# ---------------------------------------------------------------------------------------------
# The container


def varint(value: int) -> bytes:
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
        root = SchemaParser().parse(avro_schema, "")
        if not isinstance(root, AvroRecord):
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
        header += varint(len(meta))
        for key, value in meta.items():
            k = key.encode()
            header += varint(len(k)) + k + varint(len(value)) + value
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
            data, offsets = materialize(encode_record(self._root, columns, m, ""))
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
        self._stream.write(varint(count) + varint(len(payload)))
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
