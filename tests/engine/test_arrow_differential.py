"""The Arrow path reads every file exactly as Spark's readers do, or leaves it to them.

For each file of a corpus (JSON, CSV, Parquet, Debezium JSON: unicode and emoji, empty strings
and nulls, NaN and infinities, integer overflow, decimals at their precision limits, timestamps
with and without offsets and before 1970, dates at the year limits, nested values, missing and
extra fields, CSV quoting and headers, empty files, malformed records) the rows ``files.decode``
gives are compared with what Spark's reader gives for the same file and schema:

* where Arrow reads the file, every value of every row equals Spark's, and Spark found no bad
  record in it;
* where Arrow cannot be sure, it raises ``Fallback`` (the file then goes through Spark's reader);
* the well-formed part of the corpus never falls back.

Each file is read whole and, again, cut into small pieces (byte ranges / row groups) to check
that splitting changes nothing. One local Spark session for the module.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs as pafs

from icesql.engine.sources.decode import SourceFormat
from icesql.engine.sources.files import decode as D
from icesql.engine.sources.files.pieces import FileEntry, split_parquet, split_text
from icesql.engine.sources.types import Fallback

pytestmark = pytest.mark.spark

os.environ["TZ"] = "UTC"  # PySpark collects timestamps in the process's local zone
time.tzset()

JSON_SCHEMA = (
    "id BIGINT, name STRING, score DOUBLE, small INT, tiny TINYINT, ok BOOLEAN, "
    "amount DECIMAL(38,10), big DECIMAL(38,0), ts TIMESTAMP, ntz TIMESTAMP_NTZ, day DATE, "
    "tags ARRAY<STRING>, info STRUCT<a: INT, b: STRUCT<c: STRING, d: ARRAY<DATE>>>"
)

GOOD_JSON: dict[str, list[Any]] = {
    "unicode": [
        {"id": 1, "name": "héllo wörld ✓", "score": 1.5},
        {"id": 2, "name": "emoji 🧊🔥👩‍👩‍👧", "score": -0.0},
        {"id": 3, "name": "日本語テキスト", "score": 1e-300},
        {"id": 4, "name": 'tab\tand \\ backslash and "quotes"', "score": 2.5e300},
    ],
    "nan_infinity": [
        '{"id": 1, "score": NaN}',
        '{"id": 2, "score": Infinity}',
        '{"id": 3, "score": -Infinity}',
    ],
    "nulls_and_empty": [
        {"id": 1, "name": "", "score": None, "tags": []},
        {"id": 2, "name": None, "tags": None, "info": None},
        {"id": 3},
        {"id": 4, "tags": ["", None, "x"], "info": {"a": None, "b": None}},
    ],
    "numbers_at_limits": [
        {"id": 9223372036854775807, "small": 2147483647, "tiny": 127},
        {"id": -9223372036854775808, "small": -2147483648, "tiny": -128},
        {"id": 0, "amount": 1234567890123456789012345678.0123456789},
        {"id": 1, "amount": -0.0000000001, "big": 99999999999999999999999999999999999999},
    ],
    "timestamps": [
        {"id": 1, "ts": "2024-03-05T10:11:12Z", "ntz": "2024-03-05T10:11:12", "day": "2024-03-05"},
        {"id": 2, "ts": "2024-03-05T10:11:12.123456+02:00", "ntz": "2024-03-05 10:11:12.5"},
        {"id": 3, "ts": "1969-12-31T23:59:59.999999Z", "day": "1969-12-31"},
        {"id": 4, "ts": "1900-01-01 00:00:00", "day": "0001-01-01"},
        {"id": 5, "ts": "2024-03-05", "ntz": "2024-03-05T10:11", "day": "9999-12-31"},
        {"id": 6, "ts": "2024-03-05T10:11:12.123456789Z", "ntz": "2024-03-05T10:11:12.000001"},
        {"id": 7, "ts": "2024-03-05T10:11:12-0530"},
    ],
    "nested": [
        {"id": 1, "info": {"a": 1, "b": {"c": "x", "d": ["2024-01-01", None]}}},
        {"id": 2, "info": {"a": 2, "b": {"c": None, "d": []}}, "tags": ["a", "b"]},
        {"id": 3, "info": {"b": {"d": ["1970-01-01"]}}},
    ],
    "extra_fields": [
        {"id": 1, "unknown": {"deep": [1, 2, 3]}, "name": "x", "Name": "other case"},
        {"id": 2, "ID": 99, "name": "upper-case key is another field"},
    ],
}

# Files Spark reads differently from a plain Arrow parse: Arrow must fall back, never guess.
FALLBACK_JSON: dict[str, list[str]] = {
    "overflow": ['{"id": 1, "small": 2147483648}'],
    "tiny_overflow": ['{"id": 1, "tiny": 128}'],
    "long_overflow": ['{"id": 92233720368547758070}'],
    "decimal_too_precise": ['{"id": 1, "amount": 1.00000000001}'],
    "number_for_string": ['{"id": 1, "name": 5}'],
    "object_for_string": ['{"id": 1, "name": {"x": 1}}'],
    "string_for_number": ['{"id": "7"}'],
    "float_for_int": ['{"id": 9.0}'],
    "epoch_timestamp": ['{"id": 1, "ts": 1700000000}'],
    "unpadded_date": ['{"id": 1, "day": "2024-1-5"}'],
    "malformed": ['{"id": 1, "name": "ok"}', '{"id": 2, "name": '],
    "not_an_object": ["[1, 2]"],
    "duplicate_key": ['{"id": 1, "id": 2}'],
    "ntz_with_zone": ['{"id": 1, "ntz": "2024-01-01T00:00:00Z"}'],
}

CSV_SCHEMA = "id INT, name STRING, amount DOUBLE, price DECIMAL(10,2), ok BOOLEAN, ts TIMESTAMP, day DATE"
GOOD_CSV: dict[str, tuple[bool, str]] = {
    "header": (
        True,
        "id,name,amount,price,ok,ts,day\n1,alice,1.5,2.50,true,2024-01-01 10:00:00,2024-01-01\n",
    ),
    "no_header": (False, "2,bob,-2,3,False,2024-01-01T10:00:00Z,1969-12-31\n3,,,,,,\n"),
    "quoted": (False, '4,"a, b",1e3,0.1,TRUE,"2024-01-01T10:00:00+02:00",2024-02-29\n5,"",0,-1.5,false,,\n'),
    "unicode": (False, "6,héllo 🧊,1.,.5,true,1969-07-20 20:17:40,1969-07-20\n"),
    "crlf": (False, "7,x,1,1,true,2024-01-01,2024-01-01\r\n8,y,2,2,false,2024-01-02,2024-01-02\r\n"),
    "empty": (False, ""),
    "header_only": (True, "id,name,amount,price,ok,ts,day\n"),
}
FALLBACK_CSV: dict[str, tuple[bool, str]] = {
    "escaped_quote": (False, '1,"say \\"hi\\"",1,1,true,,\n'),
    "doubled_quote": (False, '2,"a""b",1,1,true,,\n'),
    "bad_number": (False, "3,x,not-a-number,1,true,,\n"),
    "too_few_fields": (False, "4,x\n"),
    "nan": (False, "5,x,NaN,1,true,,\n"),
    "infinity": (False, "6,x,Inf,1,true,,\n"),
    "plus_sign": (False, "7,x,+1,1,true,,\n"),
    "boolean_as_digit": (False, "8,x,1,1,1,,\n"),
    "spaces_in_number": (False, "9,x, 1,1,true,,\n"),
}


# --------------------------------------------------------------------------- comparison


def norm(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return ("ts", v)
    if isinstance(v, float) and math.isnan(v):
        return ("nan",)
    if isinstance(v, Decimal):
        return ("dec", v)
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    if hasattr(v, "asDict"):
        return norm(v.asDict(recursive=True))
    return v


def spark_rows(spark: Any, fmt: str, path: Path, schema: str, header: bool = False) -> tuple[list[Any], int]:
    """Spark's rows for one file and how many it marked corrupt."""
    reader = (
        spark.read.schema(schema + ", _corrupt_record STRING")
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", "_corrupt_record")
    )
    if fmt == "csv":
        reader = reader.option("header", str(header).lower())
    rows = [r.asDict(recursive=True) for r in reader.format(fmt).load(str(path)).collect()]
    bad = sum(1 for r in rows if r.pop("_corrupt_record") is not None)
    return [norm(r) for r in rows], bad


def arrow_rows(
    spark: Any, fmt: str, path: Path, schema: str, *, header: bool = False, piece: int | None = None
) -> list[Any]:
    from pyspark.sql.types import _parse_datatype_string

    source = SourceFormat(fmt, _parse_datatype_string(schema).jsonValue(), header=header)
    source.check_supported()
    size = path.stat().st_size
    entry = FileEntry(1, str(path), size, 0)
    if fmt == "parquet":
        md = pq.read_metadata(path)
        sizes = [md.row_group(i).total_byte_size for i in range(md.num_row_groups)]
        pieces = split_parquet(entry, sizes, piece or size + 1)
    else:
        pieces = split_text(entry, piece or max(1, size))
    out: list[Any] = []
    fs = pafs.LocalFileSystem()
    for p in pieces:
        for b in D.decode(p, source, fs, str(path)):
            out.extend(b.to_pylist())
    return [norm(r) for r in out]


def write_json(dir: Path, name: str, lines: list[Any]) -> Path:
    path = dir / f"{name}.json"
    path.write_text(
        "".join((x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)) + "\n" for x in lines)
    )
    return path


# --------------------------------------------------------------------------- json


@pytest.mark.parametrize("case", sorted(GOOD_JSON))
def test_well_formed_json_reads_as_spark_reads_it(spark: Any, tmp_path: Path, case: str) -> None:
    path = write_json(tmp_path, case, GOOD_JSON[case])
    expected, bad = spark_rows(spark, "json", path, JSON_SCHEMA)
    assert bad == 0, "the well-formed corpus is well-formed for Spark too"
    assert arrow_rows(spark, "json", path, JSON_SCHEMA) == expected
    old = D.CHUNK_BYTES
    try:
        D.CHUNK_BYTES = 7  # chunks of a few bytes, pieces of 20 bytes: line ends everywhere
        assert arrow_rows(spark, "json", path, JSON_SCHEMA, piece=20) == expected
    finally:
        D.CHUNK_BYTES = old


@pytest.mark.parametrize("case", sorted(FALLBACK_JSON))
def test_json_arrow_cannot_read_exactly_falls_back(spark: Any, tmp_path: Path, case: str) -> None:
    path = write_json(tmp_path, case, FALLBACK_JSON[case])
    spark_rows(spark, "json", path, JSON_SCHEMA)  # Spark reads it (marking bad records or not)
    with pytest.raises(Fallback):
        arrow_rows(spark, "json", path, JSON_SCHEMA)


def test_empty_and_blank_json_files(spark: Any, tmp_path: Path) -> None:
    for name, text in (("empty", ""), ("blank", "\n\n  \n")):
        path = tmp_path / f"{name}.json"
        path.write_text(text)
        expected, bad = spark_rows(spark, "json", path, JSON_SCHEMA)
        assert (expected, bad) == ([], 0)
        assert arrow_rows(spark, "json", path, JSON_SCHEMA) == []


# --------------------------------------------------------------------------- csv


@pytest.mark.parametrize("case", sorted(GOOD_CSV))
def test_well_formed_csv_reads_as_spark_reads_it(spark: Any, tmp_path: Path, case: str) -> None:
    header, text = GOOD_CSV[case]
    path = tmp_path / f"{case}.csv"
    path.write_bytes(text.encode())
    expected, bad = spark_rows(spark, "csv", path, CSV_SCHEMA, header)
    assert bad == 0
    assert arrow_rows(spark, "csv", path, CSV_SCHEMA, header=header) == expected
    assert arrow_rows(spark, "csv", path, CSV_SCHEMA, header=header, piece=9) == expected


@pytest.mark.parametrize("case", sorted(FALLBACK_CSV))
def test_csv_arrow_cannot_read_exactly_falls_back(spark: Any, tmp_path: Path, case: str) -> None:
    header, text = FALLBACK_CSV[case]
    path = tmp_path / f"{case}.csv"
    path.write_text(text)
    spark_rows(spark, "csv", path, CSV_SCHEMA, header)
    with pytest.raises(Fallback):
        arrow_rows(spark, "csv", path, CSV_SCHEMA, header=header)


# --------------------------------------------------------------------------- parquet

PARQUET_SCHEMA = "id BIGINT, name STRING, ts TIMESTAMP, amount DECIMAL(12,2), day DATE, nested STRUCT<x: BIGINT, y: ARRAY<STRING>>"


def test_parquet_reads_as_spark_reads_it(spark: Any, tmp_path: Path) -> None:
    n = 5000
    table = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "NAME": pa.array([None if i % 7 == 0 else f"n{i} ✓" for i in range(n)]),  # case differs
            "ts": pa.array(
                [
                    dt.datetime(1960, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i * 997)
                    for i in range(n)
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "amount": pa.array([Decimal(i) / 100 for i in range(n)], pa.decimal128(12, 2)),
            "nested": pa.array([{"x": i, "y": [str(i)] * (i % 3)} for i in range(n)]),
            "extra": pa.array(range(n)),
        }
    )  # `day` is missing: null
    path = tmp_path / "p.parquet"
    pq.write_table(table, path, row_group_size=600)
    expected, bad = spark_rows(spark, "parquet", path, PARQUET_SCHEMA)
    assert bad == 0
    assert arrow_rows(spark, "parquet", path, PARQUET_SCHEMA) == expected
    assert arrow_rows(spark, "parquet", path, PARQUET_SCHEMA, piece=2000) == expected  # row-group runs


def test_parquet_int_widened_to_the_declared_bigint(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "i.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2, None], pa.int32())}), path)
    assert arrow_rows(spark, "parquet", path, "id BIGINT") == [{"id": 1}, {"id": 2}, {"id": None}]


def test_parquet_with_another_type_falls_back(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "s.parquet"
    pq.write_table(pa.table({"id": pa.array(["1"])}), path)
    with pytest.raises(Fallback):
        arrow_rows(spark, "parquet", path, "id BIGINT")


# --------------------------------------------------------------------------- debezium

DBZ_SCHEMA = "id BIGINT, name STRING, ts TIMESTAMP"


DBZ_EVENTS = {
    # bare events, one wrapped in Kafka Connect's {"schema", "payload"} envelope
    "mixed": [
        {
            "op": "c",
            "after": {"id": 1, "name": "a", "ts": "2024-01-01T00:00:00Z"},
            "source": {"lsn": 10},
            "ts_ms": 1,
        },
        {"op": "u", "before": {"id": 1}, "after": {"id": 1, "name": "b"}, "source": {"ts_ms": 20}},
        {"payload": {"op": "d", "before": {"id": 1, "name": "b"}, "ts_ms": 30}},
        {"op": "r", "after": {"id": 2, "name": "ü 🧊", "ts": "1969-01-01 00:00:00"}},
    ],
    # no envelope anywhere: read without the wrapper's columns
    "bare": [
        {"op": "c", "after": {"id": 1, "name": "a"}, "source": {"lsn": 10}},
        {"op": "d", "before": {"id": 1, "name": "a"}, "ts_ms": 30},
    ],
    # every event wrapped, the key spaced as some producers write it
    "wrapped": [
        '{"schema": {"type": "struct"}, "payload" : {"op": "c", "after": {"id": 1, "name": "a"}, "ts_ms": 5}}',
        '{"schema": null, "payload":\t{"op": "u", "before": {"id": 1}, "after": {"id": 1, "name": "b"}}}',
    ],
    # a row column named payload is not the envelope
    "row_column_named_payload": [
        {"op": "c", "after": {"id": 1, "name": "a", "payload": "x"}, "ts_ms": 1},
        {"op": "u", "after": {"id": 1, "name": '"payload": {'}, "ts_ms": 2},
        {"op": "u", "after": {"id": 1, "name": "c", "payload": {"nested": 1}}, "ts_ms": 3},
    ],
}


@pytest.mark.parametrize("case", sorted(DBZ_EVENTS))
def test_debezium_events_decode_as_spark_path_decodes_them(spark: Any, tmp_path: Path, case: str) -> None:
    from icesql.engine.sources.files.relation import spark_files_dataframe
    from icesql.plan import OnError, SourceFormat, SourceKind, SourcePlan

    path = write_json(tmp_path, "cdc", DBZ_EVENTS[case])
    plan = SourcePlan(
        "cdc", SourceKind.FILES, path=str(path), format=SourceFormat.DEBEZIUM_JSON, schema=DBZ_SCHEMA
    )
    df, changelog = spark_files_dataframe(spark, plan, OnError.FAIL, None, streaming=False, paths=[str(path)])
    assert changelog
    expected = [norm(r.asDict(recursive=True)) for r in df.collect()]
    assert len(expected) == len(DBZ_EVENTS[case])
    assert arrow_rows(spark, "debezium-json", path, DBZ_SCHEMA) == expected


def test_an_envelope_the_quick_check_misses_falls_back(spark: Any, tmp_path: Path) -> None:
    """The envelope's key written with an escape is still the envelope (Spark reads it so); the
    check for a wrapper misses it, and the event then has no op: the file goes to Spark's path."""
    line = r'{"pay\u006coad": {"op": "c", "after": {"id": 1, "name": "a"}}}'
    path = write_json(tmp_path, "escaped", [line])
    assert json.loads(line)["payload"]["op"] == "c"
    with pytest.raises(Fallback):
        arrow_rows(spark, "debezium-json", path, DBZ_SCHEMA)


def test_a_debezium_event_without_op_falls_back(spark: Any, tmp_path: Path) -> None:
    path = write_json(tmp_path, "bad", [{"after": {"id": 1}}])
    with pytest.raises(Fallback):
        arrow_rows(spark, "debezium-json", path, DBZ_SCHEMA)
