"""FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY: an Avro schema's columns, and records written with one
schema read as another, a column at a time.

The columns are what Spark's own Avro reader (``from_avro``, spark-avro's ``SchemaConverters``) gives
for the schema: a union with null is its other type made nullable, a union of several types a struct
of ``member0``, ``member1``, ..., logical types their Spark types (time-millis and time-micros stay
integers, as Spark keeps them). Resolution follows the Avro specification: reader fields found by
name or alias, missing ones filled from their defaults, writer-only fields skipped, the numeric and
string/bytes promotions, unions branch by branch, enum symbols through the reader's default.
Logical types must agree (a timestamp stays a timestamp, a decimal keeps its scale): reading a long
as a timestamp is a type change, not a promotion.

``avro_wire`` reads the bodies; this module turns the two schemas into its nodes once per pair.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import Any

import fastavro
import pyarrow as pa
from fastavro.schema import SchemaParseException, UnknownType

from icesql.engine.connections.registry import RegisteredSchema
from icesql.engine.sources.registry.avro_wire import (
    BlocksNode,
    BoolNode,
    BytesNode,
    CastNode,
    DecimalNode,
    EnumNode,
    FloatNode,
    IntNode,
    MemberNode,
    Node,
    NullNode,
    RecordNode,
    UnionNode,
    Wire,
)
from icesql.engine.sources.registry.kinds import Unresolvable
from icesql.engine.sources.types import arrow_schema, arrow_type

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_COMPLEX = frozenset({"record", "error", "enum", "fixed", "array", "map"})
# the Avro specification's promotions (writer -> readers)
_PROMOTE = {
    "int": ("long", "float", "double"),
    "long": ("float", "double"),
    "float": ("double",),
    "string": ("bytes",),
    "bytes": ("string",),
}
_TIMESTAMPS = {
    "timestamp-millis": ("timestamp", 1000),
    "timestamp-micros": ("timestamp", 1),
    "local-timestamp-millis": ("timestamp_ntz", 1000),
    "local-timestamp-micros": ("timestamp_ntz", 1),
}


def parse(schema: RegisteredSchema) -> tuple[Any, dict[str, Any]]:
    """The parsed schema and every named type it can refer to (its references' included)."""
    named: dict[str, Any] = {}
    pending = list(schema.referenced)
    while pending:  # references may refer to each other: parse those whose names are known first
        left = []
        for name, text in pending:
            try:
                fastavro.parse_schema(json.loads(text), named_schemas=named)
            except UnknownType:
                left.append((name, text))
            except (ValueError, SchemaParseException) as e:
                raise Unresolvable(f"referenced schema '{name}' is not valid Avro: {e}") from None
        if len(left) == len(pending):
            raise Unresolvable(f"referenced schemas {', '.join(n for n, _ in left)} name unknown types")
        pending = left
    try:
        return fastavro.parse_schema(json.loads(schema.schema), named_schemas=named), named
    except UnknownType as e:
        raise Unresolvable(
            f"the schema names type {e.name!s}, which neither it nor its references define"
        ) from None
    except (ValueError, SchemaParseException) as e:
        raise Unresolvable(f"not a valid Avro schema: {e}") from None


class Types:
    """One schema's named types, and the Spark column type of any of its types."""

    def __init__(self, named: dict[str, Any], raw: bool = False) -> None:
        self.named, self.raw = named, raw

    def without_logical_types(self) -> Types:
        """The same types read as their underlying ones (a skipped field needs no Spark type, and a
        decimal wider than Spark's may be skipped)."""
        return Types(self.named, raw=True)

    def deref(self, s: Any) -> Any:
        """``s`` with named references replaced by their definitions and {"type": T} wrappers
        (without a logical type) by T."""
        while True:
            if isinstance(s, str) and s not in PRIMITIVES:
                if s not in self.named:
                    raise Unresolvable(f"unknown Avro type {s}")
                s = self.named[s]
            elif isinstance(s, dict) and "logicalType" not in s and _wrapped(s.get("type")):
                s = s["type"]
            else:
                return s

    def kind(self, s: Any) -> str:
        s = self.deref(s)
        if isinstance(s, str):
            return s
        if isinstance(s, list):
            return "union"
        t = s["type"]
        if isinstance(t, str) and (t in PRIMITIVES or t in _COMPLEX):
            return "record" if t == "error" else t
        return self.kind(t)

    def logical(self, s: Any) -> tuple[Any, ...] | None:
        """The logical types Spark gives a type of its own: ('decimal', p, s), ('date',),
        ('timestamp' | 'timestamp_ntz', millis-to-micros factor); invalid ones are ignored, as Avro does."""
        s = self.deref(s)
        if self.raw or not isinstance(s, dict) or "logicalType" not in s:
            return None
        lt, k = s["logicalType"], self.kind(s)
        if lt == "decimal" and k in ("bytes", "fixed"):
            p, sc = s.get("precision"), s.get("scale", 0)
            if not isinstance(p, int) or not isinstance(sc, int) or p < 1 or not 0 <= sc <= p:
                return None
            if k == "fixed" and p > len(str(2 ** (8 * s["size"] - 1) - 1)) - 1:  # what the bytes can hold
                return None
            return ("decimal", p, sc)
        if lt == "date" and k == "int":
            return ("date",)
        if lt in _TIMESTAMPS and k == "long":
            return _TIMESTAMPS[lt]
        return None

    def describe(self, s: Any) -> str:
        s, k = self.deref(s), self.kind(s)
        if k == "union":
            return "union [" + ", ".join(self.describe(b) for b in s) + "]"
        if k in ("record", "enum", "fixed"):
            return f"{k} {s['name']}"
        lt = s.get("logicalType") if isinstance(s, dict) else None
        return f"{k} ({lt})" if lt else k

    def spark(self, s: Any, path: str, seen: tuple[str, ...] = ()) -> tuple[Any, bool]:
        """The Spark type (jsonValue form) of ``s`` and whether it is nullable."""
        s, k = self.deref(s), self.kind(s)
        lg = self.logical(s)
        if lg is not None:
            if lg[0] == "decimal":
                if lg[1] > 38:
                    raise Unresolvable(
                        f"field '{path}': decimal({lg[1]},{lg[2]}) is wider than Spark's 38 digits"
                    )
                return f"decimal({lg[1]},{lg[2]})", False
            return lg[0], False
        simple = {"boolean": "boolean", "int": "integer", "long": "long", "float": "float",
                  "double": "double", "bytes": "binary", "string": "string", "enum": "string",
                  "fixed": "binary"}  # fmt: skip
        if k in simple:
            return simple[k], False
        if k == "null":
            raise Unresolvable(f"field '{path}' has type null, which has no Spark column type")
        if k == "record":
            if s["name"] in seen:
                raise Unresolvable(f"field '{path}': recursive type {s['name']} has no Spark column type")
            fields = []
            for f in s["fields"]:
                t, nullable = self.spark(f["type"], _join(path, f["name"]), (*seen, s["name"]))
                fields.append({"name": f["name"], "type": t, "nullable": nullable, "metadata": {}})
            return {"type": "struct", "fields": fields}, False
        if k == "array":
            t, nullable = self.spark(s["items"], path + "[]", seen)
            return {"type": "array", "elementType": t, "containsNull": nullable}, False
        if k == "map":
            t, nullable = self.spark(s["values"], path + "{}", seen)
            return {"type": "map", "keyType": "string", "valueType": t, "valueContainsNull": nullable}, False
        shape, others, has_null = self.union_shape(s)
        if shape == "empty":
            raise Unresolvable(f"field '{path}' is a union of null alone, which has no Spark column type")
        if shape == "single":
            t, nullable = self.spark(others[0], path, seen)
            return t, nullable or has_null
        if shape in ("long", "double"):
            return shape, has_null
        members = []
        for i, b in enumerate(others):
            t, _ = self.spark(b, f"{path}.member{i}", seen)
            members.append({"name": f"member{i}", "type": t, "nullable": True, "metadata": {}})
        return {"type": "struct", "fields": members}, has_null

    def union_shape(self, s: list[Any]) -> tuple[str, list[Any], bool]:
        """How Spark shows a union: 'single' (its one other type), 'long' (int and long), 'double'
        (float and double), 'members' (a struct of member0..), with its non-null types."""
        others = [b for b in s if self.kind(b) != "null"]
        kinds = {self.kind(b) for b in others}
        if not others:
            return "empty", others, True
        if len(others) == 1:
            shape = "single"
        elif len(others) == 2 and kinds == {"int", "long"}:
            shape = "long"
        elif len(others) == 2 and kinds == {"float", "double"}:
            shape = "double"
        else:
            shape = "members"
        return shape, others, len(others) < len(s)

    def out(self, s: Any, path: str) -> pa.DataType:
        return arrow_type(self.spark(s, path)[0])


def _wrapped(t: Any) -> bool:
    return isinstance(t, (dict, list)) or (isinstance(t, str) and t not in PRIMITIVES and t not in _COMPLEX)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


class Resolver:
    """Nodes that read the writer's types as the reader's (the Avro specification's resolution)."""

    def __init__(self, writer: Types, reader: Types) -> None:
        self.w, self.r = writer, reader

    def node(self, w: Any, r: Any, path: str) -> Node:
        w, r = self.w.deref(w), self.r.deref(r)
        if self.w.kind(w) != "union":
            return self.into(w, r, path)
        out = self.r.out(r, path)
        nullable = self.r.kind(r) == "union" and self.r.union_shape(r)[2]
        branches: list[Node | str | None] = []
        for wb in w:
            if self.w.kind(wb) == "null":
                branches.append(
                    None if nullable else f"null in field '{path}', which the reader's schema does not allow"
                )
                continue
            try:
                branches.append(self.into(wb, r, path))
            except Unresolvable as e:  # only the records holding this branch fail
                branches.append(str(e))
        failed = [b for b in branches if isinstance(b, str)]
        if failed and all(b is None or isinstance(b, str) for b in branches):
            # no value of the writer's can be read (at most its nulls): a type change
            raise Unresolvable(failed[0])
        return UnionNode(out, branches)

    def into(self, w: Any, r: Any, path: str) -> Node:
        """A writer type that is not a union, read as ``r``."""
        if self.r.kind(r) != "union":
            return self.plain(w, self.r.deref(r), path)
        out = self.r.out(r, path)
        shape, others, has_null = self.r.union_shape(r)
        if self.w.kind(w) == "null":
            if has_null:
                return NullNode(out)
            raise Unresolvable(f"field '{path}': null cannot be read as {self.r.describe(r)}")
        k = self.pick(w, others)
        if k is None:
            raise Unresolvable(
                f"field '{path}': {self.w.describe(w)} matches no type of the reader's {self.r.describe(r)}"
            )
        inner = self.node(w, others[k], path)
        if shape == "members":
            return MemberNode(out, inner, k)
        return inner if inner.out == out else CastNode(out, inner)

    def pick(self, w: Any, others: Sequence[Any]) -> int | None:
        """The reader's union branch a writer type goes to: the first of its type (and logical type,
        if one has it), else the first of its type, else the first it promotes to."""
        wk, wl = self.w.kind(w), self._tag(self.w, w)
        best: tuple[int, int] | None = None  # (rank, branch), lower rank is better
        for i, rb in enumerate(others):
            rk = self.r.kind(rb)
            if wk in ("record", "enum", "fixed"):
                rank = 0 if rk == wk and self.same_name(w, rb) else None
            elif rk == wk:
                rank = 0 if self._tag(self.r, rb) == wl else 1
            else:
                rank = 2 if rk in _PROMOTE.get(wk, ()) else None
            if rank is not None and (best is None or rank < best[0]):
                best = (rank, i)
        return None if best is None else best[1]

    @staticmethod
    def _tag(types: Types, s: Any) -> str | None:
        lg = types.logical(s)
        return None if lg is None else str(lg[0])

    def same_name(self, w: Any, r: Any) -> bool:
        w, r = self.w.deref(w), self.r.deref(r)
        names = {_short(r["name"])} | {_short(a) for a in r.get("aliases", ())}
        return _short(w["name"]) in names

    def plain(self, w: Any, r: Any, path: str) -> Node:
        wk, rk = self.w.kind(w), self.r.kind(r)
        if wk == "null" == rk:  # only in a skipped field: nothing to read
            return NullNode(pa.null())
        out = self.r.out(r, path)
        change = Unresolvable(f"field '{path}': {self.w.describe(w)} cannot be read as {self.r.describe(r)}")
        if wk in ("record", "enum", "fixed") and (wk != rk or not self.same_name(w, r)):
            raise change
        if wk == "record":
            return self.record(w, r, path, out)
        if wk == "enum":
            symbols = r["symbols"]
            default = r.get("default")
            return EnumNode([s if s in symbols else default for s in w["symbols"]])
        if wk in ("array", "map") and wk != rk:
            raise change
        if wk == "array":
            return BlocksNode(out, self.node(w["items"], r["items"], path + "[]"))
        if wk == "map":
            return BlocksNode(
                out, self.node(w["values"], r["values"], path + "{}"), key=BytesNode(pa.string())
            )
        wl, rl = self.w.logical(w), self.r.logical(r)
        if wl is not None or rl is not None:
            if wl is None or rl is None or wl[0] != rl[0]:
                raise change
            if wl[0] == "decimal":
                if wl[2] != rl[2] or wk != rk or (wk == "fixed" and w["size"] != r["size"]):
                    raise change
                return DecimalNode(out, w["size"] if wk == "fixed" else None)
            return IntNode(out, wk == "int", wl[1] if len(wl) > 1 else 1)
        if wk == "fixed":
            if w["size"] != r["size"]:
                raise Unresolvable(
                    f"field '{path}': fixed of {w['size']} bytes cannot be read as {r['size']} bytes"
                )
            return BytesNode(out, w["size"])
        if wk != rk and rk not in _PROMOTE.get(wk, ()):
            raise change
        if wk in ("int", "long"):
            return IntNode(out, wk == "int")
        if wk in ("float", "double"):
            return FloatNode(out, 4 if wk == "float" else 8)
        if wk in ("string", "bytes"):
            return BytesNode(out)
        return BoolNode()

    def record(self, w: Any, r: Any, path: str, out: pa.DataType) -> RecordNode:
        wfields = {f["name"]: i for i, f in enumerate(w["fields"])}
        used: dict[int, int] = {}
        sources: list[int | pa.Array] = []
        for rf in r["fields"]:
            fpath = _join(path, rf["name"])
            found = next((wfields[n] for n in (rf["name"], *rf.get("aliases", ())) if n in wfields), None)
            if found is not None:
                used[found] = len(sources)
                sources.append(found)
            elif "default" in rf:
                sources.append(default_value(self.r, rf["type"], rf["default"], fpath))
            else:
                raise Unresolvable(f"field '{fpath}' is not in the writer's schema and has no default")
        nodes = []
        raw = self.w.without_logical_types()
        skip = Resolver(raw, raw)
        for i, wf in enumerate(w["fields"]):
            fpath = _join(path, wf["name"])
            if i in used:
                rf = r["fields"][used[i]]
                nodes.append(self.node(wf["type"], rf["type"], fpath))
            else:  # read to move past it; Spark needs no column type for it
                nodes.append(skip.skipper(wf["type"], fpath))
        return RecordNode(out, nodes, sources)

    def skipper(self, w: Any, path: str) -> Node:
        """A node that reads a writer-only field to move past it (it needs no column type; a
        recursive one cannot be read a column at a time and makes the pair unresolvable)."""
        return self.node(w, w, path)


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_default(types: Types, s: Any, v: Any) -> bytes:
    """A field's JSON default in Avro's binary encoding (bytes and fixed defaults are strings of code
    points 0-255, as the specification says)."""
    s, k = types.deref(s), types.kind(s)
    if k == "union":
        for i, b in enumerate(s):  # the first branch, or (Avro 1.12) any branch the value fits
            try:
                return _zigzag(i) + encode_default(types, b, v)
            except (ValueError, TypeError, KeyError, struct.error):
                continue
        raise ValueError(v)
    if k == "null":
        if v is not None:
            raise ValueError(v)
        return b""
    if k == "boolean":
        if not isinstance(v, bool):
            raise TypeError(v)
        return b"\x01" if v else b"\x00"
    if k in ("int", "long"):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(v)
        return _zigzag(v)
    if k in ("float", "double"):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(v)
        return struct.pack("<f" if k == "float" else "<d", v)
    if k in ("bytes", "string", "fixed"):
        if not isinstance(v, str):
            raise TypeError(v)
        raw = v.encode("utf-8" if k == "string" else "latin-1")
        if k == "fixed":
            if len(raw) != s["size"]:
                raise ValueError(v)
            return raw
        return _zigzag(len(raw)) + raw
    if k == "enum":
        return _zigzag(s["symbols"].index(v))
    if k == "array":
        items = b"".join(encode_default(types, s["items"], x) for x in v)
        return (_zigzag(len(v)) + items if v else b"") + b"\x00"
    if k == "map":
        if not isinstance(v, dict):
            raise TypeError(v)
        pairs = b"".join(
            _zigzag(len(key.encode())) + key.encode() + encode_default(types, s["values"], x)
            for key, x in v.items()
        )
        return (_zigzag(len(v)) + pairs if v else b"") + b"\x00"
    if not isinstance(v, dict):
        raise TypeError(v)
    return b"".join(
        encode_default(types, f["type"], v[f["name"]] if f["name"] in v else f["default"])
        for f in s["fields"]
    )


def default_value(types: Types, s: Any, v: Any, path: str) -> pa.Array:
    """A reader field's default as a one-row array of its column type."""
    try:
        body = encode_default(types, s, v)
    except (ValueError, TypeError, KeyError, struct.error):
        raise Unresolvable(
            f"field '{path}': default {json.dumps(v)} does not match {types.describe(s)}"
        ) from None
    wire = Wire([body])
    value = Resolver(types, types).node(s, s, path).read(wire.top())
    if not wire.ok.all():
        raise Unresolvable(f"field '{path}': default {json.dumps(v)} does not read as {types.describe(s)}")
    return value


class AvroDecoder:
    """Records written with ``writer`` read as ``reader`` (see ``kinds`` for the contract)."""

    def __init__(self, writer: RegisteredSchema, reader: RegisteredSchema) -> None:
        wtop, wnamed = parse(writer)
        rtop, rnamed = parse(reader)
        self.schema = arrow_schema(self.columns(reader))
        node = Resolver(Types(wnamed), Types(rnamed)).node(wtop, rtop, "")
        if not isinstance(node, RecordNode):
            raise Unresolvable(f"the writer's schema is {Types(wnamed).describe(wtop)}, not a record")
        self.node = node

    @staticmethod
    def columns(schema: RegisteredSchema) -> dict[str, Any]:
        top, named = parse(schema)
        types = Types(named)
        if types.kind(top) != "record":
            raise Unresolvable(f"the schema is {types.describe(top)}; a source's schema must be a record")
        struct_, _ = types.spark(top, "")
        return dict(struct_)

    def decode(self, bodies: Sequence[bytes]) -> tuple[pa.RecordBatch, list[tuple[int, str]]]:
        try:
            wire = Wire(bodies)
        except OverflowError:  # over 2 GiB of bodies: in halves
            half = len(bodies) // 2
            first, bad1 = self.decode(bodies[:half])
            second, bad2 = self.decode(bodies[half:])
            return pa.concat_batches([first, second]), bad1 + [(i + half, why) for i, why in bad2]
        rows = wire.top()
        cols = self.node.columns(rows)
        rows.fail(rows.pos < rows.ends, "bytes left after the record")
        batch = pa.RecordBatch.from_arrays(cols, schema=self.schema)
        if not wire.ok.all():
            batch = batch.filter(pa.array(wire.ok))
        return batch, sorted(wire.reasons.items())


__all__ = ["AvroDecoder", "PRIMITIVES", "Resolver", "Types", "default_value", "encode_default", "parse"]
