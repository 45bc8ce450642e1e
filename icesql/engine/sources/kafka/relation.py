"""A KAFKA source as the relation a sink reads: the ``icesql_kafka`` records decoded into rows.

The value of each record becomes the row by the source's FORMAT, with Spark's own parsers so that
a value reads exactly as the same text in a FILES source would:

* ``json`` / ``debezium-json``: ``from_json`` (PERMISSIVE, the unparsable text kept in
  ``_corrupt_record``); ``csv``: ``from_csv``; ``text``: the value as a string; ``bytes``: as is.
* ``ENVELOPE UPSERT``: the record key gives the key columns (KEY FORMAT), a record with a null
  value (a tombstone) deletes its key: the relation is a changelog (``__op`` 'u' or 'd').
* ``debezium-json``: as for files (``__op`` from the event, ``__seq`` from the database's order).
* ``INCLUDE``: the key, partition, offset, timestamp, headers and topic as columns of their own
  (a source of many topics has the topic without asking: ``analyzer.sources``).

Every changelog's position is (``__seq``, topic, partition, offset): the changelog columns
``__file``, ``__blk`` and ``__line`` hold the topic, the partition and the offset, so a batch's
last change per key is the one the topic holds last.

Bad records (a value that does not parse or convert) are checked by ``KafkaRecordGuard`` on the
executors, as ``sources.guard.RecordGuard`` checks files: ON ERROR 'fail' stops the sink with one line
naming the topic, partition, offset and key; 'skip' counts and logs them; 'dead-letter' keeps them
in the sink's dead-letter table (``file`` = 'topic/partition', ``byte_offset`` and ``record`` = the
offset). Tombstones of a source without ENVELOPE UPSERT carry no row and are left out.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from icesql.engine.sources.guard import letter_accumulators, skip_counter
from icesql.engine.sources.kafka.records import decode_records, key_struct
from icesql.engine.sources.relation import Relation, declared_row_schema
from icesql.errors import ExecutionError
from icesql.plan import KafkaEnvelope, KafkaMetadata, OnError, SourceFormat, SourcePlan

log = logging.getLogger("icesql.sources")


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
    # the CONFLUENT SCHEMA REGISTRY connection a registry source reads its writer schemas from
    # (``connections.registry.RegistryConfig``: its password resolved, never logged)
    registry: Any = field(default=None, repr=False)

    def options(self, plan: SourcePlan) -> dict[str, str]:
        from icesql.engine.sources.kafka.subscription import Subscription
        from icesql.engine.sources.kafka.topic import kafka_options

        spec = plan.kafka
        assert spec is not None
        opts = {
            **Subscription.of(spec).options(),
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
    backend: Any,
    plan: SourcePlan,
    policy: OnError,
    binding: KafkaBinding,
    *,
    streaming: bool = True,
    limit: int = 0,
) -> Relation:
    """The relation of a Kafka source: streaming (a sink), or a bounded read of at most ``limit``
    records per partition (a ``SELECT`` preview). A sink's source takes the Arrow path where its
    schemas are built in Python and Arrow decodes its format (``_arrow_relation``), on either
    executor; else Spark's parsers (``backend.spark_for``: in this process, the sink restarts on
    Spark)."""
    from icesql.engine.sources.kafka.source import NAME, RECORD_SCHEMA, register

    if plan.kafka is None:  # pragma: no cover - the analyzer never makes one
        raise ExecutionError(f"source '{plan.name}' has no topic")
    reason = f"source '{plan.name}' is decoded by Spark"
    arrow_schemas = False  # whether the Arrow path had Python's schemas (and refused the format)
    if streaming and binding.arrow:
        found = _arrow_relation(backend, plan, policy, binding)
        if isinstance(found, Relation):
            return found
        arrow_schemas = found is not None
        reason = found or reason
    if plan.kafka.registry is not None:
        raise ExecutionError(
            f"source '{plan.name}' reads its records through a schema registry, which only a sink's Arrow "
            "path decodes",
            hint="SELECT from the sink's table" if not streaming else "unset ICESQL_ARROW_PATH",
        )
    spark = backend.spark_for(reason)
    register(spark)
    opts = binding.options(plan)
    if streaming:
        records = spark.readStream.format(NAME).schema(RECORD_SCHEMA).options(**opts).load()
    else:
        records = spark.read.format(NAME).schema(RECORD_SCHEMA).options(**opts, limit=str(limit)).load()
    acc, letters = _counters(backend, plan, policy)
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
    if streaming and binding.arrow and not arrow_schemas:  # the Arrow path with Spark's schemas
        return _on_arrow_path(spark, plan, policy, binding, relation)
    return relation


def _counters(backend: Any, plan: SourcePlan, policy: OnError) -> tuple[Any, tuple[Any, ...]]:
    """(skipped-record counter, dead-letter accumulators) of a Kafka source read with ``policy``."""
    acc = skip_counter(backend, policy)
    if acc is None and plan.kafka is not None and plan.kafka.on_data_loss == "continue":
        acc = skip_counter(backend, OnError.SKIP)  # lost records count as skipped ones
    return acc, letter_accumulators(backend, policy)


def _on_arrow_path(
    spark: Any, plan: SourcePlan, policy: OnError, binding: KafkaBinding, relation: Relation
) -> Relation:
    """The relation on the Arrow path (``arrow``): a DataFrame of offset ranges, and what the
    sink's tasks need to read and decode them; ``relation`` as it is where Arrow cannot."""
    import dataclasses

    from icesql.engine.sources.kafka.arrow import JSON_VALUES, KafkaArrowSource
    from icesql.engine.sources.kafka.source import NAME, PIECE_SCHEMA
    from icesql.engine.sources.types import Unsupported

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
        key_schema_json=key_struct(spark, plan).jsonValue() if key_json else None,
        policy=policy,
        session_tz=binding.session_tz,
        lost=relation.skipped if spec.on_data_loss == "continue" else None,
    )
    try:
        source.check_supported()
    except Unsupported as e:
        log.info("source %s: decoded by Spark's parsers (%s)", plan.name, e)
        return relation
    pieces = (
        spark.readStream.format(NAME)
        .schema(PIECE_SCHEMA)
        .options(**binding.options(plan), mode="pieces")
        .load()
    )
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
    from icesql.engine.sources.kafka.registered import row_struct
    from icesql.engine.sources.kafka.source import RECORD_SCHEMA

    spec = plan.kafka
    fmt = plan.format or SourceFormat.JSON
    registry = spec is not None and spec.registry is not None and spec.value_schema_type is not None
    if spec is None or (fmt not in ARROW_FORMATS and not registry):
        return None
    key: Any = None
    if spec.envelope is KafkaEnvelope.UPSERT or any(i.what is KafkaMetadata.KEY for i in spec.include):
        if spec.key_schema_type is not None:
            key = row_struct(plan, "key")
        elif spec.key_format is SourceFormat.JSON:
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
    if spec.schema_per_topic:
        from icesql.engine.sources.relation import message_schema

        fields += message_schema(binary=True).fields  # each record names its schema: a routed sink's source
    elif registry:
        # a tombstone (ENVELOPE UPSERT) or a delete's image leaves the value's columns null
        changes = spec.envelope is not KafkaEnvelope.NONE
        fields += [StructField(f.name, f.dataType, True) if changes else f for f in row_struct(plan, "value").fields]
    elif fmt is SourceFormat.DEBEZIUM_JSON and not plan.schema:
        from icesql.engine.sources.relation import message_schema

        fields += message_schema().fields  # each event carries its schema: a routed sink's source
    elif fmt in JSON_VALUES:
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
        KafkaMetadata.TOPIC: StringType(),
    }
    fields += [StructField(inc.name, types[inc.what], True) for inc in spec.include]
    return key, value, StructType(fields)


def _arrow_relation(
    backend: Any, plan: SourcePlan, policy: OnError, binding: KafkaBinding
) -> Relation | str | None:
    """The Arrow path with the schemas built in Python (``_local_schemas``): the source's stream of
    offset ranges on ``backend``, the sink's tasks reading and decoding them. Else why not (None:
    a schema only Spark builds; ``_on_arrow_path`` then tries with Spark's)."""
    from pyspark.sql.types import StructType

    from icesql.engine.sources.kafka.arrow import KafkaArrowSource
    from icesql.engine.sources.kafka.registered import registry_column
    from icesql.engine.sources.kafka.source import NAME, PIECE_SCHEMA, KafkaStreamReader, register
    from icesql.engine.sources.pieces import needs_spark_of
    from icesql.engine.sources.types import Unsupported

    spec = plan.kafka
    assert spec is not None
    registry = spec.registry is not None
    if registry and binding.registry is not None:
        from icesql.engine.connections.registry import client_for
        from icesql.engine.sources.kafka.registered import widened

        plan = widened(plan, client_for(binding.registry))
    found = _local_schemas(plan, backend.timestamp_type)
    if found is None:
        if registry:  # pragma: no cover - a registry source's schemas are always built here
            raise ExecutionError(f"source '{plan.name}': its registry schemas give no columns")
        return None
    key, value, row_schema = found
    skipped, letters = _counters(backend, plan, policy)
    source = KafkaArrowSource(
        plan=plan,
        conf=dict(binding.conf),
        row_schema_json=row_schema.jsonValue(),
        value_schema_json=value.jsonValue() if value is not None else None,
        key_schema_json=key.jsonValue() if isinstance(key, StructType) else None,
        policy=policy,
        session_tz=binding.session_tz,
        lost=skipped if spec.on_data_loss == "continue" else None,
        value_registry=registry_column(plan, "value", binding.registry),
        key_registry=registry_column(plan, "key", binding.registry),
        skipped=skipped,
        letters=letters[0] if letters else None,
    )
    try:
        source.check_supported()
    except Unsupported as e:
        if registry:
            raise ExecutionError(
                f"source '{plan.name}': {e} cannot be read through a schema registry"
            ) from None
        log.info("source %s: decoded by Spark's parsers (%s)", plan.name, e)
        return f"source '{plan.name}' is decoded by Spark's parsers ({e})"
    options = {**binding.options(plan), "mode": "pieces"}
    frame = backend.stream(
        NAME,
        PIECE_SCHEMA,
        options,
        register=register,
        reader=lambda: KafkaStreamReader(dict(options)),
        needs_spark=needs_spark_of(source),
    )
    return Relation(
        name=plan.name,
        df=frame,
        changelog=source.changelog,
        skipped=skipped,
        letters=letters,
        sources=(plan.name,),
        binding=binding,
        arrow=source,
        row_schema=row_schema,
    )


__all__ = ["KafkaBinding", "kafka_relation", "local_row_schema"]
