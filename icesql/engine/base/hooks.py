"""Test hooks of the sink runtime (inert unless their variables are set; see ``icesql.settings``).

``ICESQL_TEST_KILL_AT`` = ``point[:batch][,point[:batch]...]`` SIGKILLs the process group
(``ICESQL_TEST_KILL_PGID``, default: this process's) at ``batch`` (a new batch, before it is
written), ``write`` (on an executor, after the first batch of rows reached the writer),
``staged`` (after staging, before the policy runs), ``committed`` (after a commit made by the
batch, before ``foreachBatch`` returns) or ``dead-letters`` (after the dead-letter table's
commit, before the target's).
``ICESQL_TEST_BATCH_DELAY`` (seconds) slows every batch down.
``ICESQL_TEST_TIMELINE`` = a file: each ``mark(step)`` appends ``<epoch seconds> <step>`` to it
(benchmarks/probes/startup.py reads where a run's time goes).

``ICESQL_TEST_FAIL_AT`` = ``point[:batch][,...]`` makes a batch fail instead, at the driver's
points (``batch``, ``staged``, ``committed``, ``dead-letters``), with an error that says
``ICESQL_TEST_FAIL_WITH`` (by default Spark's "Python worker failed to connect back.", which
icesql takes for a transient failure), ``ICESQL_TEST_FAIL_TIMES`` times in this process (unset:
every time): a failure that a retry gets past, or one that stays.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from icesql import settings

KILL_ENV = settings.TEST_KILL_AT.name


class TestFailure(RuntimeError):
    """The failure ``ICESQL_TEST_FAIL_AT`` asks for."""


def mark(step: str) -> None:
    """Append ``step`` and the time to ``ICESQL_TEST_TIMELINE`` (nothing when unset)."""
    path = settings.TEST_TIMELINE.get()
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{time.time():.3f} {step}\n")


_failures = 0  # raised by fail_point in this process
_failures_lock = threading.Lock()


def _names(spec: str | None, point: str, batch_id: int | None) -> bool:
    """Whether ``spec`` (``point[:batch],...``) names ``point`` (of batch ``batch_id``)."""
    for item in (spec or "").split(","):
        name, _, when = item.strip().partition(":")
        if name == point and (not when or (batch_id is not None and when == str(batch_id))):
            return True
    return False


def fail_point(point: str, batch_id: int | None = None) -> None:
    """Raise ``TestFailure`` when ``ICESQL_TEST_FAIL_AT`` names ``point`` (tests only)."""
    global _failures
    if not _names(settings.TEST_FAIL_AT.get(), point, batch_id):
        return
    times = settings.TEST_FAIL_TIMES.get_int()
    with _failures_lock:
        if times is not None and _failures >= times:
            return
        _failures += 1
    raise TestFailure(settings.TEST_FAIL_WITH.get() or "test failure")


def reset_failures() -> None:
    """Count ``ICESQL_TEST_FAIL_TIMES`` from zero again (tests running in one process)."""
    global _failures
    with _failures_lock:
        _failures = 0


def kill_point(point: str, batch_id: int | None = None) -> None:
    """SIGKILL this process group when ``ICESQL_TEST_KILL_AT`` names ``point``, or fail the batch
    when ``ICESQL_TEST_FAIL_AT`` does (``fail_point``; tests only)."""
    fail_point(point, batch_id)
    if not _names(settings.TEST_KILL_AT.get(), point, batch_id):
        return
    # PySpark's workers run in process groups of their own: the test names the group to kill
    # (the driver's, holding the JVM) in ICESQL_TEST_KILL_PGID.
    pgid = settings.TEST_KILL_PGID.get_int() or os.getpgrp()
    try:
        os.killpg(pgid, signal.SIGKILL)
    finally:  # pragma: no cover - not reached
        os.kill(os.getpid(), signal.SIGKILL)


def batch_delay() -> None:
    """Sleep ``ICESQL_TEST_BATCH_DELAY`` seconds (tests only)."""
    delay = settings.TEST_BATCH_DELAY.get_float()
    if delay:
        time.sleep(delay)


__all__ = ["KILL_ENV", "TestFailure", "batch_delay", "fail_point", "kill_point", "reset_failures"]
