"""A small parser for Spark DDL schema strings, without Spark.

``'id BIGINT, ts TIMESTAMP, s STRUCT<a: INT, b: ARRAY<STRING>>, d DECIMAL(10,2)'`` becomes
``Column``s whose types are Spark's lower-case ``simpleString`` form (``bigint``,
``struct<a:int,b:array<string>>``, ``decimal(10,2)``), aliases normalised the way Spark's
parser does (``INTEGER`` -> ``int``, ``LONG`` -> ``bigint``, ``VARCHAR(n)`` -> ``string``, ...).
Errors carry offsets into the string so the analyzer can point inside the literal.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from icesql.plan import Column

_PRIMITIVES: dict[str, str] = {
    "boolean": "boolean",
    "bool": "boolean",
    "tinyint": "tinyint",
    "byte": "tinyint",
    "smallint": "smallint",
    "short": "smallint",
    "int": "int",
    "integer": "int",
    "bigint": "bigint",
    "long": "bigint",
    "float": "float",
    "real": "float",
    "double": "double",
    "string": "string",
    "text": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ltz": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
}
_DECIMALS = ("decimal", "dec", "numeric")
_CHARS = ("varchar", "char", "character")  # Spark reads these as string

# Spark type -> the Iceberg type family it maps to (what partition transforms check against)
_ICEBERG: dict[str, str] = {
    "boolean": "boolean",
    "tinyint": "int",
    "smallint": "int",
    "int": "int",
    "bigint": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamptz",
    "timestamp_ntz": "timestamp",
}

_TOKEN = re.compile(
    r"\s*(?:(?P<ident>[A-Za-z_][A-Za-z0-9_]*)|(?P<quoted>`[^`]*(?:``[^`]*)*`)|(?P<number>[0-9]+)"
    r"|(?P<string>'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|\"[^\"\\]*(?:\\.[^\"\\]*)*\")|(?P<punct>[<>(),:]))"
)
_BLANK_TO_END = re.compile(r"\s*\Z")
# Types nest (struct<a: array<map<...>>>) at most this deep: Spark and Iceberg have no use for
# more, and the parser below is recursive.
MAX_NESTING = 64


class SchemaError(ValueError):
    def __init__(self, message: str, start: int, end: int, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.start = start
        self.end = end
        self.hint = hint


@dataclass(frozen=True)
class _Tok:
    kind: str  # ident | quoted | number | string | punct | end
    text: str
    start: int
    end: int


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    while pos < len(text):
        if _BLANK_TO_END.match(text, pos):
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.lastgroup is None:
            start = pos
            while text[start].isspace():
                start += 1
            if text[start] == "`":
                raise SchemaError("unterminated `quoted` name", start, len(text))
            raise SchemaError(f"unexpected character '{text[start]}'", start, start + 1)
        kind = m.lastgroup
        toks.append(_Tok(kind, m.group(kind), m.start(kind), m.end(kind)))
        pos = m.end()
    toks.append(_Tok("end", "", len(text), len(text)))
    return toks


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0
        self.depth = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def advance(self) -> _Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def found(self) -> str:
        t = self.tok
        return "the end of the schema" if t.kind == "end" else f"'{t.text}'"

    def expect(self, punct: str) -> _Tok:
        t = self.tok
        if t.kind == "punct" and t.text == punct:
            return self.advance()
        raise SchemaError(f"expected '{punct}', found {self.found()}", t.start, max(t.end, t.start + 1))

    def at(self, punct: str) -> bool:
        return self.tok.kind == "punct" and self.tok.text == punct

    def at_word(self, word: str) -> bool:
        return self.tok.kind == "ident" and self.tok.text.lower() == word

    def name(self, what: str) -> tuple[str, _Tok]:
        t = self.tok
        if t.kind == "ident":
            self.advance()
            return t.text, t
        if t.kind == "quoted":
            self.advance()
            return t.text[1:-1].replace("``", "`"), t
        raise SchemaError(f"expected {what}, found {self.found()}", t.start, max(t.end, t.start + 1))

    def columns(self) -> tuple[Column, ...]:
        if self.tok.kind == "end":
            raise SchemaError("the schema declares no columns", 0, len(self.text))
        out: list[Column] = []
        seen: dict[str, str] = {}
        while True:
            name, ntok = self.name("a column name")
            if name.lower() in seen:
                raise SchemaError(f"column '{name}' declared twice", ntok.start, ntok.end)
            seen[name.lower()] = name
            if self.at(":"):
                self.advance()
            typ = self.type()
            nullable = self.constraints()
            out.append(Column(name, typ, nullable))
            if self.at(","):
                self.advance()
                if self.tok.kind == "end":  # a trailing comma, as option lists allow
                    break
                continue
            if self.tok.kind != "end":
                t = self.tok
                raise SchemaError(
                    f"expected ',' or the end of the schema, found {self.found()}", t.start, t.end
                )
            break
        return tuple(out)

    def constraints(self) -> bool:
        nullable = True
        while True:
            if self.at_word("not"):
                t = self.advance()
                if not self.at_word("null"):
                    raise SchemaError(f"expected NULL after NOT, found {self.found()}", t.start, self.tok.end)
                self.advance()
                nullable = False
            elif self.at_word("comment"):
                self.advance()
                if self.tok.kind != "string":
                    t = self.tok
                    raise SchemaError(
                        f"expected a string after COMMENT, found {self.found()}", t.start, t.end
                    )
                self.advance()
            else:
                return nullable

    def type(self) -> str:
        t = self.tok
        if t.kind != "ident":
            raise SchemaError(f"expected a type, found {self.found()}", t.start, max(t.end, t.start + 1))
        if self.depth >= MAX_NESTING:
            raise SchemaError(
                f"types nest more than {MAX_NESTING} levels deep", t.start, t.end, "flatten the schema"
            )
        self.depth += 1
        try:
            return self._type(t)
        finally:
            self.depth -= 1

    def _type(self, t: _Tok) -> str:
        self.advance()
        word = t.text.lower()
        if word in _PRIMITIVES:
            return _PRIMITIVES[word]
        if word in _DECIMALS:
            if not self.at("("):
                return "decimal(10,0)"  # Spark's default precision and scale
            self.advance()
            p_tok = self.number()
            scale = 0
            if self.at(","):
                self.advance()
                s_tok = self.number()
                scale = _small_int(s_tok)
            end = self.expect(")")
            precision = _small_int(p_tok)
            if not 1 <= precision <= 38:
                raise SchemaError(
                    f"decimal precision {_shown(p_tok)} is out of range 1..38", p_tok.start, p_tok.end
                )
            if scale > precision:
                raise SchemaError(
                    f"decimal scale {scale} is larger than precision {precision}", t.start, end.end
                )
            return f"decimal({precision},{scale})"
        if word in _CHARS:
            if self.at("("):
                self.advance()
                self.number()
                self.expect(")")
            return "string"
        if word == "array":
            self.expect("<")
            elem = self.type()
            self.expect(">")
            return f"array<{elem}>"
        if word == "map":
            self.expect("<")
            key = self.type()
            self.expect(",")
            val = self.type()
            self.expect(">")
            return f"map<{key},{val}>"
        if word == "struct":
            self.expect("<")
            fields: list[str] = []
            seen: set[str] = set()
            while not self.at(">"):
                name, ntok = self.name("a field name")
                if name.lower() in seen:
                    raise SchemaError(f"struct field '{name}' declared twice", ntok.start, ntok.end)
                seen.add(name.lower())
                if self.at(":"):
                    self.advance()
                ftype = self.type()
                self.constraints()
                fields.append(f"{name}:{ftype}")
                if self.at(","):
                    self.advance()
                elif not self.at(">"):
                    t2 = self.tok
                    raise SchemaError(
                        f"expected ',' or '>', found {self.found()}", t2.start, max(t2.end, t2.start + 1)
                    )
            self.expect(">")
            return f"struct<{','.join(fields)}>"
        close = difflib.get_close_matches(word, type_names(), n=1)
        hint = (
            f"did you mean {close[0].upper()}?"
            if close
            else "Spark types: " + ", ".join(n.upper() for n in type_names())
        )
        raise SchemaError(f"unknown type '{t.text}'", t.start, t.end, hint)

    def number(self) -> _Tok:
        t = self.tok
        if t.kind != "number":
            raise SchemaError(f"expected a number, found {self.found()}", t.start, max(t.end, t.start + 1))
        return self.advance()


def _shown(tok: _Tok) -> str:
    return tok.text if len(tok.text) <= 12 else tok.text[:9] + "..."


def _small_int(tok: _Tok) -> int:
    """A precision or scale: Spark's are at most 38; a number of 40 digits is out of range
    whatever it is (and ``int()`` of thousands of digits refuses to run)."""
    return int(tok.text) if len(tok.text) <= 6 else 10**6


def parse_schema(text: str) -> tuple[Column, ...]:
    """Columns of a Spark DDL schema string; raises ``SchemaError`` with offsets into ``text``."""
    return _Parser(text).columns()


def type_names() -> list[str]:
    return sorted({*_PRIMITIVES, *_DECIMALS, *_CHARS, "array", "map", "struct"})


def iceberg_family(spark_type: str) -> str:
    """The Iceberg type family of a Spark type string: int, long, decimal, timestamptz, struct, ..."""
    t = spark_type.strip().lower()
    for nested in ("struct", "array", "map"):
        if t.startswith(nested + "<"):
            return nested
    if t.startswith("decimal"):
        return "decimal"
    if t.startswith(("varchar", "char")):
        return "string"
    return _ICEBERG.get(t, t)


def is_nested(spark_type: str) -> bool:
    return iceberg_family(spark_type) in ("struct", "array", "map")
