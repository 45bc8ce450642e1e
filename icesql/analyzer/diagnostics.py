"""Errors, warnings and the per-statement context every check reports through.

The context knows the statement's source text with every secret literal masked (same length,
so spans stay valid): an error or warning rendered from it shows the offending line with its
caret but never a secret value, even when the error is about an unrelated option on the same
line.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from icesql.errors import AnalysisError, Span

if TYPE_CHECKING:
    from icesql.plan import Column
    from icesql.syntax.ast import Node


@dataclass(frozen=True)
class AnalysisWarning:
    """Something valid but worth telling the user (an inline secret, an assumed Spark table).

    ``source`` is the statement's text with secret literals masked, so ``render()`` is safe to
    print; it takes no part in equality.
    """

    message: str
    span: Span | None = None
    hint: str | None = None
    source: str | None = field(default=None, compare=False, repr=False)
    filename: str | None = field(default=None, compare=False)

    def render(self) -> str:
        """``file:line:col: warning: message`` + source line + carets + ``hint:``."""
        err = AnalysisError(self.message, self.span, self.hint, self.source, self.filename)
        return err.render().replace(": error: ", ": warning: ", 1)


class Context:
    """What one ``analyze`` call knows: the catalog, where paths resolve, the warnings so far."""

    def __init__(self, source: str | None, filename: str | None, base_dir: Path | None) -> None:
        self.source = source
        self.filename = filename
        self.base_dir = (base_dir or Path.cwd()).resolve()
        self.warnings: list[AnalysisWarning] = []

    def error(self, message: str, at: Node | Span | None = None, hint: str | None = None) -> AnalysisError:
        return AnalysisError(message, span_of(at), hint)

    def warn(self, message: str, at: Node | Span | None = None, hint: str | None = None) -> None:
        self.warnings.append(AnalysisWarning(message, span_of(at), hint, self.source, self.filename))

    def find(self, node: Node, pattern: str) -> Span | None:
        """The last match of ``pattern`` inside ``node``'s text, for clauses the syntax tree
        keeps without a span of their own (``MODE UPSERT``, the names in ``RESET (...)``);
        the node's own span when the source is unknown or nothing matches."""
        span = node.span
        if span is None or self.source is None:
            return span
        matches = list(re.finditer(pattern, self.source[span.start : span.end], re.IGNORECASE))
        if not matches:
            return span
        m = matches[-1]
        return Span.at(self.source, span.start + m.start(), span.start + m.end())

    def sub_span(self, literal: Node, start: int, end: int) -> Span | None:
        """The span of ``value[start:end]`` inside a string literal ``'...'`` in the source.

        ``''`` escapes make value offsets and source offsets differ, so walk the raw text.
        Without the source, the whole literal is the best we can point at.
        """
        span = literal.span
        if span is None or self.source is None:
            return span
        raw = self.source
        pos = span.start + 1  # after the opening quote
        # value index -> raw offset; a quoted identifier "..." escapes with "" the same way
        quote = raw[span.start] if span.start < len(raw) else "'"
        offsets: list[int] = []
        while pos < span.end - 1:
            offsets.append(pos)
            if raw[pos] == quote and pos + 1 < span.end - 1 and raw[pos + 1] == quote:
                pos += 2
            else:
                pos += 1
        offsets.append(pos)
        if not offsets or start >= len(offsets):
            return span
        s = offsets[min(start, len(offsets) - 1)]
        e = offsets[min(max(end, start), len(offsets) - 1)]
        return Span.at(self.source, s, max(e, s + 1) if e == s else e)


def span_of(at: Node | Span | None) -> Span | None:
    if at is None or isinstance(at, Span):
        return at
    return at.span


def did_you_mean(word: str, candidates: Iterable[str], *, quote: str = "") -> str | None:
    """A ``did you mean X?`` hint for a misspelling, or None when nothing is close."""
    matches = difflib.get_close_matches(word.upper(), [c.upper() for c in candidates], n=1, cutoff=0.6)
    if not matches:
        return None
    original = {c.upper(): c for c in candidates}[matches[0]]
    return f"did you mean {quote}{original}{quote}?"


def find_column(ctx: Context, by_name: dict[str, Column], ident: Node, name: str, message: str) -> Column:
    """The column ``name`` (case-insensitive) or an error at ``ident``: ``message`` plus a
    did-you-mean, or the list of columns when nothing is close."""
    column = by_name.get(name.lower())
    if column is None:
        names = [c.name for c in by_name.values()]
        raise ctx.error(message, ident, did_you_mean(name, names) or f"columns: {', '.join(names)}")
    return column


def one_of(names: Iterable[str], quote: str = "'") -> str:
    items = [f"{quote}{n}{quote}" for n in names]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " or " + items[-1]
