"""The prompt-toolkit side of the shell: completer, lexer (colouring) and style.

Thin adapters over the pure ``suggest`` and ``tokenize``; all decisions live there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.lexers import Lexer
from prompt_toolkit.styles import Style

from icesql.repl.completion import Suggestion, suggest
from icesql.repl.scan import TokenKind, tokenize
from icesql.repl.vocabulary import keywords

STYLE = Style.from_dict(
    {
        "keyword": "ansiblue bold",
        "string": "ansigreen",
        "quoted": "ansiyellow",
        "number": "ansicyan",
        "comment": "ansibrightblack italic",
        "command": "ansimagenta bold",
        "prompt": "bold",
        "continuation": "ansibrightblack",
        "error": "ansired bold",
        "warning": "ansiyellow",
        "bottom-toolbar": "noreverse bg:ansiblack fg:ansiwhite",
        "bottom-toolbar.failed": "bg:ansired fg:ansiwhite",
    }
)


def quote_ident(name: str) -> str:
    if name.isidentifier() and name == name.lower():
        return name
    return '"' + name.replace('"', '""') + '"'


class IcesqlCompleter(Completer):
    """Completions from ``suggest``; object names come from ``object_names(kind)``."""

    def __init__(
        self,
        object_names: Callable[[str], Iterable[str]],
        command_names: Callable[[], Iterable[str]],
        table_names: Callable[[str], Iterable[str]] | None = None,
    ):
        self._object_names = object_names
        self._command_names = command_names
        self._table_names = table_names

    def _candidates(self, s: Suggestion) -> Iterable[tuple[str, str]]:
        if s.kind == "object":
            for kind in s.values:
                try:
                    names = list(self._object_names(kind))
                except Exception:  # a store being migrated must not break typing
                    names = []
                for name in sorted(names):
                    yield quote_ident(name), kind
        elif s.kind == "table":
            # ``connection.namespace.table`` names; never waits on a catalog (a cache)
            for connection in s.values:
                try:
                    names = list(self._table_names(connection)) if self._table_names else []
                except Exception:
                    names = []
                for name in sorted(names):
                    yield name, "table"
        elif s.kind == "keyword":
            lower = s.prefix.islower()
            for word in s.values:
                yield (word.lower() if lower else word), "keyword"
        else:
            for value in s.values:
                yield value, s.kind

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        seen: set[str] = set()
        suggestions = suggest(document.text_before_cursor, command_names=self._command_names())
        for s in suggestions:
            for text, meta in self._candidates(s):
                if text in seen or not _matches(text, s.prefix):
                    continue
                seen.add(text)
                yield Completion(text, start_position=-len(s.prefix), display_meta=meta)


def _matches(candidate: str, prefix: str) -> bool:
    return candidate.lstrip('"').upper().startswith(prefix.lstrip('"').upper())


_STYLE_OF = {
    TokenKind.STRING: "class:string",
    TokenKind.QUOTED: "class:quoted",
    TokenKind.NUMBER: "class:number",
    TokenKind.COMMENT: "class:comment",
    TokenKind.BACKSLASH: "class:command",
}


class IcesqlLexer(Lexer):
    """Colours keywords, strings, quoted identifiers, numbers, comments and \\commands."""

    def lex_document(self, document: Document):  # type: ignore[no-untyped-def]
        lines: list[list[tuple[str, str]]] = [[]]
        tokens = tokenize(document.text)
        known = keywords() if any(t.kind is TokenKind.WORD for t in tokens) else frozenset()
        for tok in tokens:
            style = _STYLE_OF.get(tok.kind, "")
            if tok.kind is TokenKind.WORD and tok.upper in known:
                style = "class:keyword"
            parts = tok.text.split("\n")
            for i, part in enumerate(parts):
                if i:
                    lines.append([])
                if part:
                    lines[-1].append((style, part))

        def get_line(lineno: int) -> list[tuple[str, str]]:
            return lines[lineno] if 0 <= lineno < len(lines) else []

        return get_line
