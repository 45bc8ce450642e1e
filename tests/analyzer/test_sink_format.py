"""A sink's data file format (issue 38's front end): FORMAT = 'parquet' | 'orc' | 'avro' in
WITH or as Materialize's ``FORMAT ORC`` clause, one meaning and one plan; no FORMAT plans None
(the engine writes the table's ``write.format.default``). More error renderings are golden
cases (tests/golden/analysis_errors/sinks.sql, tests/golden/syntax_errors/errors.golden)."""

from __future__ import annotations

import json

import pytest

from icesql.analyzer import MemoryCatalog, analyze
from icesql.errors import AnalysisError, ParseError
from icesql.plan import (
    DATA_FILE_FORMATS,
    AlterSinkPlan,
    CreateObjectPlan,
    SinkPlan,
    plan_from_dict,
    to_dict,
)
from icesql.syntax.parser import parse_one

PRELUDE = (
    "CREATE CONNECTION cat TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '/wh')",
    "CREATE SOURCE orders FROM FILES '/in' (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP')",
)
TARGET = "CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't')"


def catalog() -> MemoryCatalog:
    cat = MemoryCatalog()
    for sql in PRELUDE:
        cat.apply(analyze(parse_one(sql), cat).plan)
    return cat


def sink_plan(sql: str, cat: MemoryCatalog | None = None) -> SinkPlan:
    result = analyze(parse_one(sql), cat or catalog(), source=sql)
    assert isinstance(result.plan, CreateObjectPlan) and isinstance(result.plan.definition, SinkPlan)
    definition = result.plan.definition
    # what the store keeps reads back as the same plan
    assert plan_from_dict(json.loads(json.dumps(to_dict(definition)))) == definition
    return definition


def error(sql: str, cat: MemoryCatalog | None = None) -> str:
    with pytest.raises(AnalysisError) as info:
        analyze(parse_one(sql), cat or catalog(), source=sql, filename="x.sql")
    return info.value.render()


def test_no_format_plans_none_and_leaves_it_out_of_the_stored_form() -> None:
    plan = sink_plan(TARGET)
    assert plan.format is None
    assert "format" not in to_dict(plan)


@pytest.mark.parametrize(
    ("written", "planned"),
    [
        ("'parquet'", "parquet"),
        ("'orc'", "orc"),
        ("'avro'", "avro"),
        ("'ORC'", "orc"),
        ("'Avro'", "avro"),
        ("PARQUET", "parquet"),  # a bare word is a string option's value too
        ('"orc"', "orc"),
    ],
)
def test_accepted_values_are_kept_lower_case(written: str, planned: str) -> None:
    plan = sink_plan(f"{TARGET} WITH (FORMAT = {written})")
    assert plan.format == planned
    assert plan.format in DATA_FILE_FORMATS
    assert to_dict(plan)["format"] == planned


@pytest.mark.parametrize(
    ("clause", "option"),
    [
        ("FORMAT ORC", "WITH (FORMAT = 'orc')"),
        ("FORMAT 'avro'", "WITH (FORMAT = 'avro')"),
        ("FORMAT Parquet", "WITH (FORMAT = 'PARQUET')"),
        ("FORMAT ORC WITH (MAXIMUM PERIOD = '10s')", "WITH (MAXIMUM PERIOD = '10s', FORMAT = 'orc')"),
        ("WITH (MAXIMUM PERIOD = '10s') FORMAT ORC", "WITH (FORMAT = 'orc', MAXIMUM PERIOD = '10s')"),
    ],
)
def test_the_clause_means_the_with_option(clause: str, option: str) -> None:
    assert sink_plan(f"{TARGET} {clause}") == sink_plan(f"{TARGET} {option}")


def test_the_clause_in_materialize_spelling_with_every_other_clause() -> None:
    sql = (
        "CREATE SINK s FROM orders INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE = 'n', TABLE = 't') "
        "KEY (id) NOT ENFORCED MODE UPSERT PARTITION BY bucket(4, id) FORMAT AVRO WITH (COMMIT INTERVAL = '60s')"
    )
    plan = sink_plan(sql)
    assert plan.format == "avro" and plan.key == ("id",) and plan.commit.maximum_period == 60.0


@pytest.mark.parametrize(
    "sql",
    [
        f"{TARGET} FORMAT ORC WITH (FORMAT = 'orc')",
        f"{TARGET} WITH (FORMAT = 'avro') FORMAT ORC",
        f"{TARGET} FORMAT ORC FORMAT ORC",
    ],
)
def test_format_given_twice_is_an_error_with_location(sql: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_one(sql, filename="x.sql")
    err = info.value
    assert err.message.startswith("FORMAT is given twice")
    assert err.span is not None and err.hint
    # the caret is under the second FORMAT written
    assert sql[err.span.start :].upper().startswith("FORMAT")
    assert sql.upper().index("FORMAT", sql.upper().index("FORMAT") + 1) == err.span.start


def test_unknown_value_one_line_caret_on_the_value_and_did_you_mean() -> None:
    sql = f"{TARGET} WITH (FORMAT = 'arvo')"
    rendered = error(sql)
    lines = rendered.splitlines()
    assert lines[0] == "x.sql:1:96: error: unknown FORMAT 'arvo': expected 'parquet', 'orc' or 'avro'"
    assert lines[1] == "  " + sql
    assert lines[2] == " " * (2 + sql.index("'arvo'")) + "^" * len("'arvo'")
    assert lines[3] == "hint: did you mean 'avro'?"


def test_unknown_value_in_the_clause_points_at_the_word() -> None:
    sql = f"{TARGET} FORMAT ork"
    lines = error(sql).splitlines()
    assert lines[0].startswith(f"x.sql:1:{sql.index('ork') + 1}: error: unknown FORMAT 'ork'")
    assert lines[2] == " " * (2 + sql.index("ork")) + "^^^"
    assert lines[3] == "hint: did you mean 'orc'?"


def test_unknown_value_with_nothing_close_still_has_a_hint() -> None:
    lines = error(f"{TARGET} WITH (FORMAT = 'json')").splitlines()
    assert lines[0].endswith("unknown FORMAT 'json': expected 'parquet', 'orc' or 'avro'")
    assert lines[-1].startswith("hint: ")


@pytest.mark.parametrize(
    ("with_", "hint"),
    [
        ("WITH (PROPERTIES = ('write.format.default' = 'orc'))", "hint: use FORMAT = 'orc'"),
        (
            "WITH (PROPERTIES = ('write.format.default' = 'csv'))",
            "hint: use FORMAT = 'parquet', 'orc' or 'avro'",
        ),
        (
            "FORMAT AVRO WITH (PROPERTIES = ('a' = 'b', 'write.format.default' = 'avro'))",
            "hint: leave the property out: FORMAT 'avro' sets it",
        ),
    ],
)
def test_write_format_default_property_is_set_by_format(with_: str, hint: str) -> None:
    sql = f"{TARGET} {with_}"
    lines = error(sql).splitlines()
    at = sql.index("PROPERTIES")
    assert lines[0] == f"x.sql:1:{at + 1}: error: property 'write.format.default' is set by FORMAT"
    assert lines[2].startswith(" " * (2 + at) + "^")
    assert lines[3].startswith(hint)


def test_other_write_properties_pass_through() -> None:
    plan = sink_plan(f"{TARGET} FORMAT ORC WITH (PROPERTIES = ('write.orc.compression-codec' = 'zstd'))")
    assert plan.format == "orc" and plan.properties == (("write.orc.compression-codec", "zstd"),)


def test_format_is_not_changed_by_alter_sink_and_survives_it() -> None:
    cat = catalog()
    cat.apply(analyze(parse_one(f"{TARGET} FORMAT ORC"), cat).plan)
    for sql in ("ALTER SINK s SET (FORMAT = 'avro')", "ALTER SINK s RESET (FORMAT)"):
        with pytest.raises(AnalysisError, match="option FORMAT cannot be changed by ALTER SINK"):
            analyze(parse_one(sql), cat, source=sql)
    result = analyze(parse_one("ALTER SINK s SET (MAXIMUM PERIOD = '1m')"), cat)
    assert isinstance(result.plan, AlterSinkPlan) and result.plan.definition.format == "orc"


def test_a_stored_definition_that_says_parquet_still_loads() -> None:
    data = to_dict(sink_plan(TARGET))
    assert "format" not in data
    old = {**data, "format": "parquet"}  # how every sink was stored before FORMAT could be left unsaid
    loaded = plan_from_dict(json.loads(json.dumps(old)))
    assert isinstance(loaded, SinkPlan) and loaded.format == "parquet"
    assert plan_from_dict(data).format is None
