"""SELECT: a bounded query run as a batch over sources, views and Iceberg tables.

Each icesql relation the query names is registered as a batch temporary view: a FILES source
reads the files that are there now (Spark's batch reader of the same format and schema), a
GENERATOR yields its first rows (``spark.range`` with the expressions of its streaming form, so
the rows are the ones a sink would read first), a view is its query over its dependencies,
registered the same way. Each Iceberg table (``plan.tables``) is read on the driver with every
delete applied (``table_reader``) and handed to Spark as a DataFrame under its alias. Spark runs
the query; the rows come back to the driver (``LIMIT`` the plan's default when the query has
none).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from icesql.errors import AnalysisError, ExecutionError
from icesql.plan import SelectPlan, SourceKind, SourcePlan, ViewPlan

# A generator without ROWS previews at least this many of its first rows.
GENERATOR_PREVIEW_ROWS = 1000

Resolver = Callable[[str], "SourcePlan | ViewPlan | None"]


@dataclass(frozen=True)
class QueryRows:
    columns: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]


class _SparkPlace:
    """Where Spark points: ``position`` is the offset in the SQL Spark read (when known), over
    ``length`` characters."""

    def __init__(self, message: str, hint: str | None = None, position: int | None = None, length: int = 1) -> None:
        super().__init__(message, hint=hint)  # type: ignore[call-arg]  # the IcesqlError beside it
        self.position = position
        self.length = length


class QueryError(_SparkPlace, ExecutionError):
    """Spark failed running the query."""


class QueryAnalysisError(_SparkPlace, AnalysisError):
    """Spark refused the query's text (a column or relation that does not exist, a syntax
    error): an SQL error, as the analyzer's are (exit code 1)."""


def batch_source(spark: Any, plan: SourcePlan, rows: int, bind: Any = None) -> Any:
    """A source's rows as a batch DataFrame (data columns only). A KAFKA source is read from its
    START OFFSET / START TIMESTAMP to the log end as it is now, at most ``rows`` records per
    partition when ``rows``; ``bind(plan, None)`` gives its connection's settings."""
    from icesql.engine.base.changelog import INTERNAL_COLUMNS, OP
    from icesql.engine.sources.files.relation import spark_files_dataframe
    from icesql.engine.sources.generator import generator_dataframe
    from icesql.engine.sources.guard import on_error_policy

    if plan.source_kind is SourceKind.GENERATOR:
        if plan.total_rows is not None:
            return generator_dataframe(spark, plan)
        from icesql.engine.sources.generator import generator_expr
        from icesql.engine.sources.relation import declared_row_schema
        from icesql.plan import Column

        columns = plan.columns
        if not columns and plan.schema:
            st = declared_row_schema(spark, plan)
            columns = tuple(Column(f.name, f.dataType.simpleString(), f.nullable) for f in st.fields)
        columns = columns or (Column("value", "bigint"),)
        # the rate source numbers its rows 0, 1, ... in ``value``: the same first rows
        return spark.range(max(rows, GENERATOR_PREVIEW_ROWS)).selectExpr(*[generator_expr(c, "id") for c in columns])
    if plan.source_kind is SourceKind.KAFKA:
        from icesql.engine.sources.kafka.relation import kafka_relation

        if bind is None:
            raise ExecutionError(f"source '{plan.name}': a KAFKA source needs its connection's settings")
        from icesql.engine.backends.base import backend_of

        backend = backend_of(spark, None)
        rel = kafka_relation(backend, plan, on_error_policy(plan, None), bind(plan, None), streaming=False, limit=rows)
        return rel.df.drop(*[c for c in rel.df.columns if c in INTERNAL_COLUMNS and c != OP])
    if not plan.path:
        raise ExecutionError(f"source '{plan.name}' has no path")
    through = plan.aws_connection or plan.storage_connection
    if through:
        raise ExecutionError(
            f"source '{plan.name}' reads {plan.path} through connection {through}: SELECT cannot preview it yet",
            hint="a sink reads it; SELECT from the sink's table",
        )
    df, _ = spark_files_dataframe(spark, plan, on_error_policy(plan, None), None, streaming=False)
    # a change feed (debezium-json) keeps its operation (``__op``: c, u, d, r), as a view over it sees it
    return df.drop(*[c for c in df.columns if c in INTERNAL_COLUMNS and c != OP])


def register_relations(
    spark: Any, names: tuple[str, ...], resolve: Resolver, rows: int, _seen: frozenset[str] = frozenset(), bind: Any = None
) -> None:
    from icesql.engine.sources.relation import quote_name

    for name in names:
        plan = resolve(name)
        if isinstance(plan, SourcePlan):
            df = batch_source(spark, plan, rows, bind)
        elif isinstance(plan, ViewPlan):
            if name in _seen:
                raise ExecutionError(f"view '{name}' refers to itself")
            register_relations(spark, plan.depends_on, resolve, rows, _seen | {name}, bind)
            df = _sql(spark, plan.query, f"view '{name}'")
        else:
            continue
        df.createOrReplaceTempView(quote_name(name))


def _sql(spark: Any, text: str, what: str | None = None) -> Any:
    import logging

    # PySpark logs every failed query's JVM stack trace at ERROR; icesql reports it in one line
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    try:
        return spark.sql(text)
    except Exception as e:
        raise spark_error(e, what) from None


def run_select(
    spark: Any, plan: SelectPlan, resolve: Resolver, read_table: Callable[[Any], Any], bind: Any = None
) -> QueryRows:
    """Run ``plan``; ``read_table(ref)`` gives the Arrow rows of a ``TableRef``; ``bind`` completes
    a KAFKA source's binding (``Engine.kafka_binding``)."""
    rows = plan.limit or _explicit_limit(plan.sql) or 0
    register_relations(spark, plan.relations, resolve, rows, bind=bind)
    for ref in plan.tables:
        arrow = read_table(ref)
        spark.createDataFrame(arrow).createOrReplaceTempView(ref.alias)
    df = _sql(spark, plan.sql)
    if plan.limit is not None:
        df = df.limit(plan.limit)
    try:
        collected = _collect(spark, df)
    except Exception as e:
        raise spark_error(e) from None
    return QueryRows(tuple(df.columns), tuple(tuple(r) for r in collected))


def _collect(spark: Any, df: Any) -> list[Any]:
    """``df.collect()`` as a job group of its own, so that Ctrl-C cancels this query's jobs only.

    The query runs in a thread (local properties such as the job group are per thread) while
    this one waits: a ``KeyboardInterrupt`` here cancels the group and is raised again once the
    query has stopped. PySpark's own SIGINT handler would cancel every job of the context, a
    running sink's too, so while the query runs Ctrl-C only raises ``KeyboardInterrupt``."""
    import signal
    import threading
    import uuid

    try:
        sc = spark.sparkContext
    except Exception:  # Spark Connect: no SparkContext; Ctrl-C is the client's
        return list(df.collect())
    group = f"icesql-select-{uuid.uuid4().hex}"
    out: dict[str, Any] = {}

    def work() -> None:
        try:
            sc.setJobGroup(group, "icesql SELECT", interruptOnCancel=True)
            out["rows"] = list(df.collect())
        except BaseException as e:
            out["error"] = e

    worker = threading.Thread(target=work, name="icesql-select", daemon=True)
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        worker.start()
        try:
            while worker.is_alive():
                worker.join(0.2)
        except KeyboardInterrupt:
            sc.cancelJobGroup(group)
            worker.join(60)
            raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if "error" in out:
        raise out["error"]
    return list(out["rows"])


def _explicit_limit(sql: str) -> int | None:
    m = re.search(r"\blimit\s+([0-9]+)\s*$", sql, re.IGNORECASE)
    return int(m.group(1)) if m else None


def spark_error(e: BaseException, what: str | None = None) -> QueryError | QueryAnalysisError:
    """One line for a Spark failure: what Spark's error class says, where it points."""
    cls = _call(e, "getCondition") or _call(e, "getErrorClass") or ""
    params = _call(e, "getMessageParameters") or {}
    position: int | None = None
    length = 1
    for ctx in _call(e, "getQueryContext") or []:
        try:
            position, stop = int(ctx.startIndex()), int(ctx.stopIndex())
            length = max(1, stop - position + 1)
            break
        except Exception:
            continue
    prefix = f"{what}: " if what else ""
    if what:  # a position in a view's own query, not in the statement's
        position = None
    if cls.startswith("UNRESOLVED_COLUMN"):
        name = str(params.get("objectName", "?"))
        proposal = params.get("proposal")
        hint = f"columns there: {proposal}" if proposal else None
        return QueryAnalysisError(f"{prefix}column {name} does not exist", hint, position, length)
    if cls.startswith("TABLE_OR_VIEW_NOT_FOUND"):
        name = str(params.get("relationName", "?"))
        return QueryAnalysisError(
            f"{prefix}relation {name} does not exist",
            "SHOW SOURCES and SHOW VIEWS list icesql's; an Iceberg table is named connection.namespace.table",
            position,
            length,
        )
    text = str(e).strip().splitlines()
    first = text[0] if text else type(e).__name__
    first = re.sub(r"\s*SQLSTATE: \w+.*$", "", first)
    from pyspark.errors import AnalysisException

    if isinstance(e, AnalysisException):  # ParseException is one too
        if position is None:
            m = re.search(r"line 1 pos (\d+)", str(e)) or re.search(r"\(line 1, pos (\d+)\)", str(e))
            position = int(m.group(1)) if m else None
        return QueryAnalysisError(f"{prefix}{first}", None, position, length)
    return QueryError(f"{prefix}{first}", None, position, length)


def _call(e: BaseException, method: str) -> Any:
    fn = getattr(e, method, None)
    if fn is None:
        return None
    try:
        return fn()
    except Exception:
        return None


__all__ = ["GENERATOR_PREVIEW_ROWS", "QueryAnalysisError", "QueryError", "QueryRows", "batch_source", "run_select", "spark_error"]
