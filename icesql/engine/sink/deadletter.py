"""The dead-letter table of ``ON ERROR = 'dead-letter'``: bad records kept, not dropped.

Where the records come from
    ``sources.guard.RecordGuard`` (Spark's reader of a FILES source; the Arrow path hands every
    file with a bad record to that reader, ``files.types.Fallback``) describes each record it
    cannot convert and adds it to a Spark accumulator (``letter_accumulator``) instead of
    failing the task. Accumulators of transformations may be applied twice (a retried task, a
    batch the Arrow path runs again with one more file left to Spark), so the driver keeps one
    record per position: (source, file, split offset, record ordinal) never changes between
    reads of the same file.

Exactly once
    The driver writes a batch's dead letters as one Parquet data file of the dead-letter table
    before ``foreachBatch`` returns and stages it with the batch's other files
    (``staging.StagedBatch.dead_letter_files``). A commit first commits the dead letters of the
    staged batches to the dead-letter table, then the data to the target, each snapshot
    carrying the sink's id, version and progress (``commit``). On restart the staged entries
    above the *target's* progress stay staged; of those, the dead-letter table takes only the
    ones above *its own* progress. A crash between the two commits therefore never loses or
    repeats a dead letter, and a replayed batch is skipped as it is for the target.

Secrets
    The raw text and the message pass through ``secrets.scrub`` before they are written: a
    secret value a record happens to hold (or a message quotes) never reaches the table.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from icesql.engine.sources.guard import MAX_RAW, arrow_schema, spark_schema_json, take_letters
from icesql.plan import SinkMode, SinkPlan

log = logging.getLogger("icesql.sink")


# --------------------------------------------------------------------------- executors


# --------------------------------------------------------------------------- the table


class DeadLetters:
    """A sink's dead-letter table: writing a batch's letters, committing staged ones."""

    def __init__(self, plan: SinkPlan, *, sink_id: str, catalog: Any, io_properties: Any) -> None:
        self.plan = plan
        self.sink_id = sink_id
        self.identifier = plan.dead_letter_identifier
        self.name = ".".join(self.identifier)
        self.table = self._ensure(catalog)
        self._io = io_properties  # callable(table) -> FileIO properties
        self._spec: Any = None  # writer.WriteSpec, described once (as the target's writer is)
        self.committed = -1

    def _ensure(self, catalog: Any) -> Any:
        from icesql.engine.iceberg.tables import ensure_table

        # a plain append table: none of the target's KEY, partitioning or properties
        plain = replace(
            self.plan,
            mode=SinkMode.APPEND,
            key=(),
            partition_by=(),
            properties=(),
            namespace=self.identifier[:-1],
            table=self.identifier[-1],
            schema_evolution=True,
        )
        return ensure_table(catalog, self.identifier, spark_schema_json(), plain)

    def recover(self, version: int) -> int:
        """The progress the dead-letter table holds for this sink (fencing as for the target)."""
        from icesql.engine.commit.recovery import committed_progress

        self.committed = committed_progress(
            self.table, self.sink_id, version, name=self.plan.name, table_name=self.name
        )
        return self.committed

    def write(self, letters: Sequence[Mapping[str, Any]], batch_id: int) -> list[str]:
        """One data file of the dead-letter table holding ``letters``; its staged description."""
        import pyarrow as pa

        from icesql.engine.base.secrets import scrub
        from icesql.engine.iceberg.writer import WriteSpec, write_batches

        if not letters:
            return []
        now = int(time.time() * 1_000_000)
        rows = [
            {
                "sink": self.plan.name,
                "sink_id": self.sink_id,
                "batch_id": batch_id,
                "source": letter.get("source"),
                "file": letter.get("file"),
                "byte_offset": int(letter.get("byte_offset") or 0),
                "record": int(letter.get("record") or 0),
                "reason": letter.get("reason"),
                "error": scrub(str(letter.get("error") or "")),
                "raw": None if letter.get("raw") is None else scrub(str(letter["raw"])[:MAX_RAW]),
                "recorded_at": now,
            }
            for letter in letters
        ]
        batch = pa.RecordBatch.from_pylist(rows, schema=arrow_schema())
        if self._spec is None:  # the table as the sink found it (each writer names its own files)
            self._spec = WriteSpec.from_table(self.table, io_properties=dict(self._io(self.table)))
        return [f.dumps() for f in write_batches(self._spec, [batch])]

    def commit(self, entries: Sequence[Any], *, version: int, reason: str) -> Any:
        """Commit the dead letters of the staged ``entries`` this table does not hold yet; returns
        (the commit's result, the entries it took), or None when there was nothing to commit.
        Progress: the newest such entry's batch id."""
        from icesql.engine.commit.snapshot import CommitRequest, commit, last_committed
        from icesql.engine.iceberg.writer import WrittenFile

        if not any(e.dead_letter_files for e in entries):
            return None
        # what the table holds now: another runner of the sink may have committed meanwhile
        # (``recovery.catch_up``), and a request must never span progress already committed
        self.table.refresh()
        last = last_committed(self.table, self.sink_id)
        if last is not None:
            self.committed = max(self.committed, last[1])
        todo = [e for e in entries if e.batch_id > self.committed and e.dead_letter_files]
        if not todo:
            return None
        request = CommitRequest(
            data_files=tuple(WrittenFile.loads(s) for e in todo for s in e.dead_letter_files),
            delete_files=(),
            sink_id=self.sink_id,
            sink_version=version,
            progress=todo[-1].batch_id,
            reason=reason,
        )
        result = commit(self.table, request)
        self.committed = request.progress
        log.info(
            "dead letters sink=%s table=%s reason=%s records=%d progress=%d snapshot=%s%s",
            self.plan.name,
            self.name,
            reason,
            sum(e.dead_letters for e in todo),
            request.progress,
            result.snapshot_id,
            " (already committed)" if result.skipped else "",
        )
        return result, todo

    # ------------------------------------------------------------------ for a running sink

    def write_gathered(self, accumulators: Iterable[Any], batch_id: int) -> tuple[list[str], int, dict[str, int]]:
        """The bad records a batch's readers gathered (``take_letters``), written to a file of
        this table to be staged with the batch: (files, records, records per reason)."""
        letters = take_letters(accumulators)
        if not letters:
            return [], 0, {}
        reasons = dict(Counter(str(letter.get("reason") or "unparsable") for letter in letters))
        log.warning(
            "sink %s: %d bad record(s) in batch %d go to the dead-letter table %s (%s)",
            self.plan.name,
            len(letters),
            batch_id,
            self.name,
            ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items())),
        )
        return self.write(letters, batch_id), len(letters), reasons

    def commit_staged(self, entries: Sequence[Any], *, version: int, reason: str) -> tuple[dict[str, int], int]:
        """Before the target's commit of ``entries``: their dead letters this table lacks,
        committed (so a crash in between leaves them on this side, which its own progress tells
        on restart). Returns the records per reason and the records newly committed."""
        from icesql.engine.base.hooks import kill_point

        done = self.commit(entries, version=version, reason=reason)
        if done is None:
            return {}, 0
        result, todo = done
        kill_point("dead-letters", self.committed)
        if result.skipped:
            return {}, 0
        reasons: Counter[str] = Counter()
        for e in todo:
            reasons.update(e.dead_letter_reasons)
        return dict(reasons), sum(e.dead_letters for e in todo)


def open_dead_letters(
    plan: SinkPlan, relation: Any, *, sink_id: str, catalog: Any, io_properties: Any, version: int
) -> DeadLetters | None:
    """ON ERROR = 'dead-letter' (on the sink or its source): the dead-letter table beside the
    target, in the same catalog, at the progress it holds; None when bad records are not kept."""
    from icesql.plan import OnError

    if plan.on_error is not OnError.DEAD_LETTER and not relation.letters:
        return None
    letters = DeadLetters(plan, sink_id=sink_id, catalog=catalog, io_properties=io_properties)
    letters.recover(version)
    return letters


__all__ = ["DeadLetters", "open_dead_letters"]
