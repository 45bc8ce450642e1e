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
    """``(start, end)`` of each non-empty statement, split at ``;`` outside quotes and comments.

    The ``;`` itself is not included. A trailing statement without ``;`` is included.
    """
    ranges: list[tuple[int, int]] = []
    start = 0
    has_content = False
    for tok in tokenize(text):
        if tok.kind is TokenKind.PUNCT and tok.text == ";":
            if has_content:
                ranges.append((start, tok.start))
            start, has_content = tok.end, False
        elif tok.significant:
            has_content = True
    if has_content:
        ranges.append((start, len(text)))
    return ranges


def current_statement(text_before_cursor: str) -> str:
    """The text of the statement the cursor is in: everything after the last top-level ``;``."""
    last = 0
    for tok in tokenize(text_before_cursor):
        if tok.kind is TokenKind.PUNCT and tok.text == ";":
            last = tok.end
    return text_before_cursor[last:]


def is_complete(text: str) -> bool:
    """Whether Enter should submit ``text`` rather than start a new line.

    True for blank input, a backslash command, ``quit``/``exit``, and SQL whose last
    significant token is a ``;`` outside quotes and comments.
    """
    stripped = text.strip()
    if not stripped or stripped.startswith("\\"):
        return True
    if stripped.lower().rstrip(";").strip() in ("quit", "exit"):
        return True
    tokens = tokenize(text)
    if any(t.open for t in tokens):
        return False
    sig = significant(tokens)
    return bool(sig) and sig[-1].kind is TokenKind.PUNCT and sig[-1].text == ";"
