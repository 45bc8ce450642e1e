"""Library failures (requests, urllib3, botocore, pyiceberg REST, sqlalchemy) as one-line,
secret-free ``ExecutionError``s: a table of rules, first match wins.

``describe_failure(exc, label=..., endpoint=..., action=...)`` gathers what the exception chain
says once (``Failure``: class names, HTTP status and body, AWS error code) and walks ``RULES``;
each rule names the cause in icesql's words, a hint, whether the library's own (scrubbed) text
may follow in parentheses, and whether the cause is transient (worth a retry: the network, a
timeout, a server error) rather than a mistake in the connection's options.

``guarded(fn, ...)`` runs ``fn`` and raises any failure as such an error, outside the ``except``
block so that no library message (which could echo a secret) rides along as ``__context__``.

For a running sink, whose failures are not all a library's: ``rule_failure`` describes a failure
only when a rule knows it, ``transient_failure`` only when it is transient, and ``service_of``
says whether it came from the catalog's client or the object store's (so the sink's message can
name that connection and its address, ``SinkTarget.where``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from icesql.engine.base.secrets import SecretValues, scrub
from icesql.errors import ExecutionError, IcesqlError

log = logging.getLogger("icesql.engine.connections.catalogs")

T = TypeVar("T")


class CatalogUnavailableError(ExecutionError):
    """A catalog or object store could not be reached, or failed on its side: worth a retry."""

    transient = True


@dataclass(frozen=True)
class Failure:
    """What an exception chain says, gathered once for the rules."""

    exc: BaseException
    names: frozenset[str]  # class names along the chain
    modules: frozenset[str]  # top-level modules of those classes
    raw: str  # "Name: message | Name: message ..." (unscrubbed: never shown)
    answered: bool  # an HTTP response is in the chain
    status: int | None  # its status
    body: str  # the response body
    url: str  # the URL answered
    aws_code: str  # botocore's error code ('' when none)
    aws_status: int | None  # botocore's HTTP status

    def has(self, *names: str) -> bool:
        return bool(self.names.intersection(names))

    @property
    def non_json_answer(self) -> bool:
        return self.body.strip() != "" and not _is_json(self.body)


@dataclass(frozen=True)
class Rule:
    when: Callable[[Failure], bool]
    cause: str | Callable[[Failure], str]
    hint: str | Callable[[Failure], str]
    show_detail: bool = True  # append the library's (scrubbed) message in parentheses
    transient: bool = False

    def describe(self, f: Failure) -> str:
        return self.cause(f) if callable(self.cause) else self.cause

    def hint_for(self, f: Failure) -> str:
        return self.hint(f) if callable(self.hint) else self.hint


_TIMEOUTS = ("ConnectTimeout", "ReadTimeout", "Timeout", "ConnectTimeoutError", "ReadTimeoutError")
_CONNECTION = (
    "ConnectionError",
    "NewConnectionError",
    "MaxRetryError",
    "EndpointConnectionError",
    "NameResolutionError",
    "ConnectionRefusedError",
    "gaierror",
    "ProxyConnectionError",
    # a connection that broke in the middle of a request or a response
    "RemoteDisconnected",
    "ConnectionResetError",
    "ConnectionAbortedError",
    "BrokenPipeError",
    "ProtocolError",
    "IncompleteRead",
    "ChunkedEncodingError",
    "ResponseStreamingError",
    "ResponseCutError",
)
_AWS_AUTH_CODES = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidClientTokenId",
        "AccessDenied",
        "UnrecognizedClientException",
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidToken",
        "AccessDeniedException",
        "AuthFailure",
    }
)
_DNS = ("name or service not known", "nodename nor servname", "nameresolution", "getaddrinfo")
# pyarrow's S3 filesystem (the AWS C++ SDK, used by the executors' writers) fails with an OSError
# whose text alone names the cause: "... AWS Error NETWORK_CONNECTION during PutObject operation:
# curlCode: 7, Could not connect to server", "AWS Error UNKNOWN (HTTP status 503) during ...".
_AWS_SDK_TRANSIENT = re.compile(
    r"AWS Error (NETWORK_CONNECTION|SLOW_DOWN|SERVICE_UNAVAILABLE|THROTTLING|REQUEST_TIMEOUT|INTERNAL_FAILURE)\b"
    r"|AWS Error \w+ \(HTTP status (5\d\d|429)\)"
)
# A multipart upload whose parts the store does not have when it is completed ("InvalidPart",
# "NoSuchUpload", HTTP 400) was broken by the network (a part's upload cut or reset, the store
# restarted): writing the file again succeeds.
_AWS_UPLOAD_BROKEN = re.compile(r"ExceptionName: (InvalidPart|NoSuchUpload)\b")
# Temporary credentials (an assumed role's) that expired while in use: AWS answers ExpiredToken;
# S3-compatible stores (SeaweedFS, MinIO) forget the session's key and answer InvalidAccessKeyId.
# Only a sink whose connection assumes a role takes these as transient (``expired_role_credentials``).
_CREDENTIALS_EXPIRED = re.compile(r"\b(ExpiredToken|ExpiredTokenException|TokenRefreshRequired|RequestExpired)\b")
_KEY_UNKNOWN = re.compile(r"\bInvalidAccessKeyId\b")
# the server's answer stopped early: the connection closed after the request went out (the
# request may have taken effect: a commit is checked against the table before it is retried)
_CUT = (
    "ResponseCutError",
    "RemoteDisconnected",
    "BadStatusLine",
    "IncompleteRead",
    "ChunkedEncodingError",
    "ResponseStreamingError",
)
# a full disk (the icesql home: checkpoints, staging, the catalog store; a local warehouse):
# OSError 28 from Python, the same text from Spark's JVM, SQLite's own words
_DISK_FULL = re.compile(r"\[Errno 28\]|No space left on device|database or disk is full")
# Spark waits 10 s for a Python worker it started to connect back; on an overloaded machine the
# worker takes longer and the query fails with this, though nothing is wrong with the sink: a
# restart starts a new worker. No setting changes that wait (Spark 4.3, read in its bytecode):
# PythonWorkerFactory.createSimpleWorker, which starts the Python streaming data source's runner
# (PythonStreamingSourceRunner: the Arrow path's source), StreamingPythonRunner and the data
# source planner's workers, selects on its server socket for a literal 10000 ms and wraps any
# failure of the accept, the secret's check (SocketAuthHelper.authClient: a literal 10000 ms too)
# and the pid's read as "Python worker failed to connect back."; the forking daemon's workers
# (UDFs, mapInArrow) get a literal 60000 ms. So the sink is retried (``Supervisor``, ``run
# --once`` included) instead.
_SPARK_WORKER_LATE = re.compile(
    r"Python worker failed to connect back|Timed out while waiting for the Python worker to connect back"
)
# A Spark task that the executor could not deserialise: twice in two long soaks (each 1 of ~200
# restarts), both sinks' first task right after a restart under load; the next run went on.
# Cause not found; taken as transient so that the supervisor retries instead of the operator.
_SPARK_TASK_UNREADABLE = re.compile(
    r"Job aborted due to stage failure.*?java\.io\.(OptionalDataException|StreamCorruptedException)", re.DOTALL
)


# KAFKA sources (``kafka.source``): their tasks and planner raise marked errors, since what reaches
# the driver is Spark's text of a Python error
_KAFKA_UNAVAILABLE = re.compile(r"ICESQL-KAFKA-UNAVAILABLE: ([^\n|]*)")
_KAFKA_REFUSED = re.compile(r"ICESQL-KAFKA-REFUSED: ([^\n|]*)")
# The schema registry's client (``registry.RegistryError.marked``), from a Spark task as well
_REGISTRY_UNAVAILABLE = re.compile(r"ICESQL-REGISTRY-UNAVAILABLE: ([^\n|]*)")
_REGISTRY_REFUSED = re.compile(r"ICESQL-REGISTRY-REFUSED: ([^\n|]*)")


def _marked(pattern: re.Pattern[str], f: Failure) -> str:
    m = pattern.search(f.raw)
    return scrub(m.group(1).strip()) if m else ""


def _says(pattern: re.Pattern[str]) -> Callable[[Failure], bool]:
    """A rule's test: the text of the exception chain matches ``pattern``."""
    return lambda f: pattern.search(f.raw) is not None


def _unreachable(f: Failure) -> str:
    low = f.raw.lower()
    if any(s in low for s in _DNS) or "temporary failure in name resolution" in low:
        return "unreachable (host name does not resolve)"
    if "refused" in low:
        return "unreachable (connection refused)"
    if f.has(*_CUT):
        return "connection closed before the answer was complete"
    if f.has("ConnectionResetError") or "reset by peer" in low:
        return "connection reset"
    return "unreachable (connection failed)"


def _json_cut_short(f: Failure) -> bool:
    """pyiceberg parsed an answer whose JSON ends early: cut inside its headers, the answer
    reaches pyiceberg as complete, status 200 and no body (``http.client`` takes the end of the
    stream for the end of the headers, and without the ``Content-Length`` it never read, the
    body is what came before the close: nothing). A cut after the headers is urllib3's
    ``IncompleteRead`` instead."""
    return (
        f.has("ValidationError")
        and bool(f.modules & {"pydantic", "pydantic_core"})
        and "EOF while parsing" in f.raw
    )


def _failing(f: Failure) -> Any:
    from icesql.engine.connections import stores

    return stores.failing_store(f.raw)


def _store_says(f: Failure, *, transient: bool) -> bool:
    """The failure is an object store client's own error (``stores``), worth a retry or not."""
    store = _failing(f)
    return store is not None and store.error_code(f.raw) is not None and store.is_transient(f.raw) == transient


def _aws_sdk_cause(f: Failure) -> str:
    found = _AWS_SDK_TRANSIENT.search(f.raw)
    what = found.group(0) if found else "AWS Error"
    if "NETWORK_CONNECTION" in what:
        return "object store unreachable (connection failed)"
    return f"object store error ({what})"


def _upload_broken(f: Failure) -> str:
    found = _AWS_UPLOAD_BROKEN.search(f.raw)
    return f"an upload to the object store broke off ({found.group(1) if found else 'a part'}: a part went missing)"


def _task_unreadable(f: Failure) -> str:
    found = _SPARK_TASK_UNREADABLE.search(f.raw)
    return f"java.io.{found.group(1)}" if found else "a Java deserialisation error"


def _is_aws_auth(f: Failure) -> bool:
    return f.has("ClientError") and (f.aws_code in _AWS_AUTH_CODES or f.aws_status in (401, 403))


def _rest_decode_error(f: Failure) -> bool:
    return (
        (f.answered and f.non_json_answer)
        or "Could not decode json payload" in f.raw
        or "Received unexpected JSON Payload" in f.raw
    )


def _is_server_error(f: Failure) -> bool:
    return (f.status is not None and 500 <= int(f.status) < 600) or f.has(
        "ServerError", "ServiceUnavailableError"
    )


_REST_URI_HINT = "URI must be the catalog's base URL, the one whose '/v1/config' answers"
_NETWORK_HINT = "check the URI/ENDPOINT host and port, and that the server is running"
_STORE_HINT = "check the ENDPOINT of the AWS connection and that the object store is running"

def _unknown_type(f: Failure) -> str:
    m = re.search(r"Unsupported field type: ('[^']+')", f.raw)
    return m.group(1) if m else "?"


RULES: tuple[Rule, ...] = (
    # --- table metadata pyiceberg cannot load: a type it does not know (a v3 ``variant`` column,
    # in pyiceberg 0.12), refused in pydantic's words, which the REST rules below would take for
    # a catalog that is not one
    Rule(
        lambda f: "Unsupported field type: '" in f.raw,
        lambda f: f"the table has a column of type {_unknown_type(f)}, which icesql cannot read or "
        "write (its Iceberg library, pyiceberg, does not know the type)",
        "use a table without such a column, or drop the column with the tool that made it "
        "(Iceberg Java: table.updateSchema().deleteColumn(...))",
        show_detail=False,
    ),
    # --- transport: refused, DNS, TLS, timeouts (requests / urllib3 / botocore / sqlalchemy)
    Rule(
        lambda f: f.has("SSLError", "SSLCertVerificationError"),
        "TLS handshake failed",
        "check the URI scheme (http/https) and the server certificate",
    ),
    Rule(
        lambda f: f.has(*_TIMEOUTS),
        "catalog unreachable (timed out)",
        "check the URI/ENDPOINT host and port and any firewall",
        transient=True,
    ),
    Rule(lambda f: f.has(*_CONNECTION), _unreachable, _NETWORK_HINT, show_detail=False, transient=True),
    Rule(
        # pyiceberg's Hive catalog (thrift): "TTransportException: Could not connect to any of [...]"
        lambda f: f.has("TTransportException") and "could not connect" in f.raw.lower(),
        "metastore unreachable (connection refused)",
        "check URI (thrift://host:9083) and that the Hive metastore is running",
        show_detail=False,
        transient=True,
    ),
    Rule(
        # pyiceberg's Hive commit waited for the table's metastore lock and gave up
        _says(re.compile(r"Failed to acquire lock for")),
        "the table's metastore lock is held by another writer",
        "a writer killed during a commit holds it until the metastore drops it (hive.txn.timeout, "
        "300 s by default); the sink is retried",
        show_detail=False,
        transient=True,
    ),
    Rule(
        _json_cut_short,
        "connection closed before the answer was complete",
        _NETWORK_HINT,
        show_detail=False,
        transient=True,
    ),
    Rule(
        _says(_AWS_SDK_TRANSIENT),
        _aws_sdk_cause,
        _STORE_HINT,
        show_detail=False,
        transient=True,
    ),
    Rule(
        _says(_AWS_UPLOAD_BROKEN),
        _upload_broken,
        _STORE_HINT,
        show_detail=False,
        transient=True,
    ),
    Rule(
        lambda f: _store_says(f, transient=True),
        lambda f: _failing(f).explain(f.raw),
        lambda f: _failing(f).check_hint,
        show_detail=False,
        transient=True,
    ),
    Rule(
        _says(_DISK_FULL),
        "no space left on the device",
        "free space where the sink writes (the icesql home holds its checkpoints, staging and "
        "catalog store); the sink is retried, and resumes once it fits",
        transient=True,
    ),
    Rule(
        _says(_SPARK_WORKER_LATE),
        "Spark's Python worker did not connect back in time",
        "the machine is overloaded; the sink is retried for ICESQL_RETRY_BUDGET seconds (icesql run, run --once, serve)",
        show_detail=False,
        transient=True,
    ),
    Rule(
        _says(_KAFKA_REFUSED),
        lambda f: f"the Kafka brokers refused the connection ({_marked(_KAFKA_REFUSED, f)})",
        "check SASL USERNAME / SASL PASSWORD, SASL MECHANISMS, SECURITY PROTOCOL and the SSL settings of the "
        "KAFKA connection, and the topic's ACLs",
        show_detail=False,
    ),
    Rule(
        _says(_REGISTRY_REFUSED),
        lambda f: _marked(_REGISTRY_REFUSED, f),
        "check the CONFLUENT SCHEMA REGISTRY connection (URL, USERNAME, PASSWORD, SSL CERTIFICATE AUTHORITY) "
        "and that the subject's schemas are registered",
        show_detail=False,
    ),
    Rule(
        _says(_REGISTRY_UNAVAILABLE),
        lambda f: _marked(_REGISTRY_UNAVAILABLE, f),
        "check that the schema registry runs and is reachable from every Spark executor; the sink is retried",
        show_detail=False,
        transient=True,
    ),
    Rule(
        _says(_KAFKA_UNAVAILABLE),
        lambda f: f"the Kafka brokers did not answer ({_marked(_KAFKA_UNAVAILABLE, f)})",
        "check that the brokers run and are reachable from every Spark executor; the sink is retried",
        show_detail=False,
        transient=True,
    ),
    Rule(
        _says(_SPARK_TASK_UNREADABLE),
        lambda f: f"a Spark task could not be read back on the executor ({_task_unreadable(f)})",
        "the sink is retried; if it repeats, run with -v and report the Java error",
        show_detail=False,
        transient=True,
    ),
    # --- an object store's own client (pyarrow's S3, GCS and Azure filesystems: ``stores``)
    Rule(
        lambda f: _store_says(f, transient=False),
        lambda f: _failing(f).explain(f.raw),
        lambda f: _failing(f).check_hint,
        show_detail=False,
    ),
    # --- botocore (AWS connections, SigV4 credential lookups, Glue)
    Rule(
        lambda f: f.has("NoCredentialsError", "PartialCredentialsError"),
        "no AWS credentials (the default credential chain found none)",
        "set ACCESS KEY ID and SECRET ACCESS KEY = SECRET name on the AWS connection, or ASSUME ROLE ARN",
        show_detail=False,
    ),
    Rule(
        _is_aws_auth,
        lambda f: f"authentication rejected ({f.aws_code or f.aws_status})",
        "check ACCESS KEY ID, the SECRET ACCESS KEY secret, SESSION TOKEN and REGION of the AWS connection",
    ),
    Rule(
        lambda f: f.has("ClientError") and f.aws_status is not None and int(f.aws_status) >= 500,
        lambda f: f"AWS error {f.aws_code or f.aws_status}",
        "the service failed on its side",
        transient=True,
    ),
    Rule(
        lambda f: f.has("ClientError"),
        lambda f: f"AWS error {f.aws_code or f.aws_status}",
        "see the AWS error code; check REGION and ENDPOINT",
    ),
    # --- HTTP answers (pyiceberg REST)
    Rule(
        lambda f: f.has("OAuthError"),
        lambda f: f"authentication rejected by the OAuth2 token endpoint (HTTP {f.status or '401'})",
        "check USER and the PASSWORD secret (OAuth2 client credentials), or the CREDENTIAL secret "
        "'client_id:client_secret', and OAUTH2 SERVER URI / SCOPE",
    ),
    Rule(
        _rest_decode_error,
        lambda f: (
            f"not an Iceberg REST endpoint (HTTP {f.status}, the answer is not an Iceberg REST response)"
        ),
        _REST_URI_HINT + " (e.g. 'https://host/api/catalog')",
        show_detail=False,
    ),
    Rule(
        lambda f: f.has("UnauthorizedError") or f.status == 401,
        "authentication rejected (401 Unauthorized)",
        "check the catalog credentials (USER/PASSWORD, CREDENTIAL or TOKEN secret)",
    ),
    Rule(
        lambda f: f.has("ForbiddenError") or f.status == 403,
        "authentication rejected (403 Forbidden)",
        "check the credentials (for SigV4: the AWS connection's keys and REGION) and the "
        "principal's permissions on the warehouse",
    ),
    Rule(
        lambda f: f.has("AuthorizationExpiredError") or f.status == 419,
        "authentication expired (419)",
        "the token expired; use client credentials or a new TOKEN",
    ),
    Rule(
        lambda f: (
            (f.status == 404 or f.has("NoSuchNamespaceError")) and f.url.rstrip("/").endswith("/v1/config")
        ),
        "not an Iceberg REST endpoint (GET /v1/config answered 404)",
        _REST_URI_HINT,
        show_detail=False,
    ),
    Rule(
        lambda f: f.status == 404 or f.has("NoSuchNamespaceError"),
        "warehouse not found (404)",
        "check WAREHOUSE (for S3 Tables, the table bucket ARN)",
    ),
    Rule(
        _is_server_error,
        lambda f: f"catalog server error (HTTP {f.status})",
        "the catalog server failed; see its logs",
        transient=True,
    ),
    Rule(
        lambda f: f.has("TooManyRequestsError") or f.status == 429,
        lambda f: f"catalog rejected the request (HTTP {f.status or 429}: too many requests)",
        "the catalog throttles requests",
        transient=True,
    ),
    Rule(
        lambda f: f.has("BadRequestError", "RESTError"),
        lambda f: f"catalog rejected the request (HTTP {f.status})",
        "check WAREHOUSE and the catalog options",
    ),
    Rule(
        lambda f: (
            f.has("JSONDecodeError")
            or (f.has("ValidationError") and bool(f.modules & {"pydantic", "pydantic_core"}))
        ),
        "not an Iceberg REST endpoint (its answer is not an Iceberg REST response)",
        _REST_URI_HINT,
        show_detail=False,
    ),
    # --- SQL catalogs (sqlalchemy)
    Rule(
        lambda f: "sqlalchemy" in f.modules and f.has("NoSuchModuleError"),
        "database driver not installed",
        "install the SQLAlchemy driver named in URI",
    ),
    Rule(
        lambda f: "sqlalchemy" in f.modules and f.has("ArgumentError"),
        "invalid database URI",
        "URI is a SQLAlchemy URL, e.g. 'sqlite:////path/catalog.db'",
    ),
    Rule(
        lambda f: "sqlalchemy" in f.modules and f.has("OperationalError", "InterfaceError"),
        "database unreachable or refused the connection",
        "check URI, the database and its credentials",
    ),
    Rule(
        lambda f: isinstance(
            f.exc, (PermissionError, FileNotFoundError, NotADirectoryError, IsADirectoryError)
        ),
        "cannot use the warehouse directory",
        "check WAREHOUSE and its permissions",
    ),
)
_FALLBACK_HINT = "run with debug logging for details"


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen and len(seen) < 20:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _one_line(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def gather(exc: BaseException) -> Failure:
    """What the rules look at, read once from the exception chain."""
    chain = _chain(exc)
    response = next(
        (
            r
            for r in (getattr(e, "response", None) for e in chain)
            if r is not None and hasattr(r, "status_code")
        ),
        None,
    )
    body = ""
    if response is not None:
        try:
            body = response.text or ""
        except Exception:
            body = ""
    aws_code, aws_status = "", None
    for e in chain:
        resp = getattr(e, "response", None)
        if isinstance(resp, dict):
            aws_code = str(resp.get("Error", {}).get("Code", ""))
            aws_status = resp.get("ResponseMetadata", {}).get("HTTPStatusCode")
            break
    status = getattr(response, "status_code", None)
    return Failure(
        exc=exc,
        names=frozenset(type(e).__name__ for e in chain),
        modules=frozenset(type(e).__module__.split(".")[0] for e in chain),
        raw=" | ".join(f"{type(e).__name__}: {e}" for e in chain),
        answered=response is not None,
        status=status,
        body=body,
        url=str(getattr(response, "url", "") or ""),
        aws_code=aws_code,
        aws_status=status or aws_status,
    )


def describe_failure(
    exc: BaseException,
    *,
    label: str,
    endpoint: str | None,
    action: str = "connect",
    extra_secrets: Iterable[str] = (),
) -> ExecutionError:
    """Classify a library exception into a one-line, secret-free ``ExecutionError`` (a
    ``CatalogUnavailableError`` when the cause is transient)."""
    f = gather(exc)
    extra = list(extra_secrets)
    detail = _one_line(scrub(str(exc), extra))
    at = f" at {scrub(endpoint, extra)}" if endpoint else ""
    log.debug("%s: %s failed: %s", label, action, scrub(f.raw, extra))
    rule = next((r for r in RULES if r.when(f)), None)
    cause = rule.describe(f) if rule else f"unexpected error {type(exc).__name__}"
    # label, cause and hint are icesql's own words; only library text (detail) is scrubbed
    msg = f"{label}: cannot {action}{at}: {cause}"
    if (rule is None or rule.show_detail) and detail and detail not in cause:
        msg += f" ({detail})"
    cls = CatalogUnavailableError if rule is not None and rule.transient else ExecutionError
    return cls(_one_line(msg, 400), hint=rule.hint_for(f) if rule else _FALLBACK_HINT)


def transient_failure(
    exc: BaseException, *, label: str, action: str, endpoint: str | None = None
) -> CatalogUnavailableError | None:
    """``exc`` as a ``CatalogUnavailableError`` when a transient rule matches it (the network, a
    timeout, a server error, throttling), else None."""
    err = rule_failure(exc, label=label, action=action, endpoint=endpoint)
    return err if isinstance(err, CatalogUnavailableError) else None


def rule_failure(
    exc: BaseException, *, label: str, action: str, endpoint: str | None = None
) -> ExecutionError | None:
    """``exc`` described by the first rule it matches (``describe_failure``), else None: for
    callers whose other failures are not a library's (a sink's bad record, a Spark error)."""
    f = gather(exc)
    if not any(r.when(f) for r in RULES):
        return None
    return describe_failure(exc, label=label, endpoint=endpoint, action=action)


def expired_role_credentials(exc: BaseException, *, label: str, action: str) -> CatalogUnavailableError | None:
    """For a sink whose connection assumes a role: AWS's ``ExpiredToken`` or the store's "this key
    does not exist" (``InvalidAccessKeyId``, what SeaweedFS and MinIO answer for an expired
    session's key) as a transient "credentials expired"; None for any other failure. (Without a
    role an expired SESSION TOKEN stays an authentication error: retrying cannot renew it.)"""
    f = gather(exc)
    text = f"{f.aws_code} {f.raw}"
    found = _CREDENTIALS_EXPIRED.search(text) or _KEY_UNKNOWN.search(text)
    if found is None:
        return None
    return CatalogUnavailableError(
        f"{label}: cannot {action}: the assumed role's temporary credentials were refused "
        f"({found.group(0)}: they expired)",
        hint="icesql assumes the role again and retries; if this repeats, check ASSUME ROLE ARN "
        "and the keys of the AWS connection",
    )


def service_of(exc: BaseException) -> str | None:
    """Which side a sink's failure comes from: ``"storage"`` (pyarrow's client of an object
    store, whose errors are ``OSError`` text in the store's own words: ``stores.failing_store``),
    ``"catalog"`` (the REST client: requests, urllib3, http.client, pyiceberg's answers and their
    parsing), or None (anything else: Spark, a record, icesql itself)."""
    from icesql.engine.connections import stores

    f = gather(exc)
    if stores.failing_store(f.raw) is not None:
        return "storage"
    if f.modules & {"requests", "urllib3", "http", "pydantic_core", "pyiceberg"}:
        return "catalog"
    return None


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` is worth a retry (see ``Rule.transient``)."""
    return bool(getattr(error, "transient", False))


def guarded(fn: Callable[[], T], label: str, endpoint: str | None, sec: SecretValues, action: str) -> T:
    """Run ``fn``; any failure becomes an ``ExecutionError`` raised with an empty chain."""
    failure: IcesqlError
    try:
        return fn()
    except IcesqlError as exc:  # ours already (a missing secret, a missing option): keep its type
        exc.message = sec.scrub(exc.message)
        if exc.hint:
            exc.hint = sec.scrub(exc.hint)
        failure = exc
    except Exception as exc:
        failure = describe_failure(
            exc, label=label, endpoint=endpoint, action=action, extra_secrets=sec.values
        )
    # Raised outside the except blocks: no __context__, so no library message (which could echo
    # a secret) rides along in a traceback.
    failure.__cause__ = None
    failure.__context__ = None
    failure.__suppress_context__ = True
    raise failure


__all__ = [
    "RULES",
    "CatalogUnavailableError",
    "Failure",
    "Rule",
    "describe_failure",
    "expired_role_credentials",
    "guarded",
    "is_transient",
    "rule_failure",
    "service_of",
    "transient_failure",
]
