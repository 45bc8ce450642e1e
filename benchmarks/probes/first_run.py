"""Probe: the first Spark run on a machine against the second (issue 54 item 2).

Runs ``icesql --home <fresh> run append.sql --once`` (the e2e section's script: a FILES source
of Parquet files with the benchmark schema into a new table) on Spark (``ICESQL_LOCAL_RUN=0``)
``--runs`` times in fresh processes, one after the other, all with one icesql cache directory
that is empty before the first (``XDG_CACHE_HOME`` pointed at a new directory: the driver JVM's
class archive, the grammar cache and the workers' launcher are made there; nothing system-wide
is dropped, so the page cache keeps whatever other processes read). The output goes to pipes, as
a scheduler that keeps a job's output has it. Per run it prints three times from the start:

* ``exit``: the icesql process has exited (what a shell waits for);
* ``output closed``: the last holder of its stdout/stderr closed them (what a caller reading the
  output waits for: ``subprocess.run(capture_output=True)``, a CI step, cron mailing the output);
* ``tree gone``: no process of its session is left (the driver JVM and its Python workers),

and the steps of ``ICESQL_TEST_TIMELINE``. Goal: the first run within 1.2x of the second.

Usage: ``.venv/bin/python benchmarks/probes/first_run.py --data /tmp/icesql-bench/data/append-4000000 [--runs 2]``
"""

from __future__ import annotations

import sys

# run as a script, this file's directory comes first on sys.path, where probes/select.py hides
# the standard library's ``select`` (which subprocess imports)
if sys.path and sys.path[0] == __import__("os").path.dirname(__import__("os").path.abspath(__file__)):
    sys.path.pop(0)

import argparse  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
GOAL = 1.2


def _session_alive(sid: int) -> bool:
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", encoding="utf-8") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:  # state, ppid, pgrp, session
            return True
    return False


def run_once(work: Path, n: int, data: str, env: dict[str, str]) -> dict[str, object]:
    from benchmarks.baselines import _conf_args, e2e_append_script

    run = work / f"run-{n}"
    wh = run / "warehouse"
    wh.mkdir(parents=True)
    script = e2e_append_script(run / "append.sql", data, "parquet", wh, False)
    timeline = run / "timeline.txt"
    cmd = [sys.executable, "-m", "icesql", "--home", str(run / "home"), "run", str(script), "--once",
           *_conf_args(None)]
    started = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         env={**env, "ICESQL_TEST_TIMELINE": str(timeline)}, cwd=run, start_new_session=True)
    exited: list[float] = []
    threading.Thread(target=lambda: (p.wait(), exited.append(time.time() - started)), daemon=True).start()
    out, err = p.communicate()
    closed = time.time() - started
    while _session_alive(p.pid):
        time.sleep(0.05)
    gone = time.time() - started
    while not exited:
        time.sleep(0.01)
    if p.returncode != 0:
        raise SystemExit(f"run {n} failed ({p.returncode}):\n{err.decode(errors='replace')[-3000:]}")
    steps = []
    if timeline.exists():
        for line in timeline.read_text().splitlines():
            t, step = line.split(" ", 1)
            steps.append((float(t) - started, step))
    (run / "stderr.txt").write_bytes(err)
    return {"exit": exited[0], "closed": closed, "gone": gone, "steps": steps}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="a directory of the benchmark's Parquet files")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--keep", type=Path, help="work here (kept) instead of a temporary directory")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for every run")
    ap.add_argument("--pause", type=float, default=0.0,
                    help="seconds between two runs (a machine left quiet: the archive maker's time)")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="icesql-first-run-"))
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    cache = work / "cache"  # empty: the first run finds nothing of icesql's there
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), ICESQL_LOCAL_RUN="0", PYTHONPATH=str(ROOT))
    env.pop("ICESQL_HOME", None)
    env.update(kv.split("=", 1) for kv in args.env)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results = []
    for n in range(1, args.runs + 1):
        if n > 1 and args.pause:
            time.sleep(args.pause)
        r = run_once(work, n, args.data, env)
        results.append(r)
        print(f"\nrun {n}: exit {r['exit']:.2f} s, output closed {r['closed']:.2f} s, tree gone {r['gone']:.2f} s"
              f"; cache: {sorted(p.name for p in (cache / 'icesql').iterdir()) if (cache / 'icesql').exists() else []}")
        for t, step in r["steps"]:  # type: ignore[union-attr]
            print(f"    {t:7.2f} s  {step}")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if len(results) >= 2:
        first, second = results[0], results[1]
        for what in ("exit", "closed", "gone"):
            ratio = float(first[what]) / float(second[what])  # type: ignore[arg-type]
            verdict = "met" if ratio <= GOAL else "missed"
            print(f"first / second, {what}: {first[what]:.2f} / {second[what]:.2f} s = {ratio:.2f}x "
                  f"(goal <= {GOAL}x: {verdict})")
        last = results[-1]
        print(f"first / last, exit: {first['exit']:.2f} / {last['exit']:.2f} s = "
              f"{float(first['exit']) / float(last['exit']):.2f}x")  # type: ignore[arg-type]
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
