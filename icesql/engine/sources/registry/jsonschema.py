"""FORMAT JSON USING CONFLUENT SCHEMA REGISTRY: Kafka records whose registry schema is a JSON Schema,
decoded columnar, exactly as a FILES or KAFKA source's JSON values are.

A body (the 5-byte prefix stripped) is the UTF-8 JSON text of one record. The bodies of a batch
become the lines of one text, which Arrow's JSON reader parses with the reader schema's columns
(``decode.json_rows``: the same reader, and the same Spark-exact conversions of dates and
timestamps, as every JSON source of icesql); if the block does not read, the lines are read one by
one and those that do not read are the bad records, with Arrow's reason (a body that is not JSON, or
not an object, a value of another type than the schema's, a timestamp spelled as Spark would not
read it). The writer's schema is advisory, as it is to Kafka Connect: the body is not validated
against it beyond what its columns read; a required property that is missing or null is a bad record.

The columns, from a draft-07 (or later) object schema:
``properties`` in order; ``required`` -> not nullable, else nullable; ``type`` string -> string
(``format`` date-time -> timestamp, date -> date; ``connect.type`` bytes -> binary, read from
base64 as Spark's JSON reader reads binary), integer -> long (``connect.type`` int8 -> byte, int16
-> short, int32 -> integer), number -> double (``connect.type`` float32 -> float), boolean, object
with properties -> struct, array -> array of its ``items``; a type union with null (``["string",
"null"]``, or the ``oneOf``/``anyOf`` [null, T] Kafka Connect writes) -> T, nullable; ``$ref`` into
``definitions``/``$defs`` and into the schemas of ``RegisteredSchema.referenced`` (by reference name,
optionally with a ``#/...`` pointer). A property whose schema is only ``null`` is left out. Not read
(``Unresolvable``, naming the property): unions of several non-null types, objects without
properties (maps: Arrow's JSON reader has no map), arrays without ``items``, recursive schemas.

Resolution: by property name. A property the reader has and the writer lacks reads null, or the
reader's ``default`` where it gives one (top-level properties); a property the writer has and the
reader lacks is ignored; a property of both whose type changed is ``Unresolvable`` (an integer read
as a wider integer or as a number is a widening, not a change).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from icesql.engine.connections.registry import RegisteredSchema
from icesql.engine.sources.decode import SourceFormat, json_rows
from icesql.engine.sources.registry.kinds import Unresolvable
from icesql.engine.sources.types import Fallback, arrow_schema

_INTEGERS = {"int8": "byte", "int16": "short", "int32": "integer", "int64": "long"}
_WIDTH = {"byte": 1, "short": 2, "integer": 3, "long": 4, "float": 5, "double": 6}


class _Schemas:
    """A registered schema's documents: its own and its references', for ``$ref``."""

    def __init__(self, schema: RegisteredSchema):
        self.docs: dict[str, Any] = {"": _load(schema.schema, "the JSON schema")}
        for name, text in schema.referenced:
            self.docs[name] = _load(text, f"the referenced JSON schema '{name}'")

    def resolve(self, ref: str, doc: str) -> tuple[Any, str]:
        """The schema a ``$ref`` names (found in ``doc``), and the document it lives in."""
        target, _, pointer = ref.partition("#")
        if target:
            found = self.docs.get(target)
            if found is None:  # by the name's last part ("https://x/y/address.json" -> "address.json")
                found = next((d for n, d in self.docs.items() if n and target.endswith("/" + n)), None)
                doc = next((n for n, d in self.docs.items() if d is found), target)
            else:
                doc = target
            if found is None:
                raise Unresolvable(f"$ref '{ref}' names a schema no reference supplies")
        node = self.docs[doc]
        for part in (p for p in pointer.split("/") if p):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                raise Unresolvable(f"$ref '{ref}' points at nothing")
            node = node[part]
        return node, doc


def _load(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise Unresolvable(f"{what} is not JSON: {e}") from None


def _branch(node: Mapping[str, Any], path: str) -> tuple[Mapping[str, Any], bool]:
    """A schema without its null alternative, and whether it had one."""
    for key in ("oneOf", "anyOf"):
        if key in node and "type" not in node and "properties" not in node:
            options = [o for o in node[key] if not (isinstance(o, Mapping) and o.get("type") == "null")]
            if len(options) != 1:
                raise Unresolvable(f"property '{path}' is a {key} of several types, which no column holds")
            return options[0], len(options) != len(node[key])
    if "allOf" in node and len(node["allOf"]) == 1 and "type" not in node:
        return node["allOf"][0], False
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) > 1:
            raise Unresolvable(f"property '{path}' may be any of {kinds}, which no one column holds")
        return {**node, "type": kinds[0] if kinds else "null"}, len(kinds) != len(kind)
    return node, False


def _spark_type(schemas: _Schemas, node: Any, doc: str, path: str, seen: tuple[str, ...]) -> tuple[Any, bool]:
    """The Spark type (jsonValue form) of a property's schema, and whether it admits null; the type
    is None for a schema of null alone."""
    if node is True or node == {}:
        raise Unresolvable(f"property '{path}' has no type")
    nullable = False
    while True:
        if not isinstance(node, Mapping):
            raise Unresolvable(f"property '{path}' has no schema")
        if "$ref" in node:
            key = f"{doc}#{node['$ref']}" if node["$ref"].startswith("#") else node["$ref"]
            if key in seen:
                raise Unresolvable(f"property '{path}' makes the schema recursive, which no column holds")
            seen = (*seen, key)
            node, doc = schemas.resolve(node["$ref"], doc)
            continue
        node, maybe_null = _branch(node, path)
        nullable = nullable or maybe_null
        if "$ref" in node or "oneOf" in node or "anyOf" in node:
            continue
        break
    kind = node.get("type")
    if kind is None and "properties" in node:
        kind = "object"
    if kind is None and isinstance(node.get("enum"), list) and all(isinstance(v, str) for v in node["enum"]):
        kind = "string"
    connect = node.get("connect.type")
    if kind == "null":
        return None, True
    if kind == "string":
        if connect == "bytes":
            return "binary", nullable
        return {"date-time": "timestamp", "date": "date"}.get(node.get("format"), "string"), nullable
    if kind == "integer":
        return _INTEGERS.get(connect, "long"), nullable
    if kind == "number":
        return "float" if connect == "float32" else "double", nullable
    if kind == "boolean":
        return "boolean", nullable
    if kind == "array":
        if "items" not in node or isinstance(node["items"], list):
            raise Unresolvable(f"property '{path}' is an array without one items schema")
        element, _ = _spark_type(schemas, node["items"], doc, path + "[]", seen)
        if element is None:
            raise Unresolvable(f"property '{path}' is an array of nulls")
        return {"type": "array", "elementType": element, "containsNull": True}, nullable
    if kind == "object":
        if not node.get("properties"):
            raise Unresolvable(
                f"property '{path}' is an object without properties (a map), which Arrow's JSON reader does not read"
            )
        return {"type": "struct", "fields": _fields(schemas, node, doc, path + ".", seen)}, nullable
    raise Unresolvable(f"property '{path}' has type {kind!r}, which no column holds")


def _fields(
    schemas: _Schemas, node: Mapping[str, Any], doc: str, prefix: str, seen: tuple[str, ...]
) -> list[Any]:
    required = set(node.get("required", ()))
    out = []
    for name, prop in node["properties"].items():
        t, maybe_null = _spark_type(schemas, prop, doc, prefix + name, seen)
        if t is None:
            continue
        nullable = maybe_null or name not in required
        out.append({"name": name, "type": t, "nullable": nullable, "metadata": {}})
    return out


def _root(schema: RegisteredSchema) -> tuple[_Schemas, Any]:
    schemas = _Schemas(schema)
    node, doc = schemas.docs[""], ""
    while isinstance(node, Mapping) and "$ref" in node and "properties" not in node:
        node, doc = schemas.resolve(node["$ref"], doc)
    if not isinstance(node, Mapping) or not node.get("properties"):
        raise Unresolvable("the JSON schema is not an object schema with properties")
    return schemas, node


def columns_of(schema: RegisteredSchema) -> dict[str, Any]:
    schemas, node = _root(schema)
    return {"type": "struct", "fields": _fields(schemas, node, "", "", ())}


def _defaults(schema: RegisteredSchema) -> dict[str, Any]:
    """The ``default`` of each top-level property that gives one."""
    schemas, node = _root(schema)
    out = {}
    for name, prop in node["properties"].items():
        while isinstance(prop, Mapping) and "$ref" in prop and "default" not in prop:
            prop, _ = schemas.resolve(prop["$ref"], "")
        if isinstance(prop, Mapping) and "default" in prop and prop["default"] is not None:
            out[name] = prop["default"]
    return out


def check_readable(writer: Any, reader: Any, path: str = "") -> None:
    """Raises ``Unresolvable`` when a property of both schemas changed its type (Spark types)."""
    if writer == reader:
        return
    if isinstance(writer, str) and isinstance(reader, str):
        if writer in _WIDTH and reader in _WIDTH and _WIDTH[writer] <= _WIDTH[reader]:
            if not (writer in ("float", "double") and reader not in ("float", "double")):
                return
        raise Unresolvable(f"property '{path}' changes type from {writer} to {reader}")
    kinds = (
        writer.get("type") if isinstance(writer, Mapping) else writer,
        reader.get("type") if isinstance(reader, Mapping) else reader,
    )
    if kinds[0] != kinds[1]:
        raise Unresolvable(f"property '{path}' changes type from {kinds[0]} to {kinds[1]}")
    if kinds[1] == "array":
        check_readable(writer["elementType"], reader["elementType"], path + "[]")
    elif kinds[1] == "struct":
        mine = {f["name"]: f["type"] for f in writer["fields"]}
        for f in reader["fields"]:
            if f["name"] in mine:
                check_readable(mine[f["name"]], f["type"], f"{path}.{f['name']}" if path else f["name"])


def _as_read(t: Any) -> Any:
    """What Arrow's JSON reader is asked for: binary as its base64 text (decoded after the read),
    and every field nullable (a required property that is missing is a bad record, not a failed
    block)."""
    if t == "binary":
        return "string"
    if isinstance(t, Mapping):
        if t.get("type") == "struct":
            return {
                **t,
                "fields": [{**f, "type": _as_read(f["type"]), "nullable": True} for f in t["fields"]],
            }
        if t.get("type") == "array":
            return {**t, "elementType": _as_read(t["elementType"])}
    return t


def _as_target(values: Any, target: pa.DataType) -> Any:
    """A column as read, in the schema's type: binary from its base64 text (Jackson's
    getBinaryValue, as Spark reads it), structs with their required fields."""
    if values.type == target:
        return values
    mask = values.is_null() if values.null_count else None
    if pa.types.is_binary(target):
        try:
            decoded = [None if v is None else base64.b64decode(v, validate=True) for v in values.to_pylist()]
        except (binascii.Error, ValueError):
            raise Fallback("a binary value that is not base64") from None
        return pa.array(decoded, pa.binary())
    if pa.types.is_struct(target):
        kids = [_as_target(values.field(i), target.field(i).type) for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(kids, fields=list(target), mask=mask)
    if pa.types.is_list(target):
        # the child array whole, so the offsets stay right whatever a null list's slots hold
        inner = _as_target(values.values, target.value_type)
        return pa.ListArray.from_arrays(values.offsets, inner, type=target, mask=mask)
    return values.cast(target)


def _missing_required(batch: pa.RecordBatch) -> list[tuple[int, str]]:
    """Rows where a property the schema requires is missing or null (nested ones in present structs)."""
    found: dict[int, str] = {}

    def walk(arr: Any, field: pa.Field, valid: Any, path: str) -> None:
        if not field.nullable and arr.null_count:
            hits = pc.and_(valid, arr.is_null()) if valid is not None else arr.is_null()
            for i in pc.indices_nonzero(hits).to_pylist():
                found.setdefault(i, f"required property '{path}' is missing or null")
        if pa.types.is_struct(field.type):
            here = arr.is_valid() if valid is None else pc.and_(valid, arr.is_valid())
            for i, child in enumerate(field.type):
                walk(arr.field(i), child, here, f"{path}.{child.name}")

    for col, field in zip(batch.columns, batch.schema, strict=True):
        walk(col, field, None, field.name)
    return sorted(found.items())


class JsonSchemaDecoder:
    """Records written with ``writer`` read as ``reader`` (see the module's docstring)."""

    def __init__(self, writer: RegisteredSchema, reader: RegisteredSchema, *, session_tz: str = "UTC"):
        self.columns_json = columns_of(reader)
        written = {f["name"]: f["type"] for f in columns_of(writer)["fields"]}
        for f in self.columns_json["fields"]:
            if f["name"] in written:
                check_readable(written[f["name"]], f["type"], f["name"])
        # a property the writer lacks: null, or the reader's default
        self.defaults = {n: v for n, v in _defaults(reader).items() if n not in written}
        self.schema = arrow_schema(self.columns_json)
        read = _as_read({**self.columns_json, "type": "struct"})
        self.format = SourceFormat(format="json", row_schema_json=read, session_tz=session_tz)

    @staticmethod
    def columns(schema: RegisteredSchema) -> dict[str, Any]:
        return columns_of(schema)

    def _read(self, texts: list[bytes]) -> pa.RecordBatch:
        parsed = json_rows(pa.array(texts, pa.binary()), self.format, allow_null=False)
        arrays = []
        for f in self.schema:
            col = parsed.column(f.name)
            if f.name in self.defaults:
                col = pa.array([self.defaults[f.name]] * len(col), f.type)
            else:
                col = _as_target(col, f.type)
            arrays.append(col)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def decode(self, bodies: Iterable[Any]) -> tuple[pa.RecordBatch, list[tuple[int, str]]]:
        if isinstance(bodies, (pa.Array, pa.ChunkedArray)):
            bodies = bodies.to_pylist()
        texts: list[bytes] = []
        where: list[int] = []
        bad: list[tuple[int, str]] = []
        for i, body in enumerate(bodies):
            if body is None:
                bad.append((i, "a null body"))
            elif not bytes(body).strip():
                bad.append((i, "a blank body"))
            else:
                texts.append(bytes(body))
                where.append(i)
        try:
            batch = self._read(texts)
        except (Fallback, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            # some body does not read: find which, one by one
            pieces, kept = [], []
            for i, text in zip(where, texts, strict=True):
                try:
                    pieces.append(self._read([text]))
                    kept.append(i)
                except (Fallback, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
                    bad.append((i, f"the body does not read as the schema's columns: {e}"))
            table = pa.Table.from_batches(pieces, schema=self.schema).combine_chunks()
            batch = (
                table.to_batches()[0]
                if table.num_rows
                else pa.RecordBatch.from_pylist([], schema=self.schema)
            )
            where = kept
        missing = _missing_required(batch)
        if missing:
            drop = {i for i, _ in missing}
            bad += [(where[i], why) for i, why in missing]
            keep = pa.array([i not in drop for i in range(batch.num_rows)], pa.bool_())
            batch = batch.filter(keep)
        bad.sort()
        return batch, bad


__all__ = ["JsonSchemaDecoder", "check_readable", "columns_of"]
