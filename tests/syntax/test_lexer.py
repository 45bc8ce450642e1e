"""The one lexer: it agrees with the grammar, never fails, and reads words as ASCII only."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icesql.syntax import lexer
from icesql.syntax.lexer import TokenKind, is_complete, split_statements, tokenize, tokens
from icesql.syntax.parser import get_parser


def _grammar_pattern(name: str) -> str:
    terminal = next(t for t in get_parser(with_transformer=False).terminals if t.name == name)
    return str(terminal.pattern.value)


@pytest.mark.parametrize(
    ("terminal", "pattern"),
    [
        ("STRING", lexer.STRING),
        ("QIDENT", lexer.QIDENT),
        ("NUMBER", lexer.NUMBER),
        ("QUERY", lexer.QUERY),
        ("WS", lexer.BLANK),
        ("LINE_COMMENT", lexer.LINE_COMMENT),
        ("BLOCK_COMMENT", lexer.BLOCK_COMMENT),
    ],
)
def test_the_lexer_spells_the_grammars_patterns(terminal: str, pattern: str) -> None:
    from lark.load_grammar import eval_escaping

    # The grammar escapes '/' (its regex delimiter); Lark evaluates \n, \uXXXX, ... itself.
    assert _grammar_pattern(terminal).replace("\\/", "/") == eval_escaping(pattern)


def test_identifiers_are_ascii_in_both() -> None:
    assert _grammar_pattern("IDENT") == "(?a:[a-z_][a-z0-9_]*)"
    assert lexer.IDENT == "[A-Za-z_][A-Za-z0-9_]*"
    for word in ("ſhow", "\u212aey", "ıf", "İf", "café"):
        assert not re.fullmatch(f"(?i:{_grammar_pattern('IDENT')})", word)
        assert not re.fullmatch(lexer.IDENT, word)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_tokens_cover_any_text_exactly(text: str) -> None:
    toks = list(tokens(text))
    assert "".join(t.text for t in toks) == text
    pos = 0
    for t in toks:
        assert t.start == pos and t.end == pos + len(t.text)
        pos = t.end


def test_open_tokens_and_kinds() -> None:
    toks = tokenize("SELECT 'abc")
    assert toks[-1].kind is TokenKind.STRING and toks[-1].open
    toks = tokenize("x /* never closed")
    assert toks[-1].kind is TokenKind.COMMENT and toks[-1].open
    toks = tokenize('"quoted ""ident"""')
    assert [t.kind for t in toks] == [TokenKind.QUOTED] and not toks[0].open
    assert [t.kind for t in tokenize("\ufeffSHOW")] == [TokenKind.SPACE, TokenKind.WORD]


def test_a_views_query_is_one_token_up_to_its_semicolon() -> None:
    text = "CREATE VIEW v AS SELECT 'a;b', \"c;\" FROM t -- x;\n; SHOW SINKS"
    kinds = [(t.kind, t.text) for t in tokens(text) if t.significant]
    assert (TokenKind.QUERY, "SELECT 'a;b', \"c;\" FROM t") in kinds
    assert [text[a:b] for a, b in split_statements(text)] == [text[:text.index(" --")], "SHOW SINKS"]
    # a Spark string takes backslash escapes inside a view only
    assert split_statements(r"CREATE VIEW v AS SELECT 'a\';b'; SHOW SINKS")[1:] == [(33, 43)]
    assert len(split_statements(r"CREATE SECRET s AS 'a\';b'")) == 2


def test_is_complete() -> None:
    assert is_complete("SHOW SINKS; -- done")
    assert not is_complete("SHOW SINKS; /* open")
    assert not is_complete("CREATE SECRET s AS 'a;")


def test_a_fifty_megabyte_literal_is_one_token() -> None:
    text = "CREATE SECRET s AS '" + "x" * 5_000_000 + "'"
    kinds = [t.kind for t in tokens(text) if t.significant]
    assert kinds[-1] is TokenKind.STRING and len(kinds) == 5
