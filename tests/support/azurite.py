"""Start a throwaway azurite (the Azure Blob Storage emulator, from npm) on loopback.

``azurite-blob`` is looked for in this order: ``$ICESQL_AZURITE`` (its path), ``PATH``, then the
cache install ``~/.cache/icesql/azurite/node_modules/.bin/azurite-blob``. When none exists and
``npm`` does, ``npm install --prefix ~/.cache/icesql/azurite azurite@3`` runs once (under a file
lock, into a staging directory renamed into place; up to 5 minutes); ``.ci/run`` pre-installs it
the same way. Without npm, or when the install fails, the ``azurite`` fixture skips.

The server speaks plain HTTP on a free 127.0.0.1 port with telemetry off, stores blobs under a
temporary directory and writes its access log to ``Azurite.log_path``, both kept until
``stop()``. The account is azurite's well-known development account (``devstoreaccount1`` and
its public key); requests use path-style URLs (``http://127.0.0.1:P/devstoreaccount1/...``).

    with Azurite.start() as az:
        az.create_container("tables")
        az.endpoint, az.account_name, az.account_key, az.sas_token("tables"), az.pyarrow_fs(),
        az.fileio_properties(), az.connection_string

or the session fixture (tests marked ``azure``)::

    from tests.support.azurite import azurite  # noqa: F401
"""

from __future__ import annotations

import base64
import datetime as dt
import fcntl
import hashlib
import hmac
import os
import shutil
import subprocess
import tempfile
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.connections.stores.azure_rest import shared_key_headers
from tests.support.require import missing
from tests.support.servers import LOOPBACK, LoopbackServer, ServerUnavailable, http, serve

# azurite's well-known development account (public, documented by Microsoft)
ACCOUNT_NAME = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
SAS_VERSION = "2020-12-06"
CACHE_DIR = Path.home() / ".cache" / "icesql" / "azurite"
NPM_PACKAGE = "azurite@3"
INSTALL_TIMEOUT = 300.0


class AzuriteUnavailable(ServerUnavailable):
    """azurite is not installed and cannot be, or the server did not come up."""


# ---------------------------------------------------------------------- finding / installing
def _cached_binary() -> Path:
    return CACHE_DIR / "node_modules" / ".bin" / "azurite-blob"


def find_azurite() -> str | None:
    """``azurite-blob``: ``$ICESQL_AZURITE``, on PATH, or in the cache install; no install."""
    env = os.environ.get("ICESQL_AZURITE")
    if env:
        return env if Path(env).is_file() else None
    on_path = shutil.which("azurite-blob")
    if on_path:
        return on_path
    cached = _cached_binary()
    return str(cached) if cached.is_file() else None


def ensure_azurite() -> str:
    """``find_azurite()``, else install it with npm into the cache; ``AzuriteUnavailable`` with
    the reason when that is not possible."""
    found = find_azurite()
    if found:
        return found
    if os.environ.get("ICESQL_AZURITE"):
        raise AzuriteUnavailable(f"$ICESQL_AZURITE={os.environ['ICESQL_AZURITE']} is not a file")
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise AzuriteUnavailable(
            "npm/node are not on PATH (install Node.js, or set ICESQL_AZURITE to an azurite-blob)"
        )
    CACHE_DIR.parent.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR.parent / "azurite.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be installing: wait for it
        if _cached_binary().is_file():
            return str(_cached_binary())
        staging = Path(tempfile.mkdtemp(prefix="azurite.staging-", dir=CACHE_DIR.parent))
        log_path = staging.parent / "azurite-npm.log"
        try:
            with open(log_path, "wb") as log:
                rc = subprocess.run(
                    [npm, "install", "--prefix", str(staging), "--no-audit", "--no-fund", NPM_PACKAGE],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    timeout=INSTALL_TIMEOUT,
                    env={**os.environ, "npm_config_update_notifier": "false"},
                ).returncode
            if rc != 0 or not (staging / "node_modules" / ".bin" / "azurite-blob").is_file():
                tail = log_path.read_text(errors="replace")[-800:]
                raise AzuriteUnavailable(f"`npm install {NPM_PACKAGE}` failed (exit {rc}): {tail}")
            shutil.rmtree(CACHE_DIR, ignore_errors=True)  # a broken earlier install
            os.rename(staging, CACHE_DIR)
        except subprocess.TimeoutExpired as e:
            raise AzuriteUnavailable(
                f"`npm install {NPM_PACKAGE}` took over {INSTALL_TIMEOUT:.0f}s; log {log_path}"
            ) from e
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return str(_cached_binary())


# ---------------------------------------------------------------------- HTTP with a shared key
def _sign(key: str, text: str) -> str:
    return base64.b64encode(hmac.new(base64.b64decode(key), text.encode(), hashlib.sha256).digest()).decode()


def _shared_key_request(
    method: str, url: str, *, account: str, key: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """One Blob-service request signed with the account key (Shared Key, icesql's signer)."""
    hdrs = dict(headers or {})
    send_body = bool(body) or method in ("PUT", "POST")
    if body:
        hdrs["Content-Length"] = str(len(body))
    if send_body and not any(k.lower() == "content-type" for k in hdrs):
        hdrs["Content-Type"] = "application/octet-stream"  # urllib would add a form type unsigned
    signed = shared_key_headers(method, url, account=account, key=key, headers=hdrs)
    return http(method, url, body if send_body else None, signed, timeout=3)


def container_sas(
    account: str, key: str, container: str, *, permissions: str = "racwdl", hours: float = 24.0
) -> str:
    """A service SAS for one container (query string without ``?``), signed by hand (HMAC)."""
    expiry = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
    string_to_sign = "\n".join(
        [
            permissions,  # sp
            "",  # st
            expiry,  # se
            f"/blob/{account}/{container}",  # canonicalized resource
            "",  # si
            "",  # sip
            "",  # spr
            SAS_VERSION,  # sv
            "c",  # sr
            "",  # snapshot time
            "",  # encryption scope
            "", "", "", "", "",  # rscc rscd rsce rscl rsct
        ]
    )  # fmt: skip
    return urllib.parse.urlencode(
        {"sv": SAS_VERSION, "sr": "c", "sp": permissions, "se": expiry, "sig": _sign(key, string_to_sign)}
    )


def pyarrow_sas(token: str) -> str:
    """``token`` with a leading ``?``: pyarrow (26) appends its ``sas_token`` to the account URL
    as is, so a bare ``sv=...`` lands in the path and every request fails (HTTP 400)."""
    return token if token.startswith("?") else "?" + token


# ---------------------------------------------------------------------- the server
@dataclass(kw_only=True)
class Azurite(
    LoopbackServer, name="azurite", slug="azurite", log_name="azurite.log", unavailable=AzuriteUnavailable
):
    """A running ``azurite-blob``; build it with ``Azurite.start()``."""

    account_name: str = ACCOUNT_NAME
    account_key: str = field(default=ACCOUNT_KEY, repr=False)

    @property
    def endpoint(self) -> str:
        """The blob endpoint, ``http://127.0.0.1:P/devstoreaccount1``."""
        return f"http://{self.authority}/{self.account_name}"

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={self.account_name};"
            f"AccountKey={self.account_key};BlobEndpoint={self.endpoint};"
        )

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def start(cls, *, timeout: float = 30.0, keep_workdir: bool = False) -> Azurite:
        """Start azurite (installing it first if needed: see the module docstring)."""
        binary = ensure_azurite()
        return cls._launch(lambda server: server._command(binary), timeout, keep_workdir=keep_workdir)

    def _command(self, binary: str) -> list[str]:
        return [
            binary,  # the .bin shim is a script with a node shebang: the process is node itself
            "--blobHost", LOOPBACK,
            "--blobPort", str(self.port),
            "--location", str(self.workdir / "data"),
            "--skipApiVersionCheck",
            "--loose",
            "--disableTelemetry",  # otherwise it reports to the internet
        ]  # fmt: skip

    def _ready(self) -> str | None:
        """The account answers an authenticated List Containers."""
        status, body = self._request("GET", f"{self.endpoint}?comp=list")
        return None if status == 200 else f"answered {status}: {body[:200]!r}"

    # ------------------------------------------------------------------ containers and clients
    def _request(self, method: str, url: str, **kwargs: Any) -> tuple[int, bytes]:
        return _shared_key_request(method, url, account=self.account_name, key=self.account_key, **kwargs)

    def create_container(self, name: str) -> None:
        """Create container ``name`` (3-63 characters: a-z, 0-9, -); an existing one is kept."""
        status, body = self._request("PUT", f"{self.endpoint}/{name}?restype=container")
        if status not in (201, 409):
            raise AzuriteUnavailable(f"creating container {name!r} answered {status}: {body[:300]!r}")

    def sas_token(self, container: str, *, permissions: str = "racwdl", hours: float = 24.0) -> str:
        """A service SAS for ``container`` (``sv=...&sig=...``, no leading ``?``)."""
        return container_sas(
            self.account_name, self.account_key, container, permissions=permissions, hours=hours
        )

    def pyarrow_fs(self, *, sas_token: str | None = None) -> Any:
        """A ``pyarrow.fs.AzureFileSystem`` on this server: the account key, or ``sas_token``
        (given a leading ``?`` here: see ``pyarrow_sas``)."""
        from pyarrow.fs import AzureFileSystem

        auth = {"sas_token": pyarrow_sas(sas_token)} if sas_token else {"account_key": self.account_key}
        return AzureFileSystem(
            account_name=self.account_name,
            blob_storage_authority=self.authority,
            blob_storage_scheme="http",
            dfs_storage_authority=self.authority,
            dfs_storage_scheme="http",
            **auth,
        )

    def fileio_properties(self, *, sas_token: str | None = None) -> dict[str, str]:
        """Properties for pyiceberg's ``PyArrowFileIO`` (``abfs://container/path`` locations; not
        ``container@account.dfs.core.windows.net``: pyiceberg 0.12 keeps that host in the path),
        forcing it: pyiceberg otherwise picks its fsspec FileIO (adlfs) for abfs/wasb."""
        props = {
            "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
            "adls.account-name": self.account_name,
            "adls.blob-storage-authority": self.authority,
            "adls.blob-storage-scheme": "http",
            "adls.dfs-storage-authority": self.authority,
            "adls.dfs-storage-scheme": "http",
        }
        if sas_token:
            props["adls.sas-token"] = pyarrow_sas(sas_token)
        else:
            props["adls.account-key"] = self.account_key
        return props


@pytest.fixture(scope="session")
def azurite() -> Iterator[Azurite]:
    """A running azurite blob service on loopback for the whole run; skips without npm."""
    try:
        ensure_azurite()
    except AzuriteUnavailable as e:
        missing(f"azurite needs npm: {e}")
    yield from serve(Azurite.start, "azurite")
