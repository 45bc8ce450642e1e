"""Secret values inside option lists: ``(NAME = value, ...)`` read item by item.

Each item's name is looked up in ``icesql.syntax.options`` (``secrecy``: a secret-bearing
option, an unknown option of a connection, a property key that mentions a secret) and its
value, up to the ',' or ')' that ends it, comments included, is masked when the name calls for
it. The reading forgives what a typo does to a list: a ',' or '=' forgotten, a ')' lost, a
value that slipped into the next item, a secret option's name mangled. Text outside any list
(a comment, a statement that makes no sense) is read as options too, when in doubt.
"""

from __future__ import annotations

import functools
import re

from icesql.syntax.lexer import Token, TokenKind, option_list_kind, statement_head
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
from icesql.syntax.secret_tokens import (
    LITERALS,
    StatementScan,
    dialect_word,
    is_structure,
    mentions_secret_word,
    token_mentions_secret,
)

_SECRET_MENTION = re.compile("|".join(SECRET_WORDS), re.IGNORECASE)
_MAX_DEPTH = 32  # deeper than any valid statement nests (the parser stops at 16)


def hide_all_but_keywords(stmt: StatementScan, sig: list[Token]) -> None:
    """A statement that makes no sense but mentions a secret: hide all but the keywords."""
    stmt.add_range(sig[0].start, stmt.end, keep=is_structure)
    read_as_options(stmt, sig)  # and whole option values, punctuation included


def read_option_lists(stmt: StatementScan, sig: list[Token]) -> None:
    """A statement the dialect knows: the secrets in its option lists, and in a CREATE
    CONNECTION whatever a lost bracket left outside them."""
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
            read_as_options(stmt, sig)  # options that ended up outside their brackets
        opened = next((k for k, t in enumerate(sig) if t.is_punct("(")), None)
        if opened is None:  # its '(' lost: anything but the keywords may be a value
            hide_all_but_keywords(stmt, sig)
        else:
            # `TO KAFKA BROKER 'h', SASL PASSWORD 'v' ) WITH (...)`: the list's '(' lost, a later
            # one found; between the connection's kind and that '(' only options can stand
            to = next((k for k, t in enumerate(sig[:opened]) if t.is_word("TO")), None)
            if to is not None and opened - to > 2:
                for t in sig[to + 2 : opened]:
                    if t.kind in LITERALS or t.open or (t.kind is TokenKind.WORD and not dialect_word(t)):
                        stmt.add(t)
        depth = 0
        for t in sig[opened or len(sig) :]:
            closing = t.is_punct(")")
            depth = max(0, depth + t.is_punct("(") - closing)
            if depth == 0 and not closing and not t.is_word("WITH"):
                stmt.add(t)  # after the options only WITH (...) may come: anything else may be a value
        for t in stmt.all:
            if t.kind is TokenKind.COMMENT and ("'" in t.text or '"' in t.text or token_mentions_secret(t)):
                stmt.add(t)  # a key commented out is still a key; a comment may swallow a value


def read_as_options(stmt: StatementScan, sig: list[Token]) -> None:
    """Read ``sig`` as option items whatever brackets it has or lost (when in doubt); an
    option is secret here when its name says so."""
    i = 0
    while i < len(sig):
        i = _items(stmt, sig, i, _PROSE, None, options=True)




def _items(
    stmt: StatementScan,
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
            valued = eq is not None or any(t.kind in LITERALS for t in item)
            if (
                valued
                and tok.kind is TokenKind.WORD
                and _starts_option(sig, i, kind, eq_forgotten=not _secret_value(kind, inherit, item, eq))
            ):
                break  # NAME = value NAME = value: a ',' forgotten, a new option starts
            if valued and tok.upper in ("CREATE", "ALTER") and i + 1 < n and mentions_secret_word(sig[i + 1]):
                # `... = false CREATE SECRET s AS 'v'`: a ')' and a ';' forgotten (only CREATE and
                # ALTER carry a secret's value: `= SHOW SECR` is a value, masked as one)
                if options and item:
                    _item_secrets(stmt, kind, inherit, item, eq, item_secrecy, tok.start, holes)
                stmt.read_statement(sig[i:])
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
    return any(token_mentions_secret(t) for t in sig[i:j]) and any(known_prefix(k, words) > 0 for k in lists)


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
        if tok.kind in LITERALS:
            seen_literal = True
        elif seen_literal and tok.kind is TokenKind.WORD and (tok.upper in heads or _SECRET_MENTION.search(tok.text)):
            nxt = value[i + 1] if i + 1 < len(value) else None
            if tok.is_word("SECRET") and nxt is not None and nxt.kind is TokenKind.WORD:
                continue
            return tok
    return None


def _item_secrets(
    stmt: StatementScan,
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
    if eq is None and item and item[0].kind in LITERALS and (kind is None or kind in CREDENTIAL_LISTS):
        level, start = Secrecy.VALUE, item[0].start  # a value with no name, in a list of credentials
        value = item
    elif eq is None and item and item[0].kind is TokenKind.WORD and (kind is None or kind in CREDENTIAL_LISTS):
        words = [t.upper for t in item if t.kind is TokenKind.WORD]
        if not dialect_word(item[0]) and known_prefix(kind, words) == 0:
            # a bare word that is no option's name: a value unquoted
            level, start, value = Secrecy.VALUE, item[0].start, item
    name_words = [t.upper for t in item[:value_at] if t.kind is TokenKind.WORD]
    mangled = kind != _PROSE and eq is None and not (name_words and known_prefix(kind, name_words) == len(name_words))
    if mangled and any(mentions_secret_word(t) for t in item):
        # a secret option's name mangled (SECRET SECRET ACCESS KEY v): all but the keywords
        stmt.add_range(item[0].start, stop, keep=is_structure, holes=holes)
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
