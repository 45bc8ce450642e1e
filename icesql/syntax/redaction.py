"""Where secret values sit in SQL text, and the two ways of hiding them.

This works on text that may not parse (a syntax error two words after a secret's value must
not print the value, and the shell's history keeps what the user typed, mistakes included),
so it is lexical: it reads the tokens of ``icesql.syntax.lexer`` statement by statement and
applies one rule, ``icesql.syntax.options.secrecy``, to every option it finds. A value is
secret when it sits

* after the name in a ``CREATE SECRET`` / ``ALTER SECRET`` statement (also when the keyword is
  misspelled, ``SECERT``, or a stray quote swallowed part of the statement: everything after
  the name but the word AS is masked, up to a statement keyword starting a later line);
* in an option (``NAME = value``, and ``NAME value`` with the ``=`` forgotten) that ``secrecy``
  calls secret: a secret-bearing option, an unknown option of a connection, a property key
  that mentions a secret; a ``SECRET name`` reference is a name, not a value, and stays;
* anywhere in a statement whose first words make no sense but that mentions a secret
  (``CREATE 'x' pw AS SECRET``): there every literal and every word that is not a keyword.

``mask_secrets`` keeps the length (quotes, line breaks and blank space stay; every other
character becomes ``*``), so spans, lines, columns and carets stay right for error messages;
``redact_secrets`` replaces each value by ``'<redacted>'`` (history, echoes). When in doubt,
mask: a literal that is not a secret but sits in a secret-ish position is hidden too, which
costs nothing but a less informative caret line.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from icesql.syntax.lexer import (
    STATEMENT_WORDS,
    Token,
    TokenKind,
    option_list_kind,
    statement_head,
    tokens,
)
from icesql.syntax.options import SECRET_WORDS, Secrecy, known_prefix, secrecy

MASK = "*"
REDACTED = "'<redacted>'"

_OBJECT_WORDS = frozenset({"CONNECTION", "SOURCE", "VIEW", "SINK", "CONNECTIONS", "SOURCES", "VIEWS", "SINKS"})
_LETTERS = re.compile(r"[A-Za-z]+")
_SECRET_MENTION = re.compile("|".join(SECRET_WORDS), re.IGNORECASE)


@dataclass(frozen=True)
class Secret:
    """One secret value: the tokens that spell it (several when it is written badly)."""

    start: int
    end: int
    parts: tuple[tuple[int, int], ...]  # (start, end) of each token to mask


def _edits(a: str, b: str) -> int:
    """Edit distance with adjacent swaps (``SECERT`` is one edit from ``SECRET``)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            d = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                d = min(d, prev2[j - 2] + 1)
            cur.append(d)
        prev2, prev = prev, cur
    return prev[-1]


def _secret_like(word: str) -> bool:
    """``SECRET`` or a misspelling of it (``SECERT``, ``SECRETS``, ``SCRET``)."""
    w = word.upper()
    return 4 <= len(w) <= 9 and (w == "SECRET" or _edits(w, "SECRET") <= 2)


def _mentions_secret_word(tok: Token) -> bool:
    if tok.kind is TokenKind.WORD:
        return _secret_like(tok.text)
    return any(_secret_like(w) for w in _LETTERS.findall(tok.text[:200]))


class _Statement:
    """The tokens of one statement and the secrets found in them."""

    def __init__(self, toks: list[Token]) -> None:
        self.all = toks
        self.starts = [t.start for t in toks]
        self.out: list[Secret] = []

    def add(self, run: list[Token], *, trailing: bool = False) -> None:
        """Mask a run of significant tokens, with the comments between them (and, with
        ``trailing``, the comments after the last one: ``hunter--2`` is a word and a comment)."""
        if not run:
            return
        start, end = run[0].start, run[-1].end
        lo = bisect.bisect_left(self.starts, start)
        hi = bisect.bisect_left(self.starts, end)
        if trailing:
            while hi < len(self.all) and not self.all[hi].significant:
                hi += 1
        parts = tuple((t.start, t.end) for t in self.all[lo:hi] if t.kind is not TokenKind.SPACE)
        if parts:
            end = max(end, parts[-1][1])
        self.out.append(Secret(start, end, parts))

    def add_each(self, run: list[Token]) -> None:
        for tok in run:
            self.add([tok])


def find_secrets(text: str) -> list[Secret]:
    """Every secret value in ``text``, in order."""
    out: list[Secret] = []
    current: list[Token] = []
    for tok in tokens(text):
        if tok.kind is TokenKind.PUNCT and tok.text == ";":
            out.extend(_secrets_of(current))
            current = []
        else:
            current.append(tok)
    out.extend(_secrets_of(current))
    return out


def _secrets_of(toks: list[Token]) -> list[Secret]:
    sig = [t for t in toks if t.significant]
    if not sig:
        return []
    stmt = _Statement(toks)
    _classify(stmt, sig)
    return stmt.out


def _classify(stmt: _Statement, sig: list[Token]) -> None:
    offset = 1 if sig[0].is_word("EXPLAIN") else 0
    for k in range(offset, min(len(sig), offset + 3)):
        tok = sig[k]
        if tok.kind is TokenKind.WORD and tok.upper in _OBJECT_WORDS:
            break
        if _mentions_secret_word(tok):
            _secret_statement(stmt, sig, k)
            return
    words = [t.upper for t in sig if t.kind is TokenKind.WORD]
    head = statement_head(words)
    known = bool(head) and head[0] in STATEMENT_WORDS and (
        head[0] not in ("CREATE", "ALTER", "DROP") or head[1:2] in (("CONNECTION",), ("SOURCE",), ("VIEW",), ("SINK",))
    )
    if known:
        _option_lists(stmt, sig)
    elif any(tok.kind is not TokenKind.PUNCT and _mentions_secret(tok) for tok in sig):
        _everything(stmt, sig)


def _mentions_secret(tok: Token) -> bool:
    return _mentions_secret_word(tok) or _SECRET_MENTION.search(tok.text[:200]) is not None


def _starts_statement(stmt: _Statement, tok: Token) -> bool:
    """A statement keyword first on its line: a new statement whose ';' before was forgotten."""
    if not (tok.kind is TokenKind.WORD and tok.upper in STATEMENT_WORDS):
        return False
    i = bisect.bisect_left(stmt.starts, tok.start)
    prev = stmt.all[i - 1] if i > 0 else None
    return prev is not None and prev.kind is TokenKind.SPACE and "\n" in prev.text


def _secret_statement(stmt: _Statement, sig: list[Token], k: int) -> None:
    """CREATE/ALTER SECRET (or a misspelling of it): the name stays, the rest is the value."""
    n = len(sig)
    j = k + 1
    if sig[k].kind is TokenKind.WORD:
        while j < n and sig[j].kind is TokenKind.WORD and sig[j].upper in ("IF", "NOT", "EXISTS"):
            j += 1
        as_at = next((m for m in range(j, min(n, j + 4)) if sig[m].is_word("AS")), None)
        name_end = as_at if as_at is not None else min(n, j + 1)
        # a string or an unterminated quote where the name goes may hold the value
        stmt.add_each([t for t in sig[j:name_end] if t.kind is TokenKind.STRING or t.open])
        j = name_end
    run: list[Token] = []
    seen_value = False
    for m in range(j, n):
        tok = sig[m]
        if seen_value and _starts_statement(stmt, tok):
            stmt.add(run, trailing=True)
            _classify(stmt, sig[m:])
            return
        if tok.is_word("AS"):
            stmt.add(run, trailing=True)
            run = []
            continue
        run.append(tok)
        seen_value = True
    stmt.add(run, trailing=True)


def _everything(stmt: _Statement, sig: list[Token]) -> None:
    """A statement that makes no sense but mentions a secret: hide all but the keywords."""
    from icesql.syntax.parser import keywords

    known = keywords()
    for tok in sig:
        if tok.kind is TokenKind.PUNCT and not tok.open:
            continue
        if tok.kind is TokenKind.WORD and tok.upper in known:
            continue
        stmt.add([tok])


# --------------------------------------------------------------------------- option lists


def _option_lists(stmt: _Statement, sig: list[Token]) -> None:
    words: list[str] = []
    i = 0
    n = len(sig)
    while i < n:
        tok = sig[i]
        if tok.is_punct("("):
            kind = option_list_kind(words, sig[:i])
            # in a connection every list is an option list: a misspelled AWS still holds keys
            options = kind is not None or statement_head(words)[:2] == ("CREATE", "CONNECTION")
            i = _items(stmt, sig, i + 1, kind, None, options=options)
            continue
        if tok.kind is TokenKind.WORD:
            words.append(tok.upper)
        i += 1


_MAX_DEPTH = 32  # deeper than any valid statement nests (the parser stops at 16)


def _items(
    stmt: _Statement,
    sig: list[Token],
    i: int,
    kind: str | None,
    inherit: Secrecy | None,
    *,
    options: bool,
    depth: int = 1,
) -> int:
    """Read the items of a list from ``sig[i]`` (after its ``(``); returns the index after ``)``.

    ``kind`` is the list's key in ``LISTS`` (None inside a nested list); ``inherit`` is the
    secrecy of the option a nested list is the value of.
    """
    n = len(sig)
    if depth > _MAX_DEPTH:
        # absurd nesting: skip to the matching ')' and, when in doubt, hide every literal
        level = 1
        while i < n and level:
            tok = sig[i]
            level += tok.is_punct("(") - tok.is_punct(")")
            if options and tok.kind is not TokenKind.PUNCT and level:
                stmt.add([tok])
            i += 1
        return i
    while i < n:
        item: list[Token] = []  # the item's own tokens (nested lists are read on their own)
        runs: list[list[Token]] = [[]]  # value tokens, split where a nested list sits
        eq: int | None = None
        item_secrecy: Secrecy | None = None
        while i < n and not (sig[i].is_punct(",") or sig[i].is_punct(")")):
            tok = sig[i]
            if tok.is_punct("("):
                if item_secrecy is None:
                    item_secrecy = _secrecy(kind, inherit, item, eq) if options else Secrecy.NONE
                i = _items(stmt, sig, i + 1, None, item_secrecy, options=options, depth=depth + 1)
                runs.append([])
                continue
            if tok.is_punct("=") and eq is None:
                eq = len(item)
            item.append(tok)
            runs[-1].append(tok)
            i += 1
        if options and item:
            _item_secrets(stmt, kind, inherit, item, eq, runs, item_secrecy)
        if i < n and sig[i].is_punct(")"):
            return i + 1
        i += 1  # the ','
    return i


def _split(kind: str | None, item: list[Token], eq: int | None) -> tuple[str, bool, int]:
    """(option name, key written as a string, index where the value starts) of an item."""
    if eq is not None:
        head = item[:eq]
        value_at = eq + 1
    else:
        lead = 0
        while lead < len(item) and item[lead].kind is TokenKind.WORD:
            lead += 1
        if lead == 0 and item and item[0].kind is TokenKind.STRING:
            head, value_at = item[:1], 1  # 'key' 'value': the '=' forgotten
        elif lead == len(item):
            words = [t.upper for t in item]
            n = known_prefix(kind, words)
            value_at = n if 0 < n < len(words) else len(item)
            head = item[:value_at]
        else:
            head, value_at = item[:lead], lead
    if len(head) == 1 and head[0].kind is TokenKind.STRING:
        return head[0].text[1:-1].replace("''", "'"), True, value_at
    return " ".join(t.upper for t in head if t.kind is TokenKind.WORD), False, value_at


def _secrecy(kind: str | None, inherit: Secrecy | None, item: list[Token], eq: int | None) -> Secrecy:
    name, key_is_string, _ = _split(kind, item, eq)
    if inherit is not None:
        # inside PROPERTIES = (...): a secret option's whole list, else keys that say secret
        if inherit is Secrecy.VALUE:
            return Secrecy.VALUE
        return secrecy(None, name, key_is_string=True) if name else Secrecy.NONE
    return secrecy(kind, name, key_is_string=key_is_string)


def _item_secrets(
    stmt: _Statement,
    kind: str | None,
    inherit: Secrecy | None,
    item: list[Token],
    eq: int | None,
    runs: list[list[Token]],
    item_secrecy: Secrecy | None,
) -> None:
    _, _, value_at = _split(kind, item, eq)
    value = item[value_at:]
    if not value:
        return
    level = item_secrecy if item_secrecy is not None else _secrecy(kind, inherit, item, eq)
    if level is Secrecy.NONE:
        return
    is_reference = len(value) == 2 and value[0].is_word("SECRET") and value[1].kind in (
        TokenKind.WORD,
        TokenKind.QUOTED,
    ) and not value[1].open
    if is_reference:
        return
    if level is Secrecy.NAME and len(value) == 1 and value[0].kind is TokenKind.WORD:
        return  # PASSWORD SECRET = name
    first = value[0]
    for run in runs:
        stmt.add([t for t in run if t.start >= first.start], trailing=True)


# --------------------------------------------------------------------------- hiding


def mask_secrets(text: str, secrets: list[Secret] | None = None) -> str:
    """``text`` with every secret value's characters replaced by ``*`` (same length; quotes,
    line breaks and blank space kept)."""
    if secrets is None:
        if not text:
            return text
        secrets = find_secrets(text)
    if not secrets:
        return text
    pieces: list[str] = []
    pos = 0
    for secret in secrets:
        for start, end in secret.parts:
            if start < pos:
                continue
            pieces.append(text[pos:start])
            pieces.append(_masked(text, start, end))
            pos = end
    pieces.append(text[pos:])
    return "".join(pieces)


def _masked(text: str, start: int, end: int) -> str:
    piece = text[start:end]
    first = piece[:1]
    keep_first = first in ("'", '"', "`")
    keep_last = keep_first and len(piece) >= 2 and piece[-1] == first
    body = piece[1 if keep_first else 0 : len(piece) - 1 if keep_last else len(piece)]
    masked = re.sub(r"\S", MASK, body)
    return (first if keep_first else "") + masked + (first if keep_last else "")


def redact_secrets(text: str) -> str:
    """``text`` with every secret value replaced by ``'<redacted>'``."""
    out: list[str] = []
    pos = 0
    for secret in find_secrets(text):
        if secret.start < pos:
            continue
        out.append(text[pos : secret.start])
        out.append(REDACTED)
        pos = secret.end
    out.append(text[pos:])
    return "".join(out)


def overlap_test(secrets: list[Secret]) -> Callable[[int, int], bool]:
    """A function telling whether ``text[start:end]`` (or the character at ``start`` when the
    range is empty) touches a secret value."""
    spans = sorted({p for s in secrets for p in s.parts})
    starts = [s for s, _ in spans]

    def touches(start: int, end: int) -> bool:
        end = max(end, start + 1)
        i = bisect.bisect_left(starts, end) - 1
        # tokens never overlap, so the last one starting before ``end`` is the only candidate
        return i >= 0 and spans[i][1] > start

    return touches


_lock = threading.Lock()
_recent: dict[int, tuple[str, list[Secret], str]] = {}


def secrets_of_text(text: str) -> tuple[list[Secret], str]:
    """``(find_secrets(text), mask_secrets(text))``, remembered for the last few texts.

    A script's errors and warnings all quote the same text: it is scanned once, not once per
    message (which made checking a long script quadratic).
    """
    key = id(text)
    with _lock:
        hit = _recent.get(key)
    if hit is not None and hit[0] is text:
        return hit[1], hit[2]
    secrets = find_secrets(text)
    masked = mask_secrets(text, secrets)
    with _lock:
        if len(_recent) >= 4:
            _recent.pop(next(iter(_recent)))
        _recent[key] = (text, secrets, masked)
    return secrets, masked


def masked_text(text: str) -> str:
    """``mask_secrets(text)``, remembered like ``secrets_of_text``."""
    return secrets_of_text(text)[1]


# The names the rest of the code base used before the lexer was shared.
mask_secret_literals = mask_secrets

__all__ = [
    "MASK",
    "REDACTED",
    "Secret",
    "find_secrets",
    "masked_text",
    "mask_secret_literals",
    "mask_secrets",
    "overlap_test",
    "redact_secrets",
    "secrets_of_text",
]
