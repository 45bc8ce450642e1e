"""Debezium change events in Kafka Connect's JSON with ``schemas.enable`` -> one Arrow slice per table.

A routed sink (issue 53) reads events whose schemas come with them: each message is
``{"schema": {...}, "payload": {...}}`` with Debezium's envelope inside (``before``, ``after``,
``source``, ``op``, ``ts_ms``); the record key, when there is one, is Kafka Connect JSON too (its
struct's fields are the table's primary key). ``split_messages`` reads a batch's messages (the
``decode.MESSAGE_COLUMNS`` and the changelog's position columns), names each event's table from the
sink's template, and returns per table its rows (typed by the ``after`` field's schema, in the
changelog's shape: ``__op``, ``__seq``, the position) with their Spark schema and key; messages
that cannot be read are returned apart, each with a one-line reason.

Kafka Connect's types map as Debezium's documentation says: int8/16/32 -> int, int64 -> long,
float32 -> float, float64 -> double, boolean, string, bytes (base64 in JSON) -> binary; the logical
types ``Decimal`` (base64 of the unscaled big-endian integer) -> decimal(p, s), ``Date`` and
``io.debezium.time.Date`` (days) -> date, ``Time`` / ``io.debezium.time.Time`` (ms), ``MicroTime``
(us), ``NanoTime`` (ns) -> time, ``Timestamp`` / ``io.debezium.time.Timestamp`` (ms),
``MicroTimestamp`` (us), ``NanoTimestamp`` (ns) -> timestamp_ntz (Debezium writes a column without a
zone as its wall-clock value), ``ZonedTimestamp`` (ISO-8601 text) -> timestamp (an instant). Nested
structs, arrays and maps are kept as their JSON text.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Context, Decimal
from typing import Any

from icesql.engine.base.changelog import BLK, FILE, LINE, OP, SEQ
from icesql.routing import RoutingError, TableTemplate

_EPOCH = dt.datetime(1970, 1, 1)
_DAY0 = dt.date(1970, 1, 1)
_EXACT = Context(prec=1000)

# Kafka Connect's primitive types -> Spark's type names
_PRIMITIVE = {
    "int8": "integer",
    "int16": "integer",
    "int32": "integer",
    "int64": "long",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "binary",
}
_DATES = {"org.apache.kafka.connect.data.Date", "io.debezium.time.Date"}
# logical time of day: its unit per tick, in microseconds
_TIMES = {
    "org.apache.kafka.connect.data.Time": 1000,
    "io.debezium.time.Time": 1000,
    "io.debezium.time.MicroTime": 1,
    "io.debezium.time.NanoTime": 0.001,
}
_TIMESTAMPS = {
    "org.apache.kafka.connect.data.Timestamp": 1000,
    "io.debezium.time.Timestamp": 1000,
    "io.debezium.time.MicroTimestamp": 1,
    "io.debezium.time.NanoTimestamp": 0.001,
}
_ZONED = "io.debezium.time.ZonedTimestamp"
_DECIMAL = "org.apache.kafka.connect.data.Decimal"
_WIDER = {("integer", "long"), ("float", "double")}


MESSAGE_ROW = "__message_row"  # a change's row in the batch of messages (its dead letter's raw text)


class MessageError(ValueError):
    """A message that cannot be read (its one-line reason)."""


@dataclass(frozen=True)
class ConnectField:
    name: str
    spark: str  # the Spark type name the table's column gets
    kind: str  # how a JSON value becomes that type: a key of ``_CONVERT``
    unit: float = 1
    scale: int = 0


@dataclass
class TableSlice:
    """One table's rows of a batch."""

    table: str
    key: tuple[str, ...]
    fields: dict[str, ConnectField] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    # rows decoded in bulk (``connect_bulk``): Arrow tables of some of ``fields`` (their own
    # types), the changelog's columns and ``MESSAGE_ROW``
    parts: list[Any] = field(default_factory=list)

    def spark_schema_json(self) -> dict[str, Any]:
        return {
            "type": "struct",
            "fields": [
                {"name": f.name, "type": f.spark, "nullable": f.name not in self.key, "metadata": {}}
                for f in self.fields.values()
            ],
        }

    def message_rows(self) -> list[int]:
        """The rows of the batch's messages this slice holds, in order."""
        rows = [r[MESSAGE_ROW] for r in self.rows]
        for part in self.parts:
            rows += part.column(MESSAGE_ROW).to_pylist()
        return sorted(rows)

    def arrow(self) -> Any:
        """The rows in the changelog's shape (data columns, then ``__op``, ``__seq``, position),
        in the batch's order."""
        import pyarrow as pa

        from icesql.engine.sources.types import arrow_schema

        data = arrow_schema(self.spark_schema_json())
        extra = [(OP, pa.string()), (SEQ, pa.int64()), (FILE, pa.string()), (BLK, pa.int64()), (LINE, pa.int64())]
        names = [*data.names, *(n for n, _ in extra)]
        tables = []
        if self.rows or not self.parts:
            columns = [pa.array([r.get(f.name) for r in self.rows], f.type) for f in data]
            columns += [pa.array([r[n] for r in self.rows], t) for n, t in extra]
            columns.append(pa.array([r[MESSAGE_ROW] for r in self.rows], pa.int64()))
            tables.append(pa.Table.from_arrays(columns, names=[*names, MESSAGE_ROW]))
        for part in self.parts:
            have = set(part.column_names)
            columns = [
                part.column(f.name).cast(f.type, safe=not pa.types.is_floating(f.type)) if f.name in have else pa.nulls(part.num_rows, f.type)
                for f in data
            ]
            columns += [part.column(n).cast(t) for n, t in extra]
            columns.append(part.column(MESSAGE_ROW).cast(pa.int64()))
            tables.append(pa.Table.from_arrays(columns, names=[*names, MESSAGE_ROW]))
        out = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        if len(tables) > 1:
            out = out.sort_by(MESSAGE_ROW)
        return out.drop_columns([MESSAGE_ROW])


def connect_field(schema: Mapping[str, Any]) -> ConnectField:
    """A field of a Kafka Connect struct schema as the column it becomes."""
    name = str(schema.get("field", ""))
    logical = schema.get("name")
    kind = schema.get("type")
    if logical == _DECIMAL:
        params = schema.get("parameters") or {}
        scale = int(params.get("scale", 0))
        precision = min(38, int(params.get("connect.decimal.precision", 38)))
        return ConnectField(name, f"decimal({precision},{scale})", "decimal", scale=scale)
    if logical in _DATES:
        return ConnectField(name, "date", "date")
    if logical in _TIMES:
        return ConnectField(name, "time", "time", unit=_TIMES[logical])
    if logical in _TIMESTAMPS:
        return ConnectField(name, "timestamp_ntz", "timestamp", unit=_TIMESTAMPS[logical])
    if logical == _ZONED:
        return ConnectField(name, "timestamp", "zoned")
    if kind in _PRIMITIVE:
        return ConnectField(name, _PRIMITIVE[str(kind)], "bytes" if kind == "bytes" else "plain")
    if kind in ("struct", "array", "map"):
        return ConnectField(name, "string", "json")
    raise MessageError(f"field '{name}' has Kafka Connect type {kind!r}, which icesql cannot map")


def _convert(f: ConnectField, value: Any) -> Any:
    if value is None:
        return None
    if f.kind == "plain":
        return value
    if f.kind == "bytes":
        return base64.b64decode(value)
    if f.kind == "decimal":
        raw = base64.b64decode(value) if isinstance(value, str) else bytes(value)
        # exact: the default context's 28 digits would round a decimal(38) (or a wider value)
        return Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-f.scale, _EXACT)
    if f.kind == "date":
        return _DAY0 + dt.timedelta(days=int(value))
    if f.kind == "time":
        micros = int(int(value) * f.unit)
        return (dt.datetime.min + dt.timedelta(microseconds=micros)).time()
    if f.kind == "timestamp":
        return _EPOCH + dt.timedelta(microseconds=int(int(value) * f.unit))
    if f.kind == "zoned":
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(dt.timezone.utc)
    return json.dumps(value, separators=(",", ":"))  # a nested value: its JSON text


def struct_fields(schema: Any, what: str) -> list[ConnectField]:
    if not isinstance(schema, Mapping) or schema.get("type") != "struct":
        raise MessageError(f"the {what} schema is not a Kafka Connect struct")
    return [connect_field(f) for f in schema.get("fields") or ()]


def _wrapped(text: str | None, what: str) -> tuple[Any, Any]:
    """(schema, payload) of a Kafka Connect JSON message with ``schemas.enable``."""
    if text is None:
        raise MessageError(f"the {what} is empty")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise MessageError(f"the {what} is not JSON ({e.msg} at {e.pos})") from None
    if not isinstance(doc, Mapping) or "schema" not in doc or "payload" not in doc:
        raise MessageError(
            f"the {what} has no schema block: a routed sink reads Kafka Connect JSON with "
            "schemas.enable ({\"schema\": ..., \"payload\": ...})"
        )
    return doc["schema"], doc["payload"]


def _event(value: str | None) -> tuple[list[ConnectField], Mapping[str, Any]]:
    schema, payload = _wrapped(value, "message")
    if not isinstance(payload, Mapping) or payload.get("op") not in ("c", "u", "d", "r"):
        raise MessageError("the message is not a Debezium change event (no op c, u, d or r)")
    fields = {f.get("field"): f for f in (schema.get("fields") or ()) if isinstance(f, Mapping)}
    image = fields.get("after") or fields.get("before")
    if image is None:
        raise MessageError("the message's schema has no 'after' (or 'before') field")
    return struct_fields(image, "'after'"), payload


def record_key(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    schema, _ = _wrapped(text, "record key")
    return tuple(f.name for f in struct_fields(schema, "record key"))


@dataclass
class Split:
    """A batch's messages, split by table."""

    tables: dict[str, TableSlice] = field(default_factory=dict)
    bad: list[tuple[int, str]] = field(default_factory=list)  # (row of the batch, reason)


def split_messages(
    batch: Any, template: TableTemplate, *, topics: bool, fallback_key: Sequence[str] = ()
) -> Split:
    """``batch`` (an Arrow table of messages) split by the table each event's template names.
    ``topics``: the position's ``__file`` is the record's topic (a Kafka source; a FILES source's
    is its file, and ``{topic}`` has no value). ``fallback_key``: the sink's KEY, for records that
    carry no key."""
    out = Split()
    cols = {n: batch.column(n).to_pylist() for n in ("key", "value", FILE, BLK, LINE)}
    for i in range(batch.num_rows):
        decode_one(out, cols, i, template, topics=topics, fallback_key=fallback_key)
    return out


def decode_one(
    out: Split, cols: Mapping[str, Sequence[Any]], i: int, template: TableTemplate, *, topics: bool,
    fallback_key: Sequence[str] = (),
) -> None:
    """Message ``i`` of ``cols`` (the batch's columns as lists) into ``out``: its row in its table's
    slice, or its reason in ``out.bad``."""
    try:
        fields, payload = _event(cols["value"][i])
        names = {f.name.lower(): f.name for f in fields}
        key = record_key(cols["key"][i]) or tuple(names[k.lower()] for k in fallback_key if k.lower() in names)
        if len(key) != len(fallback_key) and not cols["key"][i]:
            key = ()  # the sink's KEY is not this table's: the record has no key
        block = payload.get("source")
        source: Mapping[str, Any] = block if isinstance(block, Mapping) else {}
        values = {
            "topic": cols[FILE][i] if topics else None,
            "db": _text(source.get("db")),
            "schema": _text(source.get("schema")),
            "table": _text(source.get("table")),
        }
        name = template.resolve(values)
        op = payload["op"]
        image = payload.get("before" if op == "d" else "after")
        if not isinstance(image, Mapping):
            raise MessageError(f"a '{op}' event without its {'before' if op == 'd' else 'after'} image")
        seq = _first_int(source.get("lsn"), source.get("ts_ms"), payload.get("ts_ms"))
        piece = out.tables.get(name)
        if piece is None:
            piece = out.tables[name] = TableSlice(name, key)
        elif key and piece.key and key != piece.key:
            raise MessageError(f"its key ({', '.join(key)}) differs from ({', '.join(piece.key)})")
        row = {OP: op, SEQ: seq, FILE: cols[FILE][i], BLK: cols[BLK][i], LINE: cols[LINE][i], MESSAGE_ROW: i}
        for f in fields:
            merge_field(piece, f)
            row[f.name] = _convert(f, image.get(f.name))
        piece.rows.append(row)
    except (MessageError, RoutingError) as e:
        out.bad.append((i, str(e)))
    except (ValueError, TypeError, OverflowError) as e:
        out.bad.append((i, f"a value cannot be read: {e}"))


def merge_field(piece: TableSlice, f: ConnectField) -> None:
    """A field of one message into its table's columns: new fields are added (schema evolution),
    a field seen with a narrower type is widened."""
    old = piece.fields.get(f.name)
    if old is None or old.spark == f.spark:
        piece.fields[f.name] = f if old is None else old
        return
    if (old.spark, f.spark) in _WIDER:
        piece.fields[f.name] = f
    elif (f.spark, old.spark) not in _WIDER:
        raise MessageError(f"field '{f.name}' is {f.spark} here and {old.spark} in an earlier event")


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


def _first_int(*values: Any) -> int | None:
    for v in values:
        if isinstance(v, int):
            return v
    return None


__all__ = [
    "MESSAGE_ROW",
    "ConnectField",
    "MessageError",
    "Split",
    "TableSlice",
    "connect_field",
    "merge_field",
    "record_key",
    "split_messages",
    "struct_fields",
]
