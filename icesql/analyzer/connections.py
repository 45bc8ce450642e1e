"""CREATE CONNECTION ... TO AWS | GCS | AZURE | ICEBERG CATALOG | KAFKA: option tables and their rules.

SPEC §1.2 differs from Materialize in one place on purpose: a ``rest`` catalog may take an
``AWS CONNECTION`` and then signs its requests with SigV4 (``RestAuth.SIGV4``), which is how
REST catalogs behind AWS (and SeaweedFS's) authenticate; Materialize refuses it.

AWS, GCS and AZURE connections hold object-store credentials; ``STORAGES`` has one entry per
kind (the syntax layer's ``StorageKind``: keyword, option list, URL schemes; the plan it
becomes; its option table), and everything that names such a connection (a catalog's or a
FILES source's ``GCS CONNECTION = g``, a sink's ``USING GCS CONNECTION g``) checks it with
``check_storage_connection``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from icesql.analyzer.catalog import CatalogView
from icesql.analyzer.connection_kinds import expect_connection
from icesql.analyzer.diagnostics import Context, one_of
from icesql.analyzer.options import (
    Collected,
    InlineSecrets,
    OptionTable,
    check_applies,
    collect,
    secret_deps,
)
from icesql.analyzer.registry import analyze_registry_connection
from icesql.plan import (
    AwsConnectionPlan,
    AzureConnectionPlan,
    CatalogConnectionPlan,
    CatalogType,
    GcsConnectionPlan,
    KafkaConnectionPlan,
    RestAuth,
    SchemaRegistryConnectionPlan,
    StorageConnectionPlan,
)
from icesql.syntax.ast import ConnectionKind, CreateConnection, Node, Option, StringList
from icesql.syntax.options import STORAGE, StorageKind, storage_of

CONNECTION_WITH_OPTIONS = OptionTable("connection WITH", "connection_with")
CATALOG_OPTIONS = OptionTable("ICEBERG CATALOG", "iceberg_catalog")
KAFKA_OPTIONS = OptionTable("KAFKA CONNECTION", "kafka")


@dataclass(frozen=True)
class Storage:
    """One kind of object-store connection (AWS, GCS, AZURE) as the analyzer sees it."""

    syntax: StorageKind  # keyword, option list, URL schemes, what messages call it
    plan: type[StorageConnectionPlan]  # what CREATE CONNECTION ... TO <keyword> becomes
    options: OptionTable  # its CREATE CONNECTION options
    # the field of a catalog's, source's or sink's plan that holds such a connection's name
    field: str = "storage_connection"

    @property
    def keyword(self) -> str:
        return self.syntax.keyword

    @property
    def kind(self) -> ConnectionKind:
        return ConnectionKind[self.syntax.keyword]

    @property
    def option(self) -> str:
        """``GCS CONNECTION``: the option (or sink clause) that names such a connection."""
        return self.syntax.option


def _storage(keyword: str, plan: type[StorageConnectionPlan], field: str = "storage_connection") -> Storage:
    syntax = STORAGE[keyword]
    return Storage(syntax, plan, OptionTable(syntax.option, syntax.list_kind), field)


STORAGES: dict[ConnectionKind, Storage] = {
    s.kind: s
    for s in (
        # AWS keeps the plans' field it always had: it is a catalog's AWS identity as well
        _storage("AWS", AwsConnectionPlan, "aws_connection"),
        _storage("GCS", GcsConnectionPlan),
        _storage("AZURE", AzureConnectionPlan),
    )
}
AWS_OPTIONS = STORAGES[ConnectionKind.AWS].options
GCS_OPTIONS = STORAGES[ConnectionKind.GCS].options
AZURE_OPTIONS = STORAGES[ConnectionKind.AZURE].options

# the option table of each kind of connection
CONNECTION_OPTIONS = {
    **{kind: storage.options for kind, storage in STORAGES.items()},
    ConnectionKind.ICEBERG_CATALOG: CATALOG_OPTIONS,
    ConnectionKind.KAFKA: KAFKA_OPTIONS,
    ConnectionKind.CONFLUENT_SCHEMA_REGISTRY: OptionTable("CONFLUENT SCHEMA REGISTRY", "schema_registry"),
}

ConnectionPlan = (
    StorageConnectionPlan | KafkaConnectionPlan | SchemaRegistryConnectionPlan | CatalogConnectionPlan
)

# pyiceberg property keys that carry credentials: refused in PROPERTIES, where they would be
# stored and shown in clear text
_CREDENTIAL_MARKERS = ("secret", "password", "token", "credential", "session", "account-key", "account_key")


def analyze_connection(
    ctx: Context, stmt: CreateConnection, catalog: CatalogView
) -> tuple[ConnectionPlan, list[tuple[str, str]], InlineSecrets]:
    inline = InlineSecrets(f"__inline__.{stmt.name.name}")
    with_opts = collect(ctx, stmt.with_options, CONNECTION_WITH_OPTIONS)
    validate = with_opts.get_bool("VALIDATE", True)
    plan, deps = _ANALYZERS[stmt.connection_kind](ctx, stmt, catalog, inline, validate)
    return plan, deps, inline


def _aws(
    ctx: Context, stmt: CreateConnection, catalog: CatalogView, inline: InlineSecrets, validate: bool
) -> tuple[AwsConnectionPlan, list[tuple[str, str]]]:
    opts = collect(ctx, stmt.options, AWS_OPTIONS, inline=inline, secret_exists=catalog.secret_exists)
    has_id, has_key = "ACCESS KEY ID" in opts, "SECRET ACCESS KEY" in opts
    if has_id and not has_key:
        raise ctx.error(
            "ACCESS KEY ID needs SECRET ACCESS KEY",
            opts.node("ACCESS KEY ID"),
            "add SECRET ACCESS KEY = SECRET name",
        )
    if has_key and not has_id:
        raise ctx.error(
            "SECRET ACCESS KEY needs ACCESS KEY ID",
            opts.node("SECRET ACCESS KEY"),
            "add ACCESS KEY ID = '...'",
        )
    if "SESSION TOKEN" in opts and not has_id:
        raise ctx.error(
            "SESSION TOKEN needs ACCESS KEY ID and SECRET ACCESS KEY",
            opts.node("SESSION TOKEN"),
            "a session token belongs to temporary keys",
        )
    if "ASSUME ROLE SESSION NAME" in opts and "ASSUME ROLE ARN" not in opts:
        raise ctx.error(
            "ASSUME ROLE SESSION NAME needs ASSUME ROLE ARN",
            opts.node("ASSUME ROLE SESSION NAME"),
            "add ASSUME ROLE ARN = 'arn:aws:iam::<account>:role/<name>'",
        )
    arn = opts.get_str("ASSUME ROLE ARN")
    if arn is not None and not arn.startswith("arn:"):
        raise ctx.error(
            f"ASSUME ROLE ARN must be an ARN, found '{arn}'",
            opts.node("ASSUME ROLE ARN").value,
            "write it like 'arn:aws:iam::123456789012:role/writer'",
        )
    endpoint = _endpoint(ctx, opts)
    region = opts.get_str("REGION")
    if region is not None and not region.strip():
        raise ctx.error("REGION must not be empty", opts.node("REGION").value, "write REGION = 'us-east-1'")
    plan = AwsConnectionPlan(
        name=stmt.name.name,
        access_key_id=opts.str_or_secret("ACCESS KEY ID"),
        secret_access_key=opts.secret("SECRET ACCESS KEY"),
        session_token=opts.secret("SESSION TOKEN"),
        region=region,
        endpoint=endpoint,
        assume_role_arn=arn,
        assume_role_session_name=opts.get_str("ASSUME ROLE SESSION NAME"),
        validate=validate,
    )
    return plan, secret_deps(opts, inline)


def _gcs(
    ctx: Context, stmt: CreateConnection, catalog: CatalogView, inline: InlineSecrets, validate: bool
) -> tuple[GcsConnectionPlan, list[tuple[str, str]]]:
    """No CREDENTIALS: Google's default chain, or anonymous access when ENDPOINT names an
    emulator (the engine decides which)."""
    opts = collect(ctx, stmt.options, GCS_OPTIONS, inline=inline, secret_exists=catalog.secret_exists)
    project = opts.get_str("PROJECT")
    if project is not None and not project.strip():
        raise ctx.error(
            "PROJECT must not be empty", opts.node("PROJECT").value, "write PROJECT = 'my-project'"
        )
    credentials = opts.secret("CREDENTIALS")
    if credentials is not None:
        _check_key_json(ctx, opts.node("CREDENTIALS"), credentials.name, inline)
    plan = GcsConnectionPlan(
        name=stmt.name.name,
        project=project,
        credentials=credentials,
        endpoint=_endpoint(ctx, opts),
        validate=validate,
    )
    return plan, secret_deps(opts, inline)


def _check_key_json(ctx: Context, opt: Option, secret: str, inline: InlineSecrets) -> None:
    """CREDENTIALS written as a plain string (kept as a hidden secret) must be a key file's
    JSON: a path to the file, or a key of another kind, is refused without quoting it."""
    value = dict(inline.items).get(secret)
    if value is None:
        return  # SECRET name: its value is read when connecting
    try:
        key = json.loads(value.reveal())
    except ValueError:
        key = None
    if not isinstance(key, dict):
        raise ctx.error(
            "CREDENTIALS must be a service-account key file's JSON, found a string that is not a JSON object",
            opt.value,
            'keep the key file\'s content in a secret: CREATE SECRET sa AS \'{"type": "service_account", ...}\'; '
            "then CREDENTIALS = SECRET sa",
        )


# A storage account's name: 3 to 24 lower-case letters and digits (Azure's rule).
_ACCOUNT_NAME = re.compile(r"[a-z0-9]{3,24}")


def _azure(
    ctx: Context, stmt: CreateConnection, catalog: CatalogView, inline: InlineSecrets, validate: bool
) -> tuple[AzureConnectionPlan, list[tuple[str, str]]]:
    """ACCOUNT KEY or SAS TOKEN, or neither: the default credential chain."""
    opts = collect(ctx, stmt.options, AZURE_OPTIONS, inline=inline, secret_exists=catalog.secret_exists)
    account = opts.get_str("ACCOUNT NAME")
    if account is None:
        raise ctx.error(
            "AZURE connection needs ACCOUNT NAME",
            stmt.name,
            "add ACCOUNT NAME = 'mystorageaccount' (the storage account's name)",
        )
    if not _ACCOUNT_NAME.fullmatch(account):
        fixed = account.strip().lower()
        raise ctx.error(
            f"invalid ACCOUNT NAME '{account}': a storage account name is 3 to 24 lower-case letters and digits",
            opts.node("ACCOUNT NAME").value,
            f"write ACCOUNT NAME = '{fixed if _ACCOUNT_NAME.fullmatch(fixed) else 'mystorageaccount'}'",
        )
    given = [n for n in opts.names() if n in ("ACCOUNT KEY", "SAS TOKEN")]
    if len(given) > 1:
        raise ctx.error(
            f"{given[1]} cannot be combined with {given[0]}",
            opts.node(given[1]),
            "an AZURE connection authenticates one way: ACCOUNT KEY, SAS TOKEN, or neither (the default chain)",
        )
    plan = AzureConnectionPlan(
        name=stmt.name.name,
        account_name=account,
        account_key=opts.secret("ACCOUNT KEY"),
        sas_token=opts.secret("SAS TOKEN"),
        endpoint=_endpoint(ctx, opts),
        validate=validate,
    )
    return plan, secret_deps(opts, inline)


def _endpoint(ctx: Context, opts: Collected) -> str | None:
    endpoint = opts.get_str("ENDPOINT")
    if endpoint is not None:
        _check_url(ctx, opts.node("ENDPOINT"), endpoint)
    return endpoint


_SASL = ("SASL_PLAINTEXT", "SASL_SSL")
_TLS = ("SSL", "SASL_SSL")


def _kafka(
    ctx: Context, stmt: CreateConnection, catalog: CatalogView, inline: InlineSecrets, validate: bool
) -> tuple[KafkaConnectionPlan, list[tuple[str, str]]]:
    opts = collect(ctx, stmt.options, KAFKA_OPTIONS, inline=inline, secret_exists=catalog.secret_exists)
    brokers: tuple[str, ...] | None = opts.get("BROKER")
    if not brokers:
        at = opts.node("BROKER") if "BROKER" in opts else stmt.name
        raise ctx.error(
            "KAFKA connection needs BROKER",
            at,
            "add BROKER = 'host:9092' (or BROKERS = ('host1:9092', 'host2:9092'))",
        )
    node = opts.node("BROKER")
    values = node.value.items if isinstance(node.value, StringList) else (node.value,)
    for broker, value in zip(brokers, values, strict=True):
        _check_broker(ctx, node.name, broker, value)
    protocol = opts.get_str("SECURITY PROTOCOL") or "PLAINTEXT"
    mechanism = opts.get_str("SASL MECHANISMS")
    sasl = [n for n in ("SASL MECHANISMS", "SASL USERNAME", "SASL PASSWORD") if n in opts]
    if sasl and protocol not in _SASL:
        first = opts.node(sasl[0])
        raise ctx.error(
            f"{first.name} needs SECURITY PROTOCOL 'SASL_PLAINTEXT' or 'SASL_SSL', "
            f"found '{protocol}'" + ("" if "SECURITY PROTOCOL" in opts else " (the default)"),
            first,
            "add SECURITY PROTOCOL = 'SASL_SSL' (or 'SASL_PLAINTEXT' without TLS)",
        )
    if protocol in _SASL:
        if mechanism is None:
            raise ctx.error(
                f"SECURITY PROTOCOL '{protocol}' needs SASL MECHANISMS",
                opts.node("SECURITY PROTOCOL").value,
                "add SASL MECHANISMS = 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512'",
            )
        for name, hint in (
            ("SASL USERNAME", "add SASL USERNAME = 'name' (or SECRET s)"),
            ("SASL PASSWORD", "add SASL PASSWORD = SECRET s (CREATE SECRET s AS '...' first)"),
        ):
            if name not in opts:
                raise ctx.error(
                    f"SASL MECHANISMS '{mechanism}' needs {name}", opts.node("SASL MECHANISMS"), hint
                )
    tls = [n for n in ("SSL CERTIFICATE AUTHORITY", "SSL CERTIFICATE", "SSL KEY") if n in opts]
    if tls and protocol not in _TLS:
        first = opts.node(tls[0])
        raise ctx.error(
            f"{first.name} needs SECURITY PROTOCOL 'SSL' or 'SASL_SSL', found '{protocol}'"
            + ("" if "SECURITY PROTOCOL" in opts else " (the default)"),
            first,
            "add SECURITY PROTOCOL = 'SSL' (or 'SASL_SSL')",
        )
    for one, other in (("SSL CERTIFICATE", "SSL KEY"), ("SSL KEY", "SSL CERTIFICATE")):
        if one in opts and other not in opts:
            raise ctx.error(
                f"{one} needs {other}",
                opts.node(one),
                "a client certificate goes with its key: SSL CERTIFICATE = SECRET c, SSL KEY = SECRET k",
            )
    plan = KafkaConnectionPlan(
        name=stmt.name.name,
        brokers=brokers,
        security_protocol=protocol,
        sasl_mechanism=mechanism,
        sasl_username=opts.str_or_secret("SASL USERNAME"),
        sasl_password=opts.secret("SASL PASSWORD"),
        ssl_ca=opts.str_or_secret("SSL CERTIFICATE AUTHORITY"),
        ssl_certificate=opts.secret("SSL CERTIFICATE"),
        ssl_key=opts.secret("SSL KEY"),
        validate=validate,
    )
    return plan, secret_deps(opts, inline)


def _check_broker(ctx: Context, option: str, broker: str, at: Node | None) -> None:
    host, sep, port = broker.strip().rpartition(":")
    if "://" in broker:
        scheme = broker.split("://", 1)[0]
        raise ctx.error(
            f"a broker is host:port, found a URL ('{scheme}://...')",
            at,
            f"write {option} = '{broker.split('://', 1)[1].rstrip('/') or 'host:9092'}'",
        )
    if not sep or not host or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        raise ctx.error(
            f"a broker is host:port, found '{broker}'",
            at,
            f"write {option} = '{host or broker.strip() or 'host'}:9092'",
        )
    if any(c.isspace() or c == "," for c in broker.strip()):
        raise ctx.error(
            f"a broker is one host:port, found '{broker}'",
            at,
            "list several brokers as BROKERS = ('host1:9092', 'host2:9092')",
        )


def _check_url(
    ctx: Context, opt: Option, url: str, schemes: tuple[str, ...] = ("http://", "https://")
) -> None:
    if not url.lower().startswith(schemes):
        raise ctx.error(
            f"option {opt.name} must be a URL starting with {one_of(schemes, quote='')}, found '{url}'",
            opt.value,
            f"write {opt.name} = 'https://host:port/path'",
        )


def _iceberg(
    ctx: Context, stmt: CreateConnection, catalog: CatalogView, inline: InlineSecrets, validate: bool
) -> tuple[CatalogConnectionPlan, list[tuple[str, str]]]:
    opts = collect(ctx, stmt.options, CATALOG_OPTIONS, inline=inline, secret_exists=catalog.secret_exists)
    ctype = opts.get_str("TYPE")
    if ctype is None:
        raise ctx.error(
            "ICEBERG CATALOG connection needs TYPE",
            stmt.name,
            "add TYPE = 'rest' | 's3tables' | 'local' | 'sql' | 'glue' | 'hive' (or CATALOG TYPE = ...)",
        )
    check_applies(ctx, opts, "catalog type", ctype, "catalog types")

    deps = secret_deps(opts, inline)
    uri = opts.get_str("URI")
    warehouse = opts.get_str("WAREHOUSE")
    aws_name = opts.get_str("AWS CONNECTION")
    files_on = _catalog_storage(ctx, opts)
    for kind, storage in STORAGES.items():
        name = opts.get_str(storage.option)
        if name is not None:
            check_storage_connection(ctx, opts.node(storage.option), name, catalog, kind)
            deps.append(("connection", name))
    if files_on is not None:
        _check_warehouse_storage(ctx, opts, files_on, warehouse)

    if ctype in ("rest", "sql", "hive") and uri is None:
        example = {
            "rest": "'https://catalog.example.com/api/catalog'",
            "sql": "'sqlite:///catalog.db' or 'postgresql+psycopg://user@host/db'",
            "hive": "'thrift://metastore:9083'",
        }[ctype]
        raise ctx.error(f"catalog type '{ctype}' needs URI", opts.node("TYPE"), f"add URI = {example}")
    if uri is not None:
        if ctype in ("rest", "s3tables"):
            _check_url(ctx, opts.node("URI"), uri)
        elif ctype == "hive":
            _check_url(ctx, opts.node("URI"), uri, ("thrift://",))
        elif ctype == "sql":
            uri = _sql_uri(ctx, opts.node("URI"), uri)
    oauth_url = opts.get_str("OAUTH2 SERVER URL")
    if oauth_url is not None:
        _check_url(ctx, opts.node("OAUTH2 SERVER URL"), oauth_url)

    if ctype == "s3tables":
        if warehouse is None:
            raise ctx.error(
                "catalog type 's3tables' needs WAREHOUSE (the table bucket ARN)",
                opts.node("TYPE"),
                "add WAREHOUSE = 'arn:aws:s3tables:<region>:<account>:bucket/<name>'",
            )
        if aws_name is None:
            raise ctx.error(
                "catalog type 's3tables' needs AWS CONNECTION (requests are signed with SigV4)",
                opts.node("TYPE"),
                "add AWS CONNECTION = aws_connection_name",
            )
        if uri is None:
            # S3 Tables' regional Iceberg REST endpoint; signing region from the AWS connection
            aws = catalog.get("connection", aws_name)
            region = aws.signing_region if isinstance(aws, AwsConnectionPlan) else "us-east-1"
            uri = f"https://s3tables.{region}.amazonaws.com/iceberg"
    if ctype == "local":
        at = opts.node("WAREHOUSE").value if "WAREHOUSE" in opts else opts.node("TYPE")
        warehouse = str(_resolved(ctx, at, warehouse or "./warehouse"))
    elif ctype == "sql" and warehouse is not None and "://" not in warehouse:
        warehouse = str(_resolved(ctx, opts.node("WAREHOUSE").value, warehouse))

    auth = _rest_auth(ctx, opts, ctype)
    properties = opts.pairs("PROPERTIES")
    if properties:
        _check_properties(ctx, opts.node("PROPERTIES"), properties)

    plan = CatalogConnectionPlan(
        name=stmt.name.name,
        catalog_type=CatalogType(ctype),
        uri=uri,
        warehouse=warehouse,
        auth=auth,
        user=opts.get_str("USER"),
        password=opts.secret("PASSWORD"),
        credential=opts.secret("CREDENTIAL"),
        token=opts.secret("TOKEN"),
        oauth2_server_uri=oauth_url,
        scope=opts.get_str("SCOPE"),
        aws_connection=aws_name,
        storage_connection=opts.get_str(files_on.option) if files_on is not None else None,
        access_delegation=opts.get_str("ACCESS DELEGATION"),
        properties=properties,
        validate=validate,
    )
    return plan, deps


def _rest_auth(ctx: Context, opts: Collected, ctype: str) -> RestAuth:
    if ctype == "s3tables":
        return RestAuth.SIGV4
    if ctype != "rest":
        return RestAuth.NONE
    has = {n: n in opts for n in ("USER", "PASSWORD", "CREDENTIAL", "TOKEN", "AWS CONNECTION", "AUTH")}
    if has["USER"] and not has["PASSWORD"]:
        raise ctx.error("USER needs PASSWORD", opts.node("USER"), "add PASSWORD = SECRET name")
    if has["PASSWORD"] and not has["USER"]:
        raise ctx.error("PASSWORD needs USER", opts.node("PASSWORD"), "add USER = 'name'")
    # one way to authenticate: refuse combinations, naming the later option
    methods = [
        ("USER", "USER and PASSWORD"),
        ("CREDENTIAL", "CREDENTIAL"),
        ("TOKEN", "TOKEN"),
        ("AWS CONNECTION", "AWS CONNECTION (SigV4)"),
    ]
    present = [(n, label) for n, label in methods if has[n]]
    if len(present) > 1:
        first, second = present[0], present[1]
        raise ctx.error(
            f"{second[0]} cannot be combined with {first[1]}",
            opts.node(second[0]),
            f"a REST catalog authenticates one way: {', '.join(label for _, label in methods)}",
        )
    auth_choice = opts.get_str("AUTH")
    if auth_choice == "basic" and not has["USER"]:
        raise ctx.error(
            "AUTH = 'basic' needs USER and PASSWORD",
            opts.node("AUTH"),
            "add USER = '...', PASSWORD = SECRET name",
        )
    if auth_choice == "oauth2" and not (has["USER"] or has["CREDENTIAL"]):
        raise ctx.error(
            "AUTH = 'oauth2' needs USER and PASSWORD or CREDENTIAL",
            opts.node("AUTH"),
            "add CREDENTIAL = SECRET client_credentials ('client_id:client_secret')",
        )
    if has["TOKEN"]:
        auth = RestAuth.TOKEN
    elif has["AWS CONNECTION"]:
        auth = RestAuth.SIGV4
    elif has["CREDENTIAL"]:
        auth = RestAuth.OAUTH2
    elif has["USER"]:
        auth = RestAuth.BASIC if auth_choice == "basic" else RestAuth.OAUTH2
    else:
        auth = RestAuth.NONE
    for opt_name in ("OAUTH2 SERVER URL", "SCOPE"):
        if opt_name in opts and auth is not RestAuth.OAUTH2:
            raise ctx.error(
                f"{opt_name} applies only to OAuth2 authentication",
                opts.node(opt_name),
                "OAuth2 is used with CREDENTIAL, or USER and PASSWORD without AUTH = 'basic'",
            )
    return auth


def check_storage_connection(
    ctx: Context,
    at: Option | Node,
    name: str,
    catalog: CatalogView,
    kind: ConnectionKind,
) -> StorageConnectionPlan:
    """The connection ``name`` of the storage ``kind`` (AWS, GCS, AZURE), or an error at ``at``
    (an option's value, or a clause) saying it does not exist or is of another kind."""
    storage = STORAGES[kind]
    node = at.value if isinstance(at, Option) and at.value is not None else at
    found: StorageConnectionPlan = expect_connection(
        ctx,
        catalog,
        name,
        node,
        storage.plan,
        create=f"CREATE CONNECTION {name} TO {storage.keyword} (...)",
        why=f"{storage.option} names a connection created with CREATE CONNECTION {name} TO {storage.keyword} (...)",
    )
    return found


def _catalog_storage(ctx: Context, opts: Collected) -> Storage | None:
    """GCS CONNECTION = g or AZURE CONNECTION = a (one of them at most): the storage of the
    catalog's files (an AWS CONNECTION is the catalog's AWS identity as well as its S3
    storage, and stays ``aws_connection``)."""
    names = opts.names()
    given = sorted(
        (s for s in STORAGES.values() if s.field == "storage_connection" and s.option in opts),
        key=lambda s: names.index(s.option),
    )
    if len(given) > 1:
        raise ctx.error(
            f"{given[1].option} cannot be combined with {given[0].option}",
            opts.node(given[1].option),
            f"a catalog's files are on one storage: keep {given[0].option} or {given[1].option}, "
            "the one its warehouse is on",
        )
    return given[0] if given else None


def _check_warehouse_storage(ctx: Context, opts: Collected, storage: Storage, warehouse: str | None) -> None:
    """A WAREHOUSE written as a URL is on the storage the catalog's connection is for."""
    on = storage_of(warehouse) if warehouse is not None else None
    if on is not None and on is not storage.syntax:
        raise ctx.error(
            f"WAREHOUSE is {on.url}, but {storage.option} gives {storage.syntax.store} credentials",
            opts.node("WAREHOUSE").value,
            f"a warehouse on {storage.syntax.store} is {storage.syntax.url}: WAREHOUSE = '{storage.syntax.example}'",
        )


def _check_properties(ctx: Context, opt: Option, properties: tuple[tuple[str, str], ...]) -> None:
    assert opt.value is not None
    items = getattr(opt.value, "options", ())
    for (key, _), item in zip(properties, items, strict=False):
        lowered = key.lower()
        if any(m in lowered for m in _CREDENTIAL_MARKERS) or lowered.endswith("secret-access-key"):
            raise ctx.error(
                f"property '{key}' carries a credential; PROPERTIES are stored and shown in clear text",
                item,
                "pass credentials through PASSWORD / CREDENTIAL / TOKEN = SECRET name or an AWS, GCS or AZURE CONNECTION",
            )


def _registry(
    ctx: Context, stmt: CreateConnection, catalog: CatalogView, inline: InlineSecrets, validate: bool
) -> tuple[ConnectionPlan, list[tuple[str, str]]]:

    return analyze_registry_connection(ctx, stmt, catalog, inline, validate)


_Analyzer = Callable[
    [Context, CreateConnection, CatalogView, InlineSecrets, bool],
    tuple[ConnectionPlan, list[tuple[str, str]]],
]
# How each kind of CREATE CONNECTION is analysed.
_ANALYZERS: dict[ConnectionKind, _Analyzer] = {
    ConnectionKind.AWS: _aws,
    ConnectionKind.GCS: _gcs,
    ConnectionKind.AZURE: _azure,
    ConnectionKind.KAFKA: _kafka,
    ConnectionKind.ICEBERG_CATALOG: _iceberg,
    ConnectionKind.CONFLUENT_SCHEMA_REGISTRY: _registry,
}


class PathError(ValueError):
    """A path that names nothing the file system could have (a NUL, ``~nosuchuser``)."""


def _resolve(base: Path, path: str) -> Path:
    if "\0" in path:
        raise PathError("a path cannot hold a NUL character")
    try:
        p = Path(path).expanduser()
    except RuntimeError:  # ~user for a user that does not exist
        raise PathError(f"cannot expand {path.split('/', 1)[0]!r}: no such user") from None
    try:
        return p if p.is_absolute() else (base / p).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise PathError(f"cannot resolve the path: {exc}") from None


def _resolved(ctx: Context, at: Node | None, path: str) -> Path:
    try:
        return _resolve(ctx.base_dir, path)
    except PathError as exc:
        raise ctx.error(f"invalid path: {exc}", at, "write a path such as './data/' or '/srv/lake'") from None


def _sql_uri(ctx: Context, opt: Option, uri: str) -> str:
    if "://" not in uri:
        raise ctx.error(
            f"URI of a 'sql' catalog must be an SQLAlchemy URL, found '{uri}'",
            opt.value,
            "write URI = 'sqlite:///catalog.db' or 'postgresql+psycopg://user@host/db'",
        )
    # sqlite:///relative.db is relative to the working directory: anchor it where the script is
    prefix = "sqlite:///"
    if (
        uri.startswith(prefix)
        and not uri.startswith(prefix + "/")
        and uri[len(prefix) :] not in ("", ":memory:")
    ):
        return prefix + str(_resolved(ctx, opt.value, uri[len(prefix) :]))
    return uri


def resolve_path(base: Path, path: str) -> str:
    """A FILES path or warehouse made absolute against ``base``; URLs are left alone.

    Raises ``PathError`` for a path no file system could have."""
    if "://" in path:
        return path
    resolved = str(_resolve(base, path))
    if path.endswith("/") and not resolved.endswith("/"):
        resolved += "/"  # keep the user's "this is a directory"
    return resolved
