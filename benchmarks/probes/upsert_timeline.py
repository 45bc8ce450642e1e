"""Probe: where a running upsert sink's batch goes, batch by batch, on Spark and without it (issue 39).

Sets up the upsert benchmark's table (``datagen.generate_upsert``: ``--keys`` keys loaded by an
APPEND sink, then Debezium batches of ``--batch-size`` changes: 70 % updates, 20 % inserts, 10 %
deletes), leaves the ``MODE UPSERT`` sink running (``Session.start``, the default 1 s trigger, a
commit per batch, its maintenance beside it) and drops the batches into its inbox one at a time,
each after the last one's commit. Each path runs in a fresh child process of this script:

* ``on Spark`` (before): ``ICESQL_LOCAL_RUN=0``, Spark's streaming query, its jobs and Python workers;
* ``without Spark`` (after): the default, the same query in the process (``engine.local_query``).

Per batch it prints the timeline from the runner's marks (``ICESQL_TEST_TIMELINE``, ``hooks.mark``):
arrival -> the batch starts (the wait for the trigger) -> changes decoded (without Spark: the
decode is a step of its own; on Spark it runs inside the jobs) -> written (data, position
deletes and the key index's shards) -> staged -> committed; on Spark the jobs and stages the batch
ran (``StatusTracker``, by the query's job group); and the process tree after the batch (RSS of the
driver, the JVM and the Python workers, ``procmon.sample_tree``; the number of Python worker
processes). The first batch pays the index load; the median is over the others.

Usage: ``.venv/bin/python benchmarks/probes/upsert_timeline.py [--keys 1000000] [--batches 6]
[--batch-size 100000] [--merge N] [--paths spark,local] [--keep DIR]`` (``--keys 10000000 --paths local``:
the scaling check, time per batch and memory against the table's size; ``--batches 10 --merge 5``:
batches of 500k changes on both paths, whether Spark's distributed path wins on large batches)
"""

from __future__ import annotations

import sys

if sys.path and sys.path[0] == __import__("os").path.dirname(__import__("os").path.abspath(__file__)):
    sys.path.pop(0)  # probes/select.py would hide the standard library's ``select``

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PATHS = {"on Spark (before)": {"ICESQL_LOCAL_RUN": "0"}, "without Spark (after)": {}}
STEPS = ("trigger wait", "decode", "write", "stage", "commit", "batch total")


def child(args: argparse.Namespace) -> None:
    """One path: set up, run the sink, drop the batches in, print one JSON line of results."""
    sys.path.insert(0, str(ROOT))
    import icesql
    from benchmarks import datagen
    from benchmarks.procmon import sample_tree

    work = Path(args.work)
    u = datagen.generate_upsert(Path(args.data), args.keys, args.batches, args.batch_size)
    files = _merged(u.debezium_files, args.merge, work / "merged")
    timeline = work / "timeline.txt"
    os.environ["ICESQL_TEST_TIMELINE"] = str(timeline)
    home, inbox, wh = work / "home", work / "inbox", work / "warehouse"
    inbox.mkdir(parents=True)
    target = "INTO ICEBERG CATALOG cat (NAMESPACE = 'bench', TABLE = 'u')"
    s = icesql.Session(home=home)
    s.execute(f"CREATE CONNECTION cat TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}')")
    s.execute(f"CREATE SOURCE ch FROM FILES '{inbox}' (FORMAT = 'debezium-json', SCHEMA = '{datagen.SPARK_DDL}')")
    s.execute(f"CREATE SINK u FROM ch {target} KEY (id) MODE UPSERT")
    s.run(once=True, sinks=["u"])
    s.execute(f"CREATE SOURCE base FROM FILES '{u.base.path}' (FORMAT = 'parquet', SCHEMA = '{datagen.SPARK_DDL}')")
    s.execute(f"CREATE SINK load FROM base {target} MODE APPEND")
    s.run(once=True, sinks=["load"])
    s.start(["u"])
    runner = s.engine.runner("u")
    while runner.active and not runner.query.recentProgress:
        time.sleep(0.05)
    spark = s.engine._spark
    tracker = spark.sparkContext.statusTracker() if spark is not None else None
    group = str(runner.query.runId) if spark is not None else None
    seen_jobs: set[int] = set()
    batches = []
    for f in files:
        commits = runner.totals["commits"]
        tmp = inbox / ("." + Path(f).name)
        shutil.copyfile(f, tmp)
        timeline.write_text("")
        arrived = time.time()
        os.replace(tmp, inbox / Path(f).name)
        while runner.totals["commits"] == commits:
            if not runner.active:
                raise SystemExit(f"the sink stopped: {runner.status_row().get('last_error')}")
            time.sleep(0.005)
        done = time.time()
        marks = [ln.split(" ", 1) for ln in timeline.read_text().splitlines() if ln.strip()]
        at = {step: float(t) for t, step in reversed(marks)}  # the first mark of each step
        started = next((float(t) for t, m in marks if m.endswith(" started")), arrived)
        decoded = at.get("changes decoded")
        written = next((float(t) for t, m in marks if m.endswith(" written")), done)
        staged = next((float(t) for t, m in marks if m.endswith(" staged")), written)
        jobs = stages = 0
        if tracker is not None:
            ids = set(tracker.getJobIdsForGroup(group)) - seen_jobs
            seen_jobs |= ids
            jobs = len(ids)
            stages = sum(len(info.stageIds) for info in map(tracker.getJobInfo, ids) if info is not None)
        rss, _ = sample_tree(os.getpid())
        workers = _python_workers(os.getpid())
        batches.append(
            {
                "trigger wait": started - arrived,
                "decode": (decoded - started) if decoded else None,
                "write": written - (decoded or started),
                "stage": staged - written,
                "commit": done - staged,
                "batch total": done - arrived,
                "spark_jobs": jobs,
                "spark_stages": stages,
                "rss_mb": {k: round(v / 2**20) for k, v in rss.items()},
                "python_workers": workers,
            }
        )
    s.stop()
    s.close()
    print("RESULT " + json.dumps({"batches": batches, "spark": spark is not None}), flush=True)


def _merged(files: list[str], n: int, into: Path) -> list[str]:
    """Every ``n`` consecutive batch files as one (``--merge``: larger batches from the same data;
    a key changes at most once per generated batch, and each batch's events are later by their
    ``ts_ms`` than the one's before, so the merged batch keeps each key's last change)."""
    if n <= 1:
        return list(files)
    into.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(0, len(files), n):
        path = into / f"merged-{i // n:03d}.json"
        with open(path, "wb") as dst:
            for f in files[i : i + n]:
                with open(f, "rb") as src:
                    shutil.copyfileobj(src, dst)
        out.append(str(path))
    return out


def _python_workers(root: int) -> int:
    from benchmarks.procmon import _children_map, _rss_and_exe

    kids, n, stack = _children_map(), 0, [root]
    while stack:
        pid = stack.pop()
        for c in kids.get(pid, ()):
            if _rss_and_exe(c)[1].startswith("python"):
                n += 1
            stack.append(c)
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=100_000)
    ap.add_argument("--merge", type=int, default=1,
                    help="batches of N generated batches each (larger batches from the same data; default 1)")
    ap.add_argument("--keep", default=None, help="a directory for the data (kept between runs)")
    ap.add_argument("--paths", default="spark,local", help="spark,local (default both) or one of them")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--work", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--data", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    keep = Path(args.keep or tempfile.mkdtemp(prefix="icesql-upsert-timeline-"))
    data = keep / f"data-{args.keys}-{args.batches}x{args.batch_size}"
    print(f"load average {os.getloadavg()[0]:.2f}; {args.keys:,} keys, {args.batches} x {args.batch_size:,} changes"
          + (f", applied {args.merge} batches at a time" if args.merge > 1 else ""))
    results: dict[str, Any] = {}
    wanted = {p.strip() for p in args.paths.split(",")}
    for name, env in PATHS.items():
        if ("spark" if env else "local") not in wanted:
            continue
        work = keep / ("work-" + ("spark" if env else "local"))
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        cmd = [sys.executable, __file__, "--child", name, "--work", str(work), "--data", str(data),
               "--keys", str(args.keys), "--batches", str(args.batches), "--batch-size", str(args.batch_size),
               "--merge", str(args.merge)]
        out = subprocess.run(cmd, env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True)
        line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            print(f"{name}: failed\n{out.stderr[-3000:]}")
            continue
        results[name] = json.loads(line[len("RESULT "):])
    for name, r in results.items():
        print(f"\n{name}: per batch, seconds (the first batch loads the key index)")
        print("| batch | " + " | ".join(STEPS) + " | Spark jobs / stages | Python workers | RSS MB (driver / JVM / workers) |")
        print("|---" * (len(STEPS) + 4) + "|")
        for i, b in enumerate(r["batches"]):
            cells = ["-" if b[k] is None else f"{b[k]:.2f}" for k in STEPS]
            rss = b["rss_mb"]
            print(f"| {i} | " + " | ".join(cells) + f" | {b['spark_jobs']} / {b['spark_stages']} | {b['python_workers']} | "
                  f"{rss['driver_python']} / {rss['jvm']} / {rss['python_workers']} |")
        rest = r["batches"][1:] or r["batches"]
        med = {k: statistics.median(b[k] for b in rest if b[k] is not None) if any(b[k] is not None for b in rest)
               else None for k in STEPS}
        print("| median 1.. | " + " | ".join("-" if v is None else f"{v:.2f}" for v in med.values()) + " | | | |")
    print(f"\nload average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
