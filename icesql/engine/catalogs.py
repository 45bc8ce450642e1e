"""Connection plans -> live pyiceberg catalogs, FileIO properties, and connection checks.

Public API:

* ``load_catalog(conn, *, aws, secrets, home)`` -> a pyiceberg ``Catalog`` for every catalog type
  (``local``, ``sql``, ``rest``, ``s3tables``, ``glue``, ``hive``) and every REST auth path
  (OAuth2 client credentials, HTTP basic, bearer token, SigV4).
* ``io_properties(table=..., sink_aws=..., catalog_aws=..., secrets=...)`` -> ``IoProperties``, a
  picklable ``dict[str, str]`` of FileIO properties that Spark executors use to write data files.
* ``validate_connection(conn, *, aws, secrets, home)`` -> connects once (lists namespaces, or for
  an AWS connection makes one cheap call) and turns every failure into a one-line
  ``ExecutionError`` naming the connection and the cause.
* ``aws_properties(aws, *, secrets)`` -> the FileIO properties of one AWS connection.
* ``catalog_properties(conn, *, aws, secrets, home)`` -> the pyiceberg properties ``load_catalog``
  passes (holds secret values: never log or print it).

Secrets are resolved through ``secrets(name)`` at call time and never appear in an error
message, a hint, an exception chain (errors are raised outside ``except`` blocks, so
``__cause__`` and ``__context__`` are empty), or a log record (a filter on the pyiceberg,
botocore, urllib3 and requests loggers masks every resolved secret value).

pyiceberg, boto3, requests and sqlalchemy are imported lazily, inside functions: importing this
module stays cheap.

What cannot be tested on this machine (no AWS access): the ``glue`` and ``hive`` catalogs, the
real S3 Tables endpoint, ``ASSUME ROLE ARN`` (STS ``AssumeRole``) and the default AWS
credential chain beyond environment variables. The ``rest`` and ``s3tables`` paths are tested
against SeaweedFS ``weed mini``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from icesql.errors import ExecutionError, IcesqlError
from icesql.plan import (
    DEFAULT_REGION,
    AwsConnectionPlan,
    CatalogConnectionPlan,
    CatalogType,
    RestAuth,
    SecretName,
    SecretResolver,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

MASK = "********"
T = TypeVar("T")

# FileIO property keys worth shipping to executors (pyiceberg FileIO implementations read these).
_FILE_IO_PREFIXES = ("s3.", "client.", "gcs.", "adls.", "oss.", "hf.", "hdfs.", "pyarrow.")
_FILE_IO_KEYS = frozenset({"py-io-impl"})
# Keys of a FileIO dict that carry credentials: replaced as one unit, masked in reprs.
_CREDENTIAL_KEYS = (
    "s3.access-key-id",
    "s3.secret-access-key",
    "s3.session-token",
    "client.access-key-id",
    "client.secret-access-key",
    "client.session-token",
    "s3.role-arn",
    "s3.role-session-name",
    "client.role-arn",
    "client.role-session-name",
    "s3.profile-name",
    "client.profile-name",
)
_SENSITIVE_KEY = re.compile(r"secret|token|password|credential|sas|key$", re.IGNORECASE)
_NOT_SENSITIVE_KEYS = frozenset({"s3.access-key-id", "client.access-key-id", "adls.account-name"})


# --------------------------------------------------------------------------- secret hygiene

_SECRET_VALUES: set[str] = set()  # every secret value resolved in this process (for log masking)
_SECRET_LOCK = threading.Lock()
_URL_USERINFO = re.compile(r"(?P<pre>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^@\s/]*@")


def _remember_secret(value: str) -> None:
    if value:
        with _SECRET_LOCK:
            _SECRET_VALUES.add(value)
        _install_log_filter()


_MIN_GLOBAL_SECRET = 4  # shorter remembered values would mangle unrelated text


def scrub(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with secret values and URL passwords masked.

    ``extra`` (the secrets of the current call) are masked whatever their length; the values
    remembered from earlier calls (used by the log filter) from 4 characters up.
    """
    with _SECRET_LOCK:
        values = {v for v in _SECRET_VALUES if len(v) >= _MIN_GLOBAL_SECRET}
    values.update(v for v in extra if v)
    # longest first, so a secret containing another is masked whole
    for value in sorted(values, key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
    return _URL_USERINFO.sub(lambda m: m.group("pre") + MASK + "@", text)


class _ScrubFilter(logging.Filter):
    """Masks secret values in records of the libraries that talk to catalogs and stores."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken record is not ours to fix
            return True
        if "SecretAccessKey" in message or "<SessionToken>" in message or '"SessionToken"' in message:
            # botocore logs STS response bodies at DEBUG before we learn the values in them
            record.msg, record.args = "[icesql: a response carrying AWS credentials was not logged]", ()
            return True
        cleaned = scrub(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


_FILTER = _ScrubFilter()
_FILTERED_LOGGERS = (
    "pyiceberg",
    "botocore",
    "botocore.endpoint",
    "botocore.parsers",
    "botocore.auth",
    "botocore.hooks",
    "botocore.credentials",
    "botocore.httpsession",
    "botocore.retryhandler",
    "boto3",
    "urllib3",
    "urllib3.connectionpool",
    "requests",
    "sqlalchemy",
    "sqlalchemy.engine",
    "sqlalchemy.engine.Engine",
    __name__,
)
_filter_installed = False


def _install_log_filter() -> None:
    # Logger filters only see records logged on that very logger, hence the list of children.
    global _filter_installed
    if _filter_installed:
        return
    for name in _FILTERED_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    _filter_installed = True


class _Secrets:
    """Resolves plan values through the store and remembers them for masking."""

    def __init__(self, resolver: SecretResolver) -> None:
        self._resolver = resolver
        self.values: list[str] = []
        self.aws_credentials: dict[str, dict[str, str]] = {}  # per AWS connection, this call only

    def plain(self, value: str | SecretName | None) -> str | None:
        """A value that is not secret by itself (an access key id) but may be stored as one."""
        if value is None:
            return None
        if isinstance(value, SecretName):
            return self._resolver(value.name)
        return value

    def secret(self, value: str | SecretName | None) -> str | None:
        """A secret value: resolved, and remembered so no message or log shows it."""
        resolved = self.plain(value)
        if resolved:
            self.values.append(resolved)
            _remember_secret(resolved)
            if ":" in resolved:  # 'client_id:client_secret' - the secret half alone too
                tail = resolved.split(":", 1)[1]
                if tail:
                    self.values.append(tail)
                    _remember_secret(tail)
        return resolved

    def scrub(self, text: str) -> str:
        """Mask only this call's secrets (for messages icesql wrote itself)."""
        for value in sorted(set(self.values), key=len, reverse=True):
            if value and value in text:
                text = text.replace(value, MASK)
        return text


class IoProperties(dict[str, str]):
    """FileIO properties for executors: a plain picklable dict whose repr hides credentials."""

    def __repr__(self) -> str:
        shown = {k: (MASK if _is_sensitive_key(k) else v) for k, v in self.items()}
        return f"IoProperties({shown!r})"

    __str__ = __repr__


def _is_sensitive_key(key: str) -> bool:
    return key not in _NOT_SENSITIVE_KEYS and bool(_SENSITIVE_KEY.search(key))


# --------------------------------------------------------------------------- AWS


_ROLE_CACHE: dict[tuple[str, str, str, str | None, str | None], tuple[float, dict[str, str]]] = {}
_ROLE_CACHE_LOCK = threading.Lock()


def _boto_config(**extra: Any) -> Any:
    from botocore.config import Config

    return Config(
        connect_timeout=5, read_timeout=20, retries={"max_attempts": 2, "mode": "standard"}, **extra
    )


def _assume_role(
    aws: AwsConnectionPlan, key: str | None, secret: str | None, token: str | None
) -> dict[str, str]:
    """Temporary keys from STS AssumeRole, cached until 5 minutes before they expire.

    Untested here: it needs AWS STS (no network on the test machines).
    """
    import boto3

    assert aws.assume_role_arn
    session_name = aws.assume_role_session_name or "icesql"
    cache_key = (aws.name, aws.assume_role_arn, session_name, key, aws.region)
    now = time.time()
    with _ROLE_CACHE_LOCK:
        hit = _ROLE_CACHE.get(cache_key)
    if hit and hit[0] - 300 > now:
        return dict(hit[1])
    sts = boto3.client(
        "sts",
        region_name=aws.signing_region,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        aws_session_token=token,
        config=_boto_config(),
    )
    resp = sts.assume_role(RoleArn=aws.assume_role_arn, RoleSessionName=session_name)
    creds = resp["Credentials"]
    out = {
        "access_key_id": creds["AccessKeyId"],
        "secret_access_key": creds["SecretAccessKey"],
        "session_token": creds["SessionToken"],
    }
    _remember_secret(out["secret_access_key"])
    _remember_secret(out["session_token"])
    expires = creds.get("Expiration")
    expiry = expires.timestamp() if hasattr(expires, "timestamp") else now + 3600
    with _ROLE_CACHE_LOCK:
        _ROLE_CACHE[cache_key] = (expiry, out)
    return dict(out)


def _aws_credentials(aws: AwsConnectionPlan, sec: _Secrets) -> dict[str, str]:
    """access_key_id / secret_access_key / session_token, from keys, a role, or the default chain."""
    cached = sec.aws_credentials.get(aws.name)
    if cached is None:
        cached = sec.aws_credentials[aws.name] = _resolve_aws_credentials(aws, sec)
    return dict(cached)


def _resolve_aws_credentials(aws: AwsConnectionPlan, sec: _Secrets) -> dict[str, str]:
    key = sec.plain(aws.access_key_id)
    secret = sec.secret(aws.secret_access_key)
    token = sec.secret(aws.session_token)
    if aws.assume_role_arn:
        return _assume_role(aws, key, secret, token)
    if key and secret:
        out = {"access_key_id": key, "secret_access_key": secret}
        if token:
            out["session_token"] = token
        return out
    # No keys: the default AWS credential chain (environment, profile, container, instance).
    import boto3

    creds = boto3.Session(region_name=aws.region).get_credentials()
    if creds is None:
        return {}
    frozen = creds.get_frozen_credentials()
    out = {"access_key_id": frozen.access_key, "secret_access_key": frozen.secret_key}
    _remember_secret(frozen.secret_key)
    if frozen.token:
        out["session_token"] = frozen.token
        _remember_secret(frozen.token)
    return out


def _aws_file_io(aws: AwsConnectionPlan, sec: _Secrets) -> dict[str, str]:
    creds = _aws_credentials(aws, sec)
    props: dict[str, str] = {}
    if "access_key_id" in creds:
        props["s3.access-key-id"] = creds["access_key_id"]
        props["s3.secret-access-key"] = creds["secret_access_key"]
    if "session_token" in creds:
        props["s3.session-token"] = creds["session_token"]
    # An S3-compatible endpoint gets a region too: without one pyarrow asks AWS where the bucket is.
    region = aws.region or (DEFAULT_REGION if aws.endpoint else None)
    if region:
        props["s3.region"] = region
    if aws.endpoint:
        props["s3.endpoint"] = aws.endpoint
        props["s3.force-virtual-addressing"] = "false"  # pyarrow: path-style requests
        props["s3.path-style-access"] = "true"  # iceberg-rust / Java spelling of the same
    return props


def aws_properties(aws: AwsConnectionPlan, *, secrets: SecretResolver) -> IoProperties:
    """FileIO properties (``s3.*``) of one AWS connection; assumes the role when one is set."""
    sec = _Secrets(secrets)
    return IoProperties(
        _guarded(lambda: _aws_file_io(aws, sec), _aws_label(aws), aws.endpoint, sec, "connect")
    )


def _aws_client_properties(aws: AwsConnectionPlan | None, sec: _Secrets, prefix: str) -> dict[str, str]:
    """``<prefix>.access-key-id`` etc. for boto3 sessions pyiceberg builds (SigV4, Glue)."""
    if aws is None:
        return {}
    creds = _aws_credentials(aws, sec)
    props = {f"{prefix}.region": aws.signing_region}
    if "access_key_id" in creds:
        props[f"{prefix}.access-key-id"] = creds["access_key_id"]
        props[f"{prefix}.secret-access-key"] = creds["secret_access_key"]
    if "session_token" in creds:
        props[f"{prefix}.session-token"] = creds["session_token"]
    return props


# --------------------------------------------------------------------------- catalog properties


def _conn_label(conn: CatalogConnectionPlan) -> str:
    return f"catalog connection '{conn.name}'"


def _aws_label(aws: AwsConnectionPlan) -> str:
    return f"AWS connection '{aws.name}'"


def _local_path(value: str) -> Path:
    if value.startswith("file://"):
        value = value[len("file://") :]
    return Path(value).expanduser().absolute()


def _warehouse_dir(conn: CatalogConnectionPlan, home: Path) -> Path:
    """WAREHOUSE as an absolute local directory (relative paths resolve against the cwd)."""
    path = _local_path(conn.warehouse) if conn.warehouse else (home / "warehouse").absolute()
    path.mkdir(parents=True, exist_ok=True)
    return path


def _is_remote(location: str) -> bool:
    return "://" in location and not location.startswith("file://")


def default_s3tables_uri(region: str) -> str:
    return f"https://s3tables.{region}.amazonaws.com/iceberg"


def _default_signing_name(uri: str) -> str:
    host = urlsplit(uri).hostname or ""
    if host.startswith("s3tables.") or ".s3tables." in host:
        return "s3tables"
    if host.startswith("glue.") or ".glue." in host:
        return "glue"
    return "execute-api"


def _missing(conn: CatalogConnectionPlan, option: str, why: str) -> ExecutionError:
    return ExecutionError(
        f"{_conn_label(conn)}: {conn.catalog_type.value} catalog needs {option}",
        hint=why,
    )


def _rest_auth_properties(
    conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None, sec: _Secrets, uri: str
) -> dict[str, Any]:
    props: dict[str, Any] = {}
    auth = conn.auth
    if auth is RestAuth.NONE and conn.credential is not None:
        auth = RestAuth.OAUTH2
    if auth is RestAuth.NONE and conn.token is not None:
        auth = RestAuth.TOKEN
    if auth is RestAuth.OAUTH2:
        if conn.credential is not None:
            credential = sec.secret(conn.credential)
        elif conn.user is not None:
            password = sec.secret(conn.password) or ""
            credential = f"{conn.user}:{password}"
            sec.values.append(credential)
            _remember_secret(credential)
        else:
            raise _missing(conn, "USER and PASSWORD, or CREDENTIAL", "OAuth2 client credentials authenticate")
        props["credential"] = credential
        # Explicit, so pyiceberg does not warn about the deprecated implicit token endpoint.
        props["oauth2-server-uri"] = conn.oauth2_server_uri or uri.rstrip("/") + "/v1/oauth/tokens"
        if conn.scope:
            props["scope"] = conn.scope
    elif auth is RestAuth.BASIC:
        if conn.user is None:
            raise _missing(conn, "USER and PASSWORD", "AUTH = 'basic' sends them as HTTP basic auth")
        password = sec.secret(conn.password) or ""
        props["auth"] = {"type": "basic", "basic": {"username": conn.user, "password": password}}
    elif auth is RestAuth.TOKEN:
        token = sec.secret(conn.token)
        if not token:
            raise _missing(conn, "TOKEN = SECRET name", "the token is sent as 'Authorization: Bearer ...'")
        props["token"] = token
    elif auth is RestAuth.SIGV4:
        props.update(_sigv4_properties(aws, sec, signing_name=_default_signing_name(uri)))
    return props


def _sigv4_properties(aws: AwsConnectionPlan | None, sec: _Secrets, *, signing_name: str) -> dict[str, Any]:
    props: dict[str, Any] = {
        "rest.sigv4-enabled": "true",
        "rest.signing-name": signing_name,
        "rest.signing-region": aws.signing_region if aws else DEFAULT_REGION,
        "rest.sigv4.max-retries": "2",
    }
    # Without keys pyiceberg's boto3 session falls back to the default credential chain.
    props.update(_aws_client_properties(aws, sec, "client"))
    return props


def _file_io_for(aws: AwsConnectionPlan | None, sec: _Secrets) -> dict[str, str]:
    return _aws_file_io(aws, sec) if aws is not None else {}


def _catalog_properties(
    conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None, sec: _Secrets, home: Path
) -> dict[str, Any]:
    ctype = conn.catalog_type
    props: dict[str, Any]
    if ctype is CatalogType.LOCAL:
        wh = _warehouse_dir(conn, home)
        props = {"uri": f"sqlite:///{wh / 'catalog.db'}", "warehouse": wh.as_uri()}
    elif ctype is CatalogType.SQL:
        if not conn.uri:
            raise _missing(conn, "URI", "a SQLAlchemy database URI, e.g. 'postgresql+psycopg2://host/db'")
        if conn.warehouse and _is_remote(conn.warehouse):
            warehouse = conn.warehouse
        else:
            warehouse = _warehouse_dir(conn, home).as_uri()
        props = {"uri": conn.uri, "warehouse": warehouse, **_file_io_for(aws, sec)}
    elif ctype is CatalogType.REST:
        if not conn.uri:
            raise _missing(conn, "URI", "the base URL of the Iceberg REST catalog")
        props = {"uri": conn.uri, **_file_io_for(aws, sec)}
        if conn.warehouse:
            props["warehouse"] = conn.warehouse
        props.update(_rest_auth_properties(conn, aws, sec, conn.uri))
    elif ctype is CatalogType.S3TABLES:
        if not conn.warehouse:
            raise _missing(
                conn, "WAREHOUSE", "the table bucket ARN, arn:aws:s3tables:<region>:<account>:bucket/<name>"
            )
        region = aws.signing_region if aws else DEFAULT_REGION
        uri = conn.uri or default_s3tables_uri(region)
        props = {"uri": uri, "warehouse": conn.warehouse, **_file_io_for(aws, sec)}
        props.setdefault("s3.region", region)
        props.update(_sigv4_properties(aws, sec, signing_name="s3tables"))
    elif ctype is CatalogType.GLUE:
        # Untested here: needs AWS Glue.
        props = {**_file_io_for(aws, sec), **_aws_client_properties(aws, sec, "glue")}
        if conn.warehouse:
            props["warehouse"] = conn.warehouse
    elif ctype is CatalogType.HIVE:
        # Untested here: needs a Hive metastore.
        if not conn.uri:
            raise _missing(conn, "URI", "the metastore's thrift URI, e.g. 'thrift://host:9083'")
        props = {"uri": conn.uri, **_file_io_for(aws, sec)}
        if conn.warehouse:
            props["warehouse"] = conn.warehouse
    else:  # pragma: no cover - the enum is closed
        raise ExecutionError(f"{_conn_label(conn)}: unsupported catalog type {ctype.value!r}")
    if conn.access_delegation:
        props["header.X-Iceberg-Access-Delegation"] = conn.access_delegation
    for key, value in conn.properties:
        props[key] = value
    return props


def catalog_properties(
    conn: CatalogConnectionPlan,
    *,
    aws: AwsConnectionPlan | None,
    secrets: SecretResolver,
    home: Path,
) -> dict[str, Any]:
    """The pyiceberg properties ``load_catalog`` uses. Holds secret values: never print it."""
    sec = _Secrets(secrets)
    return _guarded(
        lambda: _catalog_properties(conn, aws, sec, home), _conn_label(conn), conn.uri, sec, "connect"
    )


def _construct(conn: CatalogConnectionPlan, props: dict[str, Any]) -> Catalog:
    ctype = conn.catalog_type
    if ctype in (CatalogType.LOCAL, CatalogType.SQL):
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog(conn.name, **props)
    if ctype in (CatalogType.REST, CatalogType.S3TABLES):
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(conn.name, **props)
    if ctype is CatalogType.GLUE:
        from pyiceberg.catalog.glue import GlueCatalog

        return GlueCatalog(conn.name, **props)
    if ctype is CatalogType.HIVE:
        from pyiceberg.catalog.hive import HiveCatalog

        return HiveCatalog(conn.name, **props)
    raise ExecutionError(f"{_conn_label(conn)}: unsupported catalog type {ctype.value!r}")


def load_catalog(
    conn: CatalogConnectionPlan,
    *,
    aws: AwsConnectionPlan | None,
    secrets: SecretResolver,
    home: Path,
) -> Catalog:
    """A live pyiceberg catalog for ``conn``; ``aws`` is its AWS CONNECTION, resolved by the caller.

    REST catalogs talk to the server here (config, OAuth2 token); failures become
    ``ExecutionError`` naming the connection, with no secret value anywhere in them.
    """
    sec = _Secrets(secrets)
    label = _conn_label(conn)

    def build() -> Catalog:
        return _construct(conn, _catalog_properties(conn, aws, sec, home))

    return _guarded(build, label, _endpoint_of(conn, aws), sec, "connect")


def _endpoint_of(conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None) -> str | None:
    if conn.catalog_type is CatalogType.S3TABLES and not conn.uri:
        return default_s3tables_uri(aws.signing_region if aws else DEFAULT_REGION)
    if conn.catalog_type is CatalogType.LOCAL:
        return None
    return conn.uri


# --------------------------------------------------------------------------- FileIO for executors


def _file_io_only(props: dict[str, Any]) -> dict[str, str]:
    return {
        k: v
        for k, v in props.items()
        if isinstance(v, str) and (k in _FILE_IO_KEYS or k.startswith(_FILE_IO_PREFIXES))
    }


def io_properties(
    *,
    table: Table | None = None,
    sink_aws: AwsConnectionPlan | None = None,
    catalog_aws: AwsConnectionPlan | None = None,
    secrets: SecretResolver,
) -> IoProperties:
    """FileIO properties for writing a table's data files from Spark executors.

    Layers, later wins: the catalog's AWS connection; what the catalog configured and vends
    for the table (``table.io.properties``: catalog config, table config, storage credentials);
    the sink's ``USING AWS CONNECTION``. A layer that carries credentials replaces the
    credentials below it as a unit (no vended session token next to another key pair).
    Only FileIO keys survive (``s3.*``, ``client.*``, ``gcs.*``, ``adls.*``, ``py-io-impl``...):
    catalog credentials (OAuth2 secret, token, basic password) never reach executors.
    """
    sec = _Secrets(secrets)

    def build() -> dict[str, str]:
        out: dict[str, str] = {}
        layers: list[dict[str, str]] = []
        if catalog_aws is not None:
            layers.append(_aws_file_io(catalog_aws, sec))
        if table is not None:
            layers.append(_file_io_only(dict(table.io.properties)))
        if sink_aws is not None:
            layers.append(_aws_file_io(sink_aws, sec))
        for layer in layers:
            if any(k in layer for k in _CREDENTIAL_KEYS):
                for k in _CREDENTIAL_KEYS:
                    out.pop(k, None)
            out.update(layer)
        return out

    primary = sink_aws or catalog_aws
    label = _aws_label(primary) if primary else "table FileIO"
    endpoint = primary.endpoint if primary else None
    return IoProperties(_guarded(build, label, endpoint, sec, "connect"))


def use_sink_file_io(catalog: Catalog, sink_aws: AwsConnectionPlan, *, secrets: SecretResolver) -> Catalog:
    """Make the tables ``catalog`` loads or creates use the sink's ``USING AWS CONNECTION`` for
    their files, layered as ``io_properties`` layers it for executors (its credentials replace
    the catalog's and the vended ones as a unit).

    The driver writes manifests and manifest lists with ``table.io``, and ``Table.refresh()``
    takes a new FileIO from the catalog on every commit: without this, a catalog that neither
    vends storage credentials nor has an AWS CONNECTION of its own (a REST catalog with OAuth2)
    commits with a FileIO that has no endpoint and no keys, although the executors wrote the
    data files with the sink's.
    """
    from pyiceberg.io import load_file_io

    original = catalog._load_file_io

    def _load_file_io(properties: Any = None, location: str | None = None) -> Any:
        # per load (every commit refreshes): assumed-role credentials stay fresh
        layer = dict(aws_properties(sink_aws, secrets=secrets))
        base = dict(original(properties or {}, location).properties)
        if any(k in layer for k in _CREDENTIAL_KEYS):
            for k in _CREDENTIAL_KEYS:
                base.pop(k, None)
        return load_file_io({**base, **layer}, location)

    catalog._load_file_io = _load_file_io  # type: ignore[method-assign]
    return catalog


# --------------------------------------------------------------------------- validation


def validate_connection(
    conn: CatalogConnectionPlan | AwsConnectionPlan,
    *,
    aws: AwsConnectionPlan | None = None,
    secrets: SecretResolver,
    home: Path,
) -> list[tuple[str, ...]]:
    """Connect once. Catalogs: list namespaces (returned). AWS: one cheap authenticated call."""
    if isinstance(conn, AwsConnectionPlan):
        validate_aws_connection(conn, secrets=secrets)
        return []
    catalog = load_catalog(conn, aws=aws, secrets=secrets, home=home)
    sec = _Secrets(secrets)
    return _guarded(
        lambda: [tuple(ns) for ns in catalog.list_namespaces()],
        _conn_label(conn),
        _endpoint_of(conn, aws),
        sec,
        "list namespaces",
    )


def validate_aws_connection(aws: AwsConnectionPlan, *, secrets: SecretResolver) -> None:
    """With ENDPOINT: S3 ListBuckets there. Without: STS GetCallerIdentity (needs AWS)."""
    sec = _Secrets(secrets)

    def check() -> None:
        import boto3

        creds = _aws_credentials(aws, sec)
        if not creds:
            from botocore.exceptions import NoCredentialsError

            raise NoCredentialsError()
        kwargs = {
            "region_name": aws.signing_region,
            "aws_access_key_id": creds.get("access_key_id"),
            "aws_secret_access_key": creds.get("secret_access_key"),
            "aws_session_token": creds.get("session_token"),
        }
        if aws.endpoint:
            client = boto3.client(
                "s3",
                endpoint_url=aws.endpoint,
                config=_boto_config(s3={"addressing_style": "path"}),
                **kwargs,
            )
            client.list_buckets()
        else:
            boto3.client("sts", config=_boto_config(), **kwargs).get_caller_identity()

    _guarded(check, _aws_label(aws), aws.endpoint, sec, "validate")


# --------------------------------------------------------------------------- error translation


def _guarded(fn: Callable[[], T], label: str, endpoint: str | None, sec: _Secrets, action: str) -> T:
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


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen and len(seen) < 20:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def _http_response(chain: list[BaseException]) -> Any:
    for e in chain:
        response = getattr(e, "response", None)
        if response is not None and hasattr(response, "status_code"):
            return response
    return None


def _one_line(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_json(text: str) -> bool:
    import json

    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def describe_failure(
    exc: BaseException,
    *,
    label: str,
    endpoint: str | None,
    action: str = "connect",
    extra_secrets: Iterable[str] = (),
) -> ExecutionError:
    """Classify a library exception into a one-line, secret-free ``ExecutionError``."""
    chain = _chain(exc)
    names = {type(e).__name__ for e in chain}
    module_names = {type(e).__module__.split(".")[0] for e in chain}
    raw = " | ".join(f"{type(e).__name__}: {e}" for e in chain)
    detail_src = scrub(str(exc), extra_secrets)
    detail = _one_line(detail_src)
    at = f" at {scrub(endpoint, extra_secrets)}" if endpoint else ""
    response = _http_response(chain)
    status = getattr(response, "status_code", None)
    body = ""
    if response is not None:
        try:
            body = response.text or ""
        except Exception:
            body = ""
    log.debug("%s: %s failed: %s", label, action, scrub(raw, extra_secrets))

    def err(cause: str, hint: str, show_detail: bool = True) -> ExecutionError:
        # label, cause and hint are icesql's own words; only library text (detail) is scrubbed
        msg = f"{label}: cannot {action}{at}: {cause}"
        if show_detail and detail and detail not in cause:
            msg += f" ({detail})"
        return ExecutionError(_one_line(msg, 400), hint=hint)

    # --- transport: refused, DNS, TLS, timeouts (requests / urllib3 / botocore / sqlalchemy)
    if names & {"SSLError", "SSLCertVerificationError"}:
        return err("TLS handshake failed", "check the URI scheme (http/https) and the server certificate")
    if names & {"ConnectTimeout", "ReadTimeout", "Timeout", "ConnectTimeoutError", "ReadTimeoutError"}:
        return err("catalog unreachable (timed out)", "check the URI/ENDPOINT host and port and any firewall")
    if names & {
        "ConnectionError",
        "NewConnectionError",
        "MaxRetryError",
        "EndpointConnectionError",
        "NameResolutionError",
        "ConnectionRefusedError",
        "gaierror",
        "ProxyConnectionError",
    }:
        low = raw.lower()
        if (
            "name or service not known" in low
            or "nodename nor servname" in low
            or "nameresolution" in low
            or "getaddrinfo" in low
            or "temporary failure in name resolution" in low
        ):
            cause = "unreachable (host name does not resolve)"
        elif "refused" in low:
            cause = "unreachable (connection refused)"
        else:
            cause = "unreachable (connection failed)"
        return err(cause, "check the URI/ENDPOINT host and port, and that the server is running", False)

    # --- botocore (AWS connections, SigV4 credential lookups, Glue)
    if "NoCredentialsError" in names or "PartialCredentialsError" in names:
        return err(
            "no AWS credentials (the default credential chain found none)",
            "set ACCESS KEY ID and SECRET ACCESS KEY = SECRET name on the AWS connection, or ASSUME ROLE ARN",
            False,
        )
    if "ClientError" in names:
        code = ""
        for e in chain:
            resp = getattr(e, "response", None)
            if isinstance(resp, dict):
                code = str(resp.get("Error", {}).get("Code", ""))
                http = resp.get("ResponseMetadata", {}).get("HTTPStatusCode")
                status = status or http
                break
        if code in {
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
        } or status in (401, 403):
            return err(
                f"authentication rejected ({code or status})",
                "check ACCESS KEY ID, the SECRET ACCESS KEY secret, SESSION TOKEN and REGION of the AWS connection",
            )
        return err(f"AWS error {code or status}", "see the AWS error code; check REGION and ENDPOINT")

    # --- HTTP answers (pyiceberg REST)
    non_json = response is not None and body.strip() != "" and not _is_json(body)
    if "OAuthError" in names:
        return err(
            f"authentication rejected by the OAuth2 token endpoint (HTTP {status or '401'})",
            "check USER and the PASSWORD secret (OAuth2 client credentials), or the CREDENTIAL secret "
            "'client_id:client_secret', and OAUTH2 SERVER URI / SCOPE",
        )
    url = str(getattr(response, "url", "") or "")
    if non_json or "Could not decode json payload" in raw or "Received unexpected JSON Payload" in raw:
        return err(
            f"not an Iceberg REST endpoint (HTTP {status}, the answer is not an Iceberg REST response)",
            "URI must be the catalog's base URL, the one whose '/v1/config' answers (e.g. "
            "'https://host/api/catalog')",
            False,
        )
    if "UnauthorizedError" in names or status == 401:
        return err(
            "authentication rejected (401 Unauthorized)",
            "check the catalog credentials (USER/PASSWORD, CREDENTIAL or TOKEN secret)",
        )
    if "ForbiddenError" in names or status == 403:
        return err(
            "authentication rejected (403 Forbidden)",
            "check the credentials (for SigV4: the AWS connection's keys and REGION) and the "
            "principal's permissions on the warehouse",
        )
    if "AuthorizationExpiredError" in names or status == 419:
        return err("authentication expired (419)", "the token expired; use client credentials or a new TOKEN")
    if status == 404 or "NoSuchNamespaceError" in names:
        if url.rstrip("/").endswith("/v1/config"):
            return err(
                "not an Iceberg REST endpoint (GET /v1/config answered 404)",
                "URI must be the catalog's base URL, the one whose '/v1/config' answers",
            )
        return err("warehouse not found (404)", "check WAREHOUSE (for S3 Tables, the table bucket ARN)")
    if (status is not None and 500 <= int(status) < 600) or names & {
        "ServerError",
        "ServiceUnavailableError",
    }:
        return err(f"catalog server error (HTTP {status})", "the catalog server failed; see its logs")
    if names & {"BadRequestError", "RESTError", "TooManyRequestsError"}:
        return err(f"catalog rejected the request (HTTP {status})", "check WAREHOUSE and the catalog options")
    if "JSONDecodeError" in names or (
        "ValidationError" in names and module_names & {"pydantic", "pydantic_core"}
    ):
        return err(
            "not an Iceberg REST endpoint (its answer is not an Iceberg REST response)",
            "URI must be the catalog's base URL, the one whose '/v1/config' answers",
            False,
        )

    # --- SQL catalogs (sqlalchemy)
    if "sqlalchemy" in module_names:
        if names & {"NoSuchModuleError"}:
            return err("database driver not installed", "install the SQLAlchemy driver named in URI")
        if names & {"ArgumentError"}:
            return err("invalid database URI", "URI is a SQLAlchemy URL, e.g. 'sqlite:////path/catalog.db'")
        if names & {"OperationalError", "InterfaceError"}:
            return err(
                "database unreachable or refused the connection",
                "check URI, the database and its credentials",
            )
    if isinstance(exc, (PermissionError, FileNotFoundError, NotADirectoryError, IsADirectoryError)):
        return err("cannot use the warehouse directory", "check WAREHOUSE and its permissions")

    return err(f"unexpected error {type(exc).__name__}", "run with debug logging for details")


__all__ = [
    "IoProperties",
    "aws_properties",
    "catalog_properties",
    "default_s3tables_uri",
    "describe_failure",
    "io_properties",
    "load_catalog",
    "scrub",
    "use_sink_file_io",
    "validate_aws_connection",
    "validate_connection",
]
