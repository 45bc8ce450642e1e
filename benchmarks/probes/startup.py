"""Probe: what a scheduled ``icesql run --once`` costs, step by step (issue 40).

Sets up a FILES sink as in the quick start (JSON lines, a local catalog, ``PARTITION BY
(day(ts), region)``), brings it up to date with one run, then times fresh ``icesql run --once``
processes (the installed ``icesql`` script beside this interpreter; wall clock from the parent)
in five cells, ``--runs`` times each, taking turns:

* ``nothing new``: no file since the last run - with the check without Spark (today) and with
  ``ICESQL_PRECHECK=0 ICESQL_LOCAL_RUN=0`` (Spark started to find out, as before);
* ``one small new file`` (40 rows, ~5 KB) - run without Spark (``local_query``, today's
  default), on Spark with the driver JVM's class archive (``jvm_archive``, made by the set-up
  runs) and on Spark with ``ICESQL_JVM_ARCHIVE=0`` (as before).

Each run writes its steps to ``ICESQL_TEST_TIMELINE`` (``hooks.mark``); the median time of
each step from the process start is printed per cell. Goals (issue 40): nothing new <= 2 s on a
quiet machine; one small new file <= 0.4x of what it took before (on Spark without the archive
being what there was). Prints the load average before and after.

Usage: ``.venv/bin/python benchmarks/probes/startup.py [--runs 3] [--keep DIR]``
"""

from __future__ import annotations

import sys

# run as a script, this file's directory comes first on sys.path, where probes/select.py hides
# the standard library's ``select`` (which subprocess imports)
if sys.path and sys.path[0] == __import__("os").path.dirname(__import__("os").path.abspath(__file__)):
    sys.path.pop(0)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ICESQL = str(Path(sys.executable).with_name("icesql"))
NOTHING_GOAL = 2.0
SMALL_RATIO_GOAL = 0.4

SCRIPT = """\
CREATE CONNECTION IF NOT EXISTS lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = './warehouse');
CREATE SOURCE IF NOT EXISTS events FROM FILES 'data/' (FORMAT = 'json',
   SCHEMA = 'id BIGINT, ts TIMESTAMP, user_id INT, region STRING, amount DOUBLE, kind STRING');
CREATE SINK IF NOT EXISTS events_sink FROM events
INTO ICEBERG CATALOG lake (NAMESPACE = 'analytics', TABLE = 'events') PARTITION BY (day(ts), region);
"""

ON_SPARK = {"ICESQL_LOCAL_RUN": "0"}
CELLS = {
    "nothing new, checked without Spark": ({}, False),
    "nothing new, ICESQL_PRECHECK=0 (before)": (
        {**ON_SPARK, "ICESQL_PRECHECK": "0", "ICESQL_JVM_ARCHIVE": "0"},
        False,
    ),
    "one small new file, without Spark": ({}, True),
    "one small new file, on Spark with the class archive": (ON_SPARK, True),
    "one small new file, on Spark, ICESQL_JVM_ARCHIVE=0 (before)": ({**ON_SPARK, "ICESQL_JVM_ARCHIVE": "0"}, True),
}


def events(n: int, start: int) -> str:
    lines = []
    for i in range(start, start + n):
        row = {
            "id": i,
            "ts": f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:00:00Z",
            "user_id": i % 97,
            "region": ("eu", "us", "ap")[i % 3],
            "amount": round(i * 0.37, 2),
            "kind": "click",
        }
        lines.append(json.dumps(row))
    return "\n".join(lines) + "\n"


def run_once(work: Path, env: dict[str, str], timeline: Path) -> tuple[float, list[tuple[float, str]], str]:
    timeline.unlink(missing_ok=True)
    started = time.time()
    p = subprocess.run(
        [ICESQL, "--home", str(work / "home"), "run", str(work / "pipeline.sql"), "--once"],
        capture_output=True,
        text=True,
        env={**env, "ICESQL_TEST_TIMELINE": str(timeline)},
        cwd=work,
    )
    wall = time.time() - started
    if p.returncode != 0:
        raise SystemExit(f"icesql run failed ({p.returncode}):\n{p.stderr[-3000:]}")
    steps = []
    if timeline.exists():
        for line in timeline.read_text().splitlines():
            t, step = line.split(" ", 1)
            steps.append((float(t) - started, re.sub(r"batch \d+", "batch N", step)))
    return wall, steps, p.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="work here (kept) instead of a temporary directory")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="icesql-startup-"))
    if work.exists():
        shutil.rmtree(work)
    (work / "data").mkdir(parents=True)
    (work / "pipeline.sql").write_text(SCRIPT)
    (work / "data" / "events-000.json").write_text(events(120, 0))
    env = dict(os.environ, XDG_CACHE_HOME=str(work / "cache"))  # the class archive made here
    timeline = work / "timeline.txt"
    load_before = os.getloadavg()

    # set-up, on Spark: the first run (its JVM dumps the class archive as it exits), then one that
    # checks and adopts it (once the dumping JVM has exited)
    run_once(work, {**env, **ON_SPARK}, timeline)
    from icesql.engine.backends.spark.jvm_archive import wait_for_dumps

    wait_for_dumps(str(work / "cache" / "icesql"))
    (work / "data" / "events-001.json").write_text(events(40, 120))
    run_once(work, {**env, **ON_SPARK}, timeline)
    archives = list((work / "cache" / "icesql").glob("spark-cds-*.jsa"))
    print(f"class archive: {archives[0].name if archives else 'NONE (the cells with it run without)'}")

    results: dict[str, list[tuple[float, list[tuple[float, str]]]]] = {c: [] for c in CELLS}
    n = 200
    for _ in range(args.runs):
        for cell, (extra, new_file) in CELLS.items():
            if new_file:
                (work / "data" / f"events-{n:03d}.json").write_text(events(40, n * 1000))
                n += 1
            wall, steps, err = run_once(work, {**env, **extra}, timeline)
            if new_file != ("commit sink=" in err):
                raise SystemExit(f"{cell}: expected {'a' if new_file else 'no'} commit:\n{err[-2000:]}")
            results[cell].append((wall, steps))
    load_after = os.getloadavg()

    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; {args.runs} runs per cell")
    medians = {}
    for cell, runs in results.items():
        walls = [w for w, _ in runs]
        medians[cell] = statistics.median(walls)
        print(f"\n{cell}: median {medians[cell]:.2f} s (runs: {', '.join(f'{w:.2f}' for w in walls)})")
        names = [s for _, s in runs[0][1]]
        for name in names:
            ts = [t for _, steps in runs for t, s in steps if s == name]
            if len(ts) == len(runs):
                print(f"    {statistics.median(ts):7.2f} s  {name}")
    nothing = medians["nothing new, checked without Spark"]
    small = medians["one small new file, without Spark"]
    archive = medians["one small new file, on Spark with the class archive"]
    before = medians["one small new file, on Spark, ICESQL_JVM_ARCHIVE=0 (before)"]
    print(
        f"\nnothing new: {nothing:.2f} s (goal <= {NOTHING_GOAL} s: {'met' if nothing <= NOTHING_GOAL else 'missed'}); "
        f"before: {medians['nothing new, ICESQL_PRECHECK=0 (before)']:.2f} s"
    )
    print(
        f"one small new file: {small:.2f} s against {before:.2f} s = {small / before:.2f}x "
        f"(goal <= {SMALL_RATIO_GOAL}x: {'met' if small / before <= SMALL_RATIO_GOAL else 'missed'}); "
        f"on Spark with the class archive {archive:.2f} s = {archive / before:.2f}x"
    )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
