"""Table maintenance figures: expiring a sink's history, compacting its small files, merging its
manifests, listing it for orphans. Local SQLite catalog, no Spark.

    .venv/bin/python benchmarks/maintenance.py [--snapshots 1000] [--files 1000] [--rows 1000]

A sink's history is built the way a sink leaves it — one snapshot per commit, each adding one
small data file with the sink's progress — but many snapshots per catalog commit (icesql commits
staged batches as consecutive snapshots of one commit), so that building it does not dominate.
Every operation runs in a fresh process state (no manifest cache), which is the slow case: a
running sink's planner has read each new manifest list already when its expiration comes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _clear_caches() -> None:
    from icesql.engine.iceberg import table_files as files

    files._cache.clear()
    files._cached_entries = 0
    files._lists.clear()


def history(root: Path, snapshots: int, merge_every: int | None) -> Any:
    from tests.support.iceberg_tables import sink_history, sink_table, sql_catalog

    return sink_history(sink_table(sql_catalog(root), upsert=False), snapshots, merge_every=merge_every)


def timed(label: str, fn: Any) -> Any:
    _clear_caches()
    start = time.monotonic()
    result = fn()
    print(f"{label}: {time.monotonic() - start:.2f}s", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    from icesql.engine.maintenance import expire_snapshots, remove_orphan_files, rewrite_manifests
    from icesql.engine.maintenance.compact import CompactMode, compact_table
    from tests.support.iceberg_tables import data, sink_commit, sink_table, sql_catalog

    ap = argparse.ArgumentParser()
    ap.add_argument("--snapshots", type=int, default=1000)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=1000, help="rows per small file")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="icesql-maint-") as tmp:
        work = Path(tmp)
        n = args.snapshots
        for merge in (32, None):
            table = history(work / f"h{merge}", n, merge)
            what = f"manifests merged every {merge} commits" if merge else "manifests never merged"
            before = len(table.metadata.snapshots)
            r = timed(
                f"expire all but 10 of {before} snapshots ({what})",
                lambda t=table: expire_snapshots(t, time.time() + 10, 10),
            )
            print(f"  {len(r.expired)} expired, {r.files_deleted} files deleted, {r.snapshots_after} left")
        table = history(work / "warm", n, 32)
        expire_snapshots(table, time.time() + 10, 10, dry_run=True)  # what a running sink's planner read
        start = time.monotonic()
        r = expire_snapshots(table, time.time() + 10, 10)
        print(f"the same, manifests already read (a running sink): {time.monotonic() - start:.2f}s")
        table = history(work / "m", n, None)
        r = timed(
            f"rewrite {n} manifests",
            lambda: rewrite_manifests(table, max_manifests=1),
        )
        print(f"  {r.manifests_before} -> {r.manifests_after} manifests, {r.entries} entries")

        table = sink_table(sql_catalog(work / "c"), upsert=False)
        files = []
        for i in range(args.files):
            files += data(table, range(i * args.rows, (i + 1) * args.rows))
        sink_commit(table, 0, files)
        size = sum(f.file_size_in_bytes for f in files)
        r = timed(
            f"compact {args.files} small files ({args.files * args.rows:,} rows, {size / 2**20:.1f} MiB)",
            lambda: compact_table(table, mode=CompactMode.AUTO),
        )
        print(f"  {r.data_files_before} -> {r.data_files_after} data files, {r.rows:,} rows")
        r = timed(
            "orphan-file cleanup of that table",
            lambda: remove_orphan_files(table, time.time() + 10),
        )
        print(f"  {r.files_listed} files listed, {len(r.deleted)} deleted")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
