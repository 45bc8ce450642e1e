"""CREATE CONNECTION ... TO AWS | ICEBERG CATALOG | KAFKA: option tables and their rules.

SPEC §1.2 differs from Materialize in one place on purpose: a ``rest`` catalog may take an
``AWS CONNECTION`` and then signs its requests with SigV4 (``RestAuth.SIGV4``), which is how
REST catalogs behind AWS (and SeaweedFS's) authenticate; Materialize refuses it.
"""

from __future__ import annotations

from pathlib import Path

from icesql.analyzer.catalog import CatalogView
from icesql.analyzer.diagnostics import Context, did_you_mean, one_of
from icesql.analyzer.options import (
    Collected,
    InlineSecrets,
    Kind,
    OptionTable,
    check_applies,
    collect,
)
from icesql.plan import (
    AwsConnectionPlan,
    CatalogConnectionPlan,
    CatalogType,
    KafkaConnectionPlan,
    ObjectPlan,
    RestAuth,
)
from icesql.syntax.ast import ConnectionKind, CreateConnection, Ident, Node, Option, StringList

AWS_OPTIONS = OptionTable("AWS CONNECTION", "aws")
CONNECTION_WITH_OPTIONS = OptionTable("connection WITH", "connection_with")
CATALOG_OPTIONS = OptionTable("ICEBERG CATALOG", "iceberg_catalog")
KAFKA_OPTIONS = OptionTable("KAFKA CONNECTION", "kafka")
# the option table of each kind of connection
CONNECTION_OPTIONS = {
    ConnectionKind.AWS: AWS_OPTIONS,
    ConnectionKind.ICEBERG_CATALOG: CATALOG_OPTIONS,
    ConnectionKind.KAFKA: KAFKA_OPTIONS,
}


def connection_kind_name(plan: ObjectPlan | None) -> str:
    """How a statement names the kind of a connection: AWS, ICEBERG CATALOG, KAFKA."""
    if isinstance(plan, AwsConnectionPlan):
        return "AWS"
    if isinstance(plan, KafkaConnectionPlan):
        return "KAFKA"
    return "ICEBERG CATALOG"

# pyiceberg property keys that carry credentials: refused in PROPERTIES, where they would be
# stored and shown in clear text
_CREDENTIAL_MARKERS = ("secret", "password", "token", "credential", "session")


def analyze_connection(
    ctx: Context, stmt: CreateConnection, catalog: CatalogView
) -> tuple[
    AwsConnectionPlan | KafkaConnectionPlan | CatalogConnectionPlan, list[tuple[str, str]], InlineSecrets
]:
    inline = InlineSecrets(f"__inline__.{stmt.name.name}")
    with_opts = collect(ctx, stmt.with_options, CONNECTION_WITH_OPTIONS)
    validate = with_opts.get_bool("VALIDATE", True)
    if stmt.connection_kind is ConnectionKind.AWS:
        plan_a, deps = _aws(ctx, stmt, catalog, inline, validate)
        return plan_a, deps, inline
    if stmt.connection_kind is ConnectionKind.KAFKA:
        plan_k, deps = _kafka(ctx, stmt, catalog, inline, validate)
        return plan_k, deps, inline
    plan_c, deps = _iceberg(ctx, stmt, catalog, inline, validate)
    return plan_c, deps, inline


def _secret_deps(opts: Collected, inline: InlineSecrets) -> list[tuple[str, str]]:
    hidden = {n for n, _ in inline.items}
    deps: list[tuple[str, str]] = []
    for g in opts.given.values():
        name = getattr(g.value, "name", None)
        if (
            g.spec.kind in (Kind.SECRET, Kind.STRING_OR_SECRET)
            and isinstance(name, str)
            and name not in hidden
        ):
            if ("secret", name) not in deps:
                deps.append(("secret", name))
    return deps


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
    endpoint = opts.get_str("ENDPOINT")
    if endpoint is not None:
        _check_url(ctx, opts.node("ENDPOINT"), endpoint)
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
    return plan, _secret_deps(opts, inline)


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
                raise ctx.error(f"SASL MECHANISMS '{mechanism}' needs {name}", opts.node("SASL MECHANISMS"), hint)
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
    return plan, _secret_deps(opts, inline)


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

    deps = _secret_deps(opts, inline)
    uri = opts.get_str("URI")
    warehouse = opts.get_str("WAREHOUSE")
    aws_name = opts.get_str("AWS CONNECTION")
    if aws_name is not None:
        _check_aws_connection(ctx, opts.node("AWS CONNECTION"), aws_name, catalog)
        deps.append(("connection", aws_name))

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


def _check_aws_connection(ctx: Context, at: Option | Ident, name: str, catalog: CatalogView) -> None:
    node = at.value if isinstance(at, Option) and at.value is not None else at
    found = catalog.get("connection", name)
    if found is None:
        hint = (
            _names_hint(catalog, "connection", name)
            or f"create it first: CREATE CONNECTION {name} TO AWS (...)"
        )
        raise ctx.error(f"unknown connection {name}", node, hint)
    if not isinstance(found, AwsConnectionPlan):
        kind = connection_kind_name(found)
        raise ctx.error(
            f"connection {name} is {'a' if kind == 'KAFKA' else 'an'} {kind} connection, expected an AWS connection",
            node,
            f"AWS CONNECTION names a connection created with CREATE CONNECTION {name} TO AWS (...)",
        )


def _names_hint(catalog: CatalogView, kind: str, name: str) -> str | None:
    names = getattr(catalog, "names", None)
    if names is None:
        return None
    return did_you_mean(name, list(names(kind)))


def _check_properties(ctx: Context, opt: Option, properties: tuple[tuple[str, str], ...]) -> None:
    assert opt.value is not None
    items = getattr(opt.value, "options", ())
    for (key, _), item in zip(properties, items, strict=False):
        lowered = key.lower()
        if any(m in lowered for m in _CREDENTIAL_MARKERS) or lowered.endswith("secret-access-key"):
            raise ctx.error(
                f"property '{key}' carries a credential; PROPERTIES are stored and shown in clear text",
                item,
                "pass credentials through PASSWORD / CREDENTIAL / TOKEN = SECRET name or an AWS CONNECTION",
            )


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
