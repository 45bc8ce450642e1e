"""A Confluent Schema Registry stand-in for tests: the REST routes the clients call, in this process.

No registry server installs from the package indexes here (SPEC §5): the Java one needs Maven,
Karapace is not on PyPI. ``RegistryServer`` serves, on 127.0.0.1 and a free port, what
``confluent_kafka.schema_registry.SchemaRegistryClient`` (and its Avro, Protobuf and JSON
serializers) and icesql's ``RegistryClient`` call:

- ``POST /subjects/{s}/versions`` registers (the same schema under a subject keeps its id and
  version; the same schema anywhere keeps its id and GUID), ``POST /subjects/{s}`` looks up;
- ``GET /schemas/ids/{id}`` (``?subject=`` accepted), ``/schemas/guids/{guid}``, ``/schemas/types``;
- ``GET /subjects``, ``/subjects/{s}/versions``, ``/subjects/{s}/versions/{n|latest}``;
- ``GET`` / ``PUT /config`` and ``/config/{s}`` (compatibility: defaults, nothing enforced);
- Confluent's error bodies: ``{"error_code": 40401, "message": "Subject 'x' not found."}``.

Options: HTTP basic auth (``username``/``password``), TLS with a self-signed certificate made
with ``cryptography`` (``tls=True``; ``ca_pem`` is the certificate to trust), failure injection
(``fail_next(n, status)``), and ``stop()`` / ``start()`` on the same port with the schemas kept
(the registry down and back). ``requests`` records (method, path) of every request answered.

Fixtures: ``schema_registry`` (an open registry), ``secure_registry`` (basic auth + TLS); import
them into a conftest (``from tests.support.registry import schema_registry``).
"""

from __future__ import annotations

import base64
import datetime
import json
import ssl
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass
class _Schema:
    id: int
    guid: str
    schema_type: str  # AVRO | PROTOBUF | JSON
    schema: str
    references: list[dict[str, Any]]

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": self.schema}
        if self.schema_type != "AVRO":  # Confluent leaves schemaType out for Avro
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = self.references
        return out


@dataclass
class _State:
    schemas: dict[int, _Schema] = field(default_factory=dict)
    by_key: dict[tuple[str, str, str], int] = field(default_factory=dict)
    subjects: dict[str, list[int]] = field(default_factory=dict)  # subject -> schema id per version
    config: dict[str, str] = field(default_factory=dict)
    fail: list[int] = field(default_factory=list)  # statuses of the next requests to fail
    requests: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _canonical(schema_type: str, text: str) -> str:
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
        except ValueError:
            return text.strip()
    return text.strip()


class _Error(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        registry = self.server.registry
        state = registry.state
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        with state.lock:
            state.requests.append((method, path))
            failing = state.fail.pop(0) if state.fail else None
        if failing is not None:
            return self._reply(failing, {"error_code": failing * 100, "message": "injected failure"})
        if registry.username is not None and not self._authorized(registry):
            return self._reply(401, {"error_code": 401, "message": "Unauthorized"})
        try:
            body = json.loads(raw) if raw else None
            status, answer = self._route(method, path, query, body)
        except _Error as e:
            return self._reply(e.status, {"error_code": e.code, "message": e.message})
        except (ValueError, KeyError, TypeError) as e:
            return self._reply(422, {"error_code": 42201, "message": f"Invalid request: {e}"})
        self._reply(status, answer)

    def _authorized(self, registry: RegistryServer) -> bool:
        header = self.headers.get("Authorization") or ""
        if not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        except ValueError:
            return False
        return user == registry.username and password == registry.password

    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # ------------------------------------------------------------ routes

    def _route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        state = self.server.registry.state
        segs = [unquote(s) for s in path.strip("/").split("/")] if path != "/" else []
        with state.lock:
            if segs[:1] == ["config"]:
                return self._config(method, segs[1] if len(segs) > 1 else None, body)
            if method == "GET" and segs == ["schemas", "types"]:
                return 200, ["AVRO", "PROTOBUF", "JSON"]
            if method == "GET" and len(segs) == 3 and segs[:2] == ["schemas", "ids"]:
                found = state.schemas.get(int(segs[2]))
                if found is None:
                    raise _Error(404, 40403, "Schema not found")
                return 200, found.body()
            if method == "GET" and len(segs) == 3 and segs[:2] == ["schemas", "guids"]:
                found = next((s for s in state.schemas.values() if s.guid == segs[2]), None)
                if found is None:
                    raise _Error(404, 40403, "Schema not found")
                return 200, {**found.body(), "id": found.id, "guid": found.guid}
            if method == "GET" and segs == ["subjects"]:
                return 200, sorted(state.subjects)
            if segs[:1] == ["subjects"] and len(segs) >= 2:
                return self._subject(method, segs[1], segs[2:], body)
        raise _Error(404, 404, "HTTP 404 Not Found")

    def _config(self, method: str, subject: str | None, body: Any) -> tuple[int, Any]:
        state = self.server.registry.state
        key = subject or ""
        if method == "PUT":
            level = str(body["compatibility"]).upper()
            state.config[key] = level
            return 200, {"compatibility": level}
        level = state.config.get(key) or state.config.get("") or "BACKWARD"
        return 200, {"compatibilityLevel": level}

    def _subject(self, method: str, subject: str, rest: list[str], body: Any) -> tuple[int, Any]:
        state = self.server.registry.state
        versions = state.subjects.get(subject)
        if method == "POST" and rest == ["versions"]:
            return 200, self.server.registry.register_locked(subject, body)
        if method == "POST" and rest == []:
            if versions is None:
                raise _Error(404, 40401, f"Subject '{subject}' not found.")
            found = self.server.registry.find(body)
            if found is None or found.id not in versions:
                raise _Error(404, 40403, "Schema not found")
            return 200, self.server.registry.versioned(subject, versions.index(found.id) + 1, found)
        if versions is None:
            raise _Error(404, 40401, f"Subject '{subject}' not found.")
        if method == "GET" and rest == ["versions"]:
            return 200, list(range(1, len(versions) + 1))
        if method == "GET" and len(rest) == 2 and rest[0] == "versions":
            n = len(versions) if rest[1] in ("latest", "-1") else int(rest[1])
            if not 1 <= n <= len(versions):
                raise _Error(404, 40402, f"Version {rest[1]} not found.")
            return 200, self.server.registry.versioned(subject, n, state.schemas[versions[n - 1]])
        raise _Error(404, 404, "HTTP 404 Not Found")

class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    registry: RegistryServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that distrusts the certificate, or hangs up: its test says what it expects


class RegistryServer:
    """The stand-in: ``url``, ``start()``, ``stop()``, ``fail_next()``, ``register()``."""

    def __init__(
        self,
        *,
        username: str | None = None,
        password: str | None = None,
        tls: bool = False,
        port: int = 0,
    ) -> None:
        self.username, self.password = username, password
        self.state = _State()
        self.port = port
        self.tls = tls
        self.ca_pem: str | None = None
        self._ssl: ssl.SSLContext | None = None
        if tls:
            self.ca_pem, self._ssl = _self_signed()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> RegistryServer:
        server = _Server(("127.0.0.1", self.port), _Handler)
        server.registry = self
        if self._ssl is not None:
            server.socket = self._ssl.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="registry-stand-in", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Down: the port refuses connections until ``start()`` (the schemas are kept)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def fail_next(self, n: int, status: int = 500) -> None:
        """Answer the next ``n`` requests with ``status`` (and Confluent's error body)."""
        with self.state.lock:
            self.state.fail.extend([status] * n)

    def register(
        self, subject: str, schema: str, schema_type: str = "AVRO", references: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Register directly (as a producer's serializer would): {"id", "version", "guid", ...}."""
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        if references:
            body["references"] = references
        with self.state.lock:
            return self.register_locked(subject, body)

    # ------------------------------------------------------------ the registry's own rules (lock held)

    def versioned(self, subject: str, version: int, found: _Schema) -> dict[str, Any]:
        return {"subject": subject, "id": found.id, "version": version, "guid": found.guid, **found.body()}

    def find(self, body: Any) -> _Schema | None:
        state = self.state
        schema_type = str(body.get("schemaType") or "AVRO").upper()
        refs = json.dumps(body.get("references") or [], sort_keys=True)
        sid = state.by_key.get((schema_type, _canonical(schema_type, body["schema"]), refs))
        return state.schemas.get(sid) if sid is not None else None

    def register_locked(self, subject: str, body: Any) -> dict[str, Any]:
        state = self.state
        schema_type = str(body.get("schemaType") or "AVRO").upper()
        if schema_type not in ("AVRO", "PROTOBUF", "JSON"):
            raise _Error(422, 42201, f"Invalid schema type {schema_type}")
        references = list(body.get("references") or [])
        for ref in references:
            got = state.subjects.get(ref["subject"])
            if got is None or not 1 <= int(ref["version"]) <= len(got):
                raise _Error(422, 42201, f"Invalid schema: reference {ref['name']} not found")
        found = self.find(body)
        if found is None:
            sid = len(state.schemas) + 1
            found = _Schema(sid, str(uuid.uuid4()), schema_type, body["schema"], references)
            state.schemas[sid] = found
            refs = json.dumps(references, sort_keys=True)
            state.by_key[(schema_type, _canonical(schema_type, body["schema"]), refs)] = sid
        versions = state.subjects.setdefault(subject, [])
        if found.id not in versions:
            versions.append(found.id)
        return self.versioned(subject, versions.index(found.id) + 1, found)

    @property
    def requests(self) -> list[tuple[str, str]]:
        return list(self.state.requests)

    def __enter__(self) -> RegistryServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _self_signed() -> tuple[str, ssl.SSLContext]:
    """A self-signed certificate for 127.0.0.1 and localhost: (its PEM, the server's context)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "icesql test registry")])
    now = datetime.datetime.now(datetime.timezone.utc)
    import ipaddress

    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # load_cert_chain reads files only: they live as long as the call (every test run left one behind)
    with tempfile.TemporaryDirectory(prefix="icesql-registry-tls-") as tmp:
        folder = Path(tmp)
        (folder / "cert.pem").write_text(cert_pem)
        (folder / "key.pem").write_text(key_pem)
        ctx.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    return cert_pem, ctx


@pytest.fixture
def schema_registry() -> Iterator[RegistryServer]:
    """An open registry stand-in on a free port of 127.0.0.1, empty, for one test."""
    with RegistryServer() as server:
        yield server


@pytest.fixture
def secure_registry() -> Iterator[RegistryServer]:
    """A registry stand-in behind HTTP basic auth (``username``/``password``) and TLS (``ca_pem``)."""
    with RegistryServer(username="icesql", password="registry-pw-0451", tls=True) as server:
        yield server


__all__ = ["RegistryServer", "schema_registry", "secure_registry"]
