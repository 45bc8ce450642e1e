"""The Spark Connect hand-off (``icesql.engine.backends.spark.dropbox``) and the server half's replay rules.

No Spark here: the drop box is plain FileIO on a local directory, and ``RemoteBatch`` is given
a stand-in for its batch writer (a function returning file rows) so that the skip rules can be
checked one by one. The end-to-end proof on a real Spark Connect server is
``tests/e2e/test_spark_connect.py``.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.backends.spark.dropbox import DropBox
from icesql.engine.commit.staging import Staging
from icesql.engine.sink.batch import RemoteBatch

ROW = {"content": 0, "file": "opaque", "rows": 3, "bytes": 100}


def box(tmp_path: Path) -> DropBox:
    return DropBox(str(tmp_path / "table"), "sink-1", {})


def test_put_get_delete_and_list(tmp_path: Path) -> None:
    b = box(tmp_path)
    assert b.get(0) is None and b.batch_ids() == []
    (tmp_path / "table" / "data" / "icesql-staging" / "sink-1").mkdir(parents=True)
    (tmp_path / "table" / "data" / "icesql-staging" / "sink-1" / "notes.txt").write_text("x")
    assert b.batch_ids() == []  # only records count
    b.put(0, 2, [ROW])
    b.put(7, 2, [])
    got = b.get(0)
    assert got is not None and got.batch_id == 0 and got.version == 2 and got.files == (ROW,)
    assert b.batch_ids() == [0, 7]
    assert b.path(7).endswith("/table/data/icesql-staging/sink-1/00000000000000000007.parquet")
    b.delete(0)
    b.delete(0)  # deleting twice is fine
    assert b.get(0) is None and b.batch_ids() == [7]


def test_a_torn_record_reads_as_absent_and_is_overwritten(tmp_path: Path) -> None:
    b = box(tmp_path)
    b.put(1, 1, [ROW])
    path = Path(b.path(1))
    path.write_bytes(path.read_bytes()[:40])  # the server died mid-write: no Parquet footer
    assert b.get(1) is None
    b.put(1, 1, [ROW])
    assert b.get(1) is not None


def test_pickles_without_its_file_io(tmp_path: Path) -> None:
    b = box(tmp_path)
    b.put(3, 1, [ROW])
    assert b._io is not None
    state = b.__getstate__()
    assert set(state) == {"root", "io_properties"}
    c = pickle.loads(pickle.dumps(b))
    assert c.get(3) is not None


def test_remote_batch_skips_what_the_client_took_or_has_waiting(tmp_path: Path) -> None:
    b = box(tmp_path)
    written: list[int] = []

    def writer(df: Any, batch_id: int) -> list[dict[str, Any]]:
        written.append(batch_id)
        return [dict(ROW, rows=batch_id)]

    remote = RemoteBatch(writer, b, version=4, skip_through=2)  # type: ignore[arg-type]
    remote(None, 2)  # already staged or committed by the client: not written again
    b.put(3, 3, [ROW])  # an earlier run's record that the client has not taken yet
    remote(None, 3)
    remote(None, 4)
    assert written == [4]
    rec4 = b.get(4)
    assert rec4 is not None and rec4.version == 4 and rec4.files[0]["rows"] == 4
    rec3 = b.get(3)
    assert rec3 is not None and rec3.version == 3  # left as it was


def test_staging_cursor_survives_restarts(tmp_path: Path) -> None:
    s = Staging(tmp_path / "staging")
    assert s.cursor() == -1
    s.set_cursor(5)
    assert Staging(tmp_path / "staging").cursor() == 5
    assert s.pending() == []  # the cursor is not an entry


class _Relation:
    """What ``Drain.take`` asks of the runner's relation: the bad-record count and the dead
    letters' accumulators (none here)."""

    name = "events"
    letters: tuple[object, ...] = ()

    def skipped_count(self) -> int:
        return 0


def drain_runner(tmp_path: Path) -> Any:
    """A ``SinkRunner`` wired for its ``Drain`` alone: no Spark, no table (commits are not drained
    here: ``policy=False``), a drop box on a local directory."""
    from icesql.engine.sink.drain import Drain
    from icesql.engine.sink.runner import SinkRunner
    from icesql.plan import SinkPlan
    from tests.support.pipeline_helpers import State

    plan = SinkPlan(name="s", relation="events", catalog_connection="cat", namespace=("ns",), table="t")
    runner = SinkRunner(
        plan,
        spark=None,
        home=tmp_path / "home",
        state=State(),
        target=lambda: None,
        relation=lambda backend, binding: _Relation(),  # type: ignore[arg-type,return-value]
    )
    runner.relation = _Relation()  # type: ignore[assignment]
    runner.version = 1
    runner.drain = Drain(runner, DropBox(str(tmp_path / "table"), runner.sink_id, {}))
    return runner


def test_drain_takes_records_in_order_and_stops_at_a_hole(tmp_path: Path) -> None:
    r = drain_runner(tmp_path)
    r.drain.dropbox.put(0, 1, [ROW])
    r.drain.dropbox.put(1, 1, [])  # a batch that wrote nothing: only the cursor moves
    r.drain.dropbox.put(3, 1, [ROW])  # batch 2 is still being written
    assert r.drain.take(policy=False) == 2
    assert r.staged_high == 1 and r.staging.cursor() == 1
    assert [e.batch_id for e in r.staging.pending()] == [0]
    assert r.drain.dropbox.batch_ids() == [3]  # taken records are deleted, the rest waits
    r.drain.dropbox.put(2, 1, [ROW])
    assert r.drain.take(policy=False) == 2
    assert [e.batch_id for e in r.staging.pending()] == [0, 2, 3]
    assert r.drain.dropbox.batch_ids() == []


def test_drain_goes_on_after_batches_another_runner_staged(tmp_path: Path) -> None:
    """An older client of the same home took batch 1 before the new query stopped its run: its
    staged entry (the staging directory is shared) closes the hole."""
    from icesql.engine.commit.staging import StagedBatch

    r = drain_runner(tmp_path)
    r.drain.dropbox.put(0, 1, [ROW])
    r.drain.dropbox.put(2, 1, [ROW])
    assert r.drain.take(policy=False) == 1 and r.staged_high == 0  # waits for 1
    Staging(r.staging.directory).add(StagedBatch(batch_id=1, data_files=("other",), rows=3, bytes=100))
    assert r.drain.take(policy=False) == 1
    assert r.staged_high == 2
    assert [e.batch_id for e in r.staging.pending()] == [0, 1, 2]


def test_checkpoint_root_for_a_remote_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = drain_runner(tmp_path)
    monkeypatch.delenv("ICESQL_CHECKPOINT_ROOT", raising=False)
    assert r.checkpoint_location == str(tmp_path / "home" / "sinks" / r.sink_id / "checkpoint")
    monkeypatch.setenv("ICESQL_CHECKPOINT_ROOT", "s3a://bucket/icesql/")
    assert r.checkpoint_location == f"s3a://bucket/icesql/{r.sink_id}"
