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
def test_anything_but_a_rewrite_alone_is_followed_by_reading_the_files(
    why: str, kw: dict[str, object]
) -> None:
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


def entries(chunks: list[list[tuple[int | None, str | None, int]]]) -> pa.Table:
    """Index entries (id, __path dictionary-encoded per chunk, __pos), one chunk per list."""
    from icesql.engine.index import shard as S

    schema = S.entry_schema(KEY)
    tables = []
    for rows in chunks:
        t = pa.table(
            {
                "id": pa.array([r[0] for r in rows], pa.int64()),
                "__path": pa.array([r[1] for r in rows], pa.string()).dictionary_encode(),
                "__pos": pa.array([r[2] for r in rows], pa.int64()),
            }
        )
        tables.append(t.cast(schema))
    return pa.concat_tables(tables)


def test_the_entries_gone_are_found_on_the_paths_dictionary_as_on_the_paths_themselves() -> None:
    """``follow._gone`` compares the few files of a shard's dictionary instead of every entry's
    path: the same mask as comparing each entry's path, over chunks with different dictionaries,
    a null path and positions deleted in a file that also stays."""
    import pyarrow.compute as pc

    from icesql.engine.index.follow import _gone

    t = entries(
        [
            [(1, "a", 0), (2, "b", 0), (3, "a", 1), (4, None, 0)],
            [(5, "c", 0), (6, "b", 1), (7, "c", 1), (8, "b", 2)],
        ]
    )
    removed = frozenset({"a"})
    deleted = {"b": pa.array([1, 2], pa.int64()), "zz": pa.array([0], pa.int64())}
    paths = t.column("__path").cast(pa.string()).to_pylist()
    positions = t.column("__pos").to_pylist()
    expected = [
        p in removed or (p in deleted and pos in deleted[p].to_pylist())
        for p, pos in zip(paths, positions, strict=True)
    ]
    mask = _gone(t, removed, deleted)
    assert mask is not None
    assert (
        pc.fill_null(mask, False).to_pylist()
        == expected
        == [True, False, True, False, False, True, False, True]
    )
    assert _gone(t, frozenset(), {}) is None


def test_a_shard_lookup_by_one_key_column_finds_what_the_join_finds() -> None:
    """``shard.lookup`` on one KEY column is a set lookup: the same entries as the join it
    replaced (nulls match nothing, keys absent from the shard find nothing, a key with two
    entries finds both), in the shard's order."""
    from icesql.engine.index import shard as S

    t = entries([[(1, "a", 0), (2, "a", 1), (None, "a", 2), (2, "b", 0), (9, "b", 1)]])
    keys = pa.table({"id": pa.array([2, 9, None, 42], pa.int64())})
    found = S.lookup(t, keys, ["id"])
    joined = t.join(keys.group_by(["id"]).aggregate([]), keys=["id"], join_type="inner").select(
        t.column_names
    )
    assert sorted(found.to_pylist(), key=str) == sorted(joined.to_pylist(), key=str)
    assert found.column("id").to_pylist() == [2, 2, 9]


def test_the_shard_cache_answers_only_for_the_chain_it_was_given(tmp_path) -> None:
    """A batch's task, and the follow after a rewrite, take a shard from the process's cache
    only in the state its chain names: a shard whose chain moved on is loaded again."""
    from icesql.engine.index import shard as S

    root = str(tmp_path / "index")
    before = entries([[(1, "a", 0)]])
    S.remember(root, 0, ("s0-b",), before)
    assert S.cached(root, 0, ["s0-b"]) is before
    assert S.cached(root, 0, ("s0-b", "s0-d1")) is None  # another chain: not this state
    assert S.cached(root, 1, ("s1-b",)) is None
