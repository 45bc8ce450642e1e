"""The pure lexical helpers: when Enter submits, statement splitting, DROP detection."""

from __future__ import annotations

import pytest

from icesql.repl.scan import TokenKind, current_statement, destructive_statements, is_complete, tokenize


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "SHOW SINKS;",
        "SHOW SINKS;  ",
        "SHOW SINKS; -- trailing comment",
        "SHOW SINKS; /* block */",
        "CREATE SECRET s AS 'a;b';",
        "CREATE SECRET s AS 'it''s';",
        "SHOW\nSINKS\n;",
        "\\d",
        "\\i file.sql",
        "  \\q",
        "quit",
        "exit;",
    ],
)
def test_complete(text: str) -> None:
    assert is_complete(text)


@pytest.mark.parametrize(
    "text",
    [
        "SHOW SINKS",
        "CREATE SECRET s AS 'a;",
        "CREATE SECRET s AS 'a;'' ;",
        "SHOW SINKS -- ;",
        "SHOW SINKS /* ; */",
        "SHOW SINKS; /* open",
        "SHOW SINKS; SHOW",
        'CREATE SINK "a;b',
        "-- only a comment",
    ],
)
def test_incomplete(text: str) -> None:
    assert not is_complete(text)


def test_tokenize_never_fails_and_marks_open_tokens() -> None:
    toks = tokenize("SELECT 'abc")
    assert toks[-1].kind is TokenKind.STRING and toks[-1].open
    toks = tokenize("x /* never closed")
    assert toks[-1].kind is TokenKind.COMMENT and toks[-1].open
    toks = tokenize('"quoted ""ident"""')
    assert [t.kind for t in toks] == [TokenKind.QUOTED] and not toks[0].open
    assert "".join(t.text for t in tokenize("a,b = 'c' -- d\n1.5")) == "a,b = 'c' -- d\n1.5"


def test_current_statement() -> None:
    assert current_statement("SHOW SINKS; DROP SI") == "DROP SI"
    assert current_statement("SHOW SINKS; ").strip() == ""
    assert current_statement("CREATE SECRET s AS ';'; SHOW ") == "SHOW "
    assert current_statement("") == ""


def test_destructive_statements() -> None:
    assert destructive_statements("SHOW SINKS; drop sink  orders;\nDROP SECRET IF EXISTS pw") == [
        "drop sink orders",
        "DROP SECRET IF EXISTS pw",
    ]
    assert destructive_statements("CREATE SECRET drop AS 'DROP SINK x;'") == []
    assert destructive_statements("-- DROP SINK x\nSHOW SINKS;") == []
