"""Issue 38's proof for the data file formats: the Arrow-path differential corpus written as
Parquet, ORC and Avro, read back by every reader that reads the format.

The well-formed JSON corpus of ``tests/engine/test_arrow_differential.py`` (``GOOD_JSON`` with
``JSON_SCHEMA``: unicode and emoji, NaN and infinities, numbers at the limits of their types,
decimals at their precision, timestamps before 1970 and with offsets, dates at the year limits,
nested structs and arrays with null elements, nulls and missing fields) is written as JSON files
into one FILES source; three sinks of one local catalog read it, through the public path only::

    CREATE SINK t_<fmt> FROM corpus INTO ICEBERG CATALOG lake (NAMESPACE = 'fmt', TABLE = 't_<fmt>')
      PARTITION BY (day(ts), bucket(4, id)) WITH (FORMAT = '<fmt>')     -- parquet, orc, avro

``day(ts)`` (with timestamps of 1900, 1969 and 2024, and nulls) and ``bucket(4, id)`` split the 27
rows into several partitions. Each sink runs once (``run(once=True)``, one run per sink so that
one format's failure cannot stop another's run), on each path a bounded run takes: ``[local]`` without Spark (``icesql.Session(spark=None)``: the query runs in
this process, ``engine.local_query``) and ``[spark]`` (a local Spark session given to the
Session: Spark's streaming query, the files written by its Python workers). One module fixture
per path.

What each reader can reach, and so what is compared with the Parquet table:

* icesql itself (``table_reader.read_rows``, what SELECT, compaction and the key index use, and
  ``SELECT * FROM lake.fmt.t_<fmt>`` through the Session): all three formats, equal to Parquet;
* Iceberg Java (Spark 3.5 + iceberg-spark-runtime in the readers harness; ``-m java``): all
  three formats; its digest of the ORC and of the Avro table equals its digest of the Parquet
  table. The corpus has no ``time`` column: Spark has no type for Iceberg's ``time``;
* pyiceberg (``Table.scan().to_arrow()``): Parquet and ORC, not Avro data files (pyiceberg
  0.12's scan reads only Parquet and ORC data files). Its ORC read matches columns by the
  ``iceberg.id`` attribute but ignores the other Iceberg ORC type attributes, so ORC ``uuid``,
  ``fixed`` and ``time`` columns would come back as binary / long: the corpus has none;
* DuckDB's iceberg extension and DataFusion (iceberg-rust): Parquet only; they read the
  Parquet table here, as a check of the reference itself.

The data files of each table are in its format (manifest ``file_format`` and extension), with
``write.format.default`` set on the table icesql created, and the same partitions and record
counts per partition as the Parquet table. (The null elements of the corpus's arrays are what
showed that pyiceberg 0.12's Avro schema conversion makes optional list elements required:
``formats.avro`` writes them as ``["null", T]``, as Iceberg Java does.)

Upserts in ORC and Avro (position-delete files in the table's format, SIGKILLs, Iceberg Java) are
``tests/e2e/test_cdc_randomized.py[local-orc]`` and ``[local-avro]``.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.engine.select.tables import read_rows
from tests.engine.test_arrow_differential import GOOD_JSON, JSON_SCHEMA, write_json
from tests.support.pipeline_helpers import load_table
from tests.support.readers import (
    _rows_from_arrow,
    norm,
    read_datafusion,
    read_duckdb,
    read_java,
)

pytestmark = pytest.mark.spark

FORMATS = ("parquet", "orc", "avro")
OTHERS = ("orc", "avro")
PATHS = ("local", "spark")
NAMESPACE = "fmt"
CORPUS_ROWS = sum(len(lines) for lines in GOOD_JSON.values())


@dataclass
class Written:
    path: str
    home: Path
    warehouse: Path
    run_errors: dict[str, str]  # sink name -> what its run raised
    errors: dict[str, str | None]  # sink name -> its last error (SHOW SINK STATUS)
    selected: dict[str, list[tuple[Any, ...]]]  # format -> SELECT * through the Session
    seconds: float
    tables: dict[str, Any] = field(default_factory=dict)
    java: dict[str, dict[str, Any]] = field(default_factory=dict)  # format -> read_java's result

    def table_or_none(self, fmt: str) -> Any:
        t = load_table(self.home, f"{NAMESPACE}.t_{fmt}", warehouse=self.warehouse, catalog_name="lake")
        return t if t.current_snapshot() is not None else None

    def table(self, fmt: str) -> Any:
        """The table of ``fmt``'s sink; fails naming the sink's error when it wrote nothing."""
        if fmt not in self.tables:
            t = self.table_or_none(fmt)
            if t is None:
                pytest.fail(
                    f"[{self.path}] sink t_{fmt} committed nothing: {self.errors.get(f't_{fmt}')}"
                    f"\n(its run raised: {self.run_errors.get(f't_{fmt}')})"
                )
            self.tables[fmt] = t
        return self.tables[fmt]


def _canon(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows in one order with NaN comparable (NaN != NaN would make equal tables differ)."""

    def c(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return ("NaN",)
        if isinstance(v, tuple):
            return tuple(c(x) for x in v)
        return v

    return sorted((c(r) for r in rows), key=repr)


def _icesql_rows(table: Any) -> list[tuple[Any, ...]]:
    return _canon(_rows_from_arrow(read_rows(table, table.current_snapshot())))


def _entries(table: Any) -> list[Any]:
    """The live files of the current snapshot (data and delete files)."""
    out = []
    for manifest in table.current_snapshot().manifests(table.io):
        out.extend(e.data_file for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True))
    return out


def _diff(got: list[Any], want: list[Any]) -> str:
    missing = [r for r in want if r not in got][:5]
    extra = [r for r in got if r not in want][:5]
    return f"{len(got)} rows vs {len(want)}; missing {missing}; unexpected {extra}"


def _write_corpus(tmp: Path, spark: Any, path: str) -> Written:
    started = time.monotonic()
    home, wh, data = tmp / "home", tmp / "warehouse", tmp / "corpus"
    data.mkdir(parents=True)
    for case, lines in sorted(GOOD_JSON.items()):
        write_json(data, case, lines)
    sinks = [f"t_{fmt}" for fmt in FORMATS]
    run_errors: dict[str, str] = {}
    with icesql.Session(home=home, spark=spark) as s:
        s.execute(
            f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');"
            f"CREATE SOURCE corpus FROM FILES '{data}' (FORMAT = 'json', SCHEMA = '{JSON_SCHEMA}');"
        )
        for fmt in FORMATS:
            s.execute(
                f"CREATE SINK t_{fmt} FROM corpus INTO ICEBERG CATALOG lake "
                f"(NAMESPACE = '{NAMESPACE}', TABLE = 't_{fmt}') "
                f"PARTITION BY (day(ts), bucket(4, id)) WITH (FORMAT = '{fmt}')"
            )
        # one run per sink: a sink that fails stops the run of the others (on Spark's path
        # before they commit, depending on timing), and one format must not hide another
        for sink in sinks:
            t0 = time.monotonic()
            try:
                s.run(once=True, sinks=[sink])
            except icesql.IcesqlError as e:
                run_errors[sink] = str(e)
            print(f"formats corpus [{path}]: {sink} ran in {time.monotonic() - t0:.1f}s")
        # the run took the path asked for: without Spark no JVM was started
        assert (s.engine._spark is None) == (spark is None), f"[{path}] the run took the other path"
        errors = {st.name: st.last_error for st in s.status() if st.name in sinks}
        selected = {}
        for fmt in FORMATS:
            try:
                [result] = s.execute(f"SELECT * FROM lake.{NAMESPACE}.t_{fmt}")
            except icesql.IcesqlError:
                continue  # the table was not created: Written.table says why
            selected[fmt] = _canon([tuple(norm(v) for v in row) for row in result.rows])
        if spark is None:
            assert s.engine._spark is None, "SELECT started Spark on the path without it"
    out = Written(path, home, wh, run_errors, errors, selected, time.monotonic() - started)
    print(f"formats corpus [{path}]: {CORPUS_ROWS} rows x {len(FORMATS)} sinks in {out.seconds:.1f}s")
    return out


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> Written:
    return _write_corpus(tmp_path_factory.mktemp("formats-local"), None, "local")


@pytest.fixture(scope="module")
def spark_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Written:
    return _write_corpus(tmp_path_factory.mktemp("formats-spark"), spark, "spark")


@pytest.fixture(params=PATHS)
def written(request: pytest.FixtureRequest) -> Written:
    return request.getfixturevalue(f"{request.param}_run")  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- tests


def test_the_parquet_reference_holds_the_corpus(written: Written) -> None:
    """The Parquet table, read by icesql, DuckDB and DataFusion alike, holds every corpus row in
    several partitions: it is the reference the other formats are compared with."""
    table = written.table("parquet")
    rows = _icesql_rows(table)
    assert len(rows) == CORPUS_ROWS
    assert _canon(read_duckdb(table.metadata_location)) == rows, "DuckDB reads the Parquet table otherwise"
    assert _canon(read_datafusion(table.metadata_location)) == rows, (
        "DataFusion reads the Parquet table otherwise"
    )
    partitions = {tuple(f.partition) for f in _entries(table)}
    assert len(partitions) >= 4, partitions


@pytest.mark.parametrize("fmt", FORMATS)
def test_data_files_are_in_the_sinks_format(written: Written, fmt: str) -> None:
    """Every data file of the table is in its sink's FORMAT (the manifest's ``file_format`` and
    the file name's extension); the table icesql created says so in ``write.format.default``;
    no delete file (an append sink); the same partitions and records per partition as Parquet."""
    table = written.table(fmt)
    assert table.properties.get("write.format.default") == fmt
    files = _entries(table)
    assert files and all(int(f.content) == 0 for f in files)
    wrong = [(f.file_path, f.file_format) for f in files if f.file_format.value != fmt.upper()]
    assert not wrong, f"[{written.path}] files not in {fmt}: {wrong}"
    wrong = [f.file_path for f in files if not f.file_path.endswith(f".{fmt}")]
    assert not wrong, f"[{written.path}] files without the .{fmt} extension: {wrong}"

    def per_partition(t: Any) -> Counter[tuple[Any, ...]]:
        c: Counter[tuple[Any, ...]] = Counter()
        for f in _entries(t):
            c[tuple(f.partition)] += f.record_count
        return c

    assert per_partition(table) == per_partition(written.table("parquet"))


@pytest.mark.parametrize("fmt", OTHERS)
def test_icesql_reads_every_format_as_parquet(written: Written, fmt: str) -> None:
    """icesql's own read (``table_reader.read_rows``: every value, Arrow types normalised) and a
    ``SELECT *`` through the Session (DuckDB over those rows) of the table equal the Parquet
    table's."""
    want = _icesql_rows(written.table("parquet"))
    got = _icesql_rows(written.table(fmt))
    assert got == want, f"[{written.path}] icesql reads the {fmt} table otherwise: {_diff(got, want)}"
    assert written.selected[fmt] == written.selected["parquet"], (
        f"[{written.path}] SELECT of the {fmt} table: {_diff(written.selected[fmt], written.selected['parquet'])}"
    )
    assert len(written.selected[fmt]) == CORPUS_ROWS


def test_pyiceberg_reads_the_orc_table_as_parquet(written: Written) -> None:
    """pyiceberg's scan of the ORC table equals its scan of the Parquet table and icesql's read.
    (Not the Avro table: pyiceberg reads no Avro data files. Nor DuckDB or DataFusion, which read
    Parquet data files only.)"""
    want = _canon(_rows_from_arrow(written.table("parquet").scan().to_arrow()))
    assert want == _icesql_rows(written.table("parquet"))
    got = _canon(_rows_from_arrow(written.table("orc").scan().to_arrow()))
    assert got == want, f"[{written.path}] pyiceberg reads the ORC table otherwise: {_diff(got, want)}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_both_paths_write_the_same_rows(local_run: Written, spark_run: Written, fmt: str) -> None:
    """The path without Spark and Spark's path leave the same rows in each format."""
    got, want = _icesql_rows(local_run.table(fmt)), _icesql_rows(spark_run.table(fmt))
    assert got == want, f"{fmt}: without Spark vs Spark: {_diff(got, want)}"


# CI's time: Java reads the tables of the path without Spark in the default run; the Spark path's
# with -m slow (both paths write the same rows: test_both_paths_write_the_same_rows)
@pytest.mark.java
@pytest.mark.parametrize("fmt", OTHERS)
@pytest.mark.parametrize("written", [pytest.param("spark", marks=pytest.mark.slow), "local"], indirect=True)
def test_iceberg_java_reads_orc_and_avro_as_parquet(written: Written, fmt: str) -> None:
    """Iceberg Java (Spark 3.5 + iceberg-spark-runtime, the readers harness) reads all three
    formats: its digest of the ORC and of the Avro table equals its digest of the Parquet table
    (one JVM reads the path's tables, for both tests)."""
    if not written.java:
        have = [f for f in FORMATS if f in written.selected]  # the tables that exist
        locations = [written.table_or_none(f) for f in have]
        found = [(f, t.metadata_location) for f, t in zip(have, locations, strict=True) if t is not None]
        results = [read_java(loc) for _, loc in found]
        written.java.update({f: r for (f, _), r in zip(found, results, strict=True)})
    written.table("parquet")
    written.table(fmt)  # these fail naming the sink's error when it wrote nothing
    ref = written.java["parquet"]
    assert ref["rows"] == CORPUS_ROWS
    got = written.java[fmt]
    if got["digest"] != ref["digest"]:
        mine, theirs = set(got["all"]), set(ref["all"])
        pytest.fail(
            f"[{written.path}] Iceberg Java reads the {fmt} table otherwise: {got['rows']} rows; "
            f"only in {fmt}: {sorted(mine - theirs)[:5]}; only in parquet: {sorted(theirs - mine)[:5]}"
        )
