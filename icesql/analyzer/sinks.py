"""CREATE SINK (both spellings), EXPLAIN CREATE SINK and ALTER SINK.

Decisions where SPEC §1.4 leaves room (documented here because users will ask):

* ``KEY`` without ``MODE`` means ``MODE UPSERT``: a key says "keep the latest row per key",
  which is what the design document's customers asked for. Without KEY the default is APPEND.
* ``MODE APPEND`` with ``KEY`` is refused, as in Materialize: an append-only table would
  silently keep every version of a key, the opposite of what a KEY promises.
* ``NOT ENFORCED`` needs a KEY.
* ``MAXIMUM PERIOD`` (``COMMIT INTERVAL``) must be at least 100 ms (Materialize's floor is 1 s;
  tests and demos want quicker commits); under 1 s a warning mentions small files.
* ``MAXIMUM FILE SIZE`` must be at least 1 KiB (tiny files make rollover testable), default
  512 MiB; ``MINIMUM SIZE`` any positive size.
* ``FORMAT`` is 'parquet', 'orc' or 'avro' (any case, kept lower case), written in WITH or as
  Materialize's ``FORMAT ORC`` clause (the parser makes that the same WITH option). A sink that
  says no FORMAT plans ``None``: the engine writes the table's ``write.format.default`` (Parquet
  for a table icesql creates, as the Iceberg spec's default). When the sink says FORMAT, the
  table icesql creates gets ``write.format.default`` to match, so PROPERTIES may not set that
  property too. FORMAT cannot be changed by ALTER SINK (it is not among ALTER_SINK's options).
* ``FORMAT VERSION`` is 2 (the default) or 3 (row lineage, deletion vectors for upserts); v1 is out
  of scope in the design document.
* A relation that is neither an icesql source nor view is assumed to be a Spark table or view
  (SPEC: embedding programs register their own DataFrames); a warning says so.
"""

from __future__ import annotations

import dataclasses
import re

from icesql.analyzer.catalog import CatalogView
from icesql.analyzer.connection_kinds import expect_connection, names_hint
from icesql.analyzer.connections import STORAGES, check_storage_connection
from icesql.analyzer.diagnostics import Context, did_you_mean, find_column, one_of
from icesql.analyzer.maintenance import maintenance_policy, reset_maintenance
from icesql.analyzer.options import Collected, OptionTable, collect
from icesql.analyzer.registry import PER_TOPIC_HINT, per_topic_message
from icesql.analyzer.schema import iceberg_family, is_nested
from icesql.analyzer.transforms import analyze_partition, check_upsert_partition
from icesql.analyzer.units import format_size
from icesql.errors import Span
from icesql.plan import (
    DATA_FILE_FORMATS,
    DEFAULT_MAXIMUM_FILE_SIZE,
    WRITE_FORMAT_DEFAULT,
    CatalogConnectionPlan,
    Column,
    CommitPolicy,
    DeleteMode,
    KafkaEnvelope,
    MaintenancePolicy,
    OnError,
    SinkMode,
    SinkPlan,
    SourcePlan,
)
from icesql.routing import TemplateError, is_template, parse_template
from icesql.syntax.ast import AlterSink, ConnectionKind, CreateSink, Ident, Option, StringLit
from icesql.syntax.ast import SinkMode as AstSinkMode

MIN_PERIOD = 0.1
MIN_FILE_SIZE = 1024

SINK_OPTIONS = OptionTable("sink WITH", "sink")
ALTER_OPTIONS = OptionTable("ALTER SINK", "alter_sink")
TARGET_OPTIONS = OptionTable("sink catalog", "sink_target")


def analyze_sink(
    ctx: Context, stmt: CreateSink, catalog: CatalogView
) -> tuple[SinkPlan, list[tuple[str, str]]]:
    deps: list[tuple[str, str]] = []
    relation, columns = _relation(ctx, stmt, catalog, deps)

    cat: CatalogConnectionPlan = expect_connection(
        ctx,
        catalog,
        stmt.catalog.name,
        stmt.catalog,
        CatalogConnectionPlan,
        create=f"CREATE CONNECTION {stmt.catalog.name} TO ICEBERG CATALOG (...)",
        why="a sink writes through CREATE CONNECTION ... TO ICEBERG CATALOG (...)",
    )
    deps.append(("connection", cat.name))
    for storage_kind, name in _using(ctx, stmt):
        check_storage_connection(ctx, name, name.name, catalog, storage_kind)
        deps.append(("connection", name.name))

    namespace, table = _target(ctx, stmt)
    routed = is_template(table)
    if routed:
        columns = None  # each table's columns come with its records
    _check_routing(ctx, stmt, catalog, routed)
    key = _key(ctx, stmt, columns)
    mode = _mode(ctx, stmt, key, routed=routed)
    partition = analyze_partition(ctx, stmt.partition_by, columns)
    if mode is SinkMode.UPSERT and not routed:
        check_upsert_partition(ctx, stmt.partition_by, partition, key, implicit=stmt.mode is None)
        _check_upsert_source(ctx, stmt, catalog, key)

    opts = collect(ctx, stmt.with_options, SINK_OPTIONS)
    fmt = _format(ctx, opts)
    version = opts.get_int("FORMAT VERSION")
    if version is not None and version not in (2, 3):
        node = opts.node("FORMAT VERSION").value
        if version == 1:
            raise ctx.error(
                "FORMAT VERSION 1 is not supported",
                node,
                "icesql writes v2 or v3 tables (row-level deletes need v2; v1 is out of scope per the design)",
            )
        raise ctx.error(f"FORMAT VERSION {version} is not supported", node, "use FORMAT VERSION = 2 or 3")
    properties = opts.pairs("PROPERTIES")
    for k, v in properties:
        if k == "format-version":
            raise ctx.error(
                "property 'format-version' is set by FORMAT VERSION",
                opts.node("PROPERTIES"),
                "use FORMAT VERSION = 2 or 3",
            )
        if k == WRITE_FORMAT_DEFAULT:
            wanted = v.lower()
            if fmt is not None:
                hint = f"leave the property out: FORMAT '{fmt}' sets it"
            elif wanted in DATA_FILE_FORMATS:
                hint = (
                    f"use FORMAT = '{wanted}' (or the clause FORMAT {wanted.upper()}) instead of the property"
                )
            else:
                hint = f"use FORMAT = {one_of(DATA_FILE_FORMATS)} instead of the property"
            raise ctx.error(
                f"property '{WRITE_FORMAT_DEFAULT}' is set by FORMAT", opts.node("PROPERTIES"), hint
            )
    commit, file_size = _commit_policy(ctx, opts, CommitPolicy(), DEFAULT_MAXIMUM_FILE_SIZE)
    delete_mode = opts.get_str("DELETE MODE")
    if delete_mode is not None and mode is not SinkMode.UPSERT:
        raise ctx.error(
            "DELETE MODE applies only to MODE UPSERT sinks",
            opts.node("DELETE MODE"),
            "an append sink deletes nothing; leave DELETE MODE out",
        )

    plan = SinkPlan(
        name=stmt.name.name,
        relation=relation,
        catalog_connection=cat.name,
        namespace=namespace,
        table=table,
        aws_connection=stmt.aws_connection.name if stmt.aws_connection is not None else None,
        storage_connection=stmt.storage_connection.name.name if stmt.storage_connection is not None else None,
        key=key,
        key_enforced=not stmt.key_not_enforced,
        mode=mode,
        partition_by=partition,
        format=fmt,
        commit=commit,
        maximum_file_size=file_size,
        format_version=version or 2,
        properties=properties,
        on_error=OnError(opts.get_str("ON ERROR") or "fail"),
        columns=columns or (),
        maintenance=maintenance_policy(ctx, opts, MaintenancePolicy()),
        delete_mode=DeleteMode(delete_mode or "position"),
        schema_evolution=(opts.get_str("SCHEMA EVOLUTION") or "auto") == "auto",
        dead_letter_table=_dead_letter_table(ctx, opts, namespace, table),
    )
    return plan, deps


def _using(ctx: Context, stmt: CreateSink) -> list[tuple[ConnectionKind, Ident]]:
    """The sink's USING clause, (kind, connection name): ``USING AWS
    CONNECTION`` (``aws_connection``) or ``USING GCS | AZURE CONNECTION`` (``storage_connection``),
    one of them (the parser sees to that; a tree built by hand is checked here)."""
    ref = stmt.storage_connection
    if ref is not None and ref.kind not in STORAGES:
        raise ctx.error(
            f"USING {ref.kind.value} CONNECTION does not name a storage connection",
            ref,
            "a sink writes its files through USING AWS | GCS | AZURE CONNECTION name",
        )
    if ref is not None and stmt.aws_connection is not None:
        raise ctx.error(
            f"USING {ref.kind.value} CONNECTION cannot be combined with USING AWS CONNECTION",
            ref,
            "a sink writes its table's files through one storage connection: keep one USING clause",
        )
    if stmt.aws_connection is not None:
        return [(ConnectionKind.AWS, stmt.aws_connection)]
    if ref is not None:
        return [(ref.kind, ref.name)]
    return []


def _format(ctx: Context, opts: Collected) -> str | None:
    """FORMAT = 'parquet' | 'orc' | 'avro' in lower case; None when the sink does not say (the
    engine then writes the table's ``write.format.default``)."""
    text = opts.get_str("FORMAT")
    if text is None:
        return None
    fmt = text.lower()
    if fmt not in DATA_FILE_FORMATS:
        raise ctx.error(
            f"unknown FORMAT '{text}': expected {one_of(DATA_FILE_FORMATS)}",
            opts.node("FORMAT").value,
            did_you_mean(fmt, DATA_FILE_FORMATS, quote="'")
            or "FORMAT names the data files' format; leave it out to write the table's default (parquet)",
        )
    return fmt


def _dead_letter_table(
    ctx: Context, opts: Collected, namespace: tuple[str, ...], table: str
) -> tuple[str, ...]:
    """DEAD LETTER TABLE = 'ns.t' (or 't': the target's namespace), with ON ERROR = 'dead-letter'."""
    text = opts.get_str("DEAD LETTER TABLE")
    if text is None:
        return ()
    node = opts.node("DEAD LETTER TABLE").value
    if opts.get_str("ON ERROR") != "dead-letter":
        raise ctx.error(
            "DEAD LETTER TABLE applies only with ON ERROR = 'dead-letter'",
            node,
            "add ON ERROR = 'dead-letter', or leave DEAD LETTER TABLE out",
        )
    parts = tuple(text.split("."))
    if any(not p.strip() for p in parts):
        raise ctx.error(
            f"invalid DEAD LETTER TABLE '{text}': empty name", node, "write DEAD LETTER TABLE = 'ns.t_errors'"
        )
    full = parts if len(parts) > 1 else (*namespace, parts[0])
    if full == (*namespace, table):
        raise ctx.error(
            f"DEAD LETTER TABLE '{text}' is the sink's own target table",
            node,
            f"name another table, e.g. '{'.'.join(namespace)}.{table}_dead_letters' (the default)",
        )
    return full


def _relation(
    ctx: Context, stmt: CreateSink, catalog: CatalogView, deps: list[tuple[str, str]]
) -> tuple[str, tuple[Column, ...] | None]:
    rel = stmt.relation
    name = rel.dotted
    if len(rel.parts) == 1:
        for kind in ("view", "source"):
            if catalog.get(kind, name) is not None:
                deps.append((kind, name))
                return name, catalog.relation_columns(name)
    columns = catalog.relation_columns(name)
    if columns is None:
        known = []
        names = getattr(catalog, "names", None)
        if names is not None:
            known = [*names("source"), *names("view")]
        ctx.warn(
            f"{name} is not an icesql source or view; assuming a table or view of the Spark session",
            rel,
            did_you_mean(name, known) if known else None,
        )
    return name, columns


def _target(ctx: Context, stmt: CreateSink) -> tuple[tuple[str, ...], str]:
    opts = collect(ctx, stmt.catalog_options, TARGET_OPTIONS)
    clause = stmt.namespace is not None or stmt.table is not None
    if clause and opts.given:
        first = next(iter(opts.given.values())).option
        raise ctx.error(
            "the target table is given twice: in the catalog options and in NAMESPACE ... TABLE ...",
            first,
            "use one form: (NAMESPACE = 'ns', TABLE = 't') or NAMESPACE \"ns\" TABLE \"t\"",
        )
    ns_node: Ident | StringLit | Option | None
    tbl_node: Ident | StringLit | Option | None
    if clause:
        ns_node, tbl_node = stmt.namespace, stmt.table
        ns = _text(stmt.namespace)
        tbl = _text(stmt.table)
    else:
        ns_node = opts.node("NAMESPACE") if "NAMESPACE" in opts else None
        tbl_node = opts.node("TABLE") if "TABLE" in opts else None
        ns, tbl = opts.get_str("NAMESPACE"), opts.get_str("TABLE")
    form = 'NAMESPACE "ns" TABLE "t"' if clause else "(NAMESPACE = 'ns', TABLE = 't')"
    if ns is None and tbl is None:
        raise ctx.error(
            "the sink names no target table",
            stmt.catalog,
            "add (NAMESPACE = 'ns', TABLE = 't') after the catalog, or NAMESPACE \"ns\" TABLE \"t\"",
        )
    if ns is None:
        raise ctx.error("the sink names a TABLE but no NAMESPACE", tbl_node, f"write {form}")
    if tbl is None:
        raise ctx.error("the sink names a NAMESPACE but no TABLE", ns_node, f"write {form}")
    parts = tuple(ns.split("."))
    ns_at = ns_node.value if isinstance(ns_node, Option) else ns_node
    tbl_at = tbl_node.value if isinstance(tbl_node, Option) else tbl_node
    if any(not p.strip() for p in parts):
        raise ctx.error(
            f"invalid NAMESPACE '{ns}': empty level", ns_at, "write NAMESPACE = 'sales' or 'db.sales'"
        )
    if not tbl.strip():
        raise ctx.error("TABLE must not be empty", tbl_at)
    if is_template(tbl):
        try:
            parse_template(tbl)
        except TemplateError as e:
            at = ctx.sub_span(tbl_at, e.start, e.end) if tbl_at is not None else None
            raise ctx.error(e.message, at, e.hint) from None
        return parts, tbl
    if "." in tbl:
        raise ctx.error(
            f"TABLE '{tbl}' must be a single name",
            tbl_at,
            "put the namespace in NAMESPACE: NAMESPACE = 'a.b', TABLE = 't'",
        )
    return parts, tbl


def _text(v: Ident | StringLit | None) -> str | None:
    if v is None:
        return None
    return v.value if isinstance(v, StringLit) else v.name


def _key(ctx: Context, stmt: CreateSink, columns: tuple[Column, ...] | None) -> tuple[str, ...]:
    if stmt.key_not_enforced and not stmt.key:
        raise ctx.error(
            "NOT ENFORCED needs a KEY",
            ctx.find(stmt, r"\bNOT\s+ENFORCED\b"),
            "write KEY (col, ...) NOT ENFORCED",
        )
    by_name = {c.name.lower(): c for c in columns} if columns is not None else None
    out: list[str] = []
    for ident in stmt.key:
        name = ident.name
        if by_name is not None:
            column = find_column(
                ctx, by_name, ident, name, f"KEY column {name} does not exist in {stmt.relation.dotted}"
            )
            name = column.name
            if is_nested(column.type) or iceberg_family(column.type) in ("float", "double"):
                raise ctx.error(
                    f"KEY column {name} has type {column.type}, which cannot identify a row",
                    ident,
                    "Iceberg identifier fields must be primitive and not float or double",
                )
        if name.lower() in (o.lower() for o in out):
            raise ctx.error(f"KEY column {name} listed twice", ident, "list each key column once")
        out.append(name)
    return tuple(out)


def _check_upsert_source(ctx: Context, stmt: CreateSink, catalog: CatalogView, key: tuple[str, ...]) -> None:
    """A MODE UPSERT sink reading a Kafka source with ENVELOPE UPSERT keys its table by the
    record key: a tombstone deletes the row of its key, which only means something when the
    sink's KEY is that key."""
    if len(stmt.relation.parts) != 1:
        return
    source = catalog.get("source", stmt.relation.dotted)
    if not isinstance(source, SourcePlan) or source.kafka is None:
        return
    if source.kafka.envelope is not KafkaEnvelope.UPSERT:
        return
    expected = [c.name for c in source.kafka.key_columns]
    if sorted(k.lower() for k in key) != sorted(e.lower() for e in expected):
        first, last = stmt.key[0].span, stmt.key[-1].span
        at = (
            Span(first.start, last.end, first.line, first.column, last.end_line, last.end_column)
            if first is not None and last is not None
            else stmt.relation.span
        )
        raise ctx.error(
            f"KEY ({', '.join(key)}) is not the record key of source {source.name}, "
            f"which has ENVELOPE UPSERT: expected KEY ({', '.join(expected)})",
            at,
            f"write KEY ({', '.join(expected)}): a tombstone deletes the row of its record key",
        )


def _check_routing(ctx: Context, stmt: CreateSink, catalog: CatalogView, routed: bool) -> None:
    """A routed sink reads Debezium change events that carry their schemas (a 'debezium-json'
    source without SCHEMA) or name them (a registry source of many topics with a schema per topic,
    ``KafkaSourceSpec.schema_per_topic``); such a source feeds only a routed sink."""
    name = stmt.relation.dotted
    source = catalog.get("source", name) if len(stmt.relation.parts) == 1 else None
    per_topic = isinstance(source, SourcePlan) and source.kafka is not None and source.kafka.schema_per_topic
    carries = (
        isinstance(source, SourcePlan)
        and source.format is not None
        and source.format.value == "debezium-json"
        and not source.schema
    )
    if routed and not (carries or per_topic):
        raise ctx.error(
            f"a TABLE template routes Debezium change events whose messages carry or name their schemas, "
            f"but {name} is not a 'debezium-json' source without SCHEMA",
            stmt.relation,
            f"read them with CREATE SOURCE {name} FROM KAFKA CONNECTION k (TOPIC = '...', "
            "FORMAT = 'debezium-json'), or name one table in TABLE",
        )
    if per_topic and not routed:
        raise ctx.error(per_topic_message(name), stmt.relation, PER_TOPIC_HINT)
    if carries and not routed:
        raise ctx.error(
            f"source {name} has no SCHEMA: its events carry one each, so it feeds a sink whose "
            "TABLE is a template",
            stmt.relation,
            "write TABLE = '{table}' (one table per table of the database), or give the source a SCHEMA",
        )


def _mode(ctx: Context, stmt: CreateSink, key: tuple[str, ...], *, routed: bool = False) -> SinkMode:
    if routed:  # each table's KEY is its records' key (the sink's KEY where a record has none)
        if stmt.mode is AstSinkMode.APPEND and key:
            raise ctx.error(
                "MODE APPEND takes no KEY",
                ctx.find(stmt, r"\bMODE\s+APPEND\b"),
                "drop KEY to append every change, or use MODE UPSERT",
            )
        return SinkMode.UPSERT if stmt.mode is AstSinkMode.UPSERT or key else SinkMode.APPEND
    if stmt.mode is AstSinkMode.UPSERT:
        if not key:
            raise ctx.error(
                "MODE UPSERT needs a KEY",
                ctx.find(stmt, r"\bMODE\s+UPSERT\b"),
                "add KEY (col, ...) before MODE UPSERT",
            )
        return SinkMode.UPSERT
    if stmt.mode is AstSinkMode.APPEND:
        if key:
            raise ctx.error(
                "MODE APPEND takes no KEY",
                ctx.find(stmt, r"\bMODE\s+APPEND\b"),
                "drop KEY to append every change, or use MODE UPSERT to keep the latest row per key",
            )
        return SinkMode.APPEND
    return SinkMode.UPSERT if key else SinkMode.APPEND


def _commit_policy(
    ctx: Context, opts: Collected, commit: CommitPolicy, file_size: int
) -> tuple[CommitPolicy, int]:
    if "MAXIMUM PERIOD" in opts:
        period = opts.get_float("MAXIMUM PERIOD")
        assert period is not None
        node = opts.node("MAXIMUM PERIOD")
        if period < MIN_PERIOD:
            raise ctx.error(
                f"{node.name} must be at least 100ms",
                node.value,
                "commits more often than that only make small files",
            )
        if period < 1:
            ctx.warn(
                f"{node.name} under 1s makes many small files",
                node.value,
                "Iceberg readers slow down with many small files; '10s' to '60s' is typical",
            )
        commit = dataclasses.replace(commit, maximum_period=period)
    if "MINIMUM SIZE" in opts:
        commit = dataclasses.replace(commit, minimum_size=opts.get_int("MINIMUM SIZE"))
    if "MAXIMUM FILE SIZE" in opts:
        size = opts.get_int("MAXIMUM FILE SIZE")
        assert size is not None
        if size < MIN_FILE_SIZE:
            raise ctx.error(
                f"MAXIMUM FILE SIZE must be at least 1KiB, found {format_size(size)}",
                opts.node("MAXIMUM FILE SIZE").value,
                "the default is 512MiB",
            )
        file_size = size
    return commit, file_size


def analyze_alter_sink(ctx: Context, stmt: AlterSink, catalog: CatalogView) -> SinkPlan:
    old = catalog.get("sink", stmt.name.name)
    if old is None:
        raise ctx.error(
            f"unknown sink {stmt.name.name}",
            stmt.name,
            names_hint(catalog, "sink", stmt.name.name),
        )
    assert isinstance(old, SinkPlan)
    for opt in stmt.set_options:
        spec, _ = SINK_OPTIONS.lookup(opt.name)
        if spec is not None and ALTER_OPTIONS.lookup(opt.name)[0] is None:
            raise ctx.error(
                f"option {opt.name} cannot be changed by ALTER SINK",
                opt,
                "ALTER SINK SET changes MAXIMUM PERIOD (COMMIT INTERVAL), MINIMUM SIZE, MAXIMUM FILE SIZE, "
                "FORMAT VERSION and the maintenance options",
            )
    opts = collect(ctx, stmt.set_options, ALTER_OPTIONS)
    commit, file_size = old.commit, old.maximum_file_size
    reset: set[str] = set()
    for name in stmt.reset_options:
        spec, _ = ALTER_OPTIONS.lookup(name)
        # reset names carry no span of their own: find the words in the statement's text
        at = ctx.find(stmt, r"\b" + r"\s+".join(re.escape(w) for w in name.split()) + r"\b")
        if spec is None:
            if SINK_OPTIONS.lookup(name)[0] is not None:
                raise ctx.error(f"option {name} cannot be changed by ALTER SINK", at)
            raise ctx.error(
                f"unknown ALTER SINK option {name}",
                at,
                did_you_mean(name, ALTER_OPTIONS.names)
                or "valid options: MAXIMUM PERIOD, MINIMUM SIZE, MAXIMUM FILE SIZE",
            )
        if spec.name in opts:
            raise ctx.error(f"option {name} is both SET and RESET", opts.node(spec.name), "give it once")
        if spec.name in reset:
            raise ctx.error(f"option {name} is reset twice", at)
        reset.add(spec.name)
    if "FORMAT VERSION" in reset:
        raise ctx.error(
            "option FORMAT VERSION cannot be reset",
            ctx.find(stmt, r"\bFORMAT\s+VERSION\b"),
            "a table's format version only goes up: SET (FORMAT VERSION = 3) upgrades it",
        )
    version = opts.get_int("FORMAT VERSION")
    if version is not None and version != old.format_version:
        node = opts.node("FORMAT VERSION").value
        if version < old.format_version:
            raise ctx.error(
                f"FORMAT VERSION {version} would downgrade sink {old.name}'s table from version {old.format_version}",
                node,
                "Iceberg tables are upgraded, never downgraded",
            )
        if version != 3:
            raise ctx.error(f"FORMAT VERSION {version} is not supported", node, "use FORMAT VERSION = 3")
    if "MAXIMUM PERIOD" in reset:
        commit = dataclasses.replace(commit, maximum_period=None)
    if "MINIMUM SIZE" in reset:
        commit = dataclasses.replace(commit, minimum_size=None)
    if "MAXIMUM FILE SIZE" in reset:
        file_size = DEFAULT_MAXIMUM_FILE_SIZE
    commit, file_size = _commit_policy(ctx, opts, commit, file_size)
    maintenance = maintenance_policy(ctx, opts, reset_maintenance(old.maintenance, reset))
    return dataclasses.replace(
        old,
        commit=commit,
        maximum_file_size=file_size,
        maintenance=maintenance,
        format_version=max(version or old.format_version, old.format_version),
    )


__all__ = ["analyze_alter_sink", "analyze_sink"]
