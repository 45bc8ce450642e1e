"""The rows a data file's deletes leave alive (``deletes._surviving``, what compaction rewrites and
icesql's own reads return), and the bookkeeping columns built without a Python object per row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from icesql.engine.base.arrays import repeated, row_numbers
from icesql.engine.iceberg.deletes import _surviving


def _table(n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64()), "v": pa.array([f"r{i}" for i in range(n)])})


def test_positions_from_several_delete_files_drop_each_row_once() -> None:
    # two delete files name row 3, out of order; row 40 is past the file's end (ignored, as a set
    # difference over the file's rows ignored it)
    drop = np.concatenate([np.array([7, 3, 0], np.int64), np.array([3, 9, 40], np.int64)])
    out, dropped, kept = _surviving(_table(10), drop, [])
    assert out.column("id").to_pylist() == [1, 2, 4, 5, 6, 8]
    assert dropped == 4
    assert kept.dtype == np.int64 and kept.tolist() == [1, 2, 4, 5, 6, 8]


def test_positions_and_equality_keys_together_keep_file_order() -> None:
    keys = pa.table({"id": pa.array([8, 2, 2, 55], pa.int64())})  # repeated and unknown keys
    out, dropped, kept = _surviving(_table(10), np.array([5, 1], np.int64), [(["id"], keys)])
    assert out.column("id").to_pylist() == [0, 3, 4, 6, 7, 9]
    assert out.column("v").to_pylist() == ["r0", "r3", "r4", "r6", "r7", "r9"]
    assert dropped == 4
    assert kept.tolist() == [0, 3, 4, 6, 7, 9]


def test_nothing_deleted_returns_the_file_whole() -> None:
    t = _table(5)
    out, dropped, kept = _surviving(t, np.array([], np.int64), [])
    assert out.equals(t) and dropped == 0 and kept.tolist() == [0, 1, 2, 3, 4]
    out, dropped, kept = _surviving(t, None, [(["id"], pa.table({"id": pa.array([], pa.int64())}))])
    assert out.equals(t) and dropped == 0 and kept.tolist() == [0, 1, 2, 3, 4]


def test_bookkeeping_columns_match_the_python_built_ones() -> None:
    assert row_numbers(4, 10).equals(pa.array(range(10, 14), pa.int64()))
    assert row_numbers(0).type == pa.int64() and len(row_numbers(0)) == 0
    assert repeated("f.parquet", 3, pa.string()).equals(pa.array(["f.parquet"] * 3, pa.string()))
    assert repeated(True, 2, pa.bool_()).equals(pa.array([True, True]))
    assert repeated(7, 0, pa.int64()).type == pa.int64()


def test_every_row_deleted_by_key_leaves_an_empty_file() -> None:
    keys = pa.table({"id": pa.array([0, 1, 2], pa.int64())})
    out, dropped, kept = _surviving(_table(3), None, [(["id"], keys)])
    assert out.num_rows == 0 and out.schema == _table(3).schema
    assert dropped == 3 and kept.dtype == np.int64 and len(kept) == 0
