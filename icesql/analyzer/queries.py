"""SELECT and the statements that look at a connection's tables, analysed without Spark.

A SELECT is Spark SQL, kept verbatim except for the Iceberg tables it names as
``connection.namespace.table`` (with an optional ``FOR VERSION AS OF <snapshot id>`` or
``FOR TIMESTAMP AS OF '<timestamp>'``, Spark's time travel syntax): each becomes an alias the
engine registers the table's rows under, so that Spark stays the one SQL engine and a query can
join a source with a table. The scan below skips comments and string literals; a word that
names an icesql source or view is a relation to register; a top-level ``LIMIT`` keeps the
default one (``DEFAULT_LIMIT``) away.
"""

from __future__ import annotations

import datetime as dt
import re

from icesql.analyzer.catalog import CatalogView
from icesql.analyzer.connection_kinds import names_hint
from icesql.analyzer.diagnostics import Context
from icesql.analyzer.registry import PER_TOPIC_HINT, per_topic_message
from icesql.errors import Span, span_within
from icesql.plan import (
    CatalogConnectionPlan,
    DescribeTablePlan,
    SelectPlan,
    ShowSnapshotsPlan,
    ShowTablesPlan,
    SourcePlan,
    TableRef,
)
from icesql.syntax.ast import DescribeTable, Ident, Select, ShowSnapshots, ShowTables

DEFAULT_LIMIT = 100
ALIAS_PREFIX = "__icesql_table_"

_PART = r"(?:[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)*`)"
_TOKENS = re.compile(
    r"(?P<skip>--[^\n]*|/\*.*?\*/|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    rf"|(?P<name>{_PART}(?:\.{_PART})*)"
    r"|(?P<open>\()|(?P<close>\))",
    re.DOTALL,
)
_TRAVEL = re.compile(
    r"\s+(?:FOR\s+)?(?P<kind>SYSTEM_VERSION|VERSION|SYSTEM_TIME|TIMESTAMP)\s+AS\s+OF\s+"
    r"(?P<value>'(?:[^'\\]|\\.)*'|[0-9]+)",
    re.IGNORECASE,
)


def _unquote(part: str) -> str:
    return part[1:-1].replace("``", "`") if part.startswith("`") else part.lower()


def _parts(name: str) -> list[str]:
    return [_unquote(m.group(0)) for m in re.finditer(_PART, name)]


def query_span(stmt: Select, start: int, end: int) -> Span | None:
    """The span of ``stmt.query[start:end]`` in the source (from the query's own span)."""
    if stmt.query_span is None:
        return None
    return span_within(stmt.query_span, stmt.query, start, max(end, start + 1))


def analyze_select(ctx: Context, stmt: Select, catalog: CatalogView) -> SelectPlan:
    text = stmt.query
    head = f"{stmt.keyword} "
    out: list[str] = [head]
    pos = 0
    length = len(head)
    edits: list[tuple[int, int, int, int]] = []
    relations: list[str] = []
    tables: list[TableRef] = []
    depth = 0
    has_limit = False
    base = stmt.query_span.start if stmt.query_span is not None else 0
    for m in _TOKENS.finditer(text):
        kind = m.lastgroup
        if kind == "open":
            depth += 1
            continue
        if kind == "close":
            depth = max(0, depth - 1)
            continue
        if kind != "name":
            continue
        parts = _parts(m.group(0))
        if len(parts) == 1:
            name = parts[0]
            if name == "limit" and depth == 0:
                has_limit = True
            elif name not in relations and any(catalog.get(k, name) is not None for k in ("source", "view")):
                source = catalog.get("source", name)
                if isinstance(source, SourcePlan) and source.kafka is not None and source.kafka.schema_per_topic:
                    raise ctx.error(per_topic_message(name), query_span(stmt, m.start(), m.end()), PER_TOPIC_HINT)
                relations.append(name)
            continue
        conn = catalog.get("connection", parts[0]) if len(parts) >= 3 else None
        if not isinstance(conn, CatalogConnectionPlan):
            continue
        start, end = m.start(), m.end()
        snapshot_id: int | None = None
        as_of: str | None = None
        as_of_ms: int | None = None
        travel = _TRAVEL.match(text, end)
        if travel is not None:
            value = travel.group("value")
            vspan = query_span(stmt, travel.start("value"), travel.end("value"))
            if travel.group("kind").upper() in ("VERSION", "SYSTEM_VERSION"):
                if not value.isdigit():
                    raise ctx.error(
                        "VERSION AS OF takes a snapshot id",
                        vspan,
                        f"SHOW SNAPSHOTS OF SINK ... lists those of {conn.name}",
                    )
                snapshot_id = int(value)
            else:
                as_of = value[1:-1] if value.startswith("'") else value
                seconds = parse_timestamp(as_of)
                if seconds is None:
                    raise ctx.error(
                        f"cannot read {value} as a timestamp",
                        vspan,
                        "write it as 'YYYY-MM-DD HH:MM:SS' (local time) or with an offset, '...+00:00'",
                    )
                as_of_ms = int(seconds * 1000)
            end = travel.end()
        alias = f"{ALIAS_PREFIX}{len(tables)}"
        tables.append(
            TableRef(
                alias=alias,
                connection=conn.name,
                namespace=tuple(parts[1:-1]),
                table=parts[-1],
                snapshot_id=snapshot_id,
                as_of=as_of,
                as_of_ms=as_of_ms,
                start=base + start,
                end=base + end,
            )
        )
        out.append(text[pos:start])
        length += start - pos
        edits.append((length, length + len(alias), base + start, base + end))
        out.append(alias)
        length += len(alias)
        pos = end
    out.append(text[pos:])
    return SelectPlan(
        sql="".join(out),
        relations=tuple(relations),
        tables=tuple(tables),
        limit=None if has_limit else DEFAULT_LIMIT,
        head=len(head),
        base=base,
        edits=tuple(edits),
    )


def parse_timestamp(text: str) -> float | None:
    """Seconds since the epoch of an ISO-like timestamp (``T`` or a blank between date and
    time, ``Z`` or an offset; without one it is local time, as ``SHOW SNAPSHOTS`` prints it)."""
    t = text.strip().replace(" ", "T", 1)
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    try:
        return dt.datetime.fromisoformat(t).timestamp()
    except ValueError:
        return None


def _catalog_connection(ctx: Context, name: Ident, catalog: CatalogView) -> CatalogConnectionPlan:
    conn = catalog.get("connection", name.name)
    if conn is None:
        raise ctx.error(f"unknown connection {name.name}", name, names_hint(catalog, "connection", name.name))
    if not isinstance(conn, CatalogConnectionPlan):
        raise ctx.error(f"connection {name.name} is not an ICEBERG CATALOG connection", name)
    return conn


def analyze_show_tables(ctx: Context, stmt: ShowTables, catalog: CatalogView) -> ShowTablesPlan:
    conn = _catalog_connection(ctx, stmt.connection, catalog)
    return ShowTablesPlan(conn.name, tuple(p.name for p in stmt.namespace))


def analyze_describe_table(ctx: Context, stmt: DescribeTable, catalog: CatalogView) -> DescribeTablePlan:
    parts = stmt.name.parts
    conn = _catalog_connection(ctx, parts[0], catalog)
    return DescribeTablePlan(conn.name, tuple(p.name for p in parts[1:-1]), parts[-1].name)


def analyze_show_snapshots(ctx: Context, stmt: ShowSnapshots, catalog: CatalogView) -> ShowSnapshotsPlan:
    if catalog.get("sink", stmt.sink.name) is None:
        raise ctx.error(
            f"unknown sink {stmt.sink.name}", stmt.sink, names_hint(catalog, "sink", stmt.sink.name)
        )
    return ShowSnapshotsPlan(stmt.sink.name)


__all__ = [
    "ALIAS_PREFIX",
    "DEFAULT_LIMIT",
    "analyze_describe_table",
    "analyze_select",
    "analyze_show_snapshots",
    "analyze_show_tables",
    "parse_timestamp",
    "query_span",
]
