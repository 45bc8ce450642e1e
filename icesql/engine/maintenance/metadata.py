"""Metadata-file cleanup: delete the ``.metadata.json`` files a table's metadata log has dropped.

Every commit writes a new metadata file (``00012-<uuid>.metadata.json``) and moves the one it
replaces into the metadata log, which keeps the ``write.metadata.previous-versions-max`` newest
(Iceberg's default 100). A file that drops out of the log is a previous version no catalog and no
reader of the current metadata can reach; Iceberg deletes it at commit time only when the table
sets ``write.metadata.delete-after-commit.enabled`` (default false), and only the files the
committing writer's own commit dropped. Without it, a table committed every second keeps 86,400
metadata files a day.

``remove_old_metadata(table)`` reloads the table, lists the directory of its current metadata
file and deletes each ``*.metadata.json`` there whose version (the number its name starts with,
``00012-`` or Hadoop's ``v12.``) is **older than every file the log keeps**, the current one
included. It never deletes

* the current metadata file (what the catalog points to) nor one the log lists;
* a file at or above the log's oldest version that the log does not list: a commit in flight
  (another writer's, whose new file names a version above the current one), or one that lost a
  race; orphan-file cleanup takes those after its safety age, or this step once the log has moved
  past them;
* a file whose name carries no version.

Why the oldest version is a safe line while other writers commit: the log only moves forward. A
commit that lands after the reload keeps the log it was based on minus its oldest entries, so a
file below the oldest version read is below the oldest of every later log too; and a commit still
in flight was based on a metadata version at least as new as the one read, so its file's version
is higher still.

A running sink runs this step whenever its table's metadata has moved
``MaintenancePolicy.metadata_check_versions`` versions on (``planner``): one listing of the
metadata directory per that many commits, each of which writes at least three files.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from icesql.engine.iceberg.table_files import delete_listed, ident, list_files, path_key

METADATA_REASON = "remove-metadata"
METADATA_SUFFIX = ".metadata.json"
BATCH = 1000  # files deleted by one step at most: a table never cleaned is cleaned over several

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# Java, pyiceberg and iceberg-rust: 00012-<uuid>[.gz].metadata.json; Hadoop tables: v12[.gz].metadata.json.
# The UUID is required, as pyiceberg requires it: a file named by a bare UUID carries no version
# even when the UUID's first group is all digits.
_VERSION = re.compile(rf"(?:(\d+)-{_UUID}|v(\d+))(?:\.[a-z0-9]+)?\.metadata\.json", re.IGNORECASE)


def metadata_version(location: str) -> int | None:
    """The version a metadata file's name starts with (``00012-<uuid>.metadata.json``,
    ``v12.metadata.json``); None when it carries none."""
    m = _VERSION.fullmatch(location.rsplit("/", 1)[-1])
    return int(m.group(1) or m.group(2)) if m else None


def oldest_kept_version(metadata: Any, metadata_location: str | None) -> int | None:
    """The oldest version among the metadata files ``metadata`` keeps (its log and the current
    one, ``metadata_location``): every metadata file below it is a version no one can return to."""
    files = [e.metadata_file for e in metadata.metadata_log]
    if metadata_location:
        files.append(metadata_location)
    versions = [v for v in map(metadata_version, files) if v is not None]
    return min(versions, default=None)


@dataclass(frozen=True)
class MetadataResult:
    table: str
    location: str  # the metadata directory listed
    files_listed: int  # metadata files found there
    kept: int  # the current one and those the log lists
    deleted: tuple[str, ...]  # older than the log (or, in a dry run, would be deleted)
    bytes_deleted: int
    kept_unlogged: int  # not in the log, but not older than it: a commit in flight, a lost race
    remaining: int  # older than the log but beyond ``limit``: the next run deletes them
    duration: float
    dry_run: bool = False
    files_failed: int = 0
    kind: ClassVar[str] = METADATA_REASON

    @property
    def skipped(self) -> bool:
        return not self.deleted


def remove_old_metadata(
    table: Any, *, limit: int | None = BATCH, dry_run: bool = False, workers: int = 8
) -> MetadataResult:
    """Delete ``table``'s metadata files older than its metadata log, the oldest first, at most
    ``limit`` of them (None: all); see the module docstring."""
    start = time.monotonic()
    table.refresh()
    current = table.metadata_location or ""
    directory = current.rsplit("/", 1)[0] if "/" in current else f"{table.location().rstrip('/')}/metadata"
    keep = {path_key(e.metadata_file) for e in table.metadata.metadata_log}
    keep.add(path_key(current))
    oldest = oldest_kept_version(table.metadata, current)
    listed = [f for f in list_files(table.io, directory) if f.location.lower().endswith(METADATA_SUFFIX)]
    old: list[tuple[int, Any]] = []
    unlogged = 0
    for f in listed:
        if path_key(f.location) in keep:
            continue
        version = metadata_version(f.location)
        if version is None or oldest is None or version >= oldest:
            unlogged += 1
            continue
        old.append((version, f))
    old.sort(key=lambda vf: vf[0])
    chosen = [f for _, f in (old[:limit] if limit is not None else old)]
    done = delete_listed(table.io, chosen, dry_run=dry_run, workers=workers)
    return MetadataResult(
        table=ident(table),
        location=directory,
        files_listed=len(listed),
        kept=len(listed) - len(old) - unlogged,
        deleted=done.deleted,
        bytes_deleted=done.bytes_deleted,
        kept_unlogged=unlogged,
        remaining=len(old) - len(chosen),
        duration=time.monotonic() - start,
        dry_run=dry_run,
        files_failed=done.failed,
    )


__all__ = [
    "METADATA_REASON",
    "MetadataResult",
    "metadata_version",
    "oldest_kept_version",
    "remove_old_metadata",
]
