"""Debezium change events in Kafka Connect's JSON with ``schemas.enable``, for routed-sink tests
(issue 53): what Debezium writes when its converter is ``JsonConverter`` with schemas on - a
``{"schema", "payload"}`` value with the envelope inside, and a key of the same shape."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

# column type -> (Kafka Connect field schema without "field")
TYPES: dict[str, dict[str, Any]] = {
    "int": {"type": "int32"},
    "long": {"type": "int64"},
    "short": {"type": "int16"},
    "double": {"type": "float64"},
    "bool": {"type": "boolean"},
    "string": {"type": "string"},
    "date": {"type": "int32", "name": "io.debezium.time.Date"},
    "ts": {"type": "int64", "name": "io.debezium.time.MicroTimestamp"},
    "zoned": {"type": "string", "name": "io.debezium.time.ZonedTimestamp"},
    "time": {"type": "int64", "name": "io.debezium.time.MicroTime"},
    "decimal": {
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "2", "connect.decimal.precision": "10"},
    },
}


def struct(columns: Sequence[tuple[str, str]], name: str, key: Sequence[str] = (), field: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "struct",
        "fields": [{**TYPES[t], "optional": c not in key, "field": c} for c, t in columns],
        "optional": field is not None,
        "name": name,
    }
    if field is not None:
        out["field"] = field
    return out


def encode(value: Any, kind: str) -> Any:
    """A Python value as Kafka Connect's JSON writes it for ``kind``."""
    import base64

    if value is None:
        return None
    if kind == "decimal":
        unscaled = int(round(value * 100))
        n = max(1, (unscaled.bit_length() + 8) // 8)
        return base64.b64encode(unscaled.to_bytes(n, "big", signed=True)).decode()
    return value


def event(
    db: str,
    table: str,
    columns: Sequence[tuple[str, str]],
    key: Sequence[str],
    op: str,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    lsn: int,
) -> tuple[str, str]:
    """(key JSON, value JSON) of one change event of ``db.table``."""
    kinds = dict(columns)
    row = struct(columns, f"srv.{db}.{table}.Value", key)

    def image(r: Mapping[str, Any] | None) -> Any:
        return None if r is None else {c: encode(r.get(c), kinds[c]) for c, _ in columns}

    value_schema = {
        "type": "struct",
        "name": f"srv.{db}.{table}.Envelope",
        "optional": False,
        "fields": [
            {**row, "field": "before", "optional": True},
            {**row, "field": "after", "optional": True},
            {
                "type": "struct",
                "field": "source",
                "optional": False,
                "fields": [
                    {"type": "string", "field": "db", "optional": False},
                    {"type": "string", "field": "schema", "optional": True},
                    {"type": "string", "field": "table", "optional": True},
                    {"type": "int64", "field": "lsn", "optional": True},
                ],
            },
            {"type": "string", "field": "op", "optional": False},
            {"type": "int64", "field": "ts_ms", "optional": True},
        ],
    }
    payload = {
        "before": image(before),
        "after": image(after),
        "source": {"db": db, "schema": "public", "table": table, "lsn": lsn},
        "op": op,
        "ts_ms": 1_700_000_000_000 + lsn,
    }
    r = after if after is not None else before
    assert r is not None
    key_schema = struct([(c, kinds[c]) for c in key], f"srv.{db}.{table}.Key", key)
    key_json = json.dumps({"schema": key_schema, "payload": {c: encode(r[c], kinds[c]) for c in key}})
    return key_json, json.dumps({"schema": value_schema, "payload": payload})
