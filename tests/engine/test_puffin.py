"""Deletion vectors in Puffin files (``icesql.engine.iceberg.puffin``): round trips over the shapes a
vector takes (several 32-bit keys, runs, bitsets, scattered positions), every way a blob or a file
can be bad, pyiceberg's own reader as a second opinion, and the speed a 1M-position vector needs.

What Iceberg Java writes is checked in ``test_java_v3_tables.py`` (decoding Java's vectors,
re-encoding them to Java's bytes, writing Java's Puffin file again).
"""

from __future__ import annotations

import json
import struct
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO

from icesql.engine.iceberg.puffin import (
    CREATED_BY,
    DV_BLOB_TYPE,
    DeletionVector,
    dv_blob,
    dv_positions,
    puffin_file_metadata,
    puffin_footer,
    read_dv,
    write_puffin,
)
from icesql.errors import ExecutionError

RNG = np.random.default_rng(55)

SHAPES: dict[str, Any] = {
    "one": np.array([0]),
    "three in a row (array, not run: the tie Java keeps as an array)": np.array([0, 1, 2]),
    "scattered": np.sort(RNG.choice(1_000_000, 5000, replace=False)),
    "dense run": np.arange(100, 70_000),
    "runs and gaps": np.concatenate([np.arange(0, 100_000, 3), np.arange(200_000, 300_000)]),
    "bitset containers": np.flatnonzero(RNG.random(300_000) < 0.3),
    "unsorted with repeats": RNG.integers(0, 50_000, 20_000),
    "above 2^32 (keys 0, 1, 3)": np.array([5, 2**32, 2**32 + 7, 3 * 2**32 + 1]),
    "only above 2^32 (empty bitmaps for keys 0 and 1)": np.arange(2 * 2**32, 2 * 2**32 + 10),
    "last position of a 32-bit key": np.array([2**32 - 1, 2**32]),
}


@pytest.mark.parametrize("positions", list(SHAPES.values()), ids=list(SHAPES))
def test_round_trip(positions: Any) -> None:
    blob = dv_blob(positions)
    back = dv_positions(blob, "test")
    assert back.dtype == np.int64
    np.testing.assert_array_equal(back, np.unique(positions))
    # the framing: length, magic, CRC as the spec lays them out
    (length,) = struct.unpack(">I", blob[:4])
    assert length == len(blob) - 8
    assert blob[4:8] == bytes.fromhex("D1D33964")
    assert struct.unpack(">I", blob[-4:])[0] == zlib.crc32(blob[4:-4])


def test_keys_are_dense_as_java_writes_them() -> None:
    """Java keeps a bitmap per key up to the largest (empty ones included) and writes them all."""
    blob = dv_blob(np.array([3 * 2**32 + 1]))
    (count,) = struct.unpack("<Q", blob[8:16])
    assert count == 4
    empty = bytes.fromhex("3a30000000000000")  # a portable bitmap with no containers
    assert blob[16:52] == b"".join(struct.pack("<I", k) + empty for k in range(3))


def test_empty_vector() -> None:
    """Java never writes an empty vector; its blob (no bitmaps) still decodes, as Java's reader
    takes it, but no Puffin file holds one."""
    blob = dv_blob(np.array([], dtype=np.int64))
    assert blob[8:16] == bytes(8)
    assert dv_positions(blob).size == 0
    with pytest.raises(ValueError, match="nothing deleted"):
        write_puffin(
            PyArrowFileIO().new_output("/nonexistent/never.puffin"),
            {"a.parquet": np.array([], dtype=np.int64)},
        )
    with pytest.raises(ValueError, match="at least one"):
        write_puffin(PyArrowFileIO().new_output("/nonexistent/never.puffin"), {})


@pytest.mark.parametrize(
    "positions, error",
    [
        (np.array([-1]), "negative"),
        (np.array([(2**31 - 1) * 2**32]), "largest"),
        (np.array([2**64 - 1], dtype=np.uint64), "2\\^63"),
        (np.array([1.5]), "integers"),
    ],
)
def test_positions_a_vector_cannot_hold(positions: Any, error: str) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        dv_blob(positions)


def test_pyiceberg_reads_what_icesql_writes(tmp_path: Path) -> None:
    """pyiceberg 0.12's reader (slow, its own code) decodes the file to the same positions."""
    from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
    from pyiceberg.table.puffin import PuffinFile

    # pyiceberg's to_vector fails ("Invalid null value") on a vector whose first bitmaps are
    # empty, which Java writes too (positions only above 2^32); decoded apart below
    shapes = {name: p for name, p in SHAPES.items() if not name.startswith("only above")}
    vectors = {f"s3://b/t/data/{i}.parquet": positions for i, positions in enumerate(shapes.values())}
    path = tmp_path / "dvs.puffin"
    write_puffin(PyArrowFileIO().new_output(str(path)), vectors)
    dvs = deletion_vectors_from_puffin_file(PuffinFile(path.read_bytes()))
    theirs = {dv.referenced_data_file: dv.to_vector() for dv in dvs}
    assert set(theirs) == set(vectors)
    for name, positions in vectors.items():
        np.testing.assert_array_equal(
            np.asarray(theirs[name].to_numpy(), dtype=np.int64), np.unique(positions)
        )
    path.unlink()
    write_puffin(
        PyArrowFileIO().new_output(str(path)),
        {"a.parquet": SHAPES["only above 2^32 (empty bitmaps for keys 0 and 1)"]},
    )
    (dv,) = deletion_vectors_from_puffin_file(PuffinFile(path.read_bytes()))
    assert [list(b) for b in dv._bitmaps] == [[], [], list(range(10))]


def test_write_then_read(tmp_path: Path) -> None:
    io = PyArrowFileIO()
    vectors = {
        "s3://b/t/data/z.parquet": np.array([9, 3, 3, 7]),
        "s3://b/t/data/a.parquet": np.arange(10, 20),
    }
    path = str(tmp_path / "x-deletes.puffin")
    size, written = write_puffin(io.new_output(path), vectors)
    assert size == Path(path).stat().st_size
    # one blob per data file, in sorted path order, right after the header magic
    assert [dv.referenced_data_file for dv in written] == sorted(vectors)
    assert written[0] == DeletionVector("s3://b/t/data/a.parquet", 10, 4, written[0].content_size_in_bytes)
    assert written[1].content_offset == 4 + written[0].content_size_in_bytes
    assert written[1].cardinality == 3
    for dv in written:
        got = read_dv(
            io,
            path,
            dv.content_offset,
            dv.content_size_in_bytes,
            dv.referenced_data_file,
            cardinality=dv.cardinality,
        )
        np.testing.assert_array_equal(got, np.unique(vectors[dv.referenced_data_file]))
    blobs = puffin_footer(io, path)
    assert blobs == [
        {
            "type": DV_BLOB_TYPE,
            "fields": [2147483645],
            "snapshot-id": -1,
            "sequence-number": -1,
            "offset": dv.content_offset,
            "length": dv.content_size_in_bytes,
            "properties": {
                "referenced-data-file": dv.referenced_data_file,
                "cardinality": str(dv.cardinality),
            },
        }
        for dv in written
    ]
    assert puffin_file_metadata(io, path)["properties"] == {"created-by": CREATED_BY}
    assert CREATED_BY.startswith("icesql ")
    data = Path(path).read_bytes()
    assert data[:4] == b"PFA1" and data[-4:] == b"PFA1" and data[-8:-4] == bytes(4)
    (payload,) = struct.unpack("<i", data[-12:-8])
    footer = data[-12 - payload - 4 : -12]
    assert footer[:4] == b"PFA1" and json.loads(footer[4:])["blobs"] == blobs
    # the footer is compact JSON, as Java's FileMetadataParser writes it
    assert b"\": " not in footer and b", \"" not in footer
    with pytest.raises(FileExistsError):
        write_puffin(io.new_output(path), vectors)


# -- bad blobs: each one line naming where, with a hint --------------------------------------


def _bad(blob: bytes, match: str) -> None:
    with pytest.raises(ExecutionError, match=match) as e:
        dv_positions(blob, "f.puffin at offset 4")
    assert "deletion vector f.puffin at offset 4: " in e.value.message
    assert "\n" not in e.value.message and e.value.hint


GOOD = dv_blob(np.array([1, 5, 2**32 + 3, *range(100, 200)]))


def _with_crc(vector: bytes) -> bytes:
    """A blob framing ``vector`` (magic included) with a correct length and CRC."""
    return struct.pack(">I", len(vector)) + vector + struct.pack(">I", zlib.crc32(vector))


def test_wrong_magic() -> None:
    _bad(_with_crc(b"\x00\x00\x00\x00" + GOOD[8:-4]), "magic 00000000, expected d1d33964")


def test_bad_crc() -> None:
    flipped = bytearray(GOOD)
    flipped[20] ^= 0x40
    _bad(bytes(flipped), "CRC 0x[0-9a-f]{8}, expected 0x")


def test_cut_blob() -> None:
    for cut in (len(GOOD) - 1, len(GOOD) // 2, 12, 3, 0):
        _bad(GOOD[:cut], "bytes")


def test_wrong_length() -> None:
    _bad(struct.pack(">I", len(GOOD) - 7) + GOOD[4:], "says its vector is")
    _bad(GOOD + b"\x00", "says its vector is")


def test_vector_shorter_or_longer_than_its_bitmaps() -> None:
    vector = GOOD[4:-4]
    _bad(_with_crc(vector + b"\x00\x00"), "bytes after its last bitmap")
    _bad(_with_crc(vector[:-3]), "past the vector's end|ends inside|does not deserialize")
    more = vector[:4] + struct.pack("<Q", 3) + vector[12:]
    _bad(_with_crc(more), "ends inside its bitmaps")


def test_keys_out_of_order() -> None:
    empty = bytes.fromhex("3a30000000000000")
    vector = (
        b"\xd1\xd3\x39\x64"
        + struct.pack("<Q", 2)
        + struct.pack("<I", 1)
        + empty
        + struct.pack("<I", 0)
        + empty
    )
    _bad(_with_crc(vector), "bitmap key 0 after 1")


def test_not_a_roaring_bitmap() -> None:
    vector = (
        b"\xd1\xd3\x39\x64" + struct.pack("<Q", 1) + struct.pack("<I", 0) + b"\x01\x02\x03\x04" + bytes(8)
    )
    _bad(_with_crc(vector), "cookie")


def test_no_where() -> None:
    with pytest.raises(ExecutionError) as e:
        dv_positions(GOOD[:-1] + bytes([GOOD[-1] ^ 1]))
    assert e.value.message.startswith("deletion vector: CRC")


# -- bad files ------------------------------------------------------------------------------


@pytest.fixture
def puffin(tmp_path: Path) -> tuple[str, list[DeletionVector]]:
    path = str(tmp_path / "d.puffin")
    _, written = write_puffin(
        PyArrowFileIO().new_output(path), {"a.parquet": np.arange(50), "b.parquet": np.array([7])}
    )
    return path, written


def test_file_cut_short(puffin: tuple[str, list[DeletionVector]]) -> None:
    path, written = puffin
    data = Path(path).read_bytes()
    last = written[-1]
    Path(path).write_bytes(data[: last.content_offset + last.content_size_in_bytes - 2])
    io = PyArrowFileIO()
    with pytest.raises(
        ExecutionError, match=r"d.puffin at offset \d+ \(\d+ bytes\) for b.parquet: cut short, \d+ of \d+"
    ):
        read_dv(io, path, last.content_offset, last.content_size_in_bytes, "b.parquet")
    # the first vector is whole still
    first = written[0]
    np.testing.assert_array_equal(
        read_dv(io, path, first.content_offset, first.content_size_in_bytes), np.arange(50)
    )
    with pytest.raises(ExecutionError, match="no Puffin magic at its end"):
        puffin_footer(io, path)


def test_range_past_the_end(puffin: tuple[str, list[DeletionVector]]) -> None:
    path, _ = puffin
    size = Path(path).stat().st_size
    with pytest.raises(ExecutionError, match="cut short, 0 of 60 bytes"):
        read_dv(PyArrowFileIO(), path, size + 100, 60)


def test_range_that_is_not_a_blob(puffin: tuple[str, list[DeletionVector]]) -> None:
    path, written = puffin
    dv = written[0]
    with pytest.raises(ExecutionError, match="says its vector is"):
        read_dv(PyArrowFileIO(), path, dv.content_offset, dv.content_size_in_bytes + 4)
    with pytest.raises(ExecutionError, match="not a blob's place"):
        read_dv(PyArrowFileIO(), path, 0, dv.content_size_in_bytes)


def test_cardinality_must_match_the_manifest(puffin: tuple[str, list[DeletionVector]]) -> None:
    path, written = puffin
    dv = written[0]
    with pytest.raises(ExecutionError, match="50 positions, its manifest entry says 49"):
        read_dv(PyArrowFileIO(), path, dv.content_offset, dv.content_size_in_bytes, cardinality=49)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ExecutionError, match="is missing"):
        read_dv(PyArrowFileIO(), str(tmp_path / "gone.puffin"), 4, 40)
    with pytest.raises(ExecutionError, match="is missing"):
        puffin_footer(PyArrowFileIO(), str(tmp_path / "gone.puffin"))


def test_footer_damage(puffin: tuple[str, list[DeletionVector]]) -> None:
    path, _ = puffin
    io = PyArrowFileIO()
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:-12] + struct.pack("<i", len(data)) + data[-8:])
    with pytest.raises(ExecutionError, match="does not fit"):
        puffin_footer(io, path)
    Path(path).write_bytes(data[:-8] + b"\x01\x00\x00\x00" + data[-4:])
    with pytest.raises(ExecutionError, match="compressed or unknown"):
        puffin_footer(io, path)
    (payload,) = struct.unpack("<i", data[-12:-8])
    start = len(data) - 12 - payload
    Path(path).write_bytes(data[:start] + b"}" + data[start + 1 :])
    with pytest.raises(ExecutionError, match="not JSON"):
        puffin_footer(io, path)
    Path(path).write_bytes(b"XXXX" + data[4:])
    with pytest.raises(ExecutionError, match="no Puffin magic where"):
        puffin_footer(io, path)


# -- speed ----------------------------------------------------------------------------------


def test_a_million_positions_fast() -> None:
    """The key index hands over unsorted positions; a 1M-position vector (scattered over 20M rows:
    ~300 bitset containers) encodes and decodes in well under 100 ms (about 45 + 2 ms here)."""
    positions = RNG.integers(0, 20_000_000, 1_000_000)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        back = dv_positions(dv_blob(positions))
        best = min(best, time.perf_counter() - start)
    np.testing.assert_array_equal(back, np.unique(positions))
    assert best < 0.1 * 3, f"{best * 1000:.0f} ms"  # x3: slack for a loaded two-core machine
