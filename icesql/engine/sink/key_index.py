"""An upsert sink's key index, as its runner uses it (position deletes, the default DELETE MODE).

The runner keeps the lifecycle; this keeps the index's: opened (valid, followed from an older one,
or rebuilt from the table) when the sink starts, handed to the batch writer
(``index.upsert.IndexedUpsertWriter``), guarding each commit against another writer's changes
(``guard``: such a commit also deletes its keys by equality), and brought up to date after a
commit another writer's change went into (``after_commit`` / ``follow``). The maintainer asks it
whether it is ``stale`` and has it follow a rewrite.
"""

from __future__ import annotations

import logging
from typing import Any

from icesql.errors import ExecutionError

log = logging.getLogger("icesql.sink")


class SinkKeyIndex:
    """The key index of one running sink (``runner``: its ``SinkRunner``)."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.manifest: Any = None  # index.store.Manifest: the index at the committed progress
        self.snapshot: int | None = None  # the table's snapshot the index describes
        self.stale = False  # another writer changed the table under the index

    def key_columns(self) -> list[str]:
        """The KEY as the table names its columns."""
        from icesql.engine.iceberg.tables import column_of

        r = self.runner
        schema = r.table.schema()
        return [column_of(schema, k).name for k in r.plan.key]

    def store(self) -> Any:
        from icesql.engine.index.store import IndexStore

        r = self.runner
        return IndexStore(r.table.location(), r.sink_id, r.target.io_properties(r.table))

    def open(self, rebuild: bool = False, base: Any = None, hashed: Any = None, moved: Any = None) -> None:
        """The key index at the committed progress: a valid one, one followed from an older one
        (``base``: the index and the snapshot it describes; ``hashed``: files read for it
        already; ``moved``: where a rewrite wrote the rows), or rebuilt from the table
        (``rebuild``: rebuilt whatever the manifests say)."""
        from icesql.engine.index.upsert import open_index

        r = self.runner
        self.manifest = open_index(
            r.backend,
            r.table,
            self.store(),
            sink_id=r.sink_id,
            sink=r.name,
            key=self.key_columns(),
            progress=r.committed_progress,
            version=int(r.version or 0),
            io_properties=dict(r.target.io_properties(r.table)),
            rebuild=rebuild,
            base=base,
            hashed=hashed,
            moved=moved,
        )
        current = r.table.current_snapshot()
        self.snapshot = current.snapshot_id if current is not None else None

    def writer(self, inner: Any) -> Any:
        """The batch writer over ``inner`` (a ``batch.BatchWriter``) that deletes by position."""
        from icesql.engine.iceberg.lineage import row_id_bases
        from icesql.engine.index.upsert import IndexedUpsertWriter

        r = self.runner
        v3 = int(r.table.metadata.format_version) >= 3
        return IndexedUpsertWriter(
            inner.spec,
            self.store(),
            self.manifest,
            key=self.key_columns(),
            version=int(r.version or 0),
            progress_base=r.progress_base,
            sink=r.name,
            relation=r.relation.name,
            key_enforced=r.plan.key_enforced,
            # v3: a replaced row's new version keeps its row id (``iceberg.lineage``)
            row_ids=(lambda: row_id_bases(r.table)) if v3 else None,
        )

    def guard(self, table: Any, groups: list[Any]) -> list[Any]:
        """Before each commit attempt: when another writer changed the table since the snapshot
        the key index describes (an append of keys the index does not know, a rewrite that moved
        rows), the positions this commit deletes may not be all of a key's rows; each batch then
        also deletes its keys by equality (which reaches every older row of the key, wherever it
        is), and the index follows the table after the commit."""
        from icesql.engine.commit.snapshot import CommitGroup

        current = table.current_snapshot()
        if current is None or current.snapshot_id == self.snapshot:
            return groups
        r = self.runner
        if not self.stale:
            log.warning(
                "sink %s: another writer changed table %s since the key index was built; this commit "
                "also deletes its keys by equality, and the index follows the table after it",
                r.name,
                r.plan.table_identifier,
            )
        self.stale = True
        out = []
        for g in groups:
            eq = self._equality_deletes(table, self._batch_keys(g))
            out.append(CommitGroup(g.data_files, (*g.delete_files, *eq), g.progress))
        return out

    def _batch_keys(self, group: Any) -> Any:
        """The keys the batch of ``group`` changed, from its shards' deltas in the key index."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from icesql.engine.index.shard import REMOVED

        store = self.store()
        added = {f.file_path for f in group.data_files}
        for progress, _version, name in store.manifests():
            if progress != group.progress:
                continue
            m = store.read_manifest(name)
            if m is None or set(m.added_files) != added:
                continue
            parts = []
            for delta in m.deltas:
                if delta:
                    t = store.read_table(delta)
                    parts.append(t.filter(pc.equal(t.column(REMOVED), True)).select(list(m.key)))
            return pa.concat_tables(parts) if parts else None
        r = self.runner
        raise ExecutionError(
            f"sink {r.name}: another writer changed table {r.plan.table_identifier} and the keys of "
            f"batch {group.progress} cannot be found to delete them safely",
            hint="restart the sink: it rebuilds its key index from the table",
        )

    def _equality_deletes(self, table: Any, keys: Any) -> list[Any]:
        if keys is None or keys.num_rows == 0:
            return []
        from icesql.engine.iceberg.tables import key_field_ids
        from icesql.engine.iceberg.writer import DataFileWriter, WriteSpec

        spec = WriteSpec.from_table(
            table, io_properties=dict(self.runner.target.io_properties(table)), file_format=self.runner.plan.format
        )
        writer = DataFileWriter(spec, "equality_deletes", key_field_ids(table.schema(), self.key_columns()))
        try:
            writer.write(keys)
            return writer.close()
        except BaseException:
            writer.abort()
            raise

    def after_commit(self, result: Any) -> None:
        """The table's new snapshot is the one the index describes; after a commit another
        writer's change went into, the index first follows the table (``follow``; on Spark
        Connect, where the index's writer lives in the server, the sink restarts to rebuild it).

        The index is never just the manifest of the batch just committed: that one does not know
        the other writer's rows, so a later change of one of their keys would leave the other
        writer's row beside the sink's. And following waits while a batch is being written (a
        commit by the period timer): that batch reads and writes the index's files, which a new
        index version replaces and deletes, and its manifest follows from the index it started
        from. Until a commit with no batch in flight brings it up to date, the index stays stale:
        every commit also deletes its keys by equality (``guard``)."""
        r = self.runner
        if not self.stale:
            if not result.skipped:
                self.snapshot = result.snapshot_id
            return
        if r.remote:
            from icesql.engine.connections.failures import CatalogUnavailableError

            self.stale = False
            raise CatalogUnavailableError(
                f"sink {r.name}: table {r.plan.table_identifier} was changed by another writer; the "
                "sink restarts to rebuild its key index",
                hint="icesql serve restarts it; with icesql run, run it again",
            )
        if r.batch_started is not None:
            log.info(
                "sink %s: a batch is being written; the key index follows the table after a later commit",
                r.name,
            )
            return
        self.stale = False
        self.follow()

    def follow(self, hashed: Any = None, moved: Any = None) -> None:
        """The key index after other writers' changes (a rewrite, an append), with no batch in
        flight: followed from the files they removed and added (``index.follow``: the keys of
        those files, read on the driver, or given read and hashed: ``hashed``), or, when that
        cannot be done, rebuilt from the table (a Spark job over every live file). The batch
        writer starts again from the new index."""
        r = self.runner
        latest = r.drop_batch_writer() or self.manifest
        if latest is None or latest.progress != r.committed_progress:
            self.open(rebuild=True)
        else:
            self.open(base=(latest, self.snapshot), hashed=hashed, moved=moved)

    def rows_unchanged(self, snapshot_id: int) -> None:
        """A snapshot that moved no row (a manifest rewrite): the index still describes the
        table, unless it was stale already."""
        if not self.stale:
            self.snapshot = snapshot_id


__all__ = ["SinkKeyIndex"]
