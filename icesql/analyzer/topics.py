"""What a Kafka source reads: one ``TOPIC``, or many topics - ``TOPICS = ('a', 'b')`` or ``TOPIC
PATTERN = 'regex'`` (exactly one of the three) - and how often a source of many topics lists them
again (``TOPIC METADATA REFRESH INTERVAL``, Materialize's name; ``TOPIC REFRESH`` for short).

``TOPIC PATTERN`` is a regular expression matched against the *whole* topic name: Python's
``re.fullmatch``, as Kafka's Java consumer matches a ``subscribePattern`` (``matcher().matches()``).
icesql runs Python's ``re`` on either executor (its Kafka source is its own, on Spark too), while
such patterns are usually written for Java (Spark, Kafka Connect's ``topics.regex``, Debezium), so
a pattern is refused where the two dialects part:

* Java syntax Python does not read (``\\Q...\\E``, ``\\p{Alpha}``, ``(?<name>...)``, ``\\z``,
  possessive quantifiers before Python 3.11, inline flags after the start) fails to compile: the
  error points at it and the hint says what to write instead;
* syntax both read but differently - Java's class intersection ``[a-z&&[^x]]`` and nested classes
  ``[[a-z]]`` are literal characters to Python, which warns about them (``FutureWarning``) - is
  refused the same way, rather than matching other topics than the pattern's author meant.

Where they agree on a topic name the difference does not show: names hold only ``a-z A-Z 0-9 .
_ -`` (so Python's Unicode ``\\w``, ``\\d`` and case folding match what Java's ASCII ones do), and
``$`` / ``\\Z`` can only mean the end of a name that has no line break.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

from icesql.analyzer.diagnostics import Context
from icesql.analyzer.options import Collected
from icesql.errors import Span
from icesql.syntax.ast import CreateSource, Node, OptionList, StringList

_KINDS = ("TOPIC", "TOPICS", "TOPIC PATTERN")
REFRESH = "TOPIC METADATA REFRESH INTERVAL"
_KEEP_ONE = (
    "keep one: TOPIC = 'orders' reads one topic, TOPICS = ('orders', 'returns') a list, "
    r"TOPIC PATTERN = 'orders\..*' every topic whose whole name matches"
)
_PATTERN_HINT = (
    "TOPIC PATTERN is a regular expression matched against the whole topic name (Python's re): "
    r"'orders\..*' matches orders.eu and orders.us"
)
# Java constructs Python's re does not read, and what to write instead
_JAVA_ONLY = (
    (re.compile(r"\\[QE]"), r"Java's \Q...\E quoting is not read: escape each special character ('orders\.eu')"),
    (re.compile(r"\\[pP]\{"), r"Java's \p{...} classes are not read: a topic name holds only a-z A-Z 0-9 . _ -, so write [a-z0-9]"),
    (re.compile(r"\(\?<[A-Za-z]"), "write a named group as (?P<name>...), or leave the name out"),
    (re.compile(r"\\z"), r"leave \z out: the pattern always matches the whole name"),
    (re.compile(r"[*+?}]\+"), "a possessive quantifier (*+, ++, ?+) needs Python 3.11: write * + ? instead"),
    (re.compile(r".\(\?[a-zA-Z]+\)"), "put inline flags at the start: (?i)orders\\..*"),
)
_VALID_NAME = "a Kafka topic name is 1 to 249 characters without blanks"


@dataclass(frozen=True)
class Topics:
    """A Kafka source's topics: ``topic`` (one), or ``topics`` / ``pattern`` (many, ``topic`` '')."""

    topic: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    refresh: float | None = None  # seconds; None: the engine's default
    at: Node | None = None  # the option that names them (where messages about them point)

    @property
    def many(self) -> bool:
        return bool(self.topics) or self.pattern is not None


def check_empty_topics(ctx: Context, stmt: CreateSource) -> None:
    """``TOPICS = ()`` (before the options are collected, whose message would be about lists in
    general)."""
    for opt in stmt.options:
        if opt.name == "TOPICS" and isinstance(opt.value, OptionList) and not opt.value.options:
            raise ctx.error(
                "TOPICS needs at least one topic",
                opt.value,
                "write TOPICS = ('orders', 'returns'), or TOPIC = 'orders' for one",
            )


def analyze_topics(ctx: Context, stmt: CreateSource, opts: Collected) -> Topics:
    given = sorted((k for k in _KINDS if k in opts), key=lambda k: _start(opts.node(k)))
    if not given:
        assert stmt.connection is not None
        raise ctx.error(
            "KAFKA source needs TOPIC",
            stmt.connection,
            r"add TOPIC = 'orders' (or TOPICS = ('orders', 'returns'), or TOPIC PATTERN = 'orders\..*')",
        )
    if len(given) > 1:
        raise ctx.error(f"{given[0]} and {given[1]} cannot both be set", opts.node(given[1]), _KEEP_ONE)
    kind = given[0]
    at = opts.node(kind)
    refresh = opts.get_float(REFRESH)
    if kind == "TOPIC":
        topic = opts.get_str("TOPIC")
        assert topic is not None
        _check_name(ctx, topic, at.value, "TOPIC", "write TOPIC = 'orders'")
        if refresh is not None:
            raise ctx.error(
                f"{REFRESH} applies with TOPICS or TOPIC PATTERN",
                opts.node(REFRESH),
                "a TOPIC source looks up its partitions at every trigger: leave it out",
            )
        return Topics(topic, at=at)
    if kind == "TOPICS":
        names: tuple[str, ...] = opts.get("TOPICS")
        items = at.value.items if isinstance(at.value, StringList) else (at.value,)
        seen: set[str] = set()
        for name, item in zip(names, items, strict=True):
            _check_name(ctx, name, item, "TOPICS", "write TOPICS = ('orders', 'returns')")
            if name in seen:
                raise ctx.error(f"topic '{name}' is named twice in TOPICS", item, "name each topic once")
            seen.add(name)
        return Topics("", topics=names, refresh=refresh, at=at)
    pattern = opts.get_str("TOPIC PATTERN")
    assert pattern is not None
    check_pattern(ctx, pattern, at.value)
    return Topics("", pattern=pattern, refresh=refresh, at=at)


def check_pattern(ctx: Context, pattern: str, at: Node | None) -> None:
    """A pattern Python's ``re`` compiles, and reads as Java would (the module's docstring)."""
    if not pattern:
        raise ctx.error("TOPIC PATTERN must not be empty", at, _PATTERN_HINT)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            re.compile(pattern)
        except re.error as e:
            pos = e.pos if e.pos is not None else 0
            raise ctx.error(
                f"invalid TOPIC PATTERN: {e.msg}", _span(ctx, at, pattern, pos), _java_hint(pattern, pos)
            ) from None
    for w in caught:
        if issubclass(w.category, FutureWarning):  # Java's [a&&b], [[a]]: literal characters to Python
            found = re.search(r"at position (\d+)", str(w.message))
            pos = int(found.group(1)) if found else 0
            what = str(w.message).split(" at position")[0].lower()
            raise ctx.error(
                f"invalid TOPIC PATTERN: Java and Python read it differently ({what})",
                _span(ctx, at, pattern, pos),
                "Java's class operations ([a-z&&[^x]]) and nested classes ([[a-z]]) are plain characters "
                "to Python's re: write one class, such as [a-wyz]",
            )


def _java_hint(pattern: str, pos: int) -> str:
    for construct, hint in _JAVA_ONLY:
        for m in construct.finditer(pattern):
            if m.start() <= pos <= m.end() + 1:
                return hint
    return _PATTERN_HINT


def _span(ctx: Context, at: Node | None, text: str, pos: int) -> Span | None:
    if at is None:
        return None
    return ctx.sub_span(at, pos, min(len(text), pos + 1))


def _check_name(ctx: Context, name: str, at: Node | None, option: str, hint: str) -> None:
    if not name.strip() or len(name) > 249 or any(c.isspace() for c in name):
        what = "TOPIC" if option == "TOPIC" else f"topic in {option}"
        raise ctx.error(f"invalid {what} '{name}': {_VALID_NAME}", at, hint)


def _start(node: Node) -> int:
    return node.span.start if node.span is not None else 0


__all__ = ["REFRESH", "Topics", "analyze_topics", "check_empty_topics", "check_pattern"]
