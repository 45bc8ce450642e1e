"""What an observer needs to know of one sink (``SinkReport``) and whether the sinks are ready.

``readiness(reports, now=..., grace=...)`` is the verdict ``/readyz`` serves; it is a pure
function of the reports, so it is tested without Spark:

* ``running`` is ready, unless data is waiting longer than its commit policy allows: staged
  files older than MAXIMUM PERIOD + grace (grace alone when every micro-batch commits; a sink
  with only MINIMUM SIZE has no time bound), or a source backlog (files not read yet, a Kafka
  source's lag) with no commit for as long;
* ``retrying`` (and ``starting`` again within a failure streak) is ready only within ``grace``
  seconds of the streak's first failure: a blip does not flap readiness, a catalog that stays
  away does;
* ``starting``, ``created``, ``stopped``, ``failed`` and ``fenced`` are not ready;
* an idle sink (nothing staged, nothing waiting) is ready however old its last commit is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

STATES: tuple[str, ...] = ("created", "starting", "running", "retrying", "stopped", "failed", "fenced")


@dataclass(frozen=True)
class SinkReport:
    """One sink as the observer sees it: live figures where it runs here, else the store's."""

    name: str
    table: str
    state: str
    rows_committed: int = 0  # the sink's lifetime totals (as SHOW SINK STATUS)
    bytes_committed: int = 0
    commits: int = 0
    last_commit_at: float | None = None  # epoch seconds of the last successful commit
    last_snapshot_id: int | None = None
    last_error: str | None = None
    retry_attempt: int = 0
    next_attempt_at: float | None = None
    retrying_since: float | None = None  # the first failure of the current streak
    staged_rows: int = 0
    staged_bytes: int = 0
    staged_files: int = 0
    staged_since: float | None = None  # when the oldest uncommitted staged batch was staged
    skipped_records: int = 0
    maximum_period: float | None = None  # the commit policy
    minimum_size: int | None = None
    backlog_files: int | None = None  # input the source has not read yet (None: not reported)
    backlog_bytes: int | None = None
    # KAFKA: {topic: {partition: records between the committed offset and the log end}}
    source_lag: dict[str, dict[int, int]] | None = None
    # a sink writing many tables (TABLE a template): each table's figures (over all its runs; lag live)
    # (table, rows_committed, bytes_committed, commits, last_commit_at, last_error)
    tables: list[dict[str, Any]] | None = None

    @property
    def lag_records(self) -> int:
        """Records the table is behind its Kafka source, all partitions (0: none or not known)."""
        return sum(n for parts in (self.source_lag or {}).values() for n in parts.values())

    def commit_deadline(self, grace: float) -> float | None:
        """How long waiting data may stay uncommitted (None: no bound)."""
        if self.maximum_period is not None:
            return self.maximum_period + grace
        if self.minimum_size is not None:
            return None  # commits when enough is staged: any wait is legitimate
        return grace  # every micro-batch commits at once


@dataclass(frozen=True)
class SinkVerdict:
    name: str
    state: str
    ready: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "ready": self.ready, "reason": self.reason}


def judge(report: SinkReport, *, now: float, grace: float) -> SinkVerdict:
    """Whether one sink is ready, and why (not)."""
    r = report

    def verdict(ready: bool, reason: str) -> SinkVerdict:
        return SinkVerdict(r.name, r.state, ready, reason)

    if r.state == "retrying" or (r.state == "starting" and r.retrying_since is not None):
        since = r.retrying_since if r.retrying_since is not None else now
        if r.state == "starting":
            nxt = ", restarting now"
        elif r.next_attempt_at is not None:
            nxt = f", next in {max(0.0, r.next_attempt_at - now):.0f}s"
        else:
            nxt = ""
        what = f"retrying for {now - since:.0f}s (attempt {r.retry_attempt}{nxt}): {r.last_error or 'no error recorded'}"
        return verdict(now - since <= grace, what)
    if r.state in ("failed", "fenced"):
        return verdict(False, f"{r.state}: {r.last_error or 'no error recorded'}")
    if r.state != "running":
        return verdict(False, {"created": "not started", "starting": "starting"}.get(r.state, r.state))
    deadline = r.commit_deadline(grace)
    if deadline is not None and r.staged_files and r.staged_since is not None:
        waited = now - r.staged_since
        if waited > deadline:
            return verdict(
                False,
                f"{r.staged_files} staged file(s) waiting {waited:.0f}s for a commit (limit {deadline:g}s)",
            )
    if deadline is not None and (r.backlog_files or r.backlog_bytes or r.lag_records):
        quiet = now - r.last_commit_at if r.last_commit_at is not None else None
        if quiet is not None and quiet > deadline:
            return verdict(
                False, f"input waiting at the source and no commit for {quiet:.0f}s (limit {deadline:g}s)"
            )
    if r.staged_files:
        return verdict(True, f"running, {r.staged_files} staged file(s) waiting for the commit policy")
    return verdict(True, "running")


def readiness(reports: Sequence[SinkReport], *, now: float, grace: float) -> dict[str, Any]:
    """The ``/readyz`` body: ``ready`` when every sink is (and there is at least one)."""
    verdicts = [judge(r, now=now, grace=grace) for r in reports]
    ready = bool(verdicts) and all(v.ready for v in verdicts)
    body: dict[str, Any] = {
        "status": "ready" if ready else "not ready",
        "sinks": [v.to_dict() for v in verdicts],
    }
    if not ready:
        body["reasons"] = [f"sink {v.name}: {v.reason}" for v in verdicts if not v.ready] or [
            "no sink is running in this process"
        ]
    return body


__all__ = ["STATES", "SinkReport", "SinkVerdict", "judge", "readiness"]
