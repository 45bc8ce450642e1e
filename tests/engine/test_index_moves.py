"""The key index following a rewrite by the sink's own maintenance from where the rewrite wrote
each row (``follow.movable``, ``follow._Moves``): the safety checks, on plain Arrow tables.

The whole path (a real sink, a real rewrite, the index compared with a rebuild from the table)
is ``tests/engine/test_maintainer.py::test_a_table_fed_only_by_run_once_is_compacted_at_the_end_of_a_run``
and the soaks beside it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from icesql.engine.index.follow import NotMoved, TableChanges, _Moves, movable

KEY = [pa.field("id", pa.int64())]


def moved(ids: list[int], path: str = "new.parquet") -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "__path": pa.array([path] * len(ids), pa.string()),
            "__pos": pa.array(range(len(ids)), pa.int64()),
        }
    )


def changes(**kw: object) -> TableChanges:
    base = {
        "snapshots": 1,
        "removed": frozenset({"old.parquet"}),
        "added": ("new.parquet",),
        "position_deletes": (),
        "added_rows": 3,
        "others": 1,
    }
    base.update(kw)
    return TableChanges(**base)  # type: ignore[arg-type]


def test_a_rewrite_alone_is_followed_from_where_it_wrote_the_rows() -> None:
    assert movable(changes(), moved([1, 2, 3]))


@pytest.mark.parametrize(
    "why, kw",
    [
        # rows another writer appended and the rewrite took in are unknown to the index
        ("another writer's snapshot too", {"others": 2}),
        ("a file added that the rewrite did not write", {"added": ("new.parquet", "foreign.parquet")}),
        # rows of the new files deleted at once (deletes carried over): not all of them are live
        ("position deletes added", {"position_deletes": ("d.parquet",)}),
        ("nothing added", {"added": ()}),
    ],
)
def test_anything_but_a_rewrite_alone_is_followed_by_reading_the_files(why: str, kw: dict[str, object]) -> None:
    assert not movable(changes(**kw), moved([1, 2, 3])), why
    assert not movable(changes(), None)


def test_each_entry_moves_to_where_its_key_was_written() -> None:
    m = _Moves(moved([30, 10, 20]), KEY)
    stale = pa.table({"id": pa.array([10, 30], pa.int64())})
    went = m.of(stale).sort_by("id")
    assert went.to_pylist() == [
        {"id": 10, "__path": "new.parquet", "__pos": 1},
        {"id": 30, "__path": "new.parquet", "__pos": 0},
    ]


def test_an_entry_whose_key_was_not_written_or_was_written_twice_stops_the_follow() -> None:
    """A key the rewrite did not write (the index and the table disagree) or wrote twice (two
    rows of the key): the entries cannot be moved one to one, and the index is rebuilt instead
    (``open_index`` catches the error), never pointed at a wrong row."""
    with pytest.raises(NotMoved):
        _Moves(moved([1, 2]), KEY).of(pa.table({"id": pa.array([1, 5], pa.int64())}))
    with pytest.raises(NotMoved):
        _Moves(moved([1, 1, 2]), KEY).of(pa.table({"id": pa.array([1, 2], pa.int64())}))
