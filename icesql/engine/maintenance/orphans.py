"""Orphan-file cleanup: delete the files under a table's location that nothing references.

Files end up unreferenced when a writer dies between writing them and committing (a Spark task
killed mid-batch, a commit that failed for good), when snapshot expiration could not delete what
it freed, or when another engine left them. ``remove_orphan_files`` lists the table location
(pyarrow's filesystem behind the table's FileIO), then reloads the table and deletes each listed
file that

* is a kind of file Iceberg writes (``.parquet``, ``.avro``, ``.orc``, ``.puffin``,
  ``.metadata.json``): anything else under the location is someone else's business;
* no metadata references: not the current metadata file nor one in its metadata log, not a
  snapshot's manifest list, manifest, data, delete or statistics file (every snapshot the table
  holds, entries of any status);
* is not in ``protected_paths`` (the caller passes the files its sinks' staged batches name:
  ``staged_files(home)``), not under the Spark Connect drop box
  (``<location>/data/icesql-staging/``, see ``dropbox``) nor named by one of its records, and
  not under the upsert sinks' key index (``<location>/data/icesql-index/``, which each sink
  cleans itself: ``index.store``);
* and is older than ``older_than`` — the safety age, which must reach back past every write
  still in flight (a batch whose files are written but not yet staged names them nowhere).

A metadata file older than every one the metadata log keeps (by its version number,
``00012-<uuid>.metadata.json``; ``metadata.oldest_kept_version``) is a previous version no catalog
can return to: it is deleted whatever its age (``metadata.remove_old_metadata`` deletes those
alone, without reading a manifest). One newer than the current one is never deleted before the
safety age: it may be a commit in flight.

The listing happens before the reload, so a commit that lands in between has its files
referenced; files written after the listing are not seen at all.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from icesql.engine.iceberg.table_files import (
    delete_listed,
    ident,
    list_files,
    manifest_entries,
    path_key,
    prefetch,
    relative_to,
    snapshot_manifests,
)
from icesql.engine.maintenance.expire import epoch_ms
from icesql.engine.maintenance.metadata import metadata_version, oldest_kept_version

log = logging.getLogger("icesql.maintenance")

ORPHANS_REASON = "remove-orphans"

ICEBERG_SUFFIXES = (".parquet", ".avro", ".orc", ".puffin", ".metadata.json")


@dataclass(frozen=True)
class OrphanResult:
    table: str
    location: str  # what was listed
    files_listed: int
    orphans: int  # unreferenced Iceberg files found (deleted or not)
    deleted: tuple[str, ...]  # the files deleted (or, in a dry run, that would be)
    bytes_deleted: int
    kept_recent: int  # unreferenced, but newer than the safety age
    kept_protected: int  # unreferenced, but named by a staged batch or a drop-box record
    duration: float
    dry_run: bool = False
    files_failed: int = 0
    kind: ClassVar[str] = ORPHANS_REASON

    @property
    def skipped(self) -> bool:
        return not self.deleted


def referenced_files(table: Any) -> set[str]:
    """``path_key``s of every file ``table``'s metadata references (see the module docstring)."""
    io = table.io
    metadata = table.metadata
    refs = {table.metadata_location, *(e.metadata_file for e in metadata.metadata_log)}
    manifests: dict[str, Any] = {}
    prefetch(io, metadata.snapshots)
    for snap in metadata.snapshots:
        refs.add(snap.manifest_list)
        for m in snapshot_manifests(io, snap):
            manifests.setdefault(m.manifest_path, m)
    prefetch(io, manifests=manifests.values())
    for path, m in manifests.items():
        refs.add(path)
        refs.update(e.data_file.file_path for e in manifest_entries(io, m))
    refs.update(s.statistics_path for s in metadata.statistics)
    refs.update(s.statistics_path for s in getattr(metadata, "partition_statistics", []))
    return {path_key(p) for p in refs if p}


def staged_files(home: Path | str, sink_ids: Iterable[str] | None = None) -> set[str]:
    """The files named by the staged batches of the sinks of an icesql home (all when
    ``sink_ids`` is None; a routed sink's tables' too): written, not committed yet, needed by the next commit or recovery.
    ``StagingDamaged`` when an entry cannot be read: what it protects is unknown, so nothing may
    be deleted."""
    from icesql.engine.commit.staging import Staging

    root = Path(home) / "sinks"
    sinks = [root / s for s in sink_ids] if sink_ids is not None else sorted(p for p in root.glob("*") if p.is_dir())
    # a sink's own staging, and a routed sink's per table (``sink.routed.TABLES``)
    dirs = [d for s in sinks for d in (s / "staging", *sorted(s.glob("tables/*/staging")))]
    out: set[str] = set()
    for directory in dirs:
        if not directory.is_dir():
            continue
        for entry in Staging(directory).pending():
            for text in (*entry.data_files, *entry.delete_files):
                out.add(str(json.loads(text)["file_path"]))
    return out


def _dropbox_files(io: Any, listed: list[Any]) -> set[str]:
    """The files named by the drop-box records among ``listed`` (``dropbox.DropBox.put``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out: set[str] = set()
    for f in listed:
        try:
            with io.new_input(f.location).open() as stream:
                table = pq.read_table(pa.BufferReader(stream.read()), columns=["file"])
        except FileNotFoundError:  # taken into staging meanwhile: then staging names the files
            continue
        except (pa.ArrowInvalid, OSError, ValueError):  # torn: Spark replays the batch
            continue
        for text in table.column("file").to_pylist():
            if text:
                out.add(str(json.loads(text)["file_path"]))
    return out


def remove_orphan_files(
    table: Any,
    older_than: Any,
    *,
    protected_paths: Iterable[str] | Callable[[], Iterable[str]] = (),
    under: str | None = None,
    limit: int | None = None,
    dry_run: bool = False,
    workers: int = 8,
) -> OrphanResult:
    """Delete ``table``'s orphan files older than ``older_than`` (a datetime, or seconds since
    the epoch); see the module docstring.

    ``protected_paths``: files never to delete, or a function returning them, called after the
    listing (so a batch staged while the table is listed is protected too). ``under``: list only
    this directory below the table location (``'metadata'``, ``'data/region=eu'``): one bounded
    slice of a large table. ``limit``: delete at most that many files, the oldest first."""
    from icesql.engine.base.layout import DROPBOX_DIRECTORY, INDEX_ROOT

    start = time.monotonic()
    cutoff = epoch_ms(older_than) / 1000
    root = table.location().rstrip("/")
    location = f"{root}/{under.strip('/')}" if under else root
    listed = list(list_files(table.io, location))
    dropbox_root = f"{root}/{DROPBOX_DIRECTORY}"
    index_root = f"{root}/{INDEX_ROOT}"
    records = [f for f in list_files(table.io, dropbox_root) if f.location.endswith(".parquet")]
    protected = {path_key(p) for p in (protected_paths() if callable(protected_paths) else protected_paths)}
    protected |= {path_key(p) for p in _dropbox_files(table.io, records)}
    table.refresh()
    referenced = referenced_files(table)
    oldest_logged = oldest_kept_version(table.metadata, table.metadata_location)

    orphans: list[Any] = []
    recent = kept = 0
    for f in listed:
        key = path_key(f.location)
        if key in referenced or relative_to(f.location, dropbox_root) is not None:
            continue
        if relative_to(f.location, index_root) is not None:
            continue
        name = key.rsplit("/", 1)[-1].lower()
        if not name.endswith(ICEBERG_SUFFIXES):
            continue
        if key in protected:
            kept += 1
            continue
        if name.endswith(".metadata.json"):
            version = metadata_version(name)
            if version is not None and oldest_logged is not None and version < oldest_logged:
                orphans.append(f)  # a previous version the metadata log no longer keeps
                continue
        if f.mtime is None or f.mtime >= cutoff:
            recent += 1
            continue
        orphans.append(f)
    orphans.sort(key=lambda f: f.mtime or 0.0)
    chosen = orphans[:limit] if limit is not None else orphans
    done = delete_listed(table.io, chosen, dry_run=dry_run, workers=workers)
    return OrphanResult(
        table=ident(table),
        location=location,
        files_listed=len(listed),
        orphans=len(orphans),
        deleted=done.deleted,
        bytes_deleted=done.bytes_deleted,
        kept_recent=recent,
        kept_protected=kept,
        duration=time.monotonic() - start,
        dry_run=dry_run,
        files_failed=done.failed,
    )


__all__ = ["ORPHANS_REASON", "OrphanResult", "referenced_files", "remove_orphan_files", "staged_files"]
