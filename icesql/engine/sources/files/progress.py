"""A FILES source's progress on the Arrow path (``source_kinds.SourceProgress``): the file log in
the sink's checkpoint, the newest source file each commit records, resume from a lost
checkpoint (``resume``) and CLEAN SOURCE after a bounded run (``clean``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from icesql import settings
from icesql.engine.base.wire import CONSUMED
from icesql.engine.sources.kinds import SourceProgress

log = logging.getLogger("icesql.sink")


class FilesProgress(SourceProgress):
    checkpoint_suffix = "-files"
    resumes_from_table = True

    def __init__(self, runner: Any, plan: Any = None) -> None:
        super().__init__(runner, plan)
        self.watermark: tuple[int, str] | None = None  # newest source file committed (mtime, path)

    @classmethod
    def nothing_new(cls, probe: Any) -> str | None:
        """Every file the file log admitted was read by the last committed batch, CLEAN SOURCE
        has taken them, and a listing finds no file the log has not seen."""
        from icesql.engine.connections.stores.location import Location
        from icesql.engine.sources.files.log import DIRECTORY, FileLog
        from icesql.engine.sources.files.relation import source_cleaner

        if not settings.ARROW_PATH.enabled():
            return None
        plan = probe.source
        io = probe.engine.source_io(plan)
        file_log = FileLog(str(probe.checkpoint / DIRECTORY), io)
        try:
            through = probe.offset.get("seq")
            if file_log.seed_info() is None or through != file_log.high():
                return None
            if source_cleaner(plan) is not None and file_log.cleaned_through() < through:
                return None
            if file_log.unseen(Location(plan.path or "", io).list()):
                return None
        finally:
            file_log.close()
        return f"no new file in {plan.path}"

    @classmethod
    def runs_locally(cls, source: Any, sink: Any, session: Any) -> str | None:
        """A sink on the Arrow path whose rows' schema is built without Spark: an append, a
        changelog's append, or an upsert (reduced per KEY in Arrow, its key index hashed as
        Spark hashes it: ``index.hashing``)."""
        from icesql.engine.backends.hashing import key_hashable
        from icesql.engine.sources.ddl import struct_from_ddl

        if not settings.ARROW_PATH.enabled():
            return "ICESQL_ARROW_PATH is off"
        if sink.routed:  # each table's rows are decoded and written in this process (``sink.routed``)
            return None
        if not source.schema:
            # a Parquet or ORC source's schema comes from its files' footers (``relation.footer_*_schema``);
            # a KEY's types are known only once they are read, here for a local directory
            if not sink.key:
                return None
            return _inferred_key_hashable(source, sink.key)
        struct = struct_from_ddl(source.schema, session.timestamp_type)
        if struct is None:
            return "its SCHEMA needs Spark's parser"
        return key_hashable(struct, sink.key)

    def binding(self) -> Any:
        """What binds the source to this sink on the Arrow path (None: Spark's path only)."""
        r = self.runner
        if not settings.ARROW_PATH.enabled():
            return None
        from icesql.engine.sources.files.log import DIRECTORY
        from icesql.engine.sources.files.relation import ArrowBinding

        backend = r.backend
        return ArrowBinding(
            log_dir=f"{r.checkpoint_root(self.checkpoint_suffix).rstrip('/')}/{DIRECTORY}",
            parallelism=backend.parallelism,
            session_tz=backend.time_zone,
            timestamp_type=backend.timestamp_type,
        )

    def bound(self, relation: Any) -> SourceProgress:
        # Spark's reader took the source (a reader option, a map column, ...): its checkpoint alone
        return self if relation.arrow is not None else SourceProgress(self.runner, self.plan)

    def resume(self, summary: dict[str, str] | None) -> int | None:
        """The source's file log, seeded when it is new (``files.resume``), and the progress base
        of its checkpoint."""
        from icesql.engine.sources.files.log import FileLog
        from icesql.engine.sources.files.resume import seed_log, watermark_of

        r = self.runner
        arrow = r.relation.arrow
        self.watermark = watermark_of(summary)
        file_log = FileLog(arrow.log_dir, arrow.location.io_properties)
        try:
            info = file_log.seed_info()
            if info is not None:
                return int(info["progress_base"])
            old = r.checkpoint if (r.checkpoint / "offsets").is_dir() else None
            return int(
                seed_log(
                    file_log,
                    arrow.location,
                    name=r.name,
                    committed=r.committed_progress,
                    summary=summary,
                    old_checkpoint=old,
                )
            )
        finally:
            file_log.close()

    def staged(self, rows: Sequence[dict[str, Any]], spark_batch_id: int) -> dict[str, Any]:
        consumed = [r for r in rows if r["content"] == CONSUMED]
        mark = max(((r["bytes"], r["file"]) for r in consumed), default=None)
        return {
            "source_seq": max((r["rows"] for r in consumed), default=None),
            "source_mtime_ms": mark[0] if mark else None,
            "source_path": mark[1] if mark else None,
        }

    def summary(self, entries: Sequence[Any]) -> dict[str, str]:
        """The newest source file the table holds (by modification time, then path), so a lost
        checkpoint never makes the sink skip or repeat files (``files.resume``)."""
        from icesql.engine.sources.files.resume import SOURCE_SEQ, WATERMARK, watermark_json

        marks = [
            (int(e.source_mtime_ms or 0), str(e.source_path)) for e in entries if e.source_path is not None
        ]
        if self.watermark is not None:
            marks.append(self.watermark)
        if not marks:
            return {}
        self.watermark = max(marks)
        out = {WATERMARK: watermark_json(*self.watermark)}
        seqs = [e.source_seq for e in entries if e.source_seq is not None]
        if seqs:
            out[SOURCE_SEQ] = str(max(seqs))
        return out

    def after_run(self) -> None:
        """CLEAN SOURCE at the end of a ``run --once``: the source cleans a batch's files at the
        next trigger, which a run that has ended never has, so the files of its last batch are
        cleaned here, from the checkpoint's commit log (``files.clean``). A failure is logged:
        the rows are committed, and the next run cleans what is left."""
        from icesql.engine.sources.files.clean import clean_committed
        from icesql.engine.sources.files.relation import source_cleaner

        r = self.runner
        arrow = r.relation.arrow
        if not r.local_checkpoint:
            return
        cleaner = source_cleaner(arrow.plan)
        if cleaner is None:
            return
        try:
            clean_committed(arrow.log_dir, arrow.location, cleaner, r.checkpoint_location)
        except Exception as e:  # noqa: BLE001
            log.warning("sink %s: CLEAN SOURCE of source %s stopped: %s", r.name, arrow.plan.name, e)


def _inferred_key_hashable(source: Any, key: Sequence[str]) -> str | None:
    """``hashing.key_hashable`` of the KEY of a sink over a source without a SCHEMA, its schema
    read from the files' footers (a local directory's; an object store's is read when the sink
    starts, with its credentials, so such a sink runs on Spark)."""
    from icesql.engine.backends.hashing import key_hashable
    from icesql.engine.connections.stores.location import is_remote
    from icesql.engine.sources.files.relation import footer_orc_schema, footer_parquet_schema
    from icesql.plan import SourceFormat

    if is_remote(source.path or ""):
        return "its KEY's types come from files on an object store"
    infer = footer_orc_schema if source.format is SourceFormat.ORC else footer_parquet_schema
    try:
        struct = infer(source, {})
    except Exception as e:  # noqa: BLE001 - the run on Spark says what is wrong
        return f"its schema cannot be read from the files' footers ({e})"
    return key_hashable(struct, key)


__all__ = ["FilesProgress"]
