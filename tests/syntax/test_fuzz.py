"""No input may produce anything but a ParseError (never a Lark exception or a traceback)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icesql import ParseError
from icesql.syntax.parser import parse, split_statements
from tests.syntax.golden import all_cases

VALID = [c.sql for c in all_cases("parse") if c.sql.strip()]
PIECES = [
    "CREATE", "SINK", "SECRET", "CONNECTION", "TO", "AWS", "ICEBERG", "CATALOG", "FROM", "(", ")",
    ",", "=", ";", "'x'", '"Q"', "16", "KEY", "MODE", "UPSERT", "WITH", "PARTITION", "BY", "--",
    "/*", "*/", "'", '"', "`", "AS", "SELECT", "VIEW", ".", "|", "@", "\n", " ", "\t", "\x00", "é",
]


def _check(text: str) -> None:
    try:
        parse(text)
    except ParseError as err:
        assert err.message
        assert err.span is not None
        n_lines = max(1, text.count("\n") + 1)
        assert 1 <= err.span.line <= n_lines
        assert err.span.column >= 1
        line_text = (text.split("\n") + [""])[err.span.line - 1]
        assert err.span.column <= len(line_text) + 1
        err.render()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_random_text(text: str) -> None:
    _check(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), max_size=40).map(" ".join))
def test_random_token_soup(text: str) -> None:
    _check(text)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    sql = draw(st.sampled_from(VALID))
    tokens = sql.split(" ")
    for _ in range(draw(st.integers(1, 3))):
        if not tokens:
            break
        i = draw(st.integers(0, len(tokens) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "insert"]))
        if op == "delete":
            del tokens[i]
        elif op == "duplicate":
            tokens.insert(i, tokens[i])
        elif op == "swap":
            j = draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        else:
            junk = draw(st.text(min_size=1, max_size=3))
            pos = draw(st.integers(0, len(tokens[i])))
            tokens[i] = tokens[i][:pos] + junk + tokens[i][pos:]
    return " ".join(tokens)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_valid_statements(text: str) -> None:
    _check(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_split_statements_never_fails(text: str) -> None:
    for start, end in split_statements(text):
        assert 0 <= start < end <= len(text)


def test_deep_nesting_is_a_parse_error() -> None:
    for text in ["(" * 5000, "CREATE SINK s FROM t TO ICEBERG CATALOG c WITH (P = " + "(" * 3000 + ")" * 3000 + ")"]:
        _check(text)
