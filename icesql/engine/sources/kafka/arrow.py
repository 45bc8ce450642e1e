"""The Arrow path of a KAFKA source: executors read offset ranges and decode them with Arrow,
then write through the same writer as FILES sources - no record crosses into the JVM.

A sink reading a Kafka source directly gets a streaming DataFrame of offset ranges (``pieces``:
topic, partition, start, end; the ``icesql_kafka`` source in ``mode=pieces``); each task reads its
ranges with confluent-kafka (``source.read_range``), turns the records into the relation's rows
(``decode``: values by FORMAT with the FILES source's Spark-exact JSON reader, the key by KEY
FORMAT, the INCLUDE columns), and - for appends - writes them with ``writer.DataFileWriter`` in the
same task (``WriteTask``). Upserts and changelogs (``ENVELOPE UPSERT``, ``debezium-json`` values:
the same Debezium reader as a FILES source's, ``files.decode.debezium_events``) decode in the
tasks (``DecodeTask``) and reduce per KEY in the batch writer, as every changelog does
(``batch.BatchWriter``; in this process for a run without Spark, ``batch.write_batch``).

Exactly Spark's answer, or Spark's: whatever Arrow cannot read exactly as ``from_json`` would (a
malformed value, a spelling whose conversion is not known to match, a blank value) raises
``files.types.Fallback``; the task fails with a marked error naming its range, and the batch runs
again with that range read by the records path (``relation.decode_records``: Spark's parsers and
the bad-record guard, so ON ERROR applies). Formats the Arrow path does not decode at all
(``csv``, a map or binary column) take the records path for the whole source.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from icesql.engine.base.changelog import BLK, FILE, LINE, OP, SEQ
from icesql.engine.base.hooks import kill_point
from icesql.engine.base.wire import FALLBACK, file_row, files_batch, files_spark_schema, releases_task_memory
from icesql.engine.sink.batch import with_fallbacks, write_batch
from icesql.plan import KafkaEnvelope, KafkaMetadata, OnError, SourceFormat, SourcePlan

FALLBACK_MARKER = "ICESQL-KAFKA-FALLBACK:"
ARROW_FORMATS = (SourceFormat.JSON, SourceFormat.DEBEZIUM_JSON, SourceFormat.TEXT, SourceFormat.BYTES)
# formats whose values are JSON objects read by the SCHEMA (without an envelope a null value, a
# tombstone, carries no row)
JSON_VALUES = (SourceFormat.JSON, SourceFormat.DEBEZIUM_JSON)


@dataclass(frozen=True)
class KafkaArrowSource:
    """A Kafka source read on the Arrow path (picklable: it travels to the executors; ``conf``
    holds the connection's secrets, as a FILES source's FileIO properties do - never logged)."""

    plan: SourcePlan
    conf: Mapping[str, str] = field(repr=False)
    row_schema_json: Mapping[str, Any] = field(default_factory=dict)  # the relation's data columns
    value_schema_json: Mapping[str, Any] | None = None  # SCHEMA of a json value
    key_schema_json: Mapping[str, Any] | None = None  # KEY SCHEMA of a json key
    policy: OnError = OnError.FAIL
    session_tz: str = "UTC"
    lost: Any = None  # ON DATA LOSS = 'continue': a Spark accumulator the lost records are added to

    def on_lost(self, topic: str, partition: int, first: int, end: int) -> None:
        from icesql.engine.sources.kafka.source import log_lost

        log_lost(topic, partition, first, end)
        if self.lost is not None:
            self.lost.add(end - first)  # offsets: records, and any transaction markers among them

    @property
    def changelog(self) -> bool:
        spec = self.plan.kafka
        upsert = spec is not None and spec.envelope is KafkaEnvelope.UPSERT
        return upsert or self.plan.format is SourceFormat.DEBEZIUM_JSON

    def batch_writer(self, inner: Any, *, skipped: Any = None, letters: Any = None) -> Any:
        return KafkaBatchWriter(inner, self, skipped=skipped, letters=letters)

    def _json_format(self, schema_json: Mapping[str, Any]) -> Any:
        from icesql.engine.sources.files.decode import SourceFormat as ArrowFormat

        return ArrowFormat(format="json", row_schema_json=schema_json, session_tz=self.session_tz)

    def check_supported(self) -> None:
        """Raises ``files.types.Unsupported`` when the records path must read the source."""
        from icesql.engine.sources.files.types import Unsupported

        spec = self.plan.kafka
        assert spec is not None
        if self.plan.format not in ARROW_FORMATS:
            raise Unsupported(f"FORMAT = '{(self.plan.format or SourceFormat.JSON).value}'")
        if self.value_schema_json is not None:
            self._json_format(self.value_schema_json).check_supported()
        if self.key_schema_json is not None:
            self._json_format(self.key_schema_json).check_supported()

    # ------------------------------------------------------------------ decoding

    def decode(self, records: Any) -> Any:
        """Kafka records (``source.RECORD_SCHEMA`` as Arrow) -> the relation's rows, plus the
        changelog columns for ENVELOPE UPSERT and Debezium. Raises ``Fallback`` where Arrow is
        not sure."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from icesql.engine.sources.files.decode import changelog_batch, debezium_events
        from icesql.engine.sources.files.types import Fallback, arrow_schema

        spec = self.plan.kafka
        assert spec is not None
        fmt = self.plan.format or SourceFormat.JSON
        upsert = spec.envelope is KafkaEnvelope.UPSERT
        value = records.column("value")
        tomb = pc.is_null(value)
        if not upsert and fmt in JSON_VALUES and pc.any(tomb).as_py():
            records = records.filter(pc.invert(tomb))  # a tombstone carries no row
            value, tomb = records.column("value"), pc.is_null(records.column("value"))
        n = records.num_rows
        cols: dict[str, Any] = {}
        op = seq = None
        if upsert:
            key = self._key(records.column("key"))
            if spec.key_format is SourceFormat.JSON:
                for c in spec.key_columns:
                    cols[c.name] = pc.struct_field(key, c.name)
            else:
                cols[spec.key_columns[0].name if spec.key_columns else "key"] = key
            op, seq = pc.if_else(tomb, pa.scalar("d"), pa.scalar("u")), pa.nulls(n, pa.int64())
        if fmt is SourceFormat.TEXT:
            cols["value"] = _utf8(value)
        elif fmt is SourceFormat.BYTES:
            cols["value"] = value
        else:
            assert self.value_schema_json is not None
            source = self._json_format(self.value_schema_json)
            if fmt is SourceFormat.DEBEZIUM_JSON:
                parsed, op, seq = debezium_events(_one_per_line(value), source)
                if parsed.num_rows != n:
                    raise Fallback("values that are not one JSON object each")
            else:
                parsed = _json_rows(value, source, allow_null=upsert)
            for name in parsed.schema.names:
                cols[name] = parsed.column(name)
        for inc in spec.include:
            cols[inc.name] = {
                KafkaMetadata.KEY: lambda: self._key(records.column("key")),
                KafkaMetadata.PARTITION: lambda: records.column("partition"),
                KafkaMetadata.OFFSET: lambda: records.column("offset"),
                KafkaMetadata.TIMESTAMP: lambda: records.column("timestamp"),
                KafkaMetadata.HEADERS: lambda: records.column("headers"),
            }[inc.what]()
        schema = arrow_schema(self.row_schema_json)
        arrays = []
        for f in schema:
            col = cols[f.name]
            arrays.append(col if col.type == f.type else col.cast(f.type))
        rows = pa.RecordBatch.from_arrays(arrays, schema=schema)
        if op is None or seq is None:
            return rows
        # a change's position: (topic, partition, offset), so a batch's last change per key is
        # the one the topic holds last
        position = {
            FILE: records.column("topic"),
            BLK: records.column("partition").cast(pa.int64()),
            LINE: records.column("offset"),
        }
        return changelog_batch(rows, op, seq, position)

    def _key(self, key: Any) -> Any:
        spec = self.plan.kafka
        assert spec is not None
        if spec.key_format is SourceFormat.BYTES:
            return key
        if spec.key_format is SourceFormat.JSON:
            import pyarrow as pa

            assert self.key_schema_json is not None
            rows = _json_rows(key, self._json_format(self.key_schema_json), allow_null=True)
            return pa.StructArray.from_arrays(rows.columns, fields=list(rows.schema), mask=key.is_null())
        return _utf8(key)


def _utf8(values: Any) -> Any:
    import pyarrow as pa

    from icesql.engine.sources.files.types import Fallback

    try:
        return values.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise Fallback("a value that is not UTF-8 text") from None


def _one_per_line(values: Any) -> bytes:
    """Non-null values as lines of one text (JSON allows a raw line break only between tokens,
    where a space means the same: one value, one line); a blank value raises ``Fallback``."""
    from icesql.engine.sources.files.types import Fallback

    lines = [v.replace(b"\r", b" ").replace(b"\n", b" ") for v in values.to_pylist()]
    if any(not line.strip() for line in lines):
        raise Fallback("a blank value")
    return b"\n".join(lines) + b"\n" if lines else b""


def _json_rows(values: Any, fmt: Any, *, allow_null: bool) -> Any:
    """One row per value, by Spark's rules (``files.decode``'s JSON reader over the values as
    lines; a null value is a row of nulls where ``allow_null``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from icesql.engine.sources.files.decode import _json
    from icesql.engine.sources.files.types import Fallback

    present = pc.is_valid(values)
    texts = values.filter(present) if values.null_count else values
    batch = _json(_one_per_line(texts), fmt)
    if batch.num_rows != len(texts):
        raise Fallback("values that are not one JSON object each")
    if not values.null_count:
        return batch
    if not allow_null:
        raise Fallback("a null value")
    # put the rows back in place, with nulls where a value was null
    idx = pc.cumulative_sum(present.cast(pa.int64()))
    take = pc.if_else(present, pc.subtract(idx, 1), pa.scalar(None, pa.int64()))
    return pa.RecordBatch.from_arrays([c.take(take) for c in batch.columns], schema=batch.schema)


# --------------------------------------------------------------------------- tasks


def ranges_of(batches: Iterator[Any]) -> Iterator[tuple[str, int, int, int]]:
    for b in batches:
        for r in b.to_pylist():
            yield r["topic"], int(r["partition"]), int(r["start"]), int(r["end"])


def _fallback(topic: str, partition: int, start: int, end: int, why: str) -> ValueError:
    body = json.dumps({"partition": partition, "start": start, "end": end, "why": why[:300]})
    return ValueError(f"{FALLBACK_MARKER}{body}|END")


def fallback_of(exc: BaseException) -> tuple[int, int, int] | None:
    """The range a failed Arrow task could not decode (None: another failure)."""
    from icesql.engine.base.wire import marked_message

    body = marked_message(exc, FALLBACK_MARKER)
    if body is None:
        return None
    try:
        d = json.loads(body)
        return int(d["partition"]), int(d["start"]), int(d["end"])
    except (ValueError, KeyError):
        return None


def _decoded(source: KafkaArrowSource, topic: str, p: int, s: int, e: int) -> Iterator[Any]:
    from icesql.engine.sources.files.types import Fallback
    from icesql.engine.sources.kafka.source import read_range

    spec = source.plan.kafka
    on_lost = source.on_lost if spec is not None and spec.on_data_loss == "continue" else None
    for records in read_range(source.conf, topic, p, s, e, on_lost=on_lost):
        try:
            yield source.decode(records)
        except Fallback as err:
            raise _fallback(topic, p, s, e, str(err)) from None


class DecodeTask:
    """``mapInArrow`` body: ranges in, the relation's rows (and changelog columns) out."""

    def __init__(self, source: KafkaArrowSource) -> None:
        self.source = source

    @releases_task_memory
    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        for topic, p, s, e in ranges_of(batches):
            yield from _decoded(self.source, topic, p, s, e)


class WriteTask:
    """``mapInArrow`` body: ranges in, one row per written data file out."""

    def __init__(self, source: KafkaArrowSource, spec: Any, batch_id: int) -> None:
        self.source = source
        self.spec = spec
        self.batch_id = batch_id

    @releases_task_memory
    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        from icesql.engine.iceberg.writer import DataFileWriter

        writer = DataFileWriter(self.spec, "data")
        first = True
        try:
            for topic, p, s, e in ranges_of(batches):
                for rows in _decoded(self.source, topic, p, s, e):
                    if rows.num_rows:
                        writer.write(rows)
                        if first:
                            first = False
                            kill_point("write", self.batch_id)
            files = writer.close()
        except BaseException:
            writer.abort()
            raise
        if files:
            yield files_batch([file_row(f) for f in files])


class KafkaBatchWriter:
    """One micro-batch of offset ranges -> files (picklable): appends write in the tasks that
    read (``WriteTask``); changelogs and upserts decode there (``DecodeTask``) and reduce per KEY
    in ``batch.BatchWriter``. A range Arrow cannot decode exactly goes to the records path."""

    def __init__(self, inner: Any, source: KafkaArrowSource, *, skipped: Any = None, letters: Any = None) -> None:
        self.inner = inner
        self.arrow = source
        self.skipped = skipped
        self.letters = letters

    def use_io(self, io_properties: Any) -> None:
        self.inner.use_io(io_properties)

    def __call__(self, batch_df: Any, batch_id: int) -> list[dict[str, Any]]:
        from pyspark.sql import functions as F

        def attempt(fallback: list[tuple[int, int, int]]) -> list[dict[str, Any]]:
            pieces = batch_df
            for p, start, _ in fallback:
                pieces = pieces.filter(~((F.col("partition") == p) & (F.col("start") == start)))
            if self.arrow.changelog or self.inner.upsert:
                changes = pieces.mapInArrow(DecodeTask(self.arrow), self._schema())
                if fallback:
                    changes = changes.unionByName(self._records(batch_df, fallback))
                return write_batch(self.inner, changes, batch_id)
            task = WriteTask(self.arrow, self.inner.spec, batch_id)
            rows = [r.asDict() for r in pieces.mapInArrow(task, files_spark_schema()).collect()]
            if fallback:
                rows += self.inner(self._records(batch_df, fallback), batch_id)
            return rows

        rows, fallback = with_fallbacks(attempt, fallback_of)
        if fallback:
            rows.append({"content": FALLBACK, "file": "", "rows": len(fallback), "bytes": 0})
        return rows

    def _schema(self) -> Any:
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        row = StructType.fromJson(dict(self.arrow.row_schema_json))
        if not self.arrow.changelog:
            return row
        extra = [(OP, StringType()), (SEQ, LongType()), (FILE, StringType()), (BLK, LongType()), (LINE, LongType())]
        return StructType([*row.fields, *(StructField(n, t) for n, t in extra)])

    def _records(self, pieces: Any, ranges: list[tuple[int, int, int]]) -> Any:
        """The ranges Arrow could not decode, read by the records path (Spark's parsers, the
        bad-record guard and ON ERROR)."""
        from icesql.engine.connections.kafka import SECRET_KEYS
        from icesql.engine.sources.kafka.relation import decode_records
        from icesql.engine.sources.kafka.source import NAME, RECORD_SCHEMA, kafka_options

        spark = pieces.sparkSession
        spec = self.arrow.plan.kafka
        assert spec is not None
        opts = {
            "topic": spec.topic,
            "ranges": json.dumps([list(r) for r in ranges]),
            **kafka_options(self.arrow.conf, SECRET_KEYS),
        }
        records = spark.read.format(NAME).schema(RECORD_SCHEMA).options(**opts).load()
        df, _ = decode_records(spark, records, self.arrow.plan, self.arrow.policy, self.skipped, self.letters)
        return df


__all__ = ["FALLBACK_MARKER", "KafkaArrowSource", "KafkaBatchWriter", "fallback_of"]
