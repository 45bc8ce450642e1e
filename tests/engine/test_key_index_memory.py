"""The key index's shards in memory: ``__path`` is a dictionary, and older shards still load.

No Spark: the shard functions (``index.shard``), the files (``index.store``) and the base writer
of a rebuild (``build.WriteBaseTask``) are exercised directly on a local index directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from icesql.engine.base.wire import SHARD
from icesql.engine.index import shard as S
from icesql.engine.index.build import WriteBaseTask
from icesql.engine.index.store import IndexStore

KEY_FIELDS = [pa.field("id", pa.int64())]
KEY = ["id"]
# object-store paths as long as a real table's (~120 characters)
PATHS = [
    f"s3://analytics-warehouse-bucket/lakehouse/sales.db/orders_cdc/data/region=eu/"
    f"{i:05d}-7-3f2a9c1e-8b4d-4e6f-9a1b-2c3d4e5f6a7b-00001.parquet"
    for i in range(5)
]

# the schemas the index had before ``__path`` was dictionary-encoded (its files hold these)
OLD_ENTRY = pa.schema([("id", pa.int64()), ("__path", pa.string()), ("__pos", pa.int64())])
OLD_DELTA = pa.schema([*OLD_ENTRY, ("__removed", pa.bool_())])


def store(tmp_path: Path) -> IndexStore:
    return IndexStore(str(tmp_path / "table"), "sink", {})


def plain_entries(n: int, paths: list[str] = PATHS) -> pa.Table:
    """``n`` entries spread over ``paths``, with plain string paths (the old in-memory form)."""
    per = -(-n // len(paths))
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "__path": pa.array([paths[i // per] for i in range(n)], pa.string()),
            "__pos": pa.array([i % per for i in range(n)], pa.int64()),
        },
        schema=OLD_ENTRY,
    )


def old_delta(removed: list[int], added: pa.Table) -> pa.Table:
    """A delta as the index wrote it before: removed keys with null path and position."""
    n = len(removed)
    gone = pa.table(
        {
            "id": pa.array(removed, pa.int64()),
            "__path": pa.nulls(n, pa.string()),
            "__pos": pa.nulls(n, pa.int64()),
            "__removed": pa.array([True] * n),
        },
        schema=OLD_DELTA,
    )
    new = added.cast(OLD_ENTRY).append_column("__removed", pa.array([False] * added.num_rows))
    return pa.concat_tables([gone, new])


def as_rows(t: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(zip(*(t.column(c).to_pylist() for c in ["id", "__path", "__pos"]), strict=True))


def keys(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


def test_a_loaded_shard_holds_each_path_once() -> None:
    n = 200_000
    plain = plain_entries(n)
    entries = S.load(lambda _name: plain, ["b"], KEY_FIELDS)
    path_type = entries.schema.field(S.PATH).type
    assert pa.types.is_dictionary(path_type)
    assert path_type.index_type == pa.int32() and path_type.value_type == pa.string()
    assert sorted(entries.column(S.PATH).chunk(0).dictionary.to_pylist()) == sorted(PATHS)
    # 8 bytes of key, 4 of path index, 8 of position per entry, plus the few paths once
    assert entries.nbytes <= n * (8 + 4 + 8) + 64 * 1024
    # the old form: every entry carries its path (~120 bytes)
    assert plain.nbytes >= n * len(PATHS[0])
    assert entries.nbytes * 5 < plain.nbytes
    assert as_rows(entries) == as_rows(plain)


def test_a_shard_written_before_the_encoding_loads_and_looks_up_the_same(tmp_path: Path) -> None:
    st = store(tmp_path)
    base = plain_entries(1_000)
    # a batch replaced keys 3 and 500 (their new rows in a new file) and deleted key 7
    new_file = PATHS[0].replace("00000-7", "00099-8")
    added = pa.table(
        {
            "id": pa.array([3, 500], pa.int64()),
            "__path": [new_file, new_file],
            "__pos": pa.array([0, 1], pa.int64()),
        },
        schema=OLD_ENTRY,
    )
    st.write_table("s00000/b-old.parquet", base)
    st.write_table("s00000/d-old.parquet", old_delta([3, 500, 7], added))
    assert pq.read_schema(st.path("s00000/b-old.parquet")).field("__path").type == pa.string()
    chain = ["s00000/b-old.parquet", "s00000/d-old.parquet"]

    # what the old code held: the same chain applied with plain strings
    expected = pa.concat_tables(
        [base.filter(pa.compute.invert(pa.compute.is_in(base.column("id"), pa.array([3, 500, 7])))), added]
    )
    for read in (st.read_entries, st.read_table):
        entries = S.load(read, chain, KEY_FIELDS)
        assert pa.types.is_dictionary(entries.schema.field(S.PATH).type)
        assert as_rows(entries) == as_rows(expected)
        wanted = keys([3, 7, 10, 500, 999, 5_000])
        found = S.lookup(entries, wanted, KEY)
        assert as_rows(found) == as_rows(S.lookup(expected, wanted, KEY))
        assert as_rows(found) == [
            (3, new_file, 0),
            (10, PATHS[0], 10),
            (500, new_file, 1),
            (999, PATHS[4], 199),
        ]

    # the upgraded sink appends its own (dictionary) delta to the old chain, and writes a new base
    entries = S.load(st.read_entries, chain, KEY_FIELDS)
    more = pa.table(
        {"id": pa.array([10], pa.int64()), "__path": [new_file], "__pos": pa.array([2], pa.int64())}
    )
    st.write_table("s00000/d-new.parquet", S.delta(keys([10, 999]), more, KEY_FIELDS))
    after = S.apply(entries, keys([10, 999]), more, KEY)
    reloaded = S.load(st.read_entries, [*chain, "s00000/d-new.parquet"], KEY_FIELDS)
    assert as_rows(reloaded) == as_rows(after)
    assert (10, new_file, 2) in as_rows(reloaded) and not any(r[0] == 999 for r in as_rows(reloaded))
    st.write_table("s00000/b-new.parquet", after)
    assert pa.types.is_dictionary(pq.read_schema(st.path("s00000/b-new.parquet")).field("__path").type)
    assert as_rows(S.load(st.read_entries, ["s00000/b-new.parquet"], KEY_FIELDS)) == as_rows(after)


def test_position_deletes_get_plain_paths_sorted_by_file_and_position() -> None:
    # paths whose dictionary order (first seen) differs from their string order
    paths = [PATHS[3], PATHS[1], PATHS[4]]
    entries = S.load(lambda _name: plain_entries(30, paths), ["b"], KEY_FIELDS)
    found = S.plain_paths(S.lookup(entries, keys([29, 0, 15, 12, 1, 25]), KEY))
    assert found.schema.field(S.PATH).type == pa.string()
    ordered = found.sort_by([(S.PATH, "ascending"), (S.POS, "ascending")])
    assert list(zip(ordered.column(S.PATH).to_pylist(), ordered.column(S.POS).to_pylist(), strict=True)) == [
        (PATHS[1], 2),
        (PATHS[1], 5),
        (PATHS[3], 0),
        (PATHS[3], 1),
        (PATHS[4], 5),
        (PATHS[4], 9),
    ]


def test_the_paths_of_files_no_entry_points_to_are_dropped() -> None:
    entries = S.load(lambda _name: plain_entries(10, PATHS[:2]), ["b"], KEY_FIELDS)
    new_file = PATHS[2]
    added = pa.table(
        {"id": pa.array([0], pa.int64()), "__path": [new_file], "__pos": pa.array([0], pa.int64())}
    )
    after = S.apply(entries, keys([0, 1, 2, 3, 4]), added, KEY)  # every row of PATHS[0] replaced
    assert after.column(S.PATH).num_chunks == 1
    assert sorted(after.column(S.PATH).chunk(0).dictionary.to_pylist()) == sorted([PATHS[1], new_file])
    assert as_rows(after) == sorted([(0, new_file, 0), *[(i, PATHS[1], i - 5) for i in range(5, 10)]])


def test_a_chain_of_several_dictionaries_is_joined_and_looked_up(tmp_path: Path) -> None:
    st = store(tmp_path)
    chain = []
    for i, p in enumerate(PATHS):  # one delta per file: each has its own dictionary
        added = pa.table({"id": pa.array([i], pa.int64()), "__path": [p], "__pos": pa.array([i], pa.int64())})
        name = f"s00000/d-{i}.parquet"
        st.write_table(name, S.delta(keys([100 + i]), added, KEY_FIELDS))
        chain.append(name)
    entries = S.load(st.read_entries, chain, KEY_FIELDS)
    assert as_rows(entries) == [(i, PATHS[i], i) for i in range(len(PATHS))]
    assert entries.column(S.PATH).chunk(0).dictionary.to_pylist() == PATHS
    # a table of several chunks with differing dictionaries (as a load concatenates them)
    pieces = pa.concat_tables([S.load(st.read_entries, [c], KEY_FIELDS) for c in chain])
    assert as_rows(S.lookup(pieces, keys([1, 3]), KEY)) == [(1, PATHS[1], 1), (3, PATHS[3], 3)]
    assert as_rows(S.remove_keys(pieces, keys([1, 3]), KEY)) == [(i, PATHS[i], i) for i in (0, 2, 4)]


def test_a_rebuild_writes_dictionary_bases(tmp_path: Path) -> None:
    st = store(tmp_path)
    plain = plain_entries(25_000)
    shard = pa.array([i % 2 for i in range(plain.num_rows)], pa.int32())
    batches = plain.append_column(SHARD, shard).to_batches(max_chunksize=10_000)  # as Spark sends them
    out = pa.Table.from_batches(list(WriteBaseTask(st, 0, 1)(iter(batches)))).to_pylist()
    assert sorted((r["shard"], r["keys"]) for r in out) == [(0, 12_500), (1, 12_500)]
    loaded = []
    for r in out:
        assert pa.types.is_dictionary(pq.read_schema(st.path(r["name"])).field("__path").type)
        loaded.append(S.load(st.read_entries, [r["name"]], KEY_FIELDS))
    assert as_rows(pa.concat_tables([S.plain_paths(t) for t in loaded])) == as_rows(plain)


def test_removing_keys_of_one_column_is_the_anti_join_of_composite_ones() -> None:
    """One KEY column takes a set lookup, several take Acero's anti join: the same entries go.
    A key may have several entries (another writer appended it), a removed key may have none, a
    null removes nothing, and the batch's key type may be narrower than the index's."""
    import random

    rng = random.Random(7)
    ids = [rng.randrange(500) for _ in range(2_000)] + [None, None]
    paths = pa.array([PATHS[i % len(PATHS)] for i in range(len(ids))]).dictionary_encode()
    entries = pa.table({"id": pa.array(ids, pa.int64()), "__path": paths, "__pos": pa.array(range(len(ids)), pa.int64())})
    gone = [rng.randrange(600) for _ in range(300)] + [None]
    removed = pa.table({"id": pa.array(gone, pa.int32())})
    out = S.remove_keys(entries, removed, KEY)
    kept = [n for n, i in enumerate(ids) if i is None or i not in set(gone)]
    assert sorted(out.column("__pos").to_pylist()) == kept
    by_pos = {r["__pos"]: r for r in out.to_pylist()}
    assert all(by_pos[n]["id"] == ids[n] and by_pos[n]["__path"] == PATHS[n % len(PATHS)] for n in kept)
    # the same with a composite KEY (id, k), k constant: the anti join's answer
    both = entries.append_column("k", pa.array([1] * len(ids), pa.int64()))
    gone_both = pa.table({"id": pa.array(gone, pa.int64()), "k": pa.array([1] * len(gone), pa.int64())})
    joined = S.remove_keys(both, gone_both, ["id", "k"])
    assert sorted(joined.column("__pos").to_pylist()) == kept
