"""Executor-side file writing: types, partitions, rollover, delete files, picklability."""

from __future__ import annotations

import datetime as dt
import os
import pickle
import random
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from icesql.engine.commit.snapshot import CommitRequest, commit
from icesql.engine.iceberg.tables import ensure_table, explain_table, key_field_ids
from icesql.engine.iceberg.writer import DataFileWriter, WriteSpec, WrittenFile
from icesql.errors import ExecutionError
from icesql.plan import PartitionFieldPlan, SinkMode, SinkPlan, Transform
from tests.engine.test_schema import ALL_TYPES, f, struct
from tests.support.readers import read_datafusion, read_duckdb


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return SqlCatalog("test", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")


def plan(table: str, **kw: object) -> SinkPlan:
    kw.setdefault("namespace", ("ns",))
    return SinkPlan(name="s", relation="r", catalog_connection="c", table=table, **kw)  # type: ignore[arg-type]


UTC = dt.timezone.utc


def all_types_batch() -> pa.RecordBatch:
    """What Spark's mapInArrow hands over for ALL_TYPES (Spark's own Arrow types)."""
    return pa.record_batch(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "b": [True, False, None],
            "t8": pa.array([1, -2, None], pa.int8()),
            "t16": pa.array([300, None, -300], pa.int16()),
            "i": pa.array([7, 8, None], pa.int32()),
            "fl": pa.array([1.5, None, -0.25], pa.float32()),
            "db": [2.5, float("inf"), None],
            "dec": pa.array([Decimal("123456789.123"), Decimal("-0.001"), None], pa.decimal128(12, 3)),
            "s": ["héllo", "", None],
            "vc": ["a", None, "c"],
            "bin": pa.array([b"\x00\x01", None, b""], pa.binary()),
            "d": pa.array([dt.date(2024, 2, 29), dt.date(1969, 12, 31), None], pa.date32()),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1, 23, 59, 59, 123456), None, dt.datetime(1960, 1, 1)],
                pa.timestamp("us", tz="UTC"),
            ),
            "ntz": pa.array(
                [dt.datetime(2024, 1, 1, 1, 2, 3), None, dt.datetime(2000, 1, 1)], pa.timestamp("us")
            ),
            "st": pa.array(
                [{"a": 1, "inner": {"x": "p"}}, None, {"a": None, "inner": None}],
                pa.struct([("a", pa.int32()), ("inner", pa.struct([("x", pa.string())]))]),
            ),
            "arr": pa.array([[1, None, 3], None, []], pa.list_(pa.int64())),
            "arr_st": pa.array([[{"q": "x"}], [], None], pa.list_(pa.struct([("q", pa.string())]))),
            "m": pa.array([[("k", 1.0), ("j", None)], None, []], pa.map_(pa.string(), pa.float64())),
        }
    )


def expected_all_types() -> list[tuple]:
    ts = lambda *a: dt.datetime(*a)  # noqa: E731  (readers normalise to naive UTC)
    return [
        (
            1,
            True,
            1,
            300,
            7,
            1.5,
            2.5,
            Decimal("123456789.123"),
            "héllo",
            "a",
            b"\x00\x01",
            dt.date(2024, 2, 29),
            ts(2024, 1, 1, 23, 59, 59, 123456),
            ts(2024, 1, 1, 1, 2, 3),
            (1, ("p",)),
            (1, None, 3),
            (("x",),),
            (("j", None), ("k", 1.0)),
        ),
        (
            2,
            False,
            -2,
            None,
            8,
            None,
            float("inf"),
            Decimal("-0.001"),
            "",
            None,
            None,
            dt.date(1969, 12, 31),
            None,
            None,
            None,
            None,
            (),
            None,
        ),
        (
            3,
            None,
            None,
            -300,
            None,
            -0.25,
            None,
            None,
            None,
            "c",
            b"",
            None,
            ts(1960, 1, 1),
            ts(2000, 1, 1),
            (None, None),
            (),
            None,
            (),
        ),
    ]


def test_every_type_round_trips(catalog: SqlCatalog) -> None:
    table = ensure_table(catalog, "ns.types", ALL_TYPES, plan("types", key=("id",)))
    spec = WriteSpec.from_table(table)
    with DataFileWriter(spec) as w:
        w.write(all_types_batch())
    files = w.close()
    assert len(files) == 1 and files[0].record_count == 3
    df = files[0]
    assert df.lower_bounds and df.upper_bounds and df.value_counts and df.null_value_counts
    # field ids in the Parquet file
    pf = pq.ParquetFile(df.file_path.removeprefix("file://"))
    assert pf.schema_arrow.field("id").metadata[b"PARQUET:field_id"] == b"1"
    commit(table, CommitRequest(files, [], "sink", 1, 0))
    table = catalog.load_table("ns.types")
    expected = sorted(expected_all_types(), key=repr)
    assert read_duckdb(table.metadata_location) == expected
    assert read_datafusion(table.metadata_location) == expected
    # pyiceberg (no deletes here) agrees on the count
    assert table.scan().to_arrow().num_rows == 3


PARTITIONS = [
    (PartitionFieldPlan("region", Transform.IDENTITY, None, "region"), "region"),
    (PartitionFieldPlan("id", Transform.BUCKET, 4, "id_bucket_4"), "id"),
    (PartitionFieldPlan("s", Transform.TRUNCATE, 2, "s_trunc_2"), "s"),
    (PartitionFieldPlan("n", Transform.TRUNCATE, 10, "n_trunc_10"), "n"),
    (PartitionFieldPlan("dec", Transform.TRUNCATE, 50, "dec_trunc"), "dec"),
    (PartitionFieldPlan("ts", Transform.YEAR, None, "ts_year"), "ts"),
    (PartitionFieldPlan("ts", Transform.MONTH, None, "ts_month"), "ts"),
    (PartitionFieldPlan("ts", Transform.DAY, None, "ts_day"), "ts"),
    (PartitionFieldPlan("ts", Transform.HOUR, None, "ts_hour"), "ts"),
    (PartitionFieldPlan("d", Transform.DAY, None, "d_day"), "d"),
    (PartitionFieldPlan("ntz", Transform.MONTH, None, "ntz_month"), "ntz"),
    (PartitionFieldPlan("region", Transform.VOID, None, "region_null"), "region"),
]

PART_SCHEMA = struct(
    f("id", "long"),
    f("region", "string"),
    f("s", "string"),
    f("n", "integer"),
    f("dec", "decimal(9,2)"),
    f("ts", "timestamp"),
    f("d", "date"),
    f("ntz", "timestamp_ntz"),
)


def part_batch(n: int) -> pa.RecordBatch:
    rnd = random.Random(7)
    base = dt.datetime(2022, 12, 30, tzinfo=UTC)
    return pa.record_batch(
        {
            "id": pa.array(range(n), pa.int64()),
            "region": [rnd.choice(["eu", "us", "ap", None]) for _ in range(n)],
            "s": [rnd.choice(["alpha", "beta", "al", "b", None]) for _ in range(n)],
            "n": pa.array([rnd.randint(-30, 30) for _ in range(n)], pa.int32()),
            "dec": pa.array([Decimal(rnd.randint(-9999, 9999)) / 100 for _ in range(n)], pa.decimal128(9, 2)),
            "ts": pa.array(
                [base + dt.timedelta(hours=rnd.randint(0, 24 * 70)) for _ in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
            "d": pa.array(
                [dt.date(2023, 1, 1) + dt.timedelta(days=rnd.randint(-3, 3)) for _ in range(n)], pa.date32()
            ),
            "ntz": pa.array([dt.datetime(2023, rnd.randint(1, 12), 1) for _ in range(n)], pa.timestamp("us")),
        }
    )


@pytest.mark.parametrize("part,column", PARTITIONS, ids=[p.describe() for p, _ in PARTITIONS])
def test_partitioned_writes_land_in_their_partitions(
    catalog: SqlCatalog, part: PartitionFieldPlan, column: str
) -> None:
    name = "p_" + part.name
    table = ensure_table(catalog, f"ns.{name}", PART_SCHEMA, plan(name, partition_by=(part,)))
    spec_obj = table.spec()
    assert [pf.name for pf in spec_obj.fields] == [part.name]
    pfield = spec_obj.fields[0]
    source_type = table.schema().find_field(pfield.source_id).field_type
    fn = pfield.transform.transform(source_type)
    batch = part_batch(400)
    w = DataFileWriter(WriteSpec.from_table(table))
    w.write(batch.slice(0, 150))
    w.write(batch.slice(150))
    files = w.close()
    assert sum(x.record_count for x in files) == 400
    from icesql.engine.iceberg.writer import _internal

    for x in files:
        values = pq.read_table(x.file_path.removeprefix("file://"), columns=[column]).column(0).to_pylist()
        got = {fn(_internal(v)) if v is not None else fn(None) for v in values}
        assert got == {x.partition[0]}, (x.file_path, got, x.partition)
    if part.transform is not Transform.VOID:
        assert len({x.partition for x in files}) > 1
    commit(table, CommitRequest(files, [], "sink", 1, 0))
    table = catalog.load_table(f"ns.{name}")
    assert table.scan().to_arrow().num_rows == 400
    assert len(read_duckdb(table.metadata_location)) == 400


def test_rollover_at_max_file_size(catalog: SqlCatalog) -> None:
    table = ensure_table(catalog, "ns.big", struct(f("id", "long"), f("blob", "binary")), plan("big"))
    spec = WriteSpec.from_table(table, max_file_size=1024 * 1024)
    n = 6000
    batch = pa.record_batch(
        {"id": pa.array(range(n), pa.int64()), "blob": [os.urandom(1000) for _ in range(n)]}
    )
    w = DataFileWriter(spec)
    w.write(batch)  # one large batch (~6 MB, incompressible)
    files = w.close()
    sizes = [x.file_size_in_bytes for x in files]
    assert len(files) >= 5, sizes
    assert max(sizes) <= 1.1 * 1024 * 1024, sizes
    assert sum(x.record_count for x in files) == n
    for x in files:
        assert os.path.getsize(x.file_path.removeprefix("file://")) == x.file_size_in_bytes
    # many small batches roll over too
    w = DataFileWriter(spec)
    for i in range(0, n, 500):
        w.write(batch.slice(i, 500))
    small = w.close()
    assert len(small) >= 5 and max(x.file_size_in_bytes for x in small) <= 1.1 * 1024 * 1024


def test_equality_delete_files_carry_keys_and_partition(catalog: SqlCatalog) -> None:
    p = plan(
        "del",
        key=("region", "id"),
        mode=SinkMode.UPSERT,
        partition_by=(PartitionFieldPlan("region", Transform.IDENTITY, None, "region"),),
    )
    table = ensure_table(
        catalog, "ns.del", struct(f("id", "long"), f("region", "string"), f("v", "string")), p
    )
    eq = key_field_ids(table.schema(), p.key)
    w = DataFileWriter(WriteSpec.from_table(table), "equality_deletes", eq)
    w.write(
        pa.record_batch(
            {"v": ["x", "y", "z"], "id": pa.array([1, 2, 3], pa.int64()), "region": ["eu", "us", "eu"]}
        )
    )
    files = w.close()
    assert sorted(x.partition for x in files) == [("eu",), ("us",)]
    for x in files:
        assert x.content == 2 and x.equality_ids == tuple(eq)
        cols = pq.ParquetFile(x.file_path.removeprefix("file://")).schema_arrow.names
        assert sorted(cols) == ["id", "region"]
    # a partition column outside the equality columns cannot be written
    with pytest.raises(ExecutionError, match="partition column 'region'"):
        DataFileWriter(WriteSpec.from_table(table), "equality_deletes", [eq[1]])


def test_spec_and_files_pickle_without_leaking_credentials(catalog: SqlCatalog) -> None:
    table = ensure_table(catalog, "ns.pk", struct(f("id", "long")), plan("pk"))
    spec = WriteSpec.from_table(table, io_properties={"s3.secret-access-key": "SUPERSECRET"})
    assert "SUPERSECRET" not in repr(spec)
    spec2 = pickle.loads(pickle.dumps(spec))
    assert spec2 == spec
    w = DataFileWriter(spec2)
    w.write(pa.record_batch({"id": pa.array([1, 2], pa.int64())}))
    (wf,) = w.close()
    wf2 = pickle.loads(pickle.dumps(wf))
    assert wf2 == wf == WrittenFile.loads(wf.dumps())
    df = wf2.to_data_file()
    assert df.file_path == wf.file_path and df.record_count == 2
    assert WrittenFile.from_data_file(df) == wf


def test_explain_touches_nothing(tmp_path: Path) -> None:
    p = plan(
        "e",
        key=("id",),
        mode=SinkMode.UPSERT,
        partition_by=(PartitionFieldPlan("id", Transform.BUCKET, 8, "id_bucket_8"),),
        properties=(("write.parquet.compression-codec", "zstd"),),
    )
    out = explain_table(struct(f("id", "long"), f("v", "string")), p)
    assert out["identifier_fields"] == ["id"]
    assert out["partition_spec"] == [{"name": "id_bucket_8", "transform": "bucket[8]", "source": "id"}]
    assert out["properties"]["write.parquet.compression-codec"] == "zstd"
    assert out["columns"][0] == {"id": 1, "name": "id", "type": "long", "required": True}
    assert list(tmp_path.iterdir()) == []


def test_existing_incompatible_table_is_refused(catalog: SqlCatalog) -> None:
    ensure_table(
        catalog, "a.b.c.t", struct(f("id", "long"), f("v", "string")), plan("t", namespace=("a", "b", "c"))
    )
    assert ("a", "b") in catalog.list_namespaces("a") or catalog.namespace_exists(("a", "b"))
    # compatible (subset, promotable) is accepted
    ensure_table(catalog, "a.b.c.t", struct(f("id", "integer")), plan("t"))
    with pytest.raises(ExecutionError) as err:
        ensure_table(catalog, "a.b.c.t", struct(f("id", "string"), f("w", "long")), plan("t"))
    # a changed type is refused, naming both types (a new column alone would be added)
    assert "'id' is string in the source but long in the table" in err.value.message
    import dataclasses

    off = dataclasses.replace(plan("t"), schema_evolution=False)
    with pytest.raises(ExecutionError) as err:
        ensure_table(catalog, "a.b.c.t", struct(f("id", "long"), f("w", "long")), off)
    assert "'w'" in err.value.message  # SCHEMA EVOLUTION = 'off': the new column is refused
    ensure_table(catalog, "a.b.c.t", struct(f("id", "long"), f("w", "long")), plan("t"))
    assert [x.name for x in catalog.load_table("a.b.c.t").schema().fields] == ["id", "v", "w"]


def _write_in_child(spec: WriteSpec, ids: list[int]) -> list[WrittenFile]:
    from icesql.engine.iceberg.writer import write_batches

    return write_batches(spec, [pa.record_batch({"id": pa.array(ids, pa.int64())})])


def test_a_created_table_bounds_its_metadata_files_unless_the_sink_says_otherwise(catalog: SqlCatalog) -> None:
    """A table icesql creates keeps a log of 50 metadata files and deletes those that drop out
    of it at each commit; a sink's PROPERTIES win; an existing table's properties are its own."""
    schema = struct(f("id", "long"))
    created = ensure_table(catalog, None, schema, plan("t"))
    assert created.properties["write.metadata.previous-versions-max"] == "50"
    assert created.properties["write.metadata.delete-after-commit.enabled"] == "true"
    assert created.properties.items() <= explain_table(schema, plan("t"))["properties"].items()

    own = (
        ("write.metadata.previous-versions-max", "7"),
        ("write.metadata.delete-after-commit.enabled", "false"),
    )
    user = ensure_table(catalog, None, schema, plan("u", properties=own))
    assert user.properties["write.metadata.previous-versions-max"] == "7"
    assert user.properties["write.metadata.delete-after-commit.enabled"] == "false"

    foreign = catalog.create_table(("ns", "v"), schema=created.schema())
    assert ensure_table(catalog, None, schema, plan("v")).properties == foreign.properties
    assert "write.metadata.delete-after-commit.enabled" not in foreign.properties


def test_files_written_in_another_process_commit(catalog: SqlCatalog) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    table = ensure_table(catalog, "ns.proc", struct(f("id", "long")), plan("proc"))
    spec = WriteSpec.from_table(table)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        files = pool.submit(_write_in_child, spec, [1, 2, 3]).result()
    commit(table, CommitRequest(files, [], "sink", 1, 0))
    assert read_duckdb(catalog.load_table("ns.proc").metadata_location) == [(1,), (2,), (3,)]


def test_abort_removes_files_and_dedupe_last(catalog: SqlCatalog) -> None:
    from icesql.engine.iceberg.writer import dedupe_last

    table = ensure_table(catalog, "ns.ab", struct(f("id", "long"), f("v", "string")), plan("ab"))
    w = DataFileWriter(WriteSpec.from_table(table, max_file_size=2048), row_group_bytes=1024)
    w.write(pa.record_batch({"id": pa.array(range(2000), pa.int64()), "v": ["x" * 20] * 2000}))
    data_dir = Path(table.location().removeprefix("file://")) / "data"
    assert any(data_dir.iterdir())
    w.abort()
    assert not any(data_dir.iterdir())
    t = pa.table({"id": [1, 2, 1, 3, 2], "v": ["a", "b", "c", "d", "e"]})
    assert dedupe_last(t, ["id"]).to_pylist() == [
        {"id": 1, "v": "c"},
        {"id": 3, "v": "d"},
        {"id": 2, "v": "e"},
    ]


def test_rows_buffered_into_big_row_groups_within_the_writer_budget(catalog: SqlCatalog) -> None:
    """A file's rows are buffered up to ``row_group_bytes`` and written as one row group; across
    open files the writer holds at most ``buffer_bytes`` unwritten (the fullest file is flushed
    first), so many partitions cannot make a task hold a row group's worth per partition."""
    by_region = PARTITIONS[0][0]  # identity(region)
    table = ensure_table(catalog, "ns.rg", PART_SCHEMA, plan("rg", partition_by=(by_region,)))
    batch = part_batch(4000)
    size = batch.nbytes
    # one row group per file when everything fits the buffers
    w = DataFileWriter(WriteSpec.from_table(table), row_group_bytes=10 * size, buffer_bytes=10 * size)
    for i in range(0, 4000, 100):
        w.write(batch.slice(i, 100))
    files = w.close()
    assert len(files) == 4 and sum(x.record_count for x in files) == 4000  # eu, us, ap, null
    assert all(pq.ParquetFile(x.file_path.removeprefix("file://")).num_row_groups == 1 for x in files)
    # a budget of a quarter of the rows: never more than that left unwritten after a write
    w = DataFileWriter(WriteSpec.from_table(table), row_group_bytes=10 * size, buffer_bytes=size // 4)
    for i in range(0, 4000, 100):
        w.write(batch.slice(i, 100))
        assert sum(f.pending_bytes for f in w._open.values()) <= size // 4
    files = w.close()
    assert sum(x.record_count for x in files) == 4000
    assert sum(pq.ParquetFile(x.file_path.removeprefix("file://")).num_row_groups for x in files) > 4
    commit(table, CommitRequest(files, [], "sink", 1, 0))
    assert len(read_duckdb(catalog.load_table("ns.rg").metadata_location)) == 4000
