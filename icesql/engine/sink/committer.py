"""The committing half of a sink's runner: a batch's written files staged (with its dead letters), and
what is staged committed to the table in one catalog commit - the snapshot summary's progress,
fencing, the dead-letter table first, the compaction hint after.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from icesql import settings
from icesql.engine.base.events import CommitEvent
from icesql.engine.base.hooks import mark
from icesql.engine.base.wire import DROPPED, FALLBACK
from icesql.engine.commit.staging import StagedBatch
from icesql.errors import ExecutionError

log = logging.getLogger("icesql.sink")


class Committing:
    """The committing half of ``runner.SinkRunner``, which inherits it (the writing half never
    commits)."""

    # what this half reads and updates of the runner (``runner.SinkRunner`` sets them)
    _compaction_hinted: Any
    _skipped_seen: Any
    clock: Any
    committed_progress: Any
    dead_letter_count: Any
    dead_letters: Any
    fallback_files: Any
    index: Any
    key_index: Any
    last_commit_at: Any
    last_snapshot_id: Any
    listeners: Any
    lock: Any
    maintainer: Any
    name: Any
    plan: Any
    progress: Any
    progress_base: Any
    relation: Any
    sink_id: Any
    skipped_records: Any
    source: Any
    staging: Any
    status: Any
    stopping: Any
    table: Any
    totals: Any
    version: Any
    _update: Any

    def stage_rows(self, rows: list[dict[str, Any]], batch_id: int) -> StagedBatch | None:
        """Account for one written batch (skipped, dead-lettered and dropped records) and describe
        its files."""
        plan = self.plan
        rel = self.relation
        assert rel is not None
        letter_files, letters, reasons = self._write_dead_letters(batch_id)
        skipped_total = rel.skipped_count()
        skipped = max(0, skipped_total - self._skipped_seen)
        self._skipped_seen = skipped_total
        if skipped:
            log.warning("sink %s: skipped %d record(s) in batch %d (ON ERROR, ON DATA LOSS)", self.name, skipped, batch_id)
        dropped = sum(r["rows"] for r in rows if r["content"] == DROPPED)
        if dropped:
            log.warning(
                "sink %s: dropped %d change(s) with a null KEY column (%s) in batch %d: KEY NOT ENFORCED",
                self.name,
                dropped,
                ", ".join(plan.key),
                batch_id,
            )
            skipped += dropped
        if skipped:
            self.skipped_records += skipped
            self._update(skipped_records=self.skipped_records)
        consumed = self.source.staged(rows, batch_id - self.progress_base) if self.source is not None else {}
        fallbacks = sum(r["rows"] for r in rows if r["content"] == FALLBACK)
        if fallbacks:
            self.fallback_files += fallbacks
            log.info("sink %s: %d file(s) of batch %d read by Spark's reader", self.name, fallbacks, batch_id)
        rows = [r for r in rows if r["content"] >= 0]
        if not rows and not letter_files:
            return None
        return StagedBatch.of_files(
            batch_id,
            rows,
            **consumed,
            skipped=skipped,
            dead_letter_files=tuple(letter_files),
            dead_letters=letters,
            dead_letter_reasons=reasons,
        )

    def _write_dead_letters(self, batch_id: int) -> tuple[list[str], int, dict[str, int]]:
        """The batch's bad records, written to the dead-letter table's file to be staged."""
        assert self.relation is not None
        if not self.relation.letters:
            return [], 0, {}
        if self.dead_letters is None:  # pragma: no cover - prepare opens it whenever letters exist
            raise ExecutionError(f"sink {self.name}: bad records but no dead-letter table")
        return self.dead_letters.write_gathered(self.relation.letters, batch_id)

    def commit(self, reason: str) -> Any:
        """Commit the staged entries above the committed progress (None: nothing to commit)."""
        from icesql.engine.commit.snapshot import commit, request_for_staged

        with self.lock:
            entries = [e for e in self.staging.pending() if e.batch_id > self.committed_progress]
            if not entries:
                return None
            assert self.version is not None
            request = request_for_staged(
                entries,
                sink_id=self.sink_id,
                sink_version=self.version,
                reason=reason,
                extra_summary=self.source.summary(entries) if self.source is not None else {},
                per_batch=self.index is not None,
            )
            started = time.monotonic()
            letters = self._commit_dead_letters(entries, reason)
            result = commit(self.table, request, guard=self.key_index.guard if self.key_index is not None else None)
            self.progress.committed = request.progress
            self.staging.discard_through(request.progress)
            if self.source is not None:
                self.source.after_commit()
            self.clock.committed()
            rows = sum(e.rows for e in entries)
            nbytes = sum(e.bytes for e in entries)
            files = sum(e.files for e in entries)
            if not result.skipped:
                self.totals["rows_committed"] += rows
                self.totals["bytes_committed"] += nbytes
                self.totals["files_committed"] += files
                self.totals["commits"] += 1
                self.last_commit_at = time.time()
                self.last_snapshot_id = result.snapshot_id
            event = CommitEvent(
                sink=self.name,
                table=self.plan.table_identifier,
                reason=reason,
                rows=rows,
                deletes=sum(e.deletes for e in entries),
                bytes=nbytes,
                data_files=sum(len(e.data_files) for e in entries),
                delete_files=sum(len(e.delete_files) for e in entries),
                batches=len(entries),
                progress=request.progress,
                snapshot_id=result.snapshot_id,
                duration=time.monotonic() - started,
                attempts=result.attempts,
                skipped=result.skipped,
                dead_letters=letters,
            )
            mark(f"committed ({reason})")
            log.info(
                "commit sink=%s table=%s reason=%s rows=%d deletes=%d bytes=%d files=%d batches=%d "
                "progress=%d snapshot=%s duration=%.3fs%s",
                event.sink,
                event.table,
                reason,
                rows,
                event.deletes,
                nbytes,
                files,
                event.batches,
                event.progress,
                event.snapshot_id,
                event.duration,
                " (already committed)" if result.skipped else "",
            )
            self.listeners.commit(event)
            self._update(
                **self.totals,
                last_commit_at=self.last_commit_at,
                last_snapshot_id=self.last_snapshot_id,
                last_progress=request.progress,
                last_error=None,
            )
            if any(e.delete_files for e in entries) and not result.skipped:
                self._hint_compaction()
            if self.key_index is not None:
                self.key_index.after_commit(result)
            if self.status == "running" and not self.stopping and reason != "shutdown":
                self.maintainer.after_commit()
            elif not result.skipped:
                self.maintainer.committed_unplanned()
            return result

    def _commit_dead_letters(self, entries: list[StagedBatch], reason: str) -> dict[str, int]:
        """The staged batches' dead letters, committed before the target's commit; returns the
        records per reason newly committed."""
        if self.dead_letters is None:
            return {}
        reasons, records = self.dead_letters.commit_staged(entries, version=int(self.version or 0), reason=reason)
        if records:
            self.dead_letter_count += records
            self._update(dead_letters=self.dead_letter_count)
        return reasons

    def _hint_compaction(self) -> None:
        """Once per runner: say when the table's delete files reach ``ICESQL_COMPACT_HINT``
        (default 10), past which readers slow down markedly (``icesql compact``); for a sink
        that compacts its table itself, only when its compactions fall behind
        (``compaction_hint_at``)."""
        if self._compaction_hinted:
            return
        try:
            limit = compaction_hint_at(self.plan.maintenance, settings.COMPACT_HINT.get_int() or 0)
            snap = self.table.current_snapshot()
            n = int((snap.summary or {}).get("total-delete-files") or 0) if snap is not None else 0
        except (ValueError, AttributeError):  # pragma: no cover - an odd summary: no hint
            return
        if limit > 0 and n >= limit:
            self._compaction_hinted = True
            log.warning(
                "sink %s: table %s holds %d delete files, which slow its readers down; "
                "run 'icesql compact %s' (safe while the sink runs)",
                self.name,
                self.plan.table_identifier,
                n,
                self.name,
            )


def compaction_hint_at(policy: Any, limit: int) -> int:
    """The delete files at which a sink says ``icesql compact`` is due (0: never). ``limit`` is
    ``ICESQL_COMPACT_HINT``. A sink whose maintenance compacts its table rewrites the files once
    there are more than its MAXIMUM DELETE FILES, so a hint at ``limit`` would only send the user
    to do by hand what the sink does next: it says so only past twice that number, when its
    compactions fall behind (or fail)."""
    if limit <= 0 or not (policy.automatic and policy.compaction):
        return limit
    return max(limit, 2 * policy.maximum_delete_files + 1)
