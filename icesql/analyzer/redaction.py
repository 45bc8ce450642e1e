"""Keeping secret values out of everything the analyzer emits.

Two tools: ``mask_source`` blanks every secret value in the script's text with ``*`` (same
length, so spans and carets stay right) before an error or warning may quote a line, with the
dialect's one lexical rule (``icesql.syntax.redaction``) over the whole text, so a warning's
line never shows a secret of another statement on it; ``canonical_sql`` prints the statement
with inline secret literals replaced by '********'. When in doubt a value is treated as secret:
unknown connection options and connection PROPERTIES are masked too (``secrecy``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from icesql.analyzer.connections import CONNECTION_OPTIONS
from icesql.errors import Span
from icesql.syntax.ast import (
    AlterSecret,
    CreateConnection,
    CreateSecret,
    Ident,
    Option,
    OptionList,
    Statement,
    StringLit,
)

MASK = "********"


def secret_spans(stmt: Statement) -> list[Span]:
    """Spans of every literal in ``stmt`` that holds, or may hold, a secret value."""
    spans: list[Span] = []
    if isinstance(stmt, CreateSecret | AlterSecret):
        if stmt.value.span is not None:
            spans.append(stmt.value.span)
    elif isinstance(stmt, CreateConnection):
        table = CONNECTION_OPTIONS[stmt.connection_kind]
        for opt in stmt.options:
            if table.names_a_secret(opt.name):
                v = opt.value
                if (isinstance(v, StringLit) or (isinstance(v, Ident) and v.quoted)) and v.span is not None:
                    spans.append(v.span)
            elif table.is_secret_option(opt.name):
                _value_spans(opt, spans)
    return spans


def _value_spans(opt: Option, spans: list[Span]) -> None:
    v = opt.value
    if isinstance(v, OptionList):
        for item in v.options:
            _value_spans(item, spans)
    elif isinstance(v, StringLit | Ident) and v.span is not None:
        spans.append(v.span)


def mask_source(source: str | None, stmt: Statement | None = None) -> str | None:
    """``source`` with every secret value masked (scanned once per script, not per statement:
    ``stmt`` is accepted for callers of the old signature)."""
    if source is None:
        return None
    from icesql.syntax.redaction import masked_text

    return masked_text(source)


def redact_inline(stmt: Statement) -> Statement:
    """``stmt`` with plain-string secret values replaced by '********' (for ``sql``)."""
    if not isinstance(stmt, CreateConnection):
        return stmt
    table = CONNECTION_OPTIONS[stmt.connection_kind]
    options = []
    for opt in stmt.options:
        if table.is_secret_option(opt.name) and isinstance(opt.value, StringLit | Ident):
            if isinstance(opt.value, StringLit) or opt.value.quoted:
                opt = dataclasses.replace(opt, value=_masked(opt.value))
        options.append(opt)
    return dataclasses.replace(stmt, options=tuple(options))


def canonical_sql(stmt: Statement, source: str | None) -> str:
    """Canonical SQL through the printer, inline secrets shown as '********'.

    Falls back to the statement's own text (secret literals replaced) if the printer is
    unavailable, so that the analyzer never depends on it to produce a plan.
    """
    redacted = redact_inline(stmt)
    try:
        return redacted.to_sql()
    except (ImportError, NotImplementedError):
        pass
    if source is not None and stmt.span is not None:
        text = source
        for span in sorted(secret_spans(stmt), key=lambda s: s.start, reverse=True):
            text = text[: span.start] + f"'{MASK}'" + text[span.end :]
        shift = sum(
            len(f"'{MASK}'") - (s.end - s.start) for s in secret_spans(stmt) if s.start < stmt.span.end
        )
        return text[stmt.span.start : stmt.span.end + shift].strip()
    return f"-- {type(stmt).__name__} {getattr(getattr(stmt, 'name', None), 'name', '')}".rstrip()


def _masked(value: StringLit | Ident) -> StringLit:
    if isinstance(value, StringLit):
        return dataclasses.replace(value, value=MASK)
    lit: StringLit = cast(Any, StringLit)(MASK, span=value.span)  # span is keyword-only
    return lit
