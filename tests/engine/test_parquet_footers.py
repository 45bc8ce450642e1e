"""The schema of a Parquet source without a SCHEMA, worked out from the files' footers
(``files.footers``), against the schema Spark infers for the same directory
(``spark.read.option('mergeSchema', 'true').parquet(dir).schema``): equal over a corpus of files
written by pyarrow, DuckDB and Spark, or refused by both (the same error class) - issue 54.
"""

from __future__ import annotations

import decimal
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icesql.engine.sources.files.footers import MergeError, parquet_directory_schema
from icesql.engine.sources.files.relation import spark_message

pytestmark = pytest.mark.spark

T = pa.table

# one column ``c`` of each type, as pyarrow writes it
PYARROW_COLUMNS: dict[str, pa.Array] = {
    "int8": pa.array([1, None], pa.int8()),
    "int16": pa.array([1], pa.int16()),
    "int32": pa.array([1], pa.int32()),
    "int64": pa.array([1], pa.int64()),
    "uint8": pa.array([1], pa.uint8()),
    "uint16": pa.array([1], pa.uint16()),
    "uint32": pa.array([1], pa.uint32()),
    "uint64": pa.array([1], pa.uint64()),
    "float16": pa.array([1], pa.float16()),
    "float32": pa.array([1], pa.float32()),
    "float64": pa.array([1], pa.float64()),
    "bool": pa.array([True]),
    "string": pa.array(["a"]),
    "large_string": pa.array(["a"], pa.large_string()),
    "string_view": pa.array(["a"], pa.string_view()),
    "binary": pa.array([b"a"]),
    "large_binary": pa.array([b"a"], pa.large_binary()),
    "fixed_binary": pa.array([b"ab"], pa.binary(2)),
    "dictionary": pa.array(["a", "b", "a"]).dictionary_encode(),
    "dictionary_int": pa.array([1, 2, 1], pa.int16()).dictionary_encode(),
    "date32": pa.array([1], pa.date32()),
    "date64": pa.array([86_400_000], pa.date64()),
    "ts_s_utc": pa.array([1], pa.timestamp("s", "UTC")),
    "ts_ms_utc": pa.array([1], pa.timestamp("ms", "UTC")),
    "ts_us_paris": pa.array([1], pa.timestamp("us", "Europe/Paris")),
    "ts_ns_utc": pa.array([1], pa.timestamp("ns", "UTC")),
    "ts_s": pa.array([1], pa.timestamp("s")),
    "ts_ms": pa.array([1], pa.timestamp("ms")),
    "ts_us": pa.array([1], pa.timestamp("us")),
    "ts_ns": pa.array([1], pa.timestamp("ns")),
    "time32": pa.array([1], pa.time32("ms")),
    "time64": pa.array([1], pa.time64("us")),
    "time64_ns": pa.array([1], pa.time64("ns")),
    "duration": pa.array([1], pa.duration("us")),
    "decimal_4_1": pa.array([decimal.Decimal("1.5")], pa.decimal128(4, 1)),
    "decimal_9_2": pa.array([decimal.Decimal("1.25")], pa.decimal128(9, 2)),
    "decimal_10_2": pa.array([decimal.Decimal("1.25")], pa.decimal128(10, 2)),
    "decimal_18_3": pa.array([decimal.Decimal("1.125")], pa.decimal128(18, 3)),
    "decimal_19_0": pa.array([decimal.Decimal("1")], pa.decimal128(19, 0)),
    "decimal_38_10": pa.array([decimal.Decimal("1.5")], pa.decimal128(38, 10)),
    "decimal_40_0": pa.array([decimal.Decimal("1")], pa.decimal256(40, 0)),
    "null": pa.nulls(2),
    "list": pa.array([[1, None], None], pa.list_(pa.int64())),
    "large_list": pa.array([[1]], pa.large_list(pa.int64())),
    "fixed_list": pa.array([[1, 2]], pa.list_(pa.int64(), 2)),
    "list_of_uint8": pa.array([[1]], pa.list_(pa.uint8())),
    "map": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64())),
    "map_of_struct": pa.array([[(1, {"x": "s"})]], pa.map_(pa.int32(), pa.struct([("x", pa.string())]))),
    "struct": pa.array(
        [{"x": 1, "y": "s"}],
        pa.struct([pa.field("x", pa.int64(), nullable=False), pa.field("y", pa.string())]),
    ),
    "nested": pa.array(
        [[{"x": [{"k": 1, "t": 5}]}]],
        pa.list_(pa.struct([("x", pa.list_(pa.struct([("k", pa.uint16()), ("t", pa.timestamp("ms"))])))])),
    ),
}


def _write(directory: Path, *tables: pa.Table, **options: Any) -> None:
    directory.mkdir(parents=True)
    for i, table in enumerate(tables):
        pq.write_table(table, directory / f"part-{i}.parquet", **options)


def _pyarrow_corpus(root: Path) -> None:
    for name, array in PYARROW_COLUMNS.items():
        try:
            _write(root / f"pyarrow_{name}", T({"c": array}))
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):  # pragma: no cover - pyarrow cannot write it
            pass
    every = {k: v for k, v in PYARROW_COLUMNS.items() if k not in _REFUSED and len(v) == 1}
    _write(root / "pyarrow_every_type", T(every))
    ts = pa.array([1_000], pa.timestamp("us"))
    _write(root / "pyarrow_int96", T({"c": ts}), use_deprecated_int96_timestamps=True)
    _write(
        root / "pyarrow_int96_utc",
        T({"c": ts.cast(pa.timestamp("us", "UTC"))}),
        use_deprecated_int96_timestamps=True,
    )
    _write(
        root / "pyarrow_int96_nested",
        T({"c": pa.array([[1]], pa.list_(pa.timestamp("ms")))}),
        use_deprecated_int96_timestamps=True,
    )
    _write(root / "pyarrow_format_1_0", T(every), version="1.0")
    _write(root / "pyarrow_format_2_4", T(every), version="2.4")
    _write(
        root / "pyarrow_converted_timestamps",
        T({"c": pa.array([1_000], pa.timestamp("us", "UTC")), "d": pa.array([1], pa.timestamp("ms"))}),
        coerce_timestamps="ms",
    )
    _write(root / "pyarrow_no_dictionary", T({"c": PYARROW_COLUMNS["dictionary"]}), use_dictionary=False)
    _write(root / "pyarrow_without_arrow_schema", T(every), store_schema=False)
    required = pa.schema(
        [
            pa.field("r", pa.int64(), nullable=False),
            pa.field("s", pa.struct([pa.field("x", pa.int32(), nullable=False)]), nullable=False),
            pa.field("l", pa.list_(pa.field("e", pa.string(), nullable=False)), nullable=False),
        ]
    )
    _write(root / "pyarrow_required", pa.table({"r": [1], "s": [{"x": 1}], "l": [["a"]]}, schema=required))
    with_ids = pa.schema(
        [
            pa.field("a", pa.int64(), metadata={b"PARQUET:field_id": b"7"}),
            pa.field(
                "s",
                pa.struct([pa.field("x", pa.string(), metadata={b"PARQUET:field_id": b"9"})]),
                metadata={b"PARQUET:field_id": b"8"},
            ),
        ]
    )
    _write(root / "pyarrow_field_ids", pa.table({"a": [1], "s": [{"x": "v"}]}, schema=with_ids))
    _write(root / "pyarrow_odd_names", T({"a b": [1], "ünï": ["x"], "x.y": [1.5], "`q`": [True]}))


# the types Spark refuses (a file of one of them is its own case; it is kept out of the others)
_REFUSED = {"float16", "ts_ns_utc", "ts_ns", "time32", "time64", "time64_ns", "decimal_40_0"}


def _merge_corpus(root: Path) -> None:
    """Directories whose files disagree: Spark merges some and refuses the others."""

    def files(name: str, *tables: pa.Table) -> None:
        _write(root / f"merge_{name}", *tables)

    files("int_then_long", T({"x": pa.array([1], pa.int32())}), T({"x": pa.array([1], pa.int64())}))
    files("long_then_int", T({"x": pa.array([1], pa.int64())}), T({"x": pa.array([1], pa.int32())}))
    files("byte_then_int", T({"x": pa.array([1], pa.int8())}), T({"x": pa.array([1], pa.int32())}))
    files("uint8_then_int16", T({"x": pa.array([1], pa.uint8())}), T({"x": pa.array([1], pa.int16())}))
    files("float_then_double", T({"x": pa.array([1], pa.float32())}), T({"x": pa.array([1], pa.float64())}))
    files(
        "decimal_precision",
        T({"x": pa.array([1], pa.decimal128(10, 2))}),
        T({"x": pa.array([1], pa.decimal128(12, 2))}),
    )
    files(
        "decimal_precision_down",
        T({"x": pa.array([1], pa.decimal128(12, 2))}),
        T({"x": pa.array([1], pa.decimal128(4, 2))}),
    )
    files(
        "decimal_scale",
        T({"x": pa.array([1], pa.decimal128(10, 2))}),
        T({"x": pa.array([1], pa.decimal128(12, 4))}),
    )
    files(
        "tz_then_ntz",
        T({"x": pa.array([1], pa.timestamp("us", "UTC"))}),
        T({"x": pa.array([1], pa.timestamp("us"))}),
    )
    files(
        "ntz_then_ntz_millis",
        T({"x": pa.array([1], pa.timestamp("us"))}),
        T({"x": pa.array([1], pa.timestamp("ms"))}),
    )
    int96 = root / "merge_int96_then_tz"
    int96.mkdir()
    utc = T({"x": pa.array([1_000], pa.timestamp("us", "UTC"))})
    pq.write_table(utc, int96 / "a.parquet", use_deprecated_int96_timestamps=True)
    pq.write_table(utc, int96 / "b.parquet")
    files("null_then_double", T({"x": pa.nulls(1)}), T({"x": pa.array([1.5])}))
    files("null_then_int", T({"x": pa.nulls(1)}), T({"x": pa.array([1], pa.int32())}))
    files("double_then_null", T({"x": pa.array([1.5])}), T({"x": pa.nulls(1)}))
    files("new_columns", T({"b": [1], "a": [1]}), T({"c": ["x"], "a": [2]}), T({"d": [1.0], "b": [3]}))
    files("names_differ_in_case", T({"a": [1]}), T({"A": [2], "b": [1]}))
    files("struct_gains_a_field", T({"s": [{"x": 1}]}), T({"s": [{"y": "a", "x": 2}]}))
    files("list_of_structs", T({"s": [[{"x": 1}]]}), T({"s": [[{"y": "a"}]]}))
    files("struct_field_conflict", T({"s": [{"x": 1}]}), T({"s": [{"x": "a"}]}))
    files(
        "map_values_differ",
        T({"m": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int32()))}),
        T({"m": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64()))}),
    )
    files(
        "map_of_structs",
        T({"m": pa.array([[("a", {"x": 1})]], pa.map_(pa.string(), pa.struct([("x", pa.int64())])))}),
        T({"m": pa.array([[("a", {"y": 1.5})]], pa.map_(pa.string(), pa.struct([("y", pa.float64())])))}),
    )
    files("string_then_binary", T({"x": ["a"]}), T({"x": [b"a"]}))
    files("long_then_string", T({"x": [1]}), T({"x": ["a"]}))
    files("column_then_struct", T({"x": [1]}), T({"x": [{"y": 1}]}))
    files(
        "required_then_optional",
        pa.table({"x": pa.array([1])}, schema=pa.schema([pa.field("x", pa.int64(), nullable=False)])),
        T({"x": [2]}),
    )
    # Spark merges in the order of the files' paths (upper case first), not the order written
    order = root / "merge_path_order"
    order.mkdir()
    for name, column in (("z", "z"), ("a", "a"), ("B", "m"), ("a10", "n"), ("a9", "o")):
        pq.write_table(T({column: [1]}), order / f"{name}.parquet")
    hidden = root / "merge_hidden_files"
    hidden.mkdir()
    pq.write_table(T({"a": [1]}), hidden / "a.parquet")
    pq.write_table(T({"h": [1]}), hidden / "_h.parquet")
    pq.write_table(T({"h2": [1]}), hidden / ".h.parquet")


_DUCKDB_COLUMNS = {
    "tinyint": "1::TINYINT",
    "smallint": "1::SMALLINT",
    "integer": "1::INTEGER",
    "bigint": "1::BIGINT",
    "hugeint": "1::HUGEINT",
    "uhugeint": "1::UHUGEINT",
    "utinyint": "1::UTINYINT",
    "usmallint": "1::USMALLINT",
    "uinteger": "1::UINTEGER",
    "ubigint": "1::UBIGINT",
    "float": "1.5::FLOAT",
    "double": "1.5::DOUBLE",
    "decimal_4_1": "1.5::DECIMAL(4,1)",
    "decimal_9_2": "1.5::DECIMAL(9,2)",
    "decimal_18_3": "1.5::DECIMAL(18,3)",
    "decimal_38_10": "1.5::DECIMAL(38,10)",
    "varchar": "'a'",
    "blob": "'a'::BLOB",
    "boolean": "true",
    "date": "DATE '2026-01-02'",
    "time": "TIME '01:02:03'",
    "timestamp": "TIMESTAMP '2026-01-02 03:04:05'",
    "timestamptz": "TIMESTAMPTZ '2026-01-02 03:04:05+00'",
    "timestamp_s": "TIMESTAMP_S '2026-01-02 03:04:05'",
    "timestamp_ms": "TIMESTAMP_MS '2026-01-02 03:04:05'",
    "timestamp_ns": "TIMESTAMP_NS '2026-01-02 03:04:05'",
    "interval": "INTERVAL 1 DAY",
    "uuid": "'3c0a4b6e-8a2d-4b7a-9b7f-5a1e2c3d4e5f'::UUID",
    "json": "'{\"a\": 1}'::JSON",
    "enum": "'x'::ENUM('x', 'y')",
    "list": "[1, 2, NULL]",
    "array": "[1, 2]::INTEGER[2]",
    "struct": "{'a': 1, 'b': 'x'}",
    "map": "MAP {'k': 1.5}",
    "nested": "[{'a': [{'b': 1::UTINYINT}]}]",
    "null": "NULL",
}


def _duckdb_corpus(root: Path) -> None:
    import duckdb

    con = duckdb.connect()
    for name, expr in _DUCKDB_COLUMNS.items():
        directory = root / f"duckdb_{name}"
        directory.mkdir()
        try:
            con.execute(f"COPY (SELECT {expr} AS c) TO '{directory / 'data.parquet'}' (FORMAT PARQUET)")
        except duckdb.Error:  # pragma: no cover - a DuckDB without the type
            directory.rmdir()
    directory = root / "duckdb_many_files"
    directory.mkdir()
    for i, extra in enumerate(("", ", 1.5::DOUBLE AS d", ", {'x': 1} AS s2, 'v' AS s")):
        con.execute(
            f"COPY (SELECT range AS id, range::VARCHAR AS s{extra} FROM range(10)) "
            f"TO '{directory / f'f{i}.parquet'}' (FORMAT PARQUET)"
        )


_SPARK_COLUMNS = {
    "tinyint": "CAST(1 AS TINYINT)",
    "smallint": "CAST(1 AS SMALLINT)",
    "int": "1",
    "bigint": "CAST(1 AS BIGINT)",
    "float": "CAST(1.5 AS FLOAT)",
    "double": "1.5D",
    "decimal_5_2": "CAST(1.5 AS DECIMAL(5,2))",
    "decimal_15_2": "CAST(1.5 AS DECIMAL(15,2))",
    "decimal_30_2": "CAST(1.5 AS DECIMAL(30,2))",
    "string": "'a'",
    "varchar": "CAST('a' AS VARCHAR(5))",
    "binary": "X'01'",
    "boolean": "true",
    "date": "DATE'2026-01-02'",
    "timestamp": "TIMESTAMP'2026-01-02 03:04:05'",
    "timestamp_ntz": "TIMESTAMP_NTZ'2026-01-02 03:04:05'",
    "array": "array(1, 2)",
    "map": "map('k', 1.5D)",
    "struct": "named_struct('a', 1, 'b', array(named_struct('c', 'x')))",
    "null_int": "CAST(NULL AS INT)",
}


def _spark_corpus(spark: Any, root: Path) -> None:
    for name, expr in _SPARK_COLUMNS.items():
        spark.sql(f"SELECT {expr} AS c, 1 AS n").coalesce(1).write.parquet(str(root / f"spark_{name}"))
    spark.sql(f"SELECT {', '.join(f'{e} AS {n}' for n, e in _SPARK_COLUMNS.items())}").write.parquet(
        str(root / "spark_every_type")
    )
    spark.sql("SELECT 1 AS a").write.option("parquet.writeLegacyFormat", "true").parquet(
        str(root / "spark_legacy_a")
    )
    spark.conf.set("spark.sql.parquet.writeLegacyFormat", "true")
    try:
        spark.sql("SELECT array(1) AS l, map('a', 1) AS m, CAST(1.5 AS DECIMAL(5,2)) AS d").write.parquet(
            str(root / "spark_legacy_format")
        )
    finally:
        spark.conf.unset("spark.sql.parquet.writeLegacyFormat")
    spark.conf.set("spark.sql.parquet.outputTimestampType", "INT96")
    try:
        spark.sql("SELECT TIMESTAMP'2026-01-02 03:04:05' AS ts").write.parquet(str(root / "spark_int96"))
    finally:
        spark.conf.unset("spark.sql.parquet.outputTimestampType")
    spark.sql("SELECT 1 AS a").write.parquet(str(root / "spark_then_pyarrow"))
    pq.write_table(T({"a": pa.array([1], pa.int32()), "b": ["x"]}), root / "spark_then_pyarrow" / "z.parquet")
    df = spark.sql("SELECT 1 AS a")
    from pyspark.sql.functions import col

    df.select(col("a").alias("a", metadata={"comment": "kept"})).write.parquet(
        str(root / "spark_field_metadata")
    )


@pytest.fixture(scope="module")
def corpus(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    _pyarrow_corpus(root)
    _merge_corpus(root)
    _duckdb_corpus(root)
    _spark_corpus(spark, root)
    return root


def _footers(directory: Path) -> list[tuple[str, Any]]:
    """The directory's data files as Spark lists them (not ``_SUCCESS``, ``.crc`` or other hidden files)."""
    paths = [directory / n for n in os.listdir(directory) if not n.startswith(("_", "."))]
    return [(str(p), pq.read_metadata(p)) for p in paths if p.is_file()]


def _spark_or_error(spark: Any, directory: Path) -> tuple[str, Any]:
    try:
        schema = spark.read.option("mergeSchema", "true").parquet(str(directory)).schema
    except Exception as e:  # noqa: BLE001 - Spark's error is the expected outcome
        return "error", spark_message(e)
    return "schema", schema.jsonValue()


def _ours_or_error(directory: Path) -> tuple[str, Any]:
    try:
        return "schema", parquet_directory_schema(_footers(directory))
    except MergeError as e:
        return "error", str(e)


_PYARROW_CASES = [f"pyarrow_{n}" for n in PYARROW_COLUMNS] + [
    "pyarrow_every_type",
    "pyarrow_int96",
    "pyarrow_int96_utc",
    "pyarrow_int96_nested",
    "pyarrow_format_1_0",
    "pyarrow_format_2_4",
    "pyarrow_converted_timestamps",
    "pyarrow_no_dictionary",
    "pyarrow_without_arrow_schema",
    "pyarrow_required",
    "pyarrow_field_ids",
    "pyarrow_odd_names",
]
_MERGE_CASES = [
    f"merge_{n}"
    for n in (
        "int_then_long",
        "long_then_int",
        "byte_then_int",
        "uint8_then_int16",
        "float_then_double",
        "decimal_precision",
        "decimal_precision_down",
        "decimal_scale",
        "tz_then_ntz",
        "int96_then_tz",
        "ntz_then_ntz_millis",
        "null_then_double",
        "null_then_int",
        "double_then_null",
        "new_columns",
        "names_differ_in_case",
        "struct_gains_a_field",
        "list_of_structs",
        "struct_field_conflict",
        "map_values_differ",
        "map_of_structs",
        "string_then_binary",
        "long_then_string",
        "column_then_struct",
        "required_then_optional",
        "path_order",
        "hidden_files",
    )
]
_DUCKDB_CASES = [f"duckdb_{n}" for n in _DUCKDB_COLUMNS] + ["duckdb_many_files"]
_SPARK_CASES = [f"spark_{n}" for n in _SPARK_COLUMNS] + [
    "spark_every_type",
    "spark_legacy_a",
    "spark_legacy_format",
    "spark_int96",
    "spark_then_pyarrow",
    "spark_field_metadata",
]


@pytest.mark.parametrize("case", _PYARROW_CASES + _MERGE_CASES + _DUCKDB_CASES + _SPARK_CASES)
def test_the_footers_give_the_schema_spark_infers(spark: Any, corpus: Path, case: str) -> None:
    directory = corpus / case
    if not directory.exists():
        pytest.skip(f"{case}: the writer cannot write it here")
    spark_says = _spark_or_error(spark, directory)
    ours = _ours_or_error(directory)
    assert ours == spark_says, f"{case}:\n ours:  {json.dumps(ours)}\n Spark: {json.dumps(spark_says)}"


ROW_CASES = [
    "pyarrow_every_type",
    "pyarrow_int96",
    "pyarrow_int96_utc",
    "pyarrow_uint64",
    "pyarrow_uint8",
    "pyarrow_dictionary",
    "pyarrow_dictionary_int",
    "pyarrow_nested",
    "pyarrow_map_of_struct",
    "pyarrow_format_1_0",
    "pyarrow_converted_timestamps",
    "pyarrow_null",
    "duckdb_ubigint",
    "duckdb_timestamptz",
    "duckdb_nested",
    "duckdb_enum",
    "duckdb_json",
    "duckdb_map",
    "spark_every_type",
    "spark_int96",
    "spark_legacy_format",
]


@pytest.mark.parametrize("case", ROW_CASES)
def test_the_arrow_path_reads_the_rows_sparks_reader_reads(spark: Any, corpus: Path, case: str) -> None:
    """With the schema the footers give, the rows the Arrow path decodes (``files.decode``) equal
    the rows Spark's Parquet reader gives with that schema, file by file."""
    import pyarrow.fs as pafs
    from pyspark.sql.types import StructType

    from icesql.engine.sources.decode import SourceFormat
    from icesql.engine.sources.files.decode import decode
    from icesql.engine.sources.files.pieces import Piece

    directory = corpus / case
    schema = parquet_directory_schema(_footers(directory))
    assert schema is not None
    for path_text, _ in sorted(_footers(directory)):
        path = Path(path_text)
        source = SourceFormat(format="parquet", row_schema_json=schema, session_tz="UTC", inferred=True)
        piece = Piece(0, str(path), path.stat().st_size, 0)
        ours = pa.Table.from_batches(list(decode(piece, source, pafs.LocalFileSystem(), str(path))))
        theirs = spark.read.schema(StructType.fromJson(schema)).parquet(str(path)).toArrow()
        assert ours.num_rows == theirs.num_rows > 0
        assert ours.to_pylist() == theirs.cast(ours.schema).to_pylist(), path.name
