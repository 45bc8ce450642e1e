"""Avro schemas as the encoder reads them: a schema's JSON parsed into nodes (primitives with their
logical types, fixed, enum, record, array, map, unions with null), and named types defined once.
"""

from __future__ import annotations

from typing import Any

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


# The Arrow unit a temporal logical type is counted in (a column in another unit is cast to it)
UNITS = {
    "time-millis": "ms",
    "time-micros": "us",
    "timestamp-millis": "ms",
    "timestamp-micros": "us",
    "timestamp-nanos": "ns",
    "local-timestamp-millis": "ms",
    "local-timestamp-micros": "us",
    "local-timestamp-nanos": "ns",
}


class AvroNode:
    __slots__ = ()


class AvroPrim(AvroNode):
    __slots__ = ("kind", "logical", "scale")

    def __init__(self, kind: str, logical: str | None = None, scale: int = 0) -> None:
        self.kind, self.logical, self.scale = kind, logical, scale


class AvroFixed(AvroNode):
    __slots__ = ("size", "logical", "scale")

    def __init__(self, size: int, logical: str | None, scale: int) -> None:
        self.size, self.logical, self.scale = size, logical, scale


class AvroEnum(AvroNode):
    __slots__ = ("symbols",)

    def __init__(self, symbols: list[str]) -> None:
        self.symbols = symbols


class AvroRecord(AvroNode):
    __slots__ = ("name", "fields")

    def __init__(self, name: str) -> None:
        self.name = name
        self.fields: list[tuple[str, AvroNode]] = []


class AvroArray(AvroNode):
    __slots__ = ("items",)

    def __init__(self, items: AvroNode) -> None:
        self.items = items


class AvroMap(AvroNode):
    __slots__ = ("values",)

    def __init__(self, values: AvroNode) -> None:
        self.values = values


class AvroUnion(AvroNode):
    __slots__ = ("branches", "null_index", "value_index")

    def __init__(self, branches: list[AvroNode]) -> None:
        self.branches = branches
        nulls = [i for i, b in enumerate(branches) if isinstance(b, AvroPrim) and b.kind == "null"]
        values = [i for i in range(len(branches)) if i not in nulls]
        if len(branches) > 63:
            raise ValueError("Avro unions of more than 63 branches are not supported")
        self.null_index = nulls[0] if nulls else None
        self.value_index = values[0] if len(values) == 1 else None
        if len(values) > 1:
            raise NotImplementedError("Avro unions of several non-null types are not supported")


class SchemaParser:
    def __init__(self) -> None:
        self.names: dict[str, AvroNode] = {}

    def parse(self, s: Any, ns: str) -> AvroNode:
        if isinstance(s, str):
            return AvroPrim(s) if s in PRIMITIVES else self._lookup(s, ns)
        if isinstance(s, list):
            return AvroUnion([self.parse(b, ns) for b in s])
        if not isinstance(s, dict):
            raise ValueError(f"not an Avro schema: {s!r}")
        t = s.get("type")
        if isinstance(t, (dict, list)):
            return self.parse(t, ns)
        if t in ("record", "error"):
            name, inner = self._fullname(s, ns)
            rec = AvroRecord(name)
            self._register(name, rec)
            rec.fields = [(str(f["name"]), self.parse(f["type"], inner)) for f in s["fields"]]
            return rec
        if t == "fixed":
            name, _ = self._fullname(s, ns)
            node: AvroNode = AvroFixed(int(s["size"]), s.get("logicalType"), int(s.get("scale", 0)))
            self._register(name, node)
            return node
        if t == "enum":
            name, _ = self._fullname(s, ns)
            node = AvroEnum([str(x) for x in s["symbols"]])
            self._register(name, node)
            return node
        if t == "array":
            return AvroArray(self.parse(s["items"], ns))
        if t == "map":
            return AvroMap(self.parse(s["values"], ns))
        if t in PRIMITIVES:
            return AvroPrim(str(t), s.get("logicalType"), int(s.get("scale", 0)))
        if isinstance(t, str):
            return self._lookup(t, ns)
        raise ValueError(f"not an Avro schema: {s!r}")

    @staticmethod
    def _fullname(s: dict[str, Any], ns: str) -> tuple[str, str]:
        """The type's full name and the namespace its own fields' names are resolved in."""
        name = str(s["name"])
        if "." in name:
            return name, name.rsplit(".", 1)[0]
        space = s.get("namespace", ns) or ""
        return (f"{space}.{name}" if space else name), space

    def _register(self, name: str, node: AvroNode) -> None:
        # pyiceberg defines a named type again where it is used again (uuid_fixed, decimal_P_S):
        # the last definition is the one a later reference means
        self.names[name] = node

    def _lookup(self, name: str, ns: str) -> AvroNode:
        if "." not in name and ns and f"{ns}.{name}" in self.names:
            return self.names[f"{ns}.{name}"]
        if name in self.names:
            return self.names[name]
        raise ValueError(f"unknown Avro type {name!r}")


def reference_repeated_names(schema: Any) -> Any:
    """``schema`` with every named type (record, fixed, enum) defined again replaced by its name.

    pyiceberg's ``iceberg_to_avro`` defines ``uuid_fixed`` (and ``decimal_P_S``, ...) again at
    every use, which Avro's parsers (fastavro's, Java's) refuse: "redefined named type". A type
    defined again differently is an error."""
    seen: dict[str, Any] = {}

    def walk(s: Any, ns: str) -> Any:
        if isinstance(s, list):
            return [walk(b, ns) for b in s]
        if not isinstance(s, dict):
            return s
        t = s.get("type")
        if t in ("record", "error", "fixed", "enum") and "name" in s:
            name, inner = SchemaParser._fullname(s, ns)
            if name in seen:
                if seen[name] != s:
                    raise ValueError(f"the Avro type {name!r} is defined twice, differently")
                return name
            seen[name] = s
            if t in ("record", "error"):
                return {**s, "fields": [{**f, "type": walk(f["type"], inner)} for f in s["fields"]]}
            return s
        out = dict(s)
        if isinstance(t, (dict, list)):
            out["type"] = walk(t, ns)
        if t == "array":
            out["items"] = walk(s["items"], ns)
        elif t == "map":
            out["values"] = walk(s["values"], ns)
        return out

    return walk(schema, "")
