"""Test hooks of the sink runtime (inert unless their variables are set; see ``icesql.settings``).

``ICESQL_TEST_KILL_AT`` = ``point[:batch][,point[:batch]...]`` SIGKILLs the process group
(``ICESQL_TEST_KILL_PGID``, default: this process's) at ``write`` (on an executor, after the first
batch of rows reached the writer), ``staged`` (after staging, before the policy runs) or
``committed`` (after a commit made by the batch, before ``foreachBatch`` returns) or
``dead-letters`` (after the dead-letter table's commit, before the target's).
``ICESQL_TEST_BATCH_DELAY`` (seconds) slows every batch down.
"""

from __future__ import annotations

import os
import signal
import time

from icesql import settings

KILL_ENV = settings.TEST_KILL_AT.name


def kill_point(point: str, batch_id: int | None = None) -> None:
    """SIGKILL this process group when ``ICESQL_TEST_KILL_AT`` names ``point`` (tests only)."""
    spec = settings.TEST_KILL_AT.get()
    if not spec:
        return
    for item in spec.split(","):
        name, _, when = item.strip().partition(":")
        if name != point:
            continue
        if when and (batch_id is None or when != str(batch_id)):
            continue
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


__all__ = ["KILL_ENV", "batch_delay", "kill_point"]
