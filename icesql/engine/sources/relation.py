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

from icesql.engine.base.changelog import INTERNAL_COLUMNS
from icesql.errors import ExecutionError
from icesql.plan import Column, SourcePlan, ViewPlan

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


def quote_name(name: str) -> str:
    return name if name.replace("_", "").isalnum() else "`" + name.replace("`", "``") + "`"


def first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


# --------------------------------------------------------------------------- sources


def declared_row_schema(spark: Any, plan: SourcePlan) -> Any:
    """The rows' schema a source's SCHEMA declares, as ``spark`` reads it (None: none declared)."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    from icesql.engine.sources.ddl import struct_from_ddl

    if plan.schema:
        # built in Python where Spark's answer is certain (a JVM parse costs ~0.2 s of a sink's start)
        built = struct_from_ddl(plan.schema, spark.conf.get("spark.sql.timestampType", "TIMESTAMP_LTZ"))
        if built is not None:
            return built
        try:
            st = _parse_datatype_string(plan.schema)
        except Exception as e:
            raise ExecutionError(f"source '{plan.name}': bad SCHEMA: {first_line(e)}") from e
        if not isinstance(st, StructType):
            raise ExecutionError(f"source '{plan.name}': SCHEMA must be a list of columns")
        return st
    return None


def message_schema(*, binary: bool = False) -> Any:
    """The Spark schema of a source whose events carry their schemas (debezium-json without
    SCHEMA): each message's key and value as text (``decode.MESSAGE_COLUMNS``); ``binary``: as
    bytes (a registry source with a schema per topic: the records' framed Avro)."""
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    from icesql.engine.sources.decode import MESSAGE_COLUMNS

    kind = BinaryType() if binary else StringType()
    return StructType([StructField(n, kind) for n in MESSAGE_COLUMNS])


def row_schema_on(backend: Any, plan: SourcePlan) -> Any:
    """``declared_row_schema`` on a ``backends.base.Backend``: built in Python with the session's
    timestamp type where that is certain, else by Spark's parser (``Backend.spark_for``)."""
    from icesql.engine.sources.ddl import struct_from_ddl

    if not plan.schema:
        return None
    built = struct_from_ddl(plan.schema, backend.timestamp_type)
    if built is not None:
        return built
    return declared_row_schema(
        backend.spark_for(f"source '{plan.name}': its SCHEMA needs Spark's parser"), plan
    )


# --------------------------------------------------------------------------- bad records


# --------------------------------------------------------------------------- generator


def columns_of(df: Any) -> tuple[Column, ...]:
    """The data columns of a DataFrame as plan ``Column``s (internal columns left out)."""
    return tuple(
        Column(f.name, f.dataType.simpleString(), bool(f.nullable))
        for f in df.schema.fields
        if f.name not in INTERNAL_COLUMNS
    )
