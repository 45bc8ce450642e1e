"""Words are lexed whole: a keyword is never matched as the prefix of a longer word.

Lark's contextual lexer tries IDENT in every state (see ``_WholeWords`` in the parser), so
``SINKK`` is one word everywhere; the fast path reads whole words too, and both must agree.
"""

from __future__ import annotations

import re

import pytest

from icesql import ParseError
from icesql.syntax.parser import _fast_parse, _NotFast, expected_tokens, get_parser, parse
from tests.syntax.golden import all_cases

KEYWORDS = sorted(
    {
        str(t.pattern.value).upper()
        for t in get_parser(with_transformer=False).terminals
        if t.pattern.type == "str" and str(t.pattern.value).isalpha()
    }
)
VALID = [c.sql for c in all_cases("parse") if c.sql.strip()]
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse(text)
    return info.value


def _lark(text: str) -> list[object] | ParseError:
    """The Lark path alone (no fast path)."""
    try:
        return list(get_parser().parse(text))
    except Exception:
        return _error(text)


def test_keywords_are_still_string_terminals() -> None:
    # The REPL colours keywords found this way; the fix must not turn them into regexes.
    assert {"CREATE", "SINK", "SINKS", "SECRET", "SECRETS", "CONNECTION"} <= set(KEYWORDS)
    assert len(KEYWORDS) >= 49


@pytest.mark.parametrize(
    ("text", "found", "hint"),
    [
        ("CREATE SINKK x FROM o TO ICEBERG CATALOG c", "SINKK", "did you mean SINK?"),
        ("SHOW SINKZ", "SINKZ", "did you mean SINKS?"),
        ("DROP SOURCEX a", "SOURCEX", "did you mean SOURCE?"),
        ("CREATE SECRETS a AS 'x'", "SECRETS", "did you mean SECRET?"),
        ("CREATE SINK s FROM o INTOO ICEBERG CATALOG c", "INTOO", "did you mean INTO?"),
        ("DROP SINKorders", "SINKorders", "did you mean SINK orders?"),
        ("FLUSH SINKx", "SINKx", "did you mean SINKS?"),
        ("show sinks_all", "sinks_all", "did you mean SINKS?"),
        ("CREATE SINK 1sink FROM o TO ICEBERG CATALOG c", "1sink", 'a name cannot start with a digit; quote it: "1sink"'),
    ],
)
def test_glued_word_is_one_token(text: str, found: str, hint: str) -> None:
    err = _error(text)
    assert err.span is not None
    assert text[err.span.start : err.span.end] == found
    assert f"found '{found}'" in err.message
    assert err.hint == hint


def test_keyword_prefixed_names_parse_on_both_paths() -> None:
    text = (
        "CREATE SINK sink_orders FROM sources_v INTO ICEBERG CATALOG catalog_x (NAMESPACE = 'a', TABLE = 'tablex');"
        "SHOW CREATE SINK sinks2; FLUSH SINK sinks; DROP SINK IF EXISTS ifx RESTRICT; DESCRIBE describe"
    )
    fast = _fast_parse(text)
    assert fast == get_parser().parse(text) == parse(text)
    assert [s.to_sql() for s in fast][1:] == [
        "SHOW CREATE SINK sinks2",
        "FLUSH SINK sinks",
        "DROP SINK IF EXISTS ifx RESTRICT",
        "DESCRIBE describe",
    ]


def test_view_query_starting_with_a_word_is_still_one_query() -> None:
    (stmt,) = parse("CREATE VIEW v AS SELECT sinkk FROM t WHERE x = 'a;b'")
    assert stmt.to_sql() == "CREATE VIEW v AS SELECT sinkk FROM t WHERE x = 'a;b'"
    assert get_parser().parse("CREATE VIEW v AS sinkk") == parse("CREATE VIEW v AS sinkk")


@pytest.mark.parametrize("keyword", KEYWORDS)
def test_every_keyword_glued_to_a_letter_is_one_word(keyword: str) -> None:
    # Wherever the keyword is valid in the golden corpus, the glued word is read whole: it
    # either parses as a name (both paths agree) or fails with the caret on the whole word.
    checked = 0
    for sql in VALID:
        for m in _WORD.finditer(sql):
            if m.group().upper() != keyword or checked >= 6:
                continue
            text = sql[: m.end()] + "q" + sql[m.end() :]
            try:
                fast: list[object] | None = list(_fast_parse(text))
            except _NotFast:
                fast = None
            slow = _lark(text)
            if isinstance(slow, ParseError):
                assert fast is None, text
                assert slow.span is not None
                # never an error inside the word (that would mean it was split)
                assert not (m.start() < slow.span.start <= m.end()), (text, slow.render())
            else:
                assert fast is None or fast == slow, text
            checked += 1


def test_expected_tokens_still_offer_keywords() -> None:
    assert {"SINK", "SINKS", "STATUS"} & expected_tokens("SHOW ") == {"SINK", "SINKS"}
    assert expected_tokens("SHOW SINK ") >= {"STATUS"}
    assert expected_tokens("CREATE SINKK ") == set()


def test_numbers_glued_to_words() -> None:
    err = _error("CREATE SOURCE g FROM GENERATOR (ROWS = 16abc)")
    assert err.hint == "quote sizes and durations: '16abc'"
    err = _error("CREATE SINK s IN CLUSTER 3x FROM o TO ICEBERG CATALOG c")
    assert err.span is not None and (err.span.column, err.span.end - err.span.start) == (26, 2)
    err = _error("SHOW 1e5x")
    assert "found '1e5x'" in err.message
    # a name may end in digits, and a keyword glued to digits is a name
    assert parse("DROP SINK sink2")[0].to_sql() == "DROP SINK sink2"
    assert "found 'SINKS2'" in _error("SHOW SINKS2").message
