"""Sizes, durations and the Spark DDL schema parser."""

from __future__ import annotations

import pytest

from icesql.analyzer import SchemaError, parse_duration, parse_schema, parse_size
from icesql.analyzer.schema import iceberg_family
from icesql.analyzer.units import UnitError
from icesql.plan import Column


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", 1),
        ("10B", 10),
        ("1KB", 1000),
        ("1kib", 1024),
        ("1 MiB", 1024**2),
        ("64MB", 64 * 1000**2),
        ("1.5GiB", 3 * 1024**3 // 2),
        ("2GB", 2 * 1000**3),
    ],
)
def test_sizes(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "MiB", "1 XB", "-1MB", "0", "1 MiB extra"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(UnitError):
        parse_size(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10", 10.0),
        ("500ms", 0.5),
        ("10s", 10.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("5 minutes", 300.0),
        ("1 hour", 3600.0),
        ("1m30s", 90.0),
        ("1 hour 30 minutes", 5400.0),
        ("2 Seconds", 2.0),
    ],
)
def test_durations(text: str, expected: float) -> None:
    assert parse_duration(text) == pytest.approx(expected)


def test_bad_duration_points_at_unit() -> None:
    with pytest.raises(UnitError) as info:
        parse_duration("10 fortnights")
    assert (info.value.start, info.value.end) == (3, 13)


@pytest.mark.parametrize("text", ["", "soon", "0s", "1m 30"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(UnitError):
        parse_duration(text)


def test_schema_types_normalised() -> None:
    cols = parse_schema(
        "id BIGINT, ts TIMESTAMP, v STRING, s STRUCT<a: INT, b: ARRAY<STRING>>, d DECIMAL(10,2), "
        "m MAP<STRING, LONG> NOT NULL, `a b` VARCHAR(10) COMMENT 'x', n NUMERIC, t TIMESTAMP_NTZ, i INTEGER"
    )
    assert cols == (
        Column("id", "bigint"),
        Column("ts", "timestamp"),
        Column("v", "string"),
        Column("s", "struct<a:int,b:array<string>>"),
        Column("d", "decimal(10,2)"),
        Column("m", "map<string,bigint>", nullable=False),
        Column("a b", "string"),
        Column("n", "decimal(10,0)"),
        Column("t", "timestamp_ntz"),
        Column("i", "int"),
    )


def test_schema_colon_form_and_trailing_comma() -> None:
    assert parse_schema("a: int, b: string,") == (Column("a", "int"), Column("b", "string"))


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("id BIGIN", 3, 8),
        ("a int, A int", 7, 8),
        ("d decimal(40,2)", 10, 12),
        ("d decimal(4,6)", 2, 14),
        ("a int b int", 6, 7),
        ("a array<int", 11, 12),
        ("a int, #", 7, 8),
    ],
)
def test_schema_errors_locate(text: str, start: int, end: int) -> None:
    with pytest.raises(SchemaError) as info:
        parse_schema(text)
    assert (info.value.start, info.value.end) == (start, end), info.value.message


@pytest.mark.parametrize(
    ("spark", "family"),
    [
        ("int", "int"),
        ("smallint", "int"),
        ("bigint", "long"),
        ("decimal(10,2)", "decimal"),
        ("timestamp", "timestamptz"),
        ("timestamp_ntz", "timestamp"),
        ("array<int>", "array"),
        ("struct<a:int>", "struct"),
        ("map<string,int>", "map"),
    ],
)
def test_iceberg_family(spark: str, family: str) -> None:
    assert iceberg_family(spark) == family
