"""An icesql home's sinks run in a child process, for CDC crash tests.

``python -m tests.support.cdc_runner --home H --sink NAME`` opens ``icesql.Session(home=H)`` (the
public library path: the sink's definition comes from the home's catalog store) and runs the
sink once (``run(once=True)``): what is available is processed and committed, then it exits.

Kill points (the test sets them in the environment; the whole process group, JVM and Python
workers included, is SIGKILLed, like a machine crash):

* ``ICESQL_TEST_KILL_AT`` — the pipeline's points (``write``, ``staged``, ``committed``, with an
  optional ``:batch_id``);
* ``ICESQL_TEST_KILL_COMMIT`` = ``before:N`` / ``after:N`` — inside the N-th catalog commit of the
  process (see ``tests/support/crash_runner.py``).

``run_child`` starts it from a test in a new process group and returns ``(returncode, log)``;
``kill_everywhere`` is the crash loop of the Kafka changelog tests: a child killed at each of
``KILLS`` in turn, changes arriving between the kills, then a clean run.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.support.crash import reap_group

ROOT = Path(__file__).resolve().parents[2]
STARTED = "cdc_runner: started"
DONE = "cdc_runner: done"
LOCAL = "runs in this process, without starting Spark"  # the engine's line for a run without Spark

# a child killed while writing, with a batch staged, inside the catalog commit before and after the
# pointer swap, and after a commit (batch 1 is killed twice: the run after a kill replays it)
KILLS: tuple[dict[str, str], ...] = (
    {"ICESQL_TEST_KILL_AT": "write:1"},
    {"ICESQL_TEST_KILL_AT": "staged:1"},
    {"ICESQL_TEST_KILL_COMMIT": "before:1"},
    {"ICESQL_TEST_KILL_COMMIT": "after:1"},
    {"ICESQL_TEST_KILL_AT": "committed"},
)


def run_child(
    home: Path, sink: str, log_path: Path, env_extra: dict[str, str] | None = None, *, timeout: float = 400
) -> tuple[int, str]:
    """Run ``sink`` of ``home`` once in a child process group; ``(returncode, this run's log)``."""
    env = dict(os.environ)
    for k in ("ICESQL_TEST_KILL_AT", "ICESQL_TEST_KILL_COMMIT", "ICESQL_TEST_BATCH_DELAY", "ICESQL_CDC_CHILD_SPARK"):
        env.pop(k, None)
    env.update(env_extra or {})
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    with open(log_path, "ab") as log:
        log.write(f"\n==== cdc_runner {env_extra or {}}\n".encode())
        log.flush()
        start = log.tell()
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.cdc_runner", "--home", str(home), "--sink", sink],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        rc = reap_group(proc, timeout)
    with open(log_path, "rb") as fh:
        fh.seek(start)
        return rc, fh.read().decode(errors="replace")


# a routed sink (issue 53) also dies with one table's batch staged and the next not, and between
# two tables' commits
ROUTED_KILLS: tuple[dict[str, str], ...] = (
    *KILLS,
    {"ICESQL_TEST_KILL_AT": "table-staged"},
    {"ICESQL_TEST_KILL_AT": "between-tables"},
)


def kill_everywhere(
    home: Path,
    sink: str,
    log_path: Path,
    *,
    spark: bool,
    between: Callable[[], None],
    kills: tuple[dict[str, str], ...] = KILLS,
) -> int:
    """Run ``sink`` in a child killed at each of ``KILLS`` (``between()`` after each kill: the
    changes that arrive meanwhile), then once to the end; returns the kills. Each kill must be the
    SIGKILL its point sends (not any other failure), and every run must take the executor asked
    for (``spark``: the child is given a Spark session; else it runs without Spark)."""
    env = {"ICESQL_CDC_CHILD_SPARK": "1" if spark else "0"}

    def took_its_path(out: str) -> bool:
        return STARTED in out and (LOCAL in out) != spark

    for kill in kills:
        rc, out = run_child(home, sink, log_path, {**env, **kill})
        assert rc == -signal.SIGKILL, f"expected a kill for {kill}, got rc={rc}\n{out[-3000:]}"
        assert took_its_path(out), f"the child took the other executor\n{out[-3000:]}"
        between()
    rc, out = run_child(home, sink, log_path, env)
    assert rc == 0 and DONE in out, out[-3000:]
    assert took_its_path(out), f"the child took the other executor\n{out[-3000:]}"
    return len(kills)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--sink", required=True)
    args = ap.parse_args(argv)

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", force=True
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    os.environ["ICESQL_TEST_KILL_PGID"] = str(os.getpgrp())  # inherited by the JVM and Python workers
    if os.environ.get("ICESQL_TEST_KILL_COMMIT"):
        from tests.support.crash_runner import _patch_commit

        _patch_commit(os.environ["ICESQL_TEST_KILL_COMMIT"])

    import icesql
    from tests.support.pipeline_helpers import spark_for_tests

    # ICESQL_CDC_CHILD_SPARK=0: no Spark session given, so the run goes without Spark (engine.local_query)
    spark = spark_for_tests() if os.environ.get("ICESQL_CDC_CHILD_SPARK", "1") != "0" else None
    with icesql.Session(home=args.home, spark=spark) as session:
        print(STARTED, flush=True)
        session.run(once=True, sinks=[args.sink])
    print(DONE, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
