"""The schema Spark's ORC reader infers for a file (``spark.read.orc(dir).schema``), worked out
from the file's footer (``files.footers.orc_footer``): equal over files written by pyarrow and by
Spark, in every compression either writes (issue 54). ORC is not a FILES format yet: this is the
first half of a source without a SCHEMA over ORC files.

What Spark does with a directory of ORC files that disagree is pinned down too: without
``mergeSchema`` (its default for ORC) it takes one file's schema - the first its listing gives,
the directory's own order, not the files' names - and ignores the other files' columns.
"""

from __future__ import annotations

import decimal
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as po
import pytest

from icesql.engine.sources.files.footers import merged_schema, orc_footer

pytestmark = pytest.mark.spark

T = pa.table

PYARROW_COLUMNS: dict[str, pa.Array] = {
    "int8": pa.array([1], pa.int8()),
    "int16": pa.array([1], pa.int16()),
    "int32": pa.array([1], pa.int32()),
    "int64": pa.array([1], pa.int64()),
    "float32": pa.array([1.5], pa.float32()),
    "float64": pa.array([1.5]),
    "bool": pa.array([True]),
    "string": pa.array(["a"]),
    "large_string": pa.array(["a"], pa.large_string()),
    "binary": pa.array([b"a"]),
    "date": pa.array([1], pa.date32()),
    "ts": pa.array([1], pa.timestamp("us")),
    "ts_utc": pa.array([1], pa.timestamp("us", "UTC")),
    "ts_ns": pa.array([1_000], pa.timestamp("ns")),  # (a nanosecond more: Spark's reader reads that file)
    "decimal_10_2": pa.array([decimal.Decimal("1.5")], pa.decimal128(10, 2)),
    "decimal_38_0": pa.array([decimal.Decimal("1")], pa.decimal128(38, 0)),
    "list": pa.array([[1, None]], pa.list_(pa.int64())),
    "map": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64())),
    "struct": pa.array([{"x": 1, "y": "s"}]),
    "nested": pa.array([[{"x": [{"k": 1.5}]}]]),
}
COMPRESSIONS = ("uncompressed", "zlib", "snappy", "zstd", "lz4")

SPARK_COLUMNS = {
    "tinyint": "CAST(1 AS TINYINT)",
    "smallint": "CAST(1 AS SMALLINT)",
    "int": "1",
    "bigint": "CAST(1 AS BIGINT)",
    "float": "CAST(1.5 AS FLOAT)",
    "double": "1.5D",
    "decimal": "CAST(1.5 AS DECIMAL(20,3))",
    "string": "'a'",
    "varchar": "CAST('a' AS VARCHAR(5))",
    "char": "CAST('a' AS CHAR(5))",
    "binary": "X'01'",
    "boolean": "true",
    "date": "DATE'2026-01-02'",
    "timestamp": "TIMESTAMP'2026-01-02 03:04:05'",
    "timestamp_ntz": "TIMESTAMP_NTZ'2026-01-02 03:04:05'",
    "struct": "named_struct('a', 1, 'b', array(map('k', TIMESTAMP_NTZ'2026-01-02 03:04:05')))",
}
SPARK_COMPRESSIONS = ("zstd", "snappy", "zlib", "lz4", "none")


@pytest.fixture(scope="module")
def corpus(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("orc")
    for name, array in PYARROW_COLUMNS.items():
        (root / f"pyarrow_{name}").mkdir()
        po.write_table(T({"c": array}), root / f"pyarrow_{name}" / "a.orc")
    every = T(PYARROW_COLUMNS)
    for compression in COMPRESSIONS:
        (root / f"pyarrow_every_{compression}").mkdir()
        po.write_table(every, root / f"pyarrow_every_{compression}" / "a.orc", compression=compression)
    select = ", ".join(f"{e} AS {n}" for n, e in SPARK_COLUMNS.items())
    for compression in SPARK_COMPRESSIONS:
        spark.sql(f"SELECT {select}").coalesce(1).write.option("compression", compression).orc(
            str(root / f"spark_every_{compression}")
        )
    for name, expr in SPARK_COLUMNS.items():
        spark.sql(f"SELECT {expr} AS c").coalesce(1).write.orc(str(root / f"spark_{name}"))
    return root


def _data_files(directory: Path) -> list[Path]:
    return [directory / n for n in os.listdir(directory) if not n.startswith(("_", "."))]


def _ours(directory: Path) -> Any:
    schemas = []
    for path in sorted(_data_files(directory)):
        with open(path, "rb") as f:
            schemas.append(orc_footer(f))
    return merged_schema(schemas)


CASES = (
    [f"pyarrow_{n}" for n in PYARROW_COLUMNS]
    + [f"pyarrow_every_{c}" for c in COMPRESSIONS]
    + [f"spark_every_{c}" for c in SPARK_COMPRESSIONS]
    + [f"spark_{n}" for n in SPARK_COLUMNS]
)


@pytest.mark.parametrize("case", CASES)
def test_the_footer_gives_the_schema_sparks_orc_reader_infers(spark: Any, corpus: Path, case: str) -> None:
    directory = corpus / case
    assert _ours(directory) == spark.read.orc(str(directory)).schema.jsonValue()


def test_spark_takes_one_orc_files_schema_not_the_files_names_first(spark: Any, tmp_path: Path) -> None:
    """Files of different columns: Spark's ORC reader takes the schema of the file its listing
    gives first (the directory's order), leaving the others' columns out; with ``mergeSchema``
    it unites them as for Parquet (same merge rules)."""
    for name in ("a", "m", "z", "b"):
        po.write_table(T({name: [1]}), tmp_path / f"{name}.orc")
    listed_first = next(p for p in os.listdir(tmp_path) if not p.startswith("."))
    assert spark.read.orc(str(tmp_path)).schema.names == [listed_first[0]]
    merged = spark.read.option("mergeSchema", "true").orc(str(tmp_path)).schema.jsonValue()
    assert sorted(f["name"] for f in merged["fields"]) == ["a", "b", "m", "z"]
    ours = _ours(tmp_path)
    assert ours is not None and sorted(f["name"] for f in ours["fields"]) == ["a", "b", "m", "z"]


@pytest.mark.parametrize("case", ["pyarrow_every_zstd", "pyarrow_every_uncompressed", "spark_every_zstd"])
def test_the_arrow_path_reads_orc_rows_as_sparks_reader(spark: Any, corpus: Path, case: str) -> None:
    """The rows the Arrow path decodes (``files.decode``) from an ORC file, with the schema its
    footer gives, equal the rows Spark's ORC reader gives with that schema."""
    import pyarrow.fs as pafs
    from pyspark.sql.types import StructType

    from icesql.engine.sources.decode import SourceFormat
    from icesql.engine.sources.files.decode import decode
    from icesql.engine.sources.files.pieces import Piece

    directory = corpus / case
    schema = _ours(directory)
    (path,) = _data_files(directory)
    source = SourceFormat(format="orc", row_schema_json=schema, session_tz="UTC", inferred=True)
    piece = Piece(0, str(path), path.stat().st_size, 0)
    ours = pa.Table.from_batches(list(decode(piece, source, pafs.LocalFileSystem(), str(path))))
    theirs = spark.read.schema(StructType.fromJson(schema)).orc(str(directory)).toArrow()
    assert ours.num_rows == theirs.num_rows == 1
    assert ours.to_pylist() == theirs.cast(ours.schema).to_pylist()


@pytest.mark.parametrize("arrow", ["1", "0"], ids=["arrow-path", "spark-path"])
def test_an_orc_source_without_a_schema_on_either_path(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arrow: str
) -> None:
    """The same table from an ORC source without a SCHEMA whether the Arrow path reads it (its
    schema from the footers) or Spark's ORC reader does (``ICESQL_ARROW_PATH=0``: Spark infers it,
    merging the files), a later file's new column included."""
    import icesql
    from tests.engine.test_schema_evolution import fields, rows

    monkeypatch.setenv("ICESQL_ARROW_PATH", arrow)
    home, data, wh = tmp_path / "home", tmp_path / "in", tmp_path / "wh"
    data.mkdir()
    po.write_table(T({"id": pa.array([1, 2], pa.int64()), "s": ["a", None]}), data / "1.orc")
    with icesql.Session(home=home, spark=spark) as s:
        s.execute(
            f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');"
            f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'orc');"
            "CREATE SINK k FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't');"
        )
        s.run(once=True)
    po.write_table(T({"id": pa.array([3], pa.int64()), "s": ["c"], "d": pa.array([1.5])}), data / "2.orc")
    with icesql.Session(home=home, spark=spark) as s:
        s.run(once=True)
    assert [(n, t) for _, n, t, _ in fields(home, wh)] == [("id", "long"), ("s", "string"), ("d", "double")]
    assert rows(home, wh) == [(1, "a", None), (2, None, None), (3, "c", 1.5)]
