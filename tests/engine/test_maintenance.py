"""Table maintenance without Spark: snapshot expiration, orphan-file cleanup, manifest rewrite,
the planner, and a sink's progress surviving all of them.

Tables are built like a sink builds them (``tests.support.iceberg_tables``: icesql's writer and
``commit.commit`` with a sink id and progress) on a local SQLite catalog; DuckDB and DataFusion
read them before and after and must agree. ``test_maintenance_on_weed`` runs each operation once
against ``weed mini``'s REST catalog and S3.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from icesql.engine.backends.spark.dropbox import DropBox
from icesql.engine.commit.snapshot import CARRIED_PROGRESS, last_committed, last_committed_snapshot
from icesql.engine.commit.staging import StagedBatch, Staging, StagingDamaged
from icesql.engine.iceberg.table_files import path_key
from icesql.engine.iceberg.writer import WrittenFile
from icesql.engine.maintenance import (
    StepKind,
    Weight,
    expire_snapshots,
    maintain_table,
    plan_maintenance,
    remove_old_metadata,
    remove_orphan_files,
    rewrite_manifests,
    sink_snapshots,
    staged_files,
)
from icesql.engine.maintenance.compact import CompactMode, compact_table
from icesql.plan import MaintenancePolicy
from icesql.repl.format import format_maintenance_step
from tests.support.iceberg_tables import (
    data,
    equality_deletes,
    live_paths,
    local,
    read_rows,
    sink_commit,
    sink_history,
    sink_table,
    sql_catalog,
)

SOON = 10.0  # seconds: "older than now + SOON" takes every snapshot and file, however new


@pytest.fixture
def catalog(tmp_path: Path) -> Any:
    return sql_catalog(tmp_path)


def foreign_append(table: Any, ids: list[int]) -> None:
    """Another writer's commit (pyiceberg's own append, no icesql summary)."""
    table.append(
        pa.table(
            {"id": pa.array(ids, pa.int64()), "region": ["eu"] * len(ids), "v": ["foreign"] * len(ids)},
            schema=table.schema().as_arrow(),
        )
    )


def files_on_disk(table: Any) -> set[str]:
    root = local(table.location())
    return {path_key(str(p)) for p in root.rglob("*") if p.is_file()}


def metadata_files(table: Any) -> set[str]:
    """The ``.metadata.json`` files in ``table``'s metadata directory."""
    return {path_key(str(p)) for p in (local(table.location()) / "metadata").glob("*.metadata.json")}


def logged_metadata(table: Any) -> set[str]:
    """The metadata files ``table`` keeps: the current one and those its metadata log lists."""
    table.refresh()
    md = table.metadata
    return {path_key(p) for p in (table.metadata_location, *(e.metadata_file for e in md.metadata_log))}


def short_log_without_deletes(table: Any, versions: int) -> None:
    """A metadata log of ``versions`` files whose commits delete nothing (as a table icesql did
    not create): files older than the log are left in the metadata directory."""
    table.transaction().set_properties(
        {
            "write.metadata.previous-versions-max": str(versions),
            "write.metadata.delete-after-commit.enabled": "false",
        }
    ).commit_transaction()


def referenced_exist(table: Any) -> None:
    """Every file the table's snapshots read is still on disk."""
    table.refresh()
    for snap in table.metadata.snapshots:
        assert local(snap.manifest_list).exists()
        for m in snap.manifests(table.io):
            assert local(m.manifest_path).exists()
            for e in m.fetch_manifest_entry(table.io):
                assert local(e.data_file.file_path).exists(), e.data_file.file_path


# --------------------------------------------------------------------------- progress


def test_last_committed_finds_a_sink_past_expired_parents(catalog: Any) -> None:
    """Expiration leaves gaps in the parent chain; a sink's snapshot beyond one still counts."""
    table = sink_table(catalog)
    sink_commit(table, 5, data(table, [1]), sink_id="sink-a", version=3)
    for i in range(3):
        foreign_append(table, [100 + i])
    sink_commit(table, 9, data(table, [2]), sink_id="sink-b")
    table.refresh()
    between = [s.snapshot_id for s in table.metadata.snapshots][1:4]
    table.maintenance.expire_snapshots().by_ids(between).commit()  # pyiceberg's own, to make the gap
    table.refresh()
    assert len(table.metadata.snapshots) == 2
    assert last_committed(table, "sink-a") == (3, 5)
    assert last_committed(table, "sink-b") == (1, 9)
    assert last_committed(table, "sink-c") is None


def test_a_rolled_back_snapshot_does_not_count(catalog: Any) -> None:
    """A snapshot newer than where the walk ended but off the branch is not the sink's progress."""
    table = sink_table(catalog)
    sink_commit(table, 1, data(table, [1]))
    first = table.current_snapshot().snapshot_id
    sink_commit(table, 2, data(table, [2]))
    with table.manage_snapshots() as ms:
        ms.set_current_snapshot(first)  # roll back: the progress-2 snapshot is off main now
    assert last_committed(table, "sink-a") == (1, 1)


# --------------------------------------------------------------------------- expiration


def test_expire_keeps_each_sinks_progress_and_deletes_what_only_expired_snapshots_used(catalog: Any) -> None:
    table = sink_table(catalog)
    sink_commit(table, 0, data(table, range(0, 10)), sink_id="sink-b", version=2)  # b commits once
    for i in range(1, 8):
        sink_commit(table, i, data(table, [i * 100], v="a"), equality_deletes(table, [i * 100 - 100]))
    for i in range(3):
        foreign_append(table, [1000 + i])
    rows = read_rows(table)
    before = len(table.metadata.snapshots)

    dry = expire_snapshots(table, time.time() + SOON, 2, dry_run=True)
    assert dry.dry_run and len(table.metadata.snapshots) == before and dry.files_deleted > 0
    result = expire_snapshots(table, time.time() + SOON, 2)
    assert result.expired == dry.expired and result.snapshots_after == before - len(result.expired)
    kept = {s.snapshot_id for s in table.metadata.snapshots}
    b = last_committed_snapshot(table, "sink-b")
    a = last_committed_snapshot(table, "sink-a")
    assert b is not None and a is not None
    assert b.snapshot_id in kept and b.snapshot_id in result.protected  # old, kept for sink b
    assert a.snapshot_id in kept  # sink a's newest
    assert (b.version, b.progress) == (2, 0) and (a.version, a.progress) == (1, 7)
    assert len(kept) == 2 + 2  # the two newest, and one per sink
    # the manifest lists of expired snapshots are gone; every file a kept snapshot reads is not
    assert result.files_deleted >= len(result.expired)
    referenced_exist(table)
    assert read_rows(table) == rows

    # a compaction carries both sinks' progress: now their own snapshots may go, and with them
    # the files the compaction replaced, although neither sink commits again
    compacted = compact_table(table)
    assert json.loads(table.current_snapshot().summary[CARRIED_PROGRESS + "sink-b"])["progress"] == 0
    freed = expire_snapshots(table, time.time() + SOON, 1)
    assert [s.snapshot_id for s in table.metadata.snapshots] == [compacted.snapshot_id]
    assert last_committed(table, "sink-a") == (1, 7) and last_committed(table, "sink-b") == (2, 0)
    assert set(compacted.rewritten_files) & files_on_disk(table) == set()
    for path in compacted.rewritten_files:
        assert not local(path).exists()
    assert freed.bytes_deleted > 0
    referenced_exist(table)
    assert read_rows(table) == rows
    assert set(live_paths(table)) == {0}


def test_expire_bounded_by_limit_and_retention(catalog: Any) -> None:
    table = sink_table(catalog, upsert=False)
    for i in range(12):
        sink_commit(table, i, data(table, [i]))
    oldest = sorted(table.metadata.snapshots, key=lambda s: s.sequence_number)
    step = expire_snapshots(table, time.time() + SOON, 1, limit=4)
    assert step.expired == tuple(s.snapshot_id for s in oldest[:4])  # the oldest first
    nothing = expire_snapshots(table, time.time() - 3600, 1)  # all younger than an hour
    assert nothing.skipped and nothing.snapshots_after == 8
    rest = expire_snapshots(table, time.time() + SOON, 3)
    assert rest.snapshots_after == 3 and ids_of(table) == list(range(12))


def ids_of(table: Any) -> list[int]:
    table.refresh()
    return sorted(table.scan().to_arrow().column("id").to_pylist())


# --------------------------------------------------------------------------- orphans


def test_orphan_cleanup_with_an_aggressive_age_spares_staged_and_dropbox_files(
    catalog: Any, tmp_path: Path
) -> None:
    """What a sink killed mid-batch leaves: files written for a batch that never staged (true
    orphans), a staged batch not committed yet, and (Spark Connect) a drop-box record naming
    files the client has not taken yet. With a safety age of zero only the true orphans go."""
    table = sink_table(catalog)
    short_log_without_deletes(table, 3)
    for i in range(6):
        sink_commit(table, i, data(table, [i]))
    rows = read_rows(table)
    home = tmp_path / "home"
    staged = data(table, [100, 101])  # a batch staged, not yet committed
    Staging.for_sink(home, "sink-a").add(
        StagedBatch(batch_id=7, data_files=tuple(WrittenFile.dumps(f) for f in staged))
    )
    dropped = data(table, [200])  # a Spark Connect batch the client has not taken yet
    box = DropBox(table.location(), "sink-a", {})
    box.put(8, 1, [{"content": 0, "file": dropped[0].dumps(), "rows": 1, "bytes": 1}, {"content": 0, "file": "", "rows": 0, "bytes": 0}])
    orphan = data(table, [300])  # a batch killed before it staged: nothing names it
    notes = local(table.location()) / "data" / "README.txt"  # not an Iceberg file: not ours to judge
    notes.write_text("left by someone")
    old_metadata = metadata_files(table) - logged_metadata(table)
    assert old_metadata  # previous-versions-max = 3: older metadata files left the log

    dry = remove_orphan_files(table, time.time() + SOON, protected_paths=lambda: staged_files(home), dry_run=True)
    assert dry.dry_run and all(local(p).exists() for p in dry.deleted)
    result = remove_orphan_files(table, time.time() + SOON, protected_paths=lambda: staged_files(home))
    deleted = {path_key(p) for p in result.deleted}
    assert deleted == {path_key(orphan[0].file_path)} | old_metadata
    assert set(dry.deleted) == set(result.deleted)
    assert result.kept_protected == 2  # the staged file and the drop box's
    assert local(staged[0].file_path).exists() and local(dropped[0].file_path).exists()
    assert box.batch_ids() == [8] and notes.exists()
    referenced_exist(table)
    assert read_rows(table) == rows

    # a staging entry damaged on disk: what it protects is unknown, so nothing is deleted
    entry = home / "sinks" / "sink-a" / "staging" / "00000000000000000007.json"
    intact = entry.read_bytes()
    entry.write_bytes(intact[: len(intact) // 2])
    again = data(table, [301])
    with pytest.raises(StagingDamaged, match="00000000000000000007.json is damaged"):
        remove_orphan_files(table, time.time() + SOON, protected_paths=lambda: staged_files(home))
    assert local(again[0].file_path).exists() and local(staged[0].file_path).exists()
    entry.write_bytes(intact)

    # the sink recovers: it commits the staged batch; the drop-box batch after it
    sink_commit(table, 7, staged)
    sink_commit(table, 8, dropped)
    assert [r[0] for r in read_rows(table)] == [*range(6), 100, 101, 200]


def test_orphan_cleanup_keeps_young_files(catalog: Any) -> None:
    table = sink_table(catalog, upsert=False)
    sink_commit(table, 0, data(table, [1]))
    young = data(table, [2])  # written a moment ago, not committed (a batch in flight)
    result = remove_orphan_files(table, time.time() - 3600)
    assert result.deleted == () and result.kept_recent == 1 and result.orphans == 0
    assert local(young[0].file_path).exists()
    old = time.time() - 7200
    os.utime(local(young[0].file_path), (old, old))
    sliced = remove_orphan_files(table, time.time() - 3600, under="metadata")
    assert sliced.deleted == ()  # listed metadata/ only
    result = remove_orphan_files(table, time.time() - 3600, under="data")
    assert [path_key(p) for p in result.deleted] == [path_key(young[0].file_path)]


# --------------------------------------------------------------------------- metadata files


def test_metadata_cleanup_deletes_only_the_files_older_than_the_log(catalog: Any) -> None:
    """The versions the metadata log dropped go, the oldest first; the current file and the log's
    stay, and so does any file not older than the log (another writer's commit in flight, one that
    lost a race) or whose name carries no version. Planned once versions have dropped out of the
    log, then each time the metadata moved ``metadata_check_versions`` on."""
    table = sink_table(catalog)
    policy = MaintenancePolicy(metadata_check_versions=3)
    assert StepKind.REMOVE_METADATA not in [t.kind for t in plan_maintenance(table, policy)]
    short_log_without_deletes(table, 4)
    for i in range(10):
        sink_commit(table, i, data(table, [i]))
    rows = read_rows(table)
    kept = logged_metadata(table)
    assert len(kept) == 5

    def version(key: str) -> int:
        return int(key.rsplit("/", 1)[-1].split("-", 1)[0])

    oldest = min(version(k) for k in kept)
    current = version(table.metadata_location)
    directory = local(table.metadata_location).parent
    body = local(table.metadata_location).read_bytes()
    planted = [
        directory / f"{current + 1:05d}-{uuid.uuid4()}.metadata.json",  # a commit in flight
        directory / f"{oldest + 1:05d}-{uuid.uuid4()}.metadata.json",  # a commit that lost a race
        directory / f"{uuid.uuid4()}.metadata.json",  # no version
    ]
    for p in planted:
        p.write_bytes(body)
    old = {k for k in metadata_files(table) - kept if not k.endswith(planted[2].name) and version(k) < oldest}
    assert len(old) == current - len(kept) + 1  # every version below the log, none deleted yet

    tasks = plan_maintenance(table, policy)
    assert [t.kind for t in tasks].count(StepKind.REMOVE_METADATA) == 1
    assert [t.kind for t in plan_maintenance(table, policy, metadata_checked=current - 2)].count(
        StepKind.REMOVE_METADATA
    ) == 0
    dry = remove_old_metadata(table, dry_run=True)
    assert dry.dry_run and {path_key(p) for p in dry.deleted} == old and metadata_files(table) >= old
    assert format_maintenance_step(dry).startswith(
        f"remove-metadata: would delete {len(old)} of {len(old) + 8} metadata file(s) older than the metadata log"
    )
    some = remove_old_metadata(table, limit=2)
    assert [version(path_key(p)) for p in some.deleted] == sorted(version(k) for k in old)[:2]
    assert some.remaining == len(old) - 2
    rest = remove_old_metadata(table)
    assert {path_key(p) for p in (*some.deleted, *rest.deleted)} == old and rest.remaining == 0
    assert (rest.kept, rest.kept_unlogged, rest.files_failed) == (5, 3, 0)
    assert metadata_files(table) == kept | {path_key(str(p)) for p in planted}
    for k in kept:  # the current file and the log's are intact
        assert json.loads(local(k).read_text())["table-uuid"] == str(table.metadata.table_uuid)
    assert read_rows(table) == rows
    sink_commit(table, 10, data(table, [10]))
    assert read_rows(table) == [*rows, (10, "eu", "x")]


# --------------------------------------------------------------------------- manifests


def test_rewrite_manifests_keeps_every_entry_as_it_was(catalog: Any) -> None:
    table = sink_table(catalog, partition_by="region")
    for i in range(12):
        region = "eu" if i % 3 else "us"
        sink_commit(table, i, data(table, [i], region=region), equality_deletes(table, [i - 1], region=region))
    rows = read_rows(table)

    def entries() -> set[tuple[Any, ...]]:
        table.refresh()
        return {
            (e["data_file"]["file_path"], e["sequence_number"], e["file_sequence_number"], e["snapshot_id"])
            for e in table.inspect.entries().to_pylist()
            if e["status"] != 2
        }

    before = entries()
    under = rewrite_manifests(table, max_manifests=100)
    assert under.skipped and under.manifests_before == 24
    result = rewrite_manifests(table, max_manifests=10)
    assert (result.manifests_before, result.manifests_after, result.manifests_rewritten) == (24, 2, 24)
    assert result.entries == len(before)
    assert entries() == before
    summary = table.current_snapshot().summary
    assert summary.operation.value == "replace" and summary["icesql.commit-reason"] == "rewrite-manifests"
    assert summary["total-data-files"] == "12" and summary["total-delete-files"] == "12"
    assert last_committed(table, "sink-a") == (1, 11)
    assert read_rows(table) == rows
    assert rewrite_manifests(table, max_manifests=1).skipped  # one per content: nothing to merge


# --------------------------------------------------------------------------- planning


def test_plan_says_what_is_due_and_how_heavy(catalog: Any) -> None:
    table = sink_table(catalog)
    for i in range(8):
        sink_commit(table, i, data(table, [i]), equality_deletes(table, [i - 1]))
    policy = MaintenancePolicy(
        maximum_manifests=10, snapshot_retention=0.0, keep_snapshots=2, maximum_delete_files=5
    )
    now = time.time() + SOON
    tasks = plan_maintenance(table, policy, now)
    kinds = [t.kind for t in tasks]
    assert kinds == [
        StepKind.COMPACT,
        StepKind.REWRITE_MANIFESTS,
        StepKind.EXPIRE,
        StepKind.REMOVE_ORPHANS,
        StepKind.REMOVE_ORPHANS,
    ]
    assert all(t.weight is Weight.SMALL for t in tasks)
    assert [t.under for t in tasks[-2:]] == ["metadata", "data"]
    heavy = plan_maintenance(table, MaintenancePolicy(large_rewrite_bytes=1, maximum_delete_files=5), now)
    assert heavy[0].kind is StepKind.COMPACT and heavy[0].weight is Weight.LARGE
    # a running sink passes when each step last ran: intervals not elapsed, nothing but compaction
    recent = {
        StepKind.EXPIRE: now - 1,
        (StepKind.REMOVE_ORPHANS, "metadata"): now - 1,
        (StepKind.REMOVE_ORPHANS, "data"): now - 1,
    }
    assert [t.kind for t in plan_maintenance(table, policy, now, last_run=recent)][-1] is not StepKind.EXPIRE
    # each orphan slice has its own time: the data slice is due when only the metadata slice
    # ran (two slices sharing one time were each listed only every other interval)
    one_slice = {(StepKind.REMOVE_ORPHANS, "metadata"): now - 1}
    due = [(t.kind, t.under) for t in plan_maintenance(table, policy, now, last_run=one_slice)]
    assert (StepKind.REMOVE_ORPHANS, "data") in due and (StepKind.REMOVE_ORPHANS, "metadata") not in due
    off = MaintenancePolicy(compaction=False, maximum_manifests=1000)
    assert [t.kind for t in plan_maintenance(table, off, now, last_run=recent)] == []

    rows = read_rows(table)
    run = maintain_table(table, policy, sink="s", now=now)
    assert [type(r).__name__ for r in run.results] == [
        "CompactResult",
        "ManifestRewriteResult",
        "ExpireResult",
        "OrphanResult",
        "OrphanResult",
    ]
    assert read_rows(table) == rows
    assert last_committed(table, "sink-a") == (1, 7)
    table.refresh()
    assert len(table.metadata.snapshots) == 2
    assert sink_snapshots(table.metadata)["sink-a"] <= {s.snapshot_id for s in table.metadata.snapshots}
    again = maintain_table(table, policy, sink="s", now=now)
    assert [t.kind for t in again.tasks] == [StepKind.REMOVE_ORPHANS, StepKind.REMOVE_ORPHANS]


def test_expiring_a_history_deletes_only_manifest_lists_while_every_file_is_read(catalog: Any) -> None:
    table = sink_history(sink_table(catalog, upsert=False), 60, merge_every=20)
    rows = ids_of(table)
    result = expire_snapshots(table, time.time() + SOON, 10)
    assert result.snapshots_after == 10 and len(result.expired) == 63 - 10
    # an append-only table reads every file it ever added: the expired snapshots' manifest lists
    # go, and the manifests that the manifest rewrites replaced, no data file
    assert result.files_deleted > len(result.expired)
    assert len(list((local(table.location()) / "data").glob("*.parquet"))) == 60
    referenced_exist(table)
    assert ids_of(table) == rows == list(range(60))


@pytest.mark.slow
def test_one_thousand_snapshots_expire_in_seconds(catalog: Any) -> None:
    table = sink_history(sink_table(catalog, upsert=False), 1000, merge_every=32)
    before = len(table.metadata.snapshots)  # 1000 commits and 32 manifest rewrites
    start = time.monotonic()
    result = expire_snapshots(table, time.time() + SOON, 10)
    took = time.monotonic() - start
    assert result.snapshots_after == 10 and len(result.expired) == before - 10 == 1022
    assert took < 60, took
    print(f"expired {len(result.expired)} snapshots in {took:.2f}s")


@pytest.mark.java
def test_java_reads_a_maintained_table(catalog: Any) -> None:
    """Iceberg's reference reader on a table after every step: compaction (position and equality
    deletes applied), manifest rewrite, expiration (parents cut), orphan cleanup."""
    from tests.support.iceberg_tables import position_deletes
    from tests.support.readers import canonical_digest, read_java

    table = sink_table(catalog, partition_by="region")
    files = []
    for i in range(8):
        region = "eu" if i % 2 else "us"
        f = data(table, range(i * 10, i * 10 + 10), region=region)
        files += f
        sink_commit(table, i, f, equality_deletes(table, [i * 10 - 9], region="eu") if region == "eu" else ())
    sink_commit(table, 8, [], [position_deletes(table, {files[0].file_path: [0, 5]}, partition=("us",))])
    rows = read_rows(table)
    policy = MaintenancePolicy(maximum_manifests=2, snapshot_retention=0.0, keep_snapshots=1)
    run = maintain_table(table, policy, now=time.time() + SOON)
    assert [t.kind for t in run.tasks][:3] == [StepKind.COMPACT, StepKind.REWRITE_MANIFESTS, StepKind.EXPIRE]
    assert read_rows(table) == rows
    got = read_java(table.metadata_location)
    want = canonical_digest([{"id": i, "region": r, "v": v} for i, r, v in rows])
    assert got["rows"] == want["rows"] and got["digest"] == want["digest"]


@pytest.mark.weed
def test_maintenance_on_weed(weed: Any, tmp_path: Path) -> None:
    """Each operation once on weed mini: REST catalog, S3 table bucket, files deleted in S3."""
    from tests.support.iceberg_tables import position_deletes
    from tests.support.readers import read_datafusion, read_duckdb

    s3 = weed.s3_properties()
    catalog = weed.rest_catalog(name="weed")
    name = f"m{int(time.time() * 1000) % 10**9}"
    table = sink_table(catalog, name)
    files = []
    for i in range(6):
        f = data(table, range(i * 10, i * 10 + 10))
        files += f
        sink_commit(table, i, f, equality_deletes(table, [i * 10 - 1]) if i else ())
    sink_commit(table, 6, [], [position_deletes(table, {files[0].file_path: [0, 1]})])
    orphan = data(table, [999])

    def rows() -> list[tuple[Any, ...]]:
        table.refresh()
        duck = sorted(read_duckdb(table.metadata_location, s3=s3))
        assert sorted(read_datafusion(table.metadata_location, s3=s3)) == duck
        return duck

    def keys() -> set[str]:
        prefix = table.location().removeprefix(f"s3://{weed.table_bucket}/")
        return {f"s3://{weed.table_bucket}/{k}" for k in weed.list_keys(prefix=prefix)}

    expected = rows()
    assert [r[0] for r in expected] == [i for i in range(60) if i not in (0, 1, 9, 19, 29, 39, 49)]
    compacted = compact_table(table, mode=CompactMode.AUTO)
    assert not compacted.skipped and compacted.delete_files_after == 0
    merged = rewrite_manifests(table, max_manifests=1)
    assert merged.manifests_before > merged.manifests_after
    expired = expire_snapshots(table, time.time() + SOON, 1)
    assert expired.snapshots_after == 1 and expired.bytes_deleted > 0
    assert last_committed(table, "sink-a") == (1, 6)
    gone = set(compacted.rewritten_files) | set(compacted.removed_delete_files)
    assert gone and not gone & keys()
    cleaned = remove_orphan_files(table, time.time() + SOON)
    assert orphan[0].file_path in cleaned.deleted
    assert orphan[0].file_path not in keys()
    assert rows() == expected
    table.refresh()
    assert table.metadata_location in keys()


def test_a_running_sink_compacts_at_least_every_other_gap_and_the_other_steps_take_turns() -> None:
    """The order ``Maintainer`` runs small steps in, one per gap between a sink's commits: a
    compaction that stays due (each commit adds delete files) is never starved by the other
    steps, nor do they starve behind it."""
    from icesql.engine.maintenance import Task
    from icesql.engine.sink.maintainer import Maintainer

    maintainer = Maintainer(runner=None)
    compact = Task(StepKind.COMPACT, Weight.SMALL, "3 delete files")
    others = [
        Task(StepKind.EXPIRE, Weight.SMALL, "old"),
        Task(StepKind.REMOVE_ORPHANS, Weight.SMALL, "age", under="metadata"),
        Task(StepKind.REMOVE_ORPHANS, Weight.SMALL, "age", under="data"),
    ]
    chosen = [maintainer._next([compact, *others]).kind for _ in range(6)]
    assert chosen[::2] == [StepKind.COMPACT] * 3
    assert chosen[1::2] == [StepKind.EXPIRE, StepKind.REMOVE_ORPHANS, StepKind.REMOVE_ORPHANS]
    assert [maintainer._next([compact]).kind for _ in range(2)] == [StepKind.COMPACT] * 2
    assert maintainer._next(others).kind is StepKind.EXPIRE


def test_a_running_sink_tries_a_failed_metadata_cleanup_again_only_after_more_versions(caplog: Any) -> None:
    """A metadata cleanup that fails (a FileIO that cannot list, a store refusing requests) is
    logged and due again ``metadata_check_versions`` later, not at every commit of the sink."""
    from types import SimpleNamespace

    from icesql.engine.maintenance import Task
    from icesql.engine.sink.maintainer import Maintainer
    from icesql.plan import SinkPlan

    def refuse() -> None:
        raise OSError("the store refused")

    location = f"file:///wh/ns/t/metadata/00042-{uuid.uuid4()}.metadata.json"
    runner = SimpleNamespace(
        name="s",
        table=SimpleNamespace(refresh=refuse, metadata_location=location),
        plan=SinkPlan(name="s", relation="r", catalog_connection="c", namespace=("ns",), table="t"),
        target=SimpleNamespace(io_properties=lambda table: {}),
    )
    maintainer = Maintainer(runner)
    maintainer._run(Task(StepKind.REMOVE_METADATA, Weight.SMALL, "old files"))
    assert maintainer.metadata_checked == 42 and maintainer.runs == 0
    assert "maintenance step remove-metadata failed: the store refused" in caplog.text



def stand_in_runner(commit: Any, *, once: bool = False, staging: Any = None) -> Any:
    """What the maintainer asks of a sink's runner: an append sink (no key index) on table ns.t,
    committing by ``commit``, nothing staged (``staging``: a real, empty staging directory; a
    fresh one unless given), no batch in flight (``once``: a ``run --once``)."""
    import tempfile
    import threading
    from types import SimpleNamespace

    from icesql.engine.commit.staging import Staging
    from icesql.plan import SinkPlan

    table = SimpleNamespace(refresh=lambda: None, current_snapshot=lambda: SimpleNamespace(snapshot_id=7))
    if staging is None:
        staging = Staging(Path(tempfile.mkdtemp(prefix="icesql-stand-in-")) / "staging")
    return SimpleNamespace(
        name="s",
        table=table,
        index=None,
        remote=False,
        plan=SinkPlan(name="s", relation="r", catalog_connection="c", namespace=("ns",), table="t", commit=commit),
        clock=SimpleNamespace(since_commit=lambda: 0.0),
        target=SimpleNamespace(io_properties=lambda t: {}, load_catalog=lambda: SimpleNamespace(load_table=lambda i: table)),
        lock=threading.Lock(),
        staging=staging,
        batch_started=None,
        stop_event=threading.Event(),
        listeners=SimpleNamespace(maintenance=lambda event: None),
        once=once,
    )


def test_a_compaction_that_would_hold_the_next_commit_back_runs_beside_the_sink(
    monkeypatch: Any, caplog: Any
) -> None:
    """A small compaction runs in the gap between two commits while the compactions run there
    lately fit the time left before the next commit is due (a 0.5 s period here); one expected to
    take longer runs beside the sink, only its commit in a gap, and another due step takes the gap.
    Each compaction beside halves the expectation, so compactions come back into the gaps. (The
    steps are stand-ins that take a set time: what is tested is where the maintainer runs them.)"""
    from types import SimpleNamespace

    import icesql.engine.maintenance as maintenance
    import icesql.engine.maintenance.compact as compact_module
    from icesql.engine.maintenance import Task
    from icesql.engine.sink.maintainer import Maintainer
    from icesql.plan import CommitPolicy

    compact = Task(StepKind.COMPACT, Weight.SMALL, "12 small files")
    expire = Task(StepKind.EXPIRE, Weight.SMALL, "old snapshots")
    due = [compact]
    took = [1.4]
    ran: list[tuple[str, StepKind]] = []
    nothing = SimpleNamespace(skipped=True, data_files_after=0, duration=0.0)

    def in_gap(table: Any, task: Task, policy: Any, **kw: Any) -> Any:
        ran.append(("gap", task.kind))
        time.sleep(took[0] if task.kind is StepKind.COMPACT else 0.0)
        if task.kind is StepKind.COMPACT:
            return nothing
        return SimpleNamespace(kind=task.kind, snapshots_before=3, snapshots_after=2, files_deleted=0,
                               bytes_deleted=0, duration=0.0)

    def beside(table: Any, before_commit: Any, **kw: Any) -> Any:
        ran.append(("beside", StepKind.COMPACT))
        before_commit()  # waits for a gap: the runner's lock, nothing staged, no batch
        return nothing

    monkeypatch.setattr(maintenance, "plan_maintenance", lambda *a, **k: list(due))
    monkeypatch.setattr(maintenance, "run_task", in_gap)
    monkeypatch.setattr(compact_module, "compact_table", beside)
    runner = stand_in_runner(CommitPolicy(maximum_period=0.5))
    maintainer = Maintainer(runner)
    caplog.set_level("INFO", logger="icesql.sink")

    maintainer.after_commit()  # nothing known yet: in the gap, where it took 1.4 s
    assert ran == [("gap", StepKind.COMPACT)] and maintainer._gap_seconds >= 0.7
    due[:] = [compact, expire]
    maintainer._last_kind = None
    maintainer.after_commit()  # 0.7 s expected, 0.5 s left: beside; expiration takes the gap
    maintainer.join(10)
    assert sorted(ran[1:]) == [("beside", StepKind.COMPACT), ("gap", StepKind.EXPIRE)]
    assert "maintenance sink=s table=ns.t step=compact beside nothing to rewrite" in caplog.text
    assert 0.35 <= maintainer._gap_seconds < 0.5  # halved
    due[:] = [compact]
    took[0] = 0.0
    maintainer.after_commit()  # 0.35 s expected: back in the gap
    assert ran[3:] == [("gap", StepKind.COMPACT)] and maintainer._gap_seconds < 0.35


def test_a_rewrite_beside_the_sink_stops_with_the_sink(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sink that stops (a ``run --once`` at the end of its input, or ``stop``) has no gap left for
    a rewrite beside it to commit in: the maintainer hands the rewrite the sink's stop, so that it
    ends at once instead of being written to the end and thrown away while the stop waits. (The
    rewrite is a stand-in: what is tested is what the maintainer hands it.)"""
    from types import SimpleNamespace

    import icesql.engine.maintenance as maintenance
    import icesql.engine.maintenance.compact as compact_module
    from icesql.engine.maintenance import Task
    from icesql.engine.sink.maintainer import Maintainer
    from icesql.plan import CommitPolicy

    handed: list[Any] = []

    def beside(table: Any, before_commit: Any, **kw: Any) -> Any:
        handed.append(kw["stopped"])
        return SimpleNamespace(skipped=True, data_files_after=0, duration=0.0)

    large = Task(StepKind.COMPACT, Weight.LARGE, "a big rewrite")
    monkeypatch.setattr(maintenance, "plan_maintenance", lambda *a, **k: [large])
    monkeypatch.setattr(compact_module, "compact_table", beside)
    runner = stand_in_runner(CommitPolicy())
    maintainer = Maintainer(runner)
    maintainer.after_commit()
    maintainer.join(10)
    assert len(handed) == 1 and handed[0]() is False
    runner.stop_event.set()
    assert handed[0]() is True


def test_a_run_once_starts_a_rewrite_beside_the_sink_only_as_its_next_batch_begins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``run --once`` stops after its last batch, so a rewrite beside the sink started after
    that batch's commit has no gap to commit in: it would read and write files only to be thrown
    away (and keep the process up meanwhile). The run starts a due rewrite as its next batch
    begins, planned again after every commit; a run whose input ends starts none. A running sink
    starts it at once. (The rewrite is a stand-in: what is tested is when the maintainer starts it.)"""
    from types import SimpleNamespace

    import icesql.engine.maintenance as maintenance
    import icesql.engine.maintenance.compact as compact_module
    from icesql.engine.maintenance import Task
    from icesql.engine.sink.maintainer import Maintainer
    from icesql.plan import CommitPolicy

    started: list[float] = []

    def beside(table: Any, before_commit: Any, **kw: Any) -> Any:
        started.append(time.monotonic())
        return SimpleNamespace(skipped=True, data_files_after=0, duration=0.0)

    due = [Task(StepKind.COMPACT, Weight.LARGE, "a big rewrite")]
    monkeypatch.setattr(maintenance, "plan_maintenance", lambda *a, **k: list(due))
    monkeypatch.setattr(compact_module, "compact_table", beside)

    once = Maintainer(stand_in_runner(CommitPolicy(), once=True))
    once.after_commit()  # the commit of a batch: the rewrite waits for the next one
    once.join(10)
    assert started == [] and not once.busy()
    once.before_batch()  # another batch begins: the rewrite starts beside it
    once.join(10)
    assert len(started) == 1
    once.after_commit()
    due.clear()
    once.after_commit()  # planned again: nothing due any more, so nothing waits
    once.before_batch()
    once.join(10)
    assert len(started) == 1

    due.append(Task(StepKind.COMPACT, Weight.LARGE, "a big rewrite"))
    running = Maintainer(stand_in_runner(CommitPolicy()))
    running.after_commit()
    running.join(10)
    assert len(started) == 2


@pytest.mark.parametrize("applies_deletes", [True, False])
def test_a_run_once_hands_a_due_rewrite_to_the_next_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, applies_deletes: bool
) -> None:
    """A one-batch ``run --once`` has no gap after its commit for a rewrite, and runs none in its
    foreground (a scheduled run returns as soon as its input is committed): a due rewrite that
    applies delete files is handed to the next run in a durable note (the sink's staging
    directory), and the next run starts it beside its first batch; the note goes once it is done.
    A rewrite that only merges files is left, as before (it would hold a bulk load up to rewrite
    what it just wrote). The real path, real sinks and rewrites on both executors, is
    ``tests/conformance/test_handover.py``; here the rewrite is a stand-in: what is tested is
    when the maintainer runs it."""
    from types import SimpleNamespace

    import icesql.engine.maintenance as maintenance
    import icesql.engine.maintenance.compact as compact_module
    from icesql.engine.commit.staging import Staging
    from icesql.engine.maintenance import Task
    from icesql.engine.sink.maintainer import Maintainer
    from icesql.plan import CommitPolicy

    ran: list[Any] = []

    def rewrite(table: Any, **kw: Any) -> Any:
        ran.append(kw)
        return SimpleNamespace(skipped=True, data_files_after=0, duration=0.0)

    task = Task(StepKind.COMPACT, Weight.LARGE, "5 delete files > 4", applies_deletes=applies_deletes)
    monkeypatch.setattr(maintenance, "plan_maintenance", lambda *a, **k: [task])
    monkeypatch.setattr(compact_module, "compact_table", rewrite)
    monkeypatch.setattr(maintenance, "run_task", lambda table, task, policy, **kw: rewrite(table, **kw))
    staging = Staging(tmp_path / "staging")
    once = Maintainer(stand_in_runner(CommitPolicy(), once=True, staging=staging))
    once.after_commit()  # the batch's commit: put off to a next batch the run will not have
    once.at_end()
    once.join(10)
    assert ran == [] and not once.busy()  # nothing rewritten in the run
    note = staging.rewrite_due()
    if not applies_deletes:
        assert note is None
        return
    assert note is not None and note["reason"] == "5 delete files > 4" and note["snapshot_id"] == 7
    assert Staging(tmp_path / "staging").rewrite_due() == note  # on disk, for another process
    assert [p.name for p in (tmp_path / "staging").iterdir()] == ["rewrite-due"]
    assert staging.pending() == []  # no staged batch for the committer

    following = Maintainer(stand_in_runner(CommitPolicy(), once=True, staging=staging))
    following.at_start()  # the next run: beside its first batch, before any commit
    following.join(10)
    assert len(ran) == 1 and "before_commit" in ran[0]  # beside the sink, committing in a gap
    assert staging.rewrite_due() is None


@pytest.mark.parametrize("applies_deletes", [True, False])
def test_a_run_once_still_compacts_in_the_gaps_between_its_commits(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, applies_deletes: bool
) -> None:
    """The hand-over is for a run's end only: a small compaction due after a ``run --once``'s
    commit (an append sink's merge of small files, or a rewrite of a few delete files) runs in the
    gap after it, as a running sink's, and nothing is left for the next run. (The rewrite is a
    stand-in: what is tested is where the maintainer runs it; a real append table fed by
    ``run --once`` is ``test_maintainer.py::test_an_append_table_fed_only_by_run_once_still_has_its_small_files_merged``.)"""
    from types import SimpleNamespace

    import icesql.engine.maintenance as maintenance
    from icesql.engine.maintenance import Task
    from icesql.engine.sink.maintainer import Maintainer
    from icesql.plan import CommitPolicy

    ran: list[Any] = []
    due = [Task(StepKind.COMPACT, Weight.SMALL, "12 small files", applies_deletes=applies_deletes)]
    monkeypatch.setattr(maintenance, "plan_maintenance", lambda *a, **k: list(due))

    def in_gap(table: Any, task: Any, policy: Any, **kw: Any) -> Any:
        ran.append(task)
        due.clear()
        return SimpleNamespace(skipped=True, data_files_after=0, duration=0.0)

    monkeypatch.setattr(maintenance, "run_task", in_gap)
    staging = Staging(tmp_path / "staging")
    once = Maintainer(stand_in_runner(CommitPolicy(), once=True, staging=staging))
    once.after_commit()  # the batch's commit: the merge runs in the gap after it
    assert len(ran) == 1 and not once.busy()
    once.at_end()
    assert staging.rewrite_due() is None and len(ran) == 1


def test_a_note_of_a_rewrite_due_no_more_is_dropped_and_a_stopped_sink_leaves_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The note is a hint: a run that finds the rewrite due no more (``icesql compact`` did it,
    say) drops it and starts nothing, and so does one under ``COMPACTION = 'off'``. A running
    sink stopped while a rewrite applying delete files ran beside it (ended by the stop,
    uncommitted) leaves the note for its next run. (The rewrite is a stand-in.)"""
    import dataclasses
    import threading

    import icesql.engine.maintenance as maintenance
    import icesql.engine.maintenance.compact as compact_module
    from icesql.engine.maintenance import Task
    from icesql.engine.maintenance.compact import CompactionStopped
    from icesql.engine.sink.maintainer import Maintainer
    from icesql.plan import CommitPolicy

    task = Task(StepKind.COMPACT, Weight.LARGE, "5 delete files > 4", applies_deletes=True)
    due: list[Any] = []
    monkeypatch.setattr(maintenance, "plan_maintenance", lambda *a, **k: list(due))
    started = threading.Event()

    def until_stopped(table: Any, stopped: Any, **kw: Any) -> Any:
        started.set()
        while not stopped():
            time.sleep(0.01)
        raise CompactionStopped("stopped before its commit")

    monkeypatch.setattr(compact_module, "compact_table", until_stopped)
    staging = Staging(tmp_path / "staging")
    staging.set_rewrite_due({"reason": "5 delete files > 4"})
    nothing_due = Maintainer(stand_in_runner(CommitPolicy(), staging=staging))
    nothing_due.at_start()
    assert staging.rewrite_due() is None and not nothing_due.busy() and not started.is_set()

    staging.set_rewrite_due({"reason": "5 delete files > 4"})
    due.append(task)
    off = stand_in_runner(CommitPolicy(), staging=staging)
    off.plan = dataclasses.replace(off.plan, maintenance=MaintenancePolicy(compaction=False))
    Maintainer(off).at_start()
    assert staging.rewrite_due() is None and not started.is_set()

    runner = stand_in_runner(CommitPolicy(), staging=staging)
    running = Maintainer(runner)
    running.after_commit()  # a running sink: the rewrite starts beside it at once
    assert started.wait(10) and running.busy()
    runner.stop_event.set()  # the sink stops: the rewrite ends uncommitted
    running.join(10)
    running.at_stop()
    note = staging.rewrite_due()
    assert note is not None and note["reason"] == "5 delete files > 4"


@pytest.mark.parametrize("applies_deletes", [True, False])
def test_a_run_once_ending_beside_a_rewrite_waits_for_it_only_when_it_applies_deletes(
    monkeypatch: pytest.MonkeyPatch, applies_deletes: bool
) -> None:
    """A multi-batch ``run --once`` whose input ends while a rewrite runs beside it: a rewrite
    that applies delete files is let finish (the stopped sink leaves it the gap to commit in),
    or the table's delete files would pile up run after run; one that only merges files is left
    to the stop, so that the run returns at once. (The rewrite is a stand-in that runs until
    released: what is tested is whether the run's end waits for it.)"""
    import threading
    from types import SimpleNamespace

    import icesql.engine.maintenance as maintenance
    import icesql.engine.maintenance.compact as compact_module
    from icesql.engine.maintenance import Task
    from icesql.engine.sink.maintainer import Maintainer
    from icesql.plan import CommitPolicy

    started, release = threading.Event(), threading.Event()

    def beside(table: Any, **kw: Any) -> Any:
        started.set()
        release.wait(10)
        return SimpleNamespace(skipped=True, data_files_after=0, duration=0.0)

    task = Task(StepKind.COMPACT, Weight.LARGE, "a big rewrite", applies_deletes=applies_deletes)
    monkeypatch.setattr(maintenance, "plan_maintenance", lambda *a, **k: [task])
    monkeypatch.setattr(compact_module, "compact_table", beside)
    once = Maintainer(stand_in_runner(CommitPolicy(), once=True))
    once.after_commit()
    once.before_batch()  # the next batch begins: the rewrite starts beside it
    assert started.wait(10) and once.busy()
    end = threading.Thread(target=once.at_end)  # that batch was the last
    end.start()
    end.join(0.5)
    try:
        assert end.is_alive() is applies_deletes
        assert once.busy()
    finally:
        release.set()
    end.join(10)
    once.join(10)
    assert not end.is_alive() and not once.busy()


def test_a_failed_timed_step_warns_in_one_line_and_waits_its_interval(
    catalog: Any, monkeypatch: Any, caplog: Any
) -> None:
    """An orphan cleanup that cannot run (a damaged staging entry: what it protects is unknown)
    logs one line with icesql's message, not its rendered headline and hint, and is due again
    after its interval, not at the sink's next commit."""
    from types import SimpleNamespace

    import icesql.engine.maintenance as maintenance
    from icesql.engine.maintenance import Task, plan_maintenance
    from icesql.engine.sink.maintainer import Maintainer
    from icesql.plan import SinkPlan

    def damaged(*a: Any, **k: Any) -> Any:
        raise StagingDamaged("staging entry /h/s/00000000000000000018.json is damaged", hint="restore it")

    monkeypatch.setattr(maintenance, "remove_orphan_files", damaged)
    plan = SinkPlan(name="s", relation="r", catalog_connection="c", namespace=("ns",), table="t")
    maintainer = Maintainer(SimpleNamespace(name="s", table=None, plan=plan))
    maintainer._orphan_cutoff = lambda: 0.0  # type: ignore[method-assign]
    maintainer._run(Task(StepKind.REMOVE_ORPHANS, Weight.SMALL, "age", under="data"))
    warnings = [r.getMessage() for r in caplog.records if "remove-orphans failed" in r.getMessage()]
    assert warnings == [
        "sink s: maintenance step remove-orphans failed: staging entry /h/s/00000000000000000018.json is damaged"
    ]
    assert maintainer.runs == 0 and (StepKind.REMOVE_ORPHANS, "data") in maintainer.last_run
    table, policy = sink_table(catalog), MaintenancePolicy(orphan_check_every=3600.0)
    due = {t.under for t in plan_maintenance(table, policy, time.time() + 60, last_run=maintainer.last_run)}
    assert "data" not in due
    due = {t.under for t in plan_maintenance(table, policy, time.time() + 3601, last_run=maintainer.last_run)}
    assert "data" in due
