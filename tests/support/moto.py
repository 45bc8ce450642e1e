"""Start a throwaway moto server: AWS Glue Data Catalog, S3 and STS on one loopback port.

moto checks no credentials: any key pair is accepted (``MotoServer`` hands out dummy ones), STS
``AssumeRole`` succeeds for any role ARN and what it issues never expires. Glue's optimistic
locking is not emulated: ``UpdateTable`` ignores ``VersionId``. State lives in the server's memory
(``reset()`` clears it); the server log is in a temporary directory (``MotoServer.log_path``)
kept for debugging until ``stop()``.

    with MotoServer.start() as moto:
        moto.endpoint, moto.region, moto.access_key, moto.secret_key
        moto.create_bucket("icesql-warehouse")
        catalog = moto.glue_catalog(warehouse="s3://icesql-warehouse/wh")
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from tests.support.require import missing
from tests.support.servers import LOOPBACK, LoopbackServer, ServerUnavailable, http, serve
from tests.support.servers import free_port as free_port  # re-exported: this module's API

REGION = "us-east-1"


class MotoUnavailable(ServerUnavailable):
    """moto's server is not installed or did not come up."""


def moto_installed() -> bool:
    """moto with its server extra (flask) importable by this interpreter."""
    return importlib.util.find_spec("moto") is not None and importlib.util.find_spec("flask") is not None


@dataclass(kw_only=True)
class MotoServer(LoopbackServer, name="moto", slug="moto", log_name="moto.log", unavailable=MotoUnavailable):
    """A running ``python -m moto.server``; build it with ``MotoServer.start()``."""

    stop_seconds: ClassVar[float] = 8.0

    region: str = REGION
    access_key: str = "testing"  # moto accepts any keys
    secret_key: str = field(default="testing", repr=False)
    env: Mapping[str, str] | None = field(default_factory=lambda: {"PYTHONUNBUFFERED": "1"}, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://{self.authority}"

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def start(cls, *, timeout: float = 30.0) -> MotoServer:
        if not moto_installed():
            raise MotoUnavailable("moto's server is not installed (pip install 'moto[server]')")
        return cls._launch(
            lambda server: [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(server.port)],
            timeout,
        )

    def _ready(self) -> str | None:
        """S3's ListBuckets (``GET /``) answers 200."""
        status, _ = http("GET", self.endpoint + "/")
        return None if status == 200 else f"answered {status}"

    def reset(self) -> None:
        """Forget every bucket, database, table and role (moto's ``/moto-api/reset``)."""
        status, body = http("POST", self.endpoint + "/moto-api/reset", b"")
        if status != 200:
            raise MotoUnavailable(f"moto reset answered {status}: {body[:200]!r}")

    # ------------------------------------------------------------------ clients
    def client(self, service: str, **credentials: str) -> Any:
        """A boto3 client of ``service`` (``glue``, ``s3`` path-style, ``sts``) on this server;
        ``credentials``: boto3's ``aws_access_key_id`` etc. instead of the dummy keys."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=credentials.get("aws_access_key_id", self.access_key),
            aws_secret_access_key=credentials.get("aws_secret_access_key", self.secret_key),
            aws_session_token=credentials.get("aws_session_token"),
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
        )

    def create_bucket(self, name: str) -> str:
        """Create the S3 bucket ``name`` (3-63 characters) unless it exists; returns ``name``."""
        s3 = self.client("s3")
        try:
            s3.create_bucket(Bucket=name)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass
        return name

    def s3_properties(self) -> dict[str, str]:
        """FileIO properties for this server's S3 (path-style requests)."""
        return {
            "s3.endpoint": self.endpoint,
            "s3.access-key-id": self.access_key,
            "s3.secret-access-key": self.secret_key,
            "s3.region": self.region,
            "s3.force-virtual-addressing": "false",
        }

    def glue_properties(self) -> dict[str, str]:
        """pyiceberg ``GlueCatalog`` properties for this server's Glue, plus ``s3_properties()``."""
        return {
            "glue.endpoint": self.endpoint,
            "glue.region": self.region,
            "glue.access-key-id": self.access_key,
            "glue.secret-access-key": self.secret_key,
            **self.s3_properties(),
        }

    def glue_catalog(self, *, name: str = "glue", warehouse: str | None = None, **properties: str) -> Any:
        """A pyiceberg ``GlueCatalog`` on this server (``warehouse``: e.g. ``s3://bucket/wh``,
        the bucket made with ``create_bucket``); ``properties`` override ``glue_properties()``."""
        from pyiceberg.catalog.glue import GlueCatalog

        props = self.glue_properties()
        if warehouse is not None:
            props["warehouse"] = warehouse
        return GlueCatalog(name, **{**props, **properties})


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """A running moto server on loopback (Glue, S3, STS; any credentials accepted).

    One server for the whole run, started on first use (about 1-2 s); tests share its state, so
    each uses its own bucket and Glue database names. Tests that use it are marked ``glue``.
    Use it with ``from tests.support.moto import moto_server  # noqa: F401``.
    """
    if not moto_installed():
        missing("moto's server is not installed (pip install 'moto[server]')")
    yield from serve(MotoServer.start, "moto")
