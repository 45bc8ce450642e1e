"""What can be typed at the cursor: a pure ``suggest(text_before_cursor)``, apart from the
prompt-toolkit completer that turns suggestions into completions (as pgcli does).

Keywords come from the grammar itself (``icesql.syntax.parser.expected_tokens``, the Lark
interactive parser's ``accepts()``); object names, option names and transforms come from the
clause the cursor is in, found lexically because the text is unfinished.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from icesql.repl import vocabulary as vocab
from icesql.repl.scan import Token, TokenKind, current_statement, significant, tokenize
from icesql.syntax.lexer import option_list_kind, statement_head
from icesql.syntax.options import STORAGE

ExpectedTokens = Callable[[str], "set[str]"]

_KEYWORD = re.compile(r"[A-Z][A-Z0-9_]*")


@dataclass(frozen=True)
class Suggestion:
    """One kind of thing that fits at the cursor.

    ``kind`` is ``keyword``, ``object``, ``option``, ``value``, ``transform`` or ``command``;
    ``values`` lists the candidates (for ``object``: the object kinds whose names fit).
    ``prefix`` is the text already typed that a completion replaces (it may span words, as
    in ``SECRET ACC`` for ``SECRET ACCESS KEY``).
    """

    kind: str
    values: tuple[str, ...]
    prefix: str = ""


def keyword_spellings(expected: Iterable[str]) -> list[str]:
    """The keywords among the grammar's expected tokens.

    ``expected_tokens`` names keywords in upper case (``CREATE``) and everything else in
    lower case or quoted (``identifier``, ``string``, ``'('``, ``end of input``).
    """
    return sorted(name for name in expected if _KEYWORD.fullmatch(name))


def _grammar_expected(text: str) -> set[str] | None:
    try:
        from icesql.syntax.parser import expected_tokens
    except ImportError:
        return None
    try:
        return set(expected_tokens(text))
    except Exception:  # the grammar cannot continue this text: offer nothing from it
        return set()


def _words(tokens: list[Token]) -> list[str]:
    return [t.upper for t in tokens]


@dataclass
class _Group:
    """An open parenthesis: what came before it and the tokens since."""

    before: list[Token]
    items: list[list[Token]]


def _open_groups(tokens: list[Token]) -> list[_Group]:
    stack: list[_Group] = []
    for i, t in enumerate(tokens):
        if t.kind is TokenKind.PUNCT and t.text == "(":
            stack.append(_Group(tokens[:i], [[]]))
        elif t.kind is TokenKind.PUNCT and t.text == ")":
            if stack:
                stack.pop()
        elif stack:
            if t.kind is TokenKind.PUNCT and t.text == ",":
                stack[-1].items.append([])
            else:
                stack[-1].items[-1].append(t)
    return stack


def _option_list_kind(stmt_words: list[str], before: list[Token]) -> str | None:
    """Which option list a ``(`` opens (the lexer's rule), telling a GENERATOR source's list
    from a FILES source's so that each offers only its own options."""
    kind = option_list_kind(stmt_words, before)
    if kind == "source":
        return "generator" if before and before[-1].upper == "GENERATOR" else "files"
    return kind


# Words after which an *existing* object's name is expected, per statement verb.
_KIND_WORDS = {
    "SECRET": "secret",
    "CONNECTION": "connection",
    "SOURCE": "source",
    "VIEW": "view",
    "SINK": "sink",
}


def _object_kinds_at(stmt_words: list[str], prev: list[str]) -> tuple[str, ...]:
    if not prev:
        return ()
    head = statement_head(stmt_words)
    last = prev[-1]
    verb = head[0] if head else ""
    if verb == "DESCRIBE" and len(prev) == 1:
        return ("source", "view", "sink", "connection", "secret")
    if verb in ("DROP", "ALTER", "VALIDATE", "FLUSH") or head[:2] == ("SHOW", "CREATE"):
        if last in _KIND_WORDS and len(prev) <= 3:
            return (_KIND_WORDS[last],)
        if prev[-2:] == ["IF", "EXISTS"] and len(prev) >= 3 and prev[-3] in _KIND_WORDS:
            return (_KIND_WORDS[prev[-3]],)
        return ()
    if head[:2] == ("SHOW", "SINK") and last == "STATUS":
        return ("sink",)
    if head[:2] == ("SHOW", "TABLES") and last == "IN":
        return ("connection",)
    if head[:2] == ("SHOW", "SNAPSHOTS") and last == "SINK":
        return ("sink",)
    if head == ("CREATE", "SOURCE") and (
        prev[-2:] == ["KAFKA", "CONNECTION"] or prev[-3:] == ["SCHEMA", "REGISTRY", "CONNECTION"]
    ):
        return ("connection",)  # FROM KAFKA CONNECTION k, USING CONFLUENT SCHEMA REGISTRY CONNECTION csr
    if head == ("CREATE", "SINK"):
        if last == "FROM":
            return ("source", "view")
        if prev[-2:] == ["ICEBERG", "CATALOG"] or prev[-3:] == ["ICEBERG", "CATALOG", "CONNECTION"]:
            return ("connection",)
        if len(prev) >= 3 and prev[-3] == "USING" and prev[-2] in STORAGE and prev[-1] == "CONNECTION":
            return ("connection",)  # USING AWS | GCS | AZURE CONNECTION
    return ()


def _kafka_words(stmt_words: list[str], context: list[Token]) -> tuple[str, ...]:
    """After a Kafka source's ``INCLUDE`` (or a comma in it): what it may add; after its
    ``ENVELOPE``: UPSERT or NONE (the grammar reads both as names, so it offers nothing)."""
    if statement_head(stmt_words) != ("CREATE", "SOURCE") or "KAFKA" not in stmt_words or not context:
        return ()
    last = context[-1]
    if last.kind is TokenKind.WORD and last.upper == "ENVELOPE":
        return vocab.envelopes()
    words = [t.upper for t in context if t.kind is TokenKind.WORD]
    if "INCLUDE" not in words or any(w in ("FORMAT", "ENVELOPE") for w in words[words.index("INCLUDE") :]):
        return ()
    if (last.kind is TokenKind.WORD and last.upper == "INCLUDE") or (last.kind is TokenKind.PUNCT and last.text == ","):
        return vocab.include_items()
    return ()


def _sink_words(stmt_words: list[str], context: list[Token]) -> tuple[str, ...]:
    """After a sink's ``FORMAT`` clause word (Materialize's ``FORMAT ORC``): the formats (the
    grammar reads the value as a name or a string, so it offers nothing)."""
    if statement_head(stmt_words) != ("CREATE", "SINK") or not context:
        return ()
    last = context[-1]
    before = context[-2] if len(context) > 1 else None
    if last.kind is not TokenKind.WORD or last.upper != "FORMAT":
        return ()
    if before is not None and (before.upper == "BY" or (before.kind is TokenKind.PUNCT and before.text == ",")):
        return ()  # PARTITION BY format: a column's name
    return tuple(f.upper() for f in vocab.sink_formats())


def _is_eq(t: Token) -> bool:
    return t.kind is TokenKind.PUNCT and t.text == "="


def _option_name_of(item: list[Token]) -> str:
    eq = next(i for i, t in enumerate(item) if _is_eq(t))
    return " ".join(t.upper for t in item[:eq] if t.kind is TokenKind.WORD)


def _given_options(group: _Group) -> dict[str, str]:
    """Options already written in the list: name -> value text (unquoted, lower case)."""
    given = {}
    for item in group.items[:-1]:
        if any(_is_eq(t) for t in item):
            value = item[-1].text.strip("'\"").lower() if not _is_eq(item[-1]) else ""
            given[_option_name_of(item)] = value
    return given


def _in_group(stmt_words: list[str], group: _Group, prefix_tok: Token | None) -> list[Suggestion]:
    item = group.items[-1]
    typed = item[:-1] if prefix_tok is not None and item and item[-1] is prefix_tok else item
    prefix = prefix_tok.text if prefix_tok else ""
    if _words(group.before[-2:]) == ["PARTITION", "BY"]:
        return [Suggestion("transform", vocab.transforms(), prefix)] if not typed else []
    list_kind = _option_list_kind(stmt_words, group.before)
    if list_kind is None:
        return []
    if not any(_is_eq(t) for t in typed):
        if any(t.kind is not TokenKind.WORD for t in typed):
            return []
        given = _given_options(group)
        discriminator = next(
            (given[n] for n in vocab.DISCRIMINATORS.get(list_kind, ()) if given.get(n)), None
        )
        names = tuple(n for n in vocab.option_names_for(list_kind, discriminator) if n not in given)
        words = " ".join([*(t.text for t in typed), prefix]).strip()
        return [Suggestion("option", names, words)]
    name = _option_name_of(typed)
    after_eq = typed[[i for i, t in enumerate(typed) if _is_eq(t)][0] + 1 :]
    if _words(after_eq) == ["SECRET"]:
        return [Suggestion("object", ("secret",), prefix)]
    if after_eq:
        return []
    info = vocab.option_info(list_kind, name)
    if info is None:
        return []
    out = []
    if info.object_kind:
        out.append(Suggestion("object", (info.object_kind,), prefix))
    if info.takes_secret:
        out.append(Suggestion("keyword", ("SECRET",), prefix))
    if info.values:
        out.append(Suggestion("value", info.values, prefix))
    return out


# The name being typed at the end of a query (dotted: ``lake.analytics.ev``), and the word before.
_QUERY_TAIL = re.compile(r"(?:^|(?<=[\s(,]))(?P<name>(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_]?[A-Za-z0-9_]*)$")
_LAST_WORD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s+$")


def _in_query(query: str) -> list[Suggestion]:
    """Inside a SELECT's Spark SQL: after FROM or JOIN, the relations icesql knows and the
    connections whose tables a three-part name reads; after ``connection.``, that connection's
    tables (``table`` suggestions: the completer looks them up in its cache)."""
    m = _QUERY_TAIL.search(query)
    if m is None:
        return []
    name = m.group("name")
    before = _LAST_WORD.search(query[: m.start()])
    if before is None or before.group(1).upper() not in ("FROM", "JOIN"):
        return []
    if "." in name:
        return [Suggestion("table", (name.split(".", 1)[0].lower(),), name)]
    return [Suggestion("object", ("source", "view", "connection"), name)]


def suggest(
    text_before_cursor: str,
    expected_tokens: ExpectedTokens | None = None,
    command_names: Iterable[str] = (),
) -> list[Suggestion]:
    """Everything that may be typed at the end of ``text_before_cursor``.

    ``expected_tokens`` defaults to the grammar's (``icesql.syntax.parser.expected_tokens``);
    ``command_names`` are the backslash commands offered at the start of the input.
    """
    stripped = text_before_cursor.lstrip()
    if stripped.startswith("\\"):
        parts = stripped.split()
        if len(parts) <= 1 and not stripped.endswith(" "):
            return [Suggestion("command", tuple(command_names), stripped)]
        if parts[0] == "\\d":
            prefix = "" if stripped.endswith(" ") else parts[-1]
            return [Suggestion("object", ("source", "view", "sink", "connection", "secret"), prefix)]
        return []

    stmt = current_statement(text_before_cursor)
    tokens = tokenize(stmt)
    if tokens and (tokens[-1].open or tokens[-1].kind is TokenKind.COMMENT):
        return []  # inside a string or a comment: nothing to offer
    sig = significant(tokens)
    if sig and sig[-1].kind is TokenKind.QUERY and sig[0].upper in ("SELECT", "WITH"):
        return _in_query(stmt[sig[-1].start :])
    prefix_tok = None
    if sig and sig[-1].kind is TokenKind.WORD and sig[-1].end == len(stmt):
        prefix_tok = sig[-1]
    context = sig[:-1] if prefix_tok is not None else sig
    prefix = prefix_tok.text if prefix_tok else ""
    stmt_words = _words([t for t in sig if t.kind is TokenKind.WORD])

    groups = _open_groups(sig)
    if groups:
        inner = _in_group(stmt_words, groups[-1], prefix_tok)
        if inner or _words(groups[-1].before[-2:]) == ["PARTITION", "BY"]:
            return inner

    out: list[Suggestion] = []
    prev_words: list[str] = []
    for t in reversed(context):
        if t.kind is not TokenKind.WORD:
            break
        prev_words.insert(0, t.upper)
    kinds = _object_kinds_at(stmt_words, prev_words)
    if kinds:
        out.append(Suggestion("object", kinds, prefix))
    words = _kafka_words(stmt_words, context) or _sink_words(stmt_words, context)
    if words:
        return [Suggestion("keyword", words, prefix)]

    context_text = stmt[: prefix_tok.start] if prefix_tok else stmt
    expected = (expected_tokens or _grammar_expected)(context_text)
    if expected is None:  # no grammar available: offer statement keywords at the start only
        keywords = list(vocab.STATEMENT_KEYWORDS) if not context else []
    else:
        keywords = keyword_spellings(expected)
    if keywords:
        out.append(Suggestion("keyword", tuple(keywords), prefix))
    return out
