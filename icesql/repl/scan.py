"""A forgiving, quote- and comment-aware scanner for text being typed.

The shell needs to look at *unfinished* SQL: to decide whether Enter submits, to colour it, to
find the word under the cursor and the clause it belongs to, and to redact secret values before
history reaches the disk. The Lark parser rejects unfinished text, so this scanner never fails:
an unterminated string or comment simply becomes the last token, marked ``open``.

Pure functions only; no prompt-toolkit, no Lark.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class TokenKind(enum.Enum):
    SPACE = "space"
    COMMENT = "comment"  # -- ... or /* ... */
    STRING = "string"  # '...'
    QUOTED = "quoted"  # "..." (identifier or design-doc style value)
    WORD = "word"  # keyword or identifier
    NUMBER = "number"
    PUNCT = "punct"  # ( ) , ; = . and anything else
    BACKSLASH = "backslash"  # a \command at the start of the input


@dataclass(frozen=True)
class Token:
    kind: TokenKind
    text: str
    start: int
    end: int
    open: bool = False  # an unterminated string, quoted identifier or block comment

    @property
    def upper(self) -> str:
        return self.text.upper()

    @property
    def significant(self) -> bool:
        return self.kind not in (TokenKind.SPACE, TokenKind.COMMENT)


def _scan_quoted(text: str, i: int, quote: str) -> tuple[int, bool]:
    """End offset of a quoted run starting at ``i`` (doubled quote escapes) and whether it is open."""
    n = len(text)
    j = i + 1
    while j < n:
        if text[j] == quote:
            if j + 1 < n and text[j + 1] == quote:
                j += 2
                continue
            return j + 1, False
        j += 1
    return n, True


def tokenize(text: str) -> list[Token]:
    """Every token of ``text``, whitespace and comments included; never raises."""
    tokens: list[Token] = []
    n = len(text)
    i = 0
    if text.lstrip().startswith("\\"):
        start = len(text) - len(text.lstrip())
        if start:
            tokens.append(Token(TokenKind.SPACE, text[:start], 0, start))
        tokens.append(Token(TokenKind.BACKSLASH, text[start:], start, n))
        return tokens
    while i < n:
        c = text[i]
        if c.isspace():
            j = i
            while j < n and text[j].isspace():
                j += 1
            tokens.append(Token(TokenKind.SPACE, text[i:j], i, j))
        elif text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            tokens.append(Token(TokenKind.COMMENT, text[i:j], i, j))
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            closed = j >= 0
            j = j + 2 if closed else n
            tokens.append(Token(TokenKind.COMMENT, text[i:j], i, j, open=not closed))
        elif c == "'" or c == '"':
            j, is_open = _scan_quoted(text, i, c)
            kind = TokenKind.STRING if c == "'" else TokenKind.QUOTED
            tokens.append(Token(kind, text[i:j], i, j, open=is_open))
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] in "_$"):
                j += 1
            tokens.append(Token(TokenKind.WORD, text[i:j], i, j))
        elif c.isdigit():
            j = i
            while j < n and (text[j].isalnum() or text[j] == "."):
                j += 1
            tokens.append(Token(TokenKind.NUMBER, text[i:j], i, j))
        else:
            tokens.append(Token(TokenKind.PUNCT, c, i, i + 1))
            j = i + 1
        i = j
    return tokens


def significant(tokens: list[Token]) -> list[Token]:
    return [t for t in tokens if t.significant]


def statement_ranges(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each non-empty statement (the parser's splitter: it knows that a
    CREATE VIEW body follows Spark's string rules)."""
    from icesql.syntax.parser import split_statements

    return split_statements(text)


def current_statement(text_before_cursor: str) -> str:
    """The text of the statement the cursor is in: everything after the last complete one."""
    ranges = statement_ranges(text_before_cursor)
    if not ranges:
        return text_before_cursor if text_before_cursor.strip() else ""
    start, end = ranges[-1]
    tail = text_before_cursor[end:]
    semis = [t for t in tokenize(tail) if t.kind is TokenKind.PUNCT and t.text == ";"]
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
    from icesql.syntax.parser import is_complete as statement_is_complete

    return statement_is_complete(text)


def destructive_statements(text: str) -> list[str]:
    """The statements of ``text`` that destroy something (``DROP ...``), each as written."""
    out = []
    for start, end in statement_ranges(text):
        sig = significant(tokenize(text[start:end]))
        if sig and sig[0].kind is TokenKind.WORD and sig[0].upper == "DROP":
            out.append(" ".join(text[start:end].split()))
    return out
