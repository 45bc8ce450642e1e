"""A throwaway Spark standalone cluster (one Master, one Worker) on loopback, from the pip package.

The ``pyspark`` wheel ships Spark's jars, so both daemons start with plain ``java -cp jars/*``:

    with StandaloneCluster.start(tmp_path) as cluster:
        cluster.master_url   # spark://127.0.0.1:<port>, one registered worker

Both processes are started in their own process group and are terminated, then killed, on exit;
their logs are ``master.log`` / ``worker.log`` under the given directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any


class ClusterUnavailable(RuntimeError):
    pass


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(home),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_NO_DAEMONIZE="1",
        # bin/load-spark-env.sh sets it; without it the worker's launcher looks for a source
        # build ("Cannot find any build directories") when it builds an executor's command
        SPARK_SCALA_VERSION="2.13",
    )
    return env


class ConnectServer:
    """A Spark Connect server (``local[cores]`` inside) on ``sc://127.0.0.1:<port>``; log ``connect.log``.

    Its Python workers (``foreachBatch``, ``mapInArrow``) run this interpreter, as a deployment's
    server must run a Python with icesql installed."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.workdir = workdir
        self.home = spark_home()
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @classmethod
    def start(
        cls, workdir: Path, *, cores: int = 2, port: int | None = None, timeout: float = 90.0
    ) -> ConnectServer:
        java = java_binary()
        if java is None:
            raise ClusterUnavailable("java is not installed")
        workdir.mkdir(parents=True, exist_ok=True)
        c = cls(workdir, port)
        # bin/spark-submit, not plain java: its launcher adds the JVM module options
        # (--add-opens java.nio ...) that Arrow needs for mapInArrow on Java 17
        cmd = [
            str(c.home / "bin" / "spark-submit"),
            "--master", f"local[{cores}]",
            "--driver-memory", "1g",
            "--conf", f"spark.connect.grpc.binding.port={c.port}",
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", "spark.ui.enabled=false",
            "--conf", f"spark.pyspark.python={sys.executable}",
            "--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "spark-internal",
        ]  # fmt: skip
        log = open(workdir / "connect.log", "wb")  # noqa: SIM115 - closed with the process
        c.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=_env(c.home), start_new_session=True
        )
        log.close()
        try:
            deadline = time.monotonic() + timeout
            while True:
                if c.proc.poll() is not None:
                    raise ClusterUnavailable(f"the Connect server exited: {c.logs()}")
                try:
                    with socket.create_connection(("127.0.0.1", c.port), timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise ClusterUnavailable(f"the Connect server did not listen: {c.logs()}") from None
                    time.sleep(0.5)
        except BaseException:
            c.stop()
            raise
        return c

    def logs(self, *, full: bool = False) -> str:
        p = self.workdir / "connect.log"
        if not p.exists():
            return ""
        text = p.read_text(errors="replace")
        return text if full else text[-3000:]

    def stop(self) -> None:
        if self.proc is None:
            return
        _terminate([self.proc])
        self.proc = None

    def __enter__(self) -> ConnectServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _terminate(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each process group, SIGKILL what is still there after 10 s."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=10)


class StandaloneCluster:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.home = spark_home()
        self.port = free_port()
        self.master_ui = free_port()
        self.worker_ui = free_port()
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @classmethod
    def start(cls, workdir: Path, *, cores: int = 1, memory: str = "1g", timeout: float = 60.0) -> Any:
        java = java_binary()
        if java is None:
            raise ClusterUnavailable("java is not installed")
        workdir.mkdir(parents=True, exist_ok=True)
        c = cls(workdir)
        try:
            c._daemon(
                java,
                "master",
                "org.apache.spark.deploy.master.Master",
                ["--host", "127.0.0.1", "--port", str(c.port), "--webui-port", str(c.master_ui)],
            )
            c._wait_port(c.port, timeout)
            c._daemon(
                java,
                "worker",
                "org.apache.spark.deploy.worker.Worker",
                [
                    c.master_url,
                    "--host", "127.0.0.1",
                    "--cores", str(cores),
                    "--memory", memory,
                    "--webui-port", str(c.worker_ui),
                    "--work-dir", str(workdir / "work"),
                ],
            )  # fmt: skip
            c._wait_worker(timeout)
        except BaseException:
            c.stop()
            raise
        return c

    def _daemon(self, java: str, name: str, cls: str, args: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        cmd = [java, "-Xmx512m", "-cp", f"{self.home / 'jars'}/*", cls, *args]
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=_env(self.home), start_new_session=True
        )
        log.close()
        self.procs.append(proc)

    def _check_alive(self) -> None:
        for p in self.procs:
            if p.poll() is not None:
                raise ClusterUnavailable(f"a Spark daemon exited ({p.returncode}): {self.logs()}")

    def _wait_port(self, port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                time.sleep(0.3)
        raise ClusterUnavailable(f"the master did not listen on {port}: {self.logs()}")

    def _wait_worker(self, timeout: float) -> None:
        """Until the master's JSON status lists one ALIVE worker."""
        import json

        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.master_ui}/json/"
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    status = json.load(r)
                if any(w.get("state") == "ALIVE" for w in status.get("workers", [])):
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.5)
        raise ClusterUnavailable(f"no worker registered: {self.logs()}")

    def logs(self) -> str:
        out = []
        for name in ("master", "worker"):
            p = self.workdir / f"{name}.log"
            if p.exists():
                out.append(f"--- {name}.log (tail)\n" + p.read_text(errors="replace")[-3000:])
        return "\n".join(out)

    def stop(self) -> None:
        _terminate(list(reversed(self.procs)))  # worker first, then master
        self.procs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
