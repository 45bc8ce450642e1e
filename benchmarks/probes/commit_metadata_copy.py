"""Probe: what pyiceberg's deep copy of the table metadata costs a sink's commit (issue 13).

pyiceberg 0.12's ``update_table_metadata`` ends with ``model_copy(deep=True)`` of the whole table
metadata, snapshots included; a commit ran it three times (the transaction's metadata before and
after the snapshot producer, and the catalog's commit). icesql builds the metadata without that copy
(``pyiceberg_internals.staged_metadata``, ``cheap_commits``). This probe commits one small data file
at a time through ``icesql.engine.commit.snapshot.commit`` to a local SQL catalog, both ways, in one process,
the two ways taking turns, after a warm-up history of snapshots:

    .venv/bin/python benchmarks/probes/commit_metadata_copy.py [--snapshots 100] [--commits 60]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def _table(root: Path, cheap: bool) -> tuple[Any, list[Any]]:
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    from icesql.engine.base.pyiceberg_catalogs import cheap_commits
    from icesql.engine.iceberg.writer import DataFileWriter, WriteSpec

    root.mkdir(parents=True)
    catalog = SqlCatalog("probe", uri=f"sqlite:///{root}/c.db", warehouse=f"file://{root}/wh")
    if cheap:
        cheap_commits(catalog)
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())]))
    w = DataFileWriter(WriteSpec.from_table(table))
    w.write(pa.record_batch({"id": pa.array([1, 2, 3], pa.int64()), "v": ["x"] * 3}))
    return table, w.close()


def main() -> None:
    from pyiceberg.table.update import update_table_metadata

    from icesql.engine.base import pyiceberg_internals as internals
    from icesql.engine.commit.snapshot import CommitRequest, commit

    ap = argparse.ArgumentParser()
    ap.add_argument("--snapshots", type=int, default=100, help="history before the timed commits")
    ap.add_argument("--commits", type=int, default=60, help="timed commits per way")
    args = ap.parse_args()
    ours = internals.staged_metadata

    def pyicebergs(base: Any, updates: Any, metadata_location: str | None = None) -> Any:
        return update_table_metadata(base, updates, metadata_location=metadata_location)

    root = Path(tempfile.mkdtemp(prefix="icesql-commit-probe-"))
    ways = {"pyiceberg's deep copy": False, "icesql (no copy)": True}
    tables = {name: _table(root / str(i), cheap) for i, (name, cheap) in enumerate(ways.items())}
    for name, (table, files) in tables.items():
        internals.staged_metadata = ours if ways[name] else pyicebergs  # type: ignore[assignment]
        for i in range(args.snapshots):
            commit(table, CommitRequest(files, [], "probe", 1, i + 1))
    took: dict[str, list[float]] = {name: [] for name in ways}
    for i in range(args.commits):
        for name, (table, files) in tables.items():
            internals.staged_metadata = ours if ways[name] else pyicebergs  # type: ignore[assignment]
            started = time.perf_counter()
            commit(table, CommitRequest(files, [], "probe", 1, args.snapshots + i + 1))
            took[name].append(time.perf_counter() - started)
    internals.staged_metadata = ours  # type: ignore[assignment]
    print(f"{args.commits} commits each after {args.snapshots} snapshots (local SQL catalog):")
    for name, t in took.items():
        print(f"  {name:<22} p50 {statistics.median(t) * 1000:6.1f} ms  mean {statistics.fmean(t) * 1000:6.1f} ms")


if __name__ == "__main__":
    main()
