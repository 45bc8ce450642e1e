"""CREATE CONNECTION ... TO CONFLUENT SCHEMA REGISTRY, and what a Kafka source reads through one.

A source names its registry with Materialize's ``FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY
CONNECTION csr`` (the parser turns it into the options ``FORMAT = 'avro', SCHEMA REGISTRY = csr``).
The analyzer checks the options and works out each half's subject; the schemas themselves (and so
the source's columns) are fetched when the source is created (``icesql.sessions.registry``), and
``sources.registry_columns`` turns them into the source's columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from icesql.analyzer.catalog import CatalogView
from icesql.analyzer.connection_kinds import expect_connection
from icesql.analyzer.diagnostics import Context
from icesql.analyzer.options import Collected, InlineSecrets, OptionTable, collect, secret_deps
from icesql.analyzer.topics import Topics
from icesql.errors import AnalysisError
from icesql.plan import (
    Column,
    KafkaEnvelope,
    SchemaRegistryConnectionPlan,
)
from icesql.syntax.ast import CreateConnection
from icesql.syntax.options import REGISTRY_FORMATS

REGISTRY_OPTIONS = OptionTable("CONFLUENT SCHEMA REGISTRY", "schema_registry")

USING = "USING CONFLUENT SCHEMA REGISTRY CONNECTION"
PER_TOPIC_HINT = (
    "write the sink's TABLE = '{table}' (one table per table of the database), or name VALUE SUBJECT in "
    "the source (the one schema every topic's records are read as)"
)
_EXAMPLE = "CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = 'https://registry:8081')"


def analyze_registry_connection(
    ctx: Context, stmt: CreateConnection, catalog: CatalogView, inline: InlineSecrets, validate: bool
) -> tuple[SchemaRegistryConnectionPlan, list[tuple[str, str]]]:
    opts = collect(ctx, stmt.options, REGISTRY_OPTIONS, inline=inline, secret_exists=catalog.secret_exists)
    url = opts.get_str("URL")
    if url is None:
        raise ctx.error(
            "CONFLUENT SCHEMA REGISTRY connection needs URL",
            stmt.name,
            "add URL = 'https://registry.example.com:8081'",
        )
    at = opts.node("URL").value
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ctx.error(
            f"URL of a schema registry is an http:// or https:// URL, found '{url}'",
            at,
            "write URL = 'https://registry.example.com:8081'",
        )
    if parts.username is not None or parts.password is not None:
        # never echo the URL: its user part may hold a password
        raise ctx.error(
            "URL of a schema registry must not hold credentials",
            at,
            "give them as USERNAME = 'name', PASSWORD = SECRET s (CREATE SECRET s AS '...' first)",
        )
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ctx.error(f"URL has an invalid port: '{url}'", at, "write URL = 'https://host:8081'") from None
    if "USERNAME" in opts and "PASSWORD" not in opts:
        raise ctx.error(
            "USERNAME needs PASSWORD",
            opts.node("USERNAME"),
            "add PASSWORD = SECRET s (CREATE SECRET s AS '...' first)",
        )
    if "PASSWORD" in opts and "USERNAME" not in opts:
        raise ctx.error(
            "PASSWORD needs USERNAME",
            opts.node("PASSWORD"),
            "add USERNAME = 'name' (Confluent Cloud: the API key; PASSWORD: its secret)",
        )
    plan = SchemaRegistryConnectionPlan(
        name=stmt.name.name,
        url=url.strip().rstrip("/"),
        username=opts.str_or_secret("USERNAME"),
        password=opts.secret("PASSWORD"),
        ssl_ca=opts.str_or_secret("SSL CERTIFICATE AUTHORITY"),
        validate=validate,
    )
    return plan, secret_deps(opts, inline)


# --------------------------------------------------------------------------- sources

_REGISTRY_ONLY = ("avro", "protobuf")  # formats that exist only with a registry
_SUBJECT_OPTIONS = ("VALUE SUBJECT", "KEY SUBJECT", "SUBJECT NAME STRATEGY", "RECORD NAME", "KEY RECORD NAME")


@dataclass(frozen=True)
class RegistryHalves:
    """What the registry gives a Kafka source: the spec's registry fields, and which halves."""

    fields: dict[str, Any]  # KafkaSourceSpec fields (empty: no registry)
    value: bool  # the value's schema comes from the registry
    key: bool  # the key's schema comes from the registry


def registry_halves(
    ctx: Context,
    opts: Collected,
    catalog: CatalogView | None,
    topics: Topics,
    fmt: str,
    key_format: str | None,
    envelope: str | None = None,
) -> RegistryHalves:
    """Check a Kafka source's registry options; the subjects its halves' schemas are under. A
    source of many topics reads one schema (its relation has one set of columns): a subject named
    with VALUE SUBJECT, or by the record's name, not one per topic - except Debezium's Avro
    change events (ENVELOPE DEBEZIUM, one subject per topic): each record is then read with its
    own writer schema, named by its schema id, and the source feeds only a routed sink (issue 53;
    ``sinks._check_routing``)."""
    registry = opts.get_str("SCHEMA REGISTRY")
    for name, given in (("FORMAT", fmt), ("KEY FORMAT", key_format)):
        if registry is None and given in _REGISTRY_ONLY:
            raise ctx.error(
                f"{name} '{given}' reads its schemas from a schema registry",
                opts.node(name).value,
                f"write {name} {given.upper()} {USING} csr ({_EXAMPLE} first)",
            )
    if registry is None:
        stray = next((n for n in _SUBJECT_OPTIONS if n in opts), None)
        if stray is not None:
            raise ctx.error(
                f"{stray} applies with a schema registry",
                opts.node(stray),
                f"write FORMAT AVRO | PROTOBUF | JSON {USING} csr",
            )
        return RegistryHalves({}, False, False)
    at = opts.node("SCHEMA REGISTRY")
    if catalog is not None:
        _check_registry_connection(ctx, catalog, registry, at)
    value = fmt in REGISTRY_FORMATS and not (fmt == "json" and "SCHEMA" in opts)
    key = key_format in REGISTRY_FORMATS and not (key_format == "json" and "KEY SCHEMA" in opts)
    if not value and not key:
        raise ctx.error(
            f"SCHEMA REGISTRY applies with FORMAT or KEY FORMAT 'avro', 'protobuf' or 'json', found FORMAT '{fmt}'",
            at,
            f"write FORMAT AVRO {USING} {registry}",
        )
    strategy = opts.get_str("SUBJECT NAME STRATEGY") or "topic"
    fields: dict[str, Any] = {"registry": registry, "subject_name_strategy": strategy}
    for half, used, fmt_of, subject_opt, record_opt in (
        ("value", value, fmt, "VALUE SUBJECT", "RECORD NAME"),
        ("key", key, key_format, "KEY SUBJECT", "KEY RECORD NAME"),
    ):
        for option in (subject_opt, record_opt):
            if option in opts and not used:
                raise ctx.error(
                    f"{option} applies when the {half} is read through the schema registry",
                    opts.node(option),
                    f"write {'KEY ' if half == 'key' else ''}FORMAT AVRO {USING} {registry}",
                )
        if not used:
            continue
        record = opts.get_str(record_opt)
        if strategy == "topic" and record is not None and subject_opt not in opts:
            raise ctx.error(
                f"{record_opt} applies with SUBJECT NAME STRATEGY 'record' or 'topic_record'",
                opts.node(record_opt),
                "add SUBJECT NAME STRATEGY = 'record' (the subject is the record's full name)",
            )
        subject = opts.get_str(subject_opt)
        if subject is None and half == "value" and _schema_per_topic(ctx, opts, topics, strategy, fmt, envelope):
            fields["value_schema_type"] = REGISTRY_FORMATS[fmt]  # no subject: each record's schema id
            continue
        if subject is None:
            if topics.many and strategy != "record":
                raise ctx.error(
                    f"a source of many topics reads one schema, and SUBJECT NAME STRATEGY '{strategy}' "
                    f"names a subject per topic (<topic>-{half if strategy == 'topic' else '<record name>'})",
                    topics.at,
                    f"name the {half}'s subject: {subject_opt} = 'orders-{half}' (the schema every topic's "
                    f"records are read as), or SUBJECT NAME STRATEGY = 'record' with {record_opt}",
                )
            subject = _subject(ctx, opts, strategy, topics.topic, half, record, record_opt)
        elif not subject.strip():
            raise ctx.error(
                f"{subject_opt} must not be empty",
                opts.node(subject_opt).value,
                f"write {subject_opt} = '{topics.topic or 'orders'}-{half}'",
            )
        assert fmt_of is not None
        fields[f"{half}_schema_type"] = REGISTRY_FORMATS[fmt_of]
        fields[f"{half}_subject"] = subject
        fields[f"{half}_record_name"] = record
    return RegistryHalves(fields, value, key)


def per_topic_message(name: str) -> str:
    """Why a source with a schema per topic is not a relation a query reads (``PER_TOPIC_HINT``)."""
    return (
        f"source {name} reads many topics with a schema per topic: it feeds a sink whose TABLE is a "
        "template such as '{table}'"
    )


def _schema_per_topic(
    ctx: Context, opts: Collected, topics: Topics, strategy: str, fmt: str, envelope: str | None
) -> bool:
    """Whether a source's values are read each with its own writer schema: many topics, a subject
    per topic, Debezium's change events. Avro only, for now."""
    if not (topics.many and strategy == "topic" and (envelope or "").lower() == "debezium"):
        return False
    if fmt != "avro":
        raise ctx.error(
            f"a source of many topics with a schema per topic reads FORMAT AVRO: FORMAT {fmt.upper()} "
            "is not built yet",
            opts.node("FORMAT").value,
            "name the schema every topic's records are read as: VALUE SUBJECT = 'orders-value', or "
            "produce the change events with Avro",
        )
    return True


def _subject(
    ctx: Context, opts: Collected, strategy: str, topic: str, half: str, record: str | None, record_opt: str
) -> str:
    """Confluent's subject name strategies: TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy."""
    if strategy == "topic":
        return f"{topic}-{half}"
    if record is None:
        raise ctx.error(
            f"SUBJECT NAME STRATEGY '{strategy}' needs {record_opt}",
            opts.node("SUBJECT NAME STRATEGY").value,
            f"add {record_opt} = 'com.example.Order' (the record's full name)",
        )
    return record if strategy == "record" else f"{topic}-{record}"


def _check_registry_connection(ctx: Context, catalog: CatalogView, name: str, at: Any) -> None:
    expect_connection(
        ctx,
        catalog,
        name,
        at.value,
        SchemaRegistryConnectionPlan,
        create=_EXAMPLE.replace(" csr ", f" {name} "),
        why=f"schemas come from {_EXAMPLE}",
    )


def check_registry_envelope(
    ctx: Context, opts: Collected, envelope: KafkaEnvelope, fmt: str, halves: RegistryHalves
) -> None:
    """ENVELOPE DEBEZIUM reads Debezium's change events, whose schema the registry gives."""
    if envelope is KafkaEnvelope.DEBEZIUM and not halves.value:
        raise ctx.error(
            f"ENVELOPE 'debezium' needs the value's schema from a schema registry, found FORMAT '{fmt}'",
            opts.node("ENVELOPE"),
            f"write FORMAT AVRO {USING} csr ENVELOPE DEBEZIUM"
            + ("" if fmt == "debezium-json" else ", or FORMAT = 'debezium-json' for Debezium's JSON"),
        )


# --------------------------------------------------------------------------- columns from schemas


def struct_fields(struct: dict[str, Any]) -> tuple[Column, ...]:
    """A Spark row schema (``StructType.jsonValue()`` form) as columns."""
    return tuple(
        Column(f["name"], type_string(f["type"]), bool(f.get("nullable", True)))
        for f in struct.get("fields", ())
    )


_JSON_TYPES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}


def type_string(t: Any) -> str:
    """A Spark type in jsonValue form as its lower-case ``simpleString`` (``Column.type``)."""
    if isinstance(t, str):
        return _JSON_TYPES.get(t, t)
    kind = t.get("type")
    if kind == "struct":
        return "struct<" + ",".join(f"{f['name']}:{type_string(f['type'])}" for f in t["fields"]) + ">"
    if kind == "array":
        return f"array<{type_string(t['elementType'])}>"
    if kind == "map":
        return f"map<{type_string(t['keyType'])},{type_string(t['valueType'])}>"
    raise ValueError(f"not a Spark type: {t!r}")


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _ddl_type(t: Any) -> str:
    if isinstance(t, str):
        return _JSON_TYPES.get(t, t).upper()
    kind = t.get("type")
    if kind == "struct":
        inner = ", ".join(
            f"{_quote(f['name'])}: {_ddl_type(f['type'])}" + ("" if f.get("nullable", True) else " NOT NULL")
            for f in t["fields"]
        )
        return f"STRUCT<{inner}>"
    if kind == "array":
        return f"ARRAY<{_ddl_type(t['elementType'])}>"
    if kind == "map":
        return f"MAP<{_ddl_type(t['keyType'])}, {_ddl_type(t['valueType'])}>"
    raise ValueError(f"not a Spark type: {t!r}")


def struct_ddl(struct: dict[str, Any]) -> str:
    """A Spark row schema (jsonValue form) as the DDL string a SCHEMA option holds."""
    return ", ".join(
        f"{_quote(f['name'])} {_ddl_type(f['type'])}" + ("" if f.get("nullable", True) else " NOT NULL")
        for f in struct.get("fields", ())
    )


def debezium_after(struct: dict[str, Any], subject: str) -> dict[str, Any]:
    """The row schema of a Debezium change event's ``after`` record (ENVELOPE DEBEZIUM)."""
    after = next((f for f in struct.get("fields", ()) if f["name"] == "after"), None)
    if after is None or not isinstance(after["type"], dict) or after["type"].get("type") != "struct":
        raise AnalysisError(
            f"ENVELOPE 'debezium' needs a Debezium change event, but the schema of subject '{subject}' has no 'after' record",
            hint="Debezium's value schema is an Envelope record with before, after, source, op and ts_ms",
        )
    fields = after["type"]["fields"]
    return {"type": "struct", "fields": [{**f, "nullable": True} for f in fields]}


__all__ = [
    "PER_TOPIC_HINT",
    "REGISTRY_OPTIONS",
    "RegistryHalves",
    "analyze_registry_connection",
    "check_registry_envelope",
    "debezium_after",
    "per_topic_message",
    "registry_halves",
    "struct_ddl",
    "struct_fields",
    "type_string",
]
