"""SELECT, EXPLAIN SELECT and the statements that read a connection's Iceberg tables (SHOW
TABLES, DESCRIBE conn.ns.table, SHOW SNAPSHOTS): the engine answers, errors point at the table's
name in the statement, and a missing table says what exists (``icesql.sessions.names``). Each
``apply_*`` is the ``APPLY`` entry of its plan (``icesql.sessions.dispatch``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from icesql import plan as P
from icesql import results as R
from icesql.errors import CatalogError, IcesqlError, Span
from icesql.results import Result
from icesql.sessions.names import check_tables, missing_namespace, missing_table
from icesql.syntax import ast as A

if TYPE_CHECKING:
    from icesql.session import Session


def apply_select(session: Session, plan: P.SelectPlan, stmt: A.Statement, checked: bool) -> Result:
    from icesql.analyzer.queries import query_span
    from icesql.engine.select.spark import QueryAnalysisError, QueryError

    assert isinstance(stmt, A.Select)
    storage = StorageOf(session)
    # source offsets -> offsets in the query text (``plan.base`` is where that text starts)
    try:
        if plan.relations and plan.tables:  # Spark will run it: its tables are checked first
            check_tables(plan, storage.open_catalog, session.secret_value)
        out = session.engine.select(plan, storage)
    except (QueryError, QueryAnalysisError) as err:
        if err.position is not None and err.span is None:
            start = plan.source_offset(err.position) - plan.base
            err.span = query_span(stmt, start, start + err.length)
        raise
    except IcesqlError as err:
        raise table_error(session, err, plan, stmt) from None
    return R.query_rows(out.columns, out.rows, plan.limit)


def apply_explain_select(session: Session, plan: P.ExplainSelectPlan, stmt: A.Statement, checked: bool) -> Result:
    assert isinstance(stmt, A.Explain) and isinstance(stmt.statement, A.Select)
    select = plan.select
    try:
        decision = session.engine.route_select(select, StorageOf(session))
    except IcesqlError as err:
        raise table_error(session, err, select, stmt.statement) from None
    return R.explain_select(select, decision)


def table_error(session: Session, err: IcesqlError, plan: P.SelectPlan, stmt: A.Select) -> IcesqlError:
    """A connection table's error pointing at the name, a missing one saying what exists."""
    from icesql.analyzer.queries import query_span
    from icesql.engine.select.tables import MissingTableError

    if isinstance(err, MissingTableError):
        err = missing_table(err, StorageOf(session).open_catalog, session.secret_value)
    ref = getattr(err, "table_ref", None)
    if ref is not None and err.span is None:
        err.span = query_span(stmt, ref.start - plan.base, ref.end - plan.base)
    return err


class StorageOf:
    """``storage(connection)``: the storage connections a connection's table files are read
    with: the ``USING AWS | GCS | AZURE CONNECTION`` of a sink writing through it (a catalog
    that vends no storage credentials needs it, as the sink did), else none (the catalog's own)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def __call__(self, connection: str) -> tuple[str | None, ...]:
        for obj in self._session.store.list_objects("sink"):
            sink = P.plan_from_dict(obj.definition)
            if isinstance(sink, P.SinkPlan) and sink.catalog_connection == connection:
                if sink.aws_connection or sink.storage_connection:
                    return (sink.aws_connection, sink.storage_connection)
        return ()

    def open_catalog(self, connection: str) -> tuple[Any, P.CatalogConnectionPlan, P.AwsConnectionPlan | None]:
        """(live catalog, connection plan, its AWS connection), read with these storage connections."""
        found: tuple[Any, P.CatalogConnectionPlan, P.AwsConnectionPlan | None]
        found = self._session.engine.connection_catalog(connection, self(connection))
        return found


def apply_show_tables(session: Session, plan: P.ShowTablesPlan, stmt: A.Statement, checked: bool) -> Result:
    where = ".".join((plan.connection, *plan.namespace))
    try:
        found = tables(session, plan.connection, plan.namespace)
    except IcesqlError as err:
        if not plan.namespace:
            raise
        if isinstance(stmt, A.ShowTables) and stmt.namespace[0].span and stmt.namespace[-1].span:
            first, last = stmt.namespace[0].span, stmt.namespace[-1].span
            err.span = Span(first.start, last.end, first.line, first.column, last.end_line, last.end_column)
        opener = StorageOf(session).open_catalog
        raise missing_namespace(err, plan.connection, tuple(plan.namespace), opener, session.secret_value) from None
    return R.show_tables(where, found)


def tables(session: Session, connection: str, namespace: Sequence[str] = ()) -> list[tuple[str, ...]]:
    """The tables (namespace parts + name) of an ICEBERG CATALOG connection, in
    ``namespace`` or in every top-level namespace."""
    from icesql.engine.select.tables import in_catalog

    catalog, conn, aws = StorageOf(session).open_catalog(connection)

    def listing() -> list[tuple[str, ...]]:
        namespaces = [tuple(namespace)] if namespace else catalog.list_namespaces()
        return [tuple(t) for ns in namespaces for t in catalog.list_tables(tuple(ns))]

    where = ".".join((connection, *namespace))
    found: list[tuple[str, ...]] = in_catalog(conn, aws, session.secret_value, f"list tables in {where}", listing)
    return found


def apply_describe_table(session: Session, plan: P.DescribeTablePlan, stmt: A.Statement, checked: bool) -> Result:
    from icesql.engine.select.tables import MissingTableError

    storage = StorageOf(session)
    try:
        table = session.engine.load_table(plan.connection, plan.namespace, plan.table, storage(plan.connection))
    except MissingTableError as err:
        err.span = err.span or stmt.span
        if isinstance(stmt, A.DescribeTable) and stmt.name.span is not None:
            err.span = stmt.name.span
        raise missing_table(err, storage.open_catalog, session.secret_value) from None
    return R.describe_table(".".join((plan.connection, *plan.namespace, plan.table)), table)


def apply_show_snapshots(session: Session, plan: P.ShowSnapshotsPlan, stmt: A.Statement, checked: bool) -> Result:
    obj = session.store.get_object("sink", plan.sink)
    if obj is None:
        raise CatalogError(f"sink {plan.sink!r} does not exist", stmt.span)
    sink = P.plan_from_dict(obj.definition)
    assert isinstance(sink, P.SinkPlan)
    table = session.engine.load_table(
        sink.catalog_connection, sink.namespace, sink.table, (sink.aws_connection, sink.storage_connection)
    )
    return R.show_snapshots(plan.sink, table.snapshots(), obj.object_id)


__all__ = [
    "StorageOf",
    "apply_describe_table",
    "apply_explain_select",
    "apply_select",
    "apply_show_snapshots",
    "apply_show_tables",
    "table_error",
    "tables",
]
