"""The half of a sink that runs where Spark runs Python: picklable, no driver state.

* ``BatchWriter`` — one Spark micro-batch -> data files (and, for upserts, equality-delete
  files): the upsert reduction (last change per KEY wins, by the changelog position) or the
  changelog filter (deletes dropped in MODE APPEND), then ``FileWriterTask`` on the executors.
  Only the files' descriptions come back to the driver, never rows.
* ``FileWriterTask`` — the ``mapInArrow`` body: rows in, one row per written file out
  (``DataFileWriter``: field ids, statistics, partitioning, rollover at MAXIMUM FILE SIZE). A
  change with a null KEY column fails the batch with a marked message (``NullKeyError`` on the
  driver, naming sink, column, file and record) or, with ``KEY ... NOT ENFORCED``, is dropped and
  counted (a ``DROPPED`` row).
* ``RemoteBatch`` — ``foreachBatch`` of a sink on Spark Connect, run by the server's Python:
  writes the batch with ``BatchWriter`` and leaves the files' description in the drop box
  (``dropbox``) for the client half (``drain``).
"""

from __future__ import annotations

from typing import Any

from icesql.engine.backends.base import as_frame
from icesql.engine.base.changelog import (
    BLK,
    FILE,
    INTERNAL_COLUMNS,
    LINE,
    OP,
    drop_null_keys,
)
from icesql.engine.base.hooks import batch_delay, kill_point
from icesql.engine.base.wire import (
    DROPPED,
    file_row,
    files_batch,
    files_spark_schema,
    releases_task_memory,
)


class FileWriterTask:
    """Runs inside ``mapInArrow``: rows in, one row per written file out (picklable)."""

    def __init__(
        self,
        spec: Any,
        data_columns: list[str],
        *,
        changelog: bool,
        upsert: bool,
        key: list[str],
        equality_ids: list[int],
        batch_id: int,
        sink: str = "",
        relation: str = "",
        key_enforced: bool = True,
    ) -> None:
        self.spec = spec
        self.data_columns = data_columns
        self.changelog = changelog
        self.upsert = upsert
        self.key = key
        self.equality_ids = equality_ids
        self.batch_id = batch_id
        self.sink = sink
        self.relation = relation
        self.key_enforced = key_enforced

    def _null_keys(self, b: Any) -> Any:
        return drop_null_keys(b, self.key, enforced=self.key_enforced, sink=self.sink, relation=self.relation)

    @releases_task_memory
    def __call__(self, batches: Any) -> Any:
        import pyarrow.compute as pc

        from icesql.engine.iceberg.writer import DataFileWriter

        data_w = DataFileWriter(self.spec, "data")
        del_w = DataFileWriter(self.spec, "equality_deletes", self.equality_ids) if self.upsert else None
        first = True
        dropped = 0
        try:
            for b in batches:
                if b.num_rows == 0:
                    continue
                if self.upsert:
                    b, n = self._null_keys(b)
                    dropped += n
                    if b.num_rows == 0:
                        continue
                names = b.schema.names
                if del_w is not None:
                    del_w.write(b.select(self.key))
                if self.changelog and OP in names:
                    keep = pc.fill_null(pc.not_equal(b.column(names.index(OP)), "d"), True)
                    b = b.filter(keep)
                if b.num_rows:
                    data_w.write(b.select(self.data_columns))
                if first:
                    first = False
                    kill_point("write", self.batch_id)
            files = data_w.close()
            if del_w is not None:
                files += del_w.close()
        except BaseException:
            data_w.abort()
            if del_w is not None:
                del_w.abort()
            raise
        rows = [file_row(f) for f in files]
        if dropped:
            rows.append({"content": DROPPED, "file": "", "rows": dropped, "bytes": 0})
        if rows:
            yield files_batch(rows)


class BatchWriter:
    """One Spark batch → files: the upsert/changelog transform, then ``FileWriterTask`` on the
    executors. Returns the task's rows (one per file), never data. Picklable: on Spark Connect it
    runs inside the server's ``foreachBatch``."""

    def __init__(
        self,
        spec: Any,
        *,
        upsert: bool,
        key: list[str],
        equality_ids: list[int],
        sink: str,
        relation: str,
        key_enforced: bool,
    ) -> None:
        self.spec = spec
        self.upsert = upsert
        self.key = key
        self.equality_ids = equality_ids
        self.sink = sink
        self.relation = relation
        self.key_enforced = key_enforced

    @classmethod
    def for_sink(cls, plan: Any, table: Any, io_properties: Any, relation: str) -> BatchWriter:
        """The writer of ``plan``'s batches into ``table`` (driver side: it reads the table's
        schema, spec and properties once; the result travels to Spark pickled)."""
        from icesql.engine.iceberg.tables import key_field_ids
        from icesql.engine.iceberg.writer import WriteSpec
        from icesql.plan import SinkMode

        upsert = plan.mode is SinkMode.UPSERT
        spec = WriteSpec.from_table(
            table,
            max_file_size=plan.maximum_file_size,
            io_properties=dict(io_properties or {}),
            file_format=plan.format,  # the sink's FORMAT, else the table's write.format.default
        )
        return cls(
            spec,
            upsert=upsert,
            key=list(plan.key),
            equality_ids=key_field_ids(table.schema(), plan.key) if upsert else [],
            sink=plan.name,
            relation=relation,
            key_enforced=plan.key_enforced,
        )

    def use_io(self, io_properties: Any) -> None:
        """Write the next batches with ``io_properties`` (fresh credentials of an assumed role)."""
        self.spec = self.spec.with_io(io_properties)

    def __call__(self, changes: Any, batch_id: int) -> list[dict[str, Any]]:
        """Write one batch of ``changes`` (a Spark DataFrame, or a ``backends.base.Frame``): the
        upsert reduction (the last change per KEY; changes with a null KEY all go to the writer,
        which fails or drops them) or the changelog filter, then ``FileWriterTask`` over the
        frame's groups. Returns the task's rows (one per file), never data."""
        frame = as_frame(changes)
        columns = frame.columns
        changelog = OP in columns
        if self.upsert:
            frame = frame.last_per_key(self.key)
        elif changelog:
            frame = frame.without_deletes()
        data_columns = [c for c in columns if c not in INTERNAL_COLUMNS]
        task = self._task(data_columns, changelog, batch_id)
        return frame.select(self._kept(data_columns, columns)).map(task, files_spark_schema()).rows()

    def _task(self, data_columns: list[str], changelog: bool, batch_id: int) -> FileWriterTask:
        return FileWriterTask(
            self.spec,
            data_columns,
            changelog=changelog,
            upsert=self.upsert,
            key=self.key,
            equality_ids=self.equality_ids,
            batch_id=batch_id,
            sink=self.sink,
            relation=self.relation,
            key_enforced=self.key_enforced,
        )

    def _kept(self, data_columns: list[str], columns: list[str]) -> list[str]:
        keep = data_columns + ([OP] if OP in columns else [])
        if self.upsert:  # where a change came from, for the null-key error
            keep += [c for c in (FILE, BLK, LINE) if c in columns]
        return keep


class RemoteBatch:
    """``foreachBatch`` of a sink on Spark Connect, run by the server's Python: write the batch's
    files, then leave their description in the drop box for the client (``dropbox``)."""

    def __init__(
        self, writer: Any, dropbox: Any, *, version: int, skip_through: int, progress_base: int = 0
    ) -> None:
        self.writer = writer
        self.dropbox = dropbox
        self.version = version
        self.skip_through = skip_through
        self.progress_base = progress_base  # progress = base + Spark batch id

    def __call__(self, batch_df: Any, spark_batch_id: int) -> None:
        progress = self.progress_base + int(spark_batch_id)
        # Spark replays the last batch of a run that stopped: the client already staged or
        # committed it (at most ``skip_through``), or its record is still waiting to be picked up
        if progress <= self.skip_through or self.dropbox.get(progress) is not None:
            return
        batch_delay()
        rows = self.writer(batch_df, int(spark_batch_id))
        self.dropbox.put(progress, self.version, rows)


__all__ = [
    "BatchWriter",
    "FileWriterTask",
    "RemoteBatch",
]
