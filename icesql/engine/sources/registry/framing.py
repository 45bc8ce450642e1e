"""A column of Kafka records framed by a Confluent Schema Registry, decoded into the source's rows.

Each record names its writer schema in one of three ways (what Confluent's serializers write):

* the 5-byte prefix: magic byte 0, then the schema id (4 bytes, big-endian);
* the 17-byte GUID prefix: magic byte 1, then the schema's GUID (16 bytes);
* a header, ``__value_schema_id`` (``__key_schema_id`` for keys), holding either form, and the
  payload is then the body alone.

Protobuf's message-index list follows the id (in the payload, or in the header after the id): it
stays at the front of the body the Protobuf decoder reads (``kinds``).

The records of a batch are grouped by writer schema, each group decoded at once by its type's
decoder (``kinds.decoder(writer, reader)``, cached per writer), and the rows put back in the
records' order. A record that cannot be read (no framing, a truncated or corrupt body) is a null
row and a ``(index, reason)`` in ``bad``: the source applies ON ERROR to it. Writer schemas come
from the registry once per id (``connections.registry``), so a registry that goes down after
the ids are known does not stop a sink; one that is down for an id not yet known raises its
transient ``RegistryUnavailableError``, and the supervisor retries the sink.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from icesql.engine.connections.registry import RegisteredSchema, RegistryNotFoundError
from icesql.engine.sources.registry import kinds

VALUE_HEADER = "__value_schema_id"
KEY_HEADER = "__key_schema_id"


class Unframed(ValueError):
    """A record whose bytes name no schema (why, for the dead-letter reason)."""


@dataclass(frozen=True)
class SchemaRef:
    """A writer schema as a record names it: by id or by GUID."""

    id: int | None = None
    guid: str | None = None

    def __str__(self) -> str:
        return f"schema id {self.id}" if self.id is not None else f"schema GUID {self.guid}"


def split(payload: bytes, header: bytes | None = None) -> tuple[SchemaRef, bytes]:
    """(the writer schema a record names, its body) from its value and its schema-id header."""
    if header is not None:
        ref, rest = _ref(header, "header")
        return ref, rest + payload  # the header's rest: Protobuf's message indexes
    return _ref(payload, "value")


def _ref(data: bytes, where: str) -> tuple[SchemaRef, bytes]:
    if not data:
        raise Unframed(f"an empty {where}: no schema id")
    magic = data[0]
    if magic == 0:
        if len(data) < 5:
            raise Unframed(f"a {where} of {len(data)} byte(s): too short for a schema id")
        return SchemaRef(id=struct.unpack(">I", data[1:5])[0]), data[5:]
    if magic == 1:
        if len(data) < 17:
            raise Unframed(f"a {where} of {len(data)} byte(s): too short for a schema GUID")
        return SchemaRef(guid=str(uuid.UUID(bytes=data[1:17]))), data[17:]
    raise Unframed(f"magic byte {magic} (a schema registry's records begin with 0 or 1)")


def _header(headers: Any, key: str) -> bytes | None:
    for h in headers or ():
        if h.get("key") == key:
            value = h.get("value")
            return bytes(value) if value is not None else None
    return None


class RegistryColumn:
    """Decodes one column (the values, or the keys) of a Kafka source's records as ``reader``
    (the source's schema) reads them. ``client()`` makes the registry client (in the task that
    first needs it: the client holds sockets and travels as its config)."""

    def __init__(
        self, reader: RegisteredSchema, client: Callable[[], Any], *, header: str = VALUE_HEADER
    ) -> None:
        self.reader = reader
        self.client = client
        self.header = header
        self._client: Any = None
        self._decoders: dict[SchemaRef, Any] = {}
        self._columns: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None, "_decoders": {}}

    def columns(self) -> dict[str, Any]:
        """The Spark row schema (jsonValue form) of the rows this column gives (worked out once:
        every batch asks)."""
        if self._columns is None:
            self._columns = kinds.columns(self.reader)
        return self._columns

    def writer(self, ref: SchemaRef) -> RegisteredSchema:
        if self._client is None:
            self._client = self.client()
        if ref.id is not None:
            return self._client.schema_by_id(ref.id)
        return self._client.schema_by_guid(ref.guid)

    def decoder(self, ref: SchemaRef) -> Any:
        """The decoder of records written with ``ref``'s schema: ``kinds.Unresolvable`` when they
        cannot be read as the reader's; ``decode.NewColumnsError`` when the writer's schema widens
        the reader's (a new field, a promoted type): the sink restarts and reads it as its new
        reader schema (``kafka.registered.widened``), the table gaining the columns."""
        found = self._decoders.get(ref)
        if found is None:
            writer = self.writer(ref)
            named = f"{ref} (subject {writer.subject or '?'} version {writer.version or '?'})"
            if writer.id != self.reader.id and self.widens(writer):
                from icesql.engine.sources.decode import NewColumnsError

                new = widening(self.columns(), kinds.columns(writer))
                raise NewColumnsError("", new, what=f"records written with {named}")
            try:
                found = kinds.decoder(writer, self.reader)
            except kinds.Unresolvable as e:
                raise kinds.Unresolvable(
                    f"{named} cannot be read as subject {self.reader.subject or '?'} version "
                    f"{self.reader.version or '?'}: {e}"
                ) from None
            self._decoders[ref] = found
        return found

    def widens(self, writer: RegisteredSchema) -> bool:
        """Whether ``writer`` is a later version of the reader's subject that widens it: adds
        fields or promotes types, drops none, and the records read so far resolve to it - what
        the sink reads as its new schema when it restarts (``kafka.registered.widened``)."""
        try:
            now, wider = self.columns(), kinds.columns(writer)
            if not widening(now, wider) or widening(wider, now):
                return False
            kinds.decoder(self.reader, writer)
        except kinds.Unresolvable:
            return False
        subject, version = self.reader.subject, self.reader.version
        if subject is None or version is None:
            return False
        if writer.subject is not None and writer.version is not None:
            return bool(writer.subject == subject and writer.version > version)
        client = self._client
        latest = client.latest(subject)
        return any(
            client.version(subject, v).id == writer.id for v in range(version + 1, (latest.version or 0) + 1)
        )

    def decode(self, values: Any, headers: Any = None) -> tuple[Any, list[tuple[int, str]]]:
        """(one row per record - null for a null value or a bad record -, the bad records as
        ``(index, reason)``) of ``values`` (an Arrow binary column) and their ``headers``."""
        import numpy as np
        import pyarrow as pa

        from icesql.engine.sources.types import arrow_schema

        schema = arrow_schema(self.columns())
        n = len(values)
        groups, bad = self._groups(values, headers)
        where = np.full(n, -1, dtype=np.int64)
        batches: list[Any] = []
        taken = 0
        for ref, (at, bodies) in groups.items():
            try:
                decoder = self.decoder(ref)
            except RegistryNotFoundError:  # a record naming a schema the registry does not hold
                bad += [(int(i), f"{ref} is not in the schema registry") for i in at]
                continue
            except kinds.Unresolvable as e:  # ON ERROR decides: each record names the schemas
                bad += [(int(i), str(e)) for i in at]
                continue
            batch, failed = decoder.decode(bodies)
            good = np.ones(len(at), bool)
            for k, reason in failed:
                good[k] = False
                bad.append((int(at[k]), reason))
            where[at[good]] = taken + np.arange(int(good.sum()), dtype=np.int64)
            taken += batch.num_rows
            batches.append(batch)
        rows = pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()
        index = pa.array(where, mask=where < 0)
        out = rows.take(index) if rows.num_rows else _nulls(schema, n)
        batch = (
            out.combine_chunks().to_batches()[0] if out.num_rows else pa.RecordBatch.from_pylist([], schema)
        )
        return batch, sorted(bad)

    def _groups(
        self, values: Any, headers: Any
    ) -> tuple[dict[SchemaRef, tuple[Any, list[bytes]]], list[tuple[int, str]]]:
        return frame_groups(values, headers, self.header)


def frame_groups(
    values: Any, headers: Any, header: str = VALUE_HEADER
) -> tuple[dict[SchemaRef, tuple[Any, list[bytes]]], list[tuple[int, str]]]:
    """The records of ``values`` (an Arrow binary column) by the schema they name: {ref: (their
    indexes, their bodies)}, and the records that name none (null values are in neither). The
    5-byte prefix - nearly every record - is read for the whole column at once; the GUID prefix,
    a schema-id header (``header``, in ``headers``; None: no headers) or a short value one
    record at a time."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(values)
    values = values.cast(pa.binary()) if values.type != pa.binary() else values
    valid = np.asarray(values.is_valid())
    offsets = np.frombuffer(values.buffers()[1], np.int32)[values.offset : values.offset + n + 1].astype(
        np.int64
    )
    data = (
        np.frombuffer(values.buffers()[2], np.uint8)
        if values.buffers()[2] is not None
        else np.zeros(0, np.uint8)
    )
    starts, lengths = offsets[:-1], np.diff(offsets)
    prefixed = valid & (lengths >= 5)
    if prefixed.any():
        first = np.zeros(n, np.uint8)
        first[prefixed] = data[starts[prefixed]]
        prefixed &= first == 0
    if headers is not None and prefixed.any():
        listed = headers.flatten()
        named = pc.equal(listed.field("key"), header).fill_null(False)
        if pc.any(named).as_py():
            parents = np.asarray(pc.list_parent_indices(headers))[np.asarray(named)]
            prefixed[parents] = False  # a schema-id header names the schema: the slow path
    groups: dict[SchemaRef, tuple[Any, list[bytes]]] = {}
    at = np.nonzero(prefixed)[0]
    if len(at):
        s = starts[at]
        ids = (
            (data[s + 1].astype(np.int64) << 24)
            | (data[s + 2].astype(np.int64) << 16)
            | (data[s + 3].astype(np.int64) << 8)
            | data[s + 4].astype(np.int64)
        )
        bodies = pc.binary_slice(values.take(pa.array(at)), 5, 2**31 - 1).to_pylist()
        order = np.argsort(ids, kind="stable")
        unique, first_at = np.unique(ids[order], return_index=True)
        bounds = [*first_at.tolist(), len(order)]
        for k, sid in enumerate(unique.tolist()):
            chosen = order[bounds[k] : bounds[k + 1]]
            groups[SchemaRef(id=int(sid))] = (at[chosen], [bodies[j] for j in chosen.tolist()])
    bad: list[tuple[int, str]] = []
    rest = np.nonzero(valid & ~prefixed)[0]
    if len(rest):
        header_lists = (
            headers.take(pa.array(rest)).to_pylist() if headers is not None else [None] * len(rest)
        )
        slow: dict[SchemaRef, tuple[list[int], list[bytes]]] = {}
        for i, payload, listed_headers in zip(
            rest.tolist(), values.take(pa.array(rest)).to_pylist(), header_lists, strict=True
        ):
            try:
                ref, body = split(payload, _header(listed_headers, header))
            except Unframed as e:
                bad.append((i, str(e)))
                continue
            where, bodies_of = slow.setdefault(ref, ([], []))
            where.append(i)
            bodies_of.append(body)
        for ref, (where, bodies_of) in slow.items():
            if ref in groups:
                old_at, old_bodies = groups[ref]
                merged = np.concatenate([old_at, np.array(where, np.int64)])
                order = np.argsort(merged, kind="stable")
                both = old_bodies + bodies_of
                groups[ref] = (merged[order], [both[j] for j in order.tolist()])
            else:
                groups[ref] = (np.array(where, np.int64), bodies_of)
    return groups, bad


PROMOTIONS = {
    ("integer", "long"),
    ("float", "double"),
    ("integer", "double"),
    ("long", "double"),
    ("integer", "float"),
    ("long", "float"),
}


def widening(reader: dict[str, Any], writer: dict[str, Any], path: str = "") -> list[str]:
    """The columns (paths) ``writer``'s rows add to ``reader``'s or widen (a promoted type): both
    Spark row schemas (jsonValue form). Empty when the writer's rows fit the reader's."""
    found: list[str] = []
    mine = {f["name"]: f for f in reader.get("fields", [])}
    for f in writer.get("fields", []):
        name = f"{path}{f['name']}"
        had = mine.get(f["name"])
        if had is None:
            found.append(name)
            continue
        a, b = had["type"], f["type"]
        if isinstance(a, dict) and isinstance(b, dict) and a.get("type") == b.get("type") == "struct":
            found += widening(a, b, name + ".")
        elif (a, b) in PROMOTIONS:
            found.append(f"{name} ({a} to {b})")
    return found


def _nulls(schema: Any, n: int) -> Any:
    import pyarrow as pa

    return pa.table([pa.nulls(n, f.type) for f in schema], schema=schema.with_metadata(None))


__all__ = [
    "KEY_HEADER",
    "VALUE_HEADER",
    "RegistryColumn",
    "SchemaRef",
    "Unframed",
    "frame_groups",
    "split",
    "widening",
]
