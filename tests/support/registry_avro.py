"""Avro records for the Schema Registry decoder tests: schemas built in a line, bodies written by
fastavro, and a decode that checks the batch's schema against the contract every time."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pyarrow as pa

from icesql.engine.connections.registry import RegisteredSchema
from icesql.engine.sources.registry.avro import AvroDecoder
from icesql.engine.sources.types import arrow_schema


def reg(schema: Any, referenced: tuple[tuple[str, str], ...] = ()) -> RegisteredSchema:
    return RegisteredSchema("AVRO", json.dumps(schema), referenced=referenced)


def record(*fields: tuple[str, Any], name: str = "R", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "record", "name": name, "fields": []}
    for f in fields:
        field = {"name": f[0], "type": f[1]}
        if len(f) > 2:
            field.update(f[2])
        out["fields"].append(field)
    out.update(extra)
    return out


def encode(schema: Any, rows: list[dict[str, Any]], named: dict[str, Any] | None = None) -> list[bytes]:
    parsed = fastavro.parse_schema(schema, named_schemas=named if named is not None else {})
    bodies = []
    for row in rows:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, row)
        bodies.append(buf.getvalue())
    return bodies


def decode(writer: Any, reader: Any, bodies: list[bytes]) -> tuple[pa.RecordBatch, list[tuple[int, str]]]:
    w, r = (s if isinstance(s, RegisteredSchema) else reg(s) for s in (writer, reader))
    batch, bad = AvroDecoder(w, r).decode(bodies)
    assert batch.schema == arrow_schema(AvroDecoder.columns(r))
    return batch, bad


def roundtrip(schema: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    batch, bad = decode(schema, schema, encode(schema, rows))
    assert bad == []
    return batch.to_pylist()


def field(name: str, t: Any, nullable: bool) -> dict[str, Any]:
    return {"name": name, "type": t, "nullable": nullable, "metadata": {}}
