"""One exception tree for everything a user can cause.

Every error carries a message, an optional source span and an optional hint, and renders as::

    pipeline.sql:3:14: error: expected '=', found 'eu-west-1'
      REGION 'eu-west-1'
             ^^^^^^^^^^^
    hint: options are written NAME = value

Nothing here imports Lark, Spark or pyiceberg.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Span:
    """A region of source text: offsets are 0-based, line and column 1-based."""

    start: int
    end: int
    line: int
    column: int
    end_line: int
    end_column: int

    @staticmethod
    def at(text: str, start: int, end: int | None = None) -> Span:
        """Build a span for ``text[start:end]`` computing lines and columns."""
        end = start if end is None else end
        line, column = line_col(text, start)
        end_line, end_column = line_col(text, end)
        return Span(start, end, line, column, end_line, end_column)


def span_within(origin: Span, text: str, start: int, end: int) -> Span:
    """The span of ``text[start:end]`` where ``text`` begins at ``origin`` (its offset, line
    and column): a query kept verbatim, or a place inside one."""

    def at(off: int) -> tuple[int, int]:
        nl = text.rfind("\n", 0, off)
        return origin.line + text.count("\n", 0, off), (origin.column + off if nl < 0 else off - nl)

    line, column = at(start)
    end_line, end_column = at(end)
    return Span(origin.start + start, origin.start + end, line, column, end_line, end_column)


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of ``offset`` in ``text``.

    Lines end at ``\n`` only, as the parser counts them; ``\r``, form feeds, U+0085 and
    U+2028 are characters of a line (``source_line`` shows them as blanks).
    """
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    last_nl = text.rfind("\n", 0, offset)
    return line, offset - last_nl


def source_line(source: str, span: Span) -> str | None:
    """The line ``span`` starts on, as it should be printed above a caret: one character per
    column (a tab, a carriage return or any other control or invisible character becomes one
    blank), so the caret lands under the right column. Found from the span's offset when it
    fits the source (no scan from the top of a long script), else by its line number."""
    start = span.start
    if 0 <= start <= len(source):
        line_start = source.rfind("\n", 0, start) + 1
        if start - line_start + 1 == span.column:
            line_end = source.find("\n", start)
            return _printable(source[line_start : line_end if line_end >= 0 else len(source)])
    lines = source.split("\n")
    idx = span.line - 1
    return _printable(lines[idx]) if 0 <= idx < len(lines) else None


def _printable(line: str) -> str:
    if line.endswith("\r"):
        line = line[:-1]
    if line.isprintable():
        return line
    return "".join(c if c.isprintable() else " " for c in line)


@dataclass(eq=False)
class IcesqlError(Exception):
    """Base of every error icesql raises on purpose."""

    message: str
    span: Span | None = None
    hint: str | None = None
    source: str | None = field(default=None, repr=False)
    filename: str | None = None

    kind = "error"

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.render()

    @property
    def line(self) -> int | None:
        return self.span.line if self.span else None

    @property
    def column(self) -> int | None:
        return self.span.column if self.span else None

    def with_source(self, source: str | None, filename: str | None = None) -> IcesqlError:
        """Attach the text the span points into (and its file name) if not already set."""
        if self.source is None:
            self.source = source
        if self.filename is None and filename is not None:
            self.filename = filename
        return self

    def headline(self) -> str:
        """``file:line:col: error: message`` — the one line a log or a CI shows. An error of no
        text (a sink that failed while running) says ``icesql: error: message``."""
        where = self.filename or ("<input>" if self.span is not None else "icesql")
        if self.span is not None:
            where = f"{where}:{self.span.line}:{self.span.column}"
        return f"{where}: {self.kind}: {self.message}"

    def render(self) -> str:
        """Headline, then the source line with carets under the span, then the hint."""
        out = [self.headline()]
        if self.span is not None and self.source is not None:
            text = source_line(self.source, self.span)
            if text is not None:
                start_col = self.span.column
                if self.span.end_line == self.span.line:
                    width = max(1, self.span.end_column - start_col)
                else:
                    width = max(1, len(text) - start_col + 1)
                out.append(f"  {text}")
                out.append("  " + " " * (start_col - 1) + "^" * width)
        if self.hint:
            out.append(f"hint: {self.hint}")
        return "\n".join(out)


class ParseError(IcesqlError):
    """The text is not valid icesql SQL."""

    def __init__(
        self,
        message: str,
        span: Span | None = None,
        hint: str | None = None,
        source: str | None = None,
        filename: str | None = None,
        expected: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message, span, hint, source, filename)
        self.expected = expected


class AnalysisError(IcesqlError):
    """The statement parses but is not valid: a bad option, a missing object, a bad transform."""


class CatalogError(IcesqlError):
    """A catalog-store conflict: an object exists already, is missing, or has dependents."""


class ExecutionError(IcesqlError):
    """Running a statement or a sink failed (a connection refused, a commit failed)."""


class UsageError(IcesqlError):
    """The command line was used wrongly."""


__all__ = [
    "AnalysisError",
    "CatalogError",
    "ExecutionError",
    "IcesqlError",
    "ParseError",
    "Span",
    "UsageError",
    "line_col",
    "source_line",
]
