"""``ObserveServer``: the HTTP endpoints of a process running sinks, on a daemon thread.

=================  ========================================================================
``/metrics``       Prometheus text format (OpenMetrics when the scraper asks for it)
``/healthz``       200 ``{"status": "ok"}`` while the process answers
``/readyz``        200 when every sink is ready, else 503; the JSON body says why (``health``)
``/``              the status page (``status.html``: one file, no external assets)
``/status.json``   what the status page shows: each sink's state, figures and last commits
=================  ========================================================================

Loopback by default: the figures are not secret, but nothing here is authenticated.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from icesql.observe.health import SinkReport, judge, readiness
from icesql.observe.metrics import SinkMetrics

log = logging.getLogger("icesql.observe")

DEFAULT_HOST = "127.0.0.1"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    observer: ObserveServer


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "icesql"

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        observer = self.server.observer
        path = self.path.split("?", 1)[0]
        try:
            if path == "/metrics":
                body, content_type = observer.metrics.exposition(self.headers.get("Accept"))
                self._send(200, body, content_type)
            elif path == "/healthz":
                self._json(200, {"status": "ok"})
            elif path == "/readyz":
                verdict = observer.readiness()
                self._json(200 if verdict["status"] == "ready" else 503, verdict)
            elif path in ("/", "/index.html"):
                self._send(200, observer.page, "text/html; charset=utf-8")
            elif path == "/status.json":
                self._json(200, observer.status())
            else:
                self._json(404, {"error": f"no such page: {path}"})
        except BrokenPipeError:  # the client went away
            pass
        except Exception:  # an observer never takes the process down
            log.exception("observe: %s failed", path)
            self._json(500, {"error": "internal error; see the icesql log"})

    def _json(self, status: int, doc: Any) -> None:
        self._send(status, json.dumps(doc, indent=1).encode(), "application/json")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        log.debug("observe: " + format, *args)


class ObserveServer:
    """Serves ``metrics`` and the readiness of ``reports()`` on ``host:port`` (0: any free port)."""

    def __init__(
        self,
        metrics: SinkMetrics,
        reports: Callable[[], Sequence[SinkReport]],
        *,
        host: str = DEFAULT_HOST,
        port: int = 0,
        grace: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.metrics = metrics
        self.reports = reports
        self.grace = grace
        self.clock = clock
        self.page = resources.files("icesql.observe").joinpath("status.html").read_bytes()
        cls = _Server6 if ":" in host else _Server
        self._httpd = cls((host, port), _Handler)
        self._httpd.observer = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="icesql-observe", daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = str(self._httpd.server_address[0])
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    def start(self) -> ObserveServer:
        self._thread.start()
        log.info(
            "metrics on %s/metrics, health on /healthz and /readyz, status page on %s/", self.url, self.url
        )
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def readiness(self) -> dict[str, Any]:
        return readiness(self.reports(), now=self.clock(), grace=self.grace)

    def status(self) -> dict[str, Any]:
        """The status page's data."""
        now = self.clock()
        reports = list(self.reports())
        sinks = []
        for r in reports:
            verdict = judge(r, now=now, grace=self.grace)
            sinks.append(
                {
                    **asdict(r),
                    "ready": verdict.ready,
                    "reason": verdict.reason,
                    "rows_per_second": round(self.metrics.throughput(r.name, now), 3),
                    "seconds_since_last_commit": None
                    if r.last_commit_at is None
                    else round(now - r.last_commit_at, 1),
                    "recent_commits": self.metrics.recent_commits(r.name),
                    "lag_records": r.lag_records if r.source_lag is not None else None,
                }
            )
        return {
            "now": now,
            "ready": readiness(reports, now=now, grace=self.grace)["status"] == "ready",
            "sinks": sinks,
        }


__all__ = ["DEFAULT_HOST", "ObserveServer"]
