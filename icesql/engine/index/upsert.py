"""The driver side of upserts with position deletes: open the index, write a batch's changes.

``open_index`` finds the index of the table at the sink's committed progress, follows an older
one through other writers' commits (``follow``), or rebuilds it:
the manifest of that progress counts only if every file it names is there and it is the one
whose data files the table's snapshot of that progress added (or, for a rebuild, if it was built
from the table's current snapshot); and the table must not have been changed by another writer
since (an append or a rewrite: then the index is rebuilt, so a key's rows are always all known).

``IndexedUpsertWriter`` is the batch writer of such a sink (picklable; on Spark Connect it runs
in the server's Python and keeps its state there): it hashes the batch's changes into the
index's shards, runs ``task.ShardTask`` per shard and writes the manifest of the batch's
progress before the batch is staged. It returns the batch writer's usual rows plus the shards'
``INDEX`` rows.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from icesql.engine.base.changelog import INTERNAL_COLUMNS
from icesql.engine.index.store import IndexStore, Manifest

if TYPE_CHECKING:
    from icesql.engine.index.follow import Hashed

log = logging.getLogger("icesql.sink")


def snapshot_added_files(table: Any, snapshot_id: int) -> set[str]:
    """The data files a snapshot added."""
    from pyiceberg.manifest import DataFileContent, ManifestEntryStatus

    snap = table.metadata.snapshot_by_id(snapshot_id)
    out: set[str] = set()
    if snap is None:
        return out
    for manifest in snap.manifests(table.io):
        if manifest.added_snapshot_id != snapshot_id:
            continue
        for e in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
            if e.status == ManifestEntryStatus.ADDED and e.data_file.content == DataFileContent.DATA:
                out.add(e.data_file.file_path)
    return out


def valid_manifest(store: IndexStore, table: Any, *, sink_id: str, key: Sequence[str]) -> Manifest | None:
    """The manifest that is the index of ``table`` as it is now, if there is one."""
    from icesql.engine.commit.snapshot import last_committed_snapshot

    current = table.current_snapshot()
    last = last_committed_snapshot(table, sink_id)
    ours = last is not None and current is not None and current.snapshot_id == last.snapshot_id
    added: set[str] | None = None
    for progress, _version, name in store.manifests():
        m = store.read_manifest(name)
        if m is None or tuple(m.key) != tuple(key):
            continue
        if m.snapshot_id is not None:  # a rebuild: of exactly this snapshot
            if current is None or m.snapshot_id != current.snapshot_id:
                continue
        else:  # a batch's: the one the table's last commit of this sink holds
            if not ours or last is None or progress != last.progress:
                continue
            if added is None:
                added = snapshot_added_files(table, last.snapshot_id)
            if set(m.added_files) != added:
                continue
        if store.complete(m):
            return m
    return None


def followable(
    store: IndexStore, table: Any, *, sink_id: str, key: Sequence[str], progress: int
) -> tuple[Manifest, int | None] | None:
    """An index the table can be followed from (``follow``), with the snapshot it describes: the
    manifest of the batch the sink's last commit holds, or one built or followed at that progress
    (any later commit by the sink would be missing from it)."""
    from icesql.engine.commit.snapshot import PROGRESS, SINK_ID, snapshot_properties

    # the sink's own commit of ``progress`` (not a maintenance snapshot carrying its progress)
    last = table.current_snapshot()
    while last is not None and snapshot_properties(last).get(SINK_ID) != sink_id:
        parent = last.parent_snapshot_id
        last = table.metadata.snapshot_by_id(parent) if parent is not None else None
    if last is None or snapshot_properties(last).get(PROGRESS) != str(progress):
        return None
    added: set[str] | None = None
    for p, _version, name in store.manifests():
        if p != progress:
            continue
        m = store.read_manifest(name)
        if m is None or tuple(m.key) != tuple(key) or not store.complete(m):
            continue
        if m.snapshot_id is not None:
            return m, m.snapshot_id
        if added is None:
            added = snapshot_added_files(table, last.snapshot_id)
        if set(m.added_files) == added:
            return m, last.snapshot_id
    return None


def open_index(
    backend: Any,
    table: Any,
    store: IndexStore,
    *,
    sink_id: str,
    sink: str,
    key: Sequence[str],
    progress: int,
    version: int,
    io_properties: dict[str, str],
    rebuild: bool = False,
    base: tuple[Manifest, int | None] | None = None,
    hashed: Hashed | None = None,
    moved: Any = None,
) -> Manifest:
    """The index of ``table`` at the sink's committed ``progress`` (see the module docstring):
    a valid one; else one followed from an older index (``base``: the index and the snapshot it
    describes, from a running sink; otherwise ``followable``) through the other writers' commits
    since (``follow``); else rebuilt from the table. ``rebuild``: rebuilt whatever the manifests
    say. ``hashed``: files the follow finds read and hashed already (``follow.hash_files``);
    ``moved``: where a rewrite by the sink's maintenance wrote the rows (``follow.movable``: then
    following reads nothing, and is done whatever the share of the rows moved)."""
    import time

    from icesql.engine.index.build import build_index
    from icesql.engine.index.follow import NotMoved, follow, movable, table_changes, worth_following

    m = None if rebuild or base is not None else valid_manifest(store, table, sink_id=sink_id, key=key)
    if m is None and not rebuild:
        base = base or followable(store, table, sink_id=sink_id, key=key, progress=progress)
        changes = table_changes(table, base[1], sink_id) if base is not None else None
        if (
            base is not None
            and changes is not None
            and (worth_following(changes, base[0].keys) or movable(changes, moved))
        ):
            started = time.monotonic()

            def follow_with(moves: Any) -> Manifest:
                return follow(
                    table,
                    store,
                    base[0],
                    changes,
                    key=key,
                    progress=progress,
                    version=version,
                    hashed=hashed,
                    moved=moves,
                )

            try:
                try:
                    m = follow_with(moved)
                except NotMoved as e:
                    # the rewrite carried rows the index did not know (another writer appended
                    # them after the index's snapshot, then the rewrite took their file): follow
                    # by reading the files the rewrite wrote instead (``hashed`` when read ahead)
                    if not worth_following(changes, base[0].keys):
                        raise
                    log.info("sink %s: the key index follows the rewrite by reading its files (%s)", sink, e)
                    m = follow_with(None)
            except Exception as e:  # a follow that fails leaves it to a rebuild
                log.warning("sink %s: the key index could not follow the table (%s); it is rebuilt", sink, e)
                log.debug("sink %s: key index follow failed", sink, exc_info=True)
            else:
                log.info(
                    "sink %s: key index followed the table: %d file(s) removed, %d added (%d row(s)), "
                    "%d position-delete file(s), %.2fs",
                    sink,
                    len(changes.removed),
                    len(changes.added),
                    changes.added_rows,
                    len(changes.position_deletes),
                    time.monotonic() - started,
                )
    if m is None:
        started = time.monotonic()
        m = build_index(
            backend,
            table,
            store,
            key=key,
            progress=progress,
            version=version,
            io_properties=io_properties,
        )
        log.info(
            "sink %s: key index built from the table: %d key(s) in %d shard(s), %.2fs",
            sink,
            m.keys,
            m.shards,
            time.monotonic() - started,
        )
    try:
        store.cleanup(m)
    except OSError:  # an old file that cannot go now goes next time
        log.debug("sink %s: key index cleanup failed", sink, exc_info=True)
    return m


class IndexedUpsertWriter:
    """One upsert batch -> data files and position-delete files, through the key index."""

    upsert = True

    def __init__(
        self,
        spec: Any,
        store: IndexStore,
        manifest: Manifest,
        *,
        key: Sequence[str],
        version: int,
        progress_base: int,
        sink: str,
        relation: str,
        key_enforced: bool,
        row_ids: Callable[[], dict[str, tuple[int, bool]]] | None = None,
    ) -> None:
        self.spec = spec
        self.store = store
        self.row_ids = row_ids  # format v3: the table's row id bases now (``lineage.row_id_bases``)
        self.manifest = manifest
        self.key = list(key)
        self.version = version
        self.progress_base = progress_base
        self.sink = sink
        self.relation = relation
        self.key_enforced = key_enforced

    def use_io(self, io_properties: Any) -> None:
        """Write files and reach the index with ``io_properties`` (fresh credentials)."""
        self.spec = self.spec.with_io(io_properties)
        self.store.use_io(io_properties)

    def __call__(self, changes: Any, batch_id: int) -> list[dict[str, Any]]:
        """Write one upsert batch of ``changes`` (a Spark DataFrame, or a ``backends.base.Frame``):
        each change goes to its KEY's shard (Spark's hash, on both backends), and one
        ``ShardTask`` per shard looks its keys up in the index, writes the new rows and the
        positions they replace, and the shard's delta."""
        from icesql.engine.backends.base import as_frame
        from icesql.engine.base.changelog import CHANGELOG_COLUMNS
        from icesql.engine.base.wire import POSITIONS, files_spark_schema, positions_of

        progress = self.progress_base + int(batch_id)
        m = self.manifest
        frame = as_frame(changes)
        columns = frame.columns
        data_columns = [c for c in columns if c not in INTERNAL_COLUMNS]
        keep = data_columns + [c for c in CHANGELOG_COLUMNS if c in columns]
        frame = frame.select(keep).by_shard(self.key, m.shards, self.spec.schema())
        task = self._task(data_columns, batch_id)
        if frame.in_process:
            # every shard's task runs in this process, which keeps each shard it loads
            task.keep_shards = max(task.keep_shards, m.shards)
        rows = frame.map(task, files_spark_schema()).rows()
        # the shards' position deletes go to one file for the batch (one per partition), on
        # both executors: every delete file costs a reader a file to open, and their count is
        # what makes maintenance rewrite the table
        deletes = [positions_of(r) for r in rows if r["content"] == POSITIONS]
        rows = [r for r in rows if r["content"] != POSITIONS] + self._position_deletes(deletes)
        return self._recorded(rows, progress)

    def _position_deletes(self, parts: list[Any]) -> list[dict[str, Any]]:
        """The rows of the position-delete files holding ``parts`` (the shards' deletes)."""
        if not parts:
            return []
        import pyarrow as pa

        from icesql.engine.base.wire import file_row
        from icesql.engine.iceberg.writer import FILE_PATH, POS, DataFileWriter

        deletes = pa.concat_tables(parts).sort_by([(FILE_PATH, "ascending"), (POS, "ascending")])
        writer = DataFileWriter(self.spec, "position_deletes")
        try:
            writer.write(deletes)
            return [file_row(f) for f in writer.close()]
        except BaseException:
            writer.abort()
            raise

    def _task(self, data_columns: list[str], batch_id: int) -> Any:
        from icesql.engine.index.task import ShardTask

        return ShardTask(
            self.spec,
            self.store,
            self.manifest.chains,
            key=self.key,
            data_columns=data_columns,
            progress=self.progress_base + int(batch_id),
            version=self.version,
            batch_id=int(batch_id),
            sink=self.sink,
            relation=self.relation,
            key_enforced=self.key_enforced,
            row_ids=self.row_ids() if self.row_ids is not None else None,
        )

    def _recorded(self, rows: list[dict[str, Any]], progress: int) -> list[dict[str, Any]]:
        """The batch's manifest from its shards' rows, written; the rows."""
        from icesql.engine.base.wire import INDEX

        m = self.manifest
        chains = list(m.chains)
        deltas: list[str | None] = [None] * m.shards
        shard_keys = list(m.shard_keys) or [0] * m.shards
        for r in rows:
            if r["content"] == INDEX:
                info = json.loads(r["file"])
                chains[info["shard"]] = tuple(info["chain"])
                deltas[info["shard"]] = info["delta"]
                shard_keys[info["shard"]] = int(info["keys"])
        added = _added_files(rows)
        self.manifest = replace(
            m,
            progress=progress,
            version=self.version,
            chains=tuple(chains),
            added_files=tuple(sorted(added)),
            snapshot_id=None,
            shard_keys=tuple(shard_keys),
            deltas=tuple(deltas),
        )
        self.store.write_manifest(self.manifest)
        return rows


def _added_files(rows: Sequence[dict[str, Any]]) -> set[str]:
    from icesql.engine.iceberg.writer import WrittenFile

    return {WrittenFile.loads(r["file"]).file_path for r in rows if r["content"] == 0}


__all__ = ["IndexedUpsertWriter", "followable", "open_index", "snapshot_added_files", "valid_manifest"]
