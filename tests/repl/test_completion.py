"""``suggest(text_before_cursor)``: what the shell offers at the cursor (pure, no terminal)."""

from __future__ import annotations

import pytest

from icesql.repl.completion import Suggestion, keyword_spellings, suggest


def no_grammar(text: str) -> set[str]:
    return set()


def kinds(text: str, **kw: object) -> dict[str, Suggestion]:
    kw.setdefault("expected_tokens", no_grammar)
    return {s.kind: s for s in suggest(text, **kw)}  # type: ignore[arg-type]


def objects(text: str) -> tuple[str, ...]:
    s = kinds(text).get("object")
    return s.values if s else ()


def test_keywords_come_from_the_grammar() -> None:
    seen: list[str] = []

    def expected(text: str) -> set[str]:
        seen.append(text)
        return {"SINK", "SECRET", "identifier", "'('", "end of input", "IF"}

    s = kinds("CREATE SI", expected_tokens=expected)["keyword"]
    assert s.values == ("IF", "SECRET", "SINK")
    assert s.prefix == "SI"
    assert seen == ["CREATE "]  # the word being typed is not part of the context


def test_keyword_spellings_keep_only_keywords() -> None:
    assert keyword_spellings(
        {"CREATE", "identifier", "string", "';'", "end of input", "NAMESPACE", "INTO"}
    ) == [
        "CREATE",
        "INTO",
        "NAMESPACE",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CREATE SINK s FROM ", ("source", "view")),
        ("CREATE SINK s FROM ord", ("source", "view")),
        ("CREATE SINK s FROM r TO ICEBERG CATALOG ", ("connection",)),
        ("CREATE SINK s FROM r INTO ICEBERG CATALOG CONNECTION ", ("connection",)),
        ("CREATE SINK s FROM r TO ICEBERG CATALOG c USING AWS CONNECTION ", ("connection",)),
        ("EXPLAIN CREATE SINK s FROM ", ("source", "view")),
        ("DROP SINK ", ("sink",)),
        ("DROP SINK IF EXISTS ", ("sink",)),
        ("drop secret ", ("secret",)),
        ("ALTER SECRET ", ("secret",)),
        ("ALTER SINK ", ("sink",)),
        ("ALTER SOURCE ", ("source",)),
        ("DROP CONNECTION ", ("connection",)),
        ("DROP SOURCE ", ("source",)),
        ("DROP VIEW ", ("view",)),
        ("VALIDATE CONNECTION ", ("connection",)),
        ("SHOW CREATE SINK ", ("sink",)),
        ("SHOW SINK STATUS ", ("sink",)),
        ("FLUSH SINK ", ("sink",)),
        ("DESCRIBE ", ("source", "view", "sink", "connection", "secret")),
        ("CREATE CONNECTION c TO AWS (SECRET ACCESS KEY = SECRET ", ("secret",)),
        ("CREATE CONNECTION c TO ICEBERG CATALOG (PASSWORD SECRET = ", ("secret",)),
        ("CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 's3tables', AWS CONNECTION = ", ("connection",)),
        ("SHOW SINKS; DROP SINK ", ("sink",)),
    ],
)
def test_object_names_where_an_existing_object_is_named(text: str, expected: tuple[str, ...]) -> None:
    assert objects(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "CREATE SINK ",  # a new name
        "CREATE SECRET ",
        "CREATE CONNECTION c TO ICEBERG CATALOG ",  # '(' comes next, not a name
        "CREATE SOURCE s FROM ",  # FILES / GENERATOR
        "CREATE SINK s FROM r TO ICEBERG CATALOG c ",
        "CREATE SECRET s AS 'DROP SINK ",  # inside a string
        "SHOW SINKS -- DROP SINK ",  # inside a comment
    ],
)
def test_no_object_names_for_new_names_strings_and_comments(text: str) -> None:
    assert objects(text) == ()


def test_option_names_for_the_statement_at_hand() -> None:
    aws = kinds("CREATE CONNECTION c TO AWS (")["option"]
    assert "SECRET ACCESS KEY" in aws.values and "URI" not in aws.values
    cat = kinds("CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', ")["option"]
    assert "URI" in cat.values and "WAREHOUSE" in cat.values and "REGION" not in cat.values
    assert "VALIDATE" in kinds("CREATE CONNECTION c TO AWS (REGION = 'x') WITH (")["option"].values
    sink = kinds("CREATE SINK s FROM r TO ICEBERG CATALOG c WITH (FORMAT = 'parquet', MAX")["option"]
    assert "MAXIMUM PERIOD" in sink.values and sink.prefix == "MAX"
    target = kinds("CREATE SINK s FROM r INTO ICEBERG CATALOG CONNECTION c (")["option"]
    assert set(target.values) == {"NAMESPACE", "TABLE"}
    files = kinds("CREATE SOURCE e FROM FILES 'data/' (")["option"]
    assert "FORMAT" in files.values and "ROWS PER SECOND" not in files.values
    gen = kinds("CREATE SOURCE g FROM GENERATOR (")["option"]
    assert "ROWS PER SECOND" in gen.values
    assert "MINIMUM SIZE" in kinds("ALTER SINK s SET (")["option"].values
    assert kinds("ALTER SOURCE e SET (")["option"].values == ("SCHEMA",)
    assert "'dead-letter'" in kinds("CREATE SINK s FROM r TO ICEBERG CATALOG c WITH (ON ERROR = ")["value"].values
    assert "DEAD LETTER TABLE" in kinds("CREATE SINK s FROM r TO ICEBERG CATALOG c WITH (DEAD")["option"].values


def test_multi_word_option_prefix() -> None:
    s = kinds("CREATE CONNECTION c TO AWS (SECRET ACC")["option"]
    assert s.prefix == "SECRET ACC"


def test_option_values() -> None:
    assert "'rest'" in kinds("CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = ")["value"].values
    assert kinds("CREATE CONNECTION c TO AWS (SECRET ACCESS KEY = ")["keyword"].values == ("SECRET",)
    assert kinds("CREATE CONNECTION c TO AWS (REGION = 'x' ") == {}


def test_transforms_inside_partition_by() -> None:
    base = "CREATE SINK s FROM r TO ICEBERG CATALOG c PARTITION BY ("
    s = kinds(base)["transform"]
    assert {"bucket", "truncate", "day", "hour", "identity", "void"} <= set(s.values)
    assert kinds(base + "day(ts), bu")["transform"].prefix == "bu"
    assert "transform" not in kinds(base + "bucket(")
    assert "transform" not in kinds(base + "day(ts)) ")


def test_backslash_commands() -> None:
    s = kinds("\\t", command_names=["\\?", "\\timing"])["command"]
    assert s.prefix == "\\t" and "\\timing" in s.values
    assert kinds("\\d ord")["object"].prefix == "ord"
    assert kinds("\\i some/") == {}


def test_statement_keywords_without_a_grammar() -> None:
    s = {x.kind: x for x in suggest("", expected_tokens=lambda t: None)}  # type: ignore[arg-type,return-value]
    assert "CREATE" in s["keyword"].values


def test_options_narrow_to_the_catalog_type_and_skip_those_given() -> None:
    rest = kinds("CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', ")["option"].values
    assert "USER" in rest and "CREDENTIAL" in rest and "TYPE" not in rest
    local = kinds("CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'local', ")["option"].values
    assert "WAREHOUSE" in local and "USER" not in local and "URI" not in local
    csv = kinds("CREATE SOURCE e FROM FILES 'd/' (FORMAT = 'csv', ")["option"].values
    assert "HEADER" in csv and "DELIMITER" in csv
    assert "HEADER" not in kinds("CREATE SOURCE e FROM FILES 'd/' (FORMAT = 'json', ")["option"].values
    alter = kinds("ALTER SINK s SET (")["option"].values
    assert "MAXIMUM PERIOD" in alter and "FORMAT" not in alter


def test_with_the_real_grammar() -> None:
    def keywords(text: str) -> set[str]:
        return {v for s in suggest(text) if s.kind == "keyword" for v in s.values}

    assert {"CONNECTION", "SECRET", "SINK", "SOURCE", "VIEW"} <= keywords("CREATE ")
    assert {"CREATE", "DROP", "SHOW"} <= keywords("")
    assert {"FILES", "GENERATOR"} <= keywords("CREATE SOURCE s FROM ")
    assert "SINKS" in keywords("SHOW SINKS; SHOW ")
    assert keywords("CREATE SECRET s AS ") == set()  # a string comes next


def test_inside_a_select_relations_then_tables_of_a_connection() -> None:
    assert objects("SELECT * FROM ev") == ("source", "view", "connection")
    assert kinds("select a.id from events a JOIN ").get("object") is not None
    assert kinds("SELECT * FROM events WHERE i") == {}
    table = kinds("SELECT * FROM lake.analytics.ev")["table"]
    assert table.values == ("lake",) and table.prefix == "lake.analytics.ev"
    assert objects("SHOW TABLES IN ") == ("connection",)
    assert objects("SHOW SNAPSHOTS OF SINK ") == ("sink",)


def test_table_names_come_from_a_cache_refreshed_in_the_background() -> None:
    import threading

    from icesql.repl.shell import TableNames

    release = threading.Event()
    calls: list[str] = []

    def fetch(connection: str) -> list[tuple[str, ...]]:
        calls.append(connection)
        release.wait(10)
        return [("analytics", "events")]

    names = TableNames(fetch, ttl=60)
    assert names("lake") == []  # the first call never waits on the catalog
    release.set()
    names.wait()
    assert names("lake") == ["lake.analytics.events"]
    assert calls == ["lake"]  # fresh for ttl seconds: no second fetch


def test_completer_offers_cached_table_names() -> None:
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from icesql.repl.widgets import IcesqlCompleter

    completer = IcesqlCompleter(
        lambda kind: ["lake"] if kind == "connection" else ["events"],
        lambda: [],
        lambda connection: [f"{connection}.analytics.events", f"{connection}.analytics.orders"],
    )
    text = "SELECT * FROM lake.analytics.o"
    got = [c.text for c in completer.get_completions(Document(text), CompleteEvent())]
    assert got == ["lake.analytics.orders"]
    got = [c.text for c in completer.get_completions(Document("SELECT * FROM e"), CompleteEvent())]
    assert got == ["events"]


def test_sink_formats_in_both_spellings() -> None:
    base = "CREATE SINK s FROM r TO ICEBERG CATALOG c "
    assert set(kinds(base + "WITH (FORMAT = ")["value"].values) == {"'parquet'", "'orc'", "'avro'"}
    clause = kinds(base + "FORMAT ")["keyword"]
    assert set(clause.values) == {"PARQUET", "ORC", "AVRO"} and clause.prefix == ""
    assert kinds(base + "FORMAT o")["keyword"].prefix == "o"
    assert "keyword" not in kinds(base + "PARTITION BY format ")  # a column named format
    assert "FORMAT" in kinds(base + "FO", expected_tokens=None)["keyword"].values  # the grammar's clause
