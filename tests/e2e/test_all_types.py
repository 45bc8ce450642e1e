"""Every Spark type through the public path: a Spark temporary view registered by the program
→ ``CREATE SINK ... FROM <view>`` in an ``icesql.Session`` → a local Iceberg catalog → read back
by DuckDB, DataFusion (and, with ``-m java``, the Iceberg Java library).

One run of two sinks over the same view: one with ``KEY`` on the bigint column (an upsert:
identifier fields, equality deletes), one with identity, bucket, truncate and day transforms
(in MODE UPSERT every partition column must be part of KEY, so they cannot share a sink). The
tables' metadata is checked with pyiceberg: schema types, partition spec (transforms, source
ids, names) and identifier fields.

Reader limitations found here (every column is still compared with at least two readers):
none at the time of writing — DuckDB and DataFusion both read every column, maps and
``timestamp_ntz`` included. Values are normalised by ``tests.support.readers.norm``:
timestamps as naive UTC, maps as sorted item tuples, structs and lists as tuples.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

import icesql
from tests.support.pipeline_helpers import icesql_summaries, load_table
from tests.support.readers import (
    canonical_digest,
    read_datafusion,
    read_duckdb,
    read_java,
)

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc

SPARK_SCHEMA = """
    c_bigint BIGINT NOT NULL, c_int INT, c_smallint SMALLINT, c_tinyint TINYINT,
    c_bool BOOLEAN, c_float FLOAT, c_double DOUBLE,
    c_dec DECIMAL(10,2), c_dec38 DECIMAL(38,9),
    c_string STRING, c_binary BINARY, c_date DATE,
    c_ts TIMESTAMP, c_ts_ntz TIMESTAMP_NTZ,
    c_arr ARRAY<INT>, c_arr_struct ARRAY<STRUCT<a: INT, b: STRING>>,
    c_map MAP<STRING, INT>,
    c_struct STRUCT<x: INT, y: STRUCT<z: STRING>>
"""
COLUMNS = [
    "c_bigint",
    "c_int",
    "c_smallint",
    "c_tinyint",
    "c_bool",
    "c_float",
    "c_double",
    "c_dec",
    "c_dec38",
    "c_string",
    "c_binary",
    "c_date",
    "c_ts",
    "c_ts_ntz",
    "c_arr",
    "c_arr_struct",
    "c_map",
    "c_struct",
]
# Iceberg types the table gets (tinyint and smallint widen to int; Spark TIMESTAMP is
# timestamptz, TIMESTAMP_NTZ is timestamp).
ICEBERG_TYPES = {
    "c_bigint": "long",
    "c_int": "int",
    "c_smallint": "int",
    "c_tinyint": "int",
    "c_bool": "boolean",
    "c_float": "float",
    "c_double": "double",
    "c_dec": "decimal(10, 2)",
    "c_dec38": "decimal(38, 9)",
    "c_string": "string",
    "c_binary": "binary",
    "c_date": "date",
    "c_ts": "timestamptz",
    "c_ts_ntz": "timestamp",
}


def python_rows() -> list[tuple[Any, ...]]:
    """Six rows: edge values (extremes, unicode, empty collections, nested nulls) and one row
    whose every nullable column is null."""
    rows = []
    for i in range(5):
        rows.append(
            (
                10**12 + i if i != 4 else -(2**63),  # c_bigint (the KEY)
                [0, 1, -(2**31), 2**31 - 1, 42][i],
                [0, 1, -(2**15), 2**15 - 1, 7][i],
                [0, 1, -128, 127, 3][i],
                i % 2 == 0,
                [0.0, 1.5, -2.25, 2.0**34, 0.125][i],  # exact in float32
                [0.0, 1.0 / 3, -1e300, 2.5e-300, 12345.678][i],
                [
                    Decimal("0.00"),
                    Decimal("12345678.90"),
                    Decimal("-0.01"),
                    Decimal("99999999.99"),
                    Decimal("1.50"),
                ][i],
                [
                    Decimal("0E-9"),
                    Decimal("12345678901234567890123456789.123456789"),
                    Decimal("-0.000000001"),
                    Decimal("99999999999999999999999999999.999999999"),
                    Decimal("3.141592653"),
                ][i],
                ["", "abcdefgh", "ünïcødé ✓ 日本", "x" * 300, "tab\tnew\nline"][i],
                [b"", b"\x00\x01\xff", bytes(range(256)), b"bin", b"\xde\xad\xbe\xef"][i],
                dt.date(2024, 2, 28) + dt.timedelta(days=i) if i != 3 else dt.date(1969, 12, 31),
                dt.datetime(2024, 2, 28, 23, 59, 59, 999999, tzinfo=UTC) + dt.timedelta(hours=7 * i),
                dt.datetime(2024, 3, 1, 0, 0, 0, 1) + dt.timedelta(minutes=13 * i),
                [[], [1], [1, None, 3], [2**31 - 1, -(2**31)], None][i] if i != 4 else [5, 5],
                [[], [(1, "a")], [(2, None), None, (None, "c")], [(4, "d"), (5, "e")], [(6, "f")]][i],
                [{}, {"a": 1}, {"k": None, "j": 2}, {"z": 26, "y": 25, "x": 24}, {"ü": -1}][i],
                [(0, (None,)), (1, ("one",)), (None, None), (3, ("three",)), (4, ("",))][i],
            )
        )
    rows.append((7,) + (None,) * (len(COLUMNS) - 1))
    return rows


def expected_rows() -> list[tuple[Any, ...]]:
    """The rows as the readers return them after ``norm``: aware timestamps as naive UTC,
    maps as sorted (key, value) tuples, structs and lists as tuples."""
    from tests.support.readers import norm

    out = []
    for r in python_rows():
        row = list(r)
        row[12] = row[12].astimezone(UTC).replace(tzinfo=None) if row[12] is not None else None
        row[16] = tuple(sorted(row[16].items())) if row[16] is not None else None
        out.append(tuple(norm(v) for v in row))
    return sorted(out, key=repr)


def expected_dicts() -> list[dict[str, Any]]:
    """The rows as the Java reader (through read_iceberg.py) prints them."""

    out = []
    for r in python_rows():
        d = dict(zip(COLUMNS, r, strict=True))
        if d["c_arr_struct"] is not None:
            d["c_arr_struct"] = [None if e is None else {"a": e[0], "b": e[1]} for e in d["c_arr_struct"]]
        if d["c_struct"] is not None:
            x, y = d["c_struct"]
            d["c_struct"] = {"x": x, "y": None if y is None else {"z": y[0]}}
        out.append(d)
    return out


@pytest.fixture(scope="module")
def tables(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Sink the view once for the module, into two tables, in one run:

    * ``keyed``: ``KEY (c_bigint)`` (so MODE UPSERT: data + equality-delete files),
      ``PARTITION BY (bucket(4, c_bigint))`` — in MODE UPSERT every partition column must be
      part of KEY, so the other transforms go to the second sink;
    * ``parted``: append, ``PARTITION BY (c_bool, bucket(8, c_int), truncate(4, c_string), day(c_ts))``.
    """
    tmp = tmp_path_factory.mktemp("all-types")
    home = tmp / "home"
    warehouse = tmp / "warehouse"
    spark.createDataFrame(python_rows(), SPARK_SCHEMA).createOrReplaceTempView("all_types_view")
    with icesql.Session(home=home, spark=spark) as s:
        s.execute(
            f"""
            CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{warehouse}');
            CREATE SINK keyed FROM all_types_view
            INTO ICEBERG CATALOG lake (NAMESPACE = 'e2e', TABLE = 'keyed')
            KEY (c_bigint)
            PARTITION BY (bucket(4, c_bigint));
            CREATE SINK parted FROM all_types_view
            INTO ICEBERG CATALOG lake (NAMESPACE = 'e2e', TABLE = 'parted')
            PARTITION BY (c_bool, bucket(8, c_int), truncate(4, c_string), day(c_ts));
            """
        )
        s.run(once=True)
        assert {(st.name, st.state, st.rows_committed, st.last_error) for st in s.status()} == {
            ("keyed", "stopped", len(python_rows()), None),
            ("parted", "stopped", len(python_rows()), None),
        }
    return {
        name: load_table(home, f"e2e.{name}", warehouse=warehouse, catalog_name="lake")
        for name in ("keyed", "parted")
    }


@pytest.mark.parametrize("name", ["keyed", "parted"])
def test_every_spark_type_reads_back_exactly(tables: dict[str, Any], name: str) -> None:
    loc = tables[name].metadata_location
    want = expected_rows()
    fusion = read_datafusion(loc, ", ".join(COLUMNS))
    duck = read_duckdb(loc, ", ".join(COLUMNS))
    assert column_diffs(fusion, want) == []
    assert column_diffs(duck, want) == []
    assert fusion == want and duck == want
    summ = icesql_summaries(tables[name])
    assert len(summ) == 1 and summ[0]["icesql.commit-reason"] == "batch"


def column_diffs(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> list[tuple[str, Any, Any]]:
    """(column, got, want) for every differing cell of rows matched by key (readable failures)."""
    if len(got) != len(want):
        return [("<rows>", len(got), len(want))]
    by_key = {r[0]: r for r in got}
    return [
        (col, by_key.get(w[0], (None,) * len(w))[i], w[i])
        for w in want
        for i, col in enumerate(COLUMNS)
        if by_key.get(w[0], (None,) * len(w))[i] != w[i]
    ]


def check_schema(schema: Any) -> None:
    assert [f.name for f in schema.fields] == COLUMNS
    for name, type_str in ICEBERG_TYPES.items():
        assert str(schema.find_field(name).field_type) == type_str, name
    assert str(schema.find_field("c_arr").field_type) == "list<int>"
    assert str(schema.find_field("c_map").field_type) == "map<string, int>"
    arr_struct = schema.find_field("c_arr_struct").field_type
    assert [(f.name, str(f.field_type)) for f in arr_struct.element_type.fields] == [
        ("a", "int"),
        ("b", "string"),
    ]
    nested = schema.find_field("c_struct").field_type
    assert [f.name for f in nested.fields] == ["x", "y"]
    assert [(f.name, str(f.field_type)) for f in nested.fields[1].field_type.fields] == [("z", "string")]


def test_keyed_table_metadata(tables: dict[str, Any]) -> None:
    table = tables["keyed"]
    schema = table.schema()
    check_schema(schema)
    # KEY (c_bigint) → identifier fields, required
    assert [schema.find_column_name(i) for i in schema.identifier_field_ids] == ["c_bigint"]
    assert schema.find_field("c_bigint").required
    assert [(str(f.transform), f.source_id, f.name) for f in table.spec().fields] == [
        ("bucket[4]", schema.find_field("c_bigint").field_id, "c_bigint_bucket"),
    ]
    contents = {f["content"] for f in table.inspect.files().to_pylist()}
    assert 0 in contents and contents <= {0, 2}


def test_partitioned_table_metadata(tables: dict[str, Any]) -> None:
    table = tables["parted"]
    schema = table.schema()
    check_schema(schema)
    assert schema.identifier_field_ids == []
    got = [(str(f.transform), f.source_id, f.name) for f in table.spec().fields]
    assert got == [
        ("identity", schema.find_field("c_bool").field_id, "c_bool"),
        ("bucket[8]", schema.find_field("c_int").field_id, "c_int_bucket"),
        ("truncate[4]", schema.find_field("c_string").field_id, "c_string_trunc"),
        ("day", schema.find_field("c_ts").field_id, "c_ts_day"),
    ]
    # every data file carries a partition tuple of the spec, the all-null row's included
    files = table.inspect.files().to_pylist()
    assert sum(f["record_count"] for f in files) == len(python_rows())
    parts = [f["partition"] for f in files]
    assert all(set(p) == {"c_bool", "c_int_bucket", "c_string_trunc", "c_ts_day"} for p in parts)
    assert {"c_bool": None, "c_int_bucket": None, "c_string_trunc": None, "c_ts_day": None} in parts
    assert {p["c_string_trunc"] for p in parts} == {None, "", "abcd", "ünïc", "xxxx", "tab\t"}
    assert {(p["c_bool"], p["c_int_bucket"]) for p in parts if p["c_bool"] is not None} == {
        (i % 2 == 0, _bucket(8, v)) for i, v in enumerate([0, 1, -(2**31), 2**31 - 1, 42])
    }


def _bucket(n: int, value: int) -> int:
    from pyiceberg.transforms import BucketTransform
    from pyiceberg.types import IntegerType

    return int(BucketTransform(n).transform(IntegerType())(value))


@pytest.mark.java
@pytest.mark.parametrize("name", ["keyed", "parted"])
def test_every_spark_type_java_reader(tables: dict[str, Any], name: str) -> None:
    got = read_java(tables[name].metadata_location)
    want = canonical_digest(expected_dicts())
    assert got["rows"] == want["rows"]
    assert got["all"] == want["all"]
