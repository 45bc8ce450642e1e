"""Supervision: ``Engine.run`` (``icesql run`` / ``icesql serve``, with or without ``--once``)
keeps its sinks running through transient failures.

A sink whose runner fails on a transient cause (``failures.is_transient``: a catalog or object
store that cannot be reached, a timeout, a server error, throttling) is restarted after a
backoff, and meanwhile its state is ``retrying`` with the attempt number, the time of the next
attempt and the last error (``SHOW SINK STATUS``, ``icesql status``, ``Engine.status()``)::

    failed (transient) ──► retrying ──(backoff)──► starting ──► running ──► ...
                              ▲                        │
                              └──── failed again ◄─────┘

* the backoff starts at ``RetryPolicy.backoff`` and doubles with each attempt up to
  ``backoff_max`` (``ICESQL_RETRY_BACKOFF`` = 1 s, ``ICESQL_RETRY_BACKOFF_MAX`` = 60 s);
* a streak of failures ends when the restarted sink commits or keeps running for
  ``backoff_max`` seconds; the next failure starts a new streak at attempt 1;
* a streak longer than ``budget`` seconds (``ICESQL_RETRY_BUDGET`` = 600 s; the last attempt is
  made at the deadline) gives the sink up: ``failed`` with the last error and the number of
  attempts;
* a failure that is not transient (a bad record, a fenced runner, a schema mismatch) is final
  at once: the sink stays ``failed`` (or ``fenced``) while the other sinks go on.

The failing runner asks ``Supervisor.will_retry`` (``SinkRunner.will_retry``, set through
``Engine.start_sink``) and records ``retrying`` itself, so a failure that will be retried never
shows as ``failed``, not even for a moment; the supervisor then adds the attempt and the time
of the next one (catalog store, ``Engine.status()``).

``Supervisor.run`` returns once every sink has ended (or ``stop()`` was called) and raises the
first sink's final error, so ``icesql run`` / ``serve`` exit with code 3 when a sink failed. A
sink still waiting for a restart when ``stop()`` comes ends ``failed`` ("stopped while
retrying: ...").

With ``once`` (``run --once``: what a scheduler calls) the sinks run with ``once=True`` (the
available input, committed, then the sink stops) under the same policy, with two differences:

* a failure that is final ends the whole run at once: the other sinks stop with a final commit
  and the error is raised (a scheduler learns of it now, not after the others' input);
* a batch that brought new columns (``SchemaChangedError``), or that needs Spark in a run
  without it (``local_query.SparkNeeded``), restarts the sink at once, without a backoff and
  without counting as a failure, at most ``ONCE_EVOLUTIONS`` times in a row;
* a restarted sink has recovered only once it commits (not by running ``backoff_max`` seconds):
  a run whose every attempt fails before it commits gives up at the budget.

A restart resumes from what the failed run committed and staged (``recovery``: the staged
batches are committed, Spark's checkpoint replays the rest and the runner skips the batches
already staged), so a retried ``--once`` run commits every row exactly once.

Each retry is one log line (WARNING): ``sink NAME: restarting in 1.0s (attempt 1; gives up 600s
after the first failure): <the error>``; a sink that gives up logs one ERROR line.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from icesql.engine.base.events import StateEvent
from icesql.engine.connections.failures import is_transient
from icesql.errors import ExecutionError, IcesqlError
from icesql.plan import SinkPlan

log = logging.getLogger("icesql.engine")

QUIESCE_TIMEOUT = 60.0  # seconds a restart waits for the failed run's last commit (``SinkRunner.quiesce``)
ONCE_EVOLUTIONS = 8  # restarts in a row for new columns in a ``once`` run before it gives up


@dataclass(frozen=True)
class RetryPolicy:
    """How a supervised sink is restarted after a transient failure (seconds)."""

    backoff: float = 1.0  # the first wait
    backoff_max: float = (
        60.0  # the longest wait; also how long a restarted sink must run to count as recovered
    )
    budget: float = 600.0  # how long a streak of failures may last; 0: no restarts at all

    @classmethod
    def from_settings(cls) -> RetryPolicy:
        from icesql import settings

        def number(setting: settings.Setting, fallback: float) -> float:
            value = setting.get_float()
            return fallback if value is None or value < 0 else value

        default = cls()
        return cls(
            backoff=number(settings.RETRY_BACKOFF, default.backoff),
            backoff_max=number(settings.RETRY_BACKOFF_MAX, default.backoff_max),
            budget=number(settings.RETRY_BUDGET, default.budget),
        )

    def delay(self, attempt: int) -> float:
        """The wait before restart ``attempt`` (1, 2, ...)."""
        return min(self.backoff * 2 ** max(0, attempt - 1), self.backoff_max)


@dataclass
class Streak:
    """One sink's run of failures, as the supervisor tracks it (wall-clock seconds)."""

    attempt: int = 0  # restarts asked for so far
    since: float | None = None  # the first failure
    next_at: float | None = None  # the next restart (None: not waiting for one)
    restarted_at: float | None = None  # when the current runner was restarted
    error: IcesqlError | None = None  # the last failure
    final: bool = False  # the sink ended (stopped, or failed for good)
    evolutions: int = 0  # ``once``: restarts in a row for new columns (no backoff, not an attempt)

    def overlay(self) -> dict[str, Any]:
        """What ``Engine.status()`` shows on top of the runner's own row."""
        row: dict[str, Any] = {
            "retry_attempt": self.attempt,
            "next_attempt_at": self.next_at,
            "retrying_since": self.since,
        }
        if self.next_at is not None:
            row["state"] = row["status"] = "retrying"
        if self.error is not None and (self.next_at is not None or self.final):
            row["last_error"] = self.error.message
        return row


class Supervisor:
    """Runs ``plans`` on ``engine`` until they end, restarting those that fail transiently."""

    def __init__(
        self,
        engine: Any,
        plans: Sequence[SinkPlan],
        policy: RetryPolicy,
        *,
        clock: Callable[[], float] = time.time,
        tick: float = 1.0,
        once: bool = False,
    ) -> None:
        self.engine = engine
        self.plans = {p.name: p for p in plans}
        self.policy = policy
        self.once = once  # ``run --once``: each sink commits the available input and stops
        self.clock = clock
        self.tick = tick
        self.streaks = {name: Streak() for name in self.plans}
        self._stopped = threading.Event()
        self._restarting = threading.Lock()  # held while a restart runs; stop() waits for it

    # ----------------------------------------------------------------- the loop

    def run(self) -> None:
        for plan in self.plans.values():
            self._update(plan.name, retry_attempt=0, next_attempt_at=None)
            self._start(plan)
        try:
            while not self._stopped.is_set():
                self._step()
                if all(s.final for s in self.streaks.values()):
                    break
                if self.once and any(s.final and s.error is not None for s in self.streaks.values()):
                    break  # a --once run fails fast: the others stop (final commit) below
                self._wait()
        except KeyboardInterrupt:
            log.info("interrupted: stopping sinks")
        finally:
            self._stopped.set()
            self._give_up_waiting()
            for name in self.plans:
                runner = self.engine._runners.get(name)
                if self.once and (runner is None or not runner.active):
                    continue  # ended already: its own end committed (a second stop would commit again)
                try:
                    self.engine.stop_sink(name)
                except IcesqlError:
                    pass
        for name in self.plans:
            err = self.streaks[name].error
            if self.streaks[name].final and err is not None:
                raise err

    def stop(self) -> None:
        """End ``run``: no more restarts (a restart under way finishes first)."""
        self._stopped.set()
        with self._restarting:
            pass
        self._notify()

    def forget(self, name: str) -> None:
        """The sink was stopped on purpose (``Engine.stop_sink``): never restart it."""
        streak = self.streaks.get(name)
        if streak is not None and not streak.final:
            streak.final = True
            streak.next_at = None
            streak.error = None
        self._notify()

    def overlay(self, name: str) -> dict[str, Any] | None:
        streak = self.streaks.get(name)
        return streak.overlay() if streak is not None else None

    def _wait(self) -> None:
        now = self.clock()
        due = [s.next_at for s in self.streaks.values() if s.next_at is not None]
        timeout = self.tick if not due else max(0.0, min(self.tick, min(due) - now))
        cond = self.engine._any_done
        with cond:
            cond.wait_for(lambda: self._stopped.is_set() or self._ended_unseen(), timeout=timeout)

    def _notify(self) -> None:
        cond = self.engine._any_done
        with cond:
            cond.notify_all()

    def _ended_unseen(self) -> bool:
        for name, streak in self.streaks.items():
            if streak.final or streak.next_at is not None:
                continue
            runner = self.engine._runners.get(name)
            if runner is not None and not runner.active:
                return True
        return False

    def _step(self) -> None:
        now = self.clock()
        for name, plan in self.plans.items():
            streak = self.streaks[name]
            if streak.final:
                continue
            if streak.next_at is not None:
                if now >= streak.next_at:
                    self._restart(plan)
                continue
            runner = self.engine._runners.get(name)
            if runner is None:
                continue
            if runner.active:
                if streak.attempt and self._recovered(runner, streak, now):
                    log.info("sink %s: running again after %d restart(s)", name, streak.attempt)
                    self.streaks[name] = Streak()
                    self._update(name, retry_attempt=0)
                continue
            if runner.error is None:
                # stopped (its input committed, or stopped on purpose): earlier failures are over
                streak.final, streak.error = True, None
                continue
            self._failed(plan, runner, now)

    def _recovered(self, runner: Any, streak: Streak, now: float) -> bool:
        if runner.status != "running":
            return False
        if runner.last_commit_at is not None:  # this runner committed
            return True
        if self.once:  # only by committing: a run that fails before it commits never ends its streak
            return False
        return streak.restarted_at is not None and now - streak.restarted_at >= self.policy.backoff_max

    # ----------------------------------------------------------------- failures and restarts

    def will_retry(self, name: str, err: IcesqlError) -> bool:
        """Whether a failure of ``name`` now will be retried (asked by the failing runner, so
        that its state is ``retrying`` at once; ``_failed`` decides the same way)."""
        if self._stopped.is_set():
            return False
        if self._evolves_now(name, err):
            return True
        if not is_transient(err) or self.policy.budget <= 0:
            return False
        since = self.streaks[name].since
        return since is None or self.clock() - since < self.policy.budget

    def _failed(self, plan: SinkPlan, runner: Any, now: float) -> None:
        name = plan.name
        streak = self.streaks[name]
        err: IcesqlError = runner.error
        streak.error = err
        if self._evolves_now(name, err):
            streak.evolutions += 1
            streak.next_at = now  # the next step restarts it
            log.info("sink %s: %s", name, err.message)
            return
        if not is_transient(err) or self.policy.budget <= 0:
            streak.final = True  # the runner has recorded it as failed (or fenced)
            return
        if streak.since is None:
            streak.since = now
        elapsed = now - streak.since
        if elapsed >= self.policy.budget:
            self._give_up(
                name,
                f"{err.message} (gave up after {streak.attempt} restart(s) in {elapsed:.0f}s; "
                f"ICESQL_RETRY_BUDGET is {self.policy.budget:g}s)",
            )
            return
        streak.attempt += 1
        streak.next_at = min(now + self.policy.delay(streak.attempt), streak.since + self.policy.budget)
        log.warning(
            "sink %s: restarting in %.1fs (attempt %d; gives up %.0fs after the first failure): %s",
            name,
            streak.next_at - now,
            streak.attempt,
            self.policy.budget,
            err.message,
        )
        self._update(
            name,
            status="retrying",
            retry_attempt=streak.attempt,
            next_attempt_at=streak.next_at,
            last_error=err.message,
        )
        if runner.status != "retrying":  # the runner did not know (or the supervisor was stopping)
            self.engine.listeners.state(StateEvent(name, "retrying"))

    def _evolves_now(self, name: str, err: IcesqlError) -> bool:
        """``err`` restarts the sink at once (``runner.RestartAtOnce``: in a ``once`` run a batch's
        new columns, in any run a batch that needs Spark), at most ``ONCE_EVOLUTIONS`` times in a
        row."""
        from icesql.engine.base.restarts import RestartAtOnce

        return (
            isinstance(err, RestartAtOnce)
            and (self.once or err.running_too)
            and self.streaks[name].evolutions < ONCE_EVOLUTIONS
        )

    def _give_up(self, name: str, message: str) -> None:
        streak = self.streaks[name]
        err = copy.copy(streak.error) if streak.error is not None else ExecutionError(message)
        err.message = message
        streak.error, streak.final, streak.next_at = err, True, None
        log.error("sink %s failed: %s", name, message)
        self._update(name, status="failed", next_attempt_at=None, last_error=message)
        self.engine.listeners.state(StateEvent(name, "failed"))

    def _give_up_waiting(self) -> None:
        """On stop: a sink waiting for its next attempt, or whose runner has just failed, ends
        failed with its last error (its state must not stay 'retrying' after the process)."""
        for name, streak in self.streaks.items():
            if streak.final:
                continue
            if streak.next_at is None:
                runner = self.engine._runners.get(name)
                if runner is None or runner.active or runner.error is None:
                    continue
                streak.error = runner.error
                if runner.status != "retrying":  # recorded as failed (or fenced) already
                    streak.final = True
                    continue
            assert streak.error is not None
            self._give_up(name, f"stopped while retrying: {streak.error.message}")

    def _start(self, plan: SinkPlan) -> None:
        try:
            self.engine.start_sink(plan, once=self.once, will_retry=lambda err: self.will_retry(plan.name, err))
        except IcesqlError as e:
            if self.engine._runners.get(plan.name) is not None:
                return  # the runner recorded the failure; the next step looks at it
            # no runner to record it (Spark itself could not start, e.g. no Spark Connect
            # client): final, or the loop would wait for a runner that never comes
            streak = self.streaks[plan.name]
            streak.error = e
            streak.final, streak.next_at = True, None
            self._update(plan.name, status="failed", last_error=e.message)
        except Exception as e:  # the runner never existed: not worth a retry
            log.exception("sink %s could not start", plan.name)
            streak = self.streaks[plan.name]
            streak.error = ExecutionError(f"sink {plan.name!r} could not start ({type(e).__name__})")
            streak.final, streak.next_at = True, None
            self._update(plan.name, status="failed", last_error=streak.error.message)

    def _restart(self, plan: SinkPlan) -> None:
        with self._restarting:
            if self._stopped.is_set():
                return
            streak = self.streaks[plan.name]
            old = self.engine._runners.get(plan.name)
            if old is not None:
                old.stop_query()  # the failed query must be gone before its checkpoint is reused
                # and its last commit over before a new runner recovers
                if not old.quiesce(QUIESCE_TIMEOUT):
                    log.warning(
                        "sink %s: the failed run is still busy after %gs; restarting anyway", plan.name, QUIESCE_TIMEOUT
                    )
            log.debug("sink %s: restart attempt %d", plan.name, streak.attempt)
            streak.next_at = None
            streak.restarted_at = self.clock()
            self._update(plan.name, next_attempt_at=None)
            self._start(plan)

    def _update(self, name: str, **fields: Any) -> None:
        try:
            self.engine.state.update(name, **fields)
        except Exception:  # state reporting never stops supervision
            log.exception("sink %s: state update failed", name)


__all__ = ["RetryPolicy", "Streak", "Supervisor"]
