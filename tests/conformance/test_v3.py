"""Iceberg format v3 on both executors (issue 55): the same scenarios as ``test_sinks`` into a
``FORMAT VERSION = 3`` table, compared whole between the executors, read exactly by Iceberg Java
and DuckDB, with row lineage and deletion vectors checked in the metadata as the spec states
them:

* the table's ``next-row-id`` is the sum of the snapshots' ``added-rows``; each snapshot's
  ``first-row-id`` is the previous ``next-row-id``; every data manifest of the current snapshot
  has a ``first_row_id`` and their ranges (first_row_id .. + added + existing rows) do not overlap;
* upserts leave no position delete file: one deletion vector (a ``PUFFIN`` entry with its
  ``referenced_data_file``, ``content_offset`` and ``content_size_in_bytes``) per data file at
  most, each naming a live data file, its ``record_count`` the number of positions it deletes.

DuckDB (1.5), DataFusion (iceberg-rust in pyiceberg-core 0.11; 0.10 opened the Puffin file as a
Parquet delete file and failed), pyiceberg 0.12 and Iceberg Java read deletion vectors, and must
read them exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.test_sinks import CDC_SCHEMA, SCHEMA, SINK, _changes, _replay, _rows, _stamp
from tests.support.conformance import Twins, assert_same_files, assert_same_tables
from tests.support.pipeline_helpers import dbz, write_json_lines
from tests.support.readers import canonical_digest, read_datafusion, read_duckdb, read_java

pytestmark = pytest.mark.spark


def _metadata(table: Any) -> dict[str, Any]:
    return json.loads(table.io.new_input(table.metadata_location).open().read())


def check_row_lineage(table: Any) -> None:
    """The spec's row lineage, as the module docstring says."""
    import fastavro

    meta = _metadata(table)
    assert meta["format-version"] == 3
    next_id = 0
    for s in meta["snapshots"]:
        if "first-row-id" not in s:  # a snapshot from before the table's upgrade to v3
            assert next_id == 0, f"a snapshot without row lineage after one with: {s}"
            continue
        assert s["first-row-id"] == next_id, (s["snapshot-id"], s["first-row-id"], next_id)
        next_id += s["added-rows"]
    assert meta["next-row-id"] == next_id
    current = table.current_snapshot()
    with table.io.new_input(current.manifest_list).open() as f:
        reader = fastavro.reader(f)
        assert reader.metadata["format-version"] == "3"
        manifests = list(reader)
    ranges = sorted(
        (m["first_row_id"], m["first_row_id"] + m["added_rows_count"] + m["existing_rows_count"])
        for m in manifests
        if m["content"] == 0
    )
    assert all(r[0] is not None for r in ranges)
    assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:], strict=False)), ranges
    assert ranges[-1][1] <= meta["next-row-id"]


def deletion_vectors(table: Any) -> list[Any]:
    """The live deletion vectors of ``table``, checked as the module docstring says."""
    from icesql.engine.base.pyiceberg_v3 import content_range, referenced_data_file
    from icesql.engine.iceberg.deletes import file_positions
    from icesql.engine.iceberg.table_files import live_files

    data, deletes = live_files(table, table.current_snapshot())
    assert all(d.content == 1 for d in deletes), "equality deletes in a position-delete upsert"
    assert all(str(d.file_format.value) == "PUFFIN" for d in deletes), "a position delete file in a v3 table"
    refs = [referenced_data_file(d.data_file) for d in deletes]
    assert len(refs) == len(set(refs)), "a data file with two live deletion vectors"
    assert set(refs) <= {f.path for f in data}, "a deletion vector for a data file that is not live"
    for d in deletes:
        assert content_range(d.data_file) is not None
        (positions,) = file_positions(table.io, d.data_file).values()
        assert len(positions) == d.rows
    return deletes


# Iceberg Java's own parsers on icesql's v3 metadata: the metadata file read and round-tripped
# through TableMetadataParser (row lineage kept), and every manifest of every snapshot read entry
# by entry by ManifestFiles (data and delete manifests; a deletion vector's entry must name its
# data file and its blob's offset and size)
JAVA_VALIDATE = """
io = jvm.org.apache.iceberg.hadoop.HadoopFileIO(spark._jsc.hadoopConfiguration())
P = jvm.org.apache.iceberg.TableMetadataParser
meta = P.read(io, LOCATION)
again = P.fromJson(P.toJson(meta))
assert meta.formatVersion() == 3 and again.formatVersion() == 3, meta.formatVersion()
assert again.nextRowId() == meta.nextRowId() and meta.nextRowId() > 0
for snap in meta.snapshots():
    twin = again.snapshot(snap.snapshotId())
    assert snap.firstRowId() is not None and twin.firstRowId() == snap.firstRowId()
    assert twin.addedRows() == snap.addedRows()
    for m in snap.allManifests(io):
        if m.content().name() == "DATA":
            assert m.firstRowId() is not None, m.path()
            reader = jvm.org.apache.iceberg.ManifestFiles.read(m, io)
        else:
            reader = jvm.org.apache.iceberg.ManifestFiles.readDeleteManifest(m, io, meta.specsById())
        it = reader.iterator()
        while it.hasNext():
            f = it.next()
            if f.format().name() == "PUFFIN":
                assert f.referencedDataFile() and f.contentOffset() is not None and f.contentSizeInBytes()
        reader.close()
"""


def row_ids(table: Any) -> dict[int, int]:
    """``id -> _row_id`` of the live rows of ``table``'s current snapshot, as the spec derives
    them: a file's stored ``_row_id``, else its inherited ``first_row_id`` plus the position."""
    from icesql.engine.iceberg.deletes import DeleteIndex, LiveRows
    from icesql.engine.iceberg.lineage import ROW_ID, lineage_columns
    from icesql.engine.iceberg.table_files import live_files

    data, deletes = live_files(table, table.current_snapshot())
    live = LiveRows(table.io, table.schema(), DeleteIndex(table, deletes))
    out: dict[int, int] = {}
    for f in data:
        rows, _, kept = live.read_kept(f)
        lineage = lineage_columns(table.io, f, kept)
        assert lineage is not None, f"{f.path} has no row ids"
        out.update(zip(rows.column("id").to_pylist(), lineage[ROW_ID].to_pylist(), strict=True))
    return out


def _java_equal(table: Any, expected: list[dict[str, Any]]) -> None:
    got = read_java(table.metadata_location)
    want = canonical_digest(expected)
    assert got["digest"] == want["digest"], (got["rows"], want["rows"])


def test_append_v3(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "in"
    _stamp(write_json_lines(data, "1.json", _rows(0, 40)), 1)
    twins = Twins.make(tmp_path, spark, caplog)
    twins.execute(
        f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'json', SCHEMA = '{SCHEMA}');"
        f"CREATE SINK k FROM src {SINK.format(table='t')} PARTITION BY (day(ts), bucket(4, id))"
        " WITH (FORMAT VERSION = 3);"
        # the same rows into a v2 table: what Iceberg Java must read from the v3 one
        f"CREATE SINK k2 FROM src {SINK.format(table='t2')} PARTITION BY (day(ts), bucket(4, id));"
    )
    twins.run(["k", "k2"])
    _stamp(write_json_lines(data, "2.json", _rows(40, 25)), 2)
    twins.run(["k", "k2"])
    here, there = twins.states("n.t")
    assert len(here.rows) == 65
    assert_same_tables(here, there)
    for p in twins.values():
        check_row_lineage(p.table("n.t"))
    table = twins["in_process"].table("n.t")
    assert read_duckdb(table.metadata_location) == here.rows
    assert read_datafusion(table.metadata_location) == here.rows  # iceberg-rust reads v3 appends
    got = read_java(table.metadata_location)
    v2 = read_java(twins["in_process"].table("n.t2").metadata_location)
    assert (got["rows"], got["digest"]) == (65, v2["digest"])
    assert read_java(twins["spark"].table("n.t").metadata_location)["digest"] == v2["digest"]


def _upsert(twins: Twins, data: Path, rounds: range) -> None:
    for r in rounds:
        _stamp(write_json_lines(data, f"{r}.json", _changes(r)), r)
        twins.run(["k"])
        here, there = twins.states("n.up")
        assert here.rows == _replay(r + 1), f"round {r}"
        assert_same_tables(here, there)


def _expected(rounds: int) -> list[dict[str, Any]]:
    return [{"id": i, "v": v, "n": n} for i, v, n in _replay(rounds)]


def test_upsert_writes_deletion_vectors(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "cdc"
    twins = Twins.make(tmp_path, spark, caplog)
    twins.execute(
        f"CREATE SOURCE cdc FROM FILES '{data}' (FORMAT = 'debezium-json', SCHEMA = '{CDC_SCHEMA}');"
        f"CREATE SINK k FROM cdc {SINK.format(table='up')} KEY (id) MODE UPSERT PARTITION BY (bucket(2, id))"
        " WITH (FORMAT VERSION = 3, MAINTENANCE = 'off');"
    )
    _upsert(twins, data, range(4))
    ids_before = {name: row_ids(p.table("n.up")) for name, p in twins.items()}
    # the ids no round changed live in round 0's files since, most of which have a vector from
    # round 1: the new vectors merge those and replace them
    untouched = (2, 4, 7, 8, 10, 11, 14, 16, 19)
    late = [
        dbz("u", {"id": i, "v": f"a{i}", "n": i}, {"id": i, "v": "late", "n": 7}, 10_000 + i) for i in untouched
    ]
    _stamp(write_json_lines(data, "late.json", late), 9)
    twins.run(["k"])
    expected = sorted(
        [r for r in _replay(4) if r[0] not in untouched] + [(i, "late", 7) for i in untouched], key=repr
    )
    here, there = twins.states("n.up")
    assert here.rows == expected
    assert_same_tables(here, there)
    assert_same_files(here, there, "live files of the v3 upsert")
    for name, p in twins.items():
        table = p.table("n.up")
        check_row_lineage(table)
        # an updated row keeps its row id (as Iceberg Java's merge-on-read UPDATE does)
        after = row_ids(table)
        assert {i: after[i] for i in untouched} == {i: ids_before[name][i] for i in untouched}, name
        vectors = deletion_vectors(table)
        assert vectors, "the upserts deleted nothing"
        # a data file's later deletes were merged into its vector, which replaced the older one
        removed = sum(int(s.summary.additional_properties.get("removed-delete-files") or 0) for s in table.snapshots())
        assert removed > 0, "no deletion vector was ever replaced"
    table = twins["in_process"].table("n.up")
    assert read_duckdb(table.metadata_location) == here.rows
    assert read_datafusion(table.metadata_location) == here.rows
    scanned = table.scan().to_arrow()  # pyiceberg 0.12 reads deletion vectors too
    assert sorted(zip(*[scanned.column(c).to_pylist() for c in ("id", "v", "n")], strict=True), key=repr) == expected
    _java_equal(table, [{"id": i, "v": v, "n": n} for i, v, n in expected])


def _in_process_upsert(
    tmp_path: Path, caplog: Any, table: str, rounds: int, *, clauses: str = "", options: str = ""
) -> tuple[Any, Path]:
    """An upsert sink into the v3 table ``n.<table>`` run in process over ``rounds`` rounds of
    ``_changes``, maintenance off unless ``options`` says otherwise; (its pipeline, its input)."""
    data = tmp_path / "cdc"
    options = options or "MAINTENANCE = 'off'"
    p = Twins.make(tmp_path, None, caplog)["in_process"]
    p.execute(
        f"CREATE SOURCE cdc FROM FILES '{data}' (FORMAT = 'debezium-json', SCHEMA = '{CDC_SCHEMA}');"
        f"CREATE SINK k FROM cdc {SINK.format(table=table)} KEY (id) MODE UPSERT {clauses}"
        f" WITH (FORMAT VERSION = 3, {options});"
    )
    for r in range(rounds):
        _stamp(write_json_lines(data, f"{r}.json", _changes(r)), r)
        p.run(["k"])
    return p, data


def test_readers_on_deletion_vectors(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """What each reader does with a v3 upsert's deletion vectors (the module docstring)."""
    p, _ = _in_process_upsert(tmp_path, caplog, "up", 2)
    table = p.table("n.up")
    assert deletion_vectors(table)
    assert read_duckdb(table.metadata_location) == _replay(2)
    assert read_datafusion(table.metadata_location) == _replay(2)
    import icesql

    with icesql.Session(home=p.home) as s:  # SELECT reads the vectors (icesql's own reader)
        (result,) = s.execute("SELECT id, v, n FROM lake.n.up ORDER BY id")
    assert [tuple(r) for r in result.rows] == sorted(_replay(2))


def test_alter_sink_upgrades_a_v2_table(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """v2 upserts (position delete files), ALTER SINK SET (FORMAT VERSION = 3), more upserts:
    the table is upgraded in place, its position delete files stay valid, and the vectors of the
    data files they delete from carry their positions (a vector replaces them, spec)."""
    data = tmp_path / "cdc"
    twins = Twins.make(tmp_path, spark, caplog)
    twins.execute(
        f"CREATE SOURCE cdc FROM FILES '{data}' (FORMAT = 'debezium-json', SCHEMA = '{CDC_SCHEMA}');"
        f"CREATE SINK k FROM cdc {SINK.format(table='up')} KEY (id) MODE UPSERT WITH (MAINTENANCE = 'off');"
    )
    _upsert(twins, data, range(2))
    for p in twins.values():
        assert _metadata(p.table("n.up"))["format-version"] == 2
    twins.execute("ALTER SINK k SET (FORMAT VERSION = 3);")
    _upsert(twins, data, range(2, 4))
    for p in twins.values():
        table = p.table("n.up")
        check_row_lineage(table)
        from icesql.engine.iceberg.table_files import live_files

        _, deletes = live_files(table, table.current_snapshot())
        formats = {str(d.file_format.value) for d in deletes}
        assert formats == {"PARQUET", "PUFFIN"}, formats  # the v2 files stay, vectors added
    table = twins["in_process"].table("n.up")
    assert read_duckdb(table.metadata_location) == _replay(4)
    assert read_datafusion(table.metadata_location) == _replay(4)
    _java_equal(table, _expected(4))


def test_maintenance_on_deletion_vectors(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Compaction applies a v3 table's vectors and drops them with the files they delete from,
    and the rows it moves keep their row ids (Iceberg Java reads the same ``_row_id``s);
    snapshot expiry deletes a Puffin file only once no vector in it is live, and orphan cleanup
    leaves the live ones (in process: maintenance runs in the driver, the same code on Spark)."""
    import time

    from icesql.engine.iceberg.table_files import live_files, manifest_entries, snapshot_manifests
    from icesql.engine.maintenance.compact import compact_table
    from icesql.engine.maintenance.expire import expire_snapshots
    from icesql.engine.maintenance.orphans import remove_orphan_files

    p, data = _in_process_upsert(tmp_path, caplog, "up", 4, clauses="PARTITION BY (bucket(2, id))")
    table = p.table("n.up")
    ids_first = row_ids(table)
    untouched = (2, 4, 7, 8, 10, 11, 14, 16, 19)  # in round 0's files: updated now, keeping ids
    late = [dbz("u", {"id": i, "v": f"a{i}", "n": i}, {"id": i, "v": "late", "n": 7}, 10_000 + i) for i in untouched]
    _stamp(write_json_lines(data, "late.json", late), 9)
    p.run(["k"])
    table.refresh()
    assert {i: row_ids(table)[i] for i in untouched} == {i: ids_first[i] for i in untouched}
    before = deletion_vectors(table)
    puffins = {str(d.data_file.file_path) for d in before}

    def referenced() -> set[str]:  # the files the table's snapshots read
        out = set()
        for snap in table.snapshots():
            for m in snapshot_manifests(table.io, snap):
                out |= {str(e.data_file.file_path) for e in manifest_entries(table.io, m) if int(e.status) != 2}
        return out

    on_disk = {str(x) for x in (tmp_path / "in_process" / "wh" / "n" / "up" / "data").rglob("*.puffin")}
    assert len(on_disk) >= len(puffins) > 0
    ids_before = row_ids(table)
    before_location = table.metadata_location
    result = compact_table(table)
    table.refresh()
    assert result.snapshot_id is not None and result.deleted_rows > 0, result
    # the rows keep their row ids through the rewrite (spec), as Iceberg Java reads them
    assert row_ids(table) == ids_before
    from tests.support.java_tables import java_api, java_sql, load

    java_before, java_after, _, _ = java_sql(
        tmp_path / "java",
        [
            load(before_location, "id", "_row_id"),
            load(table.metadata_location, "id", "_row_id"),
            java_api(JAVA_VALIDATE.replace("LOCATION", repr(before_location))),
            java_api(JAVA_VALIDATE.replace("LOCATION", repr(table.metadata_location))),
        ],
    )
    assert {r["id"]: r["_row_id"] for r in java_before} == ids_before  # the ids inherited
    assert {r["id"]: r["_row_id"] for r in java_after} == ids_before  # and stored by the rewrite
    data_files, deletes = live_files(table, table.current_snapshot())
    assert not deletes, "compaction left deletion vectors on the table"
    expected = sorted([r for r in _replay(4) if r[0] not in untouched] + [(i, "late", 7) for i in untouched], key=repr)
    assert read_duckdb(table.metadata_location) == expected
    check_row_lineage(table)
    # every Puffin file is still referenced by an older snapshot: nothing is an orphan yet
    orphans = remove_orphan_files(table, time.time() + 60, dry_run=True)
    assert not [f for f in orphans.deleted if f.endswith(".puffin")], orphans.deleted
    expire_snapshots(table, time.time() + 1, keep_at_least=1)
    table.refresh()
    assert len(list(table.snapshots())) == 1
    left = {str(x) for x in (tmp_path / "in_process" / "wh" / "n" / "up" / "data").rglob("*.puffin")}
    assert not (left & {f.removeprefix("file://") for f in puffins}), "expiry left dead Puffin files"
    assert not (referenced() & puffins)
    assert read_duckdb(table.metadata_location) == expected
    assert len(data_files) >= 1


def test_equality_deletes_stay_available_on_v3(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``DELETE MODE = 'equality'`` on a v3 table writes equality delete files, as on v2."""
    from icesql.engine.iceberg.table_files import live_files

    p, _ = _in_process_upsert(tmp_path, caplog, "eq", 2, options="DELETE MODE = 'equality', MAINTENANCE = 'off'")
    table = p.table("n.eq")
    check_row_lineage(table)
    _, deletes = live_files(table, table.current_snapshot())
    assert deletes and {d.content for d in deletes} == {2}
    assert read_duckdb(table.metadata_location) == _replay(2)


def test_bad_deletion_vectors_are_clear_errors(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A batch whose deletes name a data file that is no longer in the table is refused at its
    commit; a Puffin file cut short fails a read and the next upsert batch in one line naming
    the file, and the batch commits nothing."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.manifest import DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    import icesql
    from icesql.engine.base.pyiceberg_internals import new_data_file
    from icesql.engine.iceberg import deletes as deletes_module
    from icesql.engine.iceberg.dvs import to_deletion_vectors
    from icesql.errors import ExecutionError

    p, data = _in_process_upsert(tmp_path, caplog, "bad", 2)
    table = p.table("n.bad")
    snapshots = len(list(table.snapshots()))

    # deletes naming a data file the table does not have (another writer removed it)
    gone = tmp_path / "gone-deletes.parquet"
    pq.write_table(pa.table({"file_path": ["file:///nowhere/x.parquet"], "pos": pa.array([0], pa.int64())}), gone)
    stray = new_data_file(
        3,
        content=DataFileContent.POSITION_DELETES,
        file_path=str(gone),
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=1,
        file_size_in_bytes=gone.stat().st_size,
    )
    with pytest.raises(ExecutionError) as e:
        to_deletion_vectors(table, table.metadata, [stray])
    assert "file:///nowhere/x.parquet" in e.value.message and "\n" not in e.value.message
    assert e.value.hint

    # the Puffin file cut short
    vectors = deletion_vectors(table)
    puffin = Path(str(vectors[0].data_file.file_path).removeprefix("file://"))
    puffin.write_bytes(puffin.read_bytes()[:10])  # into its first vector: every blob is cut
    deletes_module._positions_cache.clear()
    with icesql.Session(home=p.home) as s, pytest.raises(ExecutionError) as e:
        s.execute("SELECT * FROM lake.n.bad")
    assert "\n" not in e.value.message and puffin.name in e.value.message, str(e.value)
    # ids no round changed live in round 0's files, which have vectors in the cut file
    late = [
        dbz("u", {"id": i, "v": f"a{i}", "n": i}, {"id": i, "v": "x", "n": 0}, 9_000 + i)
        for i in (2, 4, 7, 8, 10, 11, 14, 16, 19)
    ]
    _stamp(write_json_lines(data, "late.json", late), 9)
    with icesql.Session(home=p.home) as s:
        try:
            s.run(once=True, sinks=["k"])
        except ExecutionError as failure:
            assert puffin.name in str(failure), str(failure)
        state = s.store.get_sink_state("k")
    assert state is not None and state.last_error and puffin.name in state.last_error, state
    table.refresh()
    assert len(list(table.snapshots())) == snapshots, "a batch committed over a cut deletion vector"
