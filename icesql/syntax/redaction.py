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

This module reads statements (``find_secrets``) and hides what it finds; option lists are read
by ``secret_options``, and what both ask of a token is in ``secret_tokens``.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Callable

from icesql.syntax.lexer import STATEMENT_WORDS, Token, TokenKind, statement_head, tokens
from icesql.syntax.options import SECRET_WORDS
from icesql.syntax.secret_options import hide_all_but_keywords, read_as_options, read_option_lists
from icesql.syntax.secret_tokens import (
    LITERALS,
    Secret,
    StatementScan,
    is_structure,
    mentions_secret_word,
    token_mentions_secret,
)

MASK = "*"
REDACTED = "'<redacted>'"

_OBJECT_WORDS = frozenset({"CONNECTION", "SOURCE", "VIEW", "SINK", "CONNECTIONS", "SOURCES", "VIEWS", "SINKS"})
# option syntax inside one literal (``' , SECRET ACCESS KEY = '``): a stray quote swallowed
# options, and their values became bare words
_SWALLOWED = re.compile(
    rf"(?:{'|'.join(SECRET_WORDS)})[A-Z0-9_\s]*=|[,(]\s*[A-Z][A-Z0-9_\s]*=|\bSECRET\s+\S+\s+AS\b", re.IGNORECASE
)


def find_secrets(text: str, *, _offset: int = 0, _depth: int = 0) -> list[Secret]:
    """Every secret value in ``text``, in order (also in a statement commented out)."""
    _nested = _depth > 0
    out: list[Secret] = []
    current: list[Token] = []
    suspect = False  # the statement before held a secret: a senseless one after it is hidden
    for tok in tokens(text):
        if tok.kind is TokenKind.PUNCT and tok.text == ";":
            found, suspect = _secrets_of(current, suspect, prose=_nested)
            out.extend(found)
            current = []
        else:
            current.append(tok)
            if tok.kind is TokenKind.COMMENT and _depth < 3 and _worth_reading(tok):
                out.extend(_commented(tok, _depth))
    out.extend(_secrets_of(current, suspect, prose=_nested)[0])
    if _offset:
        out = [Secret(s.start + _offset, s.end + _offset, tuple((a + _offset, b + _offset) for a, b in s.parts)) for s in out]
    return sorted(out, key=lambda s: s.start)


_STATEMENT_START = re.compile(r"\s*(?:--\s*|/\*\s*)*(?:CREATE|ALTER|EXPLAIN)\b", re.IGNORECASE)


def _worth_reading(comment: Token) -> bool:
    body = comment.text[2:]
    return token_mentions_secret(comment) or _STATEMENT_START.match(body) is not None


def _commented(tok: Token, depth: int) -> list[Secret]:
    """``-- CREATE SECRET pw AS '...'``: a statement commented out keeps its value hidden."""
    body = tok.text[2:-2] if tok.text.startswith("/*") and not tok.open else tok.text[2:]
    return find_secrets(body, _offset=tok.start + 2, _depth=depth + 1)


def _secrets_of(toks: list[Token], suspect: bool, *, prose: bool = False) -> tuple[list[Secret], bool]:
    sig = [t for t in toks if t.significant]
    if not sig:
        if suspect and not prose:  # `CREATE SECRET pw AS; -- 'value'`
            stmt = StatementScan(toks, _classify)
            stmt.add_range(toks[0].start if toks else 0, stmt.end)
            return stmt.out, suspect
        return [], suspect
    stmt = StatementScan(toks, _classify)
    holds_secret = _classify(stmt, sig, suspect, prose=prose)
    about_secrets = holds_secret or bool(stmt.out) or any(token_mentions_secret(t) for t in sig)
    return sorted(stmt.out, key=lambda s: s.start), about_secrets


def _classify(stmt: StatementScan, sig: list[Token], suspect: bool = False, *, prose: bool = False) -> bool:
    """Find the secrets of one statement; True when it is about secrets. ``prose``: the text
    of a comment, where only what reads as a statement counts."""
    last = sig[-1]
    if last.open and last.kind is not TokenKind.COMMENT and token_mentions_secret(last):
        stmt.add(last)  # an unterminated quote that swallowed a secret's statement or option
    offset = 1 if sig[0].is_word("EXPLAIN") else 0
    # in a comment, only what starts like a statement is read as one
    looks_like_statement = not prose or sig[offset].upper in ("CREATE", "ALTER", "SECRET")
    for k in range(offset, min(len(sig), offset + 3) if looks_like_statement else offset):
        tok = sig[k]
        if tok.kind is TokenKind.WORD and tok.upper in _OBJECT_WORDS:
            break
        if mentions_secret_word(tok):
            _secret_statement(stmt, sig, k)
            return True
    words = [t.upper for t in sig if t.kind is TokenKind.WORD]
    head = statement_head(words)
    known = bool(head) and sig[0].kind is TokenKind.WORD and head[0] in STATEMENT_WORDS and (
        head[0] not in ("CREATE", "ALTER", "DROP") or head[1:2] in (("CONNECTION",), ("SOURCE",), ("VIEW",), ("SINK",))
    )
    if looks_like_statement and any(
        (t.kind in (TokenKind.STRING, TokenKind.QUOTED) or t.open) and _SWALLOWED.search(t.text[:4096]) for t in sig
    ):
        # a stray quote turned options into a string and their values into bare words
        hide_all_but_keywords(stmt, sig)
        return True
    if known:
        read_option_lists(stmt, sig)
        return False
    if prose:
        read_as_options(stmt, sig)  # a comment: read as options of some connection
        if suspect:  # right after a CREATE SECRET in the same comment
            for tok in sig:
                if tok.kind in LITERALS or tok.open:
                    stmt.add(tok)
        first = next((i for i, t in enumerate(sig) if token_mentions_secret(t)), None)
        if first is not None:
            # what mentions a secret (a quote may have swallowed it) and every value-like word
            # after it: prose about a secret can hold the value anywhere
            tok = sig[first]
            if tok.kind in (TokenKind.STRING, TokenKind.QUOTED) or tok.open:
                stmt.add(tok)
            stmt.add_range(
                tok.end,
                stmt.end,
                # prose stays readable: plain words are kept, what looks like a value is not
                keep=lambda t: t.kind is TokenKind.PUNCT
                or is_structure(t)
                or (t.kind is TokenKind.WORD and t.text.isalpha()),
            )
        return False
    if suspect or any(tok.kind is not TokenKind.PUNCT and token_mentions_secret(tok) for tok in sig):
        hide_all_but_keywords(stmt, sig)
        return True
    # A statement that makes no sense (a syntax error whatever follows): its strings could be
    # anything, a value whose CREATE SECRET was lost included, and so could what follows AS.
    read_as_options(stmt, sig)
    for tok in sig:
        if tok.is_word("AS"):
            stmt.add_range(tok.end, stmt.end)  # as the value of a CREATE SECRET would be
            return True
        if tok.kind in (TokenKind.STRING, TokenKind.QUOTED) or tok.open:
            stmt.add(tok)
    return False



def _starts_statement(stmt: StatementScan, tok: Token) -> bool:
    """A statement keyword first on its line: a new statement whose ';' before was forgotten."""
    if not (tok.kind is TokenKind.WORD and tok.upper in STATEMENT_WORDS):
        return False
    i = bisect.bisect_left(stmt.starts, tok.start)
    prev = stmt.all[i - 1] if i > 0 else None
    return prev is not None and prev.kind is TokenKind.SPACE and "\n" in prev.text


def _secret_statement(stmt: StatementScan, sig: list[Token], k: int) -> None:
    """CREATE/ALTER SECRET (or a misspelling of it): the name stays, the rest is the value,
    comments included, up to a statement keyword that starts a later line."""
    n = len(sig)
    j = k + 1
    regular = k == 0 or sig[k - 1].upper in STATEMENT_WORDS
    if sig[k].kind is not TokenKind.WORD:
        stmt.add(sig[k])  # a quote swallowed the keyword, and maybe the value after it
    elif not regular:
        # `CREATE pw SECRET ...`, `'v' SECRET`: words out of place, no name is sure: hide all
        # after it, and the literals before it
        for tok in sig[:k]:
            if tok.kind in LITERALS or tok.open:
                stmt.add(tok)
    else:
        while j < n and sig[j].kind is TokenKind.WORD and sig[j].upper in ("IF", "NOT", "EXISTS"):
            j += 1
        as_at = next((m for m in range(j, min(n, j + 4)) if sig[m].is_word("AS")), None)
        name_end = as_at if as_at is not None else min(n, j + 1)
        # the name is one word or quoted identifier; a string, an unterminated quote or
        # anything more where it goes may hold the value
        named = False
        for tok in sig[j:name_end]:
            # a name in double quotes may be the value in the wrong quotes: hidden too
            if tok.kind in (TokenKind.STRING, TokenKind.QUOTED) or tok.open or (named and tok.kind is not TokenKind.PUNCT):
                stmt.add(tok)
            named = named or tok.kind is not TokenKind.PUNCT
        creating = k == 0 or not sig[k - 1].is_word("DROP") and not sig[k - 1].is_word("SHOW")
        if creating and as_at is None and j < n:
            # CREATE SECRET 'x' / CREATE SECRET x / CREATE SECRET 12: no AS: a lone word may be
            # the value, a word with more after it is the name, anything else may be the value
            # (AS glued to the value, `AShunter2`, is no name)
            named = sig[j].kind is TokenKind.WORD and j + 1 < n and not sig[j].upper.startswith("AS")
            stmt.add_range(sig[j + 1].start if named else sig[j].start, stmt.end)
            return
        j = name_end
    if j >= n:
        # nothing but comments may follow
        stmt.add_range(sig[-1].end, stmt.end)
        return
    start, stop = sig[j].start, stmt.end
    seen_value = False
    for m in range(j, n):
        tok = sig[m]
        if seen_value and _starts_statement(stmt, tok):
            stop = tok.start
            stmt.add_range(start, stop, keep=lambda t: t.is_word("AS"))
            _classify(stmt, sig[m:])
            return
        seen_value = seen_value or not tok.is_word("AS")
    stmt.add_range(start, stop, keep=lambda t: t.is_word("AS"))


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
            _mask_into(pieces, text, start, end)
            pos = end
    pieces.append(text[pos:])
    return "".join(pieces)


_NON_BLANK = re.compile(r"\S")
_BLANK = re.compile(r"\s")


def _mask_into(pieces: list[str], text: str, start: int, end: int) -> None:
    """Append ``text[start:end]`` masked: quotes kept, blank space kept, the rest ``*``
    (without copying a long literal more than once)."""
    first = text[start] if start < end else ""
    keep_first = first in ("'", '"', "`")
    keep_last = keep_first and end - start >= 2 and text[end - 1] == first
    lo, hi = start + keep_first, end - keep_last
    if keep_first:
        pieces.append(first)
    if _BLANK.search(text, lo, hi) is None:
        pieces.append(MASK * (hi - lo))
    else:
        pieces.append(_NON_BLANK.sub(MASK, text[lo:hi]))
    if keep_last:
        pieces.append(first)


def redact_secrets(text: str) -> str:
    """``text`` with every secret value replaced by ``'<redacted>'``."""
    out: list[str] = []
    pos = 0
    for secret in find_secrets(text):
        if secret.start < pos:
            pos = max(pos, secret.end)  # overlapping findings: one replacement covers both
            continue
        out.append(text[pos : secret.start])
        out.append(REDACTED)
        pos = secret.end
    out.append(text[pos:])
    return mask_url_passwords("".join(out))


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
    masked = mask_url_passwords(mask_secrets(text, secrets))
    with _lock:
        if len(_recent) >= 4:
            _recent.pop(next(iter(_recent)))
        _recent[key] = (text, secrets, masked)
    return secrets, masked


# ``scheme://user:password@host``: the password of a URL written in any literal (a registry's URL
# refused for holding one, a database URI), masked where an error or a warning quotes the line
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@'\"]*:([^@\s/'\"]+)@")


def mask_url_passwords(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` masked (same length)."""
    if "@" not in text:
        return text
    return _URL_PASSWORD.sub(lambda m: m.group(0).replace(m.group(1), MASK * len(m.group(1)), 1), text)


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
    "mask_url_passwords",
    "overlap_test",
    "redact_secrets",
    "secrets_of_text",
]
