"""A Kafka source read through a Confluent Schema Registry (FORMAT AVRO | PROTOBUF | JSON USING
CONFLUENT SCHEMA REGISTRY CONNECTION csr, and KEY FORMAT ... for the key): the reader schemas the
source keeps in its plan, the columns they give, and what the Arrow path does with a batch's
records - each half decoded by ``sources.registry.framing.RegistryColumn``, a Debezium envelope
turned into its changes, and ON ERROR applied to the records that do not decode.

Registry records have no Spark reader (Spark's Avro and Protobuf connectors are not installed), so
such a source always takes the Arrow path, on Spark's executors or in this process.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from icesql.engine.base.wire import BAD_RECORD_MARKER
from icesql.engine.connections.registry import RegisteredSchema
from icesql.plan import KafkaEnvelope, OnError, SourcePlan

log = logging.getLogger("icesql.sources")


def reader_schema(plan: SourcePlan, half: str) -> RegisteredSchema | None:
    """The schema a registry source reads ``half`` ('value' or 'key') as: the subject's latest
    version when the source was created (None: that half is not read through the registry)."""
    spec = plan.kafka
    if spec is None or spec.registry is None:
        return None
    schema_type = getattr(spec, f"{half}_schema_type")
    text = spec.value_schema if half == "value" else spec.key_schema_text
    if schema_type is None or text is None:
        return None
    return RegisteredSchema(
        schema_type=schema_type,
        schema=text,
        id=getattr(spec, f"{half}_schema_id"),
        subject=getattr(spec, f"{half}_subject"),
        version=getattr(spec, f"{half}_schema_version"),
        referenced=tuple(getattr(spec, f"{half}_referenced")),
    )


def widened(plan: SourcePlan, client: Any) -> SourcePlan:
    """``plan`` reading its values as the subject's newest version that widens the schema it
    reads now (adds fields, promotes types; records of the older versions still resolve to it),
    as the sink starts: a batch whose records carry such a version restarts the sink
    (``framing.RegistryColumn.decoder``), which then reads it and gains the columns. The plan as
    it is when the registry cannot be asked (the schemas it holds do not change)."""
    import dataclasses

    from icesql.engine.connections.registry import RegistryError
    from icesql.engine.sources.registry import kinds
    from icesql.engine.sources.registry.framing import widening

    reader = reader_schema(plan, "value")
    spec = plan.kafka
    if reader is None or spec is None or reader.subject is None or reader.version is None:
        return plan
    try:
        latest = client.latest(reader.subject)
        if latest.version is None or latest.version <= reader.version:
            return plan
        now = kinds.columns(reader)
        for v in range(latest.version, reader.version, -1):
            candidate = latest if v == latest.version else client.version(reader.subject, v)
            if candidate.schema_type != reader.schema_type:
                continue
            try:
                wider = kinds.columns(candidate)
                kinds.decoder(reader, candidate)  # the records read so far resolve to it
            except kinds.Unresolvable:
                continue
            if widening(now, wider) and not widening(wider, now):
                log.info(
                    "source %s: reads subject %s version %s (was %s): %s",
                    plan.name,
                    reader.subject,
                    v,
                    reader.version,
                    ", ".join(widening(now, wider)),
                )
                return dataclasses.replace(
                    plan,
                    kafka=dataclasses.replace(
                        spec,
                        value_schema=candidate.schema,
                        value_schema_id=candidate.id,
                        value_schema_version=v,
                        value_referenced=tuple(candidate.referenced),
                    ),
                )
    except RegistryError as e:
        log.info("source %s: the registry's newer versions are not known (%s)", plan.name, e.message)
    return plan


def row_struct(plan: SourcePlan, half: str) -> Any:
    """The Spark struct of the rows ``half`` gives (a Debezium value's ``after`` record), or None."""
    from pyspark.sql.types import StructType

    from icesql.engine.sources.registry import kinds

    reader = reader_schema(plan, half)
    if reader is None:
        return None
    columns = kinds.columns(reader)
    if half == "value" and plan.kafka is not None and plan.kafka.envelope is KafkaEnvelope.DEBEZIUM:
        columns = next(f["type"] for f in columns["fields"] if f["name"] == "after")
    return StructType.fromJson(columns)


def registry_column(plan: SourcePlan, half: str, config: Any) -> Any:
    """The decoder of ``half``'s records (``framing.RegistryColumn``), or None."""
    from icesql.engine.connections.registry import client_for
    from icesql.engine.sources.registry.framing import KEY_HEADER, VALUE_HEADER, RegistryColumn

    reader = reader_schema(plan, half)
    if reader is None:
        return None
    if config is None:  # pragma: no cover - the binder gives every registry source its config
        raise ValueError(f"source '{plan.name}' reads a schema registry without its connection")
    header = VALUE_HEADER if half == "value" else KEY_HEADER
    return RegistryColumn(reader, functools.partial(client_for, config), header=header)


def without_bad(
    plan: SourcePlan, policy: OnError, records: Any, bad: list[tuple[int, str]], skipped: Any, letters: Any = None
) -> Any:
    """The mask of ``records`` to keep after ``bad`` (``(index, reason)``), as ON ERROR says:
    'fail' fails the task naming the first bad record; 'skip' logs each one and counts it;
    'dead-letter' adds each to ``letters`` (the dead-letter table's rows, ``guard.COLUMNS``)."""
    import base64

    import pyarrow as pa

    def column(name: str, i: int) -> Any:
        return records.column(name)[i].as_py()

    def where(i: int) -> str:
        return (
            f"source '{plan.name}' topic {column('topic', i)} partition {column('partition', i)} "
            f"offset {column('offset', i)}"
        )

    if policy is OnError.FAIL or (policy is OnError.DEAD_LETTER and letters is None):
        i, reason = bad[0]
        raise ValueError(f"{BAD_RECORD_MARKER}{where(i)}: {reason}|END")
    keep = [True] * records.num_rows
    kept: list[dict[str, Any]] = []
    for i, reason in bad:
        keep[i] = False
        if policy is OnError.SKIP:
            log.warning("skipping bad record: %s: %s", where(i), reason)
            continue
        value = column("value", i)
        kept.append(
            {
                "source": plan.name,
                "file": f"{column('topic', i)}/{column('partition', i)}",
                "byte_offset": int(column("offset", i)),
                "record": int(column("offset", i)),
                "reason": "schema-registry",
                "error": reason,
                "raw": "" if value is None else "base64:" + base64.b64encode(value).decode("ascii"),
            }
        )
    if kept:
        letters.add(kept)
    if policy is OnError.SKIP and skipped is not None:
        skipped.add(len(bad))
    return pa.array(keep, pa.bool_())


def debezium_changes(envelope: Any) -> tuple[Any, Any, Any, Any]:
    """Debezium change events decoded through the registry (before, after, op, source, ts_ms) ->
    (the row image each op leaves: ``before`` for a delete, ``after`` otherwise; the op; the
    database's order: ``source.lsn``, else ``source.ts_ms``, else ``ts_ms``; which events are
    usable: a known op and its image), as the JSON events give them (``decode.debezium_events``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = envelope.schema.names
    op = envelope.column("op").cast(pa.string())
    before, after = envelope.column("before"), envelope.column("after")
    known = pc.fill_null(pc.is_in(op, value_set=pa.array(["c", "u", "d", "r"])), False)
    is_delete = pc.fill_null(pc.equal(op, "d"), False)
    missing = pc.if_else(is_delete, pc.is_null(before), pc.is_null(after))
    usable = pc.and_(known, pc.invert(missing))
    image = pc.if_else(is_delete, before, after)
    orders = []
    if "source" in names:
        source = envelope.column("source")
        kids = {source.type.field(k).name for k in range(source.type.num_fields)}
        orders += [pc.struct_field(source, k).cast(pa.int64()) for k in ("lsn", "ts_ms") if k in kids]
    if "ts_ms" in names:
        orders.append(envelope.column("ts_ms").cast(pa.int64()))
    seq = pc.coalesce(*orders) if orders else pa.nulls(len(op), pa.int64())
    image = image.combine_chunks() if isinstance(image, pa.ChunkedArray) else image
    rows = pa.RecordBatch.from_arrays(image.flatten(), names=[f.name for f in image.type])
    return rows, op, seq, usable


__all__ = ["debezium_changes", "reader_schema", "registry_column", "row_struct", "widened", "without_bad"]
