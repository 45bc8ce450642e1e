"""Parquet FILES sources whose column is of Arrow type ``null`` in some files: what pandas and
pyarrow write for a column that is None in every row (issue 36).

Such a column carries no type: it takes the type the other files give it (the null-typed file's
rows read as nulls, on the Arrow path and on Spark's), and while no file types it, it is left out
(said once in the log) until a file that types it brings it in by schema evolution. A column that
two files really type differently stops the sink with the file, the column and Spark's own
message, never py4j's "An error occurred while calling oNN.parquet".
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import icesql
from icesql.errors import ExecutionError
from tests.engine.test_schema_evolution import fields, rows, setup
from tests.support.require import require_module

pytestmark = pytest.mark.spark


def write(data: Path, name: str, order: int, **columns: Any) -> None:
    """A Parquet file written by pyarrow; ``order`` sets its mtime (the order the source reads)."""
    data.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), data / name)
    os.utime(data / name, (1_700_000_000 + order, 1_700_000_000 + order))


def nulls(n: int) -> pa.Array:
    return pa.nulls(n)  # type null: pandas' all-None column as pyarrow writes it


def run_once(home: Path, spark: Any, data: Path, wh: Path, *, first: bool) -> None:
    with icesql.Session(home=home, spark=spark) as s:
        if first:
            setup(s, data, wh)
        s.run(once=True)


def test_pandas_writes_an_all_none_column_as_type_null(tmp_path: Path) -> None:
    """The premise: what a user's pandas frame with an all-None column becomes."""
    require_module("pandas", "pandas is not installed (pip install 'icesql[engine]')")
    import pandas as pd

    pd.DataFrame({"id": [1, 2], "x": [None, None]}).to_parquet(tmp_path / "f.parquet")
    assert pa.types.is_null(pq.read_schema(tmp_path / "f.parquet").field("x").type)


@pytest.mark.parametrize("arrow", ["1", "0"], ids=["arrow-path", "spark-path"])
def test_a_null_typed_file_then_a_typed_one(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arrow: str
) -> None:
    monkeypatch.setenv("ICESQL_ARROW_PATH", arrow)
    home, data, wh = tmp_path / "home", tmp_path / "in", tmp_path / "wh"
    write(data, "a.parquet", 1, id=pa.array([1, 2], pa.int64()), x=nulls(2))
    write(data, "b.parquet", 2, id=pa.array([3, 4], pa.int64()), x=pa.array([1.5, None]))
    run_once(home, spark, data, wh, first=True)
    assert rows(home, wh) == [(1, None), (2, None), (3, 1.5), (4, None)]
    assert [(n, t) for _, n, t, _ in fields(home, wh)] == [("id", "long"), ("x", "double")]


def test_a_typed_file_then_a_null_typed_one(spark: Any, tmp_path: Path) -> None:
    home, data, wh = tmp_path / "home", tmp_path / "in", tmp_path / "wh"
    write(data, "a.parquet", 1, id=pa.array([1], pa.int64()), x=pa.array([2.5]), s=["p"])
    write(data, "b.parquet", 2, id=pa.array([2, 3], pa.int64()), x=nulls(2), s=["q", "r"])
    run_once(home, spark, data, wh, first=True)
    names = [n for _, n, _, _ in fields(home, wh)]  # in the order the files were listed in
    assert [dict(zip(names, r, strict=True)) for r in rows(home, wh)] == [
        {"id": 1, "x": 2.5, "s": "p"},
        {"id": 2, "x": None, "s": "q"},
        {"id": 3, "x": None, "s": "r"},
    ]
    assert {n: t for _, n, t, _ in fields(home, wh)} == {"id": "long", "x": "double", "s": "string"}


def test_a_file_falling_back_to_sparks_reader_reads_its_null_column_as_nulls(
    spark: Any, tmp_path: Path
) -> None:
    """A file the Arrow path leaves to Spark's reader (its decimal is narrower than the unified
    one) has the null-typed column too: Spark's reader gives its rows nulls as well."""
    home, data, wh = tmp_path / "home", tmp_path / "in", tmp_path / "wh"
    write(data, "a.parquet", 1, id=pa.array([1], pa.int64()), x=nulls(1), d=pa.array([1], pa.decimal128(10, 2)))
    write(data, "b.parquet", 2, id=pa.array([2], pa.int64()), x=pa.array([0.5]), d=pa.array([2], pa.decimal128(12, 2)))
    with icesql.Session(home=home, spark=spark) as s:
        setup(s, data, wh)
        s.run(once=True)
        fallback_files = s.engine.runner("k").status_row()["fallback_files"]
    names = [n for _, n, _, _ in fields(home, wh)]
    got = [dict(zip(names, r, strict=True)) for r in rows(home, wh)]
    assert [(r["id"], r["x"], float(r["d"])) for r in got] == [(1, None, 1.0), (2, 0.5, 2.0)]
    assert {n: t for _, n, t, _ in fields(home, wh)} == {"id": "long", "x": "double", "d": "decimal(12, 2)"}
    assert fallback_files == 1  # a.parquet, read by Spark


def test_a_column_null_in_every_file_is_left_out_until_a_file_types_it(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home, data, wh = tmp_path / "home", tmp_path / "in", tmp_path / "wh"
    caplog.set_level(logging.INFO, logger="icesql")
    write(data, "a.parquet", 1, id=pa.array([1, 2], pa.int64()), x=nulls(2))
    write(data, "b.parquet", 2, id=pa.array([3], pa.int64()), x=nulls(1))
    run_once(home, spark, data, wh, first=True)
    assert rows(home, wh) == [(1,), (2,), (3,)]
    assert [n for _, n, _, _ in fields(home, wh)] == ["id"]  # not Spark's guess (int)
    said = [r.getMessage() for r in caplog.records if "hold only nulls" in r.getMessage()]
    assert len(said) == 1 and "column(s) x " in said[0] and "left out until a file gives them a type" in said[0]

    # a file that types it: the table gains the column (SCHEMA EVOLUTION = 'auto', the default)
    write(data, "c.parquet", 3, id=pa.array([4], pa.int64()), x=pa.array([7.25]))
    write(data, "d.parquet", 4, id=pa.array([5], pa.int64()), x=nulls(1))
    run_once(home, spark, data, wh, first=False)
    assert rows(home, wh) == [(1, None), (2, None), (3, None), (4, 7.25), (5, None)]
    assert [(n, t, required) for _, n, t, required in fields(home, wh)] == [
        ("id", "long", False),
        ("x", "double", False),
    ]

    # the typed file gone, only null-typed ones left: the table's column stays, its rows null
    (data / "c.parquet").unlink()
    write(data, "e.parquet", 5, id=pa.array([6], pa.int64()), x=nulls(1))
    run_once(home, spark, data, wh, first=False)
    assert rows(home, wh)[-1] == (6, None)
    assert [n for _, n, _, _ in fields(home, wh)] == ["id", "x"]


def test_a_column_two_files_type_differently_names_the_file_the_column_and_sparks_message(
    spark: Any, tmp_path: Path
) -> None:
    home, data, wh = tmp_path / "home", tmp_path / "in", tmp_path / "wh"
    write(data, "a.parquet", 1, id=pa.array([1], pa.int64()), x=nulls(1))
    write(data, "b.parquet", 2, id=pa.array([2], pa.int64()), x=["text"])
    write(data, "c.parquet", 3, id=pa.array([3], pa.int64()), x=pa.array([1.5]))
    with icesql.Session(home=home, spark=spark) as s, pytest.raises(ExecutionError) as info:
        setup(s, data, wh)
        s.run(once=True)
    message = info.value.message
    assert "c.parquet' has column 'x' as double, where '" in message and "b.parquet' has it as string" in message
    assert "[CANNOT_MERGE_SCHEMAS]" in message  # Spark's own words
    assert "An error occurred while calling" not in message and "\n" not in message
    assert "source 'src'" in message


def test_sparks_message_is_taken_from_py4js_error() -> None:
    from icesql.engine.sources.files.relation import spark_message

    class Py4JJavaError(Exception):
        pass

    text = (
        "An error occurred while calling o53.parquet.\n"
        ": org.apache.spark.SparkException: [CANNOT_MERGE_SCHEMAS] Failed merging schemas:\n"
        'Initial schema:\n"STRUCT<x: INT>"\nSchema that cannot be merged with the initial schema:\n'
        '"STRUCT<x: DOUBLE>". SQLSTATE: 42KD9\n'
        "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.failedMergingSchemaError(QueryExecutionErrors.scala:2)\n"
    )
    assert spark_message(Py4JJavaError(text)) == (
        '[CANNOT_MERGE_SCHEMAS] Failed merging schemas: Initial schema: "STRUCT<x: INT>" Schema that '
        'cannot be merged with the initial schema: "STRUCT<x: DOUBLE>". SQLSTATE: 42KD9'
    )
    assert spark_message(ValueError("plain")) == "plain"
