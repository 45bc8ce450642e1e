"""Prometheus metrics of the sinks one process runs, built with ``prometheus_client``.

``SinkMetrics`` is two things on one private ``CollectorRegistry``:

* a ``SinkListener`` (``Engine.add_listener``): every commit, failure and state change
  increments counters and the commit-duration histogram. These count from the start of the
  process (Prometheus' ``rate()`` and ``increase()`` handle the reset at a restart);
* a collector that reads the sinks' reports (``health.SinkReport``) at scrape time for the
  gauges: state, staged data, commit lag, seconds since the last commit, retry attempt,
  readiness, and the lifetime count of skipped records.

Labels are the sink's name (``sink``) and small closed sets (``reason``, ``type``, ``state``);
the table identifier appears only in ``icesql_sink_info``. No label carries an error message, a
URL or anything else a user typed into a connection, so no secret can reach a label.
Every metric is listed on the documentation site (docs/manual/operations/metrics.md).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.process_collector import ProcessCollector

from icesql.engine.base.events import CommitEvent, FailureEvent, MaintenanceEvent, StateEvent
from icesql.engine.sources.guard import REASONS as DEAD_LETTER_REASONS
from icesql.observe.health import STATES, SinkReport, judge

REASONS: tuple[str, ...] = ("batch", "size", "period", "flush", "shutdown", "recovery", "maintenance")
# commit durations: a local catalog commits in ~50 ms, a remote REST catalog in 0.1-2 s
DURATION_BUCKETS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
HISTORY = 60  # commits kept per sink for the status page
MAINTENANCE_STEPS = ("compact", "expire", "remove-metadata", "remove-orphans", "rewrite-manifests")
THROUGHPUT_WINDOW = 60.0  # seconds over which the status page's rows/s is averaged


class SinkMetrics:
    """The metrics of the sinks ``reports()`` describes; register it with ``Engine.add_listener``."""

    def __init__(
        self,
        reports: Callable[[], Sequence[SinkReport]],
        *,
        grace: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.reports = reports
        self.grace = grace
        self.clock = clock
        self.registry = CollectorRegistry()
        self._lock = threading.Lock()
        self._history: dict[str, deque[dict[str, Any]]] = {}
        # registered first: it also creates the zero series of every sink it reports, before the
        # counters below are collected in the same scrape
        self.registry.register(_StatusCollector(self))
        r = self.registry
        self.rows = Counter(
            "icesql_sink_rows_committed",
            "Rows committed to the sink's table (data files).",
            ["sink"],
            registry=r,
        )
        self.deletes = Counter(
            "icesql_sink_deletes_committed",
            "Delete records committed (MODE UPSERT): position deletes, one per row replaced or deleted "
            "(the default), or equality deletes, one per key (DELETE MODE = 'equality').",
            ["sink"],
            registry=r,
        )
        self.bytes = Counter(
            "icesql_sink_committed_bytes", "Bytes of data and delete files committed.", ["sink"], registry=r
        )
        self.data_files = Counter(
            "icesql_sink_data_files_committed", "Data files committed.", ["sink"], registry=r
        )
        self.delete_files = Counter(
            "icesql_sink_delete_files_committed",
            "Delete files committed (MODE UPSERT): position-delete or equality-delete files.",
            ["sink"],
            registry=r,
        )
        self.commits = Counter(
            "icesql_sink_commits",
            "Iceberg commits, by what triggered them (batch, size, period, flush, shutdown, recovery, maintenance).",
            ["sink", "reason"],
            registry=r,
        )
        self.duration = Histogram(
            "icesql_sink_commit_duration_seconds",
            "Time a commit took, the catalog's answer included.",
            ["sink"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.conflicts = Counter(
            "icesql_sink_commit_conflicts",
            "Commit conflicts with another writer, retried after reloading the table.",
            ["sink"],
            registry=r,
        )
        self.failures = Counter(
            "icesql_sink_failures",
            "Sink failures (a write, a commit or a start), by error type.",
            ["sink", "type"],
            registry=r,
        )
        self.fenced = Counter(
            "icesql_sink_fenced", "Times the sink was fenced out by a newer runner.", ["sink"], registry=r
        )
        self.restarts = Counter(
            "icesql_sink_restarts",
            "Restarts scheduled after a transient failure (the sink went to 'retrying').",
            ["sink"],
            registry=r,
        )
        self.dead_lettered = Counter(
            "icesql_sink_records_dead_lettered",
            "Bad records committed to the sink's dead-letter table (ON ERROR = 'dead-letter'), by reason.",
            ["sink", "reason"],
            registry=r,
        )
        self.maintenance = Counter(
            "icesql_sink_maintenance_runs",
            "Table maintenance steps the running sink made, by step (compact, expire, remove-metadata, remove-orphans, rewrite-manifests).",
            ["sink", "step"],
            registry=r,
        )
        # a sink writing many tables (TABLE a template, issue 53): each table's own figures
        self.table_rows = Counter(
            "icesql_table_rows_committed",
            "Rows committed to each table of the sink (data files); a sink writing many tables has one per table.",
            ["sink", "table"],
            registry=r,
        )
        self.table_commits = Counter(
            "icesql_table_commits",
            "Iceberg commits to each table of the sink; a sink writing many tables has one per table.",
            ["sink", "table"],
            registry=r,
        )
        ProcessCollector(registry=r)

    # ----------------------------------------------------------------- SinkListener

    def on_commit(self, event: CommitEvent) -> None:
        for why, n in event.dead_letters.items():
            self.dead_lettered.labels(event.sink, why).inc(n)
        if event.skipped:  # a recovery found it committed already: nothing new in the table
            return
        s = event.sink
        self.rows.labels(s).inc(event.rows)
        self.deletes.labels(s).inc(event.deletes)
        self.bytes.labels(s).inc(event.bytes)
        self.data_files.labels(s).inc(event.data_files)
        self.delete_files.labels(s).inc(event.delete_files)
        self.commits.labels(s, event.reason).inc()
        self.table_rows.labels(s, event.table).inc(event.rows)
        self.table_commits.labels(s, event.table).inc()
        self.duration.labels(s).observe(event.duration)
        if event.attempts > 1:
            self.conflicts.labels(s).inc(event.attempts - 1)
        with self._lock:
            self._history.setdefault(s, deque(maxlen=HISTORY)).append(
                {
                    "at": self.clock(),
                    "rows": event.rows,
                    "deletes": event.deletes,
                    "bytes": event.bytes,
                    "files": event.data_files + event.delete_files,
                    "reason": event.reason,
                    "duration": round(event.duration, 3),
                    "snapshot_id": event.snapshot_id,
                }
            )

    def on_failure(self, event: FailureEvent) -> None:
        self.failures.labels(event.sink, event.kind).inc()
        if event.kind == "FencedError":
            self.fenced.labels(event.sink).inc()

    def on_state(self, event: StateEvent) -> None:
        if event.state == "retrying":
            self.restarts.labels(event.sink).inc()

    def on_maintenance(self, event: MaintenanceEvent) -> None:
        self.maintenance.labels(event.sink, event.step).inc()

    # ----------------------------------------------------------------- reading

    def track(self, names: Iterable[str]) -> None:
        """Create the zero series of these sinks (a counter that has never moved is still there)."""
        for name in names:
            for counter in (
                self.rows,
                self.deletes,
                self.bytes,
                self.data_files,
                self.delete_files,
                self.conflicts,
                self.fenced,
                self.restarts,
            ):
                counter.labels(name)
            for why in DEAD_LETTER_REASONS:
                self.dead_lettered.labels(name, why)
            for step in MAINTENANCE_STEPS:
                self.maintenance.labels(name, step)
            for reason in REASONS:
                self.commits.labels(name, reason)
            self.duration.labels(name)

    def recent_commits(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._history.get(name, ()))

    def throughput(self, name: str, now: float) -> float:
        """Rows per second committed over the last minute."""
        rows = sum(int(c["rows"]) for c in self.recent_commits(name) if now - c["at"] <= THROUGHPUT_WINDOW)
        return rows / THROUGHPUT_WINDOW

    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """The scrape body and its content type (OpenMetrics when the scraper asks for it)."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


class _StatusCollector:
    """The gauges, read from the sinks' reports at each scrape."""

    def __init__(self, metrics: SinkMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return []  # unchecked: the series depend on the sinks of the moment

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        reports = list(m.reports())
        now = m.clock()
        m.track(r.name for r in reports)
        info = GaugeMetricFamily(
            "icesql_sink_info", "The sink and its table (always 1).", labels=["sink", "table"]
        )
        state = GaugeMetricFamily(
            "icesql_sink_state", "1 for the sink's current state, 0 for the others.", labels=["sink", "state"]
        )
        ready = GaugeMetricFamily(
            "icesql_sink_ready", "1 when the sink counts as ready for /readyz.", labels=["sink"]
        )
        staged_rows = GaugeMetricFamily(
            "icesql_sink_staged_rows", "Rows written and staged, waiting for a commit.", labels=["sink"]
        )
        staged_bytes = GaugeMetricFamily(
            "icesql_sink_staged_bytes", "Bytes of files staged, waiting for a commit.", labels=["sink"]
        )
        staged_files = GaugeMetricFamily(
            "icesql_sink_staged_files", "Files staged, waiting for a commit.", labels=["sink"]
        )
        lag = GaugeMetricFamily(
            "icesql_sink_commit_lag_seconds",
            "How long the oldest staged, uncommitted batch has waited (0 when nothing is staged).",
            labels=["sink"],
        )
        backlog_files = GaugeMetricFamily(
            "icesql_sink_source_backlog_files", "Input files the source has not read yet.", labels=["sink"]
        )
        backlog_bytes = GaugeMetricFamily(
            "icesql_sink_source_backlog_bytes", "Input bytes the source has not read yet.", labels=["sink"]
        )
        last_commit = GaugeMetricFamily(
            "icesql_sink_last_commit_timestamp_seconds",
            "When the sink last committed successfully (Unix time).",
            labels=["sink"],
        )
        since_commit = GaugeMetricFamily(
            "icesql_sink_seconds_since_last_commit",
            "Seconds since the sink last committed successfully.",
            labels=["sink"],
        )
        attempt = GaugeMetricFamily(
            "icesql_sink_retry_attempt",
            "The restart attempt of the current failure streak (0: not failing).",
            labels=["sink"],
        )
        source_lag = GaugeMetricFamily(
            "icesql_source_lag_records",
            "KAFKA sources: records between the offset the table holds and the partition's log end.",
            labels=["sink", "topic", "partition"],
        )
        skipped = CounterMetricFamily(
            "icesql_sink_records_skipped",
            "Bad records skipped (ON ERROR = 'skip'), changes dropped for a null KEY and Kafka records "
            "lost to retention (ON DATA LOSS = 'continue'), over the sink's life.",
            labels=["sink"],
        )
        # each table of a sink writing many tables (TABLE a template, issue 53)
        table_lag = GaugeMetricFamily(
            "icesql_table_commit_lag_seconds",
            "How long the table's oldest staged, uncommitted data has waited (0 when nothing is staged).",
            labels=["sink", "table"],
        )
        table_last_commit = GaugeMetricFamily(
            "icesql_table_last_commit_timestamp_seconds",
            "When the sink last committed to the table (Unix time).",
            labels=["sink", "table"],
        )
        table_failing = GaugeMetricFamily(
            "icesql_table_failing",
            "1 when the table's last write or commit failed (SHOW SINK STATUS has the error), else 0.",
            labels=["sink", "table"],
        )
        for r in reports:
            s = [r.name]
            info.add_metric([r.name, r.table], 1)
            for t in r.tables or ():
                labels = [r.name, str(t.get("table"))]
                table_lag.add_metric(labels, float(t.get("lag") or 0.0))
                if t.get("last_commit_at") is not None:
                    table_last_commit.add_metric(labels, float(t["last_commit_at"]))
                table_failing.add_metric(labels, 1 if t.get("last_error") else 0)
            for st in STATES:
                state.add_metric([r.name, st], 1 if r.state == st else 0)
            ready.add_metric(s, 1 if judge(r, now=now, grace=m.grace).ready else 0)
            staged_rows.add_metric(s, r.staged_rows)
            staged_bytes.add_metric(s, r.staged_bytes)
            staged_files.add_metric(s, r.staged_files)
            lag.add_metric(s, max(0.0, now - r.staged_since) if r.staged_files and r.staged_since else 0.0)
            if r.backlog_files is not None:
                backlog_files.add_metric(s, r.backlog_files)
            if r.backlog_bytes is not None:
                backlog_bytes.add_metric(s, r.backlog_bytes)
            if r.last_commit_at is not None:
                last_commit.add_metric(s, r.last_commit_at)
                since_commit.add_metric(s, max(0.0, now - r.last_commit_at))
            attempt.add_metric(s, r.retry_attempt)
            for topic, parts in (r.source_lag or {}).items():
                for p, n in parts.items():
                    source_lag.add_metric([r.name, topic, str(p)], n)
            skipped.add_metric(s, r.skipped_records)
        yield from (info, state, ready, staged_rows, staged_bytes, staged_files, lag)
        yield from (backlog_files, backlog_bytes, last_commit, since_commit, attempt, skipped, source_lag)
        yield from (table_lag, table_last_commit, table_failing)


__all__ = ["DURATION_BUCKETS", "REASONS", "SinkMetrics"]
