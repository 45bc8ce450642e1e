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

from icesql.engine.base.changelog import BLK, FILE, LINE
from icesql.plan import KafkaEnvelope, KafkaMetadata, OnError, SourceFormat, SourcePlan

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
    # a registry source (``kafka.registered``): each half's decoder (``registry.framing.RegistryColumn``,
    # which holds the registry's config: never logged), and the counter of skipped records
    value_registry: Any = field(default=None, repr=False)
    key_registry: Any = field(default=None, repr=False)
    skipped: Any = None
    letters: Any = None  # ON ERROR = 'dead-letter': the accumulator of the dead-letter table's rows

    def on_lost(self, topic: str, partition: int, first: int, end: int) -> None:
        from icesql.engine.sources.kafka.topic import log_lost

        log_lost(topic, partition, first, end)
        if self.lost is not None:
            self.lost.add(end - first)  # offsets: records, and any transaction markers among them

    @property
    def changelog(self) -> bool:
        """Whether ``rows_of`` gives changes (``__op`` and the position columns): ENVELOPE UPSERT,
        Debezium's JSON, and Debezium's events through a registry (ENVELOPE DEBEZIUM, FORMAT AVRO)."""
        spec = self.plan.kafka
        envelope = spec.envelope if spec is not None else None
        changes = envelope in (KafkaEnvelope.UPSERT, KafkaEnvelope.DEBEZIUM)
        return changes or self.plan.format is SourceFormat.DEBEZIUM_JSON

    @property
    def messages(self) -> bool:
        """Debezium's JSON without SCHEMA (each event carries its schema), or a registry source
        with a schema per topic (each record names its schema: ``KafkaSourceSpec.schema_per_topic``):
        the rows are the records' keys and values whole, for a routed sink to decode per table."""
        if self.plan.kafka is not None and self.plan.kafka.schema_per_topic:
            return True
        return self.plan.format is SourceFormat.DEBEZIUM_JSON and self.value_schema_json is None

    def batch_writer(self, inner: Any, *, skipped: Any = None, letters: Any = None) -> Any:
        from icesql.engine.sources.pieces import PiecesBatchWriter

        return PiecesBatchWriter(inner, self, skipped=skipped, letters=letters)

    # ------------------------------------------------------------------ sources.pieces.PieceSource

    def pieces(self, batches: Iterator[Any]) -> Iterator[tuple[str, int, int, int]]:
        for b in batches:
            for r in b.to_pylist():
                yield r["topic"], int(r["partition"]), int(r["start"]), int(r["end"])

    def decode(self, piece: tuple[str, int, int, int]) -> Iterator[Any]:
        from icesql.engine.sources.kafka.topic import read_range

        topic, p, s, e = piece
        spec = self.plan.kafka
        on_lost = self.on_lost if spec is not None and spec.on_data_loss == "continue" else None
        for records in read_range(self.conf, topic, p, s, e, on_lost=on_lost, columns=self.record_columns):
            yield self.rows_of(records)

    @property
    def record_columns(self) -> frozenset[str]:
        """The record columns ``rows_of`` reads: a record's timestamp and headers cost more to take
        from librdkafka than its value, and most sources use neither."""
        spec = self.plan.kafka
        assert spec is not None
        cols = {"value"}
        registry = self.value_registry is not None or self.key_registry is not None
        if self.changelog or registry:
            cols.update(("topic", "partition", "offset"))  # a change's position, a bad record's name
        if self.messages:
            cols.add("key")  # a routed sink's table is keyed by the record key
        if spec.envelope is KafkaEnvelope.UPSERT or registry:
            cols.add("key")
        if registry:
            cols.add("headers")  # a registry may frame a schema id in a header
        for inc in spec.include:
            cols.update(
                {
                    KafkaMetadata.KEY: ("key",),
                    KafkaMetadata.PARTITION: ("partition",),
                    KafkaMetadata.OFFSET: ("offset",),
                    KafkaMetadata.TIMESTAMP: ("timestamp", "timestampType"),
                    KafkaMetadata.HEADERS: ("headers",),
                    KafkaMetadata.TOPIC: ("topic",),
                }[inc.what]
            )
        return frozenset(cols)

    def piece_key(self, piece: tuple[str, int, int, int]) -> Any:
        return list(piece)  # topic, partition, start, end

    def consumed(self, piece: Any) -> dict[str, Any] | None:
        return None  # a Kafka source's progress is its offsets, in the checkpoint

    def consumed_rows(self, pieces: Any, keys: Any = None) -> list[dict[str, Any]]:
        return []

    def without(self, pieces: Any, keys: Any) -> Any:
        from pyspark.sql import functions as F

        for t, p, start, _ in keys:
            pieces = pieces.filter(~((F.col("topic") == t) & (F.col("partition") == p) & (F.col("start") == start)))
        return pieces

    def read_by_spark(self, pieces: Any, keys: Any, skipped: Any, letters: Any) -> Any:
        """The ranges Arrow could not decode, read by the records path (Spark's parsers, the
        bad-record guard and ON ERROR)."""
        from icesql.engine.connections.kafka import SECRET_KEYS
        from icesql.engine.sources.kafka.records import decode_records
        from icesql.engine.sources.kafka.source import NAME, RECORD_SCHEMA, register
        from icesql.engine.sources.kafka.topic import kafka_options

        spark = pieces.sparkSession
        register(spark)  # a sink whose batches are planned in the driver has not registered it
        opts = {
            "ranges": json.dumps([list(r) for r in keys]),
            **kafka_options(self.conf, SECRET_KEYS),
        }
        records = spark.read.format(NAME).schema(RECORD_SCHEMA).options(**opts).load()
        df, _ = decode_records(spark, records, self.plan, self.policy, skipped, letters)
        return df

    def needs_spark(self, key: Any) -> str:
        topic, partition, start, end = key
        return f"records {start}-{end} of topic '{topic}' partition {partition} need Spark's parsers"

    def _json_format(self, schema_json: Mapping[str, Any]) -> Any:
        from icesql.engine.sources.decode import SourceFormat as ArrowFormat

        return ArrowFormat(format="json", row_schema_json=schema_json, session_tz=self.session_tz)

    def check_supported(self) -> None:
        """Raises ``files.types.Unsupported`` when the records path must read the source."""
        from icesql.engine.sources.types import Unsupported

        spec = self.plan.kafka
        assert spec is not None
        if self.plan.format not in ARROW_FORMATS and self.value_registry is None and not self.messages:
            raise Unsupported(f"FORMAT = '{(self.plan.format or SourceFormat.JSON).value}'")
        if self.value_schema_json is not None:
            self._json_format(self.value_schema_json).check_supported()
        if self.key_schema_json is not None:
            self._json_format(self.key_schema_json).check_supported()

    # ------------------------------------------------------------------ decoding

    def rows_of(self, records: Any) -> Any:
        """Kafka records (``source.RECORD_SCHEMA`` as Arrow) -> the relation's rows, plus the
        changelog columns for ENVELOPE UPSERT and Debezium. Raises ``Fallback`` where Arrow is
        not sure."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from icesql.engine.sources.decode import changelog_batch, debezium_events, json_rows, one_per_line
        from icesql.engine.sources.types import Fallback, arrow_schema

        spec = self.plan.kafka
        assert spec is not None
        fmt = self.plan.format or SourceFormat.JSON
        upsert = spec.envelope is KafkaEnvelope.UPSERT
        registry = self.value_registry is not None
        value = records.column("value")
        tomb = pc.is_null(value)
        if not upsert and (fmt in JSON_VALUES or registry) and pc.any(tomb).as_py():
            records = records.filter(pc.invert(tomb))  # a tombstone carries no row
            value, tomb = records.column("value"), pc.is_null(records.column("value"))
        if self.messages:
            from icesql.engine.sources.decode import message_batch

            position = {
                FILE: records.column("topic"),
                BLK: records.column("partition").cast(pa.int64()),
                LINE: records.column("offset"),
            }
            # the INCLUDEd columns after the message's (a many-topic source's ``topic``: relation.py)
            included = self._included(records, None)
            if spec.schema_per_topic:  # the registry's framed bytes, as they are
                return message_batch(records.column("key"), value, position, included)
            return message_batch(_utf8(records.column("key")), _utf8(value), position, included)
        decoded = key = None
        if registry or self.key_registry is not None:
            records, decoded, key = self._registered(records)
            value, tomb = records.column("value"), pc.is_null(records.column("value"))
        n = records.num_rows
        cols: dict[str, Any] = {}
        op = seq = None
        if upsert:
            key = self._key(records.column("key")) if key is None else key
            if spec.key_format is SourceFormat.JSON or self.key_registry is not None:
                for c in spec.key_columns:
                    cols[c.name] = pc.struct_field(key, c.name)
            else:
                cols[spec.key_columns[0].name if spec.key_columns else "key"] = key
            op, seq = pc.if_else(tomb, pa.scalar("d"), pa.scalar("u")), pa.nulls(n, pa.int64())
        if decoded is not None:
            if spec.envelope is KafkaEnvelope.DEBEZIUM:
                decoded, op, seq = decoded
            for name in decoded.schema.names:
                cols[name] = decoded.column(name)
        elif fmt is SourceFormat.TEXT:
            cols["value"] = _utf8(value)
        elif fmt is SourceFormat.BYTES:
            cols["value"] = value
        else:
            assert self.value_schema_json is not None
            source = self._json_format(self.value_schema_json)
            if fmt is SourceFormat.DEBEZIUM_JSON:
                parsed, op, seq = debezium_events(one_per_line(value), source)
                if parsed.num_rows != n:
                    raise Fallback("values that are not one JSON object each")
            else:
                parsed = json_rows(value, source, allow_null=upsert)
            for name in parsed.schema.names:
                cols[name] = parsed.column(name)
        cols.update(self._included(records, key))
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

    def _included(self, records: Any, key: Any) -> dict[str, Any]:
        """The source's INCLUDEd metadata columns of ``records`` by name (``key``: the keys
        decoded already, else None)."""
        spec = self.plan.kafka
        assert spec is not None
        return {
            inc.name: {
                KafkaMetadata.KEY: lambda: self._key(records.column("key")) if key is None else key,
                KafkaMetadata.PARTITION: lambda: records.column("partition"),
                KafkaMetadata.OFFSET: lambda: records.column("offset"),
                KafkaMetadata.TIMESTAMP: lambda: records.column("timestamp"),
                KafkaMetadata.HEADERS: lambda: records.column("headers"),
                KafkaMetadata.TOPIC: lambda: records.column("topic"),
            }[inc.what]()
            for inc in spec.include
        }

    def _registered(self, records: Any) -> tuple[Any, Any, Any]:
        """(the records left once ON ERROR dealt with those that do not decode, their values
        decoded - for ENVELOPE DEBEZIUM (rows, op, seq) - and their keys decoded, or None) of a
        registry source (``kafka.registered``)."""
        import pyarrow.compute as pc

        from icesql.engine.sources.kafka.registered import debezium_changes, without_bad

        spec = self.plan.kafka
        assert spec is not None
        headers = records.column("headers")
        values, bad = None, []
        if self.value_registry is not None:
            values, bad = self.value_registry.decode(records.column("value"), headers)
        reasons = dict(reversed(bad))  # the first reason of each bad record
        keys = None
        if self.key_registry is not None:
            keys, key_bad = self.key_registry.decode(records.column("key"), headers)
            for i, reason in key_bad:
                reasons.setdefault(i, f"its key: {reason}")
        debezium = values is not None and spec.envelope is KafkaEnvelope.DEBEZIUM
        if debezium:
            rows, op, seq, usable = debezium_changes(values)
            unusable = pc.and_(pc.invert(usable), pc.is_valid(records.column("value")))
            for i, u in enumerate(unusable.to_pylist()):
                if u:
                    reasons.setdefault(i, "a change event without a known op or its row image")
        bad = sorted(reasons.items())
        if bad:
            keep = without_bad(self.plan, self.policy, records, bad, self.skipped, self.letters)
            records = records.filter(keep)
            values = values.filter(keep) if values is not None else None
            keys = keys.filter(keep) if keys is not None else None
            if debezium:
                rows, op, seq = rows.filter(keep), op.filter(keep), seq.filter(keep)
        if keys is not None:
            keys = _struct(keys)
        if debezium:
            return records, (rows, op, seq), keys
        return records, values, keys

    def _key(self, key: Any) -> Any:
        spec = self.plan.kafka
        assert spec is not None
        if spec.key_format is SourceFormat.BYTES:
            return key
        if spec.key_format is SourceFormat.JSON:
            import pyarrow as pa

            assert self.key_schema_json is not None
            from icesql.engine.sources.decode import json_rows

            rows = json_rows(key, self._json_format(self.key_schema_json), allow_null=True)
            return pa.StructArray.from_arrays(rows.columns, fields=list(rows.schema), mask=key.is_null())
        return _utf8(key)


def _struct(batch: Any) -> Any:
    """A batch as one struct column (null where every field is: a null key)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    mask = None
    if batch.num_columns:
        mask = pc.is_null(batch.column(0))
        for c in batch.columns[1:]:
            mask = pc.and_(mask, pc.is_null(c))
    return pa.StructArray.from_arrays(batch.columns, fields=list(batch.schema), mask=mask)


def _utf8(values: Any) -> Any:
    import pyarrow as pa

    from icesql.engine.sources.types import Fallback

    try:
        return values.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise Fallback("a value that is not UTF-8 text") from None


__all__ = ["ARROW_FORMATS", "JSON_VALUES", "KafkaArrowSource"]
