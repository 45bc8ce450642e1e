"""The shell's view of text being typed, on top of the dialect's one lexer.

The shell needs to look at *unfinished* SQL: to decide whether Enter submits, to colour it, to
find the word under the cursor and the clause it belongs to. The Lark parser rejects
unfinished text; ``icesql.syntax.lexer`` never fails (an unterminated string or comment simply
becomes the last token, marked ``open``), and this module adds only what is the shell's own: a
``\\command`` line is one ``BACKSLASH`` token, and ``quit``/``exit`` submit.

Pure functions only; no prompt-toolkit, no Lark.
"""

from __future__ import annotations

from icesql.syntax.lexer import Token, TokenKind, significant, split_statements
from icesql.syntax.lexer import is_complete as statement_is_complete
from icesql.syntax.lexer import tokenize as tokenize_sql


def tokenize(text: str) -> list[Token]:
    """Every token of ``text``, whitespace and comments included; never raises."""
    stripped = text.lstrip()
    if stripped.startswith("\\"):
        start = len(text) - len(stripped)
        out = [Token(TokenKind.SPACE, text[:start], 0, start)] if start else []
        out.append(Token(TokenKind.BACKSLASH, text[start:], start, len(text)))
        return out
    return tokenize_sql(text)


def statement_ranges(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each non-empty statement."""
    return split_statements(text)


def current_statement(text_before_cursor: str) -> str:
    """The text of the statement the cursor is in: everything after the last complete one."""
    ranges = statement_ranges(text_before_cursor)
    if not ranges:
        return text_before_cursor if text_before_cursor.strip() else ""
    start, end = ranges[-1]
    tail = text_before_cursor[end:]
    semis = [t for t in tokenize_sql(tail) if t.kind is TokenKind.PUNCT and t.text == ";"]
    if semis:
        return tail[semis[-1].end :]
    return text_before_cursor[start:]


def is_complete(text: str) -> bool:
    """Whether Enter should submit ``text`` rather than start a new line.

    True for blank input, a backslash command, ``quit``/``exit``, and SQL that ends with a
    ``;`` outside quotes and comments (then only blank space or comments).
    """
    stripped = text.strip()
    if not stripped or stripped.startswith("\\"):
        return True
    if stripped.lower().rstrip(";").strip() in ("quit", "exit"):
        return True
    return statement_is_complete(text)


def destructive_statements(text: str) -> list[str]:
    """The statements of ``text`` that destroy something (``DROP ...``), each as written."""
    out = []
    for start, end in statement_ranges(text):
        sig = significant(tokenize_sql(text[start:end]))
        if sig and sig[0].kind is TokenKind.WORD and sig[0].upper == "DROP":
            out.append(" ".join(text[start:end].split()))
    return out


__all__ = [
    "Token",
    "TokenKind",
    "current_statement",
    "destructive_statements",
    "is_complete",
    "significant",
    "statement_ranges",
    "tokenize",
]
