"""Data file formats (``icesql.engine.iceberg.formats``): ORC and Avro written beside Parquet.

The same rows are written as Parquet and as the format under test, committed to two tables, and
read back through icesql's own reader (``table_reader.read_rows``, what SELECT and compaction
use): every value equals the Parquet table's; the statistics the manifests get equal the ones
pyiceberg takes from the Parquet footer; partitioning by every transform, rollover at the file
size, position and equality delete files, schema evolution (files matched by field id),
compaction (which keeps the table's format) and pyiceberg's own write path (which the registry
plugs into) all work in each format. Iceberg Java reading these tables is in
``tests/e2e/test_formats_readers.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.fileformat import FileFormatFactory
from pyiceberg.manifest import FileFormat
from pyiceberg.types import StringType

from icesql.engine.commit.snapshot import CommitRequest, commit
from icesql.engine.iceberg import formats
from icesql.engine.iceberg.table_files import live_files
from icesql.engine.iceberg.tables import ensure_table, key_field_ids
from icesql.engine.iceberg.writer import DataFileWriter, WriteSpec
from icesql.engine.maintenance.compact import CompactMode, compact_table
from icesql.engine.select.tables import read_rows
from icesql.plan import DATA_FILE_FORMATS, SinkMode
from tests.engine.test_schema import ALL_TYPES, f, struct
from tests.engine.test_writer import PART_SCHEMA, PARTITIONS, all_types_batch, part_batch, plan

FORMATS = ["orc", "avro"]


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return SqlCatalog("test", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")


def _rows(table: Any) -> list[dict[str, Any]]:
    rows = read_rows(table, table.current_snapshot()).to_pylist()
    return sorted(rows, key=repr)


def _write(catalog: SqlCatalog, name: str, schema: Any, fmt: str, batches: list[Any], **plan_kw: Any) -> Any:
    table = ensure_table(catalog, f"ns.{name}", schema, plan(name, **plan_kw))
    files = []
    spec = WriteSpec.from_table(table, file_format=fmt)
    assert spec.file_format == fmt
    with DataFileWriter(spec) as w:
        for b in batches:
            w.write(b)
    files = w.close()
    commit(table, CommitRequest(files, [], "sink", 1, 0))
    return catalog.load_table(f"ns.{name}"), files


def test_the_registry_names_three_formats_and_plugs_into_pyiceberg() -> None:
    assert formats.names() == ["avro", "orc", "parquet"] == sorted(DATA_FILE_FORMATS)  # the analyzer's list
    assert formats.get("ORC").file_format is FileFormat.ORC
    assert formats.get(FileFormat.AVRO).name == "avro"
    assert formats.get(None).name == "parquet"
    assert formats.table_format({"write.format.default": "orc"}) == "orc"
    assert formats.of_path("s3://b/t/data/x.avro").name == "avro"
    for ff in (FileFormat.PARQUET, FileFormat.ORC, FileFormat.AVRO):
        assert ff in FileFormatFactory.available_formats()
    with pytest.raises(Exception, match="unknown data file format 'csv'"):
        formats.get("csv")


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_type_reads_back_as_the_parquet_table_does(catalog: SqlCatalog, fmt: str) -> None:
    ref, ref_files = _write(catalog, "ref", ALL_TYPES, "parquet", [all_types_batch()], key=("id",))
    table, files = _write(catalog, "t", ALL_TYPES, fmt, [all_types_batch()], key=("id",))
    assert [x.file_format for x in files] == [fmt.upper()]
    assert files[0].file_path.endswith("." + fmt)
    (entry,) = live_files(table, table.current_snapshot())[0]
    assert entry.file_format is FileFormat(fmt.upper())
    assert _rows(table) == _rows(ref)
    # the manifests carry what they carry for the Parquet file
    got, want = files[0], ref_files[0]
    top = {fld.field_id for fld in table.schema().fields if fld.field_type.is_primitive}
    assert got.record_count == want.record_count == 3
    for fid in top:
        assert got.value_counts.get(fid) == want.value_counts.get(fid), fid
        assert got.null_value_counts.get(fid) == want.null_value_counts.get(fid), fid
        assert got.lower_bounds.get(fid) == want.lower_bounds.get(fid), fid
        assert got.upper_bounds.get(fid) == want.upper_bounds.get(fid), fid
    # the float columns hold no NaN (Parquet's footer keeps no NaN counts to compare with)
    floats = {fld.field_id for fld in table.schema().fields if str(fld.field_type) in ("float", "double")}
    assert floats and {fid: got.nan_value_counts.get(fid) for fid in floats} == dict.fromkeys(floats, 0)


@pytest.mark.parametrize("fmt", FORMATS)
def test_nan_counts_and_bounds_leave_nan_out(catalog: SqlCatalog, fmt: str) -> None:
    """NaN is counted apart and kept out of the bounds, as Iceberg's metrics require."""
    import struct as st

    table = ensure_table(catalog, "ns.nan", struct(f("id", "long"), f("x", "double")), plan("nan"))
    with DataFileWriter(WriteSpec.from_table(table, file_format=fmt)) as w:
        w.write(pa.record_batch({"id": pa.array([1, 2, 3, 4], pa.int64()), "x": [float("nan"), -2.5, None, 7.0]}))
    (x,) = w.close()
    fid = table.schema().find_field("x").field_id
    assert (x.value_counts[fid], x.null_value_counts[fid], x.nan_value_counts[fid]) == (4, 1, 1)
    assert st.unpack("<d", x.lower_bounds[fid])[0] == -2.5 and st.unpack("<d", x.upper_bounds[fid])[0] == 7.0


def test_avro_defines_a_type_used_twice_once(catalog: SqlCatalog) -> None:
    """Two uuid and two decimal(10, 2) columns: pyiceberg's Avro schema defines uuid_fixed and
    decimal_10_2 at each use, which Avro's parsers refuse; the file names the second ones apart
    (a reference by name would be valid Avro too, but pyiceberg's reader of the schema cannot
    resolve one)."""
    import uuid
    from decimal import Decimal

    import fastavro
    from pyiceberg.schema import Schema
    from pyiceberg.types import DecimalType, NestedField, UUIDType

    from icesql.engine.iceberg.schema import arrow_schema

    schema = Schema(
        NestedField(1, "u1", UUIDType()), NestedField(2, "u2", UUIDType()),
        NestedField(3, "d1", DecimalType(10, 2)), NestedField(4, "d2", DecimalType(10, 2)),
    )
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.twice", schema=schema, properties={"write.format.default": "avro"})
    rows = [{"u1": uuid.UUID(int=1).bytes, "u2": uuid.UUID(int=2).bytes, "d1": Decimal("1.50"), "d2": Decimal("-2.25")}]
    with DataFileWriter(WriteSpec.from_table(table)) as w:
        w.write(pa.Table.from_pylist(rows, schema=arrow_schema(table.schema())))
    (x,) = w.close()
    with open(x.file_path.removeprefix("file://"), "rb") as fh:
        fields = fastavro.reader(fh).writer_schema["fields"]  # type: ignore[index]
    names = [fld["type"][1]["name"] for fld in fields]
    assert names == ["uuid_fixed", "uuid_fixed_2", "decimal_10_2", "decimal_10_2_2"]
    commit(table, CommitRequest([x], [], "sink", 1, 0))
    (got,) = _rows(catalog.load_table("ns.twice"))
    assert (got["u2"], got["d2"]) == (uuid.UUID(int=2), Decimal("-2.25"))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("part,column", PARTITIONS, ids=[p.describe() for p, _ in PARTITIONS])
def test_partitioned_files_hold_their_partition(catalog: SqlCatalog, part: Any, column: str, fmt: str) -> None:
    from icesql.engine.iceberg.writer import _internal

    batch = part_batch(300)
    table, files = _write(catalog, "p", PART_SCHEMA, fmt, [batch.slice(0, 120), batch.slice(120)], partition_by=(part,))
    pfield = table.spec().fields[0]
    fn = pfield.transform.transform(table.schema().find_field(pfield.source_id).field_type)
    for x in files:
        assert x.file_path.endswith("." + fmt)
        values = formats.read_file(table.io, x.file_path, [column]).column(0).to_pylist()
        assert {fn(_internal(v)) if v is not None else fn(None) for v in values} == {x.partition[0]}
    assert sum(x.record_count for x in files) == 300
    assert len(_rows(table)) == 300


@pytest.mark.parametrize("fmt", FORMATS)
def test_rollover_at_max_file_size(catalog: SqlCatalog, fmt: str) -> None:
    table = ensure_table(catalog, "ns.big", struct(f("id", "long"), f("blob", "binary")), plan("big"))
    spec = WriteSpec.from_table(table, max_file_size=1024 * 1024, file_format=fmt)
    n = 6000
    batch = pa.record_batch({"id": pa.array(range(n), pa.int64()), "blob": [os.urandom(1000) for _ in range(n)]})
    for pieces in (1, 12):  # one large batch, then many small ones
        w = DataFileWriter(spec)
        for i in range(pieces):
            w.write(batch.slice(i * n // pieces, n // pieces))
        files = w.close()
        sizes = [x.file_size_in_bytes for x in files]
        assert len(files) >= 5 and max(sizes) <= 1.15 * 1024 * 1024, sizes
        assert sum(x.record_count for x in files) == n
        for x in files:
            assert os.path.getsize(x.file_path.removeprefix("file://")) == x.file_size_in_bytes


@pytest.mark.parametrize("fmt", FORMATS)
def test_delete_files_in_the_format_apply(catalog: SqlCatalog, fmt: str) -> None:
    schema = struct(f("id", "long"), f("v", "string"))
    p = plan("u", key=("id",), mode=SinkMode.UPSERT)
    table = ensure_table(catalog, "ns.u", schema, p)
    spec = WriteSpec.from_table(table, file_format=fmt)
    rows = pa.record_batch({"id": pa.array(range(10), pa.int64()), "v": [f"v{i}" for i in range(10)]})
    with DataFileWriter(spec) as w:
        w.write(rows)
    data = w.close()
    commit(table, CommitRequest(data, [], "sink", 1, 0))
    table = catalog.load_table("ns.u")
    path = data[0].file_path
    with DataFileWriter(spec, "position_deletes") as pw:
        pw.write(pa.table({"file_path": [path, path], "pos": pa.array([1, 3], pa.int64())}))
    pos = pw.close()
    with DataFileWriter(spec, "equality_deletes", key_field_ids(table.schema(), ("id",))) as ew:
        ew.write(pa.record_batch({"id": pa.array([5, 7], pa.int64())}))
    eq = ew.close()
    assert {x.file_format for x in pos + eq} == {fmt.upper()}
    assert all(x.file_path.endswith("." + fmt) for x in pos + eq)
    commit(table, CommitRequest([], pos + eq, "sink", 1, 1))
    table = catalog.load_table("ns.u")
    assert [r["id"] for r in _rows(table)] == [0, 2, 4, 6, 8, 9]
    # compaction applies them and keeps the table's format (this table's is Parquet: a sink
    # that says FORMAT writes its files in it; compaction writes the table's write.format.default)
    table.transaction().set_properties({"write.format.default": fmt}).commit_transaction()
    table = catalog.load_table("ns.u")
    result = compact_table(table, mode=CompactMode.FULL)
    assert result.snapshot_id is not None
    table = catalog.load_table("ns.u")
    data_now, deletes_now = live_files(table, table.current_snapshot())
    assert not deletes_now and {d.file_format for d in data_now} == {FileFormat(fmt.upper())}
    assert [r["id"] for r in _rows(table)] == [0, 2, 4, 6, 8, 9]


def test_compaction_of_a_mixed_table_rewrites_to_the_table_format(catalog: SqlCatalog) -> None:
    schema = struct(f("id", "long"), f("v", "string"))
    table = ensure_table(catalog, "ns.mixed", schema, plan("mixed"))
    for i, fmt in enumerate(["parquet", "orc", "avro"]):
        spec = WriteSpec.from_table(table, file_format=fmt)
        with DataFileWriter(spec) as w:
            w.write(pa.record_batch({"id": pa.array([i], pa.int64()), "v": [fmt]}))
        commit(table, CommitRequest(w.close(), [], "sink", 1, i))
        table = catalog.load_table("ns.mixed")
    assert {d.file_format for d in live_files(table, table.current_snapshot())[0]} == {
        FileFormat.PARQUET, FileFormat.ORC, FileFormat.AVRO
    }
    assert [r["v"] for r in _rows(table)] == ["parquet", "orc", "avro"]  # by id
    table.transaction().set_properties({"write.format.default": "orc"}).commit_transaction()
    compact_table(catalog.load_table("ns.mixed"), mode=CompactMode.FULL)
    table = catalog.load_table("ns.mixed")
    assert {d.file_format for d in live_files(table, table.current_snapshot())[0]} == {FileFormat.ORC}
    assert [r["v"] for r in _rows(table)] == ["parquet", "orc", "avro"]  # by id


@pytest.mark.parametrize("fmt", FORMATS)
def test_files_are_matched_by_field_id_after_a_rename_and_an_added_column(catalog: SqlCatalog, fmt: str) -> None:
    table, _ = _write(
        catalog, "ev", struct(f("id", "long"), f("v", "string")), fmt,
        [pa.record_batch({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"]})],
    )
    with table.update_schema() as u:
        u.rename_column("v", "value")
        u.add_column("extra", StringType())
    table = catalog.load_table("ns.ev")
    assert _rows(table) == [{"id": 1, "value": "a", "extra": None}, {"id": 2, "value": "b", "extra": None}]


@pytest.mark.parametrize("fmt", FORMATS)
def test_pyiceberg_append_writes_the_table_format_through_the_registry(catalog: SqlCatalog, fmt: str) -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    catalog.create_namespace("ns2")
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "v", StringType(), required=False))
    table = catalog.create_table("ns2.py", schema=schema, properties={"write.format.default": fmt})
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["x", None]}))
    table = catalog.load_table("ns2.py")
    (entry,) = live_files(table, table.current_snapshot())[0]
    assert entry.file_format is FileFormat(fmt.upper()) and entry.path.endswith("." + fmt)
    assert entry.data_file.value_counts and entry.data_file.null_value_counts
    assert _rows(table) == [{"id": 1, "v": "x"}, {"id": 2, "v": None}]


def test_show_sink_status_says_the_format_and_its_readers(tmp_path: Path) -> None:
    import icesql
    from icesql.plan import FORMAT_READERS

    s = icesql.Session(home=tmp_path / "home")
    try:
        s.execute(
            f"""
            CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{tmp_path / "wh"}');
            CREATE SOURCE src FROM FILES '{tmp_path / "in"}' (FORMAT = 'json', SCHEMA = 'id BIGINT');
            CREATE SINK a FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 'a') FORMAT AVRO;
            CREATE SINK o FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 'o') WITH (FORMAT = 'orc');
            CREATE SINK p FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 'p');
            """
        )
        (res,) = s.execute("SHOW SINK STATUS")
        rows = {r[res.columns.index("name")]: r for r in res.rows}
        fmt, readers = res.columns.index("file_format"), res.columns.index("readers")
        assert rows["a"][fmt] == "avro" and rows["a"][readers] == FORMAT_READERS["avro"]
        assert "not pyiceberg, DuckDB" in rows["a"][readers]
        assert rows["o"][fmt] == "orc" and "not DuckDB" in rows["o"][readers]
        assert rows["p"][fmt] == "-"  # not said: the table's write.format.default, known once it runs
    finally:
        s.close()


@pytest.mark.spark
def test_sinks_in_a_format_write_their_dead_letters_in_it_and_select_reads_both(tmp_path: Path) -> None:
    """A record of the wrong type moves the run to Spark (which finds the bad records): the
    target and the dead-letter table icesql creates are both in the sink's format, written by
    Spark's executors, and SELECT reads them."""
    import icesql

    src = tmp_path / "in"
    src.mkdir()
    (src / "a.json").write_text('{"id": 1, "v": "one"}\n{"id": "two", "v": "2"}\n{"id": 3, "v": "three"}\n')
    s = icesql.Session(home=tmp_path / "home")
    try:
        s.execute(
            f"""
            CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{tmp_path / "wh"}');
            CREATE SOURCE src FROM FILES '{src}' (FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING');
            """
            + "".join(
                f"""CREATE SINK k_{fmt} FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 't_{fmt}')
                  FORMAT {fmt.upper()} WITH (ON ERROR = 'dead-letter');"""
                for fmt in FORMATS
            )
        )
        s.run(once=True, sinks=[f"k_{fmt}" for fmt in FORMATS])
        for fmt in FORMATS:
            (good,) = s.execute(f"SELECT id, v FROM lake.ns.t_{fmt} ORDER BY id")
            assert [tuple(r) for r in good.rows] == [(1, "one"), (3, "three")]
            (bad,) = s.execute(f"SELECT raw FROM lake.ns.t_{fmt}_dead_letters")
            assert len(bad.rows) == 1 and '"two"' in str(bad.rows[0][0])
            for name in (f"t_{fmt}", f"t_{fmt}_dead_letters"):
                table = load_table_of(tmp_path / "wh", name)
                assert table.properties.get("write.format.default") == fmt
                data = live_files(table, table.current_snapshot())[0]
                assert data and {d.file_format for d in data} == {FileFormat(fmt.upper())}
    finally:
        s.close()


def load_table_of(warehouse: Path, name: str) -> Any:
    from tests.support.pipeline_helpers import load_table

    return load_table(warehouse.parent / "home", f"ns.{name}", warehouse=warehouse, catalog_name="lake")


@pytest.mark.parametrize("fmt", FORMATS)
def test_expiry_and_orphan_cleanup_keep_a_table_in_its_format_whole(catalog: SqlCatalog, fmt: str) -> None:
    """Maintenance steps other than compaction touch no data file's format: after compaction,
    snapshot expiry and orphan cleanup, the live files are all in the table's format and exist,
    the rows are as before, and a stray file of the format (a torn write's) is removed."""
    import time

    from icesql.engine.maintenance.expire import expire_snapshots
    from icesql.engine.maintenance.orphans import remove_orphan_files

    table = ensure_table(catalog, "ns.m", struct(f("id", "long"), f("v", "string")), plan("m"))
    table.transaction().set_properties({"write.format.default": fmt}).commit_transaction()
    table = catalog.load_table("ns.m")
    for i in range(4):
        with DataFileWriter(WriteSpec.from_table(table)) as w:
            w.write(pa.record_batch({"id": pa.array([i], pa.int64()), "v": [f"v{i}"]}))
        commit(table, CommitRequest(w.close(), [], "sink", 1, i))
        table = catalog.load_table("ns.m")
    rows = _rows(table)
    stray = f"{table.location()}/data/stray-torn-write.{fmt}"
    with table.io.new_output(stray).create() as out:
        out.write(b"torn")
    compact_table(table, mode=CompactMode.FULL)
    table = catalog.load_table("ns.m")
    expired = expire_snapshots(table, time.time() + 3600, 1)
    assert expired.expired
    orphans = remove_orphan_files(catalog.load_table("ns.m"), time.time() + 3600)
    assert stray in orphans.deleted
    table = catalog.load_table("ns.m")
    data = live_files(table, table.current_snapshot())[0]
    assert len(data) == 1 and data[0].file_format is FileFormat(fmt.upper())
    assert all(os.path.exists(d.path.removeprefix("file://")) for d in data)
    assert not os.path.exists(stray.removeprefix("file://"))
    assert _rows(table) == rows


def _iceberg_only_types() -> tuple[Any, list[dict[str, Any]]]:
    """A schema with the Iceberg types Spark has no type for (uuid, fixed, time), beside a
    decimal, both timestamps and a map with optional values, and rows for it."""
    import datetime as dt
    import uuid
    from decimal import Decimal

    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        DecimalType,
        DoubleType,
        FixedType,
        LongType,
        MapType,
        NestedField,
        TimestampType,
        TimestamptzType,
        TimeType,
        UUIDType,
    )

    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "u", UUIDType()),
        NestedField(3, "fx", FixedType(3)),
        NestedField(4, "t", TimeType()),
        NestedField(5, "d", DecimalType(10, 2)),
        NestedField(6, "ts", TimestampType()),
        NestedField(7, "tz", TimestamptzType()),
        NestedField(8, "m", MapType(9, StringType(), 10, DoubleType(), value_required=False)),
    )
    utc = dt.timezone.utc
    rows = [
        {"id": 1, "u": uuid.UUID(int=7).bytes, "fx": b"abc", "t": dt.time(1, 2, 3, 4), "d": Decimal("-1.25"),
         "ts": dt.datetime(1969, 12, 31, 23, 59, 59), "tz": dt.datetime(2024, 1, 1, tzinfo=utc),
         "m": [("a", 1.0), ("b", None)]},
        {"id": 2, "u": None, "fx": None, "t": None, "d": None, "ts": None, "tz": None, "m": None},
    ]
    return schema, rows


@pytest.mark.parametrize("fmt", FORMATS)
def test_uuid_fixed_and_time_columns_round_trip(catalog: SqlCatalog, fmt: str) -> None:
    """Types Spark has no type for, as pyiceberg writes them: ORC stores them as Iceberg Java does
    (BINARY / LONG with Iceberg's type attributes), Avro as the spec's fixed and time-micros."""
    from icesql.engine.iceberg.schema import arrow_schema

    schema, rows = _iceberg_only_types()
    catalog.create_namespace("ns")
    out = {}
    for f_ in ("parquet", fmt):
        table = catalog.create_table(f"ns.t_{f_}", schema=schema, properties={"write.format.default": f_})
        data = pa.Table.from_pylist(rows, schema=arrow_schema(table.schema()))
        with DataFileWriter(WriteSpec.from_table(table)) as w:
            w.write(data)
        files = w.close()
        assert [x.file_format for x in files] == [f_.upper()]
        commit(table, CommitRequest(files, [], "sink", 1, 0))
        out[f_] = _rows(catalog.load_table(f"ns.t_{f_}"))
    assert out[fmt] == out["parquet"]
    assert out[fmt][0]["u"] is not None and out[fmt][0]["t"] is not None


@pytest.mark.parametrize(
    "fmt,prop,codec,check",
    [
        ("orc", "write.orc.compression-codec", "snappy", lambda f: f.compression == "SNAPPY"),
        ("orc", "write.orc.compression-codec", "none", lambda f: f.compression == "UNCOMPRESSED"),
        ("avro", "write.avro.compression-codec", "gzip", lambda f: f == b"deflate"),
        ("avro", "write.avro.compression-codec", "snappy", lambda f: f == b"snappy"),
        ("avro", "write.avro.compression-codec", "uncompressed", lambda f: f == b"null"),
    ],
)
def test_the_table_compression_property_chooses_the_codec(
    catalog: SqlCatalog, fmt: str, prop: str, codec: str, check: Any
) -> None:
    import pyarrow.orc as orc

    table = ensure_table(catalog, "ns.c", struct(f("id", "long"), f("v", "string")), plan("c"))
    table.transaction().set_properties({"write.format.default": fmt, prop: codec}).commit_transaction()
    table = catalog.load_table("ns.c")
    with DataFileWriter(WriteSpec.from_table(table)) as w:
        w.write(pa.record_batch({"id": pa.array(range(100), pa.int64()), "v": [str(i) for i in range(100)]}))
    (x,) = w.close()
    path = x.file_path.removeprefix("file://")
    if fmt == "orc":
        assert check(orc.ORCFile(path))
    else:
        import fastavro

        with open(path, "rb") as fh:
            assert check(fastavro.reader(fh).metadata["avro.codec"].encode())
    assert formats.read_file(table.io, x.file_path).num_rows == 100


@pytest.mark.java
def test_iceberg_java_reads_uuid_and_fixed_columns_in_orc_and_avro(catalog: SqlCatalog) -> None:
    """Iceberg Java reads the uuid and fixed columns (BINARY with ``iceberg.binary-type`` in ORC,
    fixed in Avro) as it reads Parquet's; the time column is left out, as Spark has no time type."""
    from pyiceberg.schema import Schema

    from icesql.engine.iceberg.schema import arrow_schema
    from tests.support.readers import read_java

    full, rows = _iceberg_only_types()
    schema = Schema(*[fld for fld in full.fields if fld.name != "t"])
    rows = [{k: v for k, v in r.items() if k != "t"} for r in rows]
    catalog.create_namespace("ns")
    locations = []
    for fmt in ("parquet", *FORMATS):
        table = catalog.create_table(f"ns.j_{fmt}", schema=schema, properties={"write.format.default": fmt})
        with DataFileWriter(WriteSpec.from_table(table)) as w:
            w.write(pa.Table.from_pylist(rows, schema=arrow_schema(table.schema())))
        commit(table, CommitRequest(w.close(), [], "sink", 1, 0))
        locations.append(catalog.load_table(f"ns.j_{fmt}").metadata_location)
    parquet, *others = [read_java(loc) for loc in locations]
    assert parquet["rows"] == 2
    for fmt, got in zip(FORMATS, others, strict=True):
        assert got["digest"] == parquet["digest"], (fmt, got["all"], parquet["all"])
