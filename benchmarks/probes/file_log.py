"""Probe: does a FILES source's cost per trigger stay flat after it has seen a million files?

What a trigger of the Arrow path's source does with its file log (``icesql.engine.sources.files.log``),
timed with logs that already hold 1,000 / 100,000 / 1,000,000 files:

* ``unseen``: which of the listed files are new (the listing = the new files only, as in a
  directory kept small by CLEAN SOURCE, plus ``--old`` files still lying there);
* ``append`` + ``compact``: admit the new files (one segment) and merge small segments;
* ``entries``: the batch's files, read back to plan its pieces;
* ``clean mark``: read and write the CLEAN SOURCE mark.

The directory listing itself is not in it: it is the filesystem's (and CLEAN SOURCE keeps the
directory to its backlog). No Spark: the log's work only, in one process.

Usage: ``.venv/bin/python benchmarks/probes/file_log.py [--sizes 1000,100000,1000000]
[--per-trigger 100] [--triggers 200] [--old 0] [--merge-all]``. Prints the median and p99 milliseconds per
trigger for each size, and the time to build each log.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from icesql.engine.connections.stores.location import Listed
from icesql.engine.sources.files.log import FileLog

CHUNK = 10_000  # files per segment while the log is built (as big batches of a backlog would be)


def build(directory: Path, size: int) -> tuple[FileLog, float]:
    t0 = time.perf_counter()
    flog = FileLog(str(directory))
    for first in range(0, size, CHUNK):
        n = min(CHUNK, size - first)
        flog.append([Listed(f"/landing/old-{first + i:09d}.json", 1000, first + i) for i in range(n)])
    return flog, time.perf_counter() - t0


def trigger(flog: FileLog, k: int, per_trigger: int, old: list[Listed], mtime: int) -> dict[str, float]:
    new = [Listed(f"/landing/new-{k:06d}-{i:04d}.json", 1000, mtime + i) for i in range(per_trigger)]
    out: dict[str, float] = {}
    t = time.perf_counter()
    fresh = flog.unseen(old + new)
    out["unseen"] = time.perf_counter() - t
    assert len(fresh) == per_trigger
    t = time.perf_counter()
    flog.append(fresh)
    flog.compact()
    out["append+compact"] = time.perf_counter() - t
    high = flog.high()
    t = time.perf_counter()
    got = flog.entries(high - per_trigger, high)
    out["entries"] = time.perf_counter() - t
    assert len(got) == per_trigger
    t = time.perf_counter()
    flog.write_cleaned(max(flog.cleaned_through(), high - per_trigger))
    out["clean mark"] = time.perf_counter() - t
    out["total"] = sum(out.values())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,100000,1000000")
    ap.add_argument("--per-trigger", type=int, default=100)
    ap.add_argument("--triggers", type=int, default=200)
    ap.add_argument("--old", type=int, default=0, help="consumed files still in the listing")
    ap.add_argument(
        "--merge-all", action="store_true", help="the compaction before 25 Nov 2026: every segment merged"
    )
    args = ap.parse_args()
    if args.merge_all:
        import icesql.engine.sources.files.log as file_log

        file_log.SMALL_SEGMENT = 10**12  # every segment counts as small: the whole log is merged
    print(
        f"files per trigger {args.per_trigger}, {args.triggers} triggers per size, "
        f"{args.old} consumed files still listed; milliseconds per trigger: median / p99"
    )
    print("| files seen | build s | unseen | append+compact | entries | clean mark | total |")
    print("|---|---|---|---|---|---|---|")
    for size in (int(x) for x in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            flog, built = build(Path(tmp) / "log", size)
            old = [Listed(f"/landing/old-{i:09d}.json", 1000, i) for i in range(min(args.old, size))]
            rows = [trigger(flog, k, args.per_trigger, old, size + k * args.per_trigger) for k in range(args.triggers)]
            flog.close()
        cells = []
        for key in ("unseen", "append+compact", "entries", "clean mark", "total"):
            ms = sorted(r[key] * 1000 for r in rows)
            cells.append(f"{statistics.median(ms):.2f} / {ms[int(len(ms) * 0.99) - 1]:.2f}")
        print(f"| {size:,} | {built:.1f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
