"""The Prometheus exposition without Spark: the engine's events and the sinks' reports in,
names, labels and values out; Prometheus' own linter (``promtool check metrics``) agrees."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from icesql.engine.base.events import CommitEvent, FailureEvent, StateEvent
from icesql.observe.health import SinkReport
from icesql.observe.metrics import SinkMetrics
from tests.support.require import require_module, requires

require_module("prometheus_client", "prometheus_client is not installed (pip install 'icesql[metrics]')")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

NOW = 1_800_000_000.0
LEAKY_ERROR = "sink b: cannot connect at http://icesql:pw-x9@catalog.example.com: unreachable"


def reports() -> list[SinkReport]:
    return [
        SinkReport(
            name="orders_sink",
            table="sales.orders",
            state="running",
            rows_committed=1000,
            last_commit_at=NOW - 12.5,
            staged_rows=40,
            staged_bytes=4096,
            staged_files=2,
            staged_since=NOW - 3.0,
            skipped_records=7,
            maximum_period=10.0,
        ),
        SinkReport(
            name="b",
            table="ns.b",
            state="retrying",
            last_error=LEAKY_ERROR,
            retry_attempt=3,
            next_attempt_at=NOW + 4,
            retrying_since=NOW - 100,
        ),
    ]


def commit(sink: str, reason: str, rows: int, **kw: Any) -> CommitEvent:
    fields: dict[str, Any] = dict(
        sink=sink,
        table="sales.orders",
        reason=reason,
        rows=rows,
        deletes=0,
        bytes=rows * 10,
        data_files=1,
        delete_files=0,
        batches=1,
        progress=1,
        snapshot_id=42,
        duration=0.08,
        attempts=1,
        skipped=False,
    )
    fields.update(kw)
    return CommitEvent(**fields)


@pytest.fixture
def metrics() -> SinkMetrics:
    m = SinkMetrics(reports, grace=30.0, clock=lambda: NOW)
    m.on_commit(commit("orders_sink", "batch", 10))
    m.on_commit(commit("orders_sink", "period", 5, deletes=2, delete_files=1, duration=0.3, attempts=2))
    m.on_commit(commit("orders_sink", "recovery", 99, skipped=True))  # already in the table: not counted
    m.on_failure(FailureEvent("b", "CatalogUnavailableError", LEAKY_ERROR, True))
    m.on_failure(FailureEvent("orders_sink", "FencedError", "fenced", False))
    m.on_state(StateEvent("b", "failed"))
    m.on_state(StateEvent("b", "retrying"))
    return m


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return found[(name, frozenset(labels.items()))]


def test_counters_from_commit_failure_and_state_events(metrics: SinkMetrics) -> None:
    body, content_type = metrics.exposition()
    assert content_type.startswith("text/plain; version=0.0.4")
    found = samples(body.decode())
    o = {"sink": "orders_sink"}
    assert value(found, "icesql_sink_rows_committed_total", **o) == 15
    assert value(found, "icesql_sink_deletes_committed_total", **o) == 2
    assert value(found, "icesql_sink_committed_bytes_total", **o) == 150
    assert value(found, "icesql_sink_data_files_committed_total", **o) == 2
    assert value(found, "icesql_sink_delete_files_committed_total", **o) == 1
    assert value(found, "icesql_sink_commits_total", sink="orders_sink", reason="batch") == 1
    assert value(found, "icesql_sink_commits_total", sink="orders_sink", reason="period") == 1
    assert value(found, "icesql_sink_commits_total", sink="orders_sink", reason="recovery") == 0
    assert value(found, "icesql_sink_commit_duration_seconds_count", **o) == 2
    assert value(found, "icesql_sink_commit_duration_seconds_sum", **o) == pytest.approx(0.38)
    assert value(found, "icesql_sink_commit_duration_seconds_bucket", sink="orders_sink", le="0.1") == 1
    assert value(found, "icesql_sink_commit_duration_seconds_bucket", sink="orders_sink", le="0.5") == 2
    assert value(found, "icesql_sink_commit_conflicts_total", **o) == 1
    assert value(found, "icesql_sink_fenced_total", **o) == 1
    assert value(found, "icesql_sink_failures_total", sink="orders_sink", type="FencedError") == 1
    assert value(found, "icesql_sink_failures_total", sink="b", type="CatalogUnavailableError") == 1
    assert value(found, "icesql_sink_restarts_total", sink="b") == 1
    # zero series of every reason, before any dead letter
    assert (
        value(found, "icesql_sink_records_dead_lettered_total", sink="orders_sink", reason="malformed-json")
        == 0
    )
    assert value(found, "icesql_sink_maintenance_runs_total", sink="b", step="compact") == 0
    # a sink that never committed in this process still has its zero series
    assert value(found, "icesql_sink_rows_committed_total", sink="b") == 0
    assert value(found, "icesql_sink_commits_total", sink="b", reason="size") == 0


def test_dead_letters_count_by_reason() -> None:
    m = SinkMetrics(reports, grace=30.0, clock=lambda: NOW)
    m.on_commit(commit("orders_sink", "size", 3, dead_letters={"malformed-json": 2, "type-mismatch": 1}))
    m.on_commit(commit("orders_sink", "batch", 1, dead_letters={"malformed-json": 1}))
    found = samples(m.exposition()[0].decode())

    def dead(reason: str) -> float:
        return value(found, "icesql_sink_records_dead_lettered_total", sink="orders_sink", reason=reason)

    assert (dead("malformed-json"), dead("type-mismatch"), dead("debezium-op")) == (3, 1, 0)


def test_gauges_from_the_reports_at_scrape_time(metrics: SinkMetrics) -> None:
    found = samples(metrics.exposition()[0].decode())
    o = {"sink": "orders_sink"}
    assert value(found, "icesql_sink_info", sink="orders_sink", table="sales.orders") == 1
    assert value(found, "icesql_sink_state", sink="orders_sink", state="running") == 1
    assert value(found, "icesql_sink_state", sink="orders_sink", state="failed") == 0
    assert value(found, "icesql_sink_state", sink="b", state="retrying") == 1
    assert value(found, "icesql_sink_ready", **o) == 1
    assert value(found, "icesql_sink_ready", sink="b") == 0  # retrying for 100 s > 30 s of grace
    assert value(found, "icesql_sink_staged_rows", **o) == 40
    assert value(found, "icesql_sink_staged_bytes", **o) == 4096
    assert value(found, "icesql_sink_staged_files", **o) == 2
    assert value(found, "icesql_sink_commit_lag_seconds", **o) == 3.0
    assert value(found, "icesql_sink_commit_lag_seconds", sink="b") == 0.0
    assert value(found, "icesql_sink_last_commit_timestamp_seconds", **o) == NOW - 12.5
    assert value(found, "icesql_sink_seconds_since_last_commit", **o) == 12.5
    assert (
        "icesql_sink_seconds_since_last_commit",
        frozenset({("sink", "b")}),
    ) not in found  # never committed
    assert value(found, "icesql_sink_retry_attempt", sink="b") == 3
    assert value(found, "icesql_sink_records_skipped_total", **o) == 7
    # the source backlog is exposed once the source reports it
    assert not [k for k in found if k[0].startswith("icesql_sink_source_backlog")]


def test_no_label_carries_an_error_message_or_a_url(metrics: SinkMetrics) -> None:
    text = metrics.exposition()[0].decode()
    assert "pw-x9" not in text and "example.com" not in text and "://" not in text
    labels = {k for found in [samples(text)] for (_, ls) in found for k, _ in ls}
    assert labels <= {"sink", "table", "state", "reason", "type", "step", "le"}


def test_openmetrics_when_the_scraper_asks(metrics: SinkMetrics) -> None:
    body, content_type = metrics.exposition("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.decode().rstrip().endswith("# EOF")


@requires(shutil.which("promtool") is not None, "promtool (Debian package prometheus) is not installed")
def test_promtool_finds_nothing_to_lint(metrics: SinkMetrics) -> None:
    body = metrics.exposition()[0]
    out = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, timeout=30)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
