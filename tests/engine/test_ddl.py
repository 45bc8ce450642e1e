"""A source's SCHEMA built in Python (``engine.ddl``) is exactly what Spark's parser makes of it.

Every DDL string of the corpus goes through both: Spark's ``_parse_datatype_string`` (the JVM) and
``struct_from_ddl``. Where the Python side builds a schema it must equal Spark's - names, types,
nullability and metadata (``StructType`` equality compares them all); where it is not sure it
returns None and the engine asks Spark. A real local Spark, no stand-in.
"""

from __future__ import annotations

from typing import Any

import pytest

from icesql.engine.sources.ddl import struct_from_ddl

pytestmark = pytest.mark.spark

# what the Python side builds
BUILT = [
    "id BIGINT, ts TIMESTAMP, category STRING, payload STRING, amount DOUBLE, qty INT, event_date DATE, "
    "active BOOLEAN, price DECIMAL(12,2), user_id BIGINT",
    "a TINYINT, b BYTE, c SMALLINT, d SHORT, e INTEGER, f LONG, g FLOAT, h REAL, i BINARY",
    "a timestamp_ntz, b TIMESTAMP_LTZ, c Timestamp",
    "a DECIMAL, b DEC(5), c NUMERIC(38, 38), d decimal( 16 , 8 )",
    "a: int, b: array< short>",
    "m MAP<STRING, ARRAY<STRUCT<x: INT, y STRING>>>, s STRUCT<inner: STRUCT<deep: MAP<INT, DOUBLE>>>",
    "s STRUCT<>",
    "CamelCase INT, _under STRING, x1 BIGINT",
    "date DATE, timestamp TIMESTAMP, string STRING, map INT",
]

# what it leaves to Spark (Spark's answer, or Spark's error, stands)
LEFT_TO_SPARK = [
    "a INT NOT NULL, b STRING",
    "a INT COMMENT 'the key'",
    "s STRUCT<x: INT NOT NULL>",
    "a CHAR(5), b VARCHAR(10)",
    "`quoted name` INT",
    "a INTERVAL DAY",
    "a TEXT",
    "a INT,",
    "a INT b STRING",
    "a DECIMAL(39, 0)",
    "a DECIMAL(5, 6)",
    "a INT, A STRING",
    "a ARRAY<INT",
    "",
    "a VARIANT",
]


@pytest.mark.parametrize("ddl", BUILT)
@pytest.mark.parametrize("timestamp_type", ["TIMESTAMP_LTZ", "TIMESTAMP_NTZ"])
def test_the_schema_built_in_python_is_sparks(spark: Any, ddl: str, timestamp_type: str) -> None:
    from pyspark.sql.types import _parse_datatype_string

    old = spark.conf.get("spark.sql.timestampType", "TIMESTAMP_LTZ")
    spark.conf.set("spark.sql.timestampType", timestamp_type)
    try:
        expected = _parse_datatype_string(ddl)
    finally:
        spark.conf.set("spark.sql.timestampType", old)
    built = struct_from_ddl(ddl, timestamp_type)
    assert built is not None, ddl
    assert built == expected
    assert built.json() == expected.json()


@pytest.mark.parametrize("ddl", LEFT_TO_SPARK)
def test_a_schema_outside_the_subset_is_left_to_spark(ddl: str) -> None:
    assert struct_from_ddl(ddl) is None


def test_a_source_schema_reaches_the_relation_unchanged(spark: Any, tmp_path: Any) -> None:
    """The engine's row schema of a FILES source: the same StructType whichever way it was built
    (a CHAR column sends it to Spark's parser, which keeps CharType)."""
    from pyspark.sql.types import _parse_datatype_string

    from icesql.engine.sources.relation import declared_row_schema
    from icesql.plan import SourceFormat, SourceKind, SourcePlan

    for ddl in (BUILT[0], "a CHAR(5), b INT"):
        plan = SourcePlan("s", SourceKind.FILES, path=str(tmp_path), format=SourceFormat.JSON, schema=ddl)
        assert declared_row_schema(spark, plan) == _parse_datatype_string(ddl)
