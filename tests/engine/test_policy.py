"""The period timer commits when MAXIMUM PERIOD is over, not at the next tick after it."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from icesql.engine.commit.policy import CommitClock, PeriodTimer, until_next_trigger
from icesql.engine.sink.runner import SinkRunner
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

    def commit_if_due() -> bool:
        made.append((time.monotonic(), clock.since_commit()))
        clock.committed()
        if len(made) == calls:
            stop.set()
        return True  # something was staged and committed

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


def test_a_batch_commits_when_the_period_ends_before_the_next_batch_can_start() -> None:
    # a 1 s period, 0.7 s since the last commit: a batch ending 0.4 s before the next trigger
    # commits now (the timer would commit the same files at 1 s); one ending 0.2 s before a
    # trigger keeps staging (the next batch may still join the commit)
    clock = CommitClock(CommitPolicy(maximum_period=1.0))
    clock.last_commit = time.monotonic() - 0.7
    assert clock.reason(lambda: 0, until_next_batch=0.4) == "period"
    assert clock.reason(lambda: 0, until_next_batch=0.2) is None
    assert clock.reason(lambda: 0) is None  # a next batch may start at once
    # MINIMUM SIZE still comes first; without a period every batch commits
    sized = CommitClock(CommitPolicy(maximum_period=1.0, minimum_size=10))
    assert sized.reason(lambda: 10, until_next_batch=0.0) == "size"
    assert CommitClock(CommitPolicy()).reason(lambda: 0) == "batch"


def test_an_idle_period_end_does_not_reset_the_clock_and_the_timer_does_not_spin() -> None:
    # nothing staged when the period ends: the timer looks again each tick (not every few
    # milliseconds), and the period stays over, so the next batch to end commits at once
    # (a reset made it wait another whole period)
    # (the runner's own timer callback, on a stand-in runner whose commits find nothing staged)
    clock = CommitClock(CommitPolicy(maximum_period=0.2))
    stop = threading.Event()
    calls: list[float] = []

    def nothing_staged(reason: str) -> None:
        calls.append(time.monotonic())
        return None  # what SinkRunner.commit returns with nothing staged

    runner = SimpleNamespace(lock=threading.Lock(), stop_event=threading.Event(), clock=clock, commit=nothing_staged)
    commit_if_due = functools.partial(SinkRunner._commit_if_period_passed, runner)
    timer = PeriodTimer("t", clock, stop, commit_if_due, on_error=lambda e: stop.set(), tick=0.25).start()
    time.sleep(1.3)
    stop.set()
    timer.join(5)
    assert 2 <= len(calls) <= 7, calls  # about one look per tick after the period, not a spin
    assert clock.since_commit() > 1.0 and clock.period_due()
    assert clock.reason(lambda: 0) == "period"


def test_the_next_trigger_is_the_first_interval_multiple_after_the_batch_start() -> None:
    # Spark's ProcessingTimeExecutor: triggers at multiples of the interval since the epoch
    assert until_next_trigger(100.05, 1.0, now=100.6) == pytest.approx(0.4)
    assert until_next_trigger(100.0, 1.0, now=100.3) == pytest.approx(0.7)
    assert until_next_trigger(100.05, 0.5, now=100.3) == pytest.approx(0.2)
    assert until_next_trigger(100.05, 1.0, now=101.2) == 0.0  # ran past it: the next starts at once
    assert until_next_trigger(100.05, 0.0, now=100.1) == 0.0
