"""An Iceberg table's health, measured from outside the sink that writes it (the maintenance soak).

``table_health(...)`` loads the table from its catalog (SQLite, as ``local_catalog``) and reads
its metadata with pyiceberg directly, not through icesql's maintenance code (whose work it
checks), except for ``sink_snapshots``, the definition of the snapshots a sink needs to resume:

* live data files and delete files (position, equality) and the manifests of the current snapshot;
* the ``.metadata.json`` files in the metadata directory, and every file there;
* the snapshots, and those that expiration should have removed by now: older than the
  retention plus ``expire_slack``, not among the ``keep`` newest ancestors of ``main``, not a
  sink's last-progress snapshot;
* the files under the table location that nothing references, of the kinds orphan-file cleanup
  looks at (``.parquet``, ``.avro``, ``.orc``, ``.puffin``, ``.metadata.json``, outside the key
  index and the drop box), and how old the oldest is;
* what a fresh compaction of the same rows leaves (``fresh_compaction``).

``fresh_compaction(...)`` reads the table's rows with DuckDB, writes them to a new table of a
scratch catalog (same schema and partition spec) in two appends, and compacts that table with
``icesql.engine.maintenance.compact.compact_table`` in ``FULL`` mode at the target file size: what ``icesql
compact`` would leave for exactly those rows, written by the same writer as the maintenance's
compaction. Its data files are the reference of the soak's file-count bound, and the copy is the
reference of its read-time bound (``duckdb_read_seconds``).

The functions return plain dicts, so the soak runs them in a separate process: measuring must not
hold the sink's interpreter lock (its commits are timed).
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

from tests.support.pipeline_helpers import sql_catalog
from tests.support.readers import _path, duckdb_connection

ICEBERG_SUFFIXES = (".parquet", ".avro", ".orc", ".puffin", ".metadata.json")
EXCLUDED_DIRS = ("data/icesql-index/", "data/icesql-staging/")  # key index, drop box: cleaned by icesql

_entries: dict[str, list[str]] = {}  # manifest path -> the file paths of its entries (immutable)
_lists: dict[str, list[str]] = {}  # manifest list -> the paths of its manifests


def _manifests(table: Any, snapshot: Any) -> list[Any]:
    return list(snapshot.manifests(table.io))


def _referenced(table: Any) -> set[str]:
    """Every file the table's metadata references: metadata files of the log, manifest lists,
    manifests, data and delete files (entries of any status) of every snapshot, statistics."""
    md = table.metadata
    refs = {table.metadata_location, *(e.metadata_file for e in md.metadata_log)}
    for snap in md.snapshots:
        refs.add(snap.manifest_list)
        if snap.manifest_list not in _lists:
            ms = _manifests(table, snap)
            for m in ms:
                if m.manifest_path not in _entries:
                    _entries[m.manifest_path] = [
                        e.data_file.file_path for e in m.fetch_manifest_entry(table.io, discard_deleted=False)
                    ]
            _lists[snap.manifest_list] = [m.manifest_path for m in ms]
        for path in _lists[snap.manifest_list]:
            refs.add(path)
            refs.update(_entries[path])
    refs.update(s.statistics_path for s in md.statistics)
    refs.update(s.statistics_path for s in getattr(md, "partition_statistics", []))
    return {os.path.normpath(_path(p)) for p in refs if p}


def _listed(root: str) -> dict[str, float]:
    """Iceberg files under ``root`` (outside the key index and the drop box): path -> mtime."""
    out = {}
    for directory, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if any(rel.startswith(x) for x in EXCLUDED_DIRS) or not name.lower().endswith(ICEBERG_SUFFIXES):
                continue
            try:
                out[os.path.normpath(path)] = os.stat(path).st_mtime
            except FileNotFoundError:
                continue
    return out


def table_health(
    warehouse: str,
    identifier: str,
    *,
    retention: float,
    keep: int,
    expire_slack: float,
    orphan_age: float,
    target: int | None,
    scratch: str | None,
) -> dict[str, Any]:
    """The figures of the module docstring for one table, now (``target``/``scratch`` None: no
    fresh compaction)."""
    from pyiceberg.manifest import DataFileContent

    from icesql.engine.maintenance.expire import sink_snapshots

    started = time.time()
    table = sql_catalog(warehouse).load_table(identifier)
    root = _path(table.location())
    listed = _listed(root)  # before the table is loaded again: what a commit adds meanwhile is referenced
    table.refresh()
    md = table.metadata
    now = time.time()
    snap = table.current_snapshot()
    data = pos = eq = 0
    data_bytes = rows = 0
    manifests = 0
    if snap is not None:
        ms = _manifests(table, snap)
        manifests = len(ms)
        for m in ms:
            for e in m.fetch_manifest_entry(table.io, discard_deleted=True):
                f = e.data_file
                if f.content == DataFileContent.DATA:
                    data += 1
                    data_bytes += int(f.file_size_in_bytes)
                    rows += int(f.record_count)
                elif f.content == DataFileContent.POSITION_DELETES:
                    pos += 1
                else:
                    eq += 1

    # snapshots that expiration should have removed
    keep_ids: set[int] = set()
    cur = snap
    while cur is not None and len(keep_ids) < max(1, keep):
        keep_ids.add(cur.snapshot_id)
        cur = md.snapshot_by_id(cur.parent_snapshot_id) if cur.parent_snapshot_id is not None else None
    for ids in sink_snapshots(md).values():
        keep_ids |= ids
    cutoff_ms = (now - retention - expire_slack) * 1000
    overdue = [s for s in md.snapshots if s.snapshot_id not in keep_ids and s.timestamp_ms < cutoff_ms]
    unkept = [s for s in md.snapshots if s.snapshot_id not in keep_ids]
    oldest_unkept = max(((now * 1000 - s.timestamp_ms) / 1000 for s in unkept), default=0.0)

    # unreferenced files; a file deleted meanwhile (expiration deletes after its commit) is not one
    referenced = _referenced(table)
    unref = {p: t for p, t in listed.items() if p not in referenced}
    if unref:
        time.sleep(1.0)
        unref = {p: t for p, t in unref.items() if os.path.exists(p)}
    old_unref = sorted(p for p, t in unref.items() if now - t > orphan_age)
    oldest_unref = max((now - t for t in unref.values()), default=0.0)

    meta_dir = os.path.join(root, "metadata")
    meta_files = os.listdir(meta_dir) if os.path.isdir(meta_dir) else []
    out: dict[str, Any] = {
        "table": identifier,
        "at": started,
        "snapshot_id": snap.snapshot_id if snap is not None else None,
        "metadata_location": table.metadata_location,
        "data_files": data,
        "data_bytes": data_bytes,
        "rows_in_files": rows,
        "position_delete_files": pos,
        "equality_delete_files": eq,
        "delete_files": pos + eq,
        "manifests": manifests,
        "metadata_json": sum(1 for n in meta_files if n.endswith(".metadata.json")),
        "metadata_dir_files": len(meta_files),
        "metadata_log": len(md.metadata_log),
        "snapshots": len(md.snapshots),
        "overdue_snapshots": len(overdue),
        "oldest_unkept_snapshot_age": round(oldest_unkept, 1),
        "unreferenced": len(unref),
        "unreferenced_old": len(old_unref),
        "unreferenced_old_paths": old_unref[:10],
        "oldest_unreferenced_age": round(oldest_unref, 1),
    }
    if target is not None and scratch is not None:
        fresh = fresh_compaction(table, target=target, scratch=scratch, name=f"s{int(started * 1000)}")
        out["fresh_data_files"] = fresh["data_files"]
        out["live_rows"] = fresh["rows"]
        shutil.rmtree(fresh["location"], ignore_errors=True)
    out["seconds"] = round(time.time() - started, 2)
    return out


def duckdb_arrow(metadata_location: str) -> Any:
    con = duckdb_connection()
    try:
        return con.execute(f"SELECT * FROM iceberg_scan('{_path(metadata_location)}')").to_arrow_table()
    finally:
        con.close()


def fresh_compaction(table: Any, *, target: int, scratch: str, name: str) -> dict[str, Any]:
    """The rows ``table`` reads now, in a new table of the scratch catalog, compacted in ``FULL``
    mode at ``target`` bytes per file: {data_files, rows, metadata_location, location}."""
    from pyiceberg.manifest import DataFileContent

    from icesql.engine.maintenance.compact import CompactMode, compact_table

    rows = duckdb_arrow(table.metadata_location)
    cat = sql_catalog(scratch, "fresh")
    cat.create_namespace_if_not_exists("fresh")
    copy = cat.create_table(("fresh", name), schema=table.schema(), partition_spec=table.spec())
    arrow_schema = copy.schema().as_arrow()
    rows = rows.select(arrow_schema.names).cast(arrow_schema)
    half = rows.num_rows // 2
    # two appends: every partition holds at least two files, so FULL mode rewrites them all
    copy.append(rows.slice(0, half))
    copy.append(rows.slice(half))
    compact_table(copy, mode=CompactMode.FULL, max_file_size=target)
    copy.refresh()
    files = 0
    snap = copy.current_snapshot()
    for m in snap.manifests(copy.io) if snap is not None else []:
        for e in m.fetch_manifest_entry(copy.io, discard_deleted=True):
            assert e.data_file.content == DataFileContent.DATA, "a fresh compaction leaves no delete file"
            files += 1
    return {
        "data_files": files,
        "rows": rows.num_rows,
        "metadata_location": copy.metadata_location,
        "location": _path(copy.location()),
    }


def duckdb_read_seconds(metadata_location: str, repeat: int = 7) -> list[float]:
    """Wall-clock seconds of ``repeat`` full reads (``SELECT *`` into Arrow) of the table, each on
    a new DuckDB connection (no cache carried over), extension loading not counted."""
    out = []
    for _ in range(repeat):
        con = duckdb_connection()
        try:
            started = time.perf_counter()
            con.execute(f"SELECT * FROM iceberg_scan('{_path(metadata_location)}')").to_arrow_table()
            out.append(time.perf_counter() - started)
        finally:
            con.close()
    return out


__all__ = ["duckdb_read_seconds", "fresh_compaction", "table_health"]
