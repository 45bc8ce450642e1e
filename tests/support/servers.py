"""The lifecycle shared by the test servers on loopback (``gcs``, ``azurite``, ``moto``, ``hive``,
``weed``).

A ``LoopbackServer`` subclass says how its server answers (``_ready``) and builds its command
line; ``_launch`` gives each try a fresh ``workdir`` and port, spawns the process in its own
process group with its output in ``log_path`` and waits until it is ready. ``halt()`` ends the
group (``kill()``: at once) and keeps the work directory; ``stop()`` halts and removes it unless
``keep_workdir``. ``serve`` is a session fixture's body.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest

LOOPBACK = "127.0.0.1"
_ATTEMPTS = 3

S = TypeVar("S", bound="LoopbackServer")


class ServerUnavailable(RuntimeError):
    """A test server is not installed or did not come up."""


def free_port() -> int:
    """A loopback port free right now (another process may take it before the server binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def http(
    method: str,
    url: str,
    data: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    *,
    timeout: float = 2.0,
) -> tuple[int, bytes]:
    """One request without proxies (loopback); an HTTP error status is returned, not raised."""
    req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)  # the group spawned with start_new_session: pgid == pid
    except ProcessLookupError:
        pass


@dataclass(kw_only=True)
class LoopbackServer:
    """A server process on 127.0.0.1 with a temporary work directory holding its log.

    A subclass names its server in messages (``name``), its work directory (``icesql-<slug>-*``),
    its log file and its error class as class keywords::

        class FakeGcs(LoopbackServer, name=..., slug=..., log_name=..., unavailable=...)
    """

    name: ClassVar[str]
    slug: ClassVar[str]
    log_name: ClassVar[str]
    unavailable: ClassVar[type[ServerUnavailable]]
    # False: the server binds port 0 and ``_ready`` learns it, or the command picks its own
    picks_port: ClassVar[bool] = True
    # what the log says (lower case) when a picked port was taken before the server could bind
    port_taken: ClassVar[tuple[str, ...]] = ("address already in use", "eaddrinuse")
    ready_errors: ClassVar[tuple[type[Exception], ...]] = (OSError,)  # "not yet" from ``_ready``
    stop_seconds: ClassVar[float] = 5.0  # SIGTERM's grace before SIGKILL

    workdir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    startup_seconds: float = 0.0
    keep_workdir: bool = False
    started_at: float = field(default_factory=time.monotonic, repr=False)
    env: Mapping[str, str] | None = field(default=None, repr=False)  # added to the server's environment

    def __init_subclass__(
        cls, *, name: str, slug: str, log_name: str, unavailable: type[ServerUnavailable], **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        cls.name, cls.slug, cls.log_name, cls.unavailable = name, slug, log_name, unavailable

    @property
    def authority(self) -> str:
        """``127.0.0.1:P`` (pyarrow's ``endpoint_override`` or storage authority, DuckDB's
        ``ENDPOINT``)."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / self.log_name

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    # ------------------------------------------------------------------ subclasses
    def _ready(self) -> str | None:
        """None once the server answers, else what it did (an exception in ``ready_errors``
        counts as not ready yet too)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def _launch(cls: type[S], command: Callable[[S], Sequence[str]], timeout: float, **fields: Any) -> S:
        """Build a server from ``fields``, spawn ``command(server)`` and wait ``timeout`` seconds
        for ``_ready``; when its log says a picked port was taken meanwhile (``port_taken``), try
        again (3 tries). ``command`` may pick ports itself (``picks_port = False``) and write
        files into ``server.workdir``. A server that does not come up is stopped."""
        for attempt in range(1, _ATTEMPTS + 1):
            server = cls(workdir=Path(tempfile.mkdtemp(prefix=f"icesql-{cls.slug}-")), **fields)
            if cls.picks_port:
                server.port = free_port()
            try:
                server._spawn(command(server))
                server._wait_until(server._ready, timeout)
                return server
            except BaseException as e:
                taken = any(m in server.log_text().lower() for m in cls.port_taken)
                server.stop()
                if not (isinstance(e, ServerUnavailable) and taken and attempt < _ATTEMPTS):
                    raise
        raise AssertionError("unreachable")

    def _spawn(self, cmd: Sequence[str]) -> None:
        """Start ``cmd`` in ``workdir`` in a new process group, output appended to ``log_path``;
        ``env`` adds to this process's environment."""
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.started_at = time.monotonic()
        try:
            self.process = subprocess.Popen(
                list(cmd),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                env={**os.environ, **self.env} if self.env else None,
                start_new_session=True,
            )
        finally:
            log.close()

    def _wait_until(self, check: Callable[[], str | None], timeout: float) -> None:
        """Poll ``check`` (as ``_ready``) until it returns None and set ``startup_seconds``;
        ``unavailable`` with the log's tail when the process exits, or after ``timeout``."""
        deadline = time.monotonic() + timeout
        last: str | None = "no answer yet"
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise self.unavailable(
                    f"{self.name} exited early; log {self.log_path}:\n{self.log_text()[-3000:]}"
                )
            try:
                last = check()
            except self.ready_errors as e:
                last = f"{type(e).__name__}: {e}"
            if last is None:
                self.startup_seconds = time.monotonic() - self.started_at
                return
            time.sleep(0.05)
        raise self.unavailable(
            f"{self.name} not ready after {timeout:.0f}s ({last}); log {self.log_path}:\n"
            f"{self.log_text()[-3000:]}"
        )

    def _end(self, grace: float | None) -> None:
        """End the process group: SIGTERM, then SIGKILL after ``grace`` seconds (None: SIGKILL
        at once); ``process`` becomes None."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        if grace is not None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
                return
            except subprocess.TimeoutExpired:
                pass
        _signal_group(proc, signal.SIGKILL)
        proc.wait(timeout=10)

    def kill(self) -> None:
        """SIGKILL the process group (a crash); the work directory stays."""
        self._end(None)

    def halt(self) -> None:
        """End the process group (SIGTERM, SIGKILL after ``stop_seconds``); the work directory
        stays."""
        self._end(self.stop_seconds)

    def stop(self) -> None:
        """``halt()`` and remove the work directory unless ``keep_workdir``."""
        self.halt()
        if not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(start: Callable[[], S], what: str) -> Iterator[S]:
    """A session fixture's body: ``start()`` (a failure, not a skip, when ``what`` does not come
    up), yield the server, stop it at the end."""
    try:
        server = start()
    except ServerUnavailable as e:
        pytest.fail(f"{what} did not start: {e}")
    try:
        yield server
    finally:
        server.stop()
