"""Debezium's change events in Avro through a Confluent Schema Registry, one subject per topic ->
one Arrow slice per table (issue 53).

A registry source of many topics without VALUE SUBJECT (``KafkaSourceSpec.schema_per_topic``)
keeps its records whole (``decode.MESSAGE_COLUMNS``, the framed bytes); a routed sink splits a
batch of them here, as ``connect.split_messages`` splits Kafka Connect JSON, and returns the same
``connect.Split``:

* each value's writer schema is the one its framing names (``framing.frame_groups``: the 5-byte
  prefix or the GUID form), fetched from the registry once per id (``connections.registry``'s
  cached client); the records of one schema are decoded in one call by the schema type's decoder
  (``kinds.decoder(writer, writer)``: each record read as it was written);
* the Debezium envelope gives each change's row image, op and order (``kafka.registered.
  debezium_changes``: ``before`` for a delete, ``after`` otherwise), and its ``source`` block the
  ``{db}``, ``{schema}`` and ``{table}`` of the sink's template (``{topic}``: the record's topic);
* the table's columns are the fields of the ``after`` record, typed as the decoder gives them
  (Spark's types for Avro's, logical types included); a later schema with a new field widens the
  table (``connect.merge_field``);
* the key: Debezium registers keys under ``<topic>-key``, an Avro record of the primary-key
  fields. A record key framed by the registry (magic byte 0 or 1) names its schema, whose fields
  are the table's KEY; a key without the framing (or none) leaves the sink's KEY, as for
  Kafka Connect JSON. Only the key schema's field names are read: the key's values are the row's.

A null value (the tombstone Debezium writes after a delete) carries no row. A record that cannot be
read - no framing, a schema id the registry does not hold, a truncated body, a key field that is
not a column, a key that differs from its table's - is a ``(row, reason)`` in ``bad``; the other
records of the batch, and the other tables, are not affected. Nested columns (a record, array or
map field) are not built yet: such a schema's records are bad, with that reason.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from icesql.engine.base.changelog import BLK, FILE, LINE, OP, SEQ
from icesql.engine.connections.registry import RegisteredSchema, RegistryNotFoundError
from icesql.engine.sources.connect import (
    MESSAGE_ROW,
    ConnectField,
    MessageError,
    Split,
    TableSlice,
    merge_field,
)
from icesql.engine.sources.registry import kinds
from icesql.engine.sources.registry.framing import KEY_HEADER, SchemaRef, frame_groups
from icesql.errors import ExecutionError
from icesql.routing import RoutingError, TableNames, TableTemplate


def splitter(relation: Any) -> RegistrySplit:
    """The split of a routed sink reading ``relation`` (a registry source with a schema per
    topic): its records' schemas come from the source's registry connection."""
    from icesql.engine.connections.registry import client_for

    config = getattr(relation.binding, "registry", None)
    if config is None:  # pragma: no cover - the binder gives every registry source its config
        raise ExecutionError(f"source {relation.name} reads a schema registry without its connection")
    return RegistrySplit(functools.partial(client_for, config))


class Schema:
    """A writer schema of change events: its decoder, and the ``after`` record's fields."""

    def __init__(self, ref: SchemaRef, writer: RegisteredSchema) -> None:
        self.ref = ref
        self.decoder = kinds.decoder(writer, writer)
        envelope = kinds.columns(writer)
        after = next((f for f in envelope.get("fields", ()) if f["name"] == "after"), None)
        if after is None or not isinstance(after["type"], dict) or after["type"].get("type") != "struct":
            raise MessageError(f"{ref} is not a Debezium change event (no 'after' record)")
        self.fields: list[ConnectField] = []
        for f in after["type"]["fields"]:
            if not isinstance(f["type"], str):
                raise MessageError(
                    f"field '{f['name']}' of {ref} is a nested {f['type'].get('type')}: a routed sink does not "
                    "read nested columns yet"
                )
            self.fields.append(ConnectField(f["name"], f["type"], "plain"))
        self.names = {f.name.lower(): f.name for f in self.fields}


class RegistrySplit:
    """``split_messages`` for records framed by a schema registry (see the module's docstring);
    the writer schemas and decoders it met are kept, per id, for the sink's life."""

    def __init__(self, client: Callable[[], Any]) -> None:
        self.client = client
        self.schemas: dict[SchemaRef, Schema | str] = {}  # a schema, or why its records are bad
        self.keys: dict[SchemaRef, tuple[str, ...] | str] = {}  # a key schema's fields, or why not

    def writer(self, ref: SchemaRef) -> RegisteredSchema:
        client = self.client()
        return client.schema_by_id(ref.id) if ref.id is not None else client.schema_by_guid(ref.guid)

    def schema(self, ref: SchemaRef) -> Schema | str:
        found = self.schemas.get(ref)
        if found is None:
            try:
                found = Schema(ref, self.writer(ref))
            except RegistryNotFoundError:
                found = f"{ref} is not in the schema registry"
            except (kinds.Unresolvable, MessageError) as e:
                found = f"{ref}: {e}"
            self.schemas[ref] = found
        return found

    def key_fields(self, ref: SchemaRef) -> tuple[str, ...] | str:
        found = self.keys.get(ref)
        if found is None:
            try:
                found = tuple(f["name"] for f in kinds.columns(self.writer(ref)).get("fields", ()))
            except RegistryNotFoundError:
                found = f"its key's {ref} is not in the schema registry"
            except kinds.Unresolvable as e:
                found = f"its key's {ref}: {e}"
            self.keys[ref] = found
        return found

    def record_keys(self, keys: Any) -> list[tuple[str, ...] | str | None]:
        """Per record: its key's fields (a key framed by the registry), why its key cannot be read,
        or None (no key, or one without the framing: the sink's KEY applies)."""
        import pyarrow as pa

        out: list[tuple[str, ...] | str | None] = [None] * len(keys)
        if keys.type != pa.binary():
            return out  # keys that are not bytes are not framed
        groups, _ = frame_groups(keys, None, KEY_HEADER)  # a key without the framing: no record key
        for ref, (at, _) in groups.items():
            fields = self.key_fields(ref)
            for i in at.tolist():
                out[i] = fields
        return out

    def __call__(
        self, batch: Any, template: TableTemplate, *, topics: bool, fallback_key: Sequence[str] = ()
    ) -> Split:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from icesql.engine.sources.kafka.registered import debezium_changes

        out = Split()
        values = _array(batch.column("value"))
        if values.type != pa.binary():
            values = values.cast(pa.binary())
        groups, bad = frame_groups(values, None)
        out.bad += bad
        record_keys = self.record_keys(_array(batch.column("key")))
        position = {n: batch.column(n).to_pylist() for n in (FILE,)}
        names_of = TableNames(template)
        picked: dict[tuple[str, SchemaRef], tuple[Any, Any, Any, Any, list[int]]] = {}
        merged: set[tuple[str, SchemaRef]] = set()
        for ref, (at, bodies) in groups.items():
            schema = self.schema(ref)
            if isinstance(schema, str):
                out.bad += [(int(i), schema) for i in at]
                continue
            decoded, failed = schema.decoder.decode(bodies)
            good = [True] * len(at)
            for k, reason in failed:
                good[k] = False
                out.bad.append((int(at[k]), reason))
            rows_at = at[np.array(good, bool)]
            rows, op, seq, usable = debezium_changes(decoded)
            where = _where(decoded)
            for j, (i, ok) in enumerate(zip(rows_at.tolist(), usable.to_pylist(), strict=True)):
                try:
                    if not ok:
                        raise MessageError("a change event without a known op or its row image")
                    record_key = record_keys[i]
                    if isinstance(record_key, str):
                        raise MessageError(record_key)
                    name = names_of(position[FILE][i] if topics else None, *where[j])
                    key = _key(schema, record_key, fallback_key)
                    piece = out.tables.get(name)
                    if piece is None:
                        piece = out.tables[name] = TableSlice(name, key)
                    elif key and piece.key and key != piece.key:
                        raise MessageError(f"its key ({', '.join(key)}) differs from ({', '.join(piece.key)})")
                    if (name, ref) not in merged:
                        for f in schema.fields:
                            merge_field(piece, f)
                        merged.add((name, ref))
                    picked.setdefault((name, ref), (rows, op, seq, rows_at, []))[4].append(j)
                except (MessageError, RoutingError) as e:
                    out.bad.append((i, str(e)))
        for (name, _), (rows, op, seq, rows_at, js) in picked.items():
            take = pa.array(js, pa.int64())
            at = pa.array(rows_at[js])
            part = pa.Table.from_batches([rows]).take(take)
            for n, column in (
                (OP, op.take(take)),
                (SEQ, seq.take(take)),
                (FILE, batch.column(FILE).take(at)),
                (BLK, batch.column(BLK).take(at)),
                (LINE, batch.column(LINE).take(at)),
                (MESSAGE_ROW, pc.cast(at, pa.int64())),
            ):
                part = part.append_column(n, column)
            out.tables[name].parts.append(part)
        out.bad.sort()
        return out


def _key(schema: Schema, record_key: tuple[str, ...] | None, fallback_key: Sequence[str]) -> tuple[str, ...]:
    """A change's KEY: its record key's fields (as the row's columns are spelled), else the sink's
    KEY where the row has all of its columns, else none."""
    if record_key:
        missing = [k for k in record_key if k.lower() not in schema.names]
        if missing:
            raise MessageError(f"its key field '{missing[0]}' is not a column of the change's row")
        return tuple(schema.names[k.lower()] for k in record_key)
    key = tuple(schema.names[k.lower()] for k in fallback_key if k.lower() in schema.names)
    return key if len(key) == len(fallback_key) else ()


def _where(decoded: Any) -> list[tuple[str | None, str | None, str | None]]:
    """Per change event: its ``source`` block's db, schema and table (None where it has none)."""
    import pyarrow.compute as pc

    n = decoded.num_rows
    if "source" not in decoded.schema.names:
        return [(None, None, None)] * n
    source = decoded.column("source")
    kids = {source.type.field(k).name for k in range(source.type.num_fields)}
    columns = [
        [None if v is None else str(v) for v in pc.struct_field(source, k).to_pylist()] if k in kids else [None] * n
        for k in ("db", "schema", "table")
    ]
    return list(zip(*columns, strict=True))


def _array(column: Any) -> Any:
    """One Arrow array of a table's column (its chunks combined)."""
    return column.combine_chunks() if hasattr(column, "combine_chunks") else column


__all__ = ["RegistrySplit", "Schema", "splitter"]
