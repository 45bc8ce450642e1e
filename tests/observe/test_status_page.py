"""The status page of running sinks, opened in headless Chromium (Debian's package): every sink
is listed with its state, the commits are drawn, nothing reaches the console, and a screenshot
is kept in the test's directory (``status-page.png``)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

import icesql
from tests.support.chromium import chromium_binary, visit
from tests.support.pipeline_helpers import spark_for_tests, write_json_lines
from tests.support.require import requires

pytestmark = [
    pytest.mark.spark,
    requires(chromium_binary() is not None, "chromium is not installed (Debian: apt-get install chromium)"),
]


@pytest.fixture(scope="module")
def spark() -> Any:
    return spark_for_tests()


def wait_for(what: str, cond: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_the_status_page_lists_every_sink_with_its_state(spark: Any, tmp_path: Path) -> None:
    clicks, orders = tmp_path / "clicks", tmp_path / "orders"
    write_json_lines(clicks, "c1.json", [{"id": i, "url": f"/p/{i}"} for i in range(50)])
    write_json_lines(orders, "o1.json", ['{"id": 1, "amount": 9.5}', '{"id": "not a number", "amount": 1}'])
    with icesql.Session(home=tmp_path / "home", spark=spark) as s:
        s.execute(
            """
            CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = 'warehouse');
            CREATE SOURCE clicks FROM FILES 'clicks/' (FORMAT = 'json', SCHEMA = 'id BIGINT, url STRING');
            CREATE SOURCE orders FROM FILES 'orders/' (FORMAT = 'json', SCHEMA = 'id BIGINT, amount DOUBLE');
            CREATE SINK clicks_sink FROM clicks INTO ICEBERG CATALOG lake (NAMESPACE = 'web', TABLE = 'clicks');
            CREATE SINK orders_sink FROM orders INTO ICEBERG CATALOG lake (NAMESPACE = 'shop', TABLE = 'orders');
            """,
            base_dir=tmp_path,
        )
        url = s.serve_metrics()
        s.start()

        def states() -> dict[str, tuple[str, int]]:
            return {st.name: (st.state, st.commits) for st in s.status()}

        wait_for("a commit", lambda: states()["clicks_sink"] == ("running", 1))
        write_json_lines(clicks, "c2.json", [{"id": i, "url": f"/p/{i}"} for i in range(50, 80)])
        wait_for(
            "a second commit and a failure",
            lambda: states() == {"clicks_sink": ("running", 2), "orders_sink": ("failed", 0)},
        )

        page = visit(url + "/", "--dump-dom")
        card = r'<section class="sink" data-sink="([^"]+)">.*?<span class="state" data-state="[^"]+">([^<]+)</span>'
        shown = dict(re.findall(card, page.stdout, flags=re.S))
        assert shown == {"clicks_sink": "running", "orders_sink": "failed"}, page.stdout[:3000]
        assert "2 sinks — not ready" in page.stdout
        assert "<dt>rows committed</dt><dd>80</dd>" in page.stdout  # clicks_sink's two files
        assert re.search(r'<div class="reason bad">failed: bad record in source \'orders\'', page.stdout)
        assert len(re.findall(r'<rect class="bar"', page.stdout)) >= 2  # the last commits as a chart
        assert page.console == []  # no error, no uncaught exception, no failed load

        shot = tmp_path / "status-page.png"
        visit(url + "/", f"--screenshot={shot}", "--window-size=1200,800", "--hide-scrollbars")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
