"""Issue 18, syntax side: a parse error never quotes a secret, odd characters are errors (never
crashes), and what is accepted round-trips."""

from __future__ import annotations

import pytest

from icesql import ParseError, parse
from icesql.syntax.parser import parse_range, split_statements

VALUE = "Zq7vK2mWx9Lp"  # long and random enough that any 5 characters of it mean a leak


def windows(value: str, size: int = 5) -> list[str]:
    return [value[i : i + size] for i in range(len(value) - size + 1)]


def leaks(text: str, value: str = VALUE) -> list[str]:
    return [w for w in windows(value) if w in text]


def rendered(sql: str) -> str:
    with pytest.raises(ParseError) as info:
        parse(sql, filename="f.sql")
    err = info.value
    return "\n".join([err.render(), str(err), err.message, err.hint or "", repr(err)])


@pytest.mark.parametrize(
    "sql",
    [
        # the message quoted the unexpected token
        f"CREATE SECRET pw '{VALUE}'",
        f"ALTER SECRET pw '{VALUE}'",
        f'CREATE SECRET pw AS "{VALUE}"',
        f"CREATE SECRET pw {VALUE}",
        f"CREATE SECRET pw AS {VALUE} more",
        # a forgotten '=' after a secret option (the value in the message and the line)
        f"CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', USER = 'u', PASSWORD '{VALUE}')",
        f"CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY '{VALUE}')",
        f"CREATE CONNECTION a TO AWS (SECRET ACCESS KEY {VALUE}, REGION 'x')",
        f"CREATE CONNECTION a TO AWS (SESSION TOKEN = '{VALUE}' 'again')",
        # typos and stray quotes
        f"CREATE SECERT pw AS '{VALUE}'",
        f"CREATE SECRETS pw AS '{VALUE}'",
        f"CRATE SECRET pw AS '{VALUE}'",
        f"SECRET pw AS '{VALUE}'",
        f"CREATE SECRET p'w AS '{VALUE}'",
        f"CREATE SECRET \"pw AS '{VALUE}'",
        f"CREATE' SECRET pw AS '{VALUE}'",
        f"CREATE SECRET pw AS '{VALUE[:6]}'{VALUE[6:]}'",
        f"CREATE SECRET pw AS {VALUE[:6]}--{VALUE[6:]}",
        f"EXPLAIN CREATE SECRET pw AS '{VALUE}'",
        f"CREATE '{VALUE}' pw AS SECRET",
        f"CREATE CONNECTION a TO AWSS (SECRET ACCESS KEY = '{VALUE}')",
        # a statement before the broken one holds the value
        f"CREATE SECRET pw AS '{VALUE}'\nCREATE SECRET x AS 'y'",
        f"CREATE SECRET pw AS '{VALUE}'; CREATE SINK",
    ],
)
def test_parse_errors_never_show_a_secret_value(sql: str) -> None:
    assert leaks(rendered(sql)) == []


def test_the_message_says_what_was_found_without_quoting_it() -> None:
    text = rendered(f"CREATE SECRET pw '{VALUE}'")
    assert "expected AS, found a string" in text
    text = rendered(f"CREATE CONNECTION a TO AWS (SECRET ACCESS KEY '{VALUE}')")
    assert "found a string" in text and "hint: options are written NAME = value" in text
    # a value that is not secret is still quoted: the README's example
    text = rendered("CREATE CONNECTION a TO AWS (REGION = 'x',\n  ENDPOINT 'http://127.0.0.1:8333')")
    assert "found 'http://127.0.0.1:8333'" in text and "  ENDPOINT 'http://127.0.0.1:8333'" in text


@pytest.mark.parametrize("letter", ["ſ", "ı", "İ", "\u212a", "é"])
def test_letters_that_fold_to_ascii_are_never_keywords_or_bare_names(letter: str) -> None:
    for sql in (f"{letter}how sinks", f"SHOW {letter}inks", f"DROP SINK {letter}x", f"CREATE SECRET {letter} AS 'v'"):
        with pytest.raises(ParseError) as info:
            parse(sql)
        assert "double quotes" in (info.value.hint or ""), sql
    (stmt,) = parse(f'DROP SINK "{letter}x"')
    assert parse(stmt.to_sql()) == [stmt]


def test_a_byte_order_mark_is_blank_space() -> None:
    assert parse("\ufeffSHOW SINKS;") == parse("SHOW SINKS;")
    assert split_statements("\ufeffSHOW SINKS") == [(1, 11)]


@pytest.mark.parametrize("brk", ["\r\n", "\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029", "\t"])
def test_the_caret_stays_under_the_error_whatever_the_line_breaks(brk: str) -> None:
    sql = f"SHOW SINKS;{brk}CREATE SOURCE s FROM FILES 42"
    with pytest.raises(ParseError) as info:
        parse(sql)
    _, line, caret = info.value.render().splitlines()[:3]
    assert caret.index("^") == line.index("42")
    assert caret.count("^") == 2


@pytest.mark.parametrize("text", ["SHOW SINKS; DROP SINK \udcff", "CREATE SECRET s AS '\udcff'", "\ud800"])
def test_lone_surrogates_are_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(text)
    assert "not valid Unicode" in info.value.message
    info.value.render().encode("utf-8", "backslashreplace")


def test_parse_range_locates_statements_in_the_whole_text() -> None:
    text = "SHOW SINKS;\n  -- c\n  CREATE SECRET s AS 'x''y';\nDROP SINK q;\n"
    whole = parse(text)
    pieces = []
    for start, end in split_statements(text):
        line = text.count("\n", 0, start) + 1
        line_start = text.rfind("\n", 0, start) + 1
        pieces += parse_range(text, start, end, line=line, line_start=line_start)
    assert [s.span for s in pieces] == [s.span for s in whole]
    with pytest.raises(ParseError) as info:
        parse_range(text + "DROP SINK ;", len(text), len(text) + 11, line=5, line_start=len(text))
    assert info.value.render().startswith("<input>:5:11: error:")


def test_parse_range_falls_back_to_lark_with_positions() -> None:
    text = "SHOW SINKS;\nCREATE SINK s IN CLUSTER x FROM t TO ICEBERG CATALOG c"
    start = text.index("CREATE")
    with pytest.raises(ParseError) as info:
        parse_range(text, start, len(text), line=2, line_start=start)
    assert info.value.span is not None and info.value.span.line == 2
    assert text[info.value.span.start : info.value.span.end] == "IN CLUSTER x"
