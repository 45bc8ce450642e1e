"""The HTTP endpoints on a real socket, over reports that change between requests (no Spark)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from icesql.observe.health import SinkReport
from tests.support.require import require, require_module

require_module("prometheus_client", "prometheus_client is not installed (pip install 'icesql[metrics]')")
from icesql.observe.metrics import SinkMetrics  # noqa: E402
from icesql.observe.server import ObserveServer  # noqa: E402

NOW = 1_800_000_000.0


class Sinks:
    def __init__(self) -> None:
        self.reports = [SinkReport("a", "ns.a", "running", rows_committed=5, last_commit_at=NOW - 2)]

    def __call__(self) -> list[SinkReport]:
        return list(self.reports)


@pytest.fixture
def served() -> Iterator[tuple[ObserveServer, Sinks]]:
    sinks = Sinks()
    metrics = SinkMetrics(sinks, grace=30, clock=lambda: NOW)
    server = ObserveServer(metrics, sinks, port=0, grace=30, clock=lambda: NOW).start()
    try:
        yield server, sinks
    finally:
        server.close()


def get(url: str) -> tuple[int, str, str]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=5) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def test_loopback_and_a_free_port(served: tuple[ObserveServer, Sinks]) -> None:
    server, _ = served
    assert server.url.startswith("http://127.0.0.1:") and server.port > 0


def test_metrics_healthz_readyz_and_the_page(served: tuple[ObserveServer, Sinks]) -> None:
    server, sinks = served
    status, ctype, text = get(server.url + "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    assert 'icesql_sink_state{sink="a",state="running"} 1.0' in text
    assert get(server.url + "/healthz")[::2] == (200, '{\n "status": "ok"\n}')
    status, ctype, text = get(server.url + "/readyz")
    assert status == 200 and ctype == "application/json" and json.loads(text)["status"] == "ready"

    sinks.reports = [*sinks.reports, SinkReport("b", "ns.b", "failed", last_error="bad record in f.json")]
    status, _, text = get(server.url + "/readyz")
    body: dict[str, Any] = json.loads(text)
    assert status == 503 and body["status"] == "not ready"
    assert body["reasons"] == ["sink b: failed: bad record in f.json"]
    healthz = get(server.url + "/healthz")[0]
    assert healthz == 200  # the process is alive all the same

    status, ctype, page = get(server.url + "/")
    assert status == 200 and ctype == "text/html; charset=utf-8"
    assert "status.json" in page and "<script>" in page
    # one file: no external script, style, font or image (the SVG namespace is a name, not a fetch)
    assert re.findall(r'(?:src|href)="([^"]*)"', page) == ["data:,"]
    assert re.findall(r"https?://[^\s\"']+", page) == ["http://www.w3.org/2000/svg"]
    status, _, text = get(server.url + "/status.json")
    doc = json.loads(text)
    assert status == 200 and doc["ready"] is False
    assert [(s["name"], s["state"], s["ready"]) for s in doc["sinks"]] == [
        ("a", "running", True),
        ("b", "failed", False),
    ]
    assert doc["sinks"][0]["seconds_since_last_commit"] == 2.0
    assert get(server.url + "/nope")[0] == 404


def test_status_json_and_the_page_show_a_kafka_sinks_lag(served: tuple[ObserveServer, Sinks]) -> None:
    """A Kafka sink's lag (records between its committed offsets and the log end) is in
    ``status.json`` and on the page, per partition on hover. (The reports are a stand-in: what is
    tested is what the page makes of them; the lag itself is measured against real brokers in
    ``tests/kafka/test_kafka_status.py``.)"""
    from tests.support.chromium import chromium_binary, visit

    server, sinks = served
    sinks.reports = [
        SinkReport("k", "ns.k", "running", last_commit_at=NOW - 2, source_lag={"events": {0: 1200, 1: 34}}),
        SinkReport("f", "ns.f", "running", last_commit_at=NOW - 2),
    ]
    doc = json.loads(get(server.url + "/status.json")[2])
    by_name = {s["name"]: s for s in doc["sinks"]}
    assert by_name["k"]["lag_records"] == 1234 and by_name["k"]["source_lag"] == {"events": {"0": 1200, "1": 34}}
    assert by_name["f"]["lag_records"] is None  # not a Kafka sink: no lag row
    require(chromium_binary() is not None, "chromium is not installed (Debian: apt-get install chromium): the page is not rendered")
    page = visit(server.url + "/", "--dump-dom")
    assert '<dt>source lag</dt><dd title="events[0] 1,200, events[1] 34">1,234 records</dd>' in page.stdout
    assert page.stdout.count("<dt>source lag</dt>") == 1
    assert page.console == []
