"""Names a statement reads that cannot exist, answered before Spark starts.

A mistyped connection, namespace, table, source or view in a SELECT, EXPLAIN, DESCRIBE, SHOW
TABLES, a view's query or a sink's FROM would otherwise reach Spark, which takes its start (tens
of seconds) to say something about a single-part namespace. Here each such name is one error,
pointing at the name, with a did-you-mean and what exists:

* offline (``check_statement``, right after analysis): names icesql can judge from its own
  objects. A name in a query's table place whose first part is not a connection, or a one-part
  name that is neither a source, a view nor a common table expression, can only be wrong when
  the session's Spark knows no relations of its own (``SparkWorld.closed``); otherwise it is
  left to Spark, as before.
* online (``missing_table``, ``missing_namespace``, ``check_tables``): a connection's table or
  namespace the catalog does not have, from pyiceberg's listings, saying which level is missing.
  A catalog that cannot be listed leaves the engine's own error as it is: it never turns into a
  wrong "does not exist".
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icesql import plan as P
from icesql.analyzer.diagnostics import did_you_mean
from icesql.analyzer.queries import query_span
from icesql.errors import AnalysisError, ExecutionError, IcesqlError, Span, span_within
from icesql.syntax import ast as A

if TYPE_CHECKING:
    from icesql.engine.select.tables import MissingTableError

# Spark's own catalog: ``spark_catalog.db.table`` is Spark's, never a connection's.
SPARK_CATALOG = "spark_catalog"
# Settings with which Spark may know tables icesql does not (catalogs, a metastore, extensions).
_SPARK_CATALOG_SETTINGS = ("spark.sql.catalog", "spark.sql.defaultCatalog", "spark.sql.extensions")
_LISTED = 12  # names shown in a hint at most


@dataclass(frozen=True)
class SparkWorld:
    """What the session's Spark may know besides icesql's objects. ``closed``: nothing (a Spark
    this session starts itself, with no catalog, metastore or settings file of the user's), so a
    relation icesql does not know cannot exist there either."""

    closed: bool

    @staticmethod
    def of(spark: Any, master: str | None, conf: Mapping[str, Any]) -> SparkWorld:
        from icesql import settings

        if spark is not None or active_spark():
            return SparkWorld(False)  # the program's own Spark: its tables and views are its own
        if (master or settings.SPARK_MASTER.get() or "").startswith("sc://"):
            return SparkWorld(False)  # a Spark Connect server's catalogs are the server's
        if settings.SPARK_CONF_DIR.get():
            return SparkWorld(False)
        home = settings.SPARK_HOME.get()
        if home and Path(str(home), "conf", "spark-defaults.conf").exists():
            return SparkWorld(False)
        if any(str(k).startswith(_SPARK_CATALOG_SETTINGS) for k in conf):
            return SparkWorld(False)
        return SparkWorld(True)


def active_spark() -> bool:
    """Whether this process has a Spark session already (the engine would take it)."""
    if "pyspark.sql" not in sys.modules:
        return False
    try:
        from pyspark.sql import SparkSession

        return SparkSession.getActiveSession() is not None
    except Exception:  # an odd pyspark: assume the worst, check less
        return True


class Names:
    """The objects a statement may name: the catalog view the analyzer used (a script's overlay
    included), with the names of each kind for hints (``fallback``: the store's view, when the
    view lists none)."""

    def __init__(self, view: Any, fallback: Any) -> None:
        self._view = view
        self._fallback = fallback

    def get(self, kind: str, name: str) -> P.ObjectPlan | None:
        plan: P.ObjectPlan | None = self._view.get(kind, name)
        return plan

    def names(self, kind: str) -> list[str]:
        lister = getattr(self._view, "names", None) or getattr(self._fallback, "names", None)
        return sorted(lister(kind)) if lister is not None else []

    def catalog_connections(self) -> list[str]:
        return [n for n in self.names("connection") if isinstance(self.get("connection", n), P.CatalogConnectionPlan)]

    def relation(self, name: str) -> bool:
        return self.get("source", name) is not None or self.get("view", name) is not None


def hint_of(word: str, there: Iterable[str], label: str) -> str | None:
    """``did you mean X? <label>: a, b, c`` (either half may be missing)."""
    names = list(there)
    close = did_you_mean(word, names)
    shown = ", ".join(names[:_LISTED]) + (", ..." if len(names) > _LISTED else "")
    listing = f"{label}: {shown}" if names else None
    return " ".join(h for h in (close, listing) if h) or None


# --------------------------------------------------------------------------- offline


def check_select(stmt: A.Select, names: Names, world: SparkWorld) -> None:
    """The relations a SELECT names that cannot exist (no network, no Spark)."""
    from icesql.engine.select.tables import query_relations

    head = f"{stmt.keyword} "
    found = query_relations(head + stmt.query)
    for rel in found or ():
        offsets = tuple((s - len(head), e - len(head)) for s, e in rel.offsets)
        spans = tuple(query_span(stmt, s, e) for s, e in offsets)
        check_relation(rel.parts, spans, names, world, reader="query")


def check_view(stmt: A.CreateView, names: Names, world: SparkWorld) -> None:
    """The relations a view's query names that cannot exist (Spark runs it as written)."""
    from icesql.engine.select.tables import query_relations

    for rel in query_relations(stmt.query) or ():
        if rel.parts == (stmt.name.name,):  # CREATE OR REPLACE VIEW v over the v it replaces
            continue
        origin = stmt.query_span
        spans = tuple(span_within(origin, stmt.query, s, e) if origin else None for s, e in rel.offsets)
        check_relation(rel.parts, spans, names, world, reader="view")


def check_relation(
    parts: tuple[str, ...], spans: tuple[Span | None, ...], names: Names, world: SparkWorld, *, reader: str
) -> None:
    """One relation name (``spans``: each part's): a connection's table, a source or view, or
    (when Spark may know more) left to Spark. ``reader``: a SELECT's ``query``, which reads
    a connection's tables; a ``sink``'s FROM and a ``view``'s query read sources and views."""
    first = parts[0]
    conn = names.get("connection", first) if len(parts) >= 2 else None
    whole = _joined(spans)
    if isinstance(conn, P.CatalogConnectionPlan):
        if len(parts) == 2 and world.closed:
            raise AnalysisError(
                f"{'.'.join(parts)} names no namespace: a table of connection {first} is {first}.<namespace>.<table>",
                whole,
                f"SHOW TABLES IN {first} lists them",
            )
        if reader != "query" and world.closed:
            raise AnalysisError(
                f"a {reader} reads sources and views, not the table {'.'.join(parts)} of connection {first}",
                whole,
                "a SELECT reads a connection's tables; sinks and views read sources (CREATE SOURCE) and views",
            )
        return
    if not world.closed:
        return
    if len(parts) == 1:
        if names.relation(first):
            return
        raise AnalysisError(
            f"unknown source or view {first}",
            whole,
            hint_of(first, sorted({*names.names("source"), *names.names("view")}), "sources and views")
            or "CREATE SOURCE or CREATE VIEW it first",
        )
    if len(parts) >= 3 and first.lower() != SPARK_CATALOG:
        if conn is not None:
            raise AnalysisError(
                f"connection {first} is not an ICEBERG CATALOG connection: it has no tables",
                spans[0],
                hint_of(first, names.catalog_connections(), "ICEBERG CATALOG connections"),
            )
        raise AnalysisError(
            f"unknown connection {first}",
            spans[0],
            hint_of(first, names.catalog_connections(), "ICEBERG CATALOG connections")
            or f"create it first: CREATE CONNECTION {first} TO ICEBERG CATALOG (...)",
        )
    # two parts: a Spark database's table, or a file read as ``parquet.`path```: Spark's to say


def check_sink_from(rel: A.QualifiedName, names: Names, world: SparkWorld) -> None:
    """A sink's FROM: an icesql source or view, unless Spark may know the name."""
    spans = tuple(p.span for p in rel.parts)
    if len(rel.parts) == 1:
        spans = (rel.span,)
    check_relation(tuple(p.name for p in rel.parts), spans, names, world, reader="sink")


def _joined(spans: tuple[Span | None, ...]) -> Span | None:
    first, last = spans[0], spans[-1]
    if first is None or last is None:
        return first
    return Span(first.start, last.end, first.line, first.column, last.end_line, last.end_column)


# --------------------------------------------------------------------------- online


# (live catalog, connection plan, its AWS connection) of a connection: ``Engine.connection_catalog``
CatalogOpener = Callable[[str], "tuple[Any, P.CatalogConnectionPlan, P.AwsConnectionPlan | None]"]


def missing_table(err: MissingTableError, open_catalog: CatalogOpener, secrets: P.SecretResolver) -> IcesqlError:
    """The engine's "table does not exist", made precise from the catalog's listings: which
    namespace level or table is missing, a did-you-mean and what exists there. When the catalog
    cannot be listed the engine's error stays as it is."""
    from icesql.engine.select.tables import in_catalog, missing_part

    where = ".".join((err.connection, *err.namespace))
    try:
        catalog, conn, aws = open_catalog(err.connection)
        part = in_catalog(conn, aws, secrets, f"list {where}", lambda: missing_part(catalog, err.namespace, err.table))
    except Exception:  # unreachable, not allowed to list, ...: nothing more is known
        return err
    if part is None:  # there after all (created meanwhile): the engine's word stands
        return err
    if part.depth < len(err.namespace):
        namespace = ".".join((err.connection, *err.namespace[: part.depth + 1]))
        parent = ".".join((err.connection, *err.namespace[: part.depth]))
        err.message = f"namespace {namespace} does not exist"
        err.hint = hint_of(err.namespace[part.depth], part.there, f"namespaces in {parent}") or f"{parent} has no namespace"
    else:
        err.message = f"table {where}.{err.table} does not exist"
        err.hint = hint_of(err.table, part.there, f"tables in {where}") or f"{where} has no table"
    return err


def missing_namespace(
    err: IcesqlError, connection: str, namespace: tuple[str, ...], open_catalog: CatalogOpener, secrets: P.SecretResolver
) -> IcesqlError:
    """A listing of ``connection.namespace`` that failed: "namespace ... does not exist" with
    what exists, when a level of it is missing (a catalog says "not found" in its own words,
    pyiceberg's SQL catalog even names the warehouse); else ``err`` as it is."""
    from icesql.engine.select.tables import in_catalog, missing_part

    where = ".".join((connection, *namespace))
    try:
        catalog, conn, aws = open_catalog(connection)
        part = in_catalog(conn, aws, secrets, f"list {where}", lambda: missing_part(catalog, namespace, ""))
    except Exception:
        return err
    if part is None or part.depth >= len(namespace):
        return err
    missing = ".".join((connection, *namespace[: part.depth + 1]))
    parent = ".".join((connection, *namespace[: part.depth]))
    hint = hint_of(namespace[part.depth], part.there, f"namespaces in {parent}") or f"{parent} has no namespace"
    return ExecutionError(f"namespace {missing} does not exist", err.span, hint, err.source, err.filename)


def check_tables(plan: P.SelectPlan, open_catalog: CatalogOpener, secrets: P.SecretResolver) -> None:
    """Before a query that starts Spark (it reads a source or view too): each connection table
    it reads exists, else a ``MissingTableError`` for ``missing_table`` (the engine would find
    out only once Spark runs). A catalog that does not answer leaves the table to the engine."""
    from icesql.engine.select.tables import MissingTableError, in_catalog

    for ref in plan.tables:
        ident = (*ref.namespace, ref.table)
        try:
            catalog, conn, aws = open_catalog(ref.connection)
            exists = in_catalog(conn, aws, secrets, f"look up table {ref.identifier}", partial(catalog.table_exists, ident))
        except Exception:
            continue
        if not exists:
            err = MissingTableError(
                f"table {ref.identifier} does not exist",
                connection=ref.connection,
                namespace=ref.namespace,
                table=ref.table,
                hint=f"SHOW TABLES IN {'.'.join((ref.connection, *ref.namespace))} lists the tables there",
            )
            err.table_ref = ref  # type: ignore[attr-defined]  # where the statement names it
            raise err  # made precise by the caller, as the engine's


def check_statement(plan: P.StatementPlan, stmt: A.Statement, names: Names, world: SparkWorld, *, queries: bool = True) -> None:
    """The offline checks of the statements that name relations: SELECT, EXPLAIN SELECT and
    CREATE VIEW (``queries``: their text is parsed by sqlglot, which ``Session.check`` leaves
    out), CREATE SINK and EXPLAIN CREATE SINK."""
    if isinstance(stmt, A.Explain):
        stmt = stmt.statement
    if isinstance(plan, P.SelectPlan | P.ExplainSelectPlan) and isinstance(stmt, A.Select):
        if queries:
            check_select(stmt, names, world)
    elif isinstance(plan, P.CreateObjectPlan | P.ExplainPlan) and isinstance(stmt, A.CreateSink):
        check_sink_from(stmt.relation, names, world)
    elif isinstance(plan, P.CreateObjectPlan) and isinstance(stmt, A.CreateView):
        if queries:
            check_view(stmt, names, world)


__all__ = [
    "SPARK_CATALOG",
    "CatalogOpener",
    "Names",
    "SparkWorld",
    "check_relation",
    "check_select",
    "check_sink_from",
    "check_statement",
    "check_tables",
    "check_view",
    "hint_of",
    "missing_namespace",
    "missing_table",
]
