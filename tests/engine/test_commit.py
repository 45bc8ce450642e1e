"""Commits: summaries, progress, fencing, idempotence, conflicts, manifests and sequence numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from icesql.engine.commit.snapshot import (
    CommitRequest,
    FencedError,
    commit,
    last_committed,
    snapshot_summary,
)
from icesql.engine.iceberg.tables import ensure_table, key_field_ids
from icesql.engine.iceberg.writer import DataFileWriter, WriteSpec
from icesql.errors import ExecutionError
from icesql.plan import SinkMode, SinkPlan
from tests.engine.test_schema import f, struct

SCHEMA = struct(f("id", "long"), f("v", "string"))


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return SqlCatalog("test", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")


@pytest.fixture
def table(catalog: SqlCatalog) -> Any:
    p = SinkPlan(
        name="s",
        relation="r",
        catalog_connection="c",
        namespace=("ns",),
        table="t",
        key=("id",),
        mode=SinkMode.UPSERT,
    )
    return ensure_table(catalog, None, SCHEMA, p)


def data(table: Any, ids: list[int], v: str = "x") -> list:
    w = DataFileWriter(WriteSpec.from_table(table))
    w.write(pa.record_batch({"id": pa.array(ids, pa.int64()), "v": [v] * len(ids)}))
    return w.close()


def deletes(table: Any, ids: list[int]) -> list:
    w = DataFileWriter(WriteSpec.from_table(table), "equality_deletes", key_field_ids(table.schema(), ["id"]))
    w.write(pa.record_batch({"id": pa.array(ids, pa.int64())}))
    return w.close()


def n_snapshots(table: Any) -> int:
    table.refresh()
    return len(table.metadata.snapshots)


def test_summary_and_last_committed(table: Any) -> None:
    assert last_committed(table, "sink-a") is None
    r = commit(table, CommitRequest(data(table, [1, 2, 3]), [], "sink-a", 7, 41, reason="size"))
    assert r.rows == 3 and r.files == 1 and r.bytes > 0 and not r.skipped and r.duration >= 0
    s = snapshot_summary(table, r.snapshot_id)
    assert s["operation"] == "append"
    assert s["icesql.sink-id"] == "sink-a" and s["icesql.sink-version"] == "7"
    assert s["icesql.progress"] == "41" and s["icesql.commit-reason"] == "size"
    assert s["added-data-files"] == "1" and s["added-records"] == "3" and s["total-records"] == "3"
    r2 = commit(table, CommitRequest(data(table, [4]), deletes(table, [1]), "sink-a", 7, 42, reason="period"))
    s2 = snapshot_summary(table, r2.snapshot_id)
    assert s2["operation"] == "overwrite"
    assert s2["added-delete-files"] == "1" and s2["added-equality-delete-files"] == "1"
    assert s2["added-equality-deletes"] == "1" and s2["total-equality-deletes"] == "1"
    assert s2["total-data-files"] == "2"
    # another sink's commits and foreign commits are skipped when looking for ours
    commit(table, CommitRequest(data(table, [9]), [], "sink-b", 1, 5))
    table.append(
        pa.table({"id": pa.array([10], pa.int64()), "v": ["foreign"]}, schema=table.schema().as_arrow())
    )
    assert last_committed(table, "sink-a") == (7, 42)
    assert last_committed(table, "sink-b") == (1, 5)


def test_fencing(table: Any) -> None:
    commit(table, CommitRequest(data(table, [1]), [], "s", 2, 10))
    before = n_snapshots(table)
    with pytest.raises(FencedError) as err:
        commit(table, CommitRequest(data(table, [2]), [], "s", 1, 11))
    assert isinstance(err.value, ExecutionError) and "fenced" in err.value.message
    assert n_snapshots(table) == before
    r = commit(table, CommitRequest(data(table, [3]), [], "s", 3, 11))
    assert not r.skipped and last_committed(table, "s") == (3, 11)
    with pytest.raises(FencedError):
        commit(table, CommitRequest(data(table, [4]), [], "s", 2, 12))


def test_idempotent_recommit(table: Any) -> None:
    files = data(table, [1, 2])
    r1 = commit(table, CommitRequest(files, [], "s", 1, 5))
    before = n_snapshots(table)
    r2 = commit(table, CommitRequest(files, [], "s", 1, 5))
    assert r2.skipped and r2.snapshot_id == r1.snapshot_id and r2.rows == 0
    r3 = commit(table, CommitRequest(data(table, [3]), [], "s", 1, 4))  # older progress
    assert r3.skipped
    assert n_snapshots(table) == before
    table.refresh()
    assert table.scan().to_arrow().num_rows == 2


def test_conflict_with_another_writer_is_retried(catalog: SqlCatalog, table: Any) -> None:
    other = catalog.load_table("ns.t")
    real_refresh = table.refresh
    calls = {"n": 0}

    def refresh_then_someone_commits() -> Any:
        out = real_refresh()
        calls["n"] += 1
        if calls["n"] == 1:  # right after our reload, before our commit
            other.append(
                pa.table(
                    {"id": pa.array([100], pa.int64()), "v": ["other"]}, schema=other.schema().as_arrow()
                )
            )
        return out

    table.refresh = refresh_then_someone_commits  # type: ignore[method-assign]
    r = commit(table, CommitRequest(data(table, [1, 2]), deletes(table, [7]), "s", 1, 1), backoff=0.01)
    assert r.attempts == 2 and not r.skipped
    table = catalog.load_table("ns.t")
    assert len(table.metadata.snapshots) == 2
    ops = [s.summary.operation.value for s in table.metadata.snapshots]
    assert ops == ["append", "overwrite"]
    # only the manifests of the landed attempt remain (the failed attempt's were removed)
    meta_dir = Path(table.metadata.location.removeprefix("file://")) / "metadata"
    listed = {m.manifest_path.removeprefix("file://") for m in table.current_snapshot().manifests(table.io)}
    written = {str(p) for p in meta_dir.glob("*-m*.avro")}
    assert written == listed | {
        m.manifest_path.removeprefix("file://") for m in table.metadata.snapshots[0].manifests(table.io)
    }


def test_conflict_retries_exhausted(catalog: SqlCatalog, table: Any) -> None:
    other = catalog.load_table("ns.t")
    real_refresh = table.refresh

    def always_someone() -> Any:
        out = real_refresh()
        other.append(
            pa.table({"id": pa.array([100], pa.int64()), "v": ["o"]}, schema=other.schema().as_arrow())
        )
        return out

    table.refresh = always_someone  # type: ignore[method-assign]
    with pytest.raises(ExecutionError, match="after 3 attempts"):
        commit(table, CommitRequest(data(table, [1]), [], "s", 1, 1), retries=2, backoff=0.001)


def test_fencing_rechecked_after_conflict(catalog: SqlCatalog, table: Any) -> None:
    other = catalog.load_table("ns.t")
    real_refresh = table.refresh
    calls = {"n": 0}

    def newer_version_commits() -> Any:
        out = real_refresh()
        calls["n"] += 1
        if calls["n"] == 1:
            commit(other, CommitRequest(data(other, [5]), [], "s", 9, 1))
        return out

    table.refresh = newer_version_commits  # type: ignore[method-assign]
    with pytest.raises(FencedError):
        commit(table, CommitRequest(data(table, [1]), [], "s", 1, 1), backoff=0.001)


def _avro_schema(path: str) -> dict:
    """The writer schema in an Avro object container file's header."""
    raw = Path(path.removeprefix("file://")).read_bytes()
    assert raw[:4] == b"Obj\x01"
    pos = 4

    def read_long() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            b = raw[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)

    meta = {}
    while (count := read_long()) != 0:
        if count < 0:
            count = -count
            read_long()
        for _ in range(count):
            n = read_long()
            key = raw[pos : pos + n].decode()
            pos += n
            n = read_long()
            meta[key] = raw[pos : pos + n]
            pos += n
    return json.loads(meta["avro.schema"])


def _find_field(node: Any, name: str) -> Any:
    if isinstance(node, dict):
        if node.get("name") == name and "type" in node:
            return node
        for v in node.values():
            if (found := _find_field(v, name)) is not None:
                return found
    if isinstance(node, list):
        for v in node:
            if (found := _find_field(v, name)) is not None:
                return found
    return None


def test_row_delta_manifests_and_sequence_numbers(table: Any) -> None:
    commit(table, CommitRequest(data(table, [1, 2]), [], "s", 1, 1))
    r = commit(table, CommitRequest(data(table, [2]), deletes(table, [2]), "s", 1, 2))
    table.refresh()
    snap = table.metadata.snapshot_by_id(r.snapshot_id)
    assert snap.sequence_number == 2
    manifests = snap.manifests(table.io)
    new = [m for m in manifests if m.added_snapshot_id == r.snapshot_id]
    assert sorted(int(m.content) for m in new) == [0, 1]  # one data, one delete manifest
    for m in new:
        assert m.sequence_number == snap.sequence_number and m.min_sequence_number == snap.sequence_number
        for e in m.fetch_manifest_entry(table.io):
            assert e.sequence_number == snap.sequence_number  # inherited: deletes apply to older data only
        schema = _avro_schema(m.manifest_path)
        eq = _find_field(schema, "equality_ids")
        array = next(t for t in eq["type"] if isinstance(t, dict))
        assert array["items"] == "int" and array["element-id"] == 136
    delete_manifest = next(m for m in new if int(m.content) == 1)
    (entry,) = delete_manifest.fetch_manifest_entry(table.io)
    assert int(entry.data_file.content) == 2 and entry.data_file.equality_ids == [1]
