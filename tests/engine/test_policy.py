"""The period timer commits when MAXIMUM PERIOD is over, not at the next tick after it."""

from __future__ import annotations

import threading
import time

from icesql.engine.policy import CommitClock, PeriodTimer
from icesql.plan import CommitPolicy


def test_the_timer_commits_when_the_period_is_over_not_at_its_next_tick() -> None:
    # a tick far longer than the period: the timer that slept a whole tick between its checks
    # committed 2 s after the last commit, for a period of 0.3 s
    clock = CommitClock(CommitPolicy(maximum_period=0.3))
    stop = threading.Event()
    commits: list[float] = []

    def commit_if_due() -> None:
        if clock.period_due():
            commits.append(clock.since_commit())
            clock.committed()
        if len(commits) == 3:
            stop.set()

    timer = PeriodTimer("t", clock, stop, commit_if_due, on_error=lambda e: stop.set(), tick=2.0).start()
    timer.join(10)
    assert len(commits) == 3
    # each commit came with its period over, well before a tick of 2 s (a loaded machine wakes
    # a thread late by some tenths of a second at worst)
    assert all(0.3 <= since < 1.0 for since in commits), commits


def test_a_commit_by_a_batch_moves_the_timers_next_wake() -> None:
    # the timer sleeps until the period of the last commit is over, also when a batch committed
    # while it slept: no commit by the timer until a period after the batch's
    clock = CommitClock(CommitPolicy(maximum_period=0.5))
    stop = threading.Event()
    commits: list[float] = []

    def commit_if_due() -> None:
        if clock.period_due():
            commits.append(time.monotonic())
            clock.committed()
            stop.set()

    started = time.monotonic()
    timer = PeriodTimer("t", clock, stop, commit_if_due, on_error=lambda e: stop.set(), tick=2.0).start()
    time.sleep(0.3)
    clock.committed()  # a batch committed 0.3 s in: the period now ends at 0.8 s
    batch_commit = time.monotonic()
    timer.join(10)
    assert commits and commits[0] - batch_commit >= 0.5
    assert commits[0] - started < 1.8  # not a whole tick of 2 s after the period
