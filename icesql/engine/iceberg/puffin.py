"""Deletion vectors (Iceberg v3) in Puffin files: the ``deletion-vector-v1`` blob, written and read
byte for byte as Iceberg Java does, and the Puffin framing around it.

A deletion vector is a data file's deleted row positions as one bitmap. Its blob (Puffin spec,
"deletion-vector-v1 blob type")::

    length  4 bytes big-endian: len(magic + vector)
    magic   D1 D3 39 64
    vector  64-bit Roaring, "portable": 8-byte LE count of 32-bit bitmaps, then per bitmap
            a 4-byte LE key (the positions' high 32 bits) and the 32-bit bitmap of their
            low 32 bits in the standard portable serialization
    crc     4 bytes big-endian: CRC-32 of magic + vector

(big-endian length and CRC because Delta Lake's vectors had them first). A Puffin file::

    PFA1  blob  blob ...  PFA1  footer JSON  4-byte LE JSON size  4 flag bytes  PFA1

To write the bytes Iceberg Java writes (``BitmapPositionDeleteIndex.serialize``), the vector
has a bitmap for every key from 0 to the largest, empty ones included (Java keeps a dense array
of them), and each bitmap is run-optimized before it is serialized (Java calls ``runOptimize``).
CRoaring's run-optimize picks Java's containers for a bitmap built from positions; a bitmap Java
merged from run containers of an earlier vector may keep a run where the same positions would make
an array of equal size, so icesql's bytes are Java's for the same positions built afresh, and any
Java vector decodes to its positions. The bitmaps are pyroaring's; positions cross into and out of
it as whole numpy arrays, never as one Python object each.

A vector is never empty here: Java never writes one (a data file with nothing deleted has no
vector), so ``write_puffin`` refuses one; ``dv_blob`` and ``dv_positions`` do encode and decode the
empty vector (count 0), which Java reads as no deletes.
"""

from __future__ import annotations

import json
import struct
import zlib
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyroaring import BitMap

from icesql import __version__
from icesql.errors import ExecutionError

PUFFIN_MAGIC = b"PFA1"
DV_MAGIC = b"\xd1\xd3\x39\x64"
DV_BLOB_TYPE = "deletion-vector-v1"
# the blob's `fields`: Iceberg's reserved `_pos` column (MetadataColumns.ROW_POSITION)
ROW_POSITION_FIELD_ID = 2**31 - 1 - 2
REFERENCED_DATA_FILE = "referenced-data-file"
CARDINALITY = "cardinality"
CREATED_BY = f"icesql {__version__}"
# Java's RoaringPositionBitmap keeps its bitmaps in an array indexed by key, so the largest key
# it reads is Integer.MAX_VALUE - 1; positions are below 2^63.
MAX_KEY = 2**31 - 2

_SERIAL_COOKIE_NO_RUNS = 12346  # a 32-bit bitmap without run containers
_SERIAL_COOKIE = 12347  # ... with run containers (low 16 bits; high 16: container count - 1)
_NO_OFFSET_THRESHOLD = 4  # fewer containers than this with runs: no offset header
_ARRAY_MAX = 4096  # up to this many values a container is an array, above it a bitset
_FOOTER_STRUCT = 12  # payload size (4) + flags (4) + magic (4)
_HINT_DAMAGED = (
    "the Puffin file is damaged, cut short, or the manifest entry does not point at a deletion vector"
)
_HINT_MISSING = (
    "the table's metadata names a Puffin file that is not there: removed by hand, or by an orphan-file"
    " cleanup that did not know the table"
)


@dataclass(frozen=True)
class DeletionVector:
    """One deletion vector as written: which data file it deletes rows of, how many, and where
    its blob sits in the Puffin file (the manifest entry's ``referenced_data_file``,
    ``record_count``, ``content_offset`` and ``content_size_in_bytes``)."""

    referenced_data_file: str
    cardinality: int
    content_offset: int
    content_size_in_bytes: int


def dv_blob(positions: Any) -> bytes:
    """The ``deletion-vector-v1`` blob of ``positions`` (row positions in one data file; any
    order, repeats allowed), as Iceberg Java serializes it."""
    return _encode(positions)[0]


def dv_positions(blob: bytes, where: str = "") -> Any:
    """The sorted int64 numpy array of positions a ``deletion-vector-v1`` blob deletes. Checks the
    length, the magic, the CRC and that the vector fills the blob exactly; a blob that fails raises
    ``ExecutionError`` naming ``where`` (the Puffin file and offset, say)."""
    return _decode(memoryview(blob), where)[0]


def write_puffin(output_file: Any, vectors: Mapping[str, Any]) -> tuple[int, list[DeletionVector]]:
    """Write one Puffin file (``output_file``, a pyiceberg ``OutputFile``) with one deletion vector
    per data file of ``vectors`` (data file location -> positions), in sorted location order.
    Returns the file's size and the vectors as written, for their manifest entries."""
    if not vectors:
        raise ValueError("a Puffin file of deletion vectors needs at least one vector")
    parts = [PUFFIN_MAGIC]
    offset = len(PUFFIN_MAGIC)
    written: list[DeletionVector] = []
    blobs: list[dict[str, Any]] = []
    for path in sorted(vectors):
        blob, cardinality = _encode(vectors[path])
        if cardinality == 0:
            raise ValueError(
                f"no deleted positions for {path}: a data file with nothing deleted has no deletion vector"
            )
        parts.append(blob)
        written.append(DeletionVector(path, cardinality, offset, len(blob)))
        # the keys in Java's order (FileMetadataParser); compression-codec omitted: DVs are never
        # compressed
        blobs.append(
            {
                "type": DV_BLOB_TYPE,
                "fields": [ROW_POSITION_FIELD_ID],
                "snapshot-id": -1,  # inherited from the manifest entry, as the spec asks
                "sequence-number": -1,
                "offset": offset,
                "length": len(blob),
                "properties": {REFERENCED_DATA_FILE: path, CARDINALITY: str(cardinality)},
            }
        )
        offset += len(blob)
    footer = {"blobs": blobs, "properties": {"created-by": CREATED_BY}}
    payload = json.dumps(footer, separators=(",", ":"), ensure_ascii=False).encode()
    parts += [PUFFIN_MAGIC, payload, struct.pack("<i", len(payload)), bytes(4), PUFFIN_MAGIC]
    data = b"".join(parts)
    with output_file.create(overwrite=False) as out:
        out.write(data)
    return len(data), written


def read_dv(
    io: Any,
    puffin_path: str,
    offset: int,
    length: int,
    referenced_data_file: str = "",
    *,
    cardinality: int | None = None,
) -> Any:
    """The sorted int64 positions of the deletion vector at ``offset`` (``length`` bytes) in the
    Puffin file ``puffin_path``, reading only that range. ``cardinality`` (the manifest entry's
    ``record_count``), when given, must match, as Java checks."""
    where = f"{puffin_path} at offset {offset} ({length} bytes)"
    if referenced_data_file:
        where += f" for {referenced_data_file}"
    # Java serializes a vector into one array: a blob is under 2 GiB
    if offset < len(PUFFIN_MAGIC) or not 0 <= length < 2**31:
        raise ExecutionError(
            f"deletion vector {where}: not a blob's place in a Puffin file", hint=_HINT_DAMAGED
        )
    data = _read_range(io, puffin_path, offset, length, where)
    positions, found = _decode(memoryview(data), where)
    if cardinality is not None and found != cardinality:
        raise ExecutionError(
            f"deletion vector {where}: {found} positions, its manifest entry says {cardinality}",
            hint=_HINT_DAMAGED,
        )
    return positions


def puffin_footer(io: Any, puffin_path: str) -> list[dict[str, Any]]:
    """The blobs a Puffin file's footer lists (each as its JSON object: ``type``, ``fields``,
    ``offset``, ``length``, ``properties``, ...)."""
    return list(puffin_file_metadata(io, puffin_path)["blobs"])


def puffin_file_metadata(io: Any, puffin_path: str) -> dict[str, Any]:
    """A Puffin file's whole footer JSON: ``blobs`` and the file's ``properties``."""
    where = puffin_path
    input_file = io.new_input(puffin_path)
    try:
        size = len(input_file)
    except FileNotFoundError:
        raise ExecutionError(f"Puffin file {where} is missing", hint=_HINT_MISSING) from None
    if size < 2 * len(PUFFIN_MAGIC) + _FOOTER_STRUCT:
        raise ExecutionError(
            f"Puffin file {where}: {size} bytes, too short for a Puffin file", hint=_HINT_DAMAGED
        )
    tail = _read_range(io, puffin_path, size - _FOOTER_STRUCT, _FOOTER_STRUCT, where)
    payload_size = struct.unpack_from("<i", tail, 0)[0]
    flags = tail[4:8]
    if tail[8:] != PUFFIN_MAGIC:
        raise ExecutionError(
            f"Puffin file {where}: no Puffin magic at its end (cut short?)", hint=_HINT_DAMAGED
        )
    footer_start = size - _FOOTER_STRUCT - payload_size - len(PUFFIN_MAGIC)
    if payload_size < 0 or footer_start < len(PUFFIN_MAGIC):
        raise ExecutionError(
            f"Puffin file {where}: a footer of {payload_size} bytes does not fit in {size}",
            hint=_HINT_DAMAGED,
        )
    if flags[0] & 1 or any(flags[1:]) or flags[0] & ~1:
        # bit 0: the footer is LZ4-compressed; Iceberg Java writes it uncompressed by default
        raise ExecutionError(
            f"Puffin file {where}: footer flags {flags.hex()} (compressed or unknown): not supported",
            hint="icesql reads Puffin footers written uncompressed, as Iceberg writes them by default",
        )
    head = _read_range(io, puffin_path, 0, len(PUFFIN_MAGIC), where)
    footer = _read_range(io, puffin_path, footer_start, len(PUFFIN_MAGIC) + payload_size, where)
    if head != PUFFIN_MAGIC or footer[: len(PUFFIN_MAGIC)] != PUFFIN_MAGIC:
        raise ExecutionError(
            f"Puffin file {where}: no Puffin magic where the format puts it", hint=_HINT_DAMAGED
        )
    try:
        metadata = json.loads(footer[len(PUFFIN_MAGIC) :].decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ExecutionError(
            f"Puffin file {where}: its footer is not JSON ({e})", hint=_HINT_DAMAGED
        ) from None
    if not isinstance(metadata, dict) or not isinstance(metadata.get("blobs"), list):
        raise ExecutionError(f"Puffin file {where}: its footer lists no blobs", hint=_HINT_DAMAGED)
    return metadata


def _encode(positions: Any) -> tuple[bytes, int]:
    """The blob and its cardinality."""
    pos = np.asarray(positions)
    if pos.dtype.kind not in "iu":
        if pos.size:
            raise TypeError(f"row positions must be integers, not {pos.dtype}")
        pos = pos.astype(np.int64)
    pos = pos.ravel()
    if pos.dtype.kind == "u" and pos.size and int(pos.max()) >= 2**63:
        raise ValueError(f"row position {int(pos.max())} is not below 2^63")
    pos = pos.astype(np.int64, copy=False)
    if pos.size and int(pos.min()) < 0:
        raise ValueError(f"row position {int(pos.min())} is negative")
    keys = pos >> 32
    max_key = int(keys.max()) if pos.size else -1
    if max_key > MAX_KEY:
        raise ValueError(f"row position {int(pos.max())} is past the largest a deletion vector holds")
    ordered = pos.size < 2 or not bool(np.any(pos[1:] < pos[:-1]))
    bounds = np.searchsorted(keys, np.arange(max_key + 2)) if ordered and max_key > 0 else None
    parts = [DV_MAGIC, struct.pack("<Q", max_key + 1)]
    cardinality = 0
    for key in range(max_key + 1):
        if max_key == 0:
            low = pos
        elif bounds is not None:
            low = pos[bounds[key] : bounds[key + 1]]
        else:
            low = pos[keys == key]
        low32 = (low & 0xFFFFFFFF).astype(np.uint32)
        if not ordered:
            # CRoaring adds sorted values several times faster than unsorted ones, more than
            # the sort costs (1M positions: 35 + 6 ms against 130)
            low32.sort()
        # from an array('I'): no Python int per value; repeats are dropped by the bitmap
        bitmap = BitMap(array("I", low32.tobytes()))
        bitmap.run_optimize()
        cardinality += len(bitmap)
        parts += [struct.pack("<I", key), bitmap.serialize()]
    vector = b"".join(parts)
    return struct.pack(">I", len(vector)) + vector + struct.pack(">I", zlib.crc32(vector)), cardinality


def _decode(blob: memoryview, where: str) -> tuple[Any, int]:
    """The sorted positions of a blob and their count."""

    def bad(what: str) -> ExecutionError:
        return ExecutionError(f"deletion vector{' ' + where if where else ''}: {what}", hint=_HINT_DAMAGED)

    if len(blob) < 4 + len(DV_MAGIC) + 8 + 4:
        raise bad(f"{len(blob)} bytes, too short for a deletion-vector-v1 blob")
    length = int.from_bytes(blob[:4], "big")
    if length + 8 != len(blob):
        raise bad(f"the blob is {len(blob)} bytes but says its vector is {length} (expected {len(blob) - 8})")
    vector = blob[4 : 4 + length]
    if vector[:4] != DV_MAGIC:
        raise bad(
            f"magic {bytes(vector[:4]).hex()}, expected {DV_MAGIC.hex()} (not a deletion-vector-v1 blob)"
        )
    crc = zlib.crc32(vector)
    expected = int.from_bytes(blob[4 + length :], "big")
    if crc != expected:
        raise bad(f"CRC 0x{crc:08x}, expected 0x{expected:08x}")
    count = int.from_bytes(vector[4:12], "little")
    end = len(vector)
    if count > MAX_KEY + 1 or count * 12 > end - 12:
        raise bad(f"{count} bitmaps cannot fit in {end} bytes")
    chunks = []
    total = 0
    last_key = -1
    at = 12
    for _ in range(count):
        if at + 4 > end:
            raise bad("the vector ends inside its bitmaps")
        key = int.from_bytes(vector[at : at + 4], "little")
        if key > MAX_KEY or key <= last_key:
            raise bad(f"bitmap key {key} after {last_key} (keys ascend, at most {MAX_KEY})")
        last_key = key
        at += 4
        size, cardinality = _bitmap_extent(vector, at, end, bad)
        try:
            bitmap = BitMap.deserialize(vector[at : at + size])  # type: ignore[arg-type]  # any buffer, no copy
        except ValueError as e:
            raise bad(f"bitmap of key {key} does not deserialize ({e})") from None
        if len(bitmap) != cardinality:
            raise bad(f"bitmap of key {key} holds {len(bitmap)} positions, its header says {cardinality}")
        at += size
        if cardinality:
            low = np.frombuffer(bitmap.to_array(), dtype=np.uint32).astype(np.int64)
            chunks.append(low + (key << 32) if key else low)
            total += cardinality
    if at != end:
        raise bad(f"{end - at} bytes after its last bitmap")
    if not chunks:
        return np.empty(0, dtype=np.int64), 0
    return (chunks[0] if len(chunks) == 1 else np.concatenate(chunks)), total


def _bitmap_extent(buf: memoryview, at: int, end: int, bad: Any) -> tuple[int, int]:
    """The size in bytes and the cardinality of the 32-bit portable Roaring bitmap at ``at``,
    from its headers (pyroaring deserializes a bitmap but does not say where it ended)."""

    def u16s(start: int, count: int) -> Any:
        if start + 2 * count > end:
            raise bad("a bitmap's header runs past the vector's end")
        return np.frombuffer(buf, dtype="<u2", count=count, offset=start)

    if at + 8 > end:
        raise bad("the vector ends inside a bitmap's header")
    cookie = int.from_bytes(buf[at : at + 4], "little")
    if cookie & 0xFFFF == _SERIAL_COOKIE:
        n = (cookie >> 16) + 1
        flag_bytes = (n + 7) // 8
        if at + 4 + flag_bytes > end:
            raise bad("a bitmap's header runs past the vector's end")
        flags = np.frombuffer(buf, dtype=np.uint8, count=flag_bytes, offset=at + 4)
        run_flags = np.unpackbits(flags, bitorder="little")[:n].astype(bool)
        p = at + 4 + flag_bytes
        has_offsets = n >= _NO_OFFSET_THRESHOLD
    elif cookie == _SERIAL_COOKIE_NO_RUNS:
        n = int.from_bytes(buf[at + 4 : at + 8], "little")
        if n > 65536:
            raise bad(f"a bitmap with {n} containers")
        run_flags = np.zeros(n, dtype=bool)
        p = at + 8
        has_offsets = True
    else:
        raise bad(f"a bitmap's cookie {cookie:#x} is not a portable Roaring bitmap's")
    if n == 0:
        return p - at, 0
    header = u16s(p, 2 * n)
    cards = header[1::2].astype(np.int64) + 1
    p += 4 * n
    if has_offsets:
        # each container's offset from the cookie: only the last container needs measuring
        if p + 4 * n > end:
            raise bad("a bitmap's offset header runs past the vector's end")
        last = int.from_bytes(buf[p + 4 * (n - 1) : p + 4 * n], "little")
        p += 4 * n
        measured = [n - 1]
        start = at + last
        if start < p:
            raise bad("a bitmap's offsets point inside its header")
    else:
        measured = list(range(n))
        start = p
    for i in measured:
        if run_flags[i]:
            if start + 2 > end:
                raise bad("the vector ends inside a run container")
            start += 2 + 4 * int.from_bytes(buf[start : start + 2], "little")
        elif cards[i] <= _ARRAY_MAX:
            start += 2 * int(cards[i])
        else:
            start += 8192
    if start > end:
        raise bad("a bitmap's containers run past the vector's end")
    return start - at, int(cards.sum())


def _read_range(io: Any, path: str, offset: int, length: int, where: str) -> bytes:
    """Bytes ``offset`` to ``offset + length`` of a file, all of them or an ``ExecutionError``."""
    try:
        with io.new_input(path).open() as f:
            f.seek(offset)
            data = f.read(length)
    except FileNotFoundError:
        raise ExecutionError(f"Puffin file {where} is missing", hint=_HINT_MISSING) from None
    except OSError as e:
        raise ExecutionError(f"Puffin file {where}: {e}", hint=_HINT_DAMAGED) from None
    if len(data) != length:
        raise ExecutionError(
            f"Puffin file {where}: cut short, {len(data)} of {length} bytes at offset {offset}",
            hint=_HINT_DAMAGED,
        )
    return bytes(data)


__all__ = [
    "CREATED_BY",
    "DV_BLOB_TYPE",
    "DeletionVector",
    "dv_blob",
    "dv_positions",
    "puffin_file_metadata",
    "puffin_footer",
    "read_dv",
    "write_puffin",
]
