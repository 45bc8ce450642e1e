"""A Kafka source's records through Spark's own parsers (the records path): values by FORMAT, the key
by KEY FORMAT, the INCLUDE columns, and the bad-record guard that applies ON ERROR. The Arrow path
(arrow.py) sends here whatever it cannot decode exactly as Spark would.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from icesql.engine.base.changelog import BLK, CORRUPT, FILE, LINE, OP, SEQ
from icesql.engine.base.wire import clip_text
from icesql.engine.sources.guard import RecordGuard
from icesql.engine.sources.relation import declared_row_schema
from icesql.errors import ExecutionError
from icesql.plan import KafkaEnvelope, KafkaMetadata, OnError, SourceFormat, SourcePlan

KEY_RAW = "__key_raw"  # the record key, for messages about a bad record (dropped by the guard)


def _struct_ddl(st: Any) -> str:
    return ", ".join(f"`{f.name.replace('`', '``')}` {f.dataType.simpleString()}" for f in st.fields)


def key_struct(spark: Any, plan: SourcePlan) -> Any:
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
        return F.from_json(F.col("key").cast("string"), key_struct(spark, plan))
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
            KafkaMetadata.TOPIC: lambda: F.col("topic"),
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
    position = [
        F.col("topic").alias(FILE),
        F.col("partition").cast("long").alias(BLK),
        F.col("offset").alias(LINE),
    ]
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
            read = StructType(
                [*event.fields, StructField("payload", event), StructField(CORRUPT, StringType())]
            )
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
    df = records.select(
        *key_cols,
        *parsed,
        *include,
        *position,
        F.col("key").alias(KEY_RAW),
        F.col("value").isNull().alias("__tomb"),
    )
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
        where = (
            f"source '{self.source}', topic '{row.get(FILE)}' partition {row.get(BLK)} offset {row.get(LINE)}"
        )
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
