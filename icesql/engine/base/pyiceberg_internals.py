"""Every use of pyiceberg's private internals, in one place.

icesql writes commits pyiceberg has no public API for (a row delta with delete files, a
``replace`` that carries files over, manifests the Java reader accepts) and sets the FileIO a
catalog gives its tables. That takes subclasses of pyiceberg's snapshot producers and manifest
writers and a few private attributes, all of them here, so that a pyiceberg upgrade is checked
in this one module (``tests/engine/test_pyiceberg_internals.py`` exercises each piece).

Pinned range: ``pyiceberg>=0.12,<0.13`` (``PYICEBERG_RANGE``; ``pyproject.toml`` pins the same).

What is used, and why:

* ``pyiceberg.table.update.snapshot._FastAppendFiles`` (subclassed) and its private state
  (``_transaction``, ``_snapshot_id``, ``_compression``, ``_added_data_files``,
  ``_existing_manifests``, ``_operation``, ``_parent_snapshot_id``, ``_written_manifests``,
  ``_written_manifest_lists``, ``_commit()``) plus ``Transaction._apply``: pyiceberg cannot write
  delete files at all (no row delta, no ``RowDelta`` producer; its ``delete``/``overwrite``
  rewrite data files), and its ``commit()`` retries on its own, outside icesql's fencing and
  progress checks (see ``icesql.engine.commit.snapshot``).
* The same producer state for maintenance: ``rewrite_producer`` (compaction: removed files marked
  DELETED in rewritten manifests, the others carried over, new files with an explicit data
  sequence number), ``manifest_rewrite_producer`` (manifests merged, entries EXISTING with their
  sequence numbers); pyiceberg has neither a ``RewriteFiles`` with a starting sequence number nor
  a ``RewriteManifests``. ``stage_snapshot_removal``: snapshot expiration staged with
  ``Transaction._apply`` and a ``main`` assertion, since pyiceberg's ``ExpireSnapshots`` asserts
  nothing and cannot be retried through icesql's checks.
* ``ManifestWriterV2._with_partition`` / ``_meta``: manifests declare ``equality_ids`` as
  ``list<int>`` (element id 136) as the Iceberg spec says; pyiceberg 0.12 writes ``list<long>``,
  which the Iceberg Java reader rejects (apache/iceberg-python#3840). Delete manifests need
  ``content = deletes`` in their metadata.
* ``Transaction.table_metadata`` (overridden): pyiceberg re-applies every staged update and
  deep-copies the whole table metadata on each access, ~15 times per commit (~75 % of a local
  commit, growing with the table's history); one copy per (metadata, updates) pair is shared.
* ``update_table_metadata`` without its closing deep copy (``staged_metadata``: the private
  ``_apply_table_update``, ``_TableMetadataUpdateContext``, ``_update_table_metadata_log``), for
  the transaction's metadata and, through ``Catalog._update_and_stage_table`` and
  ``_parse_metadata_version`` (replaced per catalog object: ``cheap_commits``), for the catalog's
  commit: the copies were about half of a local commit.
* ``DataFile.from_args(_table_format_version=...)`` and ``Record._data``: building a
  ``DataFile`` for a given format version, and reading a partition tuple back.
* ``pyiceberg.io.pyarrow._get_parquet_writer_kwargs``: the Parquet writer options a table's
  ``write.parquet.*`` properties ask for, so executors write what pyiceberg would.
* ``pyiceberg.io.pyarrow._primitive_to_physical``: the physical type ``StatsAggregator`` checks
  a column's statistics against, for the bounds the ORC and Avro writers take from the rows
  (``formats.stats``).
* The catalog object's own pieces (``_load_file_io``, ``_update_and_stage_table``, the REST
  session) are in ``pyiceberg_catalogs``; format v3's in ``pyiceberg_v3``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from icesql.engine.base.pyiceberg_v3 import delete_key, dv_summary, enable_v3, inherit_first_row_ids

log = logging.getLogger("icesql.commit")

PYICEBERG_RANGE = (">=0.12", "<0.13")


def pyiceberg_version_supported(version: str) -> bool:
    """Whether ``version`` (e.g. ``pyiceberg.__version__``) is in ``PYICEBERG_RANGE``."""
    parts = [int(p) for p in version.split(".")[:2] if p.isdigit()]
    return len(parts) == 2 and (0, 12) <= (parts[0], parts[1]) < (0, 13)


# --------------------------------------------------------------------------- manifests and producers


def _int_equality_ids(struct: Any) -> Any:
    """``struct`` (a manifest entry schema) with ``equality_ids`` as ``list<int>``."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import IntegerType, ListType, NestedField, StructType

    def fix(t: Any) -> Any:
        if isinstance(t, StructType):
            return StructType(*[fix_field(f) for f in t.fields])
        return t

    def fix_field(f: Any) -> Any:
        if f.field_id == 135 and f.name == "equality_ids":
            return NestedField(
                135,
                "equality_ids",
                ListType(136, IntegerType(), element_required=True),
                required=f.required,
                doc=f.doc,
            )
        if isinstance(f.field_type, StructType):
            return NestedField(f.field_id, f.name, fix(f.field_type), required=f.required, doc=f.doc)
        return f

    return Schema(*[fix_field(f) for f in struct.fields], schema_id=getattr(struct, "schema_id", 0))


_WRITERS: tuple[type, type] | None = None
_PRODUCERS: tuple[type, type] | None = None


def manifest_writer_classes() -> tuple[type, type]:
    """(data manifest writer, delete manifest writer) for format v2; the same classes every call."""
    global _WRITERS
    enable_v3()
    if _WRITERS is not None:
        return _WRITERS
    from pyiceberg.manifest import ManifestContent, ManifestWriterV2

    class _DataManifestWriter(ManifestWriterV2):
        def _with_partition(self, format_version: Any) -> Any:
            return _int_equality_ids(super()._with_partition(format_version))

    class _DeleteManifestWriter(_DataManifestWriter):
        def content(self) -> ManifestContent:
            return ManifestContent.DELETES

        @property
        def _meta(self) -> dict[str, str]:
            return {**super()._meta, "content": "deletes"}

    _WRITERS = (_DataManifestWriter, _DeleteManifestWriter)
    return _WRITERS


_TX_CLASS: type | None = None


def staged_metadata(base: Any, updates: tuple[Any, ...], metadata_location: str | None = None) -> Any:
    """``base`` with ``updates`` applied: pyiceberg's ``update_table_metadata`` without the deep
    copy of the whole metadata it ends with (``metadata_location``: ``base``'s file, added to the
    metadata log when something changed, as pyiceberg's catalogs ask).

    Every update builds new metadata with ``model_copy(update=...)`` and new lists and dicts, so
    the result shares only frozen models with ``base``, and nothing in icesql or pyiceberg's commit
    path changes metadata in place. The copy was about half of a local commit at 100 snapshots
    (three per commit), and grows with the table's history.
    """
    from datetime import datetime

    from pyiceberg.table.update import (
        _apply_table_update,
        _TableMetadataUpdateContext,
        _update_table_metadata_log,
    )
    from pyiceberg.utils.datetime import datetime_to_millis

    if not updates:
        return base
    context = _TableMetadataUpdateContext()
    new = base
    for update in updates:
        new = _apply_table_update(update, new, context)
    if context.has_changes():
        if metadata_location:
            new = _update_table_metadata_log(new, metadata_location, base.last_updated_ms)
        if base.last_updated_ms == new.last_updated_ms:
            new = new.model_copy(update={"last_updated_ms": datetime_to_millis(datetime.now().astimezone())})
    new.spec().check_compatible(new.schema())
    new.sort_order().check_compatible(new.schema())
    return new


def transaction(table: Any) -> Any:
    """``table.transaction()`` whose ``table_metadata`` is computed once per set of staged updates.

    pyiceberg's ``Transaction.table_metadata`` re-applies every staged update and deep-copies the
    whole table metadata on each access, and a snapshot producer reads it ~15 times per commit:
    that copy was ~75 % of a local commit and grows with the table's history (measured with
    ``benchmarks/icesql_hooks.measure_commit_overhead``). The metadata models are frozen and
    pyiceberg builds updated metadata with ``model_copy(update=...)``, so one copy per
    ``(table metadata, staged updates)`` pair can be shared by those reads.
    """
    global _TX_CLASS
    if _TX_CLASS is None:
        from pyiceberg.table import Transaction

        class _Transaction(Transaction):
            _md_key: tuple[Any, Any] | None = None
            _md: Any = None

            @property
            def table_metadata(self) -> Any:
                key = (self._table.metadata, self._updates)
                cached = self._md_key
                if cached is None or cached[0] is not key[0] or cached[1] is not key[1]:
                    self._md = staged_metadata(key[0], key[1])
                    self._md_key = key
                return self._md

        _TX_CLASS = _Transaction
    return _TX_CLASS(table)


def producer_classes() -> tuple[type, type]:
    """(fast append, row delta) snapshot producers; the same classes every call."""
    global _PRODUCERS
    if _PRODUCERS is not None:
        return _PRODUCERS
    from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus
    from pyiceberg.table.snapshots import SnapshotSummaryCollector, Summary, update_snapshot_summaries
    from pyiceberg.table.update.snapshot import _FastAppendFiles

    data_writer_cls, delete_writer_cls = manifest_writer_classes()

    class _Append(_FastAppendFiles):
        """Fast append whose manifests declare ``equality_ids`` as ``list<int>``."""

        def new_manifest_writer(self, spec: Any) -> Any:
            return _manifest_writer(self, data_writer_cls, spec)

    class _RowDelta(_Append):
        """Data files and equality-delete files in one snapshot (format v2)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._added_delete_files: list[Any] = []
            self._removed_delete_files: list[Any] = []
            self._removed_keys: set[str] = set()
            self._entries_of: Callable[[Any], list[Any]] | None = None
            self.written_files: list[str] = []  # other files this commit wrote (Puffin files)

        def add_delete_file(self, delete_file: Any) -> _RowDelta:
            self._added_delete_files.append(delete_file)
            return self

        def remove_delete_files(self, delete_files: list[Any], entries_of: Callable[[Any], list[Any]]) -> _RowDelta:
            """Remove ``delete_files`` (DataFiles of live deletes: the deletion vectors a batch's
            new ones replace) in the same snapshot; ``entries_of(manifest)`` reads a manifest's
            entries. The delete manifests holding them are rewritten, the others kept."""
            self._removed_delete_files.extend(delete_files)
            self._removed_keys.update(delete_key(f) for f in delete_files)
            self._entries_of = entries_of
            return self

        def _existing_manifests(self) -> list[Any]:
            manifests = super()._existing_manifests()
            if not self._removed_keys or self._entries_of is None:
                return manifests
            return _carry_manifests(self, manifests, self._removed_keys, self._entries_of)

        def _write_entries(self, writer_cls: type, files: list[Any]) -> Any:
            writer = _manifest_writer(self, writer_cls, self._transaction.table_metadata.spec())
            with writer:
                for f in files:
                    writer.add_entry(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self._snapshot_id,
                            sequence_number=None,  # inherits the snapshot's sequence number
                            file_sequence_number=None,
                            data_file=f,
                        )
                    )
            return writer.to_manifest_file()

        def _manifests(self) -> list[Any]:
            out = []
            if self._added_data_files:
                out.append(self._write_entries(data_writer_cls, self._added_data_files))
            if self._added_delete_files:
                out.append(self._write_entries(delete_writer_cls, self._added_delete_files))
            return out + self._existing_manifests()

        def _summary(self, snapshot_properties: Mapping[str, str] = {}) -> Any:  # noqa: B006
            meta = self._transaction.table_metadata
            ssc = SnapshotSummaryCollector()
            for f in [*self._added_data_files, *self._added_delete_files]:
                ssc.add_file(data_file=f, partition_spec=meta.specs()[f.spec_id], schema=meta.schema())
            for f in self._removed_delete_files:
                ssc.remove_file(data_file=f, partition_spec=meta.specs()[f.spec_id], schema=meta.schema())
            previous = (
                meta.snapshot_by_id(self._parent_snapshot_id)
                if self._parent_snapshot_id is not None
                else None
            )
            dvs = dv_summary(self._added_delete_files, self._removed_delete_files)
            return update_snapshot_summaries(
                summary=Summary(operation=self._operation, **ssc.build(), **snapshot_properties, **dvs),
                previous_summary=previous.summary if previous is not None else None,
            )

    _PRODUCERS = (_Append, _RowDelta)
    return _PRODUCERS


def discard_written(producers: list[Any], io: Any) -> None:
    for p in producers:
        for path in [*p._written_manifests, *p._written_manifest_lists, *getattr(p, "written_files", ())]:
            try:
                io.delete(path)
            except Exception:  # pragma: no cover - best effort
                log.debug("could not delete %s", path)


def _manifest_writer(producer: Any, writer_cls: type, spec: Any) -> Any:
    """A manifest writer of ``producer``'s table: icesql's v2 classes (made v3 for a v3 table,
    ``pyiceberg_v3``), pyiceberg's own for v1."""
    version = producer._transaction.table_metadata.format_version
    if version == 3:
        from icesql.engine.base.pyiceberg_v3 import manifest_writer_v3

        writer_cls = manifest_writer_v3(writer_cls)
    elif version != 2:
        from pyiceberg.manifest import write_manifest

        return write_manifest(
            format_version=producer._transaction.table_metadata.format_version,
            spec=spec,
            schema=producer.schema(),
            output_file=producer.new_manifest_output(),
            snapshot_id=producer._snapshot_id,
            avro_compression=producer._compression,
        )
    return writer_cls(spec, producer.schema(), producer.new_manifest_output(), producer._snapshot_id, producer._compression)


def _carried_entry(entry: Any, status: Any, snapshot_id: int) -> Any:
    """``entry`` (a file already in the table) as EXISTING or DELETED, with the sequence numbers it had."""
    from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus

    return ManifestEntry.from_args(
        status=status,
        snapshot_id=snapshot_id if status == ManifestEntryStatus.DELETED else entry.snapshot_id,
        sequence_number=entry.sequence_number,
        file_sequence_number=entry.file_sequence_number,
        data_file=entry.data_file,
    )


def _relabel_summary(producer: Any, ssc: Any, operation: Any, properties: Mapping[str, str]) -> Any:
    """The summary of ``producer``'s snapshot with totals carried from its parent.

    pyiceberg totals only 'overwrite'-like operations; the figures are the same for replace."""
    from pyiceberg.table.snapshots import Operation, Summary, update_snapshot_summaries

    meta = producer._transaction.table_metadata
    previous = (
        meta.snapshot_by_id(producer._parent_snapshot_id) if producer._parent_snapshot_id is not None else None
    )
    summary = update_snapshot_summaries(
        summary=Summary(operation=Operation.OVERWRITE, **ssc.build(), **properties),
        previous_summary=previous.summary if previous is not None else None,
    )
    return Summary(operation=operation, **summary.additional_properties)


class RewriteConflictError(Exception):
    """A file a rewrite removes is no longer live in the snapshot it would commit on top of."""


_REWRITE: type | None = None


def _carry_manifests(
    producer: Any, manifests: Any, removed: set[str], entries_of: Callable[[Any], list[Any]]
) -> list[Any]:
    """``manifests`` (a parent snapshot's) with the files ``removed`` names (``delete_key``s)
    taken out: each manifest listing one is rewritten, its other live entries EXISTING and the
    removed ones DELETED, all with the sequence numbers (and v3 row ids) they had; removed
    entries of manifests left with nothing else share one manifest per kind; the others are
    carried over as they are. A removed file not found raises ``RewriteConflictError``."""
    from pyiceberg.manifest import ManifestContent, ManifestEntryStatus

    data_writer_cls, delete_writer_cls = manifest_writer_classes()

    def carry(content: Any, spec_id: int, entries: list[Any]) -> Any:
        writer_cls = delete_writer_cls if content == ManifestContent.DELETES else data_writer_cls
        writer = _manifest_writer(producer, writer_cls, producer._transaction.table_metadata.specs()[spec_id])
        with writer:
            for e in entries:
                gone = delete_key(e.data_file) in removed
                status = ManifestEntryStatus.DELETED if gone else ManifestEntryStatus.EXISTING
                writer.add_entry(_carried_entry(e, status, producer._snapshot_id))
        return writer.to_manifest_file()

    out = []
    found: set[str] = set()
    tombstones: dict[tuple[int, int], list[Any]] = {}
    for manifest in manifests:
        entries = [
            e
            for e in inherit_first_row_ids(manifest, entries_of(manifest))
            if e.status != ManifestEntryStatus.DELETED
        ]
        hit = [e for e in entries if delete_key(e.data_file) in removed]
        if not hit:
            if entries:
                out.append(manifest)
            continue
        found.update(delete_key(e.data_file) for e in hit)
        if len(hit) == len(entries):
            tombstones.setdefault((int(manifest.content), int(manifest.partition_spec_id)), []).extend(hit)
            continue
        out.append(carry(manifest.content, manifest.partition_spec_id, entries))
    for (content, spec_id), entries in sorted(tombstones.items()):
        out.append(carry(ManifestContent(content), spec_id, entries))
    missing = removed - found
    if missing:
        raise RewriteConflictError(
            f"{len(missing)} file(s) to rewrite are no longer in the table, e.g. {sorted(missing)[0]}"
        )
    return out


def rewrite_producer() -> type:
    """A snapshot producer for a rewrite (compaction): removes files, adds their replacements.

    ``rewrite_producer()(transaction=..., io=..., removed=[entries], entries_of=read,
    data_sequence_number=N, snapshot_properties=...)``, then ``append_data_file`` for each new data
    file and ``add_delete_file`` for new delete files:

    * each manifest of the parent snapshot that lists a removed file is rewritten: its other live
      entries EXISTING, the removed ones DELETED, all with the sequence numbers they had (removed
      entries of manifests left with nothing else share one manifest per kind); every other
      manifest is carried over as it is (so a rewrite touches only what it changes, and can
      be redone on top of a snapshot a sink committed meanwhile);
    * new data files get ``data_sequence_number`` (the sequence number of the snapshot the rewrite
      read) instead of the new snapshot's: an equality delete committed after that snapshot still
      applies to the rewritten rows, as it applied to the files they came from (the Iceberg Java
      ``RewriteFiles`` with a starting sequence number does the same);
    * a removed file that is not live in the parent raises ``RewriteConflictError``.

    ``entries_of(manifest)`` returns a manifest's entries (all statuses), e.g. through a cache.
    The operation is ``replace`` unless delete files are added (``overwrite``)."""
    global _REWRITE
    if _REWRITE is not None:
        return _REWRITE
    from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus
    from pyiceberg.table.snapshots import Operation, SnapshotSummaryCollector

    _, delta_cls = producer_classes()
    data_writer_cls, delete_writer_cls = manifest_writer_classes()

    class _Rewrite(delta_cls):  # type: ignore[misc,valid-type]
        def __init__(
            self,
            *,
            removed: list[Any],
            entries_of: Callable[[Any], list[Any]],
            data_sequence_number: int | None = None,
            **kwargs: Any,
        ) -> None:
            super().__init__(operation=Operation.REPLACE, **kwargs)
            self._removed = removed
            self._removed_paths = {delete_key(e.data_file) for e in removed}
            self._entries_of = entries_of
            self._data_sequence_number = data_sequence_number
            self.written_files: list[str] = []  # other files this commit wrote (Puffin files)

        def _write_entries(self, writer_cls: type, files: list[Any]) -> Any:
            spec = self._transaction.table_metadata.spec()
            explicit = self._data_sequence_number if writer_cls is data_writer_cls else None
            writer = _manifest_writer(self, writer_cls, spec)
            with writer:
                for f in files:
                    writer.add_entry(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self._snapshot_id,
                            sequence_number=explicit,  # None: the new snapshot's
                            file_sequence_number=None,
                            data_file=f,
                        )
                    )
            return writer.to_manifest_file()

        def _existing_manifests(self) -> list[Any]:
            if self._parent_snapshot_id is None:
                if self._removed_paths:
                    raise RewriteConflictError("the table has no snapshot to rewrite")
                return []
            parent = self._transaction.table_metadata.snapshot_by_id(self._parent_snapshot_id)
            return _carry_manifests(self, parent.manifests(io=self._io), self._removed_paths, self._entries_of)

        def _summary(self, snapshot_properties: Mapping[str, str] = {}) -> Any:  # noqa: B006
            meta = self._transaction.table_metadata
            ssc = SnapshotSummaryCollector()
            for f in [*self._added_data_files, *self._added_delete_files]:
                ssc.add_file(data_file=f, partition_spec=meta.specs()[f.spec_id], schema=meta.schema())
            for e in self._removed:
                f = e.data_file
                ssc.remove_file(data_file=f, partition_spec=meta.specs()[f.spec_id], schema=meta.schema())
            operation = Operation.OVERWRITE if self._added_delete_files else Operation.REPLACE
            dvs = dv_summary(self._added_delete_files, [e.data_file for e in self._removed])
            return _relabel_summary(self, ssc, operation, {**snapshot_properties, **dvs})

    _REWRITE = _Rewrite
    return _Rewrite


_MANIFEST_REWRITE: type | None = None


def manifest_rewrite_producer() -> type:
    """A snapshot producer that rewrites manifests: the live entries of the parent's manifests in
    ``rewrite`` (ManifestFile objects) become EXISTING entries of a few new manifests, one run per
    (content, partition spec), each closed at ``target_size`` bytes; the parent's other manifests
    are kept. Sequence numbers, snapshot ids and files are unchanged: a ``replace`` snapshot whose
    table has the same rows and files as its parent.

    ``manifest_rewrite_producer()(transaction=..., io=..., rewrite=[...], entries_of=read,
    target_size=8 << 20, snapshot_properties=...)``; ``created``/``replaced``/``kept``/``entries``
    and ``created_paths`` afterwards."""
    global _MANIFEST_REWRITE
    if _MANIFEST_REWRITE is not None:
        return _MANIFEST_REWRITE
    from pyiceberg.manifest import ManifestContent, ManifestEntryStatus
    from pyiceberg.table.snapshots import Operation, SnapshotSummaryCollector

    append_cls, _ = producer_classes()
    data_writer_cls, delete_writer_cls = manifest_writer_classes()

    class _RewriteManifests(append_cls):  # type: ignore[misc,valid-type]
        def __init__(
            self,
            *,
            rewrite: list[Any],
            entries_of: Callable[[Any], list[Any]],
            target_size: int = 8 * 1024 * 1024,
            **kwargs: Any,
        ) -> None:
            super().__init__(operation=Operation.REPLACE, **kwargs)
            self._rewrite_paths = {m.manifest_path for m in rewrite}
            self._entries_of = entries_of
            self._target_size = max(1024, int(target_size))
            self.created = 0
            self.replaced = 0
            self.kept = 0
            self.entries = 0
            self.created_paths: list[str] = []

        def _existing_manifests(self) -> list[Any]:
            if self._parent_snapshot_id is None:
                return []
            meta = self._transaction.table_metadata
            parent = meta.snapshot_by_id(self._parent_snapshot_id)
            kept: list[Any] = []
            groups: dict[tuple[int, int], list[Any]] = {}
            found: set[str] = set()
            for manifest in parent.manifests(io=self._io):
                if manifest.manifest_path not in self._rewrite_paths:
                    kept.append(manifest)
                    continue
                found.add(manifest.manifest_path)
                live = [
                    e
                    for e in inherit_first_row_ids(manifest, self._entries_of(manifest))
                    if e.status != ManifestEntryStatus.DELETED
                ]
                key = (int(manifest.content), int(manifest.partition_spec_id))
                groups.setdefault(key, []).extend(live)
            if found != self._rewrite_paths:
                raise RewriteConflictError("a manifest to rewrite is no longer in the table")
            out: list[Any] = []
            for (content, spec_id), entries in sorted(groups.items()):
                writer_cls = delete_writer_cls if content == int(ManifestContent.DELETES) else data_writer_cls
                spec = meta.specs()[spec_id]
                writer = None
                for e in entries:
                    if writer is None:
                        writer = _manifest_writer(self, writer_cls, spec)
                        writer.__enter__()
                    writer.add_entry(_carried_entry(e, ManifestEntryStatus.EXISTING, self._snapshot_id))
                    if writer.tell() >= self._target_size:
                        writer.__exit__(None, None, None)
                        out.append(writer.to_manifest_file())
                        writer = None
                if writer is not None:
                    writer.__exit__(None, None, None)
                    out.append(writer.to_manifest_file())
                self.entries += len(entries)
            self.created, self.replaced, self.kept = len(out), len(found), len(kept)
            self.created_paths = [m.manifest_path for m in out]
            return out + kept

        def _summary(self, snapshot_properties: Mapping[str, str] = {}) -> Any:  # noqa: B006
            return _relabel_summary(
                self,
                SnapshotSummaryCollector(),
                Operation.REPLACE,
                {
                    **snapshot_properties,
                    "manifests-created": str(self.created),
                    "manifests-kept": str(self.kept),
                    "manifests-replaced": str(self.replaced),
                    "entries-processed": str(self.entries),
                },
            )

    _MANIFEST_REWRITE = _RewriteManifests
    return _RewriteManifests


def stage_snapshot_removal(tx: Any, snapshot_ids: list[int], branch: str, branch_snapshot_id: int | None) -> None:
    """Stage the removal of ``snapshot_ids`` in ``tx``, asserting that ``branch`` still points at
    ``branch_snapshot_id`` (the state the caller chose them in), outside pyiceberg's own retries."""
    from pyiceberg.table.update import AssertRefSnapshotId, RemoveSnapshotsUpdate

    tx._apply(
        (RemoveSnapshotsUpdate.model_validate({"snapshot-ids": list(snapshot_ids)}),),
        (AssertRefSnapshotId.model_validate({"ref": branch, "snapshot-id": branch_snapshot_id}),),
    )


def apply_producer(tx: Any, producer: Any) -> None:
    """Stage ``producer``'s snapshot in ``tx`` without registering it with the transaction:
    pyiceberg's own retry loop stays off, so every retry goes through icesql's checks."""
    updates, requirements = producer._commit()
    tx._apply(updates, requirements)


def new_data_file(format_version: int, **fields: Any) -> Any:
    """A pyiceberg ``DataFile`` for a table of ``format_version``."""
    from pyiceberg.manifest import DataFile

    return DataFile.from_args(_table_format_version=format_version, **fields)  # type: ignore[arg-type]


def partition_values(data_file: Any) -> tuple[Any, ...]:
    """The partition tuple of a pyiceberg ``DataFile``."""
    return tuple(data_file.partition._data) if data_file.partition is not None else ()


def parquet_writer_kwargs(table_properties: Mapping[str, str]) -> dict[str, Any]:
    """``pyarrow.parquet.ParquetWriter`` options for the table's ``write.parquet.*`` properties."""
    try:
        from pyiceberg.io.pyarrow import _get_parquet_writer_kwargs

        kwargs = dict(_get_parquet_writer_kwargs(dict(table_properties)))
    except Exception:  # pragma: no cover - another pyiceberg: the codec alone
        kwargs = {"compression": table_properties.get("write.parquet.compression-codec", "zstd")}
    if kwargs.get("compression") == "uncompressed":
        kwargs["compression"] = "none"
    return kwargs


def stats_aggregator(field_type: Any, truncate: int | None) -> Any:
    """pyiceberg's ``StatsAggregator`` for a column of ``field_type`` (bounds as manifests keep
    them, strings and binaries cut to ``truncate``)."""
    from pyiceberg.io.pyarrow import StatsAggregator, _primitive_to_physical

    return StatsAggregator(field_type, _primitive_to_physical(field_type), truncate)


def schema_after(update: Any) -> Any:
    """The schema a pending ``UpdateSchema`` would commit (pyiceberg's private ``_apply``)."""
    return update._apply()
