"""The registry of Iceberg catalog kinds: how each ``TYPE`` becomes pyiceberg properties and a
pyiceberg ``Catalog`` (pyiceberg's own catalog registry is the model: one entry per type, the
catalog class loaded lazily by name).

==========  =====================================================================================
type        entry
==========  =====================================================================================
local       SQLite catalog ``<WAREHOUSE>/catalog.db`` + the warehouse directory (default
            ``<home>/warehouse``)
sql         pyiceberg's SQL catalog on ``URI``; a remote WAREHOUSE as is, else a local directory
rest        any Iceberg REST catalog on ``URI``, authenticated by ``REST_AUTH[auth]``
s3tables    REST with SigV4 signing name ``s3tables``, ``WAREHOUSE`` = the table bucket ARN, ``URI``
            defaulting to the regional S3 Tables endpoint, the region of the AWS connection
glue        AWS Glue Data Catalog through the AWS connection; ``URI``: a Glue endpoint of its own
            (a VPC endpoint, an emulator; tested against moto's server)
hive        a Hive metastore on ``URI`` (tested against hive-metastore 2.3 from the pyspark wheel)
==========  =====================================================================================

REST authentication (``REST_AUTH``): OAuth2 client credentials (``USER``/``PASSWORD`` or
``CREDENTIAL``), HTTP basic, a bearer ``TOKEN``, or SigV4 through the AWS connection (signing
name from the host: ``s3tables``, ``glue``, else ``execute-api``).

Every entry also gets the AWS connection's ``s3.*`` FileIO properties, the GCS or AZURE
connection's (``stores``), ``ACCESS DELEGATION`` as
the ``X-Iceberg-Access-Delegation`` header and the connection's ``PROPERTIES`` (last, so a user
can override anything). The properties hold secret values: never log or print them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from icesql.engine.base.secrets import SecretValues
from icesql.engine.connections import aws as aws_credentials
from icesql.errors import ExecutionError
from icesql.plan import (
    DEFAULT_REGION,
    AwsConnectionPlan,
    CatalogConnectionPlan,
    CatalogType,
    RestAuth,
    StorageConnectionPlan,
)

Properties = dict[str, Any]


def label(conn: CatalogConnectionPlan) -> str:
    return f"catalog connection '{conn.name}'"


def _missing(conn: CatalogConnectionPlan, option: str, why: str) -> ExecutionError:
    return ExecutionError(f"{label(conn)}: {conn.catalog_type.value} catalog needs {option}", hint=why)


def _local_path(value: str) -> Path:
    if value.startswith("file://"):
        value = value[len("file://") :]
    return Path(value).expanduser().absolute()


def warehouse_dir(conn: CatalogConnectionPlan, home: Path) -> Path:
    """WAREHOUSE as an absolute local directory (relative paths resolve against the cwd)."""
    path = _local_path(conn.warehouse) if conn.warehouse else (home / "warehouse").absolute()
    path.mkdir(parents=True, exist_ok=True)
    return path


def _is_remote(location: str) -> bool:
    return "://" in location and not location.startswith("file://")


def default_s3tables_uri(region: str) -> str:
    return f"https://s3tables.{region}.amazonaws.com/iceberg"


def _s3_file_io(aws: AwsConnectionPlan | None, sec: SecretValues) -> dict[str, str]:
    return aws_credentials.s3_file_io(aws, sec) if aws is not None else {}


# --------------------------------------------------------------------------- REST authentication


def _signing_name(uri: str) -> str:
    host = urlsplit(uri).hostname or ""
    if host.startswith("s3tables.") or ".s3tables." in host:
        return "s3tables"
    if host.startswith("glue.") or ".glue." in host:
        return "glue"
    return "execute-api"


def sigv4_properties(aws: AwsConnectionPlan | None, sec: SecretValues, *, signing_name: str) -> Properties:
    props: Properties = {
        "rest.sigv4-enabled": "true",
        "rest.signing-name": signing_name,
        "rest.signing-region": aws.signing_region if aws else DEFAULT_REGION,
        "rest.sigv4.max-retries": "2",
    }
    # Without keys pyiceberg's boto3 session falls back to the default credential chain.
    props.update(aws_credentials.client_properties(aws, sec, "client"))
    return props


def _oauth2(
    conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None, sec: SecretValues, uri: str
) -> Properties:
    if conn.credential is not None:
        credential = sec.secret(conn.credential)
    elif conn.user is not None:
        password = sec.secret(conn.password) or ""
        credential = f"{conn.user}:{password}"
        sec.remember(credential)
    else:
        raise _missing(conn, "USER and PASSWORD, or CREDENTIAL", "OAuth2 client credentials authenticate")
    props: Properties = {
        "credential": credential,
        # Explicit, so pyiceberg does not warn about the deprecated implicit token endpoint.
        "oauth2-server-uri": conn.oauth2_server_uri or uri.rstrip("/") + "/v1/oauth/tokens",
    }
    if conn.scope:
        props["scope"] = conn.scope
    return props


def _basic(
    conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None, sec: SecretValues, uri: str
) -> Properties:
    if conn.user is None:
        raise _missing(conn, "USER and PASSWORD", "AUTH = 'basic' sends them as HTTP basic auth")
    password = sec.secret(conn.password) or ""
    return {"auth": {"type": "basic", "basic": {"username": conn.user, "password": password}}}


def _token(
    conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None, sec: SecretValues, uri: str
) -> Properties:
    token = sec.secret(conn.token)
    if not token:
        raise _missing(conn, "TOKEN = SECRET name", "the token is sent as 'Authorization: Bearer ...'")
    return {"token": token}


def _sigv4(
    conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None, sec: SecretValues, uri: str
) -> Properties:
    return sigv4_properties(aws, sec, signing_name=_signing_name(uri))


RestAuthBuilder = Callable[[CatalogConnectionPlan, "AwsConnectionPlan | None", SecretValues, str], Properties]

REST_AUTH: dict[RestAuth, RestAuthBuilder] = {
    RestAuth.NONE: lambda conn, aws, sec, uri: {},
    RestAuth.OAUTH2: _oauth2,
    RestAuth.BASIC: _basic,
    RestAuth.TOKEN: _token,
    RestAuth.SIGV4: _sigv4,
}


def rest_auth(conn: CatalogConnectionPlan) -> RestAuth:
    """The effective auth: a CREDENTIAL means OAuth2, a TOKEN a bearer token, when AUTH is unset."""
    if conn.auth is RestAuth.NONE and conn.credential is not None:
        return RestAuth.OAUTH2
    if conn.auth is RestAuth.NONE and conn.token is not None:
        return RestAuth.TOKEN
    return conn.auth


# --------------------------------------------------------------------------- the kinds


@dataclass(frozen=True)
class CatalogKind:
    """One catalog type: its pyiceberg class (``module:Class``, imported on first use), how its
    properties are built, and the endpoint messages name."""

    catalog_class: str
    properties: Callable[[CatalogConnectionPlan, AwsConnectionPlan | None, SecretValues, Path], Properties]
    endpoint: Callable[[CatalogConnectionPlan, AwsConnectionPlan | None], str | None] = lambda conn, aws: (
        conn.uri
    )
    # properties the catalog's client takes as numbers, not strings (PROPERTIES are strings)
    int_properties: frozenset[str] = frozenset()

    def construct(self, name: str, props: Properties, *, timeout: float = 0.0) -> Any:
        """The pyiceberg catalog; ``timeout``: seconds each REST request may wait (0: for ever),
        from the constructor's own requests on (``pyiceberg_catalogs.timed_sessions``)."""
        from icesql.engine.base.pyiceberg_catalogs import timed_sessions

        module, _, cls = self.catalog_class.partition(":")
        make = timed_sessions(getattr(importlib.import_module(module), cls), timeout)
        try:
            return make(name, **props)
        except Exception as e:
            # a SQL catalog creates its tables when first opened: another process (or sink)
            # opening the same new database at once may create them between the look and the
            # CREATE, which then fails; once they exist, opening it again succeeds
            if "already exists" not in str(e):
                raise
            return make(name, **props)


def _local(
    conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None, sec: SecretValues, home: Path
) -> Properties:
    wh = warehouse_dir(conn, home)
    return {"uri": f"sqlite:///{wh / 'catalog.db'}", "warehouse": wh.as_uri()}


def _sql(
    conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None, sec: SecretValues, home: Path
) -> Properties:
    if not conn.uri:
        raise _missing(conn, "URI", "a SQLAlchemy database URI, e.g. 'postgresql+psycopg2://host/db'")
    if conn.warehouse and _is_remote(conn.warehouse):
        warehouse = conn.warehouse
    else:
        warehouse = warehouse_dir(conn, home).as_uri()
    return {"uri": conn.uri, "warehouse": warehouse, **_s3_file_io(aws, sec)}


def _rest(
    conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None, sec: SecretValues, home: Path
) -> Properties:
    if not conn.uri:
        raise _missing(conn, "URI", "the base URL of the Iceberg REST catalog")
    props: Properties = {"uri": conn.uri, **_s3_file_io(aws, sec)}
    if conn.warehouse:
        props["warehouse"] = conn.warehouse
    props.update(REST_AUTH[rest_auth(conn)](conn, aws, sec, conn.uri))
    return props


def _s3tables(
    conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None, sec: SecretValues, home: Path
) -> Properties:
    if not conn.warehouse:
        raise _missing(
            conn, "WAREHOUSE", "the table bucket ARN, arn:aws:s3tables:<region>:<account>:bucket/<name>"
        )
    region = aws.signing_region if aws else DEFAULT_REGION
    props: Properties = {
        "uri": conn.uri or default_s3tables_uri(region),
        "warehouse": conn.warehouse,
        **_s3_file_io(aws, sec),
    }
    props.setdefault("s3.region", region)
    props.update(sigv4_properties(aws, sec, signing_name="s3tables"))
    return props


def _s3tables_endpoint(conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None) -> str | None:
    return conn.uri or default_s3tables_uri(aws.signing_region if aws else DEFAULT_REGION)


def _glue(
    conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None, sec: SecretValues, home: Path
) -> Properties:
    props: Properties = {**_s3_file_io(aws, sec), **aws_credentials.client_properties(aws, sec, "glue")}
    # botocore's attempts per call (pyiceberg: 10, about 40 s before an unreachable endpoint is
    # reported); a sink's transient failures are retried by icesql itself. An int: pyiceberg 0.12
    # hands the property to botocore as it is, and botocore compares it with numbers
    props["glue.max-retries"] = 3
    if conn.uri:  # a Glue endpoint of its own: a VPC endpoint, an emulator
        props["glue.endpoint"] = conn.uri
    if conn.warehouse:
        props["warehouse"] = conn.warehouse
    return props


def _glue_endpoint(conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None) -> str | None:
    return conn.uri or f"https://glue.{aws.signing_region if aws else DEFAULT_REGION}.amazonaws.com"


def _hive(
    conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None, sec: SecretValues, home: Path
) -> Properties:
    if not conn.uri:
        raise _missing(conn, "URI", "the metastore's thrift URI, e.g. 'thrift://host:9083'")
    props: Properties = {
        "uri": conn.uri,
        **_s3_file_io(aws, sec),
        # The metastore's own columns for a timestamptz field say 'timestamp': Hive 2 has no
        # type for it (pyiceberg fails to create such a table without this), and Iceberg reads
        # the table's schema from its metadata, never from these columns, so Hive 3 and 4 lose
        # nothing. PROPERTIES ('hive.hive2-compatible' = 'false') turns it off.
        "hive.hive2-compatible": "true",
    }
    if conn.warehouse:
        props["warehouse"] = conn.warehouse
    return props


KINDS: dict[CatalogType, CatalogKind] = {
    CatalogType.LOCAL: CatalogKind("pyiceberg.catalog.sql:SqlCatalog", _local, lambda conn, aws: None),
    CatalogType.SQL: CatalogKind("pyiceberg.catalog.sql:SqlCatalog", _sql),
    CatalogType.REST: CatalogKind("pyiceberg.catalog.rest:RestCatalog", _rest),
    CatalogType.S3TABLES: CatalogKind("pyiceberg.catalog.rest:RestCatalog", _s3tables, _s3tables_endpoint),
    CatalogType.GLUE: CatalogKind(
        "pyiceberg.catalog.glue:GlueCatalog", _glue, _glue_endpoint, frozenset({"glue.max-retries"})
    ),
    CatalogType.HIVE: CatalogKind("pyiceberg.catalog.hive:HiveCatalog", _hive),
}


def kind_of(conn: CatalogConnectionPlan) -> CatalogKind:
    kind = KINDS.get(conn.catalog_type)
    if kind is None:  # pragma: no cover - the registry covers the enum (a test checks it)
        raise ExecutionError(f"{label(conn)}: unsupported catalog type {conn.catalog_type.value!r}")
    return kind


def build_properties(
    conn: CatalogConnectionPlan,
    aws: AwsConnectionPlan | None,
    sec: SecretValues,
    home: Path,
    *,
    storage: Sequence[StorageConnectionPlan | None] = (),
) -> Properties:
    """The kind's properties, then the options every kind shares (see the module docstring):
    the FileIO properties of the GCS or AZURE CONNECTION (``storage``), access delegation, and
    the connection's PROPERTIES last."""
    from icesql.engine.connections import stores

    kind = kind_of(conn)
    props = kind.properties(conn, aws, sec, home)
    for plan in storage:
        if plan is not None:
            props = stores.layer(props, stores.connection_properties(plan, sec))
    if conn.access_delegation:
        props["header.X-Iceberg-Access-Delegation"] = conn.access_delegation
    for key, value in conn.properties:
        props[key] = _typed(conn, kind, key, value)
    return props


def _typed(conn: CatalogConnectionPlan, kind: CatalogKind, key: str, value: str) -> Any:
    """A PROPERTIES value as the client takes it: pyiceberg 0.12 hands ``glue.max-retries`` to
    botocore unconverted, and botocore compares it with numbers."""
    if key not in kind.int_properties:
        return value
    try:
        return int(value)
    except ValueError:
        raise ExecutionError(
            f"{label(conn)}: PROPERTIES {key!r} = {value!r} is not a whole number",
            hint=f"write it as a number, e.g. '{key}' = '5'",
        ) from None


__all__ = [
    "KINDS",
    "REST_AUTH",
    "CatalogKind",
    "build_properties",
    "default_s3tables_uri",
    "kind_of",
    "label",
]
