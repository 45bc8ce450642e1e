"""A source's SCHEMA as a Spark ``StructType``, built in Python when Spark's answer is certain.

PySpark turns a DDL string into a ``StructType`` by asking the JVM (``_parse_datatype_string``:
Spark's SQL parser), which costs a round trip and, the first time in a JVM, loading the parser:
0.19 s of a sink's start inside a warm session (the 1M-row append's timed phase is 1.5-1.8 s).
``struct_from_ddl`` builds the same ``StructType`` for the common subset of the DDL - plain
column names, Spark's primitive types and their aliases, ``DECIMAL``, ``ARRAY``, ``MAP`` and
``STRUCT`` - and returns None for anything else (quoted names, ``NOT NULL``, ``COMMENT``,
``CHAR``/``VARCHAR``, intervals, a type it does not know, a syntax error), which the caller then
leaves to Spark's parser, its errors included. ``tests/engine/test_ddl.py`` compares it with
Spark's parser over a corpus.
"""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|(\d+)|([<>(),:]))")

# Spark's names for its primitive types (``DataTypeAstBuilder``); TIMESTAMP follows
# ``spark.sql.timestampType``
_PRIMITIVES = {
    "boolean": "BooleanType",
    "tinyint": "ByteType",
    "byte": "ByteType",
    "smallint": "ShortType",
    "short": "ShortType",
    "int": "IntegerType",
    "integer": "IntegerType",
    "bigint": "LongType",
    "long": "LongType",
    "float": "FloatType",
    "real": "FloatType",
    "double": "DoubleType",
    "string": "StringType",
    "binary": "BinaryType",
    "date": "DateType",
    "timestamp_ltz": "TimestampType",
    "timestamp_ntz": "TimestampNTZType",
}
_DECIMALS = ("decimal", "dec", "numeric")


class _Unsure(Exception):
    """Outside the subset: Spark's parser decides."""


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _Unsure
        out.append(m.group(m.lastindex or 0))
        pos = m.end()
    return out


def _struct(fields: list[tuple[str, Any]]) -> Any:
    from pyspark.sql import types as T

    return T.StructType([T.StructField(n, t, True) for n, t in fields])


class _Parser:
    def __init__(self, tokens: list[str], timestamp_ntz: bool) -> None:
        self.toks = tokens
        self.i = 0
        self.timestamp_ntz = timestamp_ntz

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise _Unsure
        self.i += 1
        return tok

    def name(self) -> str:
        tok = self.take()
        if not (tok[0].isalpha() or tok[0] == "_"):
            raise _Unsure
        return tok

    def fields(self, end: str | None) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        seen: set[str] = set()
        while True:
            name = self.name()
            if name.lower() in seen:
                raise _Unsure  # Spark's own error
            seen.add(name.lower())
            if self.peek() == ":":
                self.take()
            out.append((name, self.type()))
            if self.peek() == ",":
                self.take()
                continue
            if self.peek() != end:
                raise _Unsure  # NOT NULL, COMMENT, a syntax error
            return out

    def type(self) -> Any:
        from pyspark.sql import types as T

        word = self.name().lower()
        if word == "timestamp":
            return T.TimestampNTZType() if self.timestamp_ntz else T.TimestampType()
        if word in _PRIMITIVES:
            return getattr(T, _PRIMITIVES[word])()
        if word in _DECIMALS:
            if self.peek() != "(":
                return T.DecimalType(10, 0)
            self.take("(")
            precision, scale = int(self.take()), 0
            if self.peek() == ",":
                self.take()
                scale = int(self.take())
            self.take(")")
            if not 1 <= precision <= 38 or scale > precision:
                raise _Unsure
            return T.DecimalType(precision, scale)
        if word == "array":
            self.take("<")
            element = self.type()
            self.take(">")
            return T.ArrayType(element, True)
        if word == "map":
            self.take("<")
            key = self.type()
            self.take(",")
            value = self.type()
            self.take(">")
            return T.MapType(key, value, True)
        if word == "struct":
            self.take("<")
            fields = [] if self.peek() == ">" else self.fields(">")
            self.take(">")
            return _struct(fields)
        raise _Unsure


def struct_from_ddl(text: str, timestamp_type: str = "TIMESTAMP_LTZ") -> Any:
    """The ``StructType`` Spark's parser makes of the column list ``text``, or None when the text
    is outside the subset this builds (see the module docstring). ``timestamp_type``: the
    session's ``spark.sql.timestampType``, which decides what a plain TIMESTAMP is."""
    try:
        parser = _Parser(_tokens(text), timestamp_type.upper() == "TIMESTAMP_NTZ")
        if parser.peek() is None:
            return None
        return _struct(parser.fields(None))
    except (_Unsure, ValueError):
        return None
