"""FORMAT PROTOBUF USING CONFLUENT SCHEMA REGISTRY: Kafka records framed by a Confluent Schema
Registry, decoded into the rows Spark's ``from_protobuf`` gives.

The wire format. After the registry's 5-byte prefix (magic 0, schema id) - which the framing strips -
a Protobuf record carries a *message-index list* before the message bytes: which message of the
schema's file the record is, as a path of indexes (the top-level message, then nested types). It is
a count followed by that many indexes, every number a zigzag varint; the common case, the file's
first message, is the single byte 0. The body ``decode`` receives STILL holds this list: the decoder
reads it and picks the writer's message from it.

The schema. The registry holds ``.proto`` text (what the registry's REST API returns and the Java
clients register) or a base64 ``FileDescriptorProto`` (what confluent-kafka's Python serializer
registers; the registry accepts both); imports arrive as ``RegisteredSchema.referenced`` (file
name, schema) pairs, each in either form. Text is compiled in process by protoc as a library
(``grpcio-tools``: the reference compiler, so every proto2, proto3 and editions rule is protoc's
own, and the well-known types come with it); descriptors go straight into a private
``DescriptorPool``. Well-known imports the registry leaves out of the references (google/protobuf,
google/type, confluent/*) come from the installed ``*_pb2`` modules.

The columns: the reader's first message (or the one named), mapped as Spark's protobuf connector
(``SchemaConverters``) maps it with its default options, except where noted:
int32, sint32, sfixed32 -> integer; uint32, fixed32 -> integer (Spark's default without
``upcast.unsigned.ints``: the bits as a signed int, so 2^32-1 reads -1); int64, sint64, sfixed64 ->
long; uint64, fixed64 -> long (likewise); float, double, bool, string; bytes -> binary; enum ->
string (the value's name; a number the reader's enum lacks reads
``UNKNOWN_ENUM_VALUE_<Enum>_<n>``, as Java's DynamicMessage names it); a message -> struct (one
with no fields is left out, as Spark leaves it out; a recursive one is an error, as in Spark);
repeated -> array (elements never null); map -> map; a message named Timestamp with fields seconds
and nanos -> timestamp (microseconds, nanoseconds truncated); a oneof's fields are ordinary
nullable columns. Differences from Spark's defaults, on purpose:
``google.protobuf.Duration`` -> struct<seconds: long, nanos: integer> (Spark gives a day-time
interval, which neither Iceberg nor icesql's Arrow schemas have); the wrappers (Int32Value, ...) ->
the wrapped type, null when the wrapper is absent (Spark with ``unwrap.primitive.wrapper.types``).

Nulls, as ``from_protobuf`` gives them by default (``emit.default.values`` off): a field without
presence (a proto3 scalar not marked ``optional``) holding its zero value (0, "", false, empty
bytes, the enum's 0) reads null; a field with presence reads null when absent, or its declared
``[default = ...]`` (proto2); an absent message reads null. Repeated fields and maps read empty when
empty, and inside them (and inside a map's values) every value is read as it is.

Resolution is Protobuf's own: by field NUMBER. The body is parsed with the reader's message, so a
field the reader lacks is skipped and a field the writer lacks reads as absent. A number both
have with types that do not read one as the other (Protobuf's compatible groups: int32, uint32,
int64, uint64, bool and enums; sint32 and sint64; fixed32 and sfixed32; fixed64 and sfixed64;
string and bytes; messages field by field) is ``Unresolvable``, naming the field.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, FileDescriptor
from google.protobuf.message import DecodeError, Message

from icesql.engine.connections.registry import RegisteredSchema
from icesql.engine.sources.registry.kinds import Unresolvable
from icesql.engine.sources.types import arrow_schema

F = FieldDescriptor
MAIN_FILE = "icesql_registered_schema.proto"  # the registered schema's own file, in its own pool

_SPARK_SCALAR = {
    F.TYPE_INT32: "integer",
    F.TYPE_SINT32: "integer",
    F.TYPE_SFIXED32: "integer",
    F.TYPE_UINT32: "integer",
    F.TYPE_FIXED32: "integer",
    F.TYPE_INT64: "long",
    F.TYPE_SINT64: "long",
    F.TYPE_SFIXED64: "long",
    F.TYPE_UINT64: "long",
    F.TYPE_FIXED64: "long",
    F.TYPE_FLOAT: "float",
    F.TYPE_DOUBLE: "double",
    F.TYPE_BOOL: "boolean",
    F.TYPE_STRING: "string",
    F.TYPE_BYTES: "binary",
    F.TYPE_ENUM: "string",
}
# unsigned fields as Java reads them: the same bits, signed
_UNSIGNED = {
    F.TYPE_UINT32: (pa.uint32(), pa.int32()),
    F.TYPE_FIXED32: (pa.uint32(), pa.int32()),
    F.TYPE_UINT64: (pa.uint64(), pa.int64()),
    F.TYPE_FIXED64: (pa.uint64(), pa.int64()),
}
_WRAPPERS = {
    f"google.protobuf.{n}Value": t
    for n, t in (
        ("Bool", "boolean"),
        ("Int32", "integer"),
        ("UInt32", "integer"),
        ("Int64", "long"),
        ("UInt64", "long"),
        ("String", "string"),
        ("Bytes", "binary"),
        ("Float", "float"),
        ("Double", "double"),
    )
}
# Protobuf's wire-compatible groups (a writer's field of one type reads as the reader's other)
_GROUPS = (
    frozenset({F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL, F.TYPE_ENUM}),
    frozenset({F.TYPE_SINT32, F.TYPE_SINT64}),
    frozenset({F.TYPE_FIXED32, F.TYPE_SFIXED32}),
    frozenset({F.TYPE_FIXED64, F.TYPE_SFIXED64}),
    frozenset({F.TYPE_STRING, F.TYPE_BYTES}),
    frozenset({F.TYPE_MESSAGE, F.TYPE_GROUP}),
)
_TYPE_NAMES = {v: k[5:].lower() for k, v in vars(F).items() if k.startswith("TYPE_") and isinstance(v, int)}


# --------------------------------------------------------------------------- compiling schemas


def _as_descriptor(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The FileDescriptorProto a base64 schema holds; None for .proto text (never valid base64: it
    holds spaces, semicolons and braces)."""
    try:
        raw = base64.b64decode(text.strip().encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None
    try:
        return descriptor_pb2.FileDescriptorProto.FromString(raw)
    except DecodeError:
        return None


def _known_file(name: str) -> descriptor_pb2.FileDescriptorProto | None:
    """A well-known file the registry leaves out of the references, from its installed module."""
    module = name[: -len(".proto")].replace("/", ".").replace("-", "_") + "_pb2"
    if name.startswith("confluent/"):
        module = "confluent_kafka.schema_registry." + module
    try:
        importlib.import_module(module)
        fd = descriptor_pool.Default().FindFileByName(name)
    except (ImportError, KeyError, TypeError):
        return None
    proto = descriptor_pb2.FileDescriptorProto()
    fd.CopyToProto(proto)
    return proto


def _protoc(files: dict[str, str], given: Sequence[descriptor_pb2.FileDescriptorProto]) -> list[Any]:
    """Compile .proto texts (name -> text) with protoc, the already-compiled ``given`` files
    available to their imports; returns every file of the result, imports first."""
    try:
        import grpc_tools  # the kafka extra's grpcio-tools: protoc as a library
    except ImportError:
        from icesql.errors import ExecutionError

        raise ExecutionError(
            "a Protobuf schema registered as .proto text needs protoc (the grpcio-tools package)",
            hint="pip install 'icesql[kafka]'",
        ) from None

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="icesql-proto-") as tmp:
        for name, text in files.items():
            path = os.path.join(tmp, "src", name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        out, given_path = os.path.join(tmp, "out.pb"), os.path.join(tmp, "given.pb")
        args = [
            "protoc",
            f"-I{os.path.join(tmp, 'src')}",
            f"-I{include}",
            f"--descriptor_set_out={out}",
            "--include_imports",
        ]
        if given:
            with open(given_path, "wb") as f:
                f.write(descriptor_pb2.FileDescriptorSet(file=list(given)).SerializeToString())
            args.append(f"--descriptor_set_in={given_path}")
        args += sorted(files)
        from grpc_tools import protoc

        with _PROTOC_LOCK:
            code = protoc.main(args)
        if code != 0:
            # protoc printed why on the process's stderr: run it again where the words can be kept
            run = subprocess.run(
                [sys.executable, "-m", "grpc_tools.protoc", *args[1:]],
                capture_output=True,
                text=True,
                cwd=tmp,
                check=False,
            )
            why = (run.stderr or run.stdout).strip().replace(os.path.join(tmp, "src") + os.sep, "")
            raise Unresolvable(f"the Protobuf schema does not compile: {why or f'protoc exited {code}'}")
        with open(out, "rb") as f:
            return list(descriptor_pb2.FileDescriptorSet.FromString(f.read()).file)


_PROTOC_LOCK = threading.Lock()
_COMPILED: dict[tuple[str, tuple[tuple[str, str], ...]], FileDescriptor] = {}


def compile_schema(schema: RegisteredSchema) -> FileDescriptor:
    """The registered schema's file, its imports resolved, in a pool of its own (cached)."""
    key = (schema.schema, tuple(schema.referenced))
    fd = _COMPILED.get(key)
    if fd is None:
        fd = _COMPILED[key] = _compile(schema)
    return fd


def _compile(schema: RegisteredSchema) -> FileDescriptor:
    texts: dict[str, str] = {}
    protos: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for name, text in (*schema.referenced, (MAIN_FILE, schema.schema)):
        proto = _as_descriptor(text)
        if proto is None:
            texts[name] = text
        else:
            proto.name = name  # its name is the one the importing file uses
            protos[name] = proto
    # imports nobody supplied: the well-known files, from the installed modules
    wanted = [d for p in protos.values() for d in p.dependency]
    if texts:
        wanted += [d for d in _imports(texts) if d not in texts]
    for dep in wanted:
        if dep not in protos and dep not in texts:
            known = _known_file(dep)
            if known is not None:
                protos[dep] = known
                wanted.extend(known.dependency)
    files = list(protos.values())
    if texts:
        done = {p.name for p in files}
        files += [p for p in _protoc(texts, files) if p.name not in done]
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(name: str) -> None:
        if name in added:
            return
        proto = by_name.get(name)
        if proto is None:
            raise Unresolvable(f"the Protobuf schema imports '{name}', which no reference supplies")
        added.add(name)
        for dep in proto.dependency:
            add(dep)
        pool.Add(proto)

    by_name = {p.name: p for p in files}
    try:
        add(MAIN_FILE)
        return pool.FindFileByName(MAIN_FILE)
    except (TypeError, KeyError) as e:
        raise Unresolvable(f"the Protobuf schema does not build: {e}") from None


def _imports(texts: dict[str, str]) -> list[str]:
    """The files .proto texts import (a light scan: protoc reads them properly)."""
    import re

    found = []
    for text in texts.values():
        found += re.findall(r'^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', text, re.M)
    return found


def message_of(fd: FileDescriptor, name: str | None = None) -> Descriptor:
    """The file's first message, or the one named (full name, or name relative to the package)."""
    if name is None:
        if not fd.message_types_by_name:
            raise Unresolvable("the Protobuf schema defines no message")
        return next(iter(fd.message_types_by_name.values()))
    full = name if not fd.package or name.startswith(fd.package + ".") else f"{fd.package}.{name}"
    try:
        return fd.pool.FindMessageTypeByName(full)
    except KeyError:
        raise Unresolvable(f"the Protobuf schema has no message '{name}'") from None


# --------------------------------------------------------------------------- Spark row schema


def _repeated(f: FieldDescriptor) -> bool:
    # protobuf 7 dropped ``label`` for ``is_repeated``; older runtimes have only ``label``
    r = getattr(f, "is_repeated", None)
    return bool(r) if r is not None else f.label == F.LABEL_REPEATED


def _required(f: FieldDescriptor) -> bool:
    r = getattr(f, "is_required", None)
    return bool(r) if r is not None else f.label == F.LABEL_REQUIRED


def _is_map(f: FieldDescriptor) -> bool:
    return f.type == F.TYPE_MESSAGE and f.message_type.GetOptions().map_entry


def _is_timestamp(d: Descriptor) -> bool:
    return d.name == "Timestamp" and [f.name for f in d.fields] == ["seconds", "nanos"]


def _spark_type(f: FieldDescriptor, seen: tuple[str, ...], path: str) -> Any:
    """The Spark type (jsonValue form) of one field's values, or None where Spark leaves it out."""
    if f.type not in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        return _SPARK_SCALAR[f.type]
    d = f.message_type
    if _is_timestamp(d):
        return "timestamp"
    if d.full_name in _WRAPPERS:
        return _WRAPPERS[d.full_name]
    if _is_map(f):
        key = _spark_type(d.fields_by_name["key"], seen, path + ".key")
        value = _spark_type(d.fields_by_name["value"], seen, path + ".value")
        if key is None or value is None:
            return None
        return {"type": "map", "keyType": key, "valueType": value, "valueContainsNull": False}
    if d.full_name in seen:
        raise Unresolvable(
            f"field '{path}' makes message {d.full_name} recursive, which Spark's from_protobuf does not read"
        )
    fields = _struct_fields(d, (*seen, d.full_name), path + ".")
    return {"type": "struct", "fields": fields} if fields else None


def _struct_fields(d: Descriptor, seen: tuple[str, ...], prefix: str = "") -> list[dict[str, Any]]:
    out = []
    for f in d.fields:
        t = _spark_type(f, seen, prefix + f.name)
        if t is None:
            continue
        if _repeated(f) and not _is_map(f):
            t = {"type": "array", "elementType": t, "containsNull": False}
        nullable = _repeated(f) or not _required(f)
        out.append({"name": f.name, "type": t, "nullable": nullable, "metadata": {}})
    return out


def columns_of(message: Descriptor) -> dict[str, Any]:
    return {"type": "struct", "fields": _struct_fields(message, (message.full_name,))}


# --------------------------------------------------------------------------- resolution


def check_readable(
    writer: Descriptor, reader: Descriptor, prefix: str = "", seen: set[tuple[str, str]] | None = None
) -> None:
    """Raises ``Unresolvable`` when a field number both messages have holds values the reader's
    type does not read (a removed field or an added one is always fine: Protobuf's own rules)."""
    seen = set() if seen is None else seen
    if (writer.full_name, reader.full_name) in seen:
        return
    seen.add((writer.full_name, reader.full_name))
    for r in reader.fields:
        w = writer.fields_by_number.get(r.number)
        if w is None:
            continue
        where = f"field '{prefix}{r.name}' (number {r.number})"
        if _repeated(w) != _repeated(r) or _is_map(w) != _is_map(r):
            kinds = ("repeated" if _repeated(w) else "singular", "repeated" if _repeated(r) else "singular")
            if _is_map(w) or _is_map(r):
                kinds = ("a map" if _is_map(w) else "not a map", "a map" if _is_map(r) else "not a map")
            raise Unresolvable(f"{where} is {kinds[0]} in the writer's schema and {kinds[1]} in the reader's")
        if w.type != r.type and not any(w.type in g and r.type in g for g in _GROUPS):
            raise Unresolvable(f"{where} changes type from {_type_name(w)} to {_type_name(r)}")
        if r.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
            wm, rm = w.message_type, r.message_type
            if _special(wm) != _special(rm):
                raise Unresolvable(f"{where} changes type from {wm.full_name} to {rm.full_name}")
            check_readable(wm, rm, f"{prefix}{r.name}.", seen)


def _special(d: Descriptor) -> str | None:
    """What a message reads as when it is not a struct (a timestamp, a wrapped scalar)."""
    return "timestamp" if _is_timestamp(d) else d.full_name if d.full_name in _WRAPPERS else None


def _type_name(f: FieldDescriptor) -> str:
    if f.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        return f.message_type.full_name
    if f.type == F.TYPE_ENUM:
        return f"enum {f.enum_type.full_name}"
    return _TYPE_NAMES.get(f.type, str(f.type))


# --------------------------------------------------------------------------- message indexes


def _has_required(d: Descriptor, seen: set[str]) -> bool:
    if d.full_name in seen:
        return False
    seen.add(d.full_name)
    return any(
        _required(f) or (f.type in (F.TYPE_MESSAGE, F.TYPE_GROUP) and _has_required(f.message_type, seen))
        for f in d.fields
    )


class BadRecord(Exception):
    """One body that does not decode (the reason goes to ``bad``)."""


def _varint(body: Any, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(body):
            raise BadRecord("the message-index list is truncated")
        b = body[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos  # zigzag
        shift += 7
        if shift > 63:
            raise BadRecord("a message index is not a varint")


def message_indexes(body: Any) -> tuple[tuple[int, ...], int]:
    """The message-index path at the start of a body, and where the message bytes begin."""
    if not body:
        raise BadRecord("an empty body (no message-index list)")
    if body[0] == 0:
        return (0,), 1
    count, pos = _varint(body, 0)
    if count < 0 or count > len(body):
        raise BadRecord(f"a message-index list of {count} entries")
    path = []
    for _ in range(count):
        i, pos = _varint(body, pos)
        path.append(i)
    return tuple(path), pos


def message_at(fd: FileDescriptor, path: tuple[int, ...]) -> Descriptor:
    types = list(fd.message_types_by_name.values())
    d = None
    for i in path:
        if not 0 <= i < len(types):
            raise BadRecord(f"message index {list(path)} names no message of the writer's schema")
        d = types[i]
        types = list(d.nested_types)
    if d is None:
        raise BadRecord("an empty message-index list")
    return d


# --------------------------------------------------------------------------- columns


def _zero(values: pa.Array) -> pa.Array:
    """Where a value without presence holds its zero (what Spark reads as null): by bits for
    floats, so -0.0 (which the writer sends) is not null."""
    t = values.type
    if pa.types.is_floating(t):
        bits = pa.int32() if t == pa.float32() else pa.int64()
        return pc.equal(values.view(bits), 0)
    if pa.types.is_boolean(t):
        return pc.invert(values)
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return pc.equal(pc.binary_length(values), 0)
    return pc.equal(values, 0)


def _enum_names(f: FieldDescriptor, numbers: list[Any]) -> list[Any]:
    names = {v.number: v.name for v in f.enum_type.values}
    prefix = f"UNKNOWN_ENUM_VALUE_{f.enum_type.name}_"
    return [None if n is None else names.get(n) or f"{prefix}{n}" for n in numbers]


def _scalars(f: FieldDescriptor, values: list[Any], target: pa.DataType, mask: Any = None) -> pa.Array:
    """Scalar values of one proto type as the column's Arrow type."""
    if f.type == F.TYPE_ENUM:
        return pa.array(_enum_names(f, values), target, mask=mask)
    if f.type in _UNSIGNED:
        wire, signed = _UNSIGNED[f.type]
        return pa.array(values, wire, mask=mask).view(signed)
    return pa.array(values, target, mask=mask)


def _timestamps(msgs: list[Any], mask: Any) -> pa.Array:
    seconds = pa.array([m.seconds for m in msgs], pa.int64())
    nanos = pa.array([m.nanos for m in msgs], pa.int64())
    micros = pc.add_checked(pc.multiply_checked(seconds, 1_000_000), pc.divide(nanos, 1000))
    if mask is not None:
        micros = pc.if_else(mask, pa.scalar(None, pa.int64()), micros)
    return micros.cast(pa.timestamp("us", tz="UTC"))


def _values(f: FieldDescriptor, items: list[Any], target: pa.DataType) -> pa.Array:
    """The values of a repeated field's elements or a map's keys and values: all present."""
    if f.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        d = f.message_type
        if _is_timestamp(d):
            return _timestamps(items, None)
        if d.full_name in _WRAPPERS:
            return _scalars(d.fields_by_name["value"], [m.value for m in items], target)
        return _struct(d, items, target, None)
    return _scalars(f, items, target)


def _column(f: FieldDescriptor, msgs: list[Any], target: pa.DataType) -> pa.Array:
    """One field of the messages ``msgs`` as a column of ``target``, Spark's nulls included."""
    name = f.name
    if _is_map(f):
        maps = [getattr(m, name) for m in msgs]
        offsets = [0]
        keys: list[Any] = []
        vals: list[Any] = []
        for mp in maps:
            for k in mp:
                keys.append(k)
                vals.append(mp[k])
            offsets.append(len(keys))
        d = f.message_type
        k_arr = _values(d.fields_by_name["key"], keys, target.key_type)
        v_arr = _values(d.fields_by_name["value"], vals, target.item_type)
        return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), k_arr, v_arr, type=target)
    if _repeated(f):
        lists = [getattr(m, name) for m in msgs]
        offsets = [0]
        total = 0
        for seq in lists:
            total += len(seq)
            offsets.append(total)
        flat = [x for seq in lists for x in seq]
        inner = _values(f, flat, target.value_type)
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), inner, type=target)
    if f.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        absent = pa.array([not m.HasField(name) for m in msgs], pa.bool_())
        subs = [getattr(m, name) for m in msgs]
        d = f.message_type
        if _is_timestamp(d):
            return _timestamps(subs, absent)
        if d.full_name in _WRAPPERS:
            return _scalars(d.fields_by_name["value"], [m.value for m in subs], target, mask=absent)
        return _struct(d, subs, target, absent)
    values = [getattr(m, name) for m in msgs]
    if f.has_presence:
        absent = pa.array([not m.HasField(name) for m in msgs], pa.bool_())
        if f.has_default_value:
            return _scalars(f, values, target)  # an absent field reads its declared default (proto2)
        return _scalars(f, values, target, mask=absent)
    col = _scalars(f, values, target)
    zero = pc.equal(pa.array(values, pa.int32()), 0) if f.type == F.TYPE_ENUM else _zero(col)
    return pc.if_else(zero, pa.scalar(None, target), col)


def _struct(d: Descriptor, msgs: list[Any], target: pa.DataType, absent: Any) -> pa.Array:
    fields = list(target)  # never empty: Spark leaves a message without fields out
    children = [_column(d.fields_by_name[t.name], msgs, t.type) for t in fields]
    return pa.StructArray.from_arrays(children, fields=fields, mask=absent)


def rows(reader: Descriptor, msgs: list[Any], schema: pa.Schema) -> pa.RecordBatch:
    arrays = [_column(reader.fields_by_name[t.name], msgs, t.type) for t in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# --------------------------------------------------------------------------- the decoder


class ProtobufDecoder:
    """Records written with ``writer`` read as ``reader`` (see the module's docstring)."""

    def __init__(self, writer: RegisteredSchema, reader: RegisteredSchema, *, message: str | None = None):
        self.writer_file = compile_schema(writer)
        self.reader_file = compile_schema(reader)
        self.reader = message_of(self.reader_file, message)
        self.schema = arrow_schema(columns_of(self.reader))
        self.cls = message_factory.GetMessageClass(self.reader)
        # the writer's message of the reader's name is what the topic's records are expected to be
        try:
            expected = self.writer_file.pool.FindMessageTypeByName(self.reader.full_name)
        except KeyError:
            raise Unresolvable(
                f"the writer's schema has no message {self.reader.full_name}, the message the source reads"
            ) from None
        check_readable(expected, self.reader)
        self.required = _has_required(self.reader, set())
        self._paths: dict[tuple[int, ...], str | None] = {}  # writer's index path -> why not, or None

    @staticmethod
    def columns(schema: RegisteredSchema, *, message: str | None = None) -> dict[str, Any]:
        return columns_of(message_of(compile_schema(schema), message))

    def _why_not(self, path: tuple[int, ...]) -> str | None:
        if path not in self._paths:
            try:
                d = message_at(self.writer_file, path)
                if d.full_name != self.reader.full_name:
                    raise BadRecord(f"a {d.full_name} record, where the source reads {self.reader.full_name}")
                self._paths[path] = None
            except BadRecord as e:
                self._paths[path] = str(e)
        return self._paths[path]

    def decode(self, bodies: Iterable[Any]) -> tuple[pa.RecordBatch, list[tuple[int, str]]]:
        if isinstance(bodies, (pa.Array, pa.ChunkedArray)):
            bodies = bodies.to_pylist()
        bodies = bodies if isinstance(bodies, list) else list(bodies)
        msgs: list[Message] = []
        where: list[int] = []
        bad: list[tuple[int, str]] = []
        parse = self.cls.FromString
        first = self._why_not((0,)) is None
        if first and not self.required:
            # the common batch: every record the file's first message, every body good - one pass
            try:
                if not any(b[0] for b in bodies):
                    msgs = [parse(b[1:]) for b in bodies]
                    where = list(range(len(msgs)))
                    bodies = []
            except (DecodeError, ValueError, RuntimeError, TypeError, IndexError):
                msgs = []
        for i, body in enumerate(bodies):
            try:
                if body is None:
                    raise BadRecord("a null body")
                if first and body and body[0] == 0:
                    msg = parse(memoryview(body)[1:])
                else:
                    path, start = message_indexes(body)
                    why = self._why_not(path)
                    if why is not None:
                        raise BadRecord(why)
                    msg = parse(memoryview(body)[start:])
            except BadRecord as e:
                bad.append((i, str(e)))
                continue
            except (DecodeError, ValueError, RuntimeError, TypeError) as e:
                bad.append((i, f"the message does not parse as {self.reader.full_name}: {e}"))
                continue
            if self.required and not msg.IsInitialized():
                # Java's parseFrom (Spark's) refuses a message missing a required field; Python's parses it
                missing = ", ".join(msg.FindInitializationErrors())
                bad.append((i, f"the message lacks required field(s) {missing}"))
                continue
            msgs.append(msg)
            where.append(i)
        try:
            return rows(self.reader, msgs, self.schema), bad
        except (pa.ArrowInvalid, OverflowError, ValueError):
            pass
        # a value no column holds (a Timestamp out of range): find the records one by one
        good = []
        for i, msg in zip(where, msgs, strict=True):
            try:
                rows(self.reader, [msg], self.schema)
                good.append(msg)
            except (pa.ArrowInvalid, OverflowError, ValueError) as e:
                bad.append((i, f"a value out of range: {e}"))
        bad.sort()
        return rows(self.reader, good, self.schema), bad


__all__ = [
    "MAIN_FILE",
    "BadRecord",
    "ProtobufDecoder",
    "check_readable",
    "columns_of",
    "compile_schema",
    "message_at",
    "message_indexes",
    "message_of",
]
