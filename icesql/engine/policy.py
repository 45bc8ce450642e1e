"""When a sink commits: its commit policy as a clock, and the timer that keeps an idle sink on time.

``CommitClock.reason(staged_bytes)`` answers after every staged micro-batch:

* neither MINIMUM SIZE nor MAXIMUM PERIOD: every batch commits (reason ``batch``);
* the staged bytes reached MINIMUM SIZE: ``size``;
* MAXIMUM PERIOD has passed since the last commit: ``period``;
* otherwise None: the files stay staged.

``PeriodTimer`` checks ``period`` between batches too, so a sink whose input went quiet still
commits what it staged (and, with nothing staged, waits another period). ``flush`` and
``shutdown`` commits are asked for by the runner, not by the clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from icesql.plan import CommitPolicy


class CommitClock:
    """A sink's commit policy and the time of its last commit (monotonic seconds)."""

    def __init__(self, policy: CommitPolicy) -> None:
        self.policy = policy
        self.last_commit = time.monotonic()

    def reason(self, staged_bytes: Callable[[], int]) -> str | None:
        """Why to commit now, after a batch was staged (None: keep staging). ``staged_bytes``
        is asked only when MINIMUM SIZE is set."""
        p = self.policy
        if p.minimum_size is None and p.maximum_period is None:
            return "batch"
        if p.minimum_size is not None and staged_bytes() >= p.minimum_size:
            return "size"
        if self.period_due():
            return "period"
        return None

    def period_due(self) -> bool:
        period = self.policy.maximum_period
        return period is not None and self.since_commit() >= period

    def since_commit(self) -> float:
        return time.monotonic() - self.last_commit

    def committed(self) -> None:
        """A commit happened now (or nothing was staged when a period ended: wait another)."""
        self.last_commit = time.monotonic()


MIN_WAIT = 0.01  # seconds the timer sleeps at least, also when a period is already over


class PeriodTimer:
    """A thread that commits when MAXIMUM PERIOD passes, also while no batch arrives.

    ``commit_if_due()`` is called (by this thread) once the clock says the period passed; it takes
    the runner's lock, checks again and commits. The thread ends when ``stop`` is set, when the
    policy no longer has a period (ALTER SINK), or with ``on_error`` when a commit fails.
    """

    def __init__(
        self,
        name: str,
        clock: CommitClock,
        stop: threading.Event,
        commit_if_due: Callable[[], None],
        on_error: Callable[[BaseException], None],
        tick: float | None = None,
    ) -> None:
        self.clock = clock
        self.stop = stop
        self.commit_if_due = commit_if_due
        self.on_error = on_error
        self.tick = tick
        self.thread = threading.Thread(target=self._loop, name=f"icesql-timer-{name}", daemon=True)

    def start(self) -> PeriodTimer:
        self.thread.start()
        return self

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)

    def _loop(self) -> None:
        while True:
            period = self.clock.policy.maximum_period
            if period is None:
                return  # ALTER SINK removed the period
            # wake when the period is over (not on the next tick after it: a tick of period / 4
            # made commits up to a quarter period late), and at least every tick to see a changed
            # period or a commit made by a batch meanwhile
            tick = self.tick or max(0.05, min(1.0, period / 4))
            until_due = period - self.clock.since_commit()
            if self.stop.wait(min(tick, max(MIN_WAIT, until_due))):
                return
            if not self.clock.period_due():
                continue
            try:
                self.commit_if_due()
            except BaseException as e:
                self.on_error(e)
                return


__all__ = ["CommitClock", "PeriodTimer"]
