"""Supervision of ``Engine.run``: transient failures are restarted with backoff and say
``retrying``, a streak past its budget or a failure that is not transient is final, and
``stop()`` ends it all; with ``once`` the same, except that a final failure ends the run at once.
Runners are scripted stand-ins (no Spark): each start of a sink takes the next step of its
script. (``test_once_retry.py`` runs ``--once`` retries on Spark.)"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.connections.failures import CatalogUnavailableError
from icesql.engine.engine import Engine
from icesql.engine.sink.supervisor import RetryPolicy, Supervisor
from icesql.errors import ExecutionError, IcesqlError
from icesql.plan import SinkPlan
from tests.support.pipeline_helpers import State

FAST = RetryPolicy(backoff=0.05, backoff_max=0.2, budget=5.0)


class ScriptedRunner:
    """What ``Engine`` and the supervisor use of a ``SinkRunner``. Steps: ``start-fails``
    (transient, while preparing), ``fails-later`` (transient, once running), ``bad`` (not
    transient, once running), ``commits`` (runs and commits), ``runs``, ``fails-mid-commit``
    (transient, once running, while a commit of its own goes on for 0.3 s more). Started with
    ``once``, ``commits`` then ends (its input done) while ``runs`` goes on until stopped."""

    def __init__(self, name: str, step: str, state: State) -> None:
        self.name, self.step, self.state = name, step, state
        self.error: IcesqlError | None = None
        self.status = "created"
        self.last_commit_at: float | None = None
        self.will_retry: Any = lambda err: False
        self._done = threading.Event()
        self._quiet = threading.Event()  # no commit of its own in flight
        self._quiet.set()
        self.quiet_at: float | None = None

    def _set(self, status: str, **fields: Any) -> None:
        self.status = status
        self.state.update(self.name, status=status, **fields)

    def _fail(self, err: IcesqlError) -> IcesqlError:
        self.error = err
        self._set("retrying" if self.will_retry(err) else "failed", last_error=err.message)
        self._done.set()
        return err

    def start(self, *, once: bool = False) -> None:
        self._set("starting")
        if self.step == "start-fails":
            raise self._fail(CatalogUnavailableError(f"sink {self.name}: cannot connect: unreachable"))
        self._set("running")
        if self.step == "commits":
            self.last_commit_at = time.time()
            if once:
                threading.Timer(0.05, self._end).start()
        elif self.step == "fails-mid-commit":
            self._quiet.clear()

            def commit_ends() -> None:
                self.quiet_at = time.monotonic()
                self._quiet.set()

            threading.Timer(0.05, self._fail, args=(CatalogUnavailableError("catalog unreachable"),)).start()
            threading.Timer(0.35, commit_ends).start()
        elif self.step in ("fails-later", "bad"):
            err: IcesqlError = (
                CatalogUnavailableError("catalog unreachable")
                if self.step == "fails-later"
                else ExecutionError("bad record in f.json")
            )
            threading.Timer(0.05, self._fail, args=(err,)).start()

    def _end(self) -> None:
        self._set("stopped")
        self._done.set()

    def stop(self) -> None:
        self.stops = getattr(self, "stops", 0) + 1
        if self.error is None and not self._done.is_set():
            self._set("stopped")
        self._done.set()

    def stop_query(self) -> None:
        pass

    def quiesce(self, timeout: float = 60.0) -> bool:
        return self._quiet.wait(timeout)

    def await_termination(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    @property
    def active(self) -> bool:
        return not self._done.is_set()

    def status_row(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "state": self.status,
            "last_error": self.error.message if self.error else None,
        }


class ScriptedEngine(Engine):
    def __init__(self, scripts: dict[str, list[str]]) -> None:
        super().__init__(Path("unused"), objects=None, secrets=lambda n: "", state=State())  # type: ignore[arg-type]
        self.scripts = scripts
        self.starts: dict[str, list[float]] = {name: [] for name in scripts}
        self.runners: list[ScriptedRunner] = []

    def local_session(self, plan: SinkPlan) -> Any:
        return None  # the scripted runners stand in for Spark's

    def _runner(self, plan: SinkPlan, local: Any = None) -> Any:
        self.starts[plan.name].append(time.monotonic())
        script = self.scripts[plan.name]
        runner = ScriptedRunner(plan.name, script.pop(0) if script else "runs", self.state)  # type: ignore[arg-type]
        self.runners.append(runner)
        return runner

    def warm_up(self) -> None:
        pass


def plan(name: str) -> SinkPlan:
    return SinkPlan(name=name, relation="r", catalog_connection="c", namespace=("ns",), table=name)


def run_in_thread(
    engine: Engine, plans: list[SinkPlan], policy: RetryPolicy
) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def work() -> None:
        try:
            engine.run(plans, retry=policy)
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - the test looks at it
            outcome.append(e)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    return t, outcome


def wait_for(cond: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def updates(engine: ScriptedEngine, name: str) -> list[dict[str, Any]]:
    return [fields for n, fields in engine.state.history if n == name]  # type: ignore[attr-defined]


def test_transient_failures_are_retried_with_backoff_until_the_sink_recovers() -> None:
    engine = ScriptedEngine({"s": ["start-fails", "start-fails", "fails-later", "commits"]})
    t, outcome = run_in_thread(engine, [plan("s")], FAST)
    wait_for(lambda: len(engine.starts["s"]) == 4 and engine.runner("s").status == "running")
    # recovered (it committed): the streak is over, the attempt count back to 0
    wait_for(lambda: updates(engine, "s")[-1] == {"retry_attempt": 0})
    retrying = [u for u in updates(engine, "s") if u.get("retry_attempt")]
    assert [u["retry_attempt"] for u in retrying] == [1, 2, 3] and {u["status"] for u in retrying} == {
        "retrying"
    }
    # a failure that is retried never shows as 'failed', not even for a moment
    assert "failed" not in [u.get("status") for u in updates(engine, "s")]
    assert all("unreachable" in u["last_error"] for u in retrying)
    gaps = [b - a for a, b in itertools.pairwise(engine.starts["s"])]
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1 and gaps[2] >= 0.05 + 0.15  # 0.05, 0.1, 0.2 (+ runtime)
    engine.stop()
    t.join(5)
    assert outcome == [None]
    assert engine.state.get("s")["status"] == "stopped"  # type: ignore[attr-defined]


def test_status_says_retrying_with_the_attempt_and_the_next_attempt_time() -> None:
    engine = ScriptedEngine({"s": ["start-fails"]})
    t, outcome = run_in_thread(engine, [plan("s")], RetryPolicy(backoff=30, backoff_max=30, budget=60))
    wait_for(lambda: bool(engine.status()) and engine.status()[0]["state"] == "retrying")
    (row,) = engine.status()
    assert row["retry_attempt"] == 1 and row["next_attempt_at"] > time.time() + 25
    assert row["retrying_since"] <= time.time() and "unreachable" in row["last_error"]
    t0 = time.monotonic()
    engine.stop()  # no restart while waiting: the sink ends failed with its last error
    t.join(5)
    assert time.monotonic() - t0 < 5  # no 30 s wait for the next attempt
    (err,) = outcome
    assert isinstance(err, CatalogUnavailableError)
    assert err.message.startswith("stopped while retrying: sink s: cannot connect: unreachable")
    assert engine.state.get("s")["status"] == "failed"  # type: ignore[attr-defined]


def test_a_streak_past_the_budget_fails_the_sink_with_the_reason() -> None:
    engine = ScriptedEngine({"s": ["start-fails"] * 100})
    t0 = time.monotonic()
    with pytest.raises(CatalogUnavailableError) as info:
        engine.run([plan("s")], retry=RetryPolicy(backoff=0.05, backoff_max=0.1, budget=0.5))
    elapsed = time.monotonic() - t0
    assert 0.5 <= elapsed < 5  # the budget, plus a loaded machine's scheduling
    assert "gave up after" in info.value.message and "ICESQL_RETRY_BUDGET is 0.5s" in info.value.message
    final = engine.state.get("s")  # type: ignore[attr-defined]
    assert final["status"] == "failed" and "gave up after" in final["last_error"]
    assert final["next_attempt_at"] is None and final["retry_attempt"] >= 2


def test_a_failure_that_is_not_transient_is_final_and_the_other_sinks_go_on() -> None:
    engine = ScriptedEngine({"bad": ["bad"], "good": ["runs"]})
    t, outcome = run_in_thread(engine, [plan("bad"), plan("good")], FAST)
    wait_for(lambda: engine.state.get("bad").get("status") == "failed")  # type: ignore[attr-defined]
    time.sleep(0.3)
    assert len(engine.starts["bad"]) == 1  # never restarted
    assert not [u for u in updates(engine, "bad") if u.get("status") == "retrying"]
    assert engine.runner("good").active and t.is_alive()
    engine.stop()
    t.join(5)
    (err,) = outcome
    assert isinstance(err, ExecutionError) and err.message == "bad record in f.json"
    assert engine.state.get("good")["status"] == "stopped"  # type: ignore[attr-defined]


def test_a_zero_budget_turns_restarts_off() -> None:
    engine = ScriptedEngine({"s": ["fails-later"]})
    with pytest.raises(CatalogUnavailableError):
        engine.run([plan("s")], retry=RetryPolicy(budget=0))
    assert len(engine.starts["s"]) == 1


def test_once_retries_a_transient_failure_and_ends_when_the_input_is_committed() -> None:
    engine = ScriptedEngine({"s": ["start-fails", "fails-later", "commits"]})
    engine.run([plan("s")], once=True, retry=FAST)
    assert len(engine.starts["s"]) == 3
    retrying = [u["retry_attempt"] for u in updates(engine, "s") if u.get("status") == "retrying" and "retry_attempt" in u]
    assert retrying == [1, 2]
    assert engine.state.get("s")["status"] == "stopped"  # type: ignore[attr-defined]
    assert [getattr(r, "stops", 0) for r in engine.runners] == [0, 0, 0]  # ended on its own: no second stop


def test_once_gives_up_when_the_retries_are_spent() -> None:
    engine = ScriptedEngine({"s": ["start-fails"] * 100})
    with pytest.raises(CatalogUnavailableError) as info:
        engine.run([plan("s")], once=True, retry=RetryPolicy(backoff=0.05, backoff_max=0.1, budget=0.5))
    assert "gave up after" in info.value.message and "ICESQL_RETRY_BUDGET is 0.5s" in info.value.message
    assert len(engine.starts["s"]) >= 3
    assert engine.state.get("s")["status"] == "failed"  # type: ignore[attr-defined]


def test_once_a_final_failure_is_not_retried_and_stops_the_others_at_once() -> None:
    engine = ScriptedEngine({"bad": ["bad"], "long": ["runs"]})
    t0 = time.monotonic()
    with pytest.raises(ExecutionError) as info:
        engine.run([plan("bad"), plan("long")], once=True, retry=FAST)
    assert time.monotonic() - t0 < 5  # not after the other sink's input
    assert info.value.message == "bad record in f.json"
    assert len(engine.starts["bad"]) == 1
    assert engine.state.get("long")["status"] == "stopped"  # type: ignore[attr-defined]


def test_once_a_zero_budget_fails_at_the_first_transient_failure() -> None:
    engine = ScriptedEngine({"s": ["start-fails", "commits"]})
    with pytest.raises(CatalogUnavailableError):
        engine.run([plan("s")], once=True, retry=RetryPolicy(budget=0))
    assert len(engine.starts["s"]) == 1


def test_the_policy_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert RetryPolicy.from_settings() == RetryPolicy(backoff=1.0, backoff_max=60.0, budget=600.0)
    monkeypatch.setenv("ICESQL_RETRY_BACKOFF", "0.5")
    monkeypatch.setenv("ICESQL_RETRY_BACKOFF_MAX", "4")
    monkeypatch.setenv("ICESQL_RETRY_BUDGET", "30")
    policy = RetryPolicy.from_settings()
    assert policy == RetryPolicy(backoff=0.5, backoff_max=4.0, budget=30.0)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 4.0]


def test_a_failure_the_supervisor_had_no_time_to_look_at_does_not_stay_retrying() -> None:
    engine = ScriptedEngine({"s": ["start-fails"]})
    supervisor = Supervisor(engine, [plan("s")], FAST)
    supervisor._start(plan("s"))  # the runner fails at once and, asked, says 'retrying'
    assert engine.state.get("s")["status"] == "retrying"  # type: ignore[attr-defined]
    supervisor.stop()
    supervisor._give_up_waiting()  # what run() does on its way out
    final = engine.state.get("s")  # type: ignore[attr-defined]
    assert final["status"] == "failed" and final["last_error"].startswith("stopped while retrying: sink s")


def test_a_restart_waits_for_the_failed_runs_commit_in_flight() -> None:
    """A sink failing while a commit of its own is still in flight (the period timer's, retrying
    a transient failure in place) is restarted only once that commit is over: a new runner
    recovering meanwhile would be fenced by the old one's late commit (the soak saw 'version 10
    is fenced out: version 11 committed'), or fence it."""
    engine = ScriptedEngine({"s": ["fails-mid-commit", "commits"]})
    t, outcome = run_in_thread(engine, [plan("s")], FAST)
    wait_for(lambda: len(engine.starts["s"]) == 2 and engine.runner("s").status == "running")
    first = engine.runners[0]
    assert first.quiet_at is not None and engine.starts["s"][1] >= first.quiet_at
    engine.stop()
    t.join(5)
    assert outcome == [None]
