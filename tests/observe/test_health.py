"""``/readyz``'s verdict as a pure function of the sinks' reports."""

from __future__ import annotations

from icesql.observe.health import SinkReport, judge, readiness

NOW = 1_800_000_000.0


def report(**kw: object) -> SinkReport:
    fields: dict[str, object] = {"name": "s", "table": "ns.t", "state": "running"}
    fields.update(kw)
    return SinkReport(**fields)  # type: ignore[arg-type]


def verdict(**kw: object) -> tuple[bool, str]:
    v = judge(report(**kw), now=NOW, grace=30)
    return v.ready, v.reason


def test_an_idle_running_sink_is_ready_however_old_its_last_commit() -> None:
    assert verdict(last_commit_at=NOW - 86400, maximum_period=10.0) == (True, "running")


def test_staged_data_must_be_committed_within_the_commit_policy_and_the_grace() -> None:
    staged = {"staged_files": 3, "staged_since": NOW - 35.0}
    # MAXIMUM PERIOD 10 s: 35 s waited is within 10 + 30
    assert verdict(maximum_period=10.0, **staged)[0] is True
    ready, reason = verdict(maximum_period=2.0, **staged)
    assert not ready and reason == "3 staged file(s) waiting 35s for a commit (limit 32s)"
    # every micro-batch commits: the grace alone
    assert verdict(**staged) == (False, "3 staged file(s) waiting 35s for a commit (limit 30s)")
    # MINIMUM SIZE only: data may wait until enough is staged
    assert verdict(minimum_size=1 << 30, **staged)[0] is True


def test_a_source_backlog_without_commits_is_not_ready() -> None:
    assert verdict(backlog_files=4, last_commit_at=NOW - 5)[0] is True
    ready, reason = verdict(backlog_files=4, last_commit_at=NOW - 50)
    assert not ready and reason == "input waiting at the source and no commit for 50s (limit 30s)"


def test_a_kafka_lag_without_commits_is_not_ready() -> None:
    lag = {"source_lag": {"events": {0: 120, 1: 0, 2: 5}}}
    assert report(**lag).lag_records == 125
    assert verdict(last_commit_at=NOW - 5, **lag)[0] is True
    ready, reason = verdict(last_commit_at=NOW - 50, **lag)
    assert not ready and reason == "input waiting at the source and no commit for 50s (limit 30s)"
    # caught up: an idle sink is ready however old its last commit
    assert verdict(last_commit_at=NOW - 500, source_lag={"events": {0: 0}}) == (True, "running")


def test_retrying_is_tolerated_for_the_grace_then_not() -> None:
    retry = {
        "state": "retrying",
        "retry_attempt": 2,
        "next_attempt_at": NOW + 4,
        "last_error": "catalog down",
    }
    assert verdict(retrying_since=NOW - 10, **retry) == (
        True,
        "retrying for 10s (attempt 2, next in 4s): catalog down",
    )
    assert verdict(retrying_since=NOW - 31, **retry) == (
        False,
        "retrying for 31s (attempt 2, next in 4s): catalog down",
    )
    # the restart attempt itself belongs to the streak
    restarting = {**retry, "state": "starting", "retrying_since": NOW - 40}
    assert verdict(**restarting) == (False, "retrying for 40s (attempt 2, restarting now): catalog down")


def test_failed_fenced_starting_and_stopped_sinks_are_not_ready() -> None:
    assert verdict(state="failed", last_error="bad record") == (False, "failed: bad record")
    assert verdict(state="fenced", last_error="newer runner") == (False, "fenced: newer runner")
    assert verdict(state="starting") == (False, "starting")
    assert verdict(state="created") == (False, "not started")
    assert verdict(state="stopped") == (False, "stopped")


def test_readiness_needs_every_sink_and_at_least_one() -> None:
    assert readiness([], now=NOW, grace=30) == {
        "status": "not ready",
        "sinks": [],
        "reasons": ["no sink is running in this process"],
    }
    body = readiness([report(name="a"), report(name="b", state="failed", last_error="x")], now=NOW, grace=30)
    assert body["status"] == "not ready" and body["reasons"] == ["sink b: failed: x"]
    assert [s["ready"] for s in body["sinks"]] == [True, False]
    assert readiness([report(name="a")], now=NOW, grace=30)["status"] == "ready"
