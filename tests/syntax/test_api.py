"""Public entry points: parse_one, split_statements, is_complete, expected_tokens, spans."""

from __future__ import annotations

import pytest

import icesql
from icesql import ParseError
from icesql.syntax import ast
from icesql.syntax.parser import expected_tokens, is_complete, parse, parse_one, split_statements
from icesql.syntax.printer import to_sql


def test_parse_one() -> None:
    stmt = parse_one("SHOW SINKS;")
    assert stmt == ast.Show(ast.ObjectKind.SINK)
    with pytest.raises(ParseError, match="exactly one statement, found 2"):
        parse_one("SHOW SINKS; SHOW VIEWS")
    with pytest.raises(ParseError, match="expected a statement"):
        parse_one(" -- nothing\n")


def test_facade() -> None:
    assert icesql.parse_one("DESCRIBE x") == ast.Describe(ast.Ident("x"))
    assert icesql.ast.Describe is ast.Describe
    assert issubclass(icesql.ParseError, icesql.IcesqlError)
    with pytest.raises(AttributeError):
        icesql.no_such_thing  # noqa: B018


def test_spans_are_script_offsets() -> None:
    text = "SHOW SINKS;\n\n  CREATE SECRET s AS 'x';"
    stmt = parse(text)[1]
    assert stmt.span is not None
    assert (stmt.span.line, stmt.span.column) == (3, 3)
    assert text[stmt.span.start : stmt.span.end] == "CREATE SECRET s AS 'x'"
    assert isinstance(stmt, ast.CreateSecret)
    assert stmt.value.span is not None and text[stmt.value.span.start : stmt.value.span.end] == "'x'"


def test_view_query_span() -> None:
    text = "SHOW SINKS;\nCREATE VIEW v AS\n  SELECT 1 -- c\n;"
    view = parse(text)[1]
    assert isinstance(view, ast.CreateView)
    assert view.query == "SELECT 1"
    assert view.query_span is not None
    assert text[view.query_span.start : view.query_span.end] == "SELECT 1"
    assert (view.query_span.line, view.query_span.column) == (3, 3)


def test_error_position_in_script() -> None:
    text = "SHOW SINKS;\nSHOW VIEWS;\nCREATE SECRET s 'x';"
    with pytest.raises(ParseError) as info:
        parse(text, filename="a.sql")
    assert info.value.headline().startswith("a.sql:3:17: error: expected AS")
    assert info.value.expected == ("AS",)


def test_split_statements() -> None:
    text = "SHOW SINKS; ; -- c\nCREATE VIEW v AS SELECT 'a;b' -- x;\n;CREATE SECRET s AS 'x;y'"
    pieces = [text[a:b] for a, b in split_statements(text)]
    assert pieces == ["SHOW SINKS", "CREATE VIEW v AS SELECT 'a;b'", "CREATE SECRET s AS 'x;y'"]
    assert split_statements("") == []


def test_split_statements_spark_escapes_only_in_views() -> None:
    view = r"CREATE VIEW v AS SELECT 'it\'s; x'; SHOW SINKS"
    assert [view[a:b] for a, b in split_statements(view)] == [r"CREATE VIEW v AS SELECT 'it\'s; x'", "SHOW SINKS"]
    secret = r"CREATE SECRET s AS 'C:\'; SHOW SINKS"
    assert [secret[a:b] for a, b in split_statements(secret)] == [r"CREATE SECRET s AS 'C:\'", "SHOW SINKS"]


@pytest.mark.parametrize(
    ("text", "complete"),
    [
        ("SHOW SINKS;", True),
        ("SHOW SINKS; -- done", True),
        ("SHOW SINKS", False),
        ("CREATE SECRET s AS 'a;", False),
        ("SHOW SINKS /* ; */", False),
        ("SHOW SINKS; /* open", False),
        ("", False),
    ],
)
def test_is_complete(text: str, complete: bool) -> None:
    assert is_complete(text) is complete


def test_expected_tokens() -> None:
    assert expected_tokens("") >= {"CREATE", "DROP", "SHOW"}
    assert expected_tokens("CREATE ") == {"CONNECTION", "OR", "SECRET", "SINK", "SOURCE", "VIEW"}
    assert expected_tokens("CREATE SEC") == {"CONNECTION", "OR", "SECRET", "SINK", "SOURCE", "VIEW"}
    assert expected_tokens("CREATE SECRET ") == {"IF", "identifier"}
    assert "USING" in expected_tokens("CREATE SINK s FROM t TO ICEBERG CATALOG c ")
    assert expected_tokens("SHOW SINKS; SH") >= {"SHOW"}
    assert expected_tokens("CREATE SECRET s AS 'open") == set()


def test_printer_quotes_when_needed_and_redacts() -> None:
    assert to_sql(ast.Ident("Orders")) == '"Orders"'
    assert to_sql(ast.Ident("order id")) == '"order id"'
    assert to_sql(ast.Ident("orders")) == "orders"
    assert to_sql(ast.Ident("orders", quoted=True)) == '"orders"'
    opt = ast.Option("FLAG", ast.Ident("true"))
    assert to_sql(opt) == 'FLAG = "true"'
    secret = parse_one("CREATE SECRET s AS 'hunter2'")
    assert "hunter2" not in to_sql(secret, redact=True)
    conn = parse_one("CREATE CONNECTION a TO AWS (SECRET ACCESS KEY = 'hunter2', REGION = 'x')")
    redacted = to_sql(conn, redact=True)
    assert "hunter2" not in redacted and "'x'" in redacted


def test_never_a_lark_exception() -> None:
    for text in ["\x00", "CREATE SINK s FROM t TO ICEBERG CATALOG c WITH (" * 50, "'" * 3, '"', "/*", "é"]:
        with pytest.raises(ParseError):
            parse(text)


def test_type_error_for_non_text() -> None:
    with pytest.raises(TypeError):
        parse(b"SHOW SINKS")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        (
            "CREATE SINK s FROM t TO ICEBERG CATALOG c NAMESPACE n TABLE x FORMAT ORC",
            "CREATE SINK s FROM t TO ICEBERG CATALOG c NAMESPACE n TABLE x WITH (FORMAT = 'orc')",
        ),
        (
            "CREATE SINK s FROM t INTO ICEBERG CATALOG CONNECTION c (NAMESPACE = 'n', TABLE = 't') "
            "KEY (id) MODE UPSERT FORMAT 'avro' WITH (COMMIT INTERVAL = '60s')",
            "CREATE SINK s FROM t TO ICEBERG CATALOG c (NAMESPACE = 'n', TABLE = 't') KEY (id) MODE UPSERT "
            "WITH (COMMIT INTERVAL = '60s', FORMAT = 'avro')",
        ),
        (
            "EXPLAIN CREATE SINK s FROM t TO ICEBERG CATALOG c FORMAT Parquet",
            "EXPLAIN CREATE SINK s FROM t TO ICEBERG CATALOG c WITH (FORMAT = 'parquet')",
        ),
    ],
)
def test_sink_format_clause_is_the_with_option_and_round_trips(text: str, canonical: str) -> None:
    """Materialize's ``FORMAT ORC`` after the target is the WITH option FORMAT: one tree, printed
    in the WITH spelling, which parses back to the same tree."""
    stmt = parse_one(text)
    assert to_sql(stmt) == canonical
    assert parse_one(canonical) == stmt
    assert parse_one(to_sql(stmt)) == stmt
    sink = stmt.statement if isinstance(stmt, ast.Explain) else stmt
    assert isinstance(sink, ast.CreateSink)
    (option,) = [o for o in sink.with_options if o.name == "FORMAT"]
    assert option.value is not None and option.value.span is not None
    word = text[option.value.span.start : option.value.span.end]
    assert word.strip("'").lower() == to_sql(option.value).strip("'")  # errors point at the word written


def test_sink_format_clause_given_twice() -> None:
    text = "CREATE SINK s FROM t TO ICEBERG CATALOG c WITH (FORMAT = 'orc') FORMAT ORC"
    with pytest.raises(ParseError, match=r"FORMAT is given twice: as a FORMAT clause and in WITH") as info:
        parse(text, filename="a.sql")
    assert info.value.headline().startswith(f"a.sql:1:{text.index('FORMAT ORC') + 1}: error:")
    assert info.value.hint
    with pytest.raises(ParseError) as again:
        parse("CREATE SINK s FROM t TO ICEBERG CATALOG c FORMAT ORC FORMAT ORC")
    assert again.value.message == "FORMAT is given twice" and again.value.hint
