"""Iceberg v3 tables made by Iceberg Java (Spark 3.5 + Iceberg 1.10, ``tests/support/java_tables.py``)
with deletion vectors: icesql's Puffin reader decodes each vector to the rows Java's reader drops,
its writer gives back Java's bytes, and what Java writes in v3 metadata (row lineage, DV manifest
entries) is pinned here, since icesql's v3 writer must write the same.

Manifests are read with fastavro: pyiceberg 0.12 reads v3 manifests and manifest lists with its v2
schema, so it drops ``first_row_id``, ``referenced_data_file``, ``content_offset`` and
``content_size_in_bytes``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO

from icesql.engine.iceberg.puffin import (
    CREATED_BY,
    dv_blob,
    puffin_file_metadata,
    read_dv,
    write_puffin,
)
from tests.support.java_tables import JavaV3Table, java_v3_tables, local_path
from tests.support.readers import canonical_digest, read_datafusion, read_duckdb, read_java

pytestmark = pytest.mark.java

ADDED, EXISTING, DELETED = 1, 0, 2
DATA, DELETES = 0, 1


@pytest.fixture(scope="module")
def tables() -> dict[str, JavaV3Table]:
    return java_v3_tables()


def _avro(path: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    import fastavro

    with open(local_path(path), "rb") as f:
        reader = fastavro.reader(f)
        meta = {k: v.decode() if isinstance(v, bytes) else v for k, v in reader.metadata.items()}
        return meta, list(reader)


def _metadata(table: JavaV3Table) -> dict[str, Any]:
    return dict(json.loads(Path(table.metadata_location).read_text()))


def _current(table: JavaV3Table) -> dict[str, Any]:
    meta = _metadata(table)
    return next(s for s in meta["snapshots"] if s["snapshot-id"] == meta["current-snapshot-id"])


def _entries(snapshot: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(manifest list row, manifest entry) of every entry of a snapshot, DELETED ones included."""
    for manifest in _avro(snapshot["manifest-list"])[1]:
        for entry in _avro(manifest["manifest_path"])[1]:
            yield manifest, entry


def _live(table: JavaV3Table, content: int) -> list[dict[str, Any]]:
    return [
        e["data_file"]
        for _, e in _entries(_current(table))
        if e["status"] != DELETED and e["data_file"]["content"] == content
    ]


def test_pyiceberg_loads_javas_v3_metadata(tables: dict[str, JavaV3Table]) -> None:
    from pyiceberg.table import StaticTable

    for name, next_row_id in {"t": 20101, "p": 5001, "r": 100000}.items():
        table = StaticTable.from_metadata(tables[name].metadata_location)
        assert table.format_version == 3
        assert table.metadata.next_row_id == next_row_id


def test_one_dv_per_data_file_with_the_positions_java_deletes(tables: dict[str, JavaV3Table]) -> None:
    io = PyArrowFileIO()
    for table in tables.values():
        dvs = _live(table, DELETES)
        assert dvs and all(f["file_format"] == "PUFFIN" for f in dvs)
        by_file = {f["referenced_data_file"]: f for f in dvs}
        assert len(by_file) == len(dvs), "at most one live DV per data file"
        assert set(by_file) == set(table.deleted), table.name
        for path, f in by_file.items():
            positions = read_dv(
                io,
                f["file_path"],
                f["content_offset"],
                f["content_size_in_bytes"],
                path,
                cardinality=f["record_count"],
            )
            np.testing.assert_array_equal(positions, np.array(table.deleted[path], dtype=np.int64))
            # the manifest entry points exactly at the blob the footer lists
            (blob,) = [
                b
                for b in puffin_file_metadata(io, f["file_path"])["blobs"]
                if b["offset"] == f["content_offset"]
            ]
            assert blob["length"] == f["content_size_in_bytes"]
            assert blob["properties"] == {"referenced-data-file": path, "cardinality": str(f["record_count"])}


def test_icesql_encodes_javas_vectors_to_javas_bytes(tables: dict[str, JavaV3Table]) -> None:
    """Scattered positions (array containers), runs merged into them by a second DELETE (run
    containers) and 30% of 100000 rows (bitset containers): the same bytes, CRC included."""
    io = PyArrowFileIO()
    seen = 0
    for table in tables.values():
        for f in _live(table, DELETES):
            with io.new_input(f["file_path"]).open() as stream:
                stream.seek(f["content_offset"])
                javas = stream.read(f["content_size_in_bytes"])
            assert dv_blob(np.array(table.deleted[f["referenced_data_file"]])) == javas
            seen += 1
    assert seen >= 6


def test_icesql_writes_javas_puffin_files(tables: dict[str, JavaV3Table], tmp_path: Path) -> None:
    """The same vectors written by ``write_puffin``: the same blobs and footer entries. Java puts
    the blobs in hash-map order and icesql in path order, so offsets differ where a file holds
    several; a one-blob file is Java's byte for byte but for ``created-by``."""
    io = PyArrowFileIO()
    puffins = {f["file_path"] for table in tables.values() for f in _live(table, DELETES)}
    single = 0
    for n, path in enumerate(sorted(puffins)):
        javas = puffin_file_metadata(io, path)
        assert javas["properties"]["created-by"].startswith("Apache Iceberg 1.10")
        vectors = {
            b["properties"]["referenced-data-file"]: read_dv(io, path, b["offset"], b["length"])
            for b in javas["blobs"]
        }
        ours_path = str(tmp_path / f"{n}.puffin")
        size, written = write_puffin(io.new_output(ours_path), vectors)
        ours = puffin_file_metadata(io, ours_path)
        assert ours["properties"] == {"created-by": CREATED_BY}

        def without_offset(blobs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
            return {
                b["properties"]["referenced-data-file"]: {k: v for k, v in b.items() if k != "offset"}
                for b in blobs
            }

        assert without_offset(ours["blobs"]) == without_offset(javas["blobs"])
        java_bytes = Path(local_path(path)).read_bytes()
        our_bytes = Path(ours_path).read_bytes()
        for b in javas["blobs"]:
            dv = next(d for d in written if d.referenced_data_file == b["properties"]["referenced-data-file"])
            theirs = java_bytes[b["offset"] : b["offset"] + b["length"]]
            assert our_bytes[dv.content_offset : dv.content_offset + dv.content_size_in_bytes] == theirs
        if len(javas["blobs"]) == 1:
            single += 1
            (b,) = javas["blobs"]
            footer_at = b["offset"] + b["length"]
            assert java_bytes[footer_at : footer_at + 4] == b"PFA1"
            created_by = json.dumps(javas["properties"]["created-by"]).encode()
            payload = java_bytes[footer_at + 4 : -12].replace(created_by, json.dumps(CREATED_BY).encode())
            expected = (
                java_bytes[: footer_at + 4] + payload + len(payload).to_bytes(4, "little") + java_bytes[-8:]
            )
            assert our_bytes == expected
            assert size == len(our_bytes)
    assert single >= 1


def _rows_by_file(table: JavaV3Table) -> tuple[list[str], dict[str, list[dict[str, Any]]]]:
    """The table's columns, and per live data file its rows as icesql's DV reader leaves them:
    the file read with pyarrow, less the positions of its DV."""
    import pyarrow.parquet as pq

    io = PyArrowFileIO()
    meta = _metadata(table)
    schema = next(s for s in meta["schemas"] if s["schema-id"] == meta["current-schema-id"])
    columns = [field["name"] for field in schema["fields"]]
    dvs = {f["referenced_data_file"]: f for f in _live(table, DELETES)}
    rows: dict[str, list[dict[str, Any]]] = {}
    for f in _live(table, DATA):
        # the table's columns only: an UPDATE's file also holds the row lineage columns
        data = pq.read_table(local_path(f["file_path"]), columns=columns)
        assert data.num_rows == f["record_count"]
        keep = np.ones(data.num_rows, dtype=bool)
        dv = dvs.get(f["file_path"])
        if dv is not None:
            keep[read_dv(io, dv["file_path"], dv["content_offset"], dv["content_size_in_bytes"])] = False
        rows[f["file_path"]] = data.filter(keep).to_pylist()
    return columns, rows


def _rows_left(table: JavaV3Table) -> tuple[list[str], list[dict[str, Any]]]:
    """The table's columns, and its rows as icesql's DV reader leaves them."""
    columns, by_file = _rows_by_file(table)
    return columns, [r for rows in by_file.values() for r in rows]


def _sharing_a_puffin_file(table: JavaV3Table) -> set[str]:
    """The data files whose live vector sits in a Puffin file holding other vectors too (live or
    replaced): Java puts every vector one Spark task writes into one file."""
    io = PyArrowFileIO()
    return {
        f["referenced_data_file"]
        for f in _live(table, DELETES)
        if len(puffin_file_metadata(io, f["file_path"])["blobs"]) > 1
    }


def test_rows_java_reads_are_the_rows_icesqls_dvs_leave(tables: dict[str, JavaV3Table]) -> None:
    """The rows Iceberg Java's reader returns (and pyiceberg's, which applies DVs too)."""
    from pyiceberg.table import StaticTable

    for table in tables.values():
        _, rows = _rows_left(table)
        expected = canonical_digest(rows)
        javas = read_java(table.metadata_location)
        assert (javas["rows"], javas["digest"]) == (expected["rows"], expected["digest"]), table.name
        assert StaticTable.from_metadata(table.metadata_location).scan().to_arrow().num_rows == len(rows)


def test_duckdb_and_datafusion_read_javas_dvs(tables: dict[str, JavaV3Table]) -> None:
    """What the other readers do with v3 and DVs today: iceberg-rust (DataFusion) applies Java's
    vectors exactly. DuckDB's iceberg extension (1.5.5, the newest on PyPI) applies exactly every
    vector that is alone in its Puffin file; a vector sharing its file with others may be read as
    another of them (its cached read returns the cached range's start, not the blob's offset):
    duckdb-iceberg fixed this on 16 Jul 2026 ("fix issue with multiple blobs in puffin delete
    file", 8b2e25f4c), after 1.5.5. Whether Spark puts two vectors into one file varies by run, so
    the rows DuckDB gets wrong must all come from such files (a miss anywhere else fails)."""
    for table in tables.values():
        columns, by_file = _rows_by_file(table)
        key = columns[0]  # every table here has unique ids
        rows = [r for file_rows in by_file.values() for r in file_rows]
        expected = sorted((tuple(r[c] for c in columns) for r in rows), key=repr)
        assert read_datafusion(table.metadata_location) == expected, table.name
        got = read_duckdb(table.metadata_location)
        if got == expected:
            continue
        # which data file each wrong row belongs to: read every file whole (deleted rows too)
        import pyarrow.parquet as pq

        file_of = {
            i: path
            for path in by_file
            for i in pq.read_table(local_path(path), columns=[key]).column(key).to_pylist()
        }
        wrong = set(got) ^ set(expected)
        outside = {file_of.get(r[0], "?") for r in wrong} - _sharing_a_puffin_file(table)
        assert not outside, (table.name, sorted(outside), sorted(wrong, key=repr)[:10])


def test_what_java_writes_in_v3_metadata(tables: dict[str, JavaV3Table]) -> None:
    """Row lineage and DV entries as Iceberg Java 1.10 writes them: what icesql's v3 writer copies."""
    io = PyArrowFileIO()
    lineage = {
        # a snapshot's first-row-id is next-row-id before it; added-rows counts the rows of the data
        # manifests it assigns a first_row_id: new ones, EXISTING entries of a rewritten manifest
        # included (p's third snapshot dropped partition c and rewrote the manifest of a and b)
        "t": [(0, 20000), (20000, 100), (20100, 0), (20100, 0), (20100, 1)],
        "p": [(0, 3000), (3000, 0), (3000, 2000), (5000, 1)],
        "r": [(0, 100000), (100000, 0)],
    }
    for name, expected in lineage.items():
        table = tables[name]
        meta = _metadata(table)
        snapshots = meta["snapshots"]
        assert [(s["first-row-id"], s["added-rows"]) for s in snapshots] == expected
        last = snapshots[-1]
        assert meta["next-row-id"] == last["first-row-id"] + last["added-rows"]
        for snapshot in snapshots:
            list_meta, manifests = _avro(snapshot["manifest-list"])
            assert list_meta["format-version"] == "3"
            assert list_meta["first-row-id"] == str(snapshot["first-row-id"])
            assigned = snapshot["first-row-id"]
            for m in manifests:
                if m["content"] == DELETES:
                    assert m["first_row_id"] is None
                    continue
                assert m["first_row_id"] is not None
                if m["added_snapshot_id"] == snapshot["snapshot-id"]:
                    # manifests new in this snapshot get consecutive ranges from its first-row-id
                    assert m["first_row_id"] == assigned
                    assigned += m["added_rows_count"] + m["existing_rows_count"]
            assert assigned == snapshot["first-row-id"] + snapshot["added-rows"]
        for manifest, entry in _entries(_current(table)):
            f = entry["data_file"]
            manifest_meta = _avro(manifest["manifest_path"])[0]
            assert manifest_meta["format-version"] == "3"
            assert manifest_meta["content"] == ("data" if manifest["content"] == DATA else "deletes")
            if f["content"] == DATA:
                assert f["referenced_data_file"] is None and f["content_offset"] is None
                # ADDED files inherit first_row_id (null); EXISTING and DELETED entries carry it
                assert (f["first_row_id"] is None) == (entry["status"] == ADDED)
            else:
                assert f["file_format"] == "PUFFIN" and f["first_row_id"] is None
                assert f["sort_order_id"] is None and f["split_offsets"] is None and f["equality_ids"] is None
                assert f["file_size_in_bytes"] == len(io.new_input(f["file_path"]))
                assert (
                    f["referenced_data_file"] and f["content_offset"] >= 4 and f["content_size_in_bytes"] > 12
                )
    # explicit first_row_ids of a rewritten manifest: the range its ADDED files inherited
    rewritten = [
        (e["status"], e["data_file"]["record_count"], e["data_file"]["first_row_id"])
        for _, e in _entries(_current(tables["p"]))
        if e["data_file"]["content"] == DATA and e["status"] != ADDED
    ]
    assert sorted(r[2] for r in rewritten) == [0, 1000, 2000]
    assert [r[0] for r in rewritten].count(DELETED) == 1
    # v3 UPDATE (merge-on-read) keeps the updated row's _row_id: its new data file has the
    # lineage columns, _row_id the old row's (inherited: its file's first_row_id, from the order of
    # files in their manifest, plus its position) and _last_updated_sequence_number null (inherited:
    # the new file's data sequence number)
    import pyarrow.parquet as pq

    second = _metadata(tables["t"])["snapshots"][1]
    (added,) = [
        m for m in _avro(second["manifest-list"])[1] if m["added_snapshot_id"] == second["snapshot-id"]
    ]
    next_id = added["first_row_id"]
    for entry in _avro(added["manifest_path"])[1]:
        ids = (
            pq.read_table(local_path(entry["data_file"]["file_path"]), columns=["id"])
            .column("id")
            .to_pylist()
        )
        if 20050 in ids:
            old_row_id = next_id + ids.index(20050)
        next_id += entry["data_file"]["record_count"]

    lineage_files = [
        f for f in _live(tables["t"], DATA) if "_row_id" in pq.read_schema(local_path(f["file_path"])).names
    ]
    (updated,) = lineage_files
    schema = pq.read_schema(local_path(updated["file_path"]))
    assert [
        schema.field(c).metadata[b"PARQUET:field_id"] for c in ("_row_id", "_last_updated_sequence_number")
    ] == [
        b"2147483540",
        b"2147483539",
    ]
    assert pq.read_table(local_path(updated["file_path"])).to_pylist() == [
        {"id": 20050, "s": "u", "_row_id": old_row_id, "_last_updated_sequence_number": None}
    ]
    # a DV's partition is its data file's
    partitions = {f["file_path"]: f["partition"] for f in _live(tables["p"], DATA)}
    for f in _live(tables["p"], DELETES):
        assert f["partition"] == partitions[f["referenced_data_file"]]
