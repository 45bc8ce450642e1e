"""CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY: the schemas a registry holds, by id, GUID or
subject, fetched once and cached.

Any Confluent-compatible registry speaks this REST API (Confluent, Karapace, Redpanda, Apicurio's
ccompat API). The client here is the only code that talks to one.

``RegistryConfig.of(plan, secrets)`` is all a client needs (URL, basic auth, CA, timeout): small,
picklable, with no secret in its repr. ``client_for(config)`` gives this process's client for it,
so a Spark task builds one per executor process and shares its caches (a ``RegistryClient`` also
pickles as its config alone). Schemas are immutable: what is fetched by id, GUID or subject and
version is cached forever; ``latest`` and ``subjects`` always ask.

Failures are one-line ``RegistryError``s: ``transient`` (the network, a timeout, a 5xx: worth a
retry; ``failures.RULES`` knows them, also as the marked text a Spark task's error carries) or not
(401/403: the credentials; 404: no such subject, version or id; a TLS failure; an answer that is
not a registry's).
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from icesql.engine.base.secrets import SecretValues, scrub
from icesql.errors import ExecutionError
from icesql.plan import SchemaRegistryConnectionPlan, SecretResolver


@dataclass(frozen=True)
class SchemaReference:
    """A schema another one imports (Protobuf imports, Avro named types, JSON Schema $refs)."""

    name: str  # how the referring schema names it (a .proto file name, an Avro full name, a $ref URL)
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    """One schema as the registry holds it.

    ``schema_type`` is the registry's own spelling: 'AVRO' (the registry's default when it names
    none), 'PROTOBUF' or 'JSON'. ``schema`` is the schema text exactly as registered.
    ``references`` are resolved by the client into ``referenced`` (name -> schema text), so a
    decoder never calls the registry itself.
    """

    schema_type: str
    schema: str
    id: int | None = None
    guid: str | None = None
    subject: str | None = None
    version: int | None = None
    references: tuple[SchemaReference, ...] = ()
    referenced: tuple[tuple[str, str], ...] = ()  # (reference name, schema text), transitively



# Marks on the text of errors raised inside Spark tasks (what reaches the driver is Spark's text of
# a Python error): ``failures.RULES`` reads them back as transient or not.
UNAVAILABLE = "ICESQL-REGISTRY-UNAVAILABLE: "
REFUSED = "ICESQL-REGISTRY-REFUSED: "

DEFAULT_TIMEOUT = 10.0  # seconds one request may take
RETRIES = 2  # more tries of a request that failed transiently, 0.2 s and 0.6 s apart
_ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"

# Confluent's error codes (``{"error_code": 40401, "message": ...}``)
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403


class RegistryError(ExecutionError):
    """A schema registry's failure in one line; ``transient`` says whether a retry may help."""

    transient = False

    def __init__(
        self, message: str, hint: str | None = None, *, status: int | None = None, error_code: int | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.error_code = error_code

    def marked(self) -> str:
        """The message with the mark ``failures.RULES`` reads back from a Spark task's error."""
        return (UNAVAILABLE if self.transient else REFUSED) + self.message


class RegistryUnavailableError(RegistryError):
    """The registry could not be reached, timed out, or failed on its side (5xx)."""

    transient = True


class RegistryNotFoundError(RegistryError):
    """No such subject, version, schema id or GUID (HTTP 404)."""


@dataclass(frozen=True)
class RegistryConfig:
    """What a client needs: small and picklable (Spark ships it to executors). Holds the password
    and CA resolved: its repr shows neither."""

    name: str  # the connection's name, for messages
    url: str  # without credentials (the analyzer refuses them in URL)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_pem: str | None = field(default=None, repr=False)
    timeout: float = DEFAULT_TIMEOUT

    @classmethod
    def of(
        cls,
        plan: SchemaRegistryConnectionPlan,
        secrets: SecretResolver | SecretValues,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> RegistryConfig:
        sec = secrets if isinstance(secrets, SecretValues) else SecretValues(secrets)
        return cls(
            name=plan.name,
            url=plan.url.rstrip("/"),
            username=sec.plain(plan.username),
            password=sec.secret(plan.password),
            ca_pem=sec.plain(plan.ssl_ca),
            timeout=timeout,
        )

    @property
    def label(self) -> str:
        return f"schema registry {self.name}"


class RegistryClient:
    """A Confluent Schema Registry's REST API, the calls a reader needs, cached."""

    def __init__(self, config: RegistryConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._by_id: dict[int, RegisteredSchema] = {}
        self._by_guid: dict[str, RegisteredSchema] = {}
        self._by_version: dict[tuple[str, int], RegisteredSchema] = {}
        self._ssl: ssl.SSLContext | None = None
        if config.password:
            from icesql.engine.base.secrets import remember_secret

            remember_secret(config.password)

    def __repr__(self) -> str:
        return f"RegistryClient({self.config.name!r}, {self.config.url!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (client_for, (self.config,))

    # ------------------------------------------------------------ the calls

    def schema_by_id(self, schema_id: int, subject: str | None = None) -> RegisteredSchema:
        """The schema a record's id names (``subject``: the registry's hint, for contexts)."""
        cached = self._by_id.get(schema_id)
        if cached is not None:
            return cached
        query = {"subject": subject} if subject else None
        body = self._get_schema(f"/schemas/ids/{int(schema_id)}", query, what=f"schema id {schema_id}")
        found = self._schema(body, schema_id=schema_id)
        with self._lock:
            self._by_id[schema_id] = found
            if found.guid:
                self._by_guid.setdefault(found.guid, found)
        return found

    def schema_by_guid(self, guid: str) -> RegisteredSchema:
        """The schema a record's 16-byte GUID names (written as its UUID text)."""
        cached = self._by_guid.get(guid)
        if cached is not None:
            return cached
        body = self._get_schema(f"/schemas/guids/{_quote(guid)}", None, what=f"schema GUID {guid}")
        found = self._schema(body, guid=guid)
        with self._lock:
            self._by_guid[guid] = found
            if found.id is not None:
                self._by_id.setdefault(found.id, found)
        return found

    def latest(self, subject: str) -> RegisteredSchema:
        """The subject's latest version (with id, version and subject)."""
        body = self._get_schema(f"/subjects/{_quote(subject)}/versions/latest", None, what=f"subject '{subject}'")
        found = self._schema(body)
        with self._lock:
            if found.version is not None:
                self._by_version.setdefault((subject, found.version), found)
            if found.id is not None:
                self._by_id.setdefault(found.id, found)
        return found

    def version(self, subject: str, version: int) -> RegisteredSchema:
        """One version of a subject."""
        key = (subject, int(version))
        cached = self._by_version.get(key)
        if cached is not None:
            return cached
        body = self._get_schema(
            f"/subjects/{_quote(subject)}/versions/{int(version)}", None, what=f"version {version} of subject '{subject}'"
        )
        found = self._schema(body)
        with self._lock:
            self._by_version[key] = found
            if found.id is not None:
                self._by_id.setdefault(found.id, found)
        return found

    def subjects(self) -> list[str]:
        body = self._get("/subjects", None, what="the subjects")
        if not isinstance(body, list) or not all(isinstance(s, str) for s in body):
            raise self._not_registry()
        return list(body)

    # ------------------------------------------------------------ parsing

    def _schema(
        self, body: Any, *, schema_id: int | None = None, guid: str | None = None
    ) -> RegisteredSchema:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise self._not_registry()
        refs = tuple(
            SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
            for r in body.get("references") or ()
        )
        version = body.get("version")
        return RegisteredSchema(
            schema_type=str(body.get("schemaType") or "AVRO").upper(),
            schema=body["schema"],
            id=int(body["id"]) if body.get("id") is not None else schema_id,
            guid=str(body["guid"]) if body.get("guid") else guid,
            subject=body.get("subject"),
            version=int(version) if version is not None else None,
            references=refs,
            referenced=self._referenced(refs),
        )

    def _referenced(self, refs: tuple[SchemaReference, ...]) -> tuple[tuple[str, str], ...]:
        """Every schema ``refs`` import, transitively, each once, those imported first."""
        out: dict[str, str] = {}
        visiting: set[tuple[str, int]] = set()

        def walk(ref: SchemaReference) -> None:
            if ref.name in out or (ref.subject, ref.version) in visiting:
                return
            visiting.add((ref.subject, ref.version))
            found = self.version(ref.subject, ref.version)
            for inner in found.references:
                walk(inner)
            out[ref.name] = found.schema

        for ref in refs:
            walk(ref)
        return tuple(out.items())

    def _get_schema(self, path: str, query: dict[str, str] | None, *, what: str) -> Any:
        """A schema's answer; a Protobuf schema in the registry's serialized form (a base64
        ``FileDescriptorProto``, what Confluent's own deserializer asks for: no .proto parser
        needed), asked again with ``format=serialized`` when it came as .proto text."""
        body = self._get(path, query, what=what)
        if (
            isinstance(body, dict)
            and str(body.get("schemaType") or "").upper() == "PROTOBUF"
            and isinstance(body.get("schema"), str)
            and not _is_base64(body["schema"])
        ):
            body = self._get(path, {**(query or {}), "format": "serialized"}, what=what)
        return body

    def _not_registry(self) -> RegistryError:
        return RegistryError(
            f"{self.config.label} at {_shown(self.config.url)} did not answer as a schema registry",
            "check URL: it is the registry's base URL (https://host:8081), not a page or another service",
        )

    # ------------------------------------------------------------ HTTP

    def _context(self) -> ssl.SSLContext | None:
        if not self.config.url.lower().startswith("https:"):
            return None
        if self._ssl is None:
            ctx = ssl.create_default_context()
            if self.config.ca_pem:
                try:
                    ctx.load_verify_locations(cadata=self.config.ca_pem)
                except (ssl.SSLError, ValueError):
                    raise RegistryError(
                        f"{self.config.label}: SSL CERTIFICATE AUTHORITY is not a PEM certificate",
                        "give the CA's certificate in PEM (-----BEGIN CERTIFICATE----- ...)",
                    ) from None
            self._ssl = ctx
        return self._ssl

    def _get(self, path: str, query: dict[str, str] | None, *, what: str) -> Any:
        url = self.config.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        delays = [0.2 * 3**i for i in range(RETRIES)]
        while True:
            try:
                return self._request(url, what)
            except RegistryUnavailableError:
                if not delays:
                    raise
                time.sleep(delays.pop(0))

    def _request(self, url: str, what: str) -> Any:
        cfg = self.config
        request = urllib.request.Request(url, headers={"Accept": _ACCEPT, "User-Agent": "icesql"})
        if cfg.username is not None:
            token = base64.b64encode(f"{cfg.username}:{cfg.password or ''}".encode()).decode()
            request.add_header("Authorization", "Basic " + token)
        failure: RegistryError
        try:
            with urllib.request.urlopen(request, timeout=cfg.timeout, context=self._context()) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            failure = self._http_failure(exc.code, _body(exc), what)
        except TimeoutError:
            failure = RegistryUnavailableError(
                f"{cfg.label} unreachable at {_shown(cfg.url)} (timed out after {cfg.timeout:g}s)",
                "check URL and that the registry runs and is reachable from here and from every Spark executor",
            )
        except urllib.error.URLError as exc:
            failure = self._transport_failure(exc.reason)
        except (ConnectionError, OSError) as exc:  # a connection cut mid-answer
            failure = self._transport_failure(exc)
        else:
            try:
                return json.loads(raw)
            except ValueError:
                failure = self._not_registry()
        failure.__cause__ = failure.__context__ = None
        failure.__suppress_context__ = True
        raise failure

    def _transport_failure(self, reason: Any) -> RegistryError:
        cfg = self.config
        if isinstance(reason, ssl.SSLError):
            detail = getattr(reason, "reason", None) or type(reason).__name__
            return RegistryError(
                f"TLS handshake with {cfg.label} at {_shown(cfg.url)} failed ({str(detail).lower().replace('_', ' ')})",
                "check SSL CERTIFICATE AUTHORITY (the CA that signed the registry's certificate) and the URL's scheme",
            )
        if isinstance(reason, TimeoutError | socket.timeout):
            cause = f"timed out after {cfg.timeout:g}s"
        elif isinstance(reason, ConnectionRefusedError):
            cause = "connection refused"
        elif isinstance(reason, socket.gaierror):
            cause = "unknown host"
        else:
            cause = type(reason).__name__ if not isinstance(reason, str) else reason
            cause = "connection failed: " + scrub(str(cause))
        return RegistryUnavailableError(
            f"{cfg.label} unreachable at {_shown(cfg.url)} ({cause})",
            "check URL and that the registry runs and is reachable from here and from every Spark executor",
        )

    def _http_failure(self, status: int, body: str, what: str) -> RegistryError:
        cfg = self.config
        code, message = _error_body(body)
        message = _scrubbed(message, cfg)
        if status in (401, 403):
            return RegistryError(
                f"{cfg.label} refused the credentials ({status}): check USERNAME and PASSWORD",
                f"CREATE CONNECTION {cfg.name} ... (USERNAME = 'name', PASSWORD = SECRET s); "
                "Confluent Cloud's are an API key and its secret",
                status=status,
                error_code=code,
            )
        if status == 404:
            return RegistryNotFoundError(
                f"{cfg.label} has no {what}" + (f" ({message})" if message else ""),
                "list the subjects with VALIDATE CONNECTION, or check the producer registered its schema",
                status=status,
                error_code=code,
            )
        if status >= 500 or status == 429:
            return RegistryUnavailableError(
                f"{cfg.label} failed on its side (HTTP {status}" + (f": {message})" if message else ")"),
                "the registry or its backing store is unwell; icesql retries",
                status=status,
                error_code=code,
            )
        return RegistryError(
            f"{cfg.label} refused the request for {what} (HTTP {status}" + (f": {message})" if message else ")"),
            "check URL and the connection's options",
            status=status,
            error_code=code,
        )


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except ValueError:
        return False
    return True


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _shown(url: str) -> str:
    """A URL as messages show it: no user part (the analyzer refuses one, this makes sure)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def _body(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read().decode("utf-8", "replace")[:2000]
    except Exception:
        return ""


def _error_body(body: str) -> tuple[int | None, str]:
    """Confluent's ``{"error_code": 40401, "message": "Subject 'x' not found."}``."""
    try:
        data = json.loads(body)
    except ValueError:
        return None, " ".join(body.split())[:200]
    if not isinstance(data, dict):
        return None, ""
    code = data.get("error_code")
    return (int(code) if isinstance(code, int) else None), " ".join(str(data.get("message") or "").split())[:200]


def _scrubbed(text: str, cfg: RegistryConfig) -> str:
    return scrub(text, [v for v in (cfg.password,) if v])


_CLIENTS: dict[RegistryConfig, RegistryClient] = {}
_CLIENTS_LOCK = threading.Lock()


def client_for(config: RegistryConfig) -> RegistryClient:
    """This process's client for ``config`` (its caches shared by every caller here)."""
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(config)
        if client is None:
            client = _CLIENTS[config] = RegistryClient(config)
        return client


def registry_client(
    plan: SchemaRegistryConnectionPlan, secrets: SecretResolver | SecretValues, timeout: float = DEFAULT_TIMEOUT
) -> RegistryClient:
    """The client of a CONFLUENT SCHEMA REGISTRY connection, its secrets resolved."""
    return client_for(RegistryConfig.of(plan, secrets, timeout))


def validate_registry_connection(
    plan: SchemaRegistryConnectionPlan, secrets: SecretResolver | SecretValues, timeout: float = DEFAULT_TIMEOUT
) -> list[str]:
    """VALIDATE: list the subjects once (the credentials, the CA and the URL all take part)."""
    return RegistryClient(RegistryConfig.of(plan, secrets, timeout)).subjects()


__all__ = [
    "DEFAULT_TIMEOUT",
    "REFUSED",
    "SCHEMA_NOT_FOUND",
    "SUBJECT_NOT_FOUND",
    "UNAVAILABLE",
    "VERSION_NOT_FOUND",
    "RegisteredSchema",
    "RegistryClient",
    "RegistryConfig",
    "RegistryError",
    "RegistryNotFoundError",
    "RegistryUnavailableError",
    "SchemaReference",
    "client_for",
    "registry_client",
    "validate_registry_connection",
]
