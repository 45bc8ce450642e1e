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
import functools
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from icesql.syntax.lexer import (
    STATEMENT_WORDS,
    Token,
    TokenKind,
    edit_distance,
    option_list_kind,
    statement_head,
    tokens,
)
from icesql.syntax.options import (
    CREDENTIAL_LISTS,
    LISTS,
    SECRET_WORDS,
    Kind,
    Secrecy,
    known_prefix,
    lookup,
    mentions_secret,
    secrecy,
)

MASK = "*"
REDACTED = "'<redacted>'"

_OBJECT_WORDS = frozenset({"CONNECTION", "SOURCE", "VIEW", "SINK", "CONNECTIONS", "SOURCES", "VIEWS", "SINKS"})
_LETTERS = re.compile(r"[A-Za-z]+")
_SECRET_MENTION = re.compile("|".join(SECRET_WORDS), re.IGNORECASE)
# option syntax inside one literal (``' , SECRET ACCESS KEY = '``): a stray quote swallowed
# options, and their values became bare words
_SWALLOWED = re.compile(
    rf"(?:{'|'.join(SECRET_WORDS)})[A-Z0-9_\s]*=|[,(]\s*[A-Z][A-Z0-9_\s]*=|\bSECRET\s+\S+\s+AS\b", re.IGNORECASE
)


@dataclass(frozen=True)
class Secret:
    """One secret value: the tokens that spell it (several when it is written badly)."""

    start: int
    end: int
    parts: tuple[tuple[int, int], ...]  # (start, end) of each token to mask


def _secret_like(word: str) -> bool:
    """``SECRET`` or a misspelling of it (``SECERT``, ``SECRETS``, ``SCRET``)."""
    w = word.upper()
    return 4 <= len(w) <= 9 and (w == "SECRET" or edit_distance(w, "SECRET") <= 2)


def _mentions_secret_word(tok: Token) -> bool:
    if tok.kind is TokenKind.WORD:
        return _secret_like(tok.text)
    return any(_secret_like(w) for w in _LETTERS.findall(tok.text[:200]))


class _Statement:
    """The tokens of one statement and the secrets found in them."""

    def __init__(self, toks: list[Token]) -> None:
        self.all = toks
        self.starts = [t.start for t in toks]
        self.end = toks[-1].end if toks else 0
        self.out: list[Secret] = []

    def add_range(
        self,
        start: int,
        end: int,
        *,
        keep: Callable[[Token], bool] | None = None,
        holes: Sequence[tuple[int, int]] = (),
    ) -> None:
        """Mask every token in ``[start, end)`` but blank space, ``keep``'s and those inside
        ``holes`` (nested lists, masked on their own): one secret per run between kept ones."""
        lo = bisect.bisect_left(self.starts, start)
        parts: list[tuple[int, int]] = []
        for tok in self.all[lo:]:
            if tok.start >= end:
                break
            if tok.kind is TokenKind.SPACE:
                continue
            if (keep is not None and keep(tok)) or any(a <= tok.start < b for a, b in holes):
                self._flush(parts)
                parts = []
                continue
            parts.append((tok.start, tok.end))
        self._flush(parts)

    def _flush(self, parts: list[tuple[int, int]]) -> None:
        if parts:
            self.out.append(Secret(parts[0][0], parts[-1][1], tuple(parts)))

    def add(self, tok: Token) -> None:
        self.out.append(Secret(tok.start, tok.end, ((tok.start, tok.end),)))


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
    return _mentions_secret(comment) or _STATEMENT_START.match(body) is not None


def _commented(tok: Token, depth: int) -> list[Secret]:
    """``-- CREATE SECRET pw AS '...'``: a statement commented out keeps its value hidden."""
    body = tok.text[2:-2] if tok.text.startswith("/*") and not tok.open else tok.text[2:]
    return find_secrets(body, _offset=tok.start + 2, _depth=depth + 1)


def _secrets_of(toks: list[Token], suspect: bool, *, prose: bool = False) -> tuple[list[Secret], bool]:
    sig = [t for t in toks if t.significant]
    if not sig:
        if suspect and not prose:  # `CREATE SECRET pw AS; -- 'value'`
            stmt = _Statement(toks)
            stmt.add_range(toks[0].start if toks else 0, stmt.end)
            return stmt.out, suspect
        return [], suspect
    stmt = _Statement(toks)
    holds_secret = _classify(stmt, sig, suspect, prose=prose)
    about_secrets = holds_secret or bool(stmt.out) or any(_mentions_secret(t) for t in sig)
    return sorted(stmt.out, key=lambda s: s.start), about_secrets


def _classify(stmt: _Statement, sig: list[Token], suspect: bool = False, *, prose: bool = False) -> bool:
    """Find the secrets of one statement; True when it is about secrets. ``prose``: the text
    of a comment, where only what reads as a statement counts."""
    last = sig[-1]
    if last.open and last.kind is not TokenKind.COMMENT and _mentions_secret(last):
        stmt.add(last)  # an unterminated quote that swallowed a secret's statement or option
    offset = 1 if sig[0].is_word("EXPLAIN") else 0
    # in a comment, only what starts like a statement is read as one
    looks_like_statement = not prose or sig[offset].upper in ("CREATE", "ALTER", "SECRET")
    for k in range(offset, min(len(sig), offset + 3) if looks_like_statement else offset):
        tok = sig[k]
        if tok.kind is TokenKind.WORD and tok.upper in _OBJECT_WORDS:
            break
        if _mentions_secret_word(tok):
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
        _everything(stmt, sig)
        return True
    if known:
        _option_lists(stmt, sig)
        return False
    if prose:
        _as_options(stmt, sig)  # a comment: read as options of some connection
        if suspect:  # right after a CREATE SECRET in the same comment
            for tok in sig:
                if tok.kind in _LITERALS or tok.open:
                    stmt.add(tok)
        first = next((i for i, t in enumerate(sig) if _mentions_secret(t)), None)
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
                or _structure(t)
                or (t.kind is TokenKind.WORD and t.text.isalpha()),
            )
        return False
    if suspect or any(tok.kind is not TokenKind.PUNCT and _mentions_secret(tok) for tok in sig):
        _everything(stmt, sig)
        return True
    # A statement that makes no sense (a syntax error whatever follows): its strings could be
    # anything, a value whose CREATE SECRET was lost included, and so could what follows AS.
    _as_options(stmt, sig)
    for tok in sig:
        if tok.is_word("AS"):
            stmt.add_range(tok.end, stmt.end)  # as the value of a CREATE SECRET would be
            return True
        if tok.kind in (TokenKind.STRING, TokenKind.QUOTED) or tok.open:
            stmt.add(tok)
    return False


def _mentions_secret(tok: Token) -> bool:
    return _mentions_secret_word(tok) or mentions_secret(tok.text[:200])


def _starts_statement(stmt: _Statement, tok: Token) -> bool:
    """A statement keyword first on its line: a new statement whose ';' before was forgotten."""
    if not (tok.kind is TokenKind.WORD and tok.upper in STATEMENT_WORDS):
        return False
    i = bisect.bisect_left(stmt.starts, tok.start)
    prev = stmt.all[i - 1] if i > 0 else None
    return prev is not None and prev.kind is TokenKind.SPACE and "\n" in prev.text


def _secret_statement(stmt: _Statement, sig: list[Token], k: int) -> None:
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
            if tok.kind in _LITERALS or tok.open:
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


def _dialect_word(tok: Token) -> bool:
    """A keyword of the dialect (never a value's whole text)."""
    from icesql.syntax.parser import keywords  # the parser imports this module

    return tok.kind is TokenKind.WORD and tok.upper in keywords()


def _structure(tok: Token) -> bool:
    """What stays visible where everything else is hidden: keywords and syntax punctuation."""
    return tok.text in _STRUCTURE or _dialect_word(tok)


def _everything(stmt: _Statement, sig: list[Token]) -> None:
    """A statement that makes no sense but mentions a secret: hide all but the keywords."""
    stmt.add_range(sig[0].start, stmt.end, keep=_structure)
    _as_options(stmt, sig)  # and whole option values, punctuation included


# --------------------------------------------------------------------------- option lists


def _option_lists(stmt: _Statement, sig: list[Token]) -> None:
    words: list[str] = []
    i = 0
    n = len(sig)
    stray = False  # an '=' outside any list
    connection = statement_head([t.upper for t in sig if t.kind is TokenKind.WORD])[:2] == ("CREATE", "CONNECTION")
    while i < n:
        tok = sig[i]
        if tok.is_punct("("):
            kind = option_list_kind(words, sig[:i])
            # in a connection every list is an option list: a misspelled AWS still holds keys
            i = _items(stmt, sig, i + 1, kind, None, options=kind is not None or connection)
            continue
        if tok.kind is TokenKind.WORD:
            words.append(tok.upper)
        stray = stray or tok.is_punct("=")
        i += 1
    if statement_head(words)[:2] == ("CREATE", "CONNECTION"):
        if stray:
            _as_options(stmt, sig)  # options that ended up outside their brackets
        opened = next((k for k, t in enumerate(sig) if t.is_punct("(")), None)
        if opened is None:  # its '(' lost: anything but the keywords may be a value
            _everything(stmt, sig)
        else:
            # `TO KAFKA BROKER 'h', SASL PASSWORD 'v' ) WITH (...)`: the list's '(' lost, a later
            # one found; between the connection's kind and that '(' only options can stand
            to = next((k for k, t in enumerate(sig[:opened]) if t.is_word("TO")), None)
            if to is not None and opened - to > 2:
                for t in sig[to + 2 : opened]:
                    if t.kind in _LITERALS or t.open or (t.kind is TokenKind.WORD and not _dialect_word(t)):
                        stmt.add(t)
        depth = 0
        for t in sig[opened or len(sig) :]:
            closing = t.is_punct(")")
            depth = max(0, depth + t.is_punct("(") - closing)
            if depth == 0 and not closing and not t.is_word("WITH"):
                stmt.add(t)  # after the options only WITH (...) may come: anything else may be a value
        for t in stmt.all:
            if t.kind is TokenKind.COMMENT and ("'" in t.text or '"' in t.text or _mentions_secret(t)):
                stmt.add(t)  # a key commented out is still a key; a comment may swallow a value


def _as_options(stmt: _Statement, sig: list[Token]) -> None:
    """Read ``sig`` as option items whatever brackets it has or lost (when in doubt); an
    option is secret here when its name says so."""
    i = 0
    while i < len(sig):
        i = _items(stmt, sig, i, _PROSE, None, options=True)


_LITERALS = (TokenKind.STRING, TokenKind.QUOTED, TokenKind.NUMBER)
_STRUCTURE = frozenset("(),;=")  # punctuation that is syntax, never part of a value
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
                stmt.add(tok)
            i += 1
        return i
    lost_value = False
    while i < n:
        item: list[Token] = []  # the item's own tokens (nested lists are read on their own)
        holes: list[tuple[int, int]] = []  # where nested lists sit
        eq: int | None = None
        item_secrecy: Secrecy | None = None
        while i < n and not (sig[i].is_punct(",") or sig[i].is_punct(")")):
            tok = sig[i]
            valued = eq is not None or any(t.kind in _LITERALS for t in item)
            if (
                valued
                and tok.kind is TokenKind.WORD
                and _starts_option(sig, i, kind, eq_forgotten=not _secret_value(kind, inherit, item, eq))
            ):
                break  # NAME = value NAME = value: a ',' forgotten, a new option starts
            if valued and tok.upper in ("CREATE", "ALTER") and i + 1 < n and _mentions_secret_word(sig[i + 1]):
                # `... = false CREATE SECRET s AS 'v'`: a ')' and a ';' forgotten (only CREATE and
                # ALTER carry a secret's value: `= SHOW SECR` is a value, masked as one)
                if options and item:
                    _item_secrets(stmt, kind, inherit, item, eq, item_secrecy, tok.start, holes)
                _classify(stmt, sig[i:])
                return n
            if tok.is_punct("("):
                if item_secrecy is None:
                    item_secrecy = _secrecy(kind, inherit, item, eq) if options else Secrecy.NONE
                inner = _PROSE if kind == _PROSE else None
                # BROKERS = ('h1:9092', ...): a list of a known option that holds no secret
                plain = False
                if item_secrecy is Secrecy.NONE and _lists_strings(kind, item, eq):
                    plain = _only_strings(sig, i + 1)
                    if not plain:  # a list of strings that holds something else: when in doubt, hidden
                        item_secrecy = Secrecy.VALUE
                after = _items(stmt, sig, i + 1, inner, item_secrecy, options=options and not plain, depth=depth + 1)
                closed = 0 < after <= n and sig[after - 1].is_punct(")")
                holes.append((tok.start, sig[after - 1].end if closed else stmt.end))
                i = after
                continue
            if tok.is_punct("=") and eq is not None and len(item) > eq + 1:
                break  # NAME = value = other: the second '=' starts an option whose name was lost
            if tok.is_punct("=") and eq is None:
                eq = len(item)
            item.append(tok)
            i += 1
        stop = sig[i].start if i < n else stmt.end
        if options and (item or holes):
            if lost_value and item:
                # the item after a secret option left without its value (`KEY = , v`): the
                # value may have slipped into it
                stmt.add_range(item[0].start, stop, holes=holes)
            else:
                _item_secrets(stmt, kind, inherit, item, eq, item_secrecy, stop, holes)
            lost_value = (
                eq is not None
                and eq == len(item) - 1
                and not holes
                and _secrecy(kind, inherit, item, eq) is Secrecy.VALUE
            )
        if i < n and sig[i].is_punct(")"):
            return i + 1
        if i < n and sig[i].is_punct(","):
            i += 1
    return i


def _secret_value(kind: str | None, inherit: Secrecy | None, item: list[Token], eq: int | None) -> bool:
    """Whether ``item`` (read so far) is an option whose value is a secret."""
    return eq is not None and _secrecy(kind, inherit, item, eq) is Secrecy.VALUE


def _starts_option(sig: list[Token], i: int, kind: str | None, *, eq_forgotten: bool = True) -> bool:
    """Whether ``sig[i:]`` reads ``NAME =`` for an option the list knows (any list's, when
    the list is not known); with ``eq_forgotten``, also a secret's ``NAME`` with its ``=``
    forgotten. Inside a secret's value only ``NAME =`` ends it: the words of an unquoted value
    (``PASSWORD = 00 TOKEN``, lexed ``000TOKEN`` too) may read like an option's name, and they
    are masked with the value rather than shown as a name."""
    j = i
    while j < len(sig) and sig[j].kind is TokenKind.WORD:
        j += 1
    words = [t.upper for t in sig[i:j]]
    lists = [kind] if kind in LISTS else list(LISTS)
    if j < len(sig) and sig[j].is_punct("="):
        return any(known_prefix(k, words) == len(words) for k in lists)
    if not eq_forgotten:
        return False
    # a secret's NAME value with its '=' forgotten too
    return any(_mentions_secret(t) for t in sig[i:j]) and any(known_prefix(k, words) > 0 for k in lists)


def _lists_strings(kind: str | None, item: list[Token], eq: int | None) -> bool:
    """Whether ``item`` is an option of ``kind`` whose value is a list of plain strings."""
    if kind is None or kind == _PROSE:
        return False
    name, key_is_string, _ = _split(kind, item, eq)
    spec, secret_form = lookup(kind, name) if not key_is_string else (None, False)
    return spec is not None and not secret_form and not spec.secret and spec.kind is Kind.STRINGS


def _only_strings(sig: list[Token], i: int) -> bool:
    """Whether the list opened before ``sig[i]`` holds strings and commas only, up to its ')'
    (anything else there, ``'k' = v`` included, is read as options and masked as such)."""
    for tok in sig[i:]:
        if tok.is_punct(")"):
            return True
        if not (tok.kind is TokenKind.STRING and not tok.open) and not tok.is_punct(","):
            return False
    return False


def _split(kind: str | None, item: list[Token], eq: int | None) -> tuple[str, bool, int]:
    """(option name, key written as a string, index where the value starts) of an item.

    The name is the leading words (or a key written as a string); the value is whatever
    follows it: after the ``=``, or, when something else comes first (``NAME 'v'`` with the
    ``=`` forgotten, ``NAME 'v' =`` mistyped), from that token on, ``=`` included."""
    if item and item[0].kind is TokenKind.STRING:
        name_end = 1
    else:
        name_end = 0
        while name_end < len(item) and item[name_end].kind is TokenKind.WORD:
            name_end += 1
        if name_end:
            # only words: SECRET ACCESS KEY hunter2 is an option and its value (also before a
            # misplaced '=': SESSION TOKEN hunter2 =)
            words = [t.upper for t in item[:name_end]]
            n = known_prefix(kind, words)
            name_end = n if 0 < n < len(words) else name_end
    head = item[:name_end]
    value_at = eq + 1 if eq is not None and eq == name_end else name_end
    if len(head) == 1 and head[0].kind is TokenKind.STRING:
        return head[0].text[1:-1].replace("''", "'"), True, value_at
    return " ".join(t.upper for t in head), False, value_at


_PROSE = "\0prose"  # the "list kind" of options read out of a comment or stray text


def _secrecy(kind: str | None, inherit: Secrecy | None, item: list[Token], eq: int | None) -> Secrecy:
    name, key_is_string, _ = _split(kind, item, eq)
    if kind == _PROSE:
        nameless = not name and eq is not None  # `, = 'value'`: the name was lost
        return Secrecy.VALUE if nameless or mentions_secret(name) else Secrecy.NONE
    if inherit is not None:
        # inside PROPERTIES = (...): a secret option's whole list, else keys that say secret
        if inherit is Secrecy.VALUE:
            return Secrecy.VALUE
        return secrecy(None, name, key_is_string=True) if name else Secrecy.NONE
    level = secrecy(kind, name, key_is_string=key_is_string)
    if level is Secrecy.NONE and not key_is_string and _names_a_secret_later(kind, item):
        return Secrecy.VALUE
    return level


def _names_a_secret_later(kind: str | None, item: list[Token]) -> bool:
    """``REGION SECRET ACCESS KEY = 'v'``, ``BROKER SASL PASSWORD 'v'``: the words of an
    option whose value (and ',') went missing, then a secret option's name: what follows is
    that secret's value."""
    words: list[str] = []
    for tok in item:
        if tok.kind is not TokenKind.WORD:
            break
        words.append(tok.upper)
    for k in range(1, len(words)):
        n = known_prefix(kind, words[k:])
        if n and secrecy(kind, " ".join(words[k : k + n])) is not Secrecy.NONE:
            return True
    return False


@functools.cache
def _secret_heads(kind: str | None) -> frozenset[str]:
    """First words of the secret options of a list (of every list when it is not known)."""
    kinds = [kind] if kind in LISTS else list(LISTS)
    return frozenset(
        name.split()[0]
        for k in kinds
        for spec in LISTS[k]
        for name in spec.all_names
        if secrecy(k, name) is not Secrecy.NONE
    )


def _secret_word_after_value(kind: str | None, value: list[Token]) -> Token | None:
    """``BROKER 'h:9092' SASL 'v'``, ``REGION 'eu' TOKEN 'v'``: after a value, a word that
    starts a secret option's name (or says secret): a ',' and part of a name were lost, and
    what follows may be a credential. ``SECRET name`` is a reference, not such a word."""
    heads = _secret_heads(kind)
    seen_literal = False
    for i, tok in enumerate(value):
        if tok.kind in _LITERALS:
            seen_literal = True
        elif seen_literal and tok.kind is TokenKind.WORD and (tok.upper in heads or _SECRET_MENTION.search(tok.text)):
            nxt = value[i + 1] if i + 1 < len(value) else None
            if tok.is_word("SECRET") and nxt is not None and nxt.kind is TokenKind.WORD:
                continue
            return tok
    return None


def _item_secrets(
    stmt: _Statement,
    kind: str | None,
    inherit: Secrecy | None,
    item: list[Token],
    eq: int | None,
    item_secrecy: Secrecy | None,
    stop: int,
    holes: list[tuple[int, int]],
) -> None:
    """Mask an item's value: everything from ``=`` (or the end of its name) to the ``,`` or
    ``)`` that ends it, comments included, nested lists left to their own items."""
    _, _, value_at = _split(kind, item, eq)
    if inherit is Secrecy.VALUE and (eq is None or value_at >= len(item)):
        value_at = 0  # in a secret's list, an item without '=' (or a value) is a value on its own
        eq = None
    value = item[value_at:]
    if eq is not None and value_at == eq + 1:
        start = item[eq].end
    elif value:
        start = value[0].start
    elif holes:
        start = holes[0][0]
    elif item:
        start = item[-1].end  # no value, but comments may follow the name
    else:
        return
    level = _secrecy(kind, inherit, item, eq)
    if item_secrecy is Secrecy.VALUE:
        level = Secrecy.VALUE
    if eq is None and item and item[0].kind in _LITERALS and (kind is None or kind in CREDENTIAL_LISTS):
        level, start = Secrecy.VALUE, item[0].start  # a value with no name, in a list of credentials
        value = item
    elif eq is None and item and item[0].kind is TokenKind.WORD and (kind is None or kind in CREDENTIAL_LISTS):
        words = [t.upper for t in item if t.kind is TokenKind.WORD]
        if not _dialect_word(item[0]) and known_prefix(kind, words) == 0:
            # a bare word that is no option's name: a value unquoted
            level, start, value = Secrecy.VALUE, item[0].start, item
    name_words = [t.upper for t in item[:value_at] if t.kind is TokenKind.WORD]
    mangled = kind != _PROSE and eq is None and not (name_words and known_prefix(kind, name_words) == len(name_words))
    if mangled and any(_mentions_secret_word(t) for t in item):
        # a secret option's name mangled (SECRET SECRET ACCESS KEY v): all but the keywords
        stmt.add_range(item[0].start, stop, keep=_structure, holes=holes)
        return
    if level is Secrecy.NONE:
        if kind is None or kind in CREDENTIAL_LISTS:
            # `BROKER 'h:9092' PASSWORD 'v'`: a ',' and part of a name lost after a value; from a
            # word that says secret on, the rest may be a credential
            after = _secret_word_after_value(kind, value)
            if after is not None:
                stmt.add_range(after.start, stop, holes=holes)
        return
    # SECRET name is a reference; SECRET "..." may be a value in the wrong quotes: hidden
    is_reference = len(value) == 2 and value[0].is_word("SECRET") and value[1].kind is TokenKind.WORD
    if is_reference:
        return
    if level is Secrecy.NAME and len(value) == 1 and value[0].kind is TokenKind.WORD:
        return  # PASSWORD SECRET = name
    stmt.add_range(start, stop, holes=holes)


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
