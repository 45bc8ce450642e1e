"""A KAFKA source as the relation a sink reads: the ``icesql_kafka`` records decoded into rows.

The value of each record becomes the row by the source's FORMAT, with Spark's own parsers so that
a value reads exactly as the same text in a FILES source would:

* ``json`` / ``debezium-json``: ``from_json`` (PERMISSIVE, the unparsable text kept in
  ``_corrupt_record``); ``csv``: ``from_csv``; ``text``: the value as a string; ``bytes``: as is.
* ``ENVELOPE UPSERT``: the record key gives the key columns (KEY FORMAT), a record with a null
  value (a tombstone) deletes its key: the relation is a changelog (``__op`` 'u' or 'd').
* ``debezium-json``: as for files (``__op`` from the event, ``__seq`` from the database's order).
* ``INCLUDE``: the key, partition, offset, timestamp and headers as columns of their own.

Every changelog's position is (``__seq``, topic, partition, offset): the changelog columns
``__file``, ``__blk`` and ``__line`` hold the topic, the partition and the offset, so a batch's
last change per key is the one the topic holds last.

Bad records (a value that does not parse or convert) are checked by ``KafkaRecordGuard`` on the
executors, as ``sources._RecordGuard`` checks files: ON ERROR 'fail' stops the sink with one line
naming the topic, partition, offset and key; 'skip' counts and logs them; 'dead-letter' keeps them
in the sink's dead-letter table (``file`` = 'topic/partition', ``byte_offset`` and ``record`` = the
offset). Tombstones of a source without ENVELOPE UPSERT carry no row and are left out.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from icesql.engine.base.changelog import BLK, CORRUPT, FILE, LINE, OP, SEQ
from icesql.engine.base.wire import clip_text
from icesql.engine.sources.guard import RecordGuard, letter_accumulators, skip_counter
from icesql.engine.sources.relation import Relation, declared_row_schema
from icesql.errors import ExecutionError
from icesql.plan import KafkaEnvelope, KafkaMetadata, OnError, SourceFormat, SourcePlan

log = logging.getLogger("icesql.sources")

KEY_RAW = "__key_raw"  # the record key, for messages about a bad record (dropped by the guard)


@dataclass(frozen=True)
class KafkaBinding:
    """What a Kafka source needs to run: the connection's librdkafka settings (secrets included:
    never log it), and for a sink reading the source directly the seed file of its checkpoint."""

    conf: Mapping[str, Any] = field(default_factory=dict, repr=False)
    secret_keys: frozenset[str] = frozenset()
    seed: str | None = None  # ``progress.KafkaProgress``: where a new checkpoint starts
    parallelism: int = 2
    arrow: bool = False  # a sink reads the source directly: the Arrow path where it can (``arrow``)
    session_tz: str = "UTC"
    timestamp_type: str = "TIMESTAMP_LTZ"  # the session's spark.sql.timestampType (a run without Spark)

    def options(self, plan: SourcePlan) -> dict[str, str]:
        from icesql.engine.sources.kafka.source import kafka_options

        spec = plan.kafka
        assert spec is not None
        opts = {
            "topic": spec.topic,
            "start": spec.start_offset,
            "parallelism": str(self.parallelism),
            **kafka_options(self.conf, self.secret_keys),
        }
        if spec.start_timestamp_ms is not None:
            opts["start_ts"] = str(spec.start_timestamp_ms)
        if spec.max_records_per_trigger:
            opts["max_records"] = str(spec.max_records_per_trigger)
        if spec.on_data_loss != "fail":
            opts["on_data_loss"] = spec.on_data_loss
        if plan.max_bytes_per_trigger:
            opts["max_bytes"] = str(plan.max_bytes_per_trigger)
        if self.seed:
            opts["seed"] = self.seed
        return opts


def kafka_relation(
    spark: Any, plan: SourcePlan, policy: OnError, binding: KafkaBinding, *, streaming: bool = True, limit: int = 0
) -> Relation:
    """The relation of a Kafka source: streaming (a sink), or a bounded read of at most ``limit``
    records per partition (a ``SELECT`` preview)."""
    from icesql.engine.sources.kafka.source import NAME, RECORD_SCHEMA, register

    if plan.kafka is None:  # pragma: no cover - the analyzer never makes one
        raise ExecutionError(f"source '{plan.name}' has no topic")
    if spark is None:
        return _without_spark(plan, policy, binding)
    register(spark)
    opts = binding.options(plan)
    if streaming:
        records = spark.readStream.format(NAME).schema(RECORD_SCHEMA).options(**opts).load()
    else:
        records = spark.read.format(NAME).schema(RECORD_SCHEMA).options(**opts, limit=str(limit)).load()
    acc = skip_counter(spark, policy)
    if acc is None and plan.kafka.on_data_loss == "continue":
        acc = skip_counter(spark, OnError.SKIP)  # lost records count as skipped ones
    letters = letter_accumulators(spark, policy)
    df, changelog = decode_records(spark, records, plan, policy, acc, letters[0] if letters else None)
    relation = Relation(
        name=plan.name,
        df=df,
        changelog=changelog,
        skipped=acc,
        sources=(plan.name,),
        letters=letters,
        binding=binding,
    )
    if streaming and binding.arrow:
        return _on_arrow_path(spark, plan, policy, binding, relation)
    return relation


def _on_arrow_path(spark: Any, plan: SourcePlan, policy: OnError, binding: KafkaBinding, relation: Relation) -> Relation:
    """The relation on the Arrow path (``arrow``): a DataFrame of offset ranges, and what the
    sink's tasks need to read and decode them; ``relation`` as it is where Arrow cannot."""
    import dataclasses

    from icesql.engine.sources.files.types import Unsupported
    from icesql.engine.sources.kafka.arrow import JSON_VALUES, KafkaArrowSource
    from icesql.engine.sources.kafka.source import NAME, PIECE_SCHEMA

    row_schema = relation.data_schema()
    value = declared_row_schema(spark, plan) if (plan.format or SourceFormat.JSON) in JSON_VALUES else None
    spec = plan.kafka
    assert spec is not None
    key_json = spec.key_format is SourceFormat.JSON and (
        spec.envelope is KafkaEnvelope.UPSERT or any(i.what is KafkaMetadata.KEY for i in spec.include)
    )
    source = KafkaArrowSource(
        plan=plan,
        conf=dict(binding.conf),
        row_schema_json=row_schema.jsonValue(),
        value_schema_json=value.jsonValue() if value is not None else None,
        key_schema_json=_key_struct(spark, plan).jsonValue() if key_json else None,
        policy=policy,
        session_tz=binding.session_tz,
        lost=relation.skipped if spec.on_data_loss == "continue" else None,
    )
    try:
        source.check_supported()
    except Unsupported as e:
        log.info("source %s: decoded by Spark's parsers (%s)", plan.name, e)
        return relation
    pieces = spark.readStream.format(NAME).schema(PIECE_SCHEMA).options(**binding.options(plan), mode="pieces").load()
    return dataclasses.replace(relation, df=pieces, arrow=source, row_schema=row_schema)


def local_row_schema(plan: SourcePlan, timestamp_type: str) -> Any:
    """The rows' schema Spark's decoding (``decode_records``) gives - the key columns of ENVELOPE
    UPSERT, the value by FORMAT (a JSON or Debezium value's SCHEMA, or ``value``), then the
    INCLUDE columns - built in Python for a run without Spark; None where it is not certain (a
    format the Arrow path does not decode, a SCHEMA only Spark parses)."""
    found = _local_schemas(plan, timestamp_type)
    return found[2] if found is not None else None


def _local_schemas(plan: SourcePlan, timestamp_type: str) -> tuple[Any, Any, Any] | None:
    """(the key's type where the rows use it, the value's SCHEMA where the format has one, the
    rows' schema) built in Python (``local_row_schema``)."""
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    from icesql.engine.sources.ddl import struct_from_ddl
    from icesql.engine.sources.kafka.arrow import ARROW_FORMATS, JSON_VALUES
    from icesql.engine.sources.kafka.source import RECORD_SCHEMA

    spec = plan.kafka
    fmt = plan.format or SourceFormat.JSON
    if spec is None or fmt not in ARROW_FORMATS:
        return None
    key: Any = None
    if spec.envelope is KafkaEnvelope.UPSERT or any(i.what is KafkaMetadata.KEY for i in spec.include):
        if spec.key_format is SourceFormat.JSON:
            key = struct_from_ddl(spec.key_schema or "", timestamp_type)
            if key is None:
                return None
        else:
            key = BinaryType() if spec.key_format is SourceFormat.BYTES else StringType()
    fields: list[Any] = []
    if spec.envelope is KafkaEnvelope.UPSERT:
        if isinstance(key, StructType):
            by_name = {f.name: f for f in key.fields}
            if any(c.name not in by_name for c in spec.key_columns):
                return None
            fields += [StructField(c.name, by_name[c.name].dataType, True) for c in spec.key_columns]
        else:
            fields += [StructField(c.name, key, True) for c in spec.key_columns[:1]]
    value = None
    if fmt in JSON_VALUES:
        value = struct_from_ddl(plan.schema or "", timestamp_type)
        if value is None:
            return None
        fields += value.fields
    else:
        fields.append(StructField("value", StringType() if fmt is SourceFormat.TEXT else BinaryType(), True))
    types = {
        KafkaMetadata.KEY: key,
        KafkaMetadata.PARTITION: IntegerType(),
        KafkaMetadata.OFFSET: LongType(),
        KafkaMetadata.TIMESTAMP: TimestampType(),
        KafkaMetadata.HEADERS: RECORD_SCHEMA["headers"].dataType,
    }
    fields += [StructField(inc.name, types[inc.what], True) for inc in spec.include]
    return key, value, StructType(fields)


def _without_spark(plan: SourcePlan, policy: OnError, binding: KafkaBinding) -> Relation:
    """The Arrow path for a run without Spark (``local_query``): the source's reader of offset
    ranges in this process, the sink's tasks as threads."""
    from pyspark.sql.types import StructType

    from icesql.engine.backends.local.query import LocalStreamFrame, SparkNeeded
    from icesql.engine.sources.files.types import Unsupported
    from icesql.engine.sources.kafka.arrow import KafkaArrowSource, fallback_of
    from icesql.engine.sources.kafka.source import PIECE_SCHEMA, KafkaStreamReader

    found = _local_schemas(plan, binding.timestamp_type)
    if found is None or not binding.arrow:
        raise SparkNeeded(f"source '{plan.name}' is decoded by Spark")
    key, value, row_schema = found
    source = KafkaArrowSource(
        plan=plan,
        conf=dict(binding.conf),
        row_schema_json=row_schema.jsonValue(),
        value_schema_json=value.jsonValue() if value is not None else None,
        key_schema_json=key.jsonValue() if isinstance(key, StructType) else None,
        policy=policy,
        session_tz=binding.session_tz,
        lost=None,
    )
    try:
        source.check_supported()
    except Unsupported as e:
        raise SparkNeeded(f"source '{plan.name}' is decoded by Spark's parsers ({e})") from None
    options = {**binding.options(plan), "mode": "pieces"}

    def needs_spark(exc: BaseException) -> str | None:
        where = fallback_of(exc)
        if where is None:
            return None
        partition, start, end = where
        return f"records {start}-{end} of partition {partition} need Spark's parsers"

    frame = LocalStreamFrame(lambda: KafkaStreamReader(dict(options)), PIECE_SCHEMA, needs_spark)
    return Relation(
        name=plan.name,
        df=frame,
        changelog=source.changelog,
        sources=(plan.name,),
        binding=binding,
        arrow=source,
        row_schema=row_schema,
    )


def _struct_ddl(st: Any) -> str:
    return ", ".join(f"`{f.name.replace('`', '``')}` {f.dataType.simpleString()}" for f in st.fields)


def _key_struct(spark: Any, plan: SourcePlan) -> Any:
    from pyspark.sql.types import StructType, _parse_datatype_string

    from icesql.engine.sources.ddl import struct_from_ddl

    spec = plan.kafka
    assert spec is not None and spec.key_schema
    built = struct_from_ddl(spec.key_schema, spark.conf.get("spark.sql.timestampType", "TIMESTAMP_LTZ"))
    st = built if built is not None else _parse_datatype_string(spec.key_schema)
    if not isinstance(st, StructType):
        raise ExecutionError(f"source '{plan.name}': KEY SCHEMA must be a list of columns")
    return st


def _key_value(spark: Any, plan: SourcePlan) -> Any:
    """The record key as its KEY FORMAT reads it (string, binary, or a struct)."""
    from pyspark.sql import functions as F

    spec = plan.kafka
    assert spec is not None
    if spec.key_format is SourceFormat.BYTES:
        return F.col("key")
    if spec.key_format is SourceFormat.JSON:
        return F.from_json(F.col("key").cast("string"), _key_struct(spark, plan))
    return F.col("key").cast("string")


def _include(spark: Any, plan: SourcePlan) -> list[Any]:
    from pyspark.sql import functions as F

    spec = plan.kafka
    assert spec is not None
    cols = []
    for inc in spec.include:
        expr = {
            KafkaMetadata.KEY: lambda: _key_value(spark, plan),
            KafkaMetadata.PARTITION: lambda: F.col("partition"),
            KafkaMetadata.OFFSET: lambda: F.col("offset"),
            KafkaMetadata.TIMESTAMP: lambda: F.col("timestamp"),
            KafkaMetadata.HEADERS: lambda: F.col("headers"),
        }[inc.what]()
        cols.append(expr.alias(inc.name))
    return cols


def decode_records(
    spark: Any, records: Any, plan: SourcePlan, policy: OnError, acc: Any, letters: Any
) -> tuple[Any, bool]:
    """The rows of a Kafka source from its records; returns (DataFrame, changelog)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    spec = plan.kafka
    assert spec is not None
    fmt = plan.format or SourceFormat.JSON
    upsert = spec.envelope is KafkaEnvelope.UPSERT
    value = F.col("value").cast("string")
    position = [F.col("topic").alias(FILE), F.col("partition").cast("long").alias(BLK), F.col("offset").alias(LINE)]
    if not upsert and fmt not in (SourceFormat.TEXT, SourceFormat.BYTES):
        records = records.filter(F.col("value").isNotNull())  # a tombstone carries no row
    include = _include(spark, plan)
    row_schema = declared_row_schema(spark, plan)
    debezium = fmt is SourceFormat.DEBEZIUM_JSON

    parsed: list[Any]
    value_names: list[str]
    if fmt is SourceFormat.TEXT:
        parsed, value_names = [value.alias("value")], ["value"]
    elif fmt is SourceFormat.BYTES:
        parsed, value_names = [F.col("value").alias("value")], ["value"]
    else:
        if row_schema is None:
            raise ExecutionError(f"source '{plan.name}': FORMAT = '{fmt.value}' needs SCHEMA = '...'")
        opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
        if debezium:
            long_t = LongType()
            event = StructType(
                [
                    StructField("before", row_schema),
                    StructField("after", row_schema),
                    StructField("op", StringType()),
                    StructField("ts_ms", long_t),
                    StructField(
                        "source", StructType([StructField("lsn", long_t), StructField("ts_ms", long_t)])
                    ),
                ]
            )
            read = StructType([*event.fields, StructField("payload", event), StructField(CORRUPT, StringType())])
            value_names = [f.name for f in read.fields]
            s = F.from_json(value, read, opts)
        elif fmt is SourceFormat.CSV:
            read = StructType([*row_schema.fields, StructField(CORRUPT, StringType())])
            value_names = [f.name for f in row_schema.fields] + [CORRUPT]
            s = F.from_csv(value, _struct_ddl(read), {**opts, "sep": dict(plan.options).get("sep", ",")})
        else:
            read = StructType([*row_schema.fields, StructField(CORRUPT, StringType())])
            value_names = [f.name for f in read.fields]
            s = F.from_json(value, read, opts)
        parsed = [F.col("__v").getField(n).alias(n) for n in value_names]
        records = records.withColumn("__v", s)
        # a value that is not valid text at all: kept as the corrupt record's raw text
    key_cols: list[Any] = []
    if upsert:
        k = _key_value(spark, plan)
        if spec.key_format is SourceFormat.JSON:
            key_cols = [k.getField(c.name).alias(c.name) for c in spec.key_columns]
        else:
            key_cols = [k.alias(spec.key_columns[0].name if spec.key_columns else "key")]
    df = records.select(*key_cols, *parsed, *include, *position, F.col("key").alias(KEY_RAW), F.col("value").isNull().alias("__tomb"))
    if CORRUPT not in df.columns:
        df = df.withColumn(CORRUPT, F.lit(None).cast("string"))
    guard = KafkaRecordGuard(
        source=plan.name,
        fmt=fmt.value,
        columns=[f.name for f in row_schema.fields] if row_schema is not None else ["value"],
        header=False,
        skip=policy is OnError.SKIP,
        debezium=debezium,
        counter=acc,
        letters=letters if policy is OnError.DEAD_LETTER else None,
    )
    out = StructType([f for f in df.schema.fields if f.name not in (CORRUPT, KEY_RAW)])
    df = df.mapInArrow(guard, out)
    key_names = [c.name for c in spec.key_columns] if upsert else []
    include_names = [inc.name for inc in spec.include]
    pos = [F.col(FILE), F.col(BLK), F.col(LINE)]
    if debezium:

        def ev(name: str) -> Any:
            return F.coalesce(F.col(f"payload.{name}"), F.col(name))

        op = ev("op")
        image = F.when(op == F.lit("d"), ev("before")).otherwise(ev("after"))
        seq = F.coalesce(ev("source.lsn"), ev("source.ts_ms"), ev("ts_ms"))
        assert row_schema is not None
        cols = [image.getField(f.name).alias(f.name) for f in row_schema.fields]
        return df.select(*cols, *[F.col(n) for n in include_names], op.alias(OP), seq.alias(SEQ), *pos), True
    data = [F.col(n) for n in key_names] + [F.col(n) for n in value_names if n != CORRUPT]
    data += [F.col(n) for n in include_names]
    if upsert:
        op = F.when(F.col("__tomb"), F.lit("d")).otherwise(F.lit("u"))
        return df.select(*data, op.alias(OP), F.lit(None).cast("long").alias(SEQ), *pos), True
    return df.select(*data), False


class KafkaRecordGuard(RecordGuard):
    """``RecordGuard`` for Kafka records: positions are (topic, partition, offset), and a bad
    record's message and dead letter name them and the record's key."""

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow.compute as pc

        letters: list[dict[str, Any]] = []
        for batch in batches:
            if batch.num_rows == 0:
                continue
            names = batch.schema.names
            bad = pc.is_valid(batch.column(names.index(CORRUPT)))
            if self.debezium:
                tomb = batch.column(names.index("__tomb"))
                bad = pc.and_(pc.or_(bad, self._bad_events(batch)), pc.invert(tomb))
            out = batch.remove_column(names.index(KEY_RAW))
            out = out.remove_column(out.schema.names.index(CORRUPT))
            if pc.any(bad).as_py():
                rows = batch.to_pylist()
                out = self.drop_bad(  # the lambdas run inside this call, on this batch's rows
                    out,
                    bad,
                    letters,
                    lambda i: self.kafka_letter(rows[i]),  # noqa: B023
                    lambda i: self.kafka_describe(rows[i]),  # noqa: B023
                )
            if out.num_rows:
                yield out
        if letters:
            self.letters.add(letters)

    @staticmethod
    def _key_text(row: dict[str, Any]) -> str | None:
        key = row.get(KEY_RAW)
        if key is None:
            return None
        try:
            return clip_text(bytes(key).decode("utf-8"), 100)
        except UnicodeDecodeError:
            return "0x" + bytes(key)[:50].hex()

    def _where(self, row: dict[str, Any]) -> str:
        where = f"source '{self.source}', topic '{row.get(FILE)}' partition {row.get(BLK)} offset {row.get(LINE)}"
        key = self._key_text(row)
        return where + (f" (key '{key}')" if key is not None else "")

    def kafka_describe(self, row: dict[str, Any]) -> str:
        raw = row.get(CORRUPT)
        fld, why, _ = self._diagnose(row, raw)
        snippet = "" if raw is None else f": {clip_text(raw)}"
        where = self._where(row)
        return f"{where}, field '{fld}': {why}{snippet}" if fld else f"{where}: {why}{snippet}"

    def kafka_letter(self, row: dict[str, Any]) -> dict[str, Any]:
        raw = row.get(CORRUPT)
        fld, why, reason = self._diagnose(row, raw)
        key = self._key_text(row)
        error = f"field '{fld}': {why}" if fld else why
        return {
            "source": self.source,
            "file": f"{row.get(FILE)}/{row.get(BLK)}",
            "byte_offset": int(row.get(LINE) or 0),
            "record": int(row.get(LINE) or 0),
            "reason": reason,
            "error": error + (f" (key '{key}')" if key is not None else ""),
            "raw": raw if raw is not None else "",
        }


__all__ = ["KafkaBinding", "KafkaRecordGuard", "decode_records", "kafka_relation", "local_row_schema"]
