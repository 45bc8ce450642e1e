"""The schema types a registry holds, each a decoder class in its own module (one registry entry per
type, as ``sources.kinds`` registers source kinds).

Contract every decoder keeps (both executors call it; it needs no Spark):

- ``columns(schema) -> dict``: the Spark row schema (``StructType.jsonValue()`` form) of the rows a
  schema gives; its Arrow form is ``sources.types.arrow_schema(columns)``.
- ``Decoder(writer, reader)``: records written with ``writer``, read as ``reader`` (the source's
  schema) by the format's resolution rules; raises ``Unresolvable`` when no record of ``writer`` can
  be read as ``reader`` (a removed field without a default, a type change), naming the field.
- ``Decoder.decode(bodies) -> (pa.RecordBatch, bad)``: the records' bodies with the framing already
  stripped; the batch has one row per good body, in order, with exactly
  ``arrow_schema(columns(reader))``; ``bad`` lists ``(index, reason)`` for bodies that do not
  decode (truncated, corrupt), which the source reports or sends to the dead-letter table.

What a body is, per type: AVRO - the Avro binary datum; JSON - the UTF-8 JSON text of one record;
PROTOBUF - the message-index list (a zigzag-varint count, then that many zigzag-varint indexes into
the writer's file, nested types after their parent; the single byte 0 for the file's first
message), THEN the message bytes: the framing strips only the 5-byte prefix (or the GUID form's),
and the Protobuf decoder reads the list to pick the writer's message.
"""

from __future__ import annotations

import importlib
from typing import Any

from icesql.engine.connections.registry import RegisteredSchema

DECODERS = {
    "AVRO": "icesql.engine.sources.registry.avro:AvroDecoder",
    "PROTOBUF": "icesql.engine.sources.registry.protobuf:ProtobufDecoder",
    "JSON": "icesql.engine.sources.registry.jsonschema:JsonSchemaDecoder",
}


class Unresolvable(Exception):
    """Records of one schema cannot be read as another (the message names the field and why)."""


def decoder_class(schema_type: str) -> Any:
    path = DECODERS.get((schema_type or "AVRO").upper())
    if path is None:
        raise Unresolvable(f"schema type '{schema_type}' is not one of {', '.join(DECODERS)}")
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def columns(schema: RegisteredSchema) -> dict[str, Any]:
    """The Spark row schema (jsonValue form) of the rows ``schema`` gives."""
    return decoder_class(schema.schema_type).columns(schema)


def decoder(writer: RegisteredSchema, reader: RegisteredSchema) -> Any:
    if (writer.schema_type or "AVRO").upper() != (reader.schema_type or "AVRO").upper():
        raise Unresolvable(f"a {writer.schema_type} schema cannot be read as {reader.schema_type}")
    return decoder_class(reader.schema_type)(writer, reader)


__all__ = ["DECODERS", "Unresolvable", "columns", "decoder", "decoder_class"]
