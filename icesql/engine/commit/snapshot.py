"""Driver-side commits: a set of data files and equality-delete files plus progress.

* Append-only groups become a fast append (one new data manifest, existing manifests kept).
* Groups with delete files become a **row delta**: one snapshot holding a data manifest and a
  delete manifest (``content = deletes``). Both inherit the snapshot's sequence number N, so the
  equality deletes apply only to data files with a sequence number < N — the rows written by
  earlier commits — and never to the rows added next to them (apache/iceberg#15305).
* Several groups (one per staged batch, in order) are committed as consecutive snapshots in ONE
  catalog commit: each gets its own sequence number, so the deletes of batch 2 remove what batch 1
  inserted, and either all of them land or none.

The snapshot producers and manifest writers (pyiceberg has no row delta) live in
``pyiceberg_internals``, with every other private pyiceberg use.

Exactly once: every snapshot's summary carries ``icesql.sink-id``, ``icesql.sink-version``,
``icesql.progress`` and ``icesql.commit-reason``. Before each attempt the table is reloaded; a
newer sink version fences the request out (``FencedError``), an already committed progress makes
the commit a no-op, and a conflict with another writer (``CommitFailedException``) is retried
after reloading, re-checking both.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from icesql.engine.base import pyiceberg_internals as internals
from icesql.errors import ExecutionError

log = logging.getLogger("icesql.commit")

SINK_ID = "icesql.sink-id"
SINK_VERSION = "icesql.sink-version"
PROGRESS = "icesql.progress"
COMMIT_REASON = "icesql.commit-reason"
# + a sink id: that sink's last (version, progress), carried by a maintenance snapshot
CARRIED_PROGRESS = "icesql.carried-progress."


class FencedError(ExecutionError):
    """A newer version of the sink has committed to the table: this runner must stop."""


@dataclass(frozen=True)
class CommitGroup:
    """The files of one staged batch; committed as one snapshot."""

    data_files: Sequence[Any] = ()  # WrittenFile or pyiceberg DataFile
    delete_files: Sequence[Any] = ()
    progress: int | None = None  # progress recorded on this group's snapshot (default: the request's)


@dataclass(frozen=True)
class CommitRequest:
    """Files to add (data and equality deletes) and the progress they complete.

    With ``groups``, ``data_files``/``delete_files`` must be empty (or they form a last group):
    each group becomes one snapshot, in order, all in one atomic catalog commit.
    """

    data_files: Sequence[Any]
    delete_files: Sequence[Any]
    sink_id: str
    sink_version: int
    progress: int
    reason: str = "batch"
    groups: Sequence[CommitGroup] = ()
    extra_summary: Mapping[str, str] = field(default_factory=dict)

    def all_groups(self) -> list[CommitGroup]:
        out = list(self.groups)
        if self.data_files or self.delete_files or not out:
            out.append(CommitGroup(tuple(self.data_files), tuple(self.delete_files), None))
        return out


@dataclass(frozen=True)
class CommitResult:
    snapshot_id: int | None  # the newest snapshot of the commit (or the existing one when skipped)
    rows: int  # data rows added
    bytes: int  # bytes of all files added
    files: int  # data + delete files added
    duration: float  # seconds
    skipped: bool = False  # progress already committed: nothing done
    snapshot_ids: tuple[int, ...] = ()
    attempts: int = 1
    delete_rows: int = 0
    data_files: int = 0
    delete_files: int = 0


@dataclass(frozen=True)
class Committed:
    snapshot_id: int
    version: int
    progress: int
    reason: str | None
    timestamp_ms: int
    # the sink's own keys of that commit (``icesql.*``: the source watermark, ...), also when a
    # maintenance snapshot carries them
    properties: Mapping[str, str] = field(default_factory=dict)


def request_for_staged(
    entries: Sequence[Any],
    *,
    sink_id: str,
    sink_version: int,
    reason: str,
    extra_summary: Mapping[str, str] | None = None,
    per_batch: bool = False,
) -> CommitRequest:
    """The commit of staged batches (``staging.StagedBatch``, in batch order) up to the last one's
    progress: append-only batches become one snapshot; when delete files are involved (or
    ``per_batch``: the key index matches a snapshot to the batch that made it) each batch is its
    own snapshot, so a later batch's deletes remove an earlier batch's rows."""
    from icesql.engine.iceberg.writer import WrittenFile

    if per_batch or any(e.delete_files for e in entries):
        groups = [
            CommitGroup(
                tuple(WrittenFile.loads(s) for s in e.data_files),
                tuple(WrittenFile.loads(s) for s in e.delete_files),
                e.batch_id,
            )
            for e in entries
        ]
    else:
        groups = [CommitGroup(tuple(WrittenFile.loads(s) for e in entries for s in e.data_files), (), None)]
    return CommitRequest(
        data_files=(),
        delete_files=(),
        sink_id=sink_id,
        sink_version=sink_version,
        progress=entries[-1].batch_id,
        reason=reason,
        groups=groups,
        extra_summary=dict(extra_summary or {}),
    )


# --------------------------------------------------------------------------- reading progress


def _ancestors(metadata: Any, branch: str = "main") -> Any:
    snap = metadata.snapshot_by_name(branch)
    seen: set[int] = set()
    while snap is not None and snap.snapshot_id not in seen:
        seen.add(snap.snapshot_id)
        yield snap
        if snap.parent_snapshot_id is None:
            return
        snap = metadata.snapshot_by_id(snap.parent_snapshot_id)


def _order(snap: Any) -> tuple[int, int]:
    return (int(snap.sequence_number or 0), int(snap.timestamp_ms))


def snapshot_properties(snap: Any) -> Mapping[str, str]:
    """The summary properties of a snapshot (``icesql.*`` among them)."""
    summary = snap.summary
    if summary is None:
        return {}
    return summary.additional_properties if hasattr(summary, "additional_properties") else dict(summary)


def _committed(snap: Any, sink_id: str) -> Committed | None:
    props = snapshot_properties(snap)
    if props.get(SINK_ID) == sink_id:
        try:
            version = int(props.get(SINK_VERSION, "0"))
            progress = int(props.get(PROGRESS, "-1"))
        except ValueError:
            return None
        own = {
            k: v for k, v in props.items() if k.startswith("icesql.") and not k.startswith(CARRIED_PROGRESS)
        }
        return Committed(
            snap.snapshot_id, version, progress, props.get(COMMIT_REASON), snap.timestamp_ms, own
        )
    carried = props.get(CARRIED_PROGRESS + sink_id)
    if carried is None:
        return None
    try:
        c = json.loads(carried)
        return Committed(
            snap.snapshot_id,
            int(c["version"]),
            int(c["progress"]),
            c.get("reason"),
            snap.timestamp_ms,
            dict(c.get("properties") or {}),
        )
    except (ValueError, KeyError, TypeError):
        return None


def sink_ids(metadata: Any) -> set[str]:
    """Every sink id a snapshot of the table names (in its own summary or carried)."""
    out: set[str] = set()
    for snap in metadata.snapshots:
        props = snapshot_properties(snap)
        if props.get(SINK_ID):
            out.add(props[SINK_ID])
        out.update(k[len(CARRIED_PROGRESS) :] for k in props if k.startswith(CARRIED_PROGRESS))
    return out


_CARRIED_ELSEWHERE = frozenset({SINK_ID, SINK_VERSION, PROGRESS, COMMIT_REASON})


def carried_progress(metadata: Any, branch: str = "main") -> dict[str, str]:
    """Summary properties for a maintenance snapshot about to be committed on ``branch`` of
    ``metadata``: every sink's last version and progress (``CARRIED_PROGRESS`` + sink id).

    ``last_committed_snapshot`` takes such a snapshot for the sink's own, so a sink's progress
    survives when snapshot expiration removes the snapshots the sink committed itself (which it
    may once a newer snapshot carries the progress: the files of a compacted table are freed
    even when its sink no longer commits). Compute it from exactly the metadata the snapshot is
    committed on: a sink commit in between must not be carried over with an older progress."""
    out = {}
    for sink in sorted(sink_ids(metadata)):
        found = last_committed_snapshot(metadata, sink, branch)
        if found is not None:
            value = {
                "version": found.version,
                "progress": found.progress,
                "reason": found.reason,
                # what else the sink recorded with its progress (the source watermark, ...)
                "properties": {k: v for k, v in found.properties.items() if k not in _CARRIED_ELSEWHERE},
            }
            out[CARRIED_PROGRESS + sink] = json.dumps(value, sort_keys=True)
    return out


def last_committed_snapshot(table_or_metadata: Any, sink_id: str, branch: str = "main") -> Committed | None:
    """The newest snapshot of ``branch`` that carries ``sink_id``: committed by the sink, or a
    maintenance snapshot carrying its progress (``carried_progress``).

    Walks parents, newest first. Snapshot expiration cuts that walk short: it keeps each sink's
    newest snapshot (``maintenance.expire``) but may expire the snapshots between it and the
    current one, and the walk stops at the first missing parent (pyiceberg even clears the
    ``parent-snapshot-id`` of the child). So when the walk does not find the sink, the retained
    snapshots older than where it stopped are searched too, newest (by sequence number) first:
    they are the ancestors beyond the gap. A snapshot newer than the walk's end that the walk did
    not reach (rolled back, or on another branch) never counts: its rows are not in ``branch``.
    """
    metadata = getattr(table_or_metadata, "metadata", table_or_metadata)
    oldest = None
    for snap in _ancestors(metadata, branch):
        oldest = snap
        found = _committed(snap, sink_id)
        if found is not None:
            return found
    if oldest is None:
        return None
    end = _order(oldest)
    beyond = [s for s in metadata.snapshots if _order(s) < end]
    for snap in sorted(beyond, key=_order, reverse=True):
        found = _committed(snap, sink_id)
        if found is not None:
            return found
    return None


def last_committed(table: Any, sink_id: str, branch: str = "main") -> tuple[int, int] | None:
    """``(version, progress)`` of the newest snapshot carrying ``sink_id``, or None."""
    c = last_committed_snapshot(table, sink_id, branch)
    return (c.version, c.progress) if c else None


# --------------------------------------------------------------------------- commit


def as_data_file(f: Any, format_version: int) -> Any:
    from icesql.engine.iceberg.writer import WrittenFile

    if isinstance(f, WrittenFile):
        return f.to_data_file(format_version)
    return f


def _stage_group(tx: Any, table: Any, group: CommitGroup, properties: dict[str, str]) -> Any:
    from pyiceberg.table.snapshots import Operation

    append_cls, delta_cls = internals.producer_classes()
    meta = tx.table_metadata
    fv = int(meta.format_version)
    data = [as_data_file(f, fv) for f in group.data_files]
    deletes = [as_data_file(f, fv) for f in group.delete_files]
    for d in deletes:
        if int(d.content) == 0:
            raise ExecutionError(f"{d.file_path} is a data file given as a delete file")
    from icesql.engine.iceberg.dvs import is_position_file, to_deletion_vectors
    from icesql.engine.iceberg.table_files import entries_reader

    replaced: list[Any] = []
    change = None
    if fv >= 3 and any(is_position_file(d) for d in deletes):
        # a v3 table takes deletion vectors, not position delete files (``iceberg.dvs``)
        change = to_deletion_vectors(table, meta, [d for d in deletes if is_position_file(d)])
        deletes = [d for d in deletes if not is_position_file(d)] + change.added
        replaced = [f.data_file for f in change.removed]
    if deletes:
        if fv < 2:
            raise ExecutionError(
                f"table {table.name()} is format version {fv}: deletes need format version 2"
            )
        producer = delta_cls(
            operation=Operation.OVERWRITE if data else Operation.DELETE,
            transaction=tx,
            io=table.io,
            snapshot_properties=properties,
        )
        for d in deletes:
            producer.add_delete_file(d)
        if replaced:
            producer.remove_delete_files(replaced, entries_reader(table.io))
        if change is not None and change.puffin_path:
            producer.written_files.append(change.puffin_path)  # gone again if the commit fails
    else:
        producer = append_cls(
            operation=Operation.APPEND, transaction=tx, io=table.io, snapshot_properties=properties
        )
    for f in data:
        if int(f.content) != 0:
            raise ExecutionError(f"{f.file_path} is a delete file given as a data file")
        producer.append_data_file(f)
    internals.apply_producer(tx, producer)
    return producer


Guard = Callable[[Any, list[CommitGroup]], list[CommitGroup]]


def commit(
    table: Any,
    request: CommitRequest,
    *,
    retries: int = 5,
    backoff: float = 0.1,
    guard: Guard | None = None,
    transient_retries: int | None = None,
    transient_backoff: float | None = None,
) -> CommitResult:
    """Commit ``request`` to ``table`` (reloaded first), exactly once per (sink, progress).

    Raises ``FencedError`` when a newer ``sink_version`` has committed; returns a skipped result
    (the existing snapshot) when a snapshot of this sink with the same or an older version already
    carries a progress ≥ ``request.progress``; retries ``CommitFailedException`` ``retries`` times.
    ``guard(table, groups)`` sees the reloaded table before every attempt and may return other
    groups (the key index adds equality deletes when another writer changed the table meanwhile).

    A failure on a transient cause (``failures.transient_failure``: the network, a timeout, a
    server error) is retried ``transient_retries`` times (``ICESQL_COMMIT_RETRIES``),
    ``transient_backoff`` seconds (``ICESQL_RETRY_BACKOFF``) after the first and twice as long
    after each next, then raised. Whether the failed attempt took effect
    is unknown (an answer cut after the catalog committed): the next attempt reloads the table,
    and finding this sink's version at the request's progress it returns that commit as its own.
    The files that attempt wrote stay (the table may name them).
    """
    from pyiceberg.exceptions import CommitFailedException

    from icesql import settings
    from icesql.engine.connections.failures import transient_failure

    if transient_retries is None:
        transient_retries = max(0, settings.COMMIT_RETRIES.get_int() or 0)
    if transient_backoff is None:
        transient_backoff = max(0.0, settings.RETRY_BACKOFF.get_float() or 0.0)
    start = time.monotonic()
    planned = request.all_groups()
    groups = planned
    attempt = 0
    lost = 0  # attempts that failed on a transient cause (their outcome is unknown)
    while True:
        attempt += 1
        try:
            table.refresh()
            last = last_committed_snapshot(table, request.sink_id)
            if last is not None:
                if last.version > request.sink_version:
                    raise FencedError(
                        f"sink {request.sink_id} version {request.sink_version} is fenced out: version "
                        f"{last.version} committed snapshot {last.snapshot_id} to {table.name()}",
                        hint="another runner of this sink took over; this one stops",
                    )
                if last.progress >= request.progress:
                    if lost and last.version == request.sink_version:
                        # ours: only this runner commits this version, one commit at a time
                        log.info(
                            "progress %s of sink %s: the commit whose answer was lost took effect "
                            "(snapshot %s)",
                            request.progress,
                            request.sink_id,
                            last.snapshot_id,
                        )
                        return _result(groups, (last.snapshot_id,), start, attempt)
                    log.info(
                        "progress %s of sink %s already committed in snapshot %s: skipping",
                        request.progress,
                        request.sink_id,
                        last.snapshot_id,
                    )
                    return CommitResult(
                        last.snapshot_id, 0, 0, 0, time.monotonic() - start, skipped=True, attempts=attempt
                    )
            groups = guard(table, planned) if guard is not None else planned
            tx = internals.transaction(table)
            producers: list[Any] = []
            try:
                for i, g in enumerate(groups):
                    props = {
                        **{k: str(v) for k, v in request.extra_summary.items()},
                        SINK_ID: request.sink_id,
                        SINK_VERSION: str(request.sink_version),
                        PROGRESS: str(
                            request.progress if g.progress is None or i == len(groups) - 1 else g.progress
                        ),
                        COMMIT_REASON: request.reason,
                    }
                    producers.append(_stage_group(tx, table, g, props))
                tx.commit_transaction()
            except CommitFailedException as exc:
                internals.discard_written(producers, table.io)
                if attempt > retries:
                    # a Hive table's lock that stayed held is no conflict: the sink is retried later
                    held = transient_failure(exc, label=f"commit to {'.'.join(table.name())}", action="complete")
                    if held is not None:
                        raise held from None
                    raise ExecutionError(
                        f"commit to {table.name()} failed after {attempt} attempts: {exc}",
                        hint="another writer keeps committing to the table",
                    ) from exc
                wait = min(backoff * (2 ** (attempt - 1)), 5.0)
                log.warning("commit conflict on %s, retrying (%s/%s)", table.name(), attempt, retries)
                time.sleep(wait + random.uniform(0, wait / 10))
                continue
        except ExecutionError:
            raise
        except Exception as exc:
            name = ".".join(table.name())
            cause = transient_failure(exc, label=f"commit to {name}", action="complete")
            if cause is None or lost >= transient_retries:
                raise
            lost += 1
            wait = transient_backoff * 2 ** (lost - 1)
            log.warning("%s; retrying in %.0fs (%d/%d)", cause.message, wait, lost, transient_retries)
            time.sleep(wait)
            continue
        return _result(groups, tuple(p.snapshot_id for p in producers), start, attempt)


def _result(
    groups: Sequence[CommitGroup], snapshot_ids: tuple[int, ...], start: float, attempts: int
) -> CommitResult:
    all_files = [f for g in groups for f in (*g.data_files, *g.delete_files)]
    data_files = [f for g in groups for f in g.data_files]
    delete_files = [f for g in groups for f in g.delete_files]
    return CommitResult(
        snapshot_ids[-1] if snapshot_ids else None,
        sum(int(f.record_count) for f in data_files),
        sum(int(f.file_size_in_bytes) for f in all_files),
        len(all_files),
        time.monotonic() - start,
        snapshot_ids=snapshot_ids,
        attempts=attempts,
        delete_rows=sum(int(f.record_count) for f in delete_files),
        data_files=len(data_files),
        delete_files=len(delete_files),
    )


def snapshot_summary(table: Any, snapshot_id: int | None = None) -> dict[str, str]:
    """The summary of a snapshot (default: the current one) as a plain dict."""
    snap = table.metadata.snapshot_by_id(snapshot_id) if snapshot_id is not None else table.current_snapshot()
    if snap is None or snap.summary is None:
        return {}
    return {"operation": snap.summary.operation.value, **snap.summary.additional_properties}


__all__ = [
    "CARRIED_PROGRESS",
    "COMMIT_REASON",
    "PROGRESS",
    "SINK_ID",
    "SINK_VERSION",
    "CommitGroup",
    "CommitRequest",
    "CommitResult",
    "Committed",
    "FencedError",
    "carried_progress",
    "commit",
    "last_committed",
    "request_for_staged",
    "last_committed_snapshot",
    "sink_ids",
    "snapshot_properties",
    "snapshot_summary",
]
