"""A throwaway Prometheus server (Debian's ``prometheus`` package) scraping given targets.

Loopback only, a scrape interval of 1 s, storage in a temporary directory removed by ``stop()``;
queries go through Prometheus' HTTP API (``/api/v1/query``).

    with PrometheusServer.start(["127.0.0.1:9464"]) as prom:
        prom.value('icesql_sink_rows_committed_total{sink="s"}')
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"


class PrometheusUnavailable(RuntimeError):
    """The binary is missing or the server did not come up."""


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxies
    try:
        with opener.open(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@dataclass
class PrometheusServer:
    port: int
    workdir: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "prometheus.log"

    @classmethod
    def start(cls, targets: list[str], *, timeout: float = 30.0) -> PrometheusServer:
        binary = prometheus_binary()
        if binary is None:
            raise PrometheusUnavailable("prometheus is not installed (apt-get install prometheus)")
        workdir = Path(tempfile.mkdtemp(prefix="icesql-prometheus-"))
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: icesql\n    scrape_interval: 1s\n    scrape_timeout: 1s\n"
            f"    static_configs:\n      - targets: {json.dumps(targets)}\n"
        )
        server = cls(port=free_port(), workdir=workdir)
        log = open(server.log_path, "wb")  # noqa: SIM115 - handed to the child
        try:
            server.process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address={LOOPBACK}:{server.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=workdir,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                text = server.log_path.read_text(errors="replace")
                server.stop()
                raise PrometheusUnavailable(f"prometheus exited early:\n{text[-2000:]}")
            try:
                if http_get(server.url + "/-/ready", timeout=1)[0] == 200:
                    return server
            except OSError:
                pass
            time.sleep(0.1)
        server.stop()
        raise PrometheusUnavailable(f"prometheus not ready after {timeout:.0f}s")

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The result vector of an instant query."""
        status, body = http_get(f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")
        doc = json.loads(body)
        if status != 200 or doc.get("status") != "success":
            raise AssertionError(f"query {expr!r} failed: {status} {body[:300]!r}")
        return list(doc["data"]["result"])

    def value(self, expr: str) -> float | None:
        """The single value of ``expr`` (None when it has no sample)."""
        result = self.query(expr)
        if not result:
            return None
        assert len(result) == 1, result
        return float(result[0]["value"][1])

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> PrometheusServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
