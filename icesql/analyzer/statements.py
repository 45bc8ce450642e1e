"""``analyze``: one statement + a catalog view -> a typed plan (or the first AnalysisError)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icesql.analyzer.catalog import CatalogView
from icesql.analyzer.connection_kinds import names_hint
from icesql.analyzer.connections import analyze_connection
from icesql.analyzer.diagnostics import AnalysisWarning, Context
from icesql.analyzer.queries import (
    analyze_describe_table,
    analyze_select,
    analyze_show_snapshots,
    analyze_show_tables,
)
from icesql.analyzer.redaction import canonical_sql, mask_source
from icesql.analyzer.sinks import analyze_alter_sink, analyze_sink
from icesql.analyzer.sources import analyze_alter_source, analyze_source, analyze_view
from icesql.errors import AnalysisError
from icesql.plan import (
    AlterSinkPlan,
    AlterSourcePlan,
    CreateObjectPlan,
    CreateSecretPlan,
    DescribePlan,
    DropPlan,
    ExplainPlan,
    ExplainSelectPlan,
    FlushSinkPlan,
    Redacted,
    ShowCreatePlan,
    ShowPlan,
    ShowSinkStatusPlan,
    StatementPlan,
    ValidateConnectionPlan,
)
from icesql.syntax.ast import (
    AlterSecret,
    AlterSink,
    AlterSource,
    CreateConnection,
    CreateSecret,
    CreateSink,
    CreateSource,
    CreateView,
    Describe,
    DescribeTable,
    Drop,
    DropBehavior,
    Explain,
    FlushSink,
    Ident,
    Select,
    Show,
    ShowCreate,
    ShowSinkStatus,
    ShowSnapshots,
    ShowTables,
    Statement,
    ValidateConnection,
)

RESERVED_PREFIX = "__inline__"


@dataclass(frozen=True)
class Analyzed:
    plan: StatementPlan
    warnings: tuple[AnalysisWarning, ...] = ()


def analyze(
    stmt: Statement,
    catalog: CatalogView,
    *,
    source: str | None = None,
    filename: str | None = None,
    base_dir: Path | None = None,
) -> Analyzed:
    """Validate ``stmt`` against ``catalog`` and build its plan.

    ``source`` is the text the statement's spans point into (a whole script is fine); errors
    and warnings quote it with every secret literal masked. Relative paths resolve against
    ``base_dir`` (default: the working directory). Raises the first ``AnalysisError``.
    """
    masked = mask_source(source, stmt)
    ctx = Context(masked, filename, base_dir)
    try:
        plan = _dispatch(ctx, stmt, catalog, source)
    except AnalysisError as e:
        e.with_source(masked, filename)
        raise
    return Analyzed(plan, tuple(ctx.warnings))


def _dispatch(ctx: Context, stmt: Statement, catalog: CatalogView, source: str | None) -> StatementPlan:
    handler = HANDLERS.get(type(stmt))
    if handler is None:
        raise ctx.error(f"cannot analyze a {type(stmt).__name__} statement", stmt)
    return handler(ctx, stmt, catalog, source)


def _secret(
    ctx: Context, stmt: CreateSecret | AlterSecret, catalog: CatalogView, source: str | None
) -> StatementPlan:
    _check_name(ctx, stmt.name)
    if isinstance(stmt, AlterSecret) and not catalog.secret_exists(stmt.name.name):
        raise ctx.error(
            f"unknown secret {stmt.name.name}", stmt.name, names_hint(catalog, "secret", stmt.name.name)
        )
    return CreateSecretPlan(
        name=stmt.name.name,
        value=Redacted(stmt.value.value),
        if_not_exists=getattr(stmt, "if_not_exists", False),
        replace=isinstance(stmt, AlterSecret),
    )


def _connection(
    ctx: Context, stmt: CreateConnection, catalog: CatalogView, source: str | None
) -> StatementPlan:
    _check_name(ctx, stmt.name)
    conn, deps, inline = analyze_connection(ctx, stmt, catalog)
    return CreateObjectPlan(
        definition=conn,
        sql=canonical_sql(stmt, source),
        dependencies=tuple(deps),
        if_not_exists=stmt.if_not_exists,
        inline_secrets=tuple(inline.items),
    )


def _source(ctx: Context, stmt: CreateSource, catalog: CatalogView, source: str | None) -> StatementPlan:
    _check_name(ctx, stmt.name)
    _check_relation_clash(ctx, stmt.name, "source", catalog)
    definition = analyze_source(ctx, stmt, catalog)
    # the connections it reads through: AWS, GCS or AZURE (FILES), KAFKA and its schema registry
    kafka = definition.kafka.connection if definition.kafka is not None else None
    registry = definition.kafka.registry if definition.kafka is not None else None
    deps = [
        ("connection", name)
        for name in (definition.aws_connection, definition.storage_connection, kafka, registry)
        if name
    ]
    return CreateObjectPlan(
        definition=definition,
        sql=canonical_sql(stmt, source),
        dependencies=tuple(deps),
        if_not_exists=stmt.if_not_exists,
    )


def _view(ctx: Context, stmt: CreateView, catalog: CatalogView, source: str | None) -> StatementPlan:
    _check_name(ctx, stmt.name)
    _check_relation_clash(ctx, stmt.name, "view", catalog)
    if stmt.or_replace and stmt.if_not_exists:
        raise ctx.error(
            "OR REPLACE and IF NOT EXISTS contradict each other",
            stmt.name,
            "write CREATE OR REPLACE VIEW (replace it) or CREATE VIEW IF NOT EXISTS (keep it)",
        )
    view, deps = analyze_view(ctx, stmt, catalog)
    return CreateObjectPlan(
        definition=view,
        # stored as a plain CREATE VIEW: what SHOW CREATE VIEW gives back recreates it
        sql=canonical_sql(dataclasses.replace(stmt, or_replace=False), source),
        dependencies=tuple(deps),
        if_not_exists=stmt.if_not_exists,
        replace=stmt.or_replace,
    )


def _alter_source(ctx: Context, stmt: AlterSource, catalog: CatalogView, source: str | None) -> StatementPlan:
    return AlterSourcePlan(stmt.name.name, analyze_alter_source(ctx, stmt, catalog))


def _sink(ctx: Context, stmt: CreateSink, catalog: CatalogView, source: str | None) -> StatementPlan:
    _check_name(ctx, stmt.name)
    sink, deps = analyze_sink(ctx, stmt, catalog)
    return CreateObjectPlan(
        definition=sink,
        sql=canonical_sql(stmt, source),
        dependencies=tuple(deps),
        if_not_exists=stmt.if_not_exists,
    )


def _explain(ctx: Context, stmt: Explain, catalog: CatalogView, source: str | None) -> StatementPlan:
    if isinstance(stmt.statement, Select):
        return ExplainSelectPlan(analyze_select(ctx, stmt.statement, catalog))
    sink, _ = analyze_sink(ctx, stmt.statement, catalog)
    return ExplainPlan(sink)


def _alter_sink(ctx: Context, stmt: AlterSink, catalog: CatalogView, source: str | None) -> StatementPlan:
    return AlterSinkPlan(stmt.name.name, analyze_alter_sink(ctx, stmt, catalog), canonical_sql(stmt, source))


def _drop(ctx: Context, stmt: Drop, catalog: CatalogView, source: str | None) -> StatementPlan:
    kind = stmt.object_kind.value.lower()
    if not stmt.if_exists:
        _require(ctx, kind, stmt.name, catalog)
    return DropPlan(kind, stmt.name.name, stmt.if_exists, stmt.behavior is DropBehavior.CASCADE)


def _show(ctx: Context, stmt: Show, catalog: CatalogView, source: str | None) -> StatementPlan:
    return ShowPlan(stmt.object_kind.plural.lower())


def _show_create(ctx: Context, stmt: ShowCreate, catalog: CatalogView, source: str | None) -> StatementPlan:
    kind = stmt.object_kind.value.lower()
    _require(ctx, kind, stmt.name, catalog)
    return ShowCreatePlan(kind, stmt.name.name)


def _show_sink_status(
    ctx: Context, stmt: ShowSinkStatus, catalog: CatalogView, source: str | None
) -> StatementPlan:
    if stmt.name is not None:
        _require(ctx, "sink", stmt.name, catalog)
    return ShowSinkStatusPlan(stmt.name.name if stmt.name is not None else None)


_DESCRIBED = ("source", "view", "sink", "connection")


def _describe(ctx: Context, stmt: Describe, catalog: CatalogView, source: str | None) -> StatementPlan:
    name = stmt.name.name
    known = any(catalog.get(k, name) is not None for k in _DESCRIBED)
    if not known and catalog.relation_columns(name) is None:
        raise ctx.error(
            f"unknown object {name}",
            stmt.name,
            next(filter(None, (names_hint(catalog, k, name) for k in _DESCRIBED)), None)
            or "DESCRIBE names a source, view, sink, connection or Spark table",
        )
    return DescribePlan(name)


def _validate_connection(
    ctx: Context, stmt: ValidateConnection, catalog: CatalogView, source: str | None
) -> StatementPlan:
    _require(ctx, "connection", stmt.name, catalog)
    return ValidateConnectionPlan(stmt.name.name)


def _flush_sink(ctx: Context, stmt: FlushSink, catalog: CatalogView, source: str | None) -> StatementPlan:
    if stmt.name is not None:
        _require(ctx, "sink", stmt.name, catalog)
    return FlushSinkPlan(stmt.name.name if stmt.name is not None else None)


# Every statement of the syntax tree and the function that plans it (a test checks that each
# Statement subclass has one).
HANDLERS: dict[type[Statement], Callable[[Context, Any, CatalogView, str | None], StatementPlan]] = {
    CreateSecret: _secret,
    AlterSecret: _secret,
    CreateConnection: _connection,
    CreateSource: _source,
    CreateView: _view,
    CreateSink: _sink,
    Explain: _explain,
    AlterSink: _alter_sink,
    AlterSource: _alter_source,
    Drop: _drop,
    Show: _show,
    ShowCreate: _show_create,
    ShowSinkStatus: _show_sink_status,
    Describe: _describe,
    ValidateConnection: _validate_connection,
    FlushSink: _flush_sink,
    Select: lambda ctx, stmt, catalog, source: analyze_select(ctx, stmt, catalog),
    ShowTables: lambda ctx, stmt, catalog, source: analyze_show_tables(ctx, stmt, catalog),
    DescribeTable: lambda ctx, stmt, catalog, source: analyze_describe_table(ctx, stmt, catalog),
    ShowSnapshots: lambda ctx, stmt, catalog, source: analyze_show_snapshots(ctx, stmt, catalog),
}


def _check_name(ctx: Context, name: Ident) -> None:
    if name.name.startswith(RESERVED_PREFIX):
        raise ctx.error(f"names starting with {RESERVED_PREFIX} are reserved", name, "choose another name")
    if not name.name.strip():
        raise ctx.error("a name must not be empty", name)


def _check_relation_clash(ctx: Context, name: Ident, kind: str, catalog: CatalogView) -> None:
    """Sources and views share one namespace: a sink's FROM must resolve to one relation."""
    other = "view" if kind == "source" else "source"
    if catalog.get(other, name.name) is not None:
        raise ctx.error(
            f"a {other} named {name.name} exists already",
            name,
            "sources and views share their names (a sink's FROM must know which one it reads)",
        )


def _require(ctx: Context, kind: str, name: Ident, catalog: CatalogView) -> None:
    exists = (
        catalog.secret_exists(name.name) if kind == "secret" else catalog.get(kind, name.name) is not None
    )
    if not exists:
        raise ctx.error(f"unknown {kind} {name.name}", name, names_hint(catalog, kind, name.name))


__all__ = ["HANDLERS", "Analyzed", "analyze"]
