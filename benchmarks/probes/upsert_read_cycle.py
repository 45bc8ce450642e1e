"""Probe: how an upsert table reads at every point of its maintenance cycle, not only at the end.

The upsert section reads the table its writers leave after the 10th batch. With MAXIMUM DELETE
FILES = 4 the 10th batch is the 5th since the last rewrite, so the table is read at the worst point
of its cycle (5 delete files, a rewrite due and handed to the next run); another batch count, or
another threshold, lands elsewhere in the cycle. This applies the section's change batches with
one ``Session.run(once=True)`` per batch (the upsert section's ``icesql`` writer, in this process)
and after every batch reads the table and the same rows compacted (a fresh table, one append:
``baselines.reference_table``) with DuckDB and DataFusion (each read a fresh process, the section's
readers). It prints, per batch, the table's data and delete files, the batch's seconds and both
readers' time against the compacted table's; then the worst and the mean ratio over the batches.

    .venv/bin/python benchmarks/probes/upsert_read_cycle.py --data /tmp/bench/data/upsert-1000000-10x100000 \\
        --sink-options 'MAXIMUM DELETE FILES = 2'
"""

from __future__ import annotations

import sys

if sys.path and sys.path[0] == __import__("os").path.dirname(__import__("os").path.abspath(__file__)):
    sys.path.pop(0)  # the probes directory would shadow the standard library's ``select``

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import baselines as B  # noqa: E402
from benchmarks.datagen import SPARK_DDL, UpsertDataset  # noqa: E402
from benchmarks.icesql_hooks import _connect, _metadata, create_upsert_table  # noqa: E402


def _files(metadata: str) -> tuple[int, int]:
    from pyiceberg.table import StaticTable

    t = StaticTable.from_metadata(metadata)
    snap = t.current_snapshot()
    summary = snap.summary if snap is not None else None
    get = (lambda k: int(summary.get(k, 0) or 0)) if summary is not None else (lambda k: 0)
    return get("total-data-files"), get("total-delete-files")


def _state(metadata: str, path: Path) -> str:
    """The table's rows, as one Parquet file (the compacted reference's input)."""
    import pyarrow.parquet as pq
    from pyiceberg.table import StaticTable

    pq.write_table(StaticTable.from_metadata(metadata).scan().to_arrow(), path)
    return str(path)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="an upsert dataset directory (benchmarks/datagen.py)")
    ap.add_argument("--sink-options", default="", help="more WITH options of the upsert sink")
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    import icesql

    u = UpsertDataset.load(a.data)
    work = Path(a.work or tempfile.mkdtemp(prefix="read-cycle-"))
    shutil.rmtree(work, ignore_errors=True)
    home = work / "home"
    home.mkdir(parents=True)
    s = icesql.Session(home=home)
    _connect(s, str(home))
    inbox = home / "inbox"
    inbox.mkdir()
    s.execute(f"CREATE SOURCE ch FROM FILES '{inbox}' (FORMAT = 'debezium-json', SCHEMA = '{SPARK_DDL}')")
    create_upsert_table(s, u.base.path, a.sink_options)
    print(f"sink options: {a.sink_options or '(defaults)'}; work: {work}")
    print("batch | data + delete files | batch s | DuckDB s / compacted | DataFusion s / compacted")
    ratios: dict[str, list[float]] = {"duckdb": [], "datafusion": []}
    total = 0.0
    for i, f in enumerate(u.debezium_files):
        tmp = inbox / f".{Path(f).name}.tmp"
        shutil.copyfile(f, tmp)
        tmp.rename(inbox / Path(f).name)
        t0 = time.perf_counter()
        s.run(once=True, sinks=["u"])
        took = time.perf_counter() - t0
        total += took
        meta = _metadata(s, "u")
        wd = work / f"batch-{i}"
        wd.mkdir()
        ref = B.reference_table(meta, _state(meta, wd / "state.parquet"), wd / "reference")
        cells = []
        for reader, read in (("duckdb", B.read_duckdb), ("datafusion", B.read_datafusion)):
            mine = read(meta, None, wd, f"{reader}-icesql")
            theirs = read(ref["metadata"], None, wd, f"{reader}-compacted")
            r = mine["seconds"] / theirs["seconds"]
            ratios[reader].append(r)
            cells.append(f"{mine['seconds']:.3f} / {theirs['seconds']:.3f} = {r:.2f}x")
        data, deletes = _files(meta)
        print(f"{i + 1} | {data} + {deletes} | {took:.2f} | {cells[0]} | {cells[1]}", flush=True)
    print(f"writes: {total:.2f} s for {len(u.debezium_files)} batches")
    for reader, rs in ratios.items():
        print(f"{reader}: worst {max(rs):.2f}x, mean {statistics.mean(rs):.2f}x, at the last batch {rs[-1]:.2f}x")
    s.close()


if __name__ == "__main__":
    main()
