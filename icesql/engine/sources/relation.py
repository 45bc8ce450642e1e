"""Streaming (or batch) DataFrames for the relations a sink reads.

``build_relation(spark, name, resolve)`` resolves ``name`` in the order the spec gives: an
icesql view or source (``resolve(name)`` returns its plan), then a table or temporary view of
the Spark session (so an embedding program can register its own DataFrame, streaming or
batch, and sink it).

Sources (the FILES relation itself is ``files.relation``; KAFKA's is ``kafka.relation``; what
they share - the record guard, the changelog columns, ON ERROR - is here)
-------
FILES json / csv
    ``spark.readStream`` with the declared schema plus a ``_corrupt_record`` column
    (``mode=PERMISSIVE``, ``columnNameOfCorruptRecord``), ``maxFilesPerTrigger`` when set.
    A Python stage on the executors (``mapInArrow``, no shuffle) checks every record: with
    ``ON ERROR = 'fail'`` a bad one fails the sink with ``BadRecordError`` naming the source,
    the file, the record ordinal and the field; with ``'skip'`` (on the source or on the sink)
    it is dropped, logged and counted (``Relation.skipped``, a Spark accumulator); with
    ``'dead-letter'`` it is described (raw text, file, position, error) and handed to the
    driver (``Relation.letters``, accumulators) for the sink's dead-letter table (``deadletter``).
FILES parquet
    Schema as declared, else inferred from the files already in the directory.
FILES debezium-json
    Debezium change events, one JSON object per line, ``{"before", "after", "op", "ts_ms",
    "source": {...}}`` optionally wrapped in ``{"payload": ...}`` (the Kafka Connect JSON
    converter with schemas enabled). The declared SCHEMA is the row's. Each event becomes one
    row with the columns of ``after`` (of ``before`` for ``op = 'd'``) plus the changelog
    columns:

    * ``__op``   — ``c`` (create), ``u`` (update), ``d`` (delete) or ``r`` (snapshot read);
    * ``__seq``  — ``coalesce(source.lsn, source.ts_ms, ts_ms)``: the database's own order;
    * ``__file`` — the file the event came from (``_metadata.file_path``);
    * ``__blk``  — the byte offset of the file split that held it (``_metadata.file_block_start``);
    * ``__line`` — the record's ordinal inside that split.

    **Position** (the deterministic changelog order): ``(__seq, __file, __blk, __line)``
    ascending, nulls first. Within one micro-batch the last change per key in that order wins;
    across micro-batches the later batch wins. Spark replays a batch with the same files, and a
    split is always read by one task from its start, so the position of an event never changes.
GENERATOR
    Synthetic rows shaped to the declared SCHEMA with values derived from a sequence number
    ``n`` (0, 1, 2, ...): the same ``n`` always gives the same row (``bigint`` → ``n``,
    ``string`` → ``'<column>-<n>'``, ``timestamp`` → 2024-01-01 + n seconds, ...). Unbounded:
    Spark's ``rate`` source at ``ROWS PER SECOND``; bounded (``total_rows`` set): a batch
    DataFrame over ``range(total_rows)`` that a sink runs as one job.
Views
    The view's sources and views are registered as temporary views under their names, then
    the view's Spark SQL runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from icesql.engine.base.changelog import INTERNAL_COLUMNS, OP
from icesql.engine.sources.guard import SumAccumulator, on_error_policy
from icesql.errors import ExecutionError
from icesql.plan import Column, OnError, SourceKind, SourcePlan, ViewPlan

log = logging.getLogger("icesql.sources")


Resolver = Callable[[str], "SourcePlan | ViewPlan | None"]
Binder = Callable[["SourcePlan", Any], Any]


@dataclass
class Relation:
    """What a sink reads: a DataFrame and how to interpret its columns."""

    name: str
    df: Any  # pyspark DataFrame
    changelog: bool = False  # carries __op and the position columns
    skipped: Any = None  # Spark accumulator of skipped bad records, when any
    letters: tuple[Any, ...] = ()  # accumulators of dead letters (ON ERROR = 'dead-letter')
    sources: tuple[str, ...] = ()  # icesql sources it reads (for messages)
    # the Arrow path (``ArrowSource``, ``kafka.arrow.KafkaArrowSource``): ``df`` holds pieces of work
    # (files' byte ranges, topics' offset ranges), not rows; its ``batch_writer`` writes a batch
    arrow: Any = None
    row_schema: Any = None  # the rows' schema when ``df`` does not hold rows (the Arrow path)
    binding: Any = None  # what the source was bound with (KAFKA: its connection's settings)

    @property
    def streaming(self) -> bool:
        return bool(self.df.isStreaming)

    @property
    def data_columns(self) -> list[str]:
        return [f.name for f in self.data_schema().fields]

    def data_schema(self) -> Any:
        from pyspark.sql.types import StructType

        if self.row_schema is not None:
            return self.row_schema
        return StructType([f for f in self.df.schema.fields if f.name not in INTERNAL_COLUMNS])

    def skipped_count(self) -> int:
        if self.skipped is None:
            return 0
        try:
            return int(self.skipped.value)
        except Exception:  # pragma: no cover - accumulators are driver-side only
            return 0


# --------------------------------------------------------------------------- resolution


def build_relation(
    spark: Any,
    name: str,
    resolve: Resolver,
    *,
    on_error: OnError | None = None,
    arrow: Any = None,
    bind: Binder | None = None,
) -> Relation:
    """The DataFrame a sink reading ``name`` consumes; a FILES source read directly by the sink
    takes the Arrow path when ``arrow`` binds it (views and Spark tables keep Spark's).
    ``bind(plan, binding)`` completes the binding of a source that needs its connection's
    credentials (KAFKA), for the source read directly and for those of a view."""
    plan = resolve(name)
    if isinstance(plan, SourcePlan):
        return source_relation(spark, plan, on_error=on_error, arrow=arrow, bind=bind)
    if isinstance(plan, ViewPlan):
        return view_relation(spark, plan, resolve, on_error=on_error, bind=bind)
    return spark_relation(spark, name)


def spark_relation(spark: Any, name: str) -> Relation:
    """A table or (temporary) view of the Spark session, streaming or batch."""
    try:
        df = spark.table(name)
    except Exception as e:
        raise ExecutionError(
            f"relation '{name}' is neither an icesql source or view nor a table or view of the Spark session",
            hint="CREATE SOURCE or CREATE VIEW it, or register it with DataFrame.createOrReplaceTempView",
        ) from e
    cols = {f.name for f in df.schema.fields}
    return Relation(name=name, df=df, changelog=OP in cols)


def view_relation(
    spark: Any,
    plan: ViewPlan,
    resolve: Resolver,
    *,
    on_error: OnError | None = None,
    bind: Binder | None = None,
    _seen: frozenset[str] = frozenset(),
) -> Relation:
    if plan.name in _seen:
        raise ExecutionError(f"view '{plan.name}' refers to itself")
    accs: list[Any] = []
    letters: list[Any] = []
    sources: list[str] = []
    for dep in plan.depends_on:
        dep_plan = resolve(dep)
        if isinstance(dep_plan, SourcePlan):
            rel = source_relation(spark, dep_plan, on_error=on_error, bind=bind)
        elif isinstance(dep_plan, ViewPlan):
            rel = view_relation(spark, dep_plan, resolve, on_error=on_error, bind=bind, _seen=_seen | {plan.name})
        else:
            continue  # a Spark table/view: the query resolves it itself
        rel.df.createOrReplaceTempView(quote_name(dep))
        if rel.skipped is not None:
            accs.append(rel.skipped)
        letters.extend(rel.letters)
        sources.extend(rel.sources)
    try:
        df = spark.sql(plan.query)
    except Exception as e:
        raise ExecutionError(f"view '{plan.name}' cannot be planned by Spark: {first_line(e)}") from e
    cols = {f.name for f in df.schema.fields}
    skipped = accs[0] if len(accs) == 1 else (SumAccumulator(accs) if accs else None)
    return Relation(
        name=plan.name,
        df=df,
        changelog=OP in cols,
        skipped=skipped,
        sources=tuple(sources),
        letters=tuple(letters),
    )


def quote_name(name: str) -> str:
    return name if name.replace("_", "").isalnum() else "`" + name.replace("`", "``") + "`"


def first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


# --------------------------------------------------------------------------- sources


def source_relation(
    spark: Any,
    plan: SourcePlan,
    *,
    on_error: OnError | None = None,
    arrow: Any = None,
    bind: Binder | None = None,
) -> Relation:
    """The relation of a source, by its kind (``RELATIONS``)."""
    make = RELATIONS.get(plan.source_kind)
    if make is None:  # pragma: no cover - the analyzer makes only the kinds listed
        raise ExecutionError(f"source '{plan.name}': unsupported kind {plan.source_kind}")
    return make(spark, plan, on_error, arrow, bind)


def _files_relation(spark: Any, plan: SourcePlan, on_error: OnError | None, arrow: Any) -> Relation:
    from icesql.engine.sources.files.relation import files_relation

    return files_relation(spark, plan, on_error=on_error, arrow=arrow)


def _kafka_relation(
    spark: Any, plan: SourcePlan, on_error: OnError | None, binding: Any, bind: Binder | None
) -> Relation:
    from icesql.engine.sources.kafka.relation import kafka_relation

    if bind is None:
        raise ExecutionError(f"source '{plan.name}': a KAFKA source needs its connection's settings")
    return kafka_relation(spark, plan, on_error_policy(plan, on_error), bind(plan, binding))


# the relation of each source kind: (spark, plan, on_error, binding from the sink, binder)
RELATIONS: dict[SourceKind, Callable[..., Relation]] = {
    SourceKind.GENERATOR: lambda spark, plan, on_error, arrow, bind: Relation(
        name=plan.name, df=generator_dataframe(spark, plan), sources=(plan.name,)
    ),
    SourceKind.FILES: lambda spark, plan, on_error, arrow, bind: _files_relation(spark, plan, on_error, arrow),
    SourceKind.KAFKA: _kafka_relation,
}


def declared_row_schema(spark: Any, plan: SourcePlan, timestamp_type: str | None = None) -> Any:
    """The rows' schema a source's SCHEMA declares (None: none declared). Without ``spark`` (a
    run without it) only what is built in Python, with the session's ``timestamp_type``."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    from icesql.engine.sources.ddl import struct_from_ddl

    if plan.schema:
        # built in Python where Spark's answer is certain (a JVM parse costs ~0.2 s of a sink's start)
        if spark is not None:
            timestamp_type = spark.conf.get("spark.sql.timestampType", "TIMESTAMP_LTZ")
        built = struct_from_ddl(plan.schema, timestamp_type or "TIMESTAMP_LTZ")
        if built is not None:
            return built
        if spark is None:
            from icesql.engine.sources.files.types import Unsupported

            raise Unsupported("its SCHEMA needs Spark's parser")
        try:
            st = _parse_datatype_string(plan.schema)
        except Exception as e:
            raise ExecutionError(f"source '{plan.name}': bad SCHEMA: {first_line(e)}") from e
        if not isinstance(st, StructType):
            raise ExecutionError(f"source '{plan.name}': SCHEMA must be a list of columns")
        return st
    return None


# --------------------------------------------------------------------------- bad records


# --------------------------------------------------------------------------- generator


def generator_expr(col: Column, seq: str = "value") -> str:
    t = col.type.strip().lower()
    q = "`" + col.name.replace("`", "``") + "`"
    n = f"CAST({seq} AS BIGINT)"
    lit_name = col.name.replace("'", "''")
    if t in ("bigint", "long"):
        e = n
    elif t in ("int", "integer"):
        e = f"CAST({n} % 2147483647 AS INT)"
    elif t in ("smallint", "short"):
        e = f"CAST({n} % 32767 AS SMALLINT)"
    elif t in ("tinyint", "byte"):
        e = f"CAST({n} % 127 AS TINYINT)"
    elif t == "boolean":
        e = f"({n} % 2 = 0)"
    elif t in ("double", "float", "real"):
        e = f"CAST({n} * 0.5 AS {t.upper()})"
    elif t.startswith("decimal"):
        e = f"CAST({n} % 1000 AS {t.upper()})"
    elif t == "string" or t.startswith("varchar") or t.startswith("char"):
        e = f"concat('{lit_name}-', CAST({n} AS STRING))"
    elif t == "binary":
        e = f"CAST(concat('{lit_name}-', CAST({n} AS STRING)) AS BINARY)"
    elif t == "date":
        e = f"date_add(DATE'2024-01-01', CAST({n} % 3650 AS INT))"
    elif t == "timestamp":
        e = f"timestamp_seconds(1704067200 + {n})"
    elif t == "timestamp_ntz":
        e = f"CAST(timestamp_seconds(1704067200 + {n}) AS TIMESTAMP_NTZ)"
    else:
        e = f"CAST(NULL AS {col.type})"
    return f"{e} AS {q}"


def generator_dataframe(spark: Any, plan: SourcePlan) -> Any:
    columns = plan.columns
    if not columns and plan.schema:
        st = declared_row_schema(spark, plan)
        columns = tuple(Column(f.name, f.dataType.simpleString(), f.nullable) for f in st.fields)
    if not columns:
        columns = (Column("value", "bigint"),)
    exprs = [generator_expr(c, "id" if plan.total_rows is not None else "value") for c in columns]
    if plan.total_rows is not None:
        base = spark.range(int(plan.total_rows))
    else:
        base = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", str(plan.rows_per_second or 1))
            .options(**dict(plan.options))
            .load()
        )
    return base.selectExpr(*exprs)


def columns_of(df: Any) -> tuple[Column, ...]:
    """The data columns of a DataFrame as plan ``Column``s (internal columns left out)."""
    return tuple(
        Column(f.name, f.dataType.simpleString(), bool(f.nullable))
        for f in df.schema.fields
        if f.name not in INTERNAL_COLUMNS
    )
