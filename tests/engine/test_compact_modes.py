"""Compaction without Spark: bin-packing, deletes of both kinds, the thresholds, rebasing.

Tables are built like a sink builds them (``tests.support.iceberg_tables``); every table is
read by DuckDB and DataFusion before and after, and must give the same rows (position deletes
are also checked against pyiceberg's own reader, which applies them).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.commit.snapshot import last_committed
from icesql.engine.maintenance.compact import CompactMode, compact_table, plan_compaction
from icesql.plan import MaintenancePolicy
from tests.support.iceberg_tables import (
    data,
    equality_deletes,
    live_paths,
    position_deletes,
    read_rows,
    sink_commit,
    sink_table,
    sql_catalog,
)


@pytest.fixture
def catalog(tmp_path: Path) -> Any:
    return sql_catalog(tmp_path)


def entries(table: Any) -> dict[str, tuple[int, int]]:
    """Live data file path -> (data sequence number, the snapshot that added it)."""
    table.refresh()
    return {
        e["data_file"]["file_path"]: (e["sequence_number"], e["snapshot_id"])
        for e in table.inspect.entries().to_pylist()
        if e["status"] != 2 and e["data_file"]["content"] == 0
    }


def ids(rows: list[tuple[Any, ...]]) -> list[int]:
    return sorted(r[0] for r in rows)


def test_bin_pack_merges_small_files_and_leaves_large_ones_alone(catalog: Any) -> None:
    table = sink_table(catalog, partition_by="region")
    big = data(table, range(0, 20_000), v="big" * 20, region="eu")
    sink_commit(table, 0, big)
    for i in range(5):  # five small files in 'eu', two in 'us'
        sink_commit(table, 1 + i, data(table, range(100_000 + i * 10, 100_000 + i * 10 + 10), region="eu"))
    for i in range(2):
        sink_commit(table, 6 + i, data(table, [200_000 + i], region="us"))
    target = 2 * big[0].file_size_in_bytes  # the big file is 1/2 the target: under 3/4, but no small one
    policy = MaintenancePolicy(target_file_size=target, compaction_minimum_files=5)
    before = read_rows(table)
    big_entry = entries(table)[big[0].file_path]

    plan = plan_compaction(table, mode=CompactMode.AUTO, policy=policy)
    chosen = {f.path for f in plan.rewrite}
    assert big[0].file_path not in chosen  # large, and not of the small files' size class
    assert len(chosen) == 5, plan.reasons  # the five similar small 'eu' files; 'us' has only two

    result = compact_table(table, mode=CompactMode.AUTO, policy=policy)
    assert result.mode is CompactMode.AUTO and not result.skipped
    assert set(result.rewritten_files) == chosen and len(result.added_files) == 1
    assert (result.data_files_before, result.data_files_after, result.data_files_kept) == (8, 4, 3)
    after = entries(table)
    assert after[big[0].file_path] == big_entry  # same file, same sequence number, same snapshot
    assert read_rows(table) == before
    assert table.current_snapshot().summary["icesql.commit-reason"] == "compact"
    assert last_committed(table, "sink-a") == (1, 7)  # carried by the compaction's snapshot

    # nothing left worth doing: 'us' has two tiny files, fewer than COMPACTION MINIMUM FILES
    again = compact_table(table, mode=CompactMode.AUTO, policy=policy)
    assert again.skipped and again.data_files_after == 4


def test_small_files_that_fill_a_target_file_are_merged_whatever_their_sizes(catalog: Any) -> None:
    table = sink_table(catalog, upsert=False)
    start = 0
    for i, n in enumerate([10, 1000, 3000]):  # rows: files of three size classes (a factor 3 apart)
        sink_commit(table, i, data(table, range(start, start + n)))
        start += n
    policy = MaintenancePolicy(compaction_minimum_files=3)
    plan = plan_compaction(table, mode=CompactMode.AUTO, policy=policy, target_file_size=10 << 20)
    sizes = sorted(f.size for f in plan.data)
    assert len({int(math.log(s, 3)) for s in sizes}) == 3, sizes
    assert plan.empty  # three small files, but no size class holds three
    target = sum(sizes)  # together they fill a target-size file, and each is under 3/4 of it
    assert sizes[-1] < 0.75 * target
    plan = plan_compaction(table, mode=CompactMode.AUTO, policy=policy, target_file_size=target)
    assert {f.path for f in plan.rewrite} == live_paths(table)[0]


def test_position_deletes_are_applied(catalog: Any) -> None:
    table = sink_table(catalog)
    f1 = data(table, range(0, 10))
    f2 = data(table, range(10, 20))
    sink_commit(table, 0, [*f1, *f2])
    sink_commit(table, 1, data(table, range(20, 25)))
    pos = position_deletes(table, {f1[0].file_path: [0, 3, 9], f2[0].file_path: [5]})
    sink_commit(table, 2, [], [pos])
    table.refresh()
    expected = sorted(set(range(25)) - {0, 3, 9, 15})
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == expected  # pyiceberg applies them
    assert ids(read_rows(table)) == expected

    result = compact_table(table)  # FULL, as icesql compact
    assert result.deleted_rows == 4 and result.delete_files_before == 1 and result.delete_files_after == 0
    assert pos.file_path in result.removed_delete_files
    assert set(live_paths(table)) == {0}
    assert ids(read_rows(table)) == expected


def test_a_file_with_many_deleted_rows_is_rewritten_alone(catalog: Any) -> None:
    """The healthy file of the partition (full size, few deletes) stays, with its delete file."""
    table = sink_table(catalog)
    heavy = data(table, range(0, 10))
    light = data(table, range(10, 2010))
    sink_commit(table, 0, [*heavy, *light])
    sink_commit(table, 1, [], [position_deletes(table, {heavy[0].file_path: [0, 1, 2, 3, 4]})])
    light_delete = position_deletes(table, {light[0].file_path: [7]})
    sink_commit(table, 2, [], [light_delete])
    before = read_rows(table)
    policy = MaintenancePolicy(delete_ratio=0.3, compaction_minimum_files=5)
    target = light[0].file_size_in_bytes  # the light file is full-size: not a small one
    result = compact_table(table, mode=CompactMode.AUTO, policy=policy, max_file_size=target)
    assert result.rewritten_files == (heavy[0].file_path,), result.reasons
    assert result.deleted_rows == 5
    # the light file keeps its delete file, which still applies to it; the heavy one's is gone
    assert live_paths(table).get(1) == {light_delete.file_path}
    assert result.delete_files_before == 2 and result.delete_files_after == 1
    assert read_rows(table) == before


def test_more_delete_files_than_allowed_are_applied(catalog: Any) -> None:
    table = sink_table(catalog)
    sink_commit(table, 0, data(table, range(0, 1000)))
    for i in range(4):  # an upsert per commit: one equality delete file each
        sink_commit(table, 1 + i, data(table, [i], v=f"u{i}"), equality_deletes(table, [i]))
    before = read_rows(table)
    policy = MaintenancePolicy(maximum_delete_files=3, delete_ratio=1.0)
    plan = plan_compaction(table, mode=CompactMode.AUTO, policy=policy)
    assert any("MAXIMUM DELETE FILES 3" in r for r in plan.reasons)
    result = compact_table(table, mode=CompactMode.AUTO, policy=policy)
    assert result.delete_files_before == 4 and result.delete_files_after == 0
    assert read_rows(table) == before
    under = compact_table(table, mode=CompactMode.AUTO, policy=policy)
    assert under.skipped


def sink_files(table: Any, commits: int) -> list[Any]:
    """``commits`` commits of the sink, of ten ids each (0-9, 10-19, ...); their data files."""
    files = []
    for i in range(commits):
        f = data(table, range(i * 10, i * 10 + 10))
        files += f
        sink_commit(table, i, f)
    return files


def file_ids(table: Any, path: str) -> list[int]:
    """The ``id`` of each row of data file ``path``, in order."""
    import pyarrow.parquet as pq

    with table.io.new_input(path).open() as stream:
        return pq.read_table(stream, columns=["id"]).column("id").to_pylist()


def delete_keys_in(table: Any, new_files: Any, keys: set[int]) -> Any:
    """A position delete file deleting the rows of ``keys`` in ``new_files`` (a sink's carry-over)."""
    out = {f.file_path: [i for i, k in enumerate(file_ids(table, f.file_path)) if k in keys] for f in new_files}
    return position_deletes(table, {p: ps for p, ps in out.items() if ps})


def test_a_sink_commit_during_auto_compaction_is_rebased_not_lost(catalog: Any) -> None:
    """The sink upserts while the compaction writes: its equality deletes apply to the rewritten
    rows (they carry the sequence number of the snapshot that was read), so the compaction
    commits on top of the sink's commit instead of starting over, and no deleted row returns."""
    table = sink_table(catalog)
    for i in range(6):
        sink_commit(table, i, data(table, range(i * 10, i * 10 + 10)))
    sink = catalog.load_table("ns.t")
    calls: list[int] = []

    def the_sink_commits() -> None:
        if not calls:
            sink_commit(sink, 6, data(sink, [3, 100], v="new"), equality_deletes(sink, [3, 15]))
        calls.append(1)

    result = compact_table(table, mode=CompactMode.AUTO, before_commit=the_sink_commits)
    # the table is reloaded after the wait: the commit goes on top at once, no attempt fails
    assert result.rebased == 1 and result.attempts == 1 and len(calls) == 1
    rows = read_rows(table)
    assert [r for r in rows if r[0] in (3, 15, 100)] == [(3, "eu", "new"), (100, "eu", "new")]
    assert len(rows) == 60 - 1 + 1
    assert last_committed(table, "sink-a") == (1, 6)  # the sink's progress, carried on top


def test_a_position_delete_on_a_rewritten_file_makes_compaction_start_over(catalog: Any) -> None:
    table = sink_table(catalog)
    files = sink_files(table, 5)
    sink = catalog.load_table("ns.t")
    calls: list[int] = []

    def the_sink_deletes_a_rewritten_row() -> None:
        if not calls:
            sink_commit(sink, 5, [], [position_deletes(sink, {files[0].file_path: [4]})])
        calls.append(1)

    result = compact_table(table, mode=CompactMode.AUTO, before_commit=the_sink_deletes_a_rewritten_row)
    assert result.rebased == 0 and len(calls) == 2 and result.attempts == 2
    assert ids(read_rows(table)) == [i for i in range(50) if i != 4]


def test_a_compaction_that_must_start_over_every_time_gives_up_after_its_retries(catalog: Any) -> None:
    """A sink deletes a row of a rewritten file before every commit and nothing carries the
    deletes over: the compaction starts over ``retries`` times, then fails with a message for
    people, leaving the table as the sink made it and none of the files it wrote."""
    from icesql.errors import ExecutionError

    table = sink_table(catalog)
    files = sink_files(table, 5)
    sink = catalog.load_table("ns.t")
    calls: list[int] = []

    def the_sink_deletes_a_rewritten_row_each_time() -> None:
        calls.append(1)
        sink_commit(sink, 4 + len(calls), [], [position_deletes(sink, {files[0].file_path: [len(calls)]})])

    written_before = set(live_paths(table)[0])
    with pytest.raises(ExecutionError, match="failed after 3 attempts") as e:
        compact_table(table, mode=CompactMode.AUTO, retries=2, before_commit=the_sink_deletes_a_rewritten_row_each_time)
    assert e.value.hint and "stop it" in e.value.hint
    assert len(calls) == 3
    assert ids(read_rows(table)) == [i for i in range(50) if i not in (1, 2, 3)]
    assert set(live_paths(table)[0]) == written_before
    data_dir = Path(table.location().removeprefix("file://")) / "data"
    on_disk = {str(p) for p in data_dir.rglob("*.parquet") if "pos-deletes" not in p.name}
    assert on_disk == {p.removeprefix("file://") for p in written_before}


@pytest.mark.parametrize("when", ["writing", "waiting for a gap"])
def test_a_stopped_compaction_ends_before_its_commit_and_leaves_no_file(catalog: Any, when: str) -> None:
    """A rewrite beside a sink whose sink stopped (``stopped()`` true): it ends with
    ``CompactionStopped`` while writing (before its next input file) or before it would wait for
    a gap, the table as the sink made it and none of the files it wrote on disk."""
    from icesql.engine.maintenance.compact import CompactionStopped

    table = sink_table(catalog)
    files = sink_files(table, 5)
    before = set(live_paths(table)[0])
    asked: list[int] = []

    def stopped() -> bool:  # the sink stops while the rewrite reads its second file, or after
        asked.append(1)
        return len(asked) >= (2 if when == "writing" else len(files) + 1)

    waited: list[int] = []
    with pytest.raises(CompactionStopped):
        compact_table(table, mode=CompactMode.AUTO, before_commit=lambda: waited.append(1), stopped=stopped)
    assert waited == []
    assert len(asked) == (2 if when == "writing" else len(files) + 1)
    assert set(live_paths(table)[0]) == before and ids(read_rows(table)) == list(range(50))
    data_dir = Path(table.location().removeprefix("file://")) / "data"
    assert {str(p) for p in data_dir.rglob("*.parquet")} == {p.removeprefix("file://") for p in before}


def test_a_failing_wait_for_a_gap_leaves_no_file(catalog: Any) -> None:
    """``before_commit`` raising (a sink's maintainer whose sink stopped while it waited for a
    gap): the compaction ends with that error, and the files it wrote are removed (no snapshot
    references them yet)."""
    table = sink_table(catalog)
    sink_files(table, 5)
    before = set(live_paths(table)[0])

    def the_sink_stopped() -> None:
        raise RuntimeError("the sink stopped")

    with pytest.raises(RuntimeError, match="the sink stopped"):
        compact_table(table, mode=CompactMode.AUTO, before_commit=the_sink_stopped)
    assert set(live_paths(table)[0]) == before
    data_dir = Path(table.location().removeprefix("file://")) / "data"
    assert {str(p) for p in data_dir.rglob("*.parquet")} == {p.removeprefix("file://") for p in before}


def test_position_deletes_committed_meanwhile_are_carried_over_by_the_sinks_hook(catalog: Any) -> None:
    """What a sink's key index does: it knows which keys it deleted from a rewritten file, finds
    them in the files the compaction wrote and deletes them there, in the compaction's commit."""

    table = sink_table(catalog)
    files = sink_files(table, 5)
    sink = catalog.load_table("ns.t")
    calls: list[int] = []
    deleted_keys = {4, 12}

    def the_sink_deletes_rewritten_rows() -> None:
        if not calls:
            pos = position_deletes(sink, {files[0].file_path: [4], files[1].file_path: [2]})
            sink_commit(sink, 5, [], [pos])
        calls.append(1)

    seen: list[Any] = []

    def carry_over(conflicts: Any, new_files: Any) -> list[Any]:
        seen.extend(conflicts)
        return [delete_keys_in(table, new_files, deleted_keys)]

    result = compact_table(
        table, mode=CompactMode.AUTO, before_commit=the_sink_deletes_rewritten_rows, carry_over=carry_over
    )
    assert result.rebased == 1 and len(calls) == 1 and result.carried_deletes == 1
    assert [d.path for d in seen] and set(d.path for d in seen) <= set(result.removed_delete_files)
    assert ids(read_rows(table)) == sorted(set(range(50)) - deleted_keys)
    assert table.current_snapshot().summary.operation.value == "overwrite"
    assert last_committed(table, "sink-a") == (1, 5)


def test_deletes_are_carried_over_before_the_wait_and_only_the_new_ones_in_it(
    catalog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sink deletes a rewritten row while the compaction writes, and another while it waits
    for a gap: the first is carried over before the wait (outside the sink's lock), the gap
    carries only the second, and both superseded position deletes go with the commit."""

    import icesql.engine.maintenance.compact as compact_module

    table = sink_table(catalog)
    files = sink_files(table, 5)
    sink = catalog.load_table("ns.t")
    rewrite = compact_module._rewrite

    def rewrite_then_the_sink_deletes(*args: Any, **kwargs: Any) -> Any:
        out = rewrite(*args, **kwargs)
        sink_commit(sink, 5, [], [position_deletes(sink, {files[0].file_path: [4]})])  # key 4
        return out

    monkeypatch.setattr(compact_module, "_rewrite", rewrite_then_the_sink_deletes)
    calls: list[int] = []

    def the_sink_deletes_while_it_waits() -> None:
        calls.append(1)
        sink_commit(sink, 6, [], [position_deletes(sink, {files[1].file_path: [2]})])  # key 12

    carried_for: list[list[str]] = []

    def carry_over(conflicts: Any, new_files: Any) -> list[Any]:
        carried_for.append(sorted(d.path for d in conflicts))
        gone = set()
        for d in conflicts:
            for path, positions in compact_module.position_deletes(table.io, d).items():
                keys = file_ids(table, path)
                gone |= {keys[p] for p in positions}
        return [delete_keys_in(table, new_files, gone)]

    result = compact_table(
        table, mode=CompactMode.AUTO, before_commit=the_sink_deletes_while_it_waits, carry_over=carry_over
    )
    assert len(calls) == 1 and len(carried_for) == 2
    assert len(carried_for[0]) == len(carried_for[1]) == 1 and carried_for[0] != carried_for[1]
    assert result.carried_deletes == 2 and result.rebased == 2 and result.attempts == 1
    assert set(carried_for[0] + carried_for[1]) <= set(result.removed_delete_files)
    assert ids(read_rows(table)) == sorted(set(range(50)) - {4, 12})
    assert last_committed(table, "sink-a") == (1, 6)


def test_full_mode_refuses_to_rebase(catalog: Any) -> None:
    """``icesql compact`` promises a table without deletes: it starts over instead."""
    table = sink_table(catalog)
    for i in range(3):
        sink_commit(table, i, data(table, range(i * 10, i * 10 + 10)))
    sink = catalog.load_table("ns.t")
    calls: list[int] = []

    def the_sink_upserts() -> None:
        if not calls:
            sink_commit(sink, 3, data(sink, [1], v="new"), equality_deletes(sink, [1]))
        calls.append(1)

    result = compact_table(table, before_commit=the_sink_upserts)
    assert result.rebased == 0 and len(calls) == 2
    assert set(live_paths(table)) == {0} and result.delete_files_after == 0
    assert [r for r in read_rows(table) if r[0] == 1] == [(1, "eu", "new")]


@pytest.mark.java
def test_java_reads_position_deletes_applied_and_a_rebased_compaction(catalog: Any) -> None:
    from tests.support.readers import canonical_digest, read_java

    table = sink_table(catalog)
    files = sink_files(table, 5)
    sink_commit(table, 5, [], [position_deletes(table, {files[1].file_path: [0, 1]})])
    sink = catalog.load_table("ns.t")
    calls: list[int] = []

    def the_sink_upserts() -> None:
        if not calls:
            sink_commit(sink, 6, data(sink, [30], v="new"), equality_deletes(sink, [30, 40]))
        calls.append(1)

    result = compact_table(table, mode=CompactMode.AUTO, before_commit=the_sink_upserts)
    assert result.rebased == 1
    rows = read_rows(table)
    got = read_java(table.metadata_location)
    want = canonical_digest([{"id": i, "region": r, "v": v} for i, r, v in rows])
    assert got["rows"] == want["rows"] == 50 - 2 - 1 and got["digest"] == want["digest"]
