"""A routed sink's TABLE template: ``'{table}'``, ``'cdc_{db}_{table}'``, ... (issue 53).

One sink writes many tables when its TABLE names placeholders; each record's table is the template
with the placeholders filled from the record: ``{topic}`` (its Kafka topic), ``{db}``, ``{schema}``
and ``{table}`` (the ``source`` block of a Debezium change event). The analyzer checks a template
(known placeholders, literal parts legal for a table name) and the engine resolves it per record;
both use this module, which imports nothing of icesql's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

PLACEHOLDERS = ("topic", "db", "schema", "table")
_TOKEN = re.compile(r"\{([^{}]*)\}")
MAX_NAME = 255  # the longest table name most catalogs take (Glue, Hive, the REST catalogs we know)


class TemplateError(ValueError):
    """A template that cannot route: ``start``/``end`` locate the offending part in its text."""

    def __init__(self, message: str, start: int, end: int, hint: str | None = None) -> None:
        super().__init__(message)
        self.message, self.start, self.end, self.hint = message, start, end, hint


def is_template(text: str) -> bool:
    """Whether a TABLE is a template (names a placeholder) rather than one table's name."""
    return "{" in text or "}" in text


def illegal_name(name: str) -> str | None:
    """Why ``name`` cannot be an Iceberg table's name (None: it can). A dot separates namespace
    levels in every catalog's identifiers, a slash is a path in the REST catalog's routes and the
    warehouse layout, and control characters do not survive catalogs' listings."""
    if not name:
        return "it is empty"
    if len(name) > MAX_NAME:
        return f"it is longer than {MAX_NAME} characters"
    for ch in name:
        if ch in "./\\":
            return f"it holds '{ch}'"
        if ord(ch) < 0x20 or ch == "\x7f":
            return f"it holds the control character {ord(ch):#04x}"
    return None


@dataclass(frozen=True)
class TableTemplate:
    """A parsed template: its literal parts and the placeholders between them."""

    text: str
    parts: tuple[tuple[str, str | None], ...]  # (literal, placeholder after it or None)

    @property
    def placeholders(self) -> tuple[str, ...]:
        return tuple(p for _, p in self.parts if p is not None)

    def resolve(self, values: Mapping[str, str | None]) -> str:
        """The table of a record whose placeholders have ``values``; raises ``RoutingError``
        when one is missing or the name is not a legal table name."""
        out = []
        for literal, name in self.parts:
            out.append(literal)
            if name is not None:
                value = values.get(name)
                if value is None or value == "":
                    raise RoutingError(f"the record has no {{{name}}} for TABLE '{self.text}'")
                out.append(value)
        table = "".join(out)
        why = illegal_name(table)
        if why is not None:
            raise RoutingError(f"TABLE '{self.text}' resolves to '{table}', which is not a table name: {why}")
        return table


class RoutingError(ValueError):
    """A record whose table cannot be named (a dead letter, or the batch fails)."""


class TableNames:
    """``template.resolve`` for a batch, remembered per (topic, db, schema, table): a batch's
    records name few tables, and each is resolved (and checked) once."""

    def __init__(self, template: TableTemplate) -> None:
        self.template = template
        self._seen: dict[tuple[str | None, ...], str | RoutingError] = {}

    def __call__(self, topic: str | None, db: str | None, schema: str | None, table: str | None) -> str:
        """The table of a record with these values; raises ``RoutingError`` as ``resolve`` does."""
        where = (topic, db, schema, table)
        name = self._seen.get(where)
        if name is None:
            try:
                name = self.template.resolve({"topic": topic, "db": db, "schema": schema, "table": table})
            except RoutingError as e:
                name = e
            self._seen[where] = name
        if isinstance(name, RoutingError):
            raise RoutingError(str(name))
        return name


def parse_template(text: str) -> TableTemplate:
    """``text`` as a template; raises ``TemplateError`` at the part that cannot be."""
    parts: list[tuple[str, str | None]] = []
    pos = 0
    for m in _TOKEN.finditer(text):
        literal = text[pos : m.start()]
        _check_literal(literal, pos)
        name = m.group(1).strip().lower()
        if name not in PLACEHOLDERS:
            raise TemplateError(
                f"unknown placeholder {{{m.group(1)}}} in TABLE",
                m.start(),
                m.end(),
                "use {topic}, {db}, {schema} or {table}",
            )
        parts.append((literal, name))
        pos = m.end()
    tail = text[pos:]
    _check_literal(tail, pos)
    parts.append((tail, None))
    if not any(p for _, p in parts):
        raise TemplateError("TABLE names no placeholder", 0, len(text), "write TABLE = '{table}'")
    return TableTemplate(text, tuple(parts))


def _check_literal(literal: str, at: int) -> None:
    for i, ch in enumerate(literal):
        if ch in "{}":
            raise TemplateError(
                f"unbalanced '{ch}' in TABLE", at + i, at + i + 1, "a placeholder is written {table}"
            )
        why = illegal_name(ch) if ch in "./\\" or ord(ch) < 0x20 or ch == "\x7f" else None
        if why is not None:
            raise TemplateError(
                f"TABLE template cannot make a table name: {why}",
                at + i,
                at + i + 1,
                "put the namespace in NAMESPACE; a table name has no '.', '/' or '\\'",
            )


__all__ = [
    "PLACEHOLDERS",
    "RoutingError",
    "TableNames",
    "TableTemplate",
    "TemplateError",
    "illegal_name",
    "is_template",
    "parse_template",
]
