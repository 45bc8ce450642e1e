"""Compaction: rewrite data files so that readers meet few files and few deletes.

An upsert sink adds delete files with its commits and an append sink a few small data files per
commit. Readers apply every equality delete to every older data file of its partition, and some
apply them slowly: DuckDB needs minutes for a table of 1M rows and 10 delete files that it reads
in seconds without them (duckdb-iceberg#626, iceberg-rust#2950). Compaction reads the current
snapshot, chooses data files to rewrite (``plan_compaction``), applies the deletes that apply to
them itself, writes the surviving rows as new data files (``DataFileWriter``: field ids,
statistics, partitioning, rollover at the target size) and commits one ``replace`` snapshot that
removes the rewritten files and every delete file that no longer applies to a file left in the
table. No Spark is involved. Two modes:

* ``FULL`` (``icesql compact``): every data file that a delete applies to, and every data file of
  a partition holding several, is rewritten: the table ends up with no delete files and one file
  per partition (more when a partition exceeds the target size).
* ``AUTO`` (maintenance, thresholds from a ``MaintenancePolicy``): only what is worth it —
  data files with many deleted rows (``delete_ratio``); every data file a delete applies to once
  the table holds more than ``maximum_delete_files`` delete files; and small files (below
  ``small_file_ratio`` of the target size) merged per partition, ``compaction_minimum_files`` of
  similar size at a time (size classes a factor of that apart, so a row is rewritten about
  log(target / commit size) times rather than once per compaction), or all of them once they add
  up to a target-size file. Large healthy files are left alone.

Deletes, as the Iceberg spec applies them: an equality delete to the data files of its partition
(any partition when its spec is unpartitioned) with a smaller data sequence number; a position
delete (columns ``file_path``, ``pos``) to the rows of the file it names, when that file's data
sequence number is not greater than the delete's. Deletion vectors (v3) are refused.

The new files carry the data sequence number of the snapshot that was read (as Iceberg Java's
``RewriteFiles`` with a starting sequence number): a delete committed after it still applies to
the rewritten rows as it did to the files they came from. So when a sink commits while ``AUTO``
compaction writes, the commit is *rebased*: redone on top of the new snapshot with the same new
files, as long as every file it removes is still there and no new position delete names one of
them (the sink's appends and equality deletes carry over by themselves). Otherwise, and always
in ``FULL`` mode (whose promise is a table without deletes), the compaction starts over
(``retries`` times). A sink's exactly-once bookkeeping is untouched: its progress stays in the
snapshots' summaries, which ``commit.last_committed`` reads, and the compaction's snapshot
carries every sink's last progress too (``commit.carried_progress``), so that snapshot
expiration may remove the snapshots the compaction made obsolete.
"""

from __future__ import annotations

import enum
import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from icesql.engine.iceberg.deletes import DeleteIndex, LiveRows, position_deletes
from icesql.engine.iceberg.table_files import LiveFile, entries_reader, ident, live_files
from icesql.errors import ExecutionError
from icesql.plan import MaintenancePolicy

log = logging.getLogger("icesql.compact")

COMPACT_REASON = "compact"


class CompactMode(enum.Enum):
    FULL = "full"  # no delete files, one file per partition (icesql compact)
    AUTO = "auto"  # what the thresholds of a MaintenancePolicy call for (maintenance)


@dataclass(frozen=True)
class CompactResult:
    """What ``compact_table`` did (``icesql.repl.format.format_compaction`` prints it)."""

    table: str
    snapshot_id: int | None  # the replace snapshot (None when there was nothing to do)
    rows: int  # rows in the table afterwards
    deleted_rows: int  # rows the deletes removed from the rewritten files
    data_files_before: int
    delete_files_before: int
    data_files_after: int
    bytes_before: int
    bytes_after: int
    duration: float
    attempts: int = 1
    data_files_kept: int = 0  # data files left as they were
    mode: CompactMode = CompactMode.FULL
    delete_files_after: int = 0  # of the delete files the compaction read
    rewritten_files: tuple[str, ...] = ()  # data files removed (their rows are in added_files)
    added_files: tuple[str, ...] = ()  # data files written
    removed_delete_files: tuple[str, ...] = ()  # delete files removed (applied, or applying to nothing)
    reasons: tuple[str, ...] = ()  # why: "12 small files", "3 files with many deleted rows", ...
    rebased: int = 0  # commits redone on top of a snapshot committed meanwhile
    carried_deletes: int = 0  # delete files ``carry_over`` gave for deletes committed meanwhile
    # ``track``: the tracked columns of every row written, with its new ``__path`` and ``__pos``
    moved: Any = field(default=None, repr=False, compare=False)

    @property
    def skipped(self) -> bool:
        return self.snapshot_id is None


# --------------------------------------------------------------------------- deletes


# --------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class CompactionPlan:
    """What one compaction would do, read from one snapshot."""

    mode: CompactMode
    snapshot_id: int | None  # the snapshot read
    sequence_number: int  # its sequence number: the data sequence number of the files written
    data: tuple[LiveFile, ...]  # every live data file
    deletes: tuple[LiveFile, ...]  # every live delete file
    rewrite: tuple[LiveFile, ...]  # the data files to rewrite
    remove_deletes: tuple[LiveFile, ...]  # the delete files to remove
    target_file_size: int
    reasons: tuple[str, ...] = ()
    index: DeleteIndex | None = field(default=None, repr=False, compare=False)

    @property
    def empty(self) -> bool:
        return not self.rewrite and not self.remove_deletes

    @property
    def read_bytes(self) -> int:
        """Bytes the rewrite reads (data files and the deletes that apply to them)."""
        return sum(f.size for f in self.rewrite) + sum(d.size for d in self.deletes)

    @property
    def applies_deletes(self) -> bool:
        """Whether the rewrite applies delete files (or removes some): what slows readers down,
        beyond the number of files."""
        if self.remove_deletes:
            return True
        return self.index is not None and any(self.index.applies_to(f) for f in self.rewrite)

    @property
    def keep(self) -> tuple[LiveFile, ...]:
        gone = {f.path for f in self.rewrite}
        return tuple(f for f in self.data if f.path not in gone)


def _target_size(table: Any, target_file_size: int | None) -> int:
    if target_file_size is not None:
        return max(1024, int(target_file_size))
    from pyiceberg.table import TableProperties

    return int(
        table.metadata.properties.get(
            TableProperties.WRITE_TARGET_FILE_SIZE_BYTES, TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT
        )
    )


def plan_compaction(
    table: Any,
    *,
    mode: CompactMode = CompactMode.FULL,
    policy: MaintenancePolicy | None = None,
    target_file_size: int | None = None,
) -> CompactionPlan:
    """Choose what to rewrite in ``table``'s current snapshot (see the module docstring).

    ``target_file_size`` defaults to the policy's, then to the table's
    ``write.target-file-size-bytes``. Reads manifests (cached) and position delete files, no data."""
    policy = policy or MaintenancePolicy()
    target = _target_size(
        table, target_file_size if target_file_size is not None else policy.target_file_size
    )
    snapshot = table.current_snapshot()
    data, deletes = live_files(table, snapshot)
    sequence_number = int(snapshot.sequence_number or 0) if snapshot is not None else 0
    index = DeleteIndex(table, deletes)
    if mode is CompactMode.FULL:
        rewrite, reasons = _full(table, data, index)
    else:
        rewrite, reasons = _auto(table, data, index, policy, target)
    chosen = {f.path for f in rewrite}
    remaining = [f for f in data if f.path not in chosen]
    remove = index.dangling(remaining)
    if remove and not rewrite:
        reasons = (*reasons, f"{len(remove)} delete file(s) that apply to no data file")
    return CompactionPlan(
        mode=mode,
        snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
        sequence_number=sequence_number,
        data=tuple(data),
        deletes=tuple(deletes),
        rewrite=tuple(sorted(rewrite, key=lambda f: (f.partition_key, f.sequence_number, f.path))),
        remove_deletes=tuple(remove),
        target_file_size=target,
        reasons=reasons,
        index=index,
    )


def _full(table: Any, data: list[LiveFile], index: DeleteIndex) -> tuple[list[LiveFile], tuple[str, ...]]:
    per_partition: dict[tuple[int, str], int] = defaultdict(int)
    for f in data:
        per_partition[f.partition_key] += 1
    with_deletes = [f for f in data if index.applies_to(f)]
    crowded = [f for f in data if per_partition[f.partition_key] > 1 and not index.applies_to(f)]
    rewrite = with_deletes + crowded
    spec_id = table.spec().spec_id
    if any(f.spec_id != spec_id for f in rewrite) or any(d.spec_id != spec_id for d in index.deletes):
        raise ExecutionError(
            f"table {ident(table)} has files of an older partition spec",
            hint="icesql compacts tables with a single partition spec",
        )
    reasons = []
    if with_deletes:
        reasons.append(f"{len(with_deletes)} data file(s) with deletes")
    if crowded:
        reasons.append(f"{len(crowded)} data file(s) sharing a partition")
    return rewrite, tuple(reasons)


def _auto(
    table: Any, data: list[LiveFile], index: DeleteIndex, policy: MaintenancePolicy, target: int
) -> tuple[list[LiveFile], tuple[str, ...]]:
    spec_id = table.spec().spec_id
    candidates = [f for f in data if f.spec_id == spec_id]  # older specs' files are left alone
    selected: dict[str, LiveFile] = {}
    reasons: list[str] = []

    heavy = [f for f in candidates if f.rows and index.deleted_estimate(f) >= policy.delete_ratio * f.rows]
    selected.update((f.path, f) for f in heavy)
    if heavy:
        reasons.append(f"{len(heavy)} file(s) with {policy.delete_ratio:.0%} or more rows deleted")
    if len(index.deletes) > policy.maximum_delete_files:
        applied = [f for f in candidates if f.path not in selected and index.applies_to(f)]
        selected.update((f.path, f) for f in applied)
        reasons.append(
            f"{len(index.deletes)} delete files > MAXIMUM DELETE FILES {policy.maximum_delete_files}"
            + (f" ({len(applied)} file(s) they apply to)" if applied else "")
        )

    k = max(2, int(policy.compaction_minimum_files))
    small_limit = policy.small_file_ratio * target
    by_partition: dict[tuple[int, str], list[LiveFile]] = defaultdict(list)
    for f in candidates:
        by_partition[f.partition_key].append(f)
    merged = 0
    for files in by_partition.values():
        small = [f for f in files if f.path not in selected and f.size < small_limit]
        if not small:
            continue
        already = any(f.path in selected for f in files)
        if already or sum(f.size for f in small) >= target:
            chosen = small
        else:
            classes: dict[int, list[LiveFile]] = defaultdict(list)
            for f in small:
                classes[int(math.log(max(f.size, 1), k))].append(f)
            chosen = [f for group in classes.values() if len(group) >= k for f in group]
        if len(chosen) + sum(1 for f in files if f.path in selected) < 2:
            continue  # rewriting one file alone gains nothing
        selected.update((f.path, f) for f in chosen)
        merged += len(chosen)
    if merged:
        reasons.append(f"{merged} small file(s) merged")
    # a partition where only one file would be rewritten and no delete applies to it: leave it
    for files in by_partition.values():
        chosen_here = [f for f in files if f.path in selected]
        if len(chosen_here) == 1 and not index.applies_to(chosen_here[0]):
            del selected[chosen_here[0].path]
    return list(selected.values()), tuple(reasons)


# --------------------------------------------------------------------------- rewriting


class CompactionStopped(Exception):
    """The compaction's caller stopped it (``stopped()``: its sink stopped); nothing it wrote is left."""


def _check(stopped: Callable[[], bool] | None) -> None:
    if stopped is not None and stopped():
        raise CompactionStopped("stopped before its commit")


def _rewrite(
    table: Any,
    plan: CompactionPlan,
    write: Any,
    stopped: Callable[[], bool] | None = None,
    track: Sequence[str] | None = None,
) -> tuple[list[Any], int, int, Any]:
    """Write the rows of ``plan.rewrite`` that the deletes leave alive; (written files, rows,
    rows dropped, the ``track`` columns of every row written with its file and position, or None)."""
    from icesql.engine.iceberg.lineage import lineage_columns
    from icesql.engine.iceberg.writer import DataFileWriter

    assert plan.index is not None
    live = LiveRows(table.io, table.schema(), plan.index)
    # format v3: the rows keep their row ids and last-updated sequence numbers (spec)
    lineage = int(table.metadata.format_version) >= 3
    writer = DataFileWriter(write, "data", track=track, lineage=lineage)
    rows = dropped = 0
    try:
        for f in plan.rewrite:
            _check(stopped)
            survivors, n, kept = live.read_kept(f)
            if lineage and survivors.num_rows:
                for name, column in (lineage_columns(table.io, f, kept) or {}).items():
                    survivors = survivors.append_column(name, column)
            dropped += n
            rows += survivors.num_rows
            if survivors.num_rows:
                writer.write(survivors)
        written = writer.close()
        return written, rows, dropped, writer.positions() if track else None
    except BaseException:
        writer.abort()
        raise


# (position deletes committed since the snapshot a compaction read that name files it rewrote,
#  the data files it wrote) -> delete files that delete the same rows from the written files
CarryOver = Callable[[Sequence[LiveFile], Sequence[Any]], Sequence[Any]]


def _rebase_conflicts(table: Any, plan: CompactionPlan) -> list[LiveFile] | None:
    """Whether ``plan``'s new files can be committed on top of ``table``'s (refreshed) current
    snapshot: None when a file it removes is gone, else the position deletes committed since
    that name a file it rewrote (their rows are in the new files: they need carrying over)."""
    data, deletes = live_files(table, table.current_snapshot())
    live = {f.path for f in (*data, *deletes)}
    if any(f.path not in live for f in (*plan.rewrite, *plan.remove_deletes)):
        return None
    known = {d.path for d in plan.deletes}
    rewritten = {f.path for f in plan.rewrite}
    return [
        d
        for d in deletes
        if d.path not in known and d.content == 1 and rewritten & set(position_deletes(table.io, d))
    ]


class _Rebase:
    """A rewrite's commit kept on top of the table's current snapshot.

    Each call refreshes the table and, when it moved on, checks the rewrite still fits
    (``_rebase_conflicts``) and carries over the position deletes committed on its rows since the
    last call, once each: called once before the commit waits for a gap between a sink's commits
    (``before_commit``: everything committed so far, outside the sink's lock) and once in the gap
    (only what came since), the part that holds the sink up stays small. Without ``rebase``
    (``FULL`` mode) any change means starting over."""

    def __init__(self, table: Any, plan: CompactionPlan, carry_over: CarryOver | None, rebase: bool) -> None:
        self.table = table
        self.plan = plan
        self.carry_over = carry_over
        self.rebase = rebase
        self.base = plan.snapshot_id  # the snapshot the commit goes on top of
        self.moves = 0  # times the commit moved onto a newer snapshot
        self.carried: list[Any] = []  # delete files carry_over gave
        self.superseded: list[LiveFile] = []  # the position deletes they replace
        self._carried_for: set[str] = set()

    def __call__(self, new_files: Sequence[Any]) -> bool:
        """True when the rewrite can commit on the current snapshot, False when it must start over
        (a file it removes is gone, or deletes on its rows that nothing carries over)."""
        self.table.refresh()
        current = self.table.current_snapshot()
        snapshot_id = current.snapshot_id if current is not None else None
        if snapshot_id == self.base:
            return True
        if not self.rebase:
            return False
        conflicts = _rebase_conflicts(self.table, self.plan)
        if conflicts is None:
            return False
        fresh = [d for d in conflicts if d.path not in self._carried_for]
        if fresh:
            if self.carry_over is None:
                return False
            self.carried += list(self.carry_over(fresh, new_files))
            self._carried_for.update(d.path for d in fresh)
        rewritten = {f.path for f in self.plan.rewrite}
        self.superseded = [d for d in conflicts if set(position_deletes(self.table.io, d)) <= rewritten]
        self.base = snapshot_id
        self.moves += 1
        return True


def _remove_written(io: Any, written: Sequence[Any]) -> None:
    for f in written:
        try:
            io.delete(f.file_path)
        except Exception:  # pragma: no cover - best effort: orphan-file cleanup takes the rest
            log.debug("could not delete %s", f.file_path)


def _commit(
    table: Any,
    plan: CompactionPlan,
    new_files: Sequence[Any],
    carried: Sequence[Any] = (),
    superseded: Sequence[LiveFile] = (),
) -> int:
    """One commit of ``plan``'s rewrite on ``table``'s current snapshot, plus ``carried`` delete
    files (which replace the ``superseded`` ones); the new snapshot's id."""
    from pyiceberg.exceptions import CommitFailedException

    from icesql.engine.base import pyiceberg_internals as internals
    from icesql.engine.commit.snapshot import COMMIT_REASON, as_data_file, carried_progress

    fv = int(table.metadata.format_version)
    tx = internals.transaction(table)
    producer = internals.rewrite_producer()(
        transaction=tx,
        io=table.io,
        removed=[*plan.rewrite, *plan.remove_deletes, *superseded],
        entries_of=entries_reader(table.io),
        data_sequence_number=plan.sequence_number if plan.snapshot_id is not None else None,
        snapshot_properties={**carried_progress(table.metadata), COMMIT_REASON: COMPACT_REASON},
    )
    for f in new_files:
        producer.append_data_file(f)
    carried_files = [as_data_file(d, fv) for d in carried]
    if fv >= 3 and carried_files:
        # a v3 table takes deletion vectors: the carried positions become the new files' vectors
        from icesql.engine.iceberg.dvs import new_files_vectors

        carried_files, puffin = new_files_vectors(table, carried_files, [as_data_file(f, fv) for f in new_files])
        if puffin:
            producer.written_files.append(puffin)
    for d in carried_files:
        producer.add_delete_file(d)
    try:
        internals.apply_producer(tx, producer)
        tx.commit_transaction()
    except (CommitFailedException, internals.RewriteConflictError):
        # refused: no snapshot references the manifests written for it. Any other failure (a
        # response cut short, a 5xx) leaves the outcome unknown: the catalog may have committed,
        # so they stay (orphan cleanup removes them if nothing references them)
        internals.discard_written([producer], table.io)
        raise
    return int(producer.snapshot_id)


def compact_table(
    table: Any,
    *,
    mode: CompactMode = CompactMode.FULL,
    policy: MaintenancePolicy | None = None,
    io_properties: Mapping[str, str] | None = None,
    max_file_size: int | None = None,
    retries: int = 3,
    rebase: bool | None = None,
    carry_over: CarryOver | None = None,
    before_commit: Callable[[], None] | None = None,
    on_written: Callable[[Sequence[Any]], None] | None = None,
    stopped: Callable[[], bool] | None = None,
    track: Sequence[str] | None = None,
) -> CompactResult:
    """Compact ``table`` (a pyiceberg Table); see the module docstring.

    ``max_file_size`` is the target size of the files written (default: the policy's
    ``target_file_size``, then the table's ``write.target-file-size-bytes``). ``rebase``
    (default: in ``AUTO`` mode) redoes a conflicting commit on top of the new snapshot when
    nothing it removes changed. A position delete committed meanwhile that names a rewritten
    file blocks the rebase, unless ``carry_over`` (a sink's key index knows those rows) returns
    delete files that delete the same rows from the new files: they are committed with the
    rewrite, and the position deletes they replace that name nothing else are removed.
    ``before_commit`` is called after the new files are written, before the commit (a sink's
    maintainer waits there for a gap between its commits; tests change the table there);
    ``on_written(new_files)`` right after they are written, each time. ``stopped()`` true (a
    sink's rewrite beside it, the sink stopped) ends the compaction before its commit with
    ``CompactionStopped``, the files it wrote removed. ``track`` (a sink's KEY columns): the
    result's ``moved`` holds them for every row written, with its new file and position, so that
    the sink's key index can follow the rows without reading the files again."""
    from pyiceberg.exceptions import CommitFailedException

    from icesql.engine.base import pyiceberg_internals as internals
    from icesql.engine.commit.snapshot import as_data_file
    from icesql.engine.iceberg.writer import WriteSpec

    rebase = mode is CompactMode.AUTO if rebase is None else rebase
    start = time.monotonic()
    name = ident(table)
    attempt = 0
    rebased = 0
    while True:
        attempt += 1
        table.refresh()
        plan = plan_compaction(table, mode=mode, policy=policy, target_file_size=max_file_size)
        bytes_before = sum(f.size for f in (*plan.data, *plan.deletes))
        if plan.empty:
            return CompactResult(
                table=name,
                snapshot_id=None,
                rows=sum(f.rows for f in plan.data),
                deleted_rows=0,
                data_files_before=len(plan.data),
                delete_files_before=len(plan.deletes),
                data_files_after=len(plan.data),
                bytes_before=bytes_before,
                bytes_after=bytes_before,
                duration=time.monotonic() - start,
                attempts=attempt,
                data_files_kept=len(plan.data),
                mode=mode,
                delete_files_after=len(plan.deletes),
            )
        write = WriteSpec.from_table(table, max_file_size=plan.target_file_size, io_properties=io_properties)
        written, rows, dropped, moved = (
            _rewrite(table, plan, write, stopped, track) if plan.rewrite else ([], 0, 0, None)
        )
        fv = int(table.metadata.format_version)
        new_files = [as_data_file(f, fv) for f in written]
        rebasing = _Rebase(table, plan, carry_over, rebase)
        try:
            if on_written is not None and new_files:
                on_written(new_files)
            _check(stopped)
            # the bulk of the catching up before waiting for a gap (outside a sink's lock), the rest in it
            ready = before_commit is None or rebasing(new_files)
            if ready and before_commit is not None:
                before_commit()
        except BaseException:  # nothing references the files yet
            _remove_written(table.io, [*written, *rebasing.carried])
            raise
        snapshot_id: int | None = None
        while ready and snapshot_id is None and rebasing(new_files):
            try:
                snapshot_id = _commit(table, plan, new_files, rebasing.carried, rebasing.superseded)
            except (CommitFailedException, internals.RewriteConflictError) as exc:
                if attempt > retries:
                    _remove_written(table.io, [*written, *rebasing.carried])
                    raise ExecutionError(
                        f"compaction of {name} failed after {attempt} attempts: {exc}",
                        hint="a sink keeps committing to the table; stop it, or run compact again",
                    ) from exc
                if rebasing.rebase:  # without, the next call finds the change and it starts over
                    attempt += 1
                    log.info("table %s changed while compacting; committing on top of the change", name)
        if snapshot_id is None:
            _remove_written(table.io, [*written, *rebasing.carried])
            if attempt > retries:
                raise ExecutionError(
                    f"compaction of {name} failed after {attempt} attempts: the table kept changing "
                    "under the files it rewrote",
                    hint="a sink keeps committing to the table; stop it, or run compact again",
                )
            log.warning("table %s changed while compacting; compacting again", name)
            continue
        rebased += rebasing.moves
        carried, superseded = rebasing.carried, rebasing.superseded
        kept = plan.keep
        removed = {d.path for d in plan.remove_deletes}
        deletes_left = [d for d in plan.deletes if d.path not in removed]
        return CompactResult(
            table=name,
            snapshot_id=snapshot_id,
            rows=rows + sum(f.rows for f in kept),
            deleted_rows=dropped,
            data_files_before=len(plan.data),
            delete_files_before=len(plan.deletes),
            data_files_after=len(new_files) + len(kept),
            bytes_before=bytes_before,
            bytes_after=sum(int(f.file_size_in_bytes) for f in new_files)
            + sum(f.size for f in kept)
            + sum(d.size for d in deletes_left),
            duration=time.monotonic() - start,
            attempts=attempt,
            data_files_kept=len(kept),
            mode=mode,
            delete_files_after=len(deletes_left),
            rewritten_files=tuple(f.path for f in plan.rewrite),
            added_files=tuple(str(f.file_path) for f in new_files),
            removed_delete_files=tuple(d.path for d in (*plan.remove_deletes, *superseded)),
            reasons=plan.reasons,
            rebased=rebased,
            carried_deletes=len(carried),
            moved=moved,
        )


__all__ = [
    "COMPACT_REASON",
    "CarryOver",
    "CompactMode",
    "CompactResult",
    "CompactionStopped",
    "CompactionPlan",
    "DeleteIndex",
    "LiveRows",
    "compact_table",
    "plan_compaction",
    "position_deletes",
]
