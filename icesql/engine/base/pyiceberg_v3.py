"""Iceberg format v3 on pyiceberg 0.12: every private piece a v3 writer takes, in one place.

pyiceberg 0.12 reads v3 table metadata but writes none of it: ``TableMetadataV3.model_dump_json``
raises, ``write_manifest`` and ``write_manifest_list`` refuse version 3, and manifests are read
with the v2 schema, which drops the v3 fields (a data file's ``first_row_id``, a deletion vector's
``referenced_data_file``, ``content_offset`` and ``content_size_in_bytes``, a manifest's
``first_row_id``) - so a v2-shaped rewrite of a v3 manifest would lose them. ``enable_v3`` (called
where catalogs are built and producers made; idempotent) changes, process-wide:

* ``pyiceberg.manifest.DEFAULT_READ_VERSION`` to 3: manifests and manifest lists are read with the
  v3 schema (a superset of v2's: the extra fields are optional and come back ``None`` from a v2
  file), and pyiceberg's writers take v3-shaped records, writing what the file's version has;
* ``TableMetadataV3``: serialises like v2 (the spec's ``next-row-id`` and the snapshots'
  ``first-row-id`` / ``added-rows`` included) and starts at ``next-row-id`` 0, as Java does;
* ``SUPPORTED_TABLE_FORMAT_VERSION`` in ``pyiceberg.table.update``: an upgrade to 3 is allowed;
* ``write_manifest`` in ``pyiceberg.table.update.snapshot``: writes v3 manifests for pyiceberg's
  own producers too (another writer's ``append`` in the same process);
* ``write_manifest_list`` in ``pyiceberg.table.update.snapshot``: writes v3 lists
  (``ManifestListWriterV3`` assigns row ids), and every snapshot producer's ``_commit`` records
  the rows it assigned as the snapshot's ``added-rows`` (pyiceberg sets ``first-row-id`` only), so
  the table's ``next-row-id`` moves on as the spec says.

Row lineage as written here (the spec's "Row Lineage"): a new data manifest in a snapshot's list
gets ``first_row_id`` = the next free row id, which advances by its added and existing rows; data
files added in it leave ``first_row_id`` null and inherit it (manifest's value plus the rows of
the files before it); a rewritten manifest's carried files keep the value they inherited
(``inherit_first_row_ids``). Delete manifests take no row ids.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable
from typing import Any

# positions in pyiceberg's records (DATA_FILE_TYPE[3] / MANIFEST_LIST_FILE_SCHEMAS[3])
DATA_FILE_FIELDS_V2 = 16
DATA_FILE_FIRST_ROW_ID = 16
DATA_FILE_REFERENCED = 17
DATA_FILE_CONTENT_OFFSET = 18
DATA_FILE_CONTENT_SIZE = 19
DATA_FILE_FIELDS_V3 = 20
MANIFEST_FIELDS_V2 = 15
MANIFEST_FIRST_ROW_ID = 15
MANIFEST_FIELDS_V3 = 16

_ENABLED = False
_LIST_WRITERS: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("icesql_v3_lists", default=None)


def _pad(record: Any, size: int) -> Any:
    data = record._data
    if len(data) < size:
        data.extend([None] * (size - len(data)))
    return record


def v3_data_file(data_file: Any) -> Any:
    """``data_file`` with room for the v3 fields (pyiceberg builds v2-sized records)."""
    return _pad(data_file, DATA_FILE_FIELDS_V3)


def _get(record: Any, pos: int) -> Any:
    data = record._data
    return data[pos] if len(data) > pos else None


def first_row_id(record: Any) -> int | None:
    """A data file's or a manifest's ``first_row_id`` (``None``: not written)."""
    from pyiceberg.manifest import ManifestFile

    return _get(record, MANIFEST_FIRST_ROW_ID if isinstance(record, ManifestFile) else DATA_FILE_FIRST_ROW_ID)


def set_first_row_id(record: Any, value: int | None) -> None:
    from pyiceberg.manifest import ManifestFile

    if isinstance(record, ManifestFile):
        _pad(record, MANIFEST_FIELDS_V3)._data[MANIFEST_FIRST_ROW_ID] = value
    else:
        v3_data_file(record)._data[DATA_FILE_FIRST_ROW_ID] = value


def referenced_data_file(data_file: Any) -> str | None:
    return _get(data_file, DATA_FILE_REFERENCED)


def content_range(data_file: Any) -> tuple[int, int] | None:
    """``(content_offset, content_size_in_bytes)`` of a deletion vector entry, else ``None``."""
    offset, size = _get(data_file, DATA_FILE_CONTENT_OFFSET), _get(data_file, DATA_FILE_CONTENT_SIZE)
    return None if offset is None or size is None else (int(offset), int(size))


def delete_key(data_file: Any) -> str:
    """One name per delete: the file's path, and for a deletion vector (many share one Puffin
    file) the path and the blob's offset."""
    rng = content_range(data_file)
    return str(data_file.file_path) if rng is None else f"{data_file.file_path}#{rng[0]}"


def upgrade_format_version(table: Any, version: int) -> None:
    """Upgrade ``table`` to format ``version`` in one commit asserting its table UUID (pyiceberg's
    ``upgrade_table_version`` refuses 3); ``table`` is refreshed afterwards."""
    from pyiceberg.table.update import AssertTableUUID, UpgradeFormatVersionUpdate

    tx = table.transaction()
    update = UpgradeFormatVersionUpdate(format_version=version)  # type: ignore[call-arg]
    tx._apply((update,), (AssertTableUUID(uuid=table.metadata.table_uuid),))
    tx.commit_transaction()
    table.refresh()


def dv_summary(added: Iterable[Any], removed: Iterable[Any]) -> dict[str, str]:
    """The snapshot summary's deletion vector counts, as Iceberg Java writes them (``added-dvs``,
    ``removed-dvs``; pyiceberg's collector counts vectors as position delete files only)."""
    out = {}
    for key, files in (("added-dvs", added), ("removed-dvs", removed)):
        n = sum(1 for f in files if content_range(f) is not None)
        if n:
            out[key] = str(n)
    return out


def new_deletion_vector_file(
    *,
    puffin_path: str,
    puffin_size: int,
    referenced: str,
    cardinality: int,
    content_offset: int,
    content_size: int,
    partition: Any,
    spec_id: int,
) -> Any:
    """The manifest entry's ``DataFile`` of one deletion vector (spec: content position deletes,
    format ``puffin``, ``record_count`` = the vector's cardinality)."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    f = DataFile.from_args(
        _table_format_version=3,
        content=DataFileContent.POSITION_DELETES,
        file_path=puffin_path,
        file_format=FileFormat.PUFFIN,
        partition=partition,
        record_count=cardinality,
        file_size_in_bytes=puffin_size,
        referenced_data_file=referenced,
        content_offset=content_offset,
        content_size_in_bytes=content_size,
    )
    f.spec_id = spec_id
    return f


def inherit_first_row_ids(manifest: Any, entries: Iterable[Any]) -> list[Any]:
    """``entries`` of a data ``manifest`` (in file order, deleted ones included or not) with the
    ``first_row_id`` each live file inherits written into it (spec: the manifest's value plus the
    record counts of the live files before it whose value is null). A v2 manifest (no value)
    leaves them null: those rows get ids when a v3 snapshot lists the manifest anew."""
    from pyiceberg.manifest import ManifestContent, ManifestEntryStatus

    out = list(entries)
    base = first_row_id(manifest)
    if base is None or manifest.content != ManifestContent.DATA:
        return out
    next_id = int(base)
    for e in out:
        if e.status == ManifestEntryStatus.DELETED:
            continue
        if first_row_id(e.data_file) is None:
            set_first_row_id(e.data_file, next_id)
            next_id += int(e.data_file.record_count)
    return out


def enable_v3() -> None:
    """Let pyiceberg read and write format v3 (see the module's docstring); idempotent."""
    global _ENABLED
    if _ENABLED:
        return
    import pyiceberg.manifest as manifest
    import pyiceberg.table.update as update
    import pyiceberg.table.update.snapshot as snapshot_update
    from pyiceberg.table.metadata import TableMetadataV3
    from pyiceberg.table.update.snapshot import _SnapshotProducer
    from pyiceberg.typedef import IcebergBaseModel

    manifest.DEFAULT_READ_VERSION = 3  # type: ignore[assignment]
    update.SUPPORTED_TABLE_FORMAT_VERSION = 3  # type: ignore[attr-defined]
    TableMetadataV3.model_dump_json = IcebergBaseModel.model_dump_json  # type: ignore[method-assign]
    TableMetadataV3.model_fields["next_row_id"].default = 0
    TableMetadataV3.model_rebuild(force=True)

    original_list = snapshot_update.write_manifest_list  # type: ignore[attr-defined]

    def write_manifest_list(
        format_version: Any,
        output_file: Any,
        snapshot_id: int,
        parent_snapshot_id: int | None,
        sequence_number: int | None,
        avro_compression: Any,
    ) -> Any:
        if format_version != 3:
            return original_list(
                format_version, output_file, snapshot_id, parent_snapshot_id, sequence_number, avro_compression
            )
        pending = _LIST_WRITERS.get()
        if pending is None or sequence_number is None:
            raise ValueError("a v3 manifest list is written only inside a snapshot producer's commit")
        writer = manifest_list_writer_v3()(
            output_file, snapshot_id, parent_snapshot_id, sequence_number, avro_compression, pending[0]
        )
        pending.append(writer)
        return writer

    snapshot_update.write_manifest_list = write_manifest_list  # type: ignore[attr-defined]

    original_manifest = snapshot_update.write_manifest  # type: ignore[attr-defined]

    def write_manifest(
        format_version: Any, spec: Any, schema: Any, output_file: Any, snapshot_id: int, avro_compression: Any
    ) -> Any:
        # pyiceberg's own producers (another writer's append in the same process) on a v3 table
        if format_version != 3:
            return original_manifest(format_version, spec, schema, output_file, snapshot_id, avro_compression)
        return manifest_writer_v3(manifest.ManifestWriterV2)(spec, schema, output_file, snapshot_id, avro_compression)

    snapshot_update.write_manifest = write_manifest  # type: ignore[attr-defined]

    original_commit = _SnapshotProducer._commit

    def _commit(self: Any) -> Any:
        meta = self._transaction.table_metadata
        if meta.format_version < 3:
            return original_commit(self)
        token = _LIST_WRITERS.set([int(meta.next_row_id or 0)])
        try:
            updates, requirements = original_commit(self)
            writers = _LIST_WRITERS.get() or []
        finally:
            _LIST_WRITERS.reset(token)
        added = writers[-1].assigned_rows if len(writers) > 1 else 0
        fixed = tuple(_with_added_rows(u, added) for u in updates)
        return fixed, requirements

    _SnapshotProducer._commit = _commit  # type: ignore[method-assign]
    _ENABLED = True


def _with_added_rows(update: Any, added: int) -> Any:
    from pyiceberg.table.update import AddSnapshotUpdate

    if not isinstance(update, AddSnapshotUpdate):
        return update
    return AddSnapshotUpdate(snapshot=update.snapshot.model_copy(update={"added_rows": added}))


_V3_WRITERS: dict[str, type] = {}


def manifest_writer_v3(base: type) -> type:
    """``base`` (a ``ManifestWriterV2`` subclass) writing format v3 manifests."""
    key = f"{base.__module__}.{base.__qualname__}"
    cls = _V3_WRITERS.get(key)
    if cls is not None:
        return cls

    class _V3(base):  # type: ignore[misc]
        @property
        def version(self) -> Any:
            return 3

        @property
        def _meta(self) -> dict[str, str]:
            return {**super()._meta, "format-version": "3"}

        def add_entry(self, entry: Any) -> Any:
            v3_data_file(entry.data_file)
            return super().add_entry(entry)

    _V3.__name__ = _V3.__qualname__ = base.__name__ + "V3"
    _V3_WRITERS[key] = _V3
    return _V3


_LIST_WRITER: type | None = None


def manifest_list_writer_v3() -> type:
    """The v3 manifest list writer: v2's, plus row ids for data manifests that have none."""
    global _LIST_WRITER
    if _LIST_WRITER is not None:
        return _LIST_WRITER
    from pyiceberg.manifest import ManifestContent, ManifestListWriterV2

    class ManifestListWriterV3(ManifestListWriterV2):
        def __init__(
            self,
            output_file: Any,
            snapshot_id: int,
            parent_snapshot_id: int | None,
            sequence_number: int,
            compression: Any,
            first_row_id: int,
        ) -> None:
            super().__init__(output_file, snapshot_id, parent_snapshot_id, sequence_number, compression)
            self._format_version = 3
            self._meta = {**self._meta, "format-version": "3", "first-row-id": str(first_row_id)}
            self._first_row_id = first_row_id
            self._next_row_id = first_row_id

        @property
        def assigned_rows(self) -> int:
            return self._next_row_id - self._first_row_id

        def prepare_manifest(self, manifest_file: Any) -> Any:
            wrapped = _pad(super().prepare_manifest(manifest_file), MANIFEST_FIELDS_V3)
            if wrapped.content == ManifestContent.DATA and first_row_id(wrapped) is None:
                set_first_row_id(wrapped, self._next_row_id)
                self._next_row_id += int(wrapped.existing_rows_count or 0) + int(wrapped.added_rows_count or 0)
            return wrapped

    _LIST_WRITER = ManifestListWriterV3
    return _LIST_WRITER


__all__ = [
    "content_range",
    "delete_key",
    "dv_summary",
    "enable_v3",
    "first_row_id",
    "inherit_first_row_ids",
    "manifest_list_writer_v3",
    "manifest_writer_v3",
    "new_deletion_vector_file",
    "referenced_data_file",
    "set_first_row_id",
    "upgrade_format_version",
    "v3_data_file",
]
