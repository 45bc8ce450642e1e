"""Snapshot expiration: drop old snapshots from the table's metadata, then the files only they used.

A sink committing every second leaves 86,400 snapshots a day, each in every later metadata file.
``expire_snapshots`` keeps

* the snapshots newer than ``older_than``, and at least the ``keep_at_least`` newest ancestors of
  each branch (``main`` included); every branch and tag head;
* for every icesql sink that committed to the table, its newest snapshot: the one whose summary
  carries the sink's progress (``icesql.progress``, or carried by a maintenance snapshot:
  ``commit.carried_progress``), which a restarted sink reads to know where it stands
  (``commit.last_committed_snapshot``; it searches past the gaps expiration leaves);
* the snapshots in ``protect``;

and removes the others in one metadata commit that asserts the branch has not moved since they
were chosen (a commit in between makes it choose again; ``retries`` times). Then it deletes the
files that only removed snapshots used: their manifest lists, the manifests no kept snapshot
lists, and the data and delete files no kept snapshot reads. A file is deleted only after the
commit succeeded, and a failure to delete one is logged, not raised (orphan-file cleanup takes it
later). Expiration writes no snapshot, so it leaves no ``icesql.commit-reason``; its result says
what it did.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from icesql.engine.iceberg.table_files import (
    delete_paths,
    ident,
    manifest_entries,
    prefetch,
    snapshot_manifests,
)
from icesql.errors import ExecutionError

log = logging.getLogger("icesql.maintenance")

EXPIRE_REASON = "expire"


@dataclass(frozen=True)
class ExpireResult:
    table: str
    snapshots_before: int
    snapshots_after: int
    expired: tuple[int, ...]  # the snapshot ids removed
    protected: tuple[int, ...]  # old snapshots kept because a sink's progress is in them
    files_deleted: int  # manifest lists, manifests, data and delete files, statistics
    bytes_deleted: int  # of the manifests, data and delete files (manifest lists: not counted)
    duration: float
    attempts: int = 1
    dry_run: bool = False
    files_failed: int = 0  # files that could not be deleted (left to orphan-file cleanup)
    kind: ClassVar[str] = EXPIRE_REASON

    @property
    def skipped(self) -> bool:
        return not self.expired


def epoch_ms(moment: dt.datetime | float | int) -> int:
    """A datetime (naive means UTC) or seconds since the epoch, as milliseconds since the epoch."""
    if isinstance(moment, dt.datetime):
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.timezone.utc)
        return int(moment.timestamp() * 1000)
    return int(float(moment) * 1000)


def _order(snap: Any) -> tuple[int, int]:
    return (int(snap.sequence_number or 0), int(snap.timestamp_ms))


def sink_snapshots(metadata: Any) -> dict[str, set[int]]:
    """For each icesql sink of the table, the snapshot(s) that carry its last progress: the one
    ``last_committed_snapshot`` finds on ``main`` and the newest one overall (a sink's own
    snapshot, or a maintenance snapshot that carries its progress)."""
    from icesql.engine.commit.snapshot import last_committed_snapshot, sink_ids

    out: dict[str, set[int]] = {}
    for sink in sink_ids(metadata):
        found = last_committed_snapshot(metadata, sink)
        ids = {found.snapshot_id} if found is not None else set()
        carriers = [s for s in metadata.snapshots if _carries(s, sink)]
        if carriers:
            ids.add(max(carriers, key=_order).snapshot_id)
        out[sink] = ids
    return out


def _carries(snap: Any, sink: str) -> bool:
    from icesql.engine.commit.snapshot import CARRIED_PROGRESS, SINK_ID

    props = snap.summary.additional_properties if snap.summary is not None else {}
    return props.get(SINK_ID) == sink or CARRIED_PROGRESS + sink in props


def _ancestor_ids(metadata: Any, snapshot_id: int, limit: int) -> list[int]:
    out: list[int] = []
    snap = metadata.snapshot_by_id(snapshot_id)
    while snap is not None and len(out) < limit and snap.snapshot_id not in out:
        out.append(snap.snapshot_id)
        snap = (
            metadata.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
        )
    return out


def choose(
    metadata: Any,
    older_than_ms: int,
    keep_at_least: int,
    protect: Iterable[int] = (),
    limit: int | None = None,
) -> tuple[list[int], list[int]]:
    """(snapshot ids to expire, oldest first; old snapshot ids kept for a sink's progress)."""
    keep: set[int] = set(protect)
    for ref in metadata.refs.values():
        keep.add(ref.snapshot_id)
        keep.update(_ancestor_ids(metadata, ref.snapshot_id, max(1, keep_at_least)))
    for snap in metadata.snapshots:
        if snap.timestamp_ms >= older_than_ms:
            keep.add(snap.snapshot_id)
    sinks = {i for ids in sink_snapshots(metadata).values() for i in ids}
    protected = sorted(sinks - keep)
    keep |= sinks
    expire = sorted((s for s in metadata.snapshots if s.snapshot_id not in keep), key=_order)
    if limit is not None:
        expire = expire[: max(0, limit)]
    return [s.snapshot_id for s in expire], protected


def _manifests_of(io: Any, snapshots: Iterable[Any]) -> dict[str, Any]:
    snapshots = list(snapshots)
    prefetch(io, snapshots)
    out: dict[str, Any] = {}
    for snap in snapshots:
        for m in snapshot_manifests(io, snap):
            out.setdefault(m.manifest_path, m)
    return out


def _statistics_paths(metadata: Any, snapshot_ids: set[int]) -> set[str]:
    paths = {s.statistics_path for s in metadata.statistics if s.snapshot_id in snapshot_ids}
    paths |= {
        s.statistics_path
        for s in getattr(metadata, "partition_statistics", [])
        if s.snapshot_id in snapshot_ids
    }
    return paths


def unreferenced_files(io: Any, metadata: Any, expired_ids: set[int]) -> tuple[list[str], int]:
    """(paths, bytes) of the files that only the snapshots ``expired_ids`` of ``metadata`` use."""
    from pyiceberg.manifest import ManifestEntryStatus

    expired = [s for s in metadata.snapshots if s.snapshot_id in expired_ids]
    kept = [s for s in metadata.snapshots if s.snapshot_id not in expired_ids]
    old = _manifests_of(io, expired)
    current = _manifests_of(io, kept)

    def live_in(manifests: Iterable[Any]) -> dict[str, int]:
        manifests = list(manifests)
        prefetch(io, manifests=manifests)
        out: dict[str, int] = {}
        for m in manifests:
            for e in manifest_entries(io, m):
                if e.status != ManifestEntryStatus.DELETED:
                    out[e.data_file.file_path] = int(e.data_file.file_size_in_bytes)
        return out

    # a file read by an expired snapshot and by no kept one: listed live by a manifest that goes
    # (the live entries of a manifest a kept snapshot lists are read by it). A file an expired
    # snapshot lists as DELETED was read by its parent, which is either kept or expired (counted).
    gone = {p: m for p, m in old.items() if p not in current}
    live = live_in(current.values())
    candidates = live_in(gone.values())
    files = {p: n for p, n in candidates.items() if p not in live}
    size = sum(files.values()) + sum(int(m.manifest_length) for m in gone.values())
    stats = _statistics_paths(metadata, expired_ids) - _statistics_paths(
        metadata, {s.snapshot_id for s in kept}
    )
    paths = [*(s.manifest_list for s in expired), *gone, *files, *stats]
    return paths, size


def expire_snapshots(
    table: Any,
    older_than: dt.datetime | float,
    keep_at_least: int = 1,
    *,
    protect: Iterable[int] = (),
    limit: int | None = None,
    delete_files: bool = True,
    dry_run: bool = False,
    retries: int = 5,
    workers: int = 8,
) -> ExpireResult:
    """Expire ``table``'s snapshots older than ``older_than`` (a datetime, or seconds since the
    epoch); see the module docstring. ``limit``: expire at most that many (the oldest first), to
    bound one step. ``delete_files=False`` leaves the files to orphan-file cleanup."""
    from pyiceberg.exceptions import CommitFailedException

    from icesql.engine.base import pyiceberg_internals as internals

    start = time.monotonic()
    cutoff = epoch_ms(older_than)
    name = ident(table)
    attempt = 0
    while True:
        attempt += 1
        table.refresh()
        metadata = table.metadata
        before = len(metadata.snapshots)
        expire, protected = choose(metadata, cutoff, keep_at_least, protect, limit)
        if not expire or dry_run:
            paths, size = unreferenced_files(table.io, metadata, set(expire)) if expire else ([], 0)
            return ExpireResult(
                table=name,
                snapshots_before=before,
                snapshots_after=before - (len(expire) if dry_run else 0),
                expired=tuple(expire),
                protected=tuple(protected),
                files_deleted=len(paths) if dry_run else 0,
                bytes_deleted=size if dry_run else 0,
                duration=time.monotonic() - start,
                attempts=attempt,
                dry_run=dry_run,
            )
        main = metadata.refs.get("main")
        tx = internals.transaction(table)
        internals.stage_snapshot_removal(tx, expire, "main", main.snapshot_id if main is not None else None)
        try:
            tx.commit_transaction()
        except CommitFailedException as exc:
            if attempt > retries:
                raise ExecutionError(
                    f"expiring snapshots of {name} failed after {attempt} attempts: {exc}",
                    hint="another writer keeps committing to the table; run it again later",
                ) from exc
            log.info("table %s changed while expiring snapshots; choosing again", name)
            continue
        deleted: list[str] = []
        failed: list[str] = []
        size = 0
        if delete_files:
            paths, size = unreferenced_files(table.io, metadata, set(expire))
            deleted, failed = delete_paths(table.io, paths, workers=workers)
        return ExpireResult(
            table=name,
            snapshots_before=before,
            snapshots_after=len(table.metadata.snapshots),
            expired=tuple(expire),
            protected=tuple(protected),
            files_deleted=len(deleted),
            bytes_deleted=size,
            duration=time.monotonic() - start,
            attempts=attempt,
            files_failed=len(failed),
        )


__all__ = ["EXPIRE_REASON", "ExpireResult", "choose", "epoch_ms", "expire_snapshots", "sink_snapshots"]
