"""The period timer commits when MAXIMUM PERIOD is over, not at the next tick after it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from icesql.engine.policy import CommitClock, PeriodTimer
from icesql.plan import CommitPolicy

TICK = 2.0  # far longer than the periods below: a timer that slept whole ticks commits 2 s late


def run_timer(
    period: float, calls: int, meanwhile: Callable[[CommitClock], None] = lambda clock: None
) -> tuple[float, list[tuple[float, float]]]:
    """Run a ``PeriodTimer`` until it has called its commit ``calls`` times, ``meanwhile(clock)``
    in this thread. Its commit records every call (when, time since the last commit) and
    commits, due or not: whether a call comes only once the period is over is the timer's to
    say. Returns when the timer started and the calls."""
    clock = CommitClock(CommitPolicy(maximum_period=period))
    stop = threading.Event()
    made: list[tuple[float, float]] = []

    def commit_if_due() -> None:
        made.append((time.monotonic(), clock.since_commit()))
        clock.committed()
        if len(made) == calls:
            stop.set()

    started = time.monotonic()
    timer = PeriodTimer("t", clock, stop, commit_if_due, on_error=lambda e: stop.set(), tick=TICK).start()
    meanwhile(clock)
    timer.join(10)
    stop.set()
    return started, made


def test_the_timer_commits_when_the_period_is_over_not_at_its_next_tick() -> None:
    _, made = run_timer(0.3, calls=3)
    assert len(made) == 3
    # each commit came with its period over, well before a tick of 2 s (a loaded machine wakes
    # a thread late by some tenths of a second at worst)
    assert all(0.3 <= since < 1.0 for _, since in made), made


def test_a_commit_by_a_batch_moves_the_timers_next_wake() -> None:
    # the timer sleeps until the period of the last commit is over, also when a batch committed
    # while it slept: no commit by the timer until a period after the batch's
    batch: list[float] = []

    def batch_commits(clock: CommitClock) -> None:
        time.sleep(0.3)
        clock.committed()  # a batch committed 0.3 s in: the period now ends at 0.8 s
        batch.append(time.monotonic())

    started, made = run_timer(0.5, calls=1, meanwhile=batch_commits)
    assert made and made[0][0] - batch[0] >= 0.5
    assert made[0][0] - started < 1.8  # not a whole tick of 2 s after the period
