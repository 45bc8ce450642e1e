"""CREATE SOURCE ... FROM FILES | GENERATOR | KAFKA CONNECTION k, ALTER SOURCE, and CREATE VIEW.

A Kafka source's ``columns`` list every column of the relation in order, which the engine
relies on: the key columns (ENVELOPE UPSERT), the value's columns, then the INCLUDE columns
(``kafka_columns``).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from icesql.analyzer.catalog import CatalogView
from icesql.analyzer.connection_kinds import expect_connection, names_hint
from icesql.analyzer.connections import (
    STORAGES,
    PathError,
    Storage,
    check_storage_connection,
    resolve_path,
)
from icesql.analyzer.diagnostics import Context, did_you_mean, one_of
from icesql.analyzer.options import Collected, OptionTable, check_applies, collect
from icesql.analyzer.registry import (
    PER_TOPIC_HINT,
    check_registry_envelope,
    per_topic_message,
    registry_halves,
    struct_ddl,
    struct_fields,
    type_string,
)
from icesql.analyzer.schema import SchemaError, parse_schema
from icesql.analyzer.topics import analyze_topics, check_empty_topics
from icesql.errors import AnalysisError, span_within
from icesql.plan import (
    CleanSource,
    Column,
    KafkaConnectionPlan,
    KafkaEnvelope,
    KafkaInclude,
    KafkaMetadata,
    KafkaSourceSpec,
    OnError,
    SourceFormat,
    SourceKind,
    SourcePlan,
    ViewPlan,
)
from icesql.syntax.ast import AlterSource, CreateSource, CreateView, Node, Option
from icesql.syntax.ast import SourceKind as AstSourceKind
from icesql.syntax.options import FILE_FORMATS, GENERATOR, READER, SOURCE_FORMATS, storage_of

FORMATS = SOURCE_FORMATS

_FILES = FILE_FORMATS
_GEN = GENERATOR

# The Spark reader's name for each option a FILES source hands to it.
_SPARK_NAME = {
    "DELIMITER": "sep",
    "QUOTE": "quote",
    "ESCAPE": "escape",
    "NULL VALUE": "nullValue",
    "MULTILINE": "multiLine",
    "ENCODING": "encoding",
    "TIMESTAMP FORMAT": "timestampFormat",
    "DATE FORMAT": "dateFormat",
    "RECURSIVE": "recursiveFileLookup",
    "PATH GLOB FILTER": "pathGlobFilter",
}
assert set(_SPARK_NAME) == {spec.name for spec in READER}

SOURCE_OPTIONS = OptionTable("SOURCE", "source")
KAFKA_SOURCE_OPTIONS = OptionTable("KAFKA SOURCE", "kafka_source")
ALTER_SOURCE_OPTIONS = OptionTable("ALTER SOURCE", "alter_source")


def analyze_source(ctx: Context, stmt: CreateSource, catalog: CatalogView | None = None) -> SourcePlan:
    if stmt.source_kind is AstSourceKind.KAFKA:
        return _kafka(ctx, stmt, catalog)
    _refuse_options_of(ctx, stmt.options, KAFKA_SOURCE_OPTIONS, SOURCE_OPTIONS, "KAFKA")
    opts = collect(ctx, stmt.options, SOURCE_OPTIONS)
    if stmt.source_kind is AstSourceKind.GENERATOR:
        return _generator(ctx, stmt, opts)
    for g in opts.given.values():
        if g.spec.applies == _GEN:
            raise ctx.error(
                f"option {g.option.name} applies only to GENERATOR sources",
                g.option,
                "FILES sources read what they find",
            )
    fmt = opts.get_str("FORMAT")
    if fmt is None:
        raise ctx.error(
            "FILES source needs FORMAT",
            stmt.path or stmt.name,
            "add FORMAT = 'json' | 'csv' | 'parquet' | 'orc' | 'debezium-json'",
        )
    check_applies(ctx, opts, "format", fmt, "formats")
    columns, schema = _schema(ctx, opts)
    # a Debezium source without SCHEMA reads Kafka Connect JSON whose messages carry their schema
    # (schemas.enable): it feeds a routed sink, one table per table of the database (issue 53)
    if schema is None and fmt not in ("parquet", "orc", "debezium-json"):
        raise ctx.error(
            f"a '{fmt}' source needs SCHEMA (only parquet and orc files carry their own)",
            opts.node("FORMAT").value,
            "add SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING'",
        )
    assert stmt.path is not None, "the parser gives FILES a path"
    path = stmt.path.value
    if not path.strip():
        raise ctx.error("FILES path must not be empty", stmt.path, "write FROM FILES 'data/events/'")
    max_files = opts.get_int("MAX FILES PER TRIGGER")
    if max_files is not None and max_files <= 0:
        raise ctx.error(
            "MAX FILES PER TRIGGER must be a positive integer", opts.node("MAX FILES PER TRIGGER").value
        )
    max_bytes = opts.get_int("MAX BYTES PER TRIGGER")
    if max_files is not None and max_bytes is not None:
        raise ctx.error(
            "MAX FILES PER TRIGGER and MAX BYTES PER TRIGGER cannot both be set",
            opts.node("MAX BYTES PER TRIGGER"),
            "keep one: a trigger takes up to N files, or files up to a size",
        )
    reader: list[tuple[str, str]] = []
    for name in opts.names():
        if name in _SPARK_NAME:
            value = opts.get(name)
            reader.append((_SPARK_NAME[name], str(value).lower() if isinstance(value, bool) else str(value)))
    reader.extend(opts.pairs("OPTIONS"))
    storage = _files_storage(ctx, stmt, opts, catalog)
    try:
        resolved = resolve_path(ctx.base_dir, path)  # a URL is left as it is
    except PathError as exc:
        raise ctx.error(f"invalid FILES path: {exc}", stmt.path, "write FROM FILES 'data/events/'") from None
    clean, archive = _clean_source(ctx, opts, resolved)
    plan = SourcePlan(
        name=stmt.name.name,
        source_kind=SourceKind.FILES,
        path=resolved,
        format=SourceFormat(fmt),
        schema=schema,
        columns=columns,
        header=opts.get_bool("HEADER", False),
        max_files_per_trigger=max_files,
        on_error=OnError(opts.get_str("ON ERROR") or "fail"),
        options=tuple(reader),
        max_bytes_per_trigger=max_bytes,
        clean_source=clean,
        archive_directory=archive,
    )
    if storage is None:
        return plan
    # AWS CONNECTION: aws_connection; GCS or AZURE CONNECTION: storage_connection
    connection: dict[str, Any] = {storage.field: opts.get_str(storage.option)}
    return dataclasses.replace(plan, **connection)


def _files_storage(
    ctx: Context, stmt: CreateSource, opts: Collected, catalog: CatalogView | None
) -> Storage | None:
    """AWS CONNECTION (s3:// paths), GCS CONNECTION (gs://) or AZURE CONNECTION (abfs[s]://,
    wasb[s]://): the one connection a FILES source on object storage reads through, checked
    against its path. A path on object storage without one is read with the engine's default
    credentials."""
    names = opts.names()
    given = sorted((s for s in STORAGES.values() if s.option in opts), key=lambda s: names.index(s.option))
    if not given:
        return None
    storage = given[0]
    if len(given) > 1:
        raise ctx.error(
            f"{given[1].option} cannot be combined with {storage.option}",
            opts.node(given[1].option),
            "a FILES source reads one storage: keep the connection its path is on",
        )
    name = opts.get_str(storage.option)
    assert name is not None
    if catalog is not None:
        check_storage_connection(ctx, opts.node(storage.option), name, catalog, storage.kind)
    assert stmt.path is not None
    on = storage_of(stmt.path.value)
    if on is not storage.syntax:
        syntax = storage.syntax
        hint = (
            f"write FROM FILES '{syntax.example}' (or leave {storage.option} out for local files)"
            if on is None
            else f"the path is {on.url}: write {on.option} = name (a connection TO {on.keyword}) instead"
        )
        raise ctx.error(
            f"{storage.option} reads files on {syntax.store}: the path must be {syntax.url}", stmt.path, hint
        )
    return storage


def _clean_source(ctx: Context, opts: Collected, source: str) -> tuple[CleanSource, str | None]:
    """CLEAN SOURCE and ARCHIVE DIRECTORY: the archive on the source's filesystem, outside the
    directory the source lists."""
    clean = CleanSource(opts.get_str("CLEAN SOURCE") or "off")
    archive = opts.get_str("ARCHIVE DIRECTORY")
    if clean is not CleanSource.ARCHIVE:
        if archive is not None:
            raise ctx.error(
                "ARCHIVE DIRECTORY applies only with CLEAN SOURCE = 'archive'",
                opts.node("ARCHIVE DIRECTORY"),
                "add CLEAN SOURCE = 'archive', or leave ARCHIVE DIRECTORY out",
            )
        return clean, None
    if archive is None or not archive.strip():
        raise ctx.error(
            "CLEAN SOURCE = 'archive' needs ARCHIVE DIRECTORY",
            opts.node("CLEAN SOURCE"),
            "add ARCHIVE DIRECTORY = 'data/archive/' (or use CLEAN SOURCE = 'delete')",
        )
    node = opts.node("ARCHIVE DIRECTORY").value
    try:
        resolved = resolve_path(ctx.base_dir, archive).rstrip("/")
    except PathError as exc:
        raise ctx.error(
            f"invalid ARCHIVE DIRECTORY: {exc}", node, "write ARCHIVE DIRECTORY = 'data/archive/'"
        ) from None
    store = storage_of(source)
    if store is not storage_of(resolved) or (store is None and "://" in resolved):
        where = f"on {store.store} ({store.url})" if store is not None else "a local directory"
        raise ctx.error(
            f"ARCHIVE DIRECTORY must be on the source's storage: {where}",
            node,
            "files are moved, not copied across storages",
        )
    directory = source.rstrip("/")
    if any(c in directory.rpartition("/")[2] for c in "*?["):
        directory = directory.rpartition("/")[0]
    inside = resolved.startswith(directory + "/") and opts.get_bool("RECURSIVE", False)
    if resolved == directory or inside:
        raise ctx.error(
            "ARCHIVE DIRECTORY must not be "
            + ("inside the directory a RECURSIVE source reads" if inside else "the source's directory"),
            node,
            "archive elsewhere, e.g. next to it: 'data/archive/'",
        )
    return clean, resolved


def _generator(ctx: Context, stmt: CreateSource, opts: Collected) -> SourcePlan:
    for g in opts.given.values():
        if g.spec.applies is not None and "generator" not in g.spec.applies:
            raise ctx.error(
                f"option {g.option.name} does not apply to GENERATOR sources",
                g.option,
                "a GENERATOR source takes ROWS PER SECOND, TOTAL ROWS and SCHEMA",
            )
    rps = opts.get_int("ROWS PER SECOND")
    if rps is None:
        raise ctx.error("GENERATOR source needs ROWS PER SECOND", stmt.name, "add ROWS PER SECOND = 1000")
    if rps <= 0:
        raise ctx.error(
            f"ROWS PER SECOND must be a positive integer, found {rps}",
            opts.node("ROWS PER SECOND").value,
        )
    total = opts.get_int("TOTAL ROWS")
    if total is not None and total <= 0:
        raise ctx.error(
            f"TOTAL ROWS must be a positive integer, found {total}", opts.node("TOTAL ROWS").value
        )
    columns, schema = _schema(ctx, opts)
    if schema is None:
        raise ctx.error(
            "GENERATOR source needs SCHEMA", stmt.name, "add SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING'"
        )
    return SourcePlan(
        name=stmt.name.name,
        source_kind=SourceKind.GENERATOR,
        schema=schema,
        columns=columns,
        rows_per_second=rps,
        total_rows=total,
    )


def _refuse_options_of(
    ctx: Context, options: tuple[Option, ...], other: OptionTable, table: OptionTable, kind: str
) -> None:
    """An option of another kind of source (``TOPIC`` on FILES, ``CLEAN SOURCE`` on KAFKA) is
    named as such, not as an unknown option."""
    for opt in options:
        if (
            not opt.key_is_string
            and table.lookup(opt.name)[0] is None
            and other.lookup(opt.name)[0] is not None
        ):
            this = "FILES or GENERATOR" if kind == "KAFKA" else "KAFKA"
            raise ctx.error(
                f"option {opt.name} applies only to {kind} sources",
                opt,
                did_you_mean(opt.name, table.names)
                or f"a {this} source takes {', '.join(spec.name for spec in table.specs[:6])}, ...",
            )


def _schema(ctx: Context, opts: Collected, name: str = "SCHEMA") -> tuple[tuple[Column, ...], str | None]:
    schema = opts.get_str(name)
    if schema is None:
        return (), None
    node = opts.node(name).value
    assert node is not None
    try:
        return parse_schema(schema), schema
    except SchemaError as e:
        raise ctx.error(f"invalid {name}: {e.message}", ctx.sub_span(node, e.start, e.end), e.hint) from None


# --------------------------------------------------------------------------- kafka

_NEEDS_SCHEMA = frozenset({"json", "csv", "debezium-json"})
RAW_VALUE = {"text": "string", "bytes": "binary"}  # FORMAT / KEY FORMAT 'text' | 'bytes': one column
INCLUDE_TYPES = {
    KafkaMetadata.PARTITION: "int",
    KafkaMetadata.OFFSET: "bigint",
    KafkaMetadata.TIMESTAMP: "timestamp",
    KafkaMetadata.HEADERS: "array<struct<key:string,value:binary>>",
    KafkaMetadata.TOPIC: "string",
}


def _kafka(ctx: Context, stmt: CreateSource, catalog: CatalogView | None) -> SourcePlan:
    _refuse_options_of(ctx, stmt.options, SOURCE_OPTIONS, KAFKA_SOURCE_OPTIONS, "FILES")
    check_empty_topics(ctx, stmt)
    opts = collect(ctx, stmt.options, KAFKA_SOURCE_OPTIONS)
    assert stmt.connection is not None, "the parser gives KAFKA a connection"
    conn = stmt.connection.name
    if catalog is not None:
        expect_connection(
            ctx,
            catalog,
            conn,
            stmt.connection,
            KafkaConnectionPlan,
            create=f"CREATE CONNECTION {conn} TO KAFKA (BROKER = 'host:9092')",
            why=f"a Kafka source reads through CREATE CONNECTION {conn} TO KAFKA (BROKER = 'host:9092')",
        )
    topics = analyze_topics(ctx, stmt, opts)
    fmt = opts.get_str("FORMAT")
    if fmt is None:
        raise ctx.error(
            "KAFKA source needs FORMAT",
            topics.at,
            f"add FORMAT = {one_of(sorted({'json', 'csv', 'text', 'bytes', 'debezium-json'}))}",
        )
    check_applies(ctx, opts, "format", fmt, "formats")
    value_columns, schema = _schema(ctx, opts)
    fmt_node = opts.node("FORMAT").value
    registry = registry_halves(ctx, opts, catalog, topics, fmt, opts.get_str("KEY FORMAT"), opts.get_str("ENVELOPE"))
    if registry.value and schema is not None:
        raise ctx.error(
            f"FORMAT '{fmt}' through a schema registry takes no SCHEMA: the registry gives it",
            opts.node("SCHEMA"),
            "leave SCHEMA out (the subject's latest schema gives the columns)",
        )
    if fmt in _NEEDS_SCHEMA and schema is None and not registry.value and fmt != "debezium-json":
        raise ctx.error(
            f"a '{fmt}' source needs SCHEMA", fmt_node, "add SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING'"
        )
    if fmt in RAW_VALUE and schema is not None:
        raise ctx.error(
            f"FORMAT '{fmt}' takes no SCHEMA: the value is one column, value {RAW_VALUE[fmt]}",
            opts.node("SCHEMA"),
            "leave SCHEMA out, or use FORMAT = 'json' | 'csv' to read columns from the value",
        )

    envelope = KafkaEnvelope(opts.get_str("ENVELOPE") or "none")
    check_registry_envelope(ctx, opts, envelope, fmt, registry)
    if envelope is KafkaEnvelope.UPSERT and fmt == "debezium-json":
        raise ctx.error(
            "ENVELOPE 'upsert' cannot read FORMAT 'debezium-json'",
            opts.node("ENVELOPE"),
            "a Debezium change event says itself what changed: leave ENVELOPE out",
        )
    include = _include(ctx, stmt, many_topics=topics.many)
    includes_key = any(i.what is KafkaMetadata.KEY for i in include)
    key_format = opts.get_str("KEY FORMAT")
    if key_format is not None and envelope is not KafkaEnvelope.UPSERT and not includes_key:
        raise ctx.error(
            "KEY FORMAT applies with ENVELOPE 'upsert' or INCLUDE KEY",
            opts.node("KEY FORMAT"),
            "add ENVELOPE = 'upsert' (the key names the row) or INCLUDE KEY (the key as a column)",
        )
    key_fields, key_schema = _schema(ctx, opts, "KEY SCHEMA")
    if key_format == "json" and key_schema is None and not registry.key:
        raise ctx.error(
            "KEY FORMAT 'json' needs KEY SCHEMA",
            opts.node("KEY FORMAT").value,
            "add KEY SCHEMA = 'id BIGINT'",
        )
    if key_schema is not None and key_format != "json":
        raise ctx.error(
            "KEY SCHEMA applies only with KEY FORMAT 'json'",
            opts.node("KEY SCHEMA"),
            "add KEY FORMAT = 'json', or leave KEY SCHEMA out (a 'text' key is one string column, key)",
        )
    kfmt = SourceFormat(key_format or "text")
    key_columns: tuple[Column, ...] = ()
    if envelope is KafkaEnvelope.UPSERT and not registry.key:  # a registry's key: its fields, once fetched
        key_columns = key_fields if kfmt is SourceFormat.JSON else (Column("key", RAW_VALUE[kfmt.value]),)

    if "START OFFSET" in opts and "START TIMESTAMP" in opts:
        raise ctx.error(
            "START OFFSET and START TIMESTAMP cannot both be set",
            opts.node("START TIMESTAMP"),
            "keep one: a new sink starts at the earliest or latest offset, or at a time",
        )
    max_records = opts.get_int("MAX RECORDS PER TRIGGER")
    if max_records is not None and max_records <= 0:
        raise ctx.error(
            f"MAX RECORDS PER TRIGGER must be a positive integer, found {max_records}",
            opts.node("MAX RECORDS PER TRIGGER").value,
        )
    group = opts.get_str("CONSUMER GROUP")
    if group is not None and not group.strip():
        raise ctx.error(
            "CONSUMER GROUP must not be empty",
            opts.node("CONSUMER GROUP").value,
            "write CONSUMER GROUP = 'icesql-orders'",
        )
    spec = KafkaSourceSpec(
        connection=conn,
        topic=topics.topic,
        topics=topics.topics,
        topic_pattern=topics.pattern,
        topic_refresh=topics.refresh,
        start_offset=opts.get_str("START OFFSET") or "earliest",
        start_timestamp_ms=opts.get_int("START TIMESTAMP"),
        envelope=envelope,
        key_format=kfmt,
        key_schema=key_schema,
        key_columns=key_columns,
        include=include,
        max_records_per_trigger=max_records,
        group_id=group,
        on_data_loss=opts.get_str("ON DATA LOSS") or "fail",
        **registry.fields,
    )
    columns = kafka_columns(ctx, SourceFormat(fmt), value_columns, spec, stmt, opts)
    if registry.value or registry.key:
        columns = ()  # known once CREATE SOURCE has fetched the schemas (``registry_columns``)
    return SourcePlan(
        name=stmt.name.name,
        source_kind=SourceKind.KAFKA,
        format=SourceFormat(fmt),
        schema=schema,
        columns=columns,
        header=opts.get_bool("HEADER", False),
        on_error=OnError(opts.get_str("ON ERROR") or "fail"),
        max_bytes_per_trigger=opts.get_int("MAX BYTES PER TRIGGER"),
        kafka=spec,
    )


_METADATA_NAMES = {m.value: m for m in KafkaMetadata}


def _first_node(opts: Collected, *names: str) -> Node | None:
    return next((opts.node(n) for n in names if n in opts), None)


def _include(ctx: Context, stmt: CreateSource, *, many_topics: bool) -> tuple[KafkaInclude, ...]:
    """The INCLUDE items as written; a source of many topics has its records' topic too (a column
    ``topic`` after them, unless INCLUDE TOPIC places or names it)."""
    out: list[KafkaInclude] = []
    seen: dict[KafkaMetadata, Node] = {}
    for item in stmt.include:
        what = _METADATA_NAMES.get(item.what.name.lower())
        if what is None:
            raise ctx.error(
                f"unknown INCLUDE item {item.what.name}: expected KEY, PARTITION, OFFSET, TIMESTAMP, HEADERS or TOPIC",
                item.what,
                did_you_mean(item.what.name.upper(), [m.name for m in KafkaMetadata]),
            )
        if what in seen:
            raise ctx.error(f"INCLUDE {what.name} is given twice", item, "include each item once")
        seen[what] = item
        out.append(KafkaInclude(what, item.alias.name if item.alias is not None else what.value))
    if many_topics and KafkaMetadata.TOPIC not in seen:
        out.append(KafkaInclude(KafkaMetadata.TOPIC, KafkaMetadata.TOPIC.value))
    return tuple(out)


def kafka_columns(
    ctx: Context,
    fmt: SourceFormat,
    value_columns: tuple[Column, ...],
    spec: KafkaSourceSpec,
    stmt: CreateSource | AlterSource,
    opts: Collected,
) -> tuple[Column, ...]:
    """Every column of a Kafka source, in order: key columns (ENVELOPE UPSERT), the value's
    columns, the INCLUDE columns; a name given twice (Spark compares names without case) is an
    error located where the later one comes from."""
    if fmt.value in RAW_VALUE:
        value_columns = (Column("value", RAW_VALUE[fmt.value]),)
    columns: list[Column] = []
    origin: dict[str, str] = {}

    def add(column: Column, what: str, at: Node | None, hint: str) -> None:
        prior = origin.get(column.name.lower())
        if prior is not None:
            raise ctx.error(f"column {column.name} of {what} clashes with {prior}", at, hint)
        origin[column.name.lower()] = what
        columns.append(column)

    key_at = _first_node(opts, "KEY SCHEMA", "ENVELOPE")
    for column in spec.key_columns:
        add(column, "the record key", key_at, "name each column once")
    value_at = _first_node(opts, "SCHEMA", "FORMAT")
    for column in value_columns:
        add(
            column,
            "the value",
            value_at,
            f"the key columns come first: leave {column.name} out of SCHEMA (the record key gives it)"
            if fmt.value not in RAW_VALUE
            else "name the key's column otherwise: KEY FORMAT = 'json' with a KEY SCHEMA",
        )
    for i, inc in enumerate(spec.include):
        if inc.what is KafkaMetadata.KEY:
            if spec.key_format is SourceFormat.JSON and spec.key_schema:
                typ = type_string_of(parse_schema(spec.key_schema))
            else:  # a registry's key: its type once the schema is fetched (registry_columns)
                typ = RAW_VALUE.get(spec.key_format.value, "binary")
        else:
            typ = INCLUDE_TYPES[inc.what]
        if isinstance(stmt, CreateSource) and i < len(stmt.include):
            add(
                Column(inc.name, typ),
                f"INCLUDE {inc.what.name}",
                stmt.include[i],
                f"rename it: INCLUDE {inc.what.name} AS kafka_{inc.what.value}",
            )
        elif isinstance(stmt, CreateSource):  # the topic column of a source of many topics
            add(
                Column(inc.name, typ),
                "INCLUDE TOPIC",
                _first_node(opts, "TOPICS", "TOPIC PATTERN"),
                "a source of many topics has its records' topic as a column topic: name it otherwise "
                "with INCLUDE TOPIC AS kafka_topic",
            )
        else:  # ALTER SOURCE: the new SCHEMA brings the clash
            add(
                Column(inc.name, typ),
                f"INCLUDE {inc.what.name}",
                value_at,
                f"leave {inc.name} out of SCHEMA: the source's INCLUDE {inc.what.name} gives that column",
            )
    return tuple(columns)


def analyze_alter_source(ctx: Context, stmt: AlterSource, catalog: CatalogView) -> SourcePlan:
    """ALTER SOURCE name SET (SCHEMA = '...'): a FILES source's declared schema, replaced. The
    sinks reading it add the new columns to their tables when they next start (and refuse a
    changed type there, naming both types)."""
    old = catalog.get("source", stmt.name.name)
    if old is None:
        raise ctx.error(
            f"unknown source {stmt.name.name}", stmt.name, names_hint(catalog, "source", stmt.name.name)
        )
    assert isinstance(old, SourcePlan)
    opts = collect(ctx, stmt.set_options, ALTER_SOURCE_OPTIONS)
    if "SCHEMA" not in opts:
        raise ctx.error(
            "ALTER SOURCE SET needs SCHEMA", stmt.name, "write ALTER SOURCE s SET (SCHEMA = '...')"
        )
    if old.source_kind is SourceKind.GENERATOR:
        raise ctx.error(
            f"source {old.name} is a {old.source_kind.value.upper()} source: ALTER SOURCE changes the "
            "SCHEMA of FILES and KAFKA sources",
            stmt.name,
            "DROP and CREATE the source with the new schema",
        )
    columns, schema = _schema(ctx, opts)
    if old.kafka is not None and old.kafka.value_schema_type is not None:
        raise ctx.error(
            f"source {old.name} reads its schema from schema registry {old.kafka.registry}",
            opts.node("SCHEMA"),
            "a new version of the subject's schema widens the source by itself; DROP and CREATE the source to read another",
        )
    if old.kafka is not None:
        assert old.format is not None
        if old.format.value in RAW_VALUE:
            raise ctx.error(
                f"source {old.name} reads FORMAT '{old.format.value}', which takes no SCHEMA",
                opts.node("SCHEMA"),
                "DROP and CREATE the source with FORMAT = 'json' | 'csv' to read columns from the value",
            )
        columns = kafka_columns(ctx, old.format, columns, old.kafka, stmt, opts)
    return dataclasses.replace(old, schema=schema, columns=columns)


# --------------------------------------------------------------------------- views

_QUERY_TOKENS = re.compile(
    r"--[^\n]*|/\*.*?\*/|'(?:[^'\\]|\\.|'')*'|\"(?:[^\"]|\"\")*\"|`(?:[^`]|``)*`|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*",
    re.DOTALL,
)


def analyze_view(
    ctx: Context, stmt: CreateView, catalog: CatalogView
) -> tuple[ViewPlan, list[tuple[str, str]]]:
    """A view's query goes to Spark verbatim; its icesql dependencies come from an identifier scan.

    The scan skips comments and string literals; a name that is both a column and a source
    only adds a harmless extra dependency.
    """
    depends: list[str] = []
    deps: list[tuple[str, str]] = []
    for m in _QUERY_TOKENS.finditer(stmt.query):
        tok = m.group(0)
        if tok.startswith(("--", "/*", "'")) or tok.startswith('"'):
            continue
        name = tok[1:-1].replace("``", "`") if tok.startswith("`") else tok.lower()
        if name == stmt.name.name or name in depends:
            continue
        for kind in ("source", "view"):
            found = catalog.get(kind, name)
            if isinstance(found, SourcePlan) and found.kafka is not None and found.kafka.schema_per_topic:
                at = span_within(stmt.query_span, stmt.query, m.start(), m.end()) if stmt.query_span else stmt.name
                raise ctx.error(per_topic_message(name), at, PER_TOPIC_HINT)
            if found is not None:
                depends.append(name)
                deps.append((kind, name))
                break
    return ViewPlan(name=stmt.name.name, query=stmt.query, depends_on=tuple(depends)), deps


def registry_columns(
    plan: SourcePlan, value: dict[str, Any] | None, key: dict[str, Any] | None
) -> SourcePlan:
    """The source once its schemas are known: SCHEMA and every column, in order (the key's
    columns with ENVELOPE UPSERT, the value's, the INCLUDE columns, as ``sources.kafka_columns``).
    ``value`` / ``key``: the row schema of each half read through the registry (the ``after``
    record for ENVELOPE DEBEZIUM); None: that half is read as the options say."""
    spec = plan.kafka
    assert spec is not None and plan.format is not None
    schema = plan.schema
    if value is not None:
        schema = struct_ddl(value)
        value_columns = struct_fields(value)
    elif plan.format.value in RAW_VALUE:
        value_columns = (Column("value", RAW_VALUE[plan.format.value]),)
    else:
        value_columns = parse_schema(plan.schema or "")
    key_columns = spec.key_columns
    if key is not None and spec.envelope is KafkaEnvelope.UPSERT:
        key_columns = struct_fields(key)
    if key is not None:
        key_type = type_string(key)
    elif spec.key_schema:
        key_type = type_string_of(parse_schema(spec.key_schema))
    else:
        key_type = RAW_VALUE.get(spec.key_format.value, "binary")
    columns: list[Column] = []
    seen: dict[str, str] = {}
    groups: list[tuple[tuple[Column, ...], str]] = [
        (key_columns, "the record key"),
        (value_columns, "the value"),
    ]
    for inc in spec.include:
        typ = key_type if inc.what is KafkaMetadata.KEY else INCLUDE_TYPES[inc.what]
        groups.append(((Column(inc.name, typ),), f"INCLUDE {inc.what.name}"))
    for group, what in groups:
        for column in group:
            prior = seen.get(column.name.lower())
            if prior is not None:
                raise AnalysisError(
                    f"source {plan.name}: column {column.name} of {what} clashes with {prior}",
                    hint="rename the field in one of the schemas, or INCLUDE it AS another name",
                )
            seen[column.name.lower()] = what
            columns.append(column)
    new_spec = dataclasses.replace(spec, key_columns=tuple(key_columns))
    return dataclasses.replace(plan, schema=schema, columns=tuple(columns), kafka=new_spec)


def type_string_of(columns: tuple[Column, ...]) -> str:
    return "struct<" + ",".join(f"{c.name}:{c.type}" for c in columns) + ">"
