"""What a table's metadata references, and the storage under it: the ground maintenance stands on.

* ``manifest_entries(io, manifest)``: a manifest's entries (every status), through a cache.
  Manifests are immutable once written, and a sink's table keeps most of them from one snapshot
  to the next, so planning between two commits reads only the manifests that are new.
* ``snapshot_manifests(io, snapshot)``: the manifests a snapshot lists, through a cache too.
* ``live_files(table, snapshot)``: the data and delete files a snapshot reads (``LiveFile``).
* ``path_key(location)``: one spelling per stored object, to compare a manifest's paths with a
  listing's (``s3a://`` and ``s3://``, ``/x`` and ``file:///x``, ``abfs://c/x`` and
  ``abfss://c@account.dfs.core.windows.net/x`` are the same object).
* ``list_files(io, location)``: every file under a location (pyarrow's filesystem behind
  pyiceberg's FileIO, as ``dropbox.DropBox`` lists: FileIO itself cannot list).
* ``delete_paths(io, paths)``: deletes, a few at a time (object stores answer one per request);
  ``delete_listed(io, files)`` the files a listing found, or says what it would delete.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from icesql.engine.base.pyiceberg_v3 import enable_v3

log = logging.getLogger("icesql.maintenance")

# Bounded by entries (about 1 KiB each), not manifests: a sink that commits every second leaves
# thousands of one-entry manifests between two expirations, which then reads them again.
_CACHE_ENTRIES = 50_000
_cache: OrderedDict[str, list[Any]] = OrderedDict()
_cached_entries = 0
_cache_lock = threading.Lock()


def manifest_entries(io: Any, manifest: Any) -> list[Any]:
    """Every entry of ``manifest`` (ADDED, EXISTING and DELETED), sequence numbers and (format v3)
    first row ids inherited. The entries are shared: never modify them."""
    path = manifest.manifest_path
    enable_v3()  # read with the v3 schema, whoever loaded the table
    with _cache_lock:
        hit = _cache.get(path)
        if hit is not None:
            _cache.move_to_end(path)
            return hit
    global _cached_entries
    from icesql.engine.base.pyiceberg_v3 import inherit_first_row_ids

    entries = inherit_first_row_ids(manifest, manifest.fetch_manifest_entry(io, discard_deleted=False))
    with _cache_lock:
        if path not in _cache:
            _cache[path] = entries
            _cached_entries += len(entries)
        while _cached_entries > _CACHE_ENTRIES and len(_cache) > 1:
            _, dropped = _cache.popitem(last=False)
            _cached_entries -= len(dropped)
    return entries


_LIST_CACHE_SIZE = 8192  # manifest lists: one per snapshot kept
_lists: OrderedDict[str, tuple[Any, ...]] = OrderedDict()


def snapshot_manifests(io: Any, snapshot: Any) -> tuple[Any, ...]:
    """The manifests ``snapshot`` lists (its manifest list is read once per process)."""
    path = snapshot.manifest_list
    enable_v3()
    with _cache_lock:
        hit = _lists.get(path)
        if hit is not None:
            _lists.move_to_end(path)
            return hit
    manifests = tuple(snapshot.manifests(io))
    with _cache_lock:
        _lists[path] = manifests
        while len(_lists) > _LIST_CACHE_SIZE:
            _lists.popitem(last=False)
    return manifests


def prefetch(io: Any, snapshots: Iterable[Any] = (), manifests: Iterable[Any] = (), *, workers: int = 8) -> None:
    """Read the manifest lists of ``snapshots`` and the ``manifests`` into the caches, a few at a
    time: on an object store each is a request, and maintenance reads thousands of them."""
    lists = [s for s in snapshots if s.manifest_list not in _lists]
    entries = [m for m in manifests if m.manifest_path not in _cache]
    jobs = [*((snapshot_manifests, io, s) for s in lists), *((manifest_entries, io, m) for m in entries)]
    if len(jobs) < 2 or workers <= 1:
        for fn, a, b in jobs:
            fn(a, b)
        return
    with ThreadPoolExecutor(max_workers=min(workers, len(jobs)), thread_name_prefix="icesql-read") as pool:
        for _ in pool.map(lambda job: job[0](job[1], job[2]), jobs):
            pass


def entries_reader(io: Any) -> Any:
    """``manifest -> entries`` for the snapshot producers of ``pyiceberg_internals``."""
    return lambda manifest: manifest_entries(io, manifest)


@dataclass(frozen=True)
class LiveFile:
    """A file a snapshot reads, as its manifest entry describes it. The figures planning reads
    for every file are copied out of the pyiceberg record once (its properties are slow)."""

    data_file: Any  # pyiceberg DataFile
    sequence_number: int  # data sequence number
    file_sequence_number: int | None
    snapshot_id: int | None  # the snapshot that added the file
    path: str
    size: int
    rows: int
    content: int  # 0 data, 1 position deletes, 2 equality deletes
    spec_id: int
    partition_key: tuple[int, str]  # (spec id, partition values): files of one partition

    @classmethod
    def of(cls, entry: Any) -> LiveFile:
        from icesql.engine.base.pyiceberg_v3 import delete_key

        f = entry.data_file
        spec_id = int(f.spec_id)
        return cls(
            data_file=f,
            sequence_number=int(entry.sequence_number or 0),
            file_sequence_number=entry.file_sequence_number,
            snapshot_id=entry.snapshot_id,
            path=delete_key(f),  # a deletion vector's: its Puffin file's path and offset
            size=int(f.file_size_in_bytes),
            rows=int(f.record_count),
            content=int(f.content),
            spec_id=spec_id,
            partition_key=(spec_id, repr(f.partition)),
        )

    @property
    def file_format(self) -> Any:
        """The file's format as its manifest entry names it (pyiceberg ``FileFormat``)."""
        return self.data_file.file_format


def live_files(table: Any, snapshot: Any) -> tuple[list[LiveFile], list[LiveFile]]:
    """(data files, delete files) that ``snapshot`` reads."""
    from pyiceberg.manifest import ManifestEntryStatus

    data: list[LiveFile] = []
    deletes: list[LiveFile] = []
    if snapshot is None:
        return data, deletes
    for manifest in snapshot_manifests(table.io, snapshot):
        for e in manifest_entries(table.io, manifest):
            if e.status == ManifestEntryStatus.DELETED:
                continue
            f = LiveFile.of(e)
            (data if f.content == 0 else deletes).append(f)
    return data, deletes


def ident(table: Any) -> str:
    name = table.name()
    return ".".join(name) if isinstance(name, (tuple, list)) else str(name)


# --------------------------------------------------------------------------- paths

def path_key(location: str) -> str:
    """``location`` spelled one way: each store's schemes folded into its first (``s3a`` is
    ``s3``, ``abfss`` is ``abfs``), Azure's ``container@account...`` netloc into the container,
    no repeated slashes."""
    from icesql.engine.connections import stores
    from icesql.engine.connections.stores.base import split_location

    scheme, netloc, path = split_location(location)
    scheme = scheme or "file"
    store = stores.for_scheme(scheme)
    if store is not None:
        netloc = stores.canonical_netloc(scheme, netloc)
        scheme = store.schemes[0]
    if scheme == "file":
        netloc = ""
    return f"{scheme}://{netloc}/{re.sub('/+', '/', path).lstrip('/')}"


def relative_to(location: str, root: str) -> str | None:
    """``location``'s path below ``root`` ('' for root itself); None when it is not under it."""
    key, base = path_key(location), path_key(root).rstrip("/")
    if key == base:
        return ""
    if key.startswith(base + "/"):
        return key[len(base) + 1 :]
    return None


# --------------------------------------------------------------------------- storage


@dataclass(frozen=True)
class StoredFile:
    location: str  # a URI the table's FileIO opens
    size: int
    mtime: float | None  # seconds since the epoch; None when the store does not say


def list_files(io: Any, location: str) -> Iterator[StoredFile]:
    """Every file under ``location`` (recursively); nothing when it does not exist."""
    from icesql.engine.connections import stores

    filesystem = stores.filesystem(io, location)
    for found in filesystem.list(location, recursive=True):
        mtime = found.mtime_ns / 1e9 if found.mtime_ns is not None else None
        yield StoredFile(found.location, found.size, mtime)


def delete_paths(io: Any, paths: Iterable[str], *, workers: int = 8) -> tuple[list[str], list[str]]:
    """Delete ``paths`` through ``io``; (deleted, failed). A missing file counts as deleted."""

    def delete(path: str) -> bool:
        try:
            io.delete(path)
            return True
        except FileNotFoundError:
            return True
        except Exception as exc:  # noqa: BLE001 - one file that cannot be deleted fails nothing
            log.warning("could not delete %s: %s", path, exc)
            return False

    todo = list(dict.fromkeys(paths))
    if not todo:
        return [], []
    if len(todo) == 1 or workers <= 1:
        done = [delete(p) for p in todo]
    else:
        with ThreadPoolExecutor(
            max_workers=min(workers, len(todo)), thread_name_prefix="icesql-delete"
        ) as pool:
            done = list(pool.map(delete, todo))
    pairs = list(zip(todo, done, strict=True))
    return [p for p, ok in pairs if ok], [p for p, ok in pairs if not ok]


@dataclass(frozen=True)
class Deletion:
    deleted: tuple[str, ...]  # the files deleted (in a dry run: that would be)
    bytes_deleted: int
    failed: int  # files that could not be deleted


def delete_listed(
    io: Any, files: Iterable[StoredFile], *, dry_run: bool = False, workers: int = 8
) -> Deletion:
    """Delete ``files`` (as ``list_files`` found them) through ``io``; a dry run deletes nothing."""
    chosen = list(files)
    failed: list[str] = []
    if dry_run:
        deleted = [f.location for f in chosen]
    else:
        deleted, failed = delete_paths(io, [f.location for f in chosen], workers=workers)
    size_of = {f.location: f.size for f in chosen}
    return Deletion(tuple(deleted), sum(size_of.get(p, 0) for p in deleted), len(failed))


__all__ = [
    "Deletion",
    "LiveFile",
    "StoredFile",
    "delete_listed",
    "delete_paths",
    "entries_reader",
    "ident",
    "list_files",
    "live_files",
    "manifest_entries",
    "path_key",
    "prefetch",
    "relative_to",
    "snapshot_manifests",
]
