"""A bounded run (``run --once``) with nothing new to read starts no Spark query (issue 40):
``precheck.nothing_new`` answers from the sink's staging, Spark's checkpoint and the source
itself. Every case where a run has something to do - a new file, a batch planned and not
committed, a staged batch, files CLEAN SOURCE has not taken yet - must answer "maybe" (None),
or the run would skip input; one real sink run makes the checkpoint the cases start from."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.engine.backends.checkpoint import last_batch
from icesql.engine.sink.precheck import nothing_new
from tests.support.pipeline_helpers import load_table, write_json_lines

pytestmark = pytest.mark.spark


def _setup(s: icesql.Session, data: Path, wh: Path, clean: bool = False) -> None:
    opts = f", CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = '{data.parent / 'archive'}'" if clean else ""
    s.execute(
        f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');"
        f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'json', SCHEMA = 'id BIGINT'{opts});"
        "CREATE SINK k FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't');"
    )


def _ids(home: Path, wh: Path) -> list[int]:
    table = load_table(home, "n.t", warehouse=wh, catalog_name="lake")
    return sorted(r["id"] for r in table.scan().to_arrow().to_pylist())


def _check(home: Path) -> str | None:
    with icesql.Session(home=home) as s:
        (plan,) = s.sink_plans(["k"])
        why = nothing_new(s.engine, plan)
        assert s.engine._spark is None  # the check itself never starts Spark
        return why


def test_a_run_with_nothing_new_starts_no_query(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home, data, wh = tmp_path / "home", tmp_path / "in", tmp_path / "wh"
    write_json_lines(data, "1.json", [{"id": 1}, {"id": 2}])
    with icesql.Session(home=home, spark=spark) as s:
        _setup(s, data, wh)
        s.run(once=True)
        assert s.engine.status() != []
    assert _ids(home, wh) == [1, 2]

    with caplog.at_level("INFO", logger="icesql.engine"), icesql.Session(home=home, spark=spark) as s:
        s.run(once=True, sinks=["k"])
        assert s.engine.status() == []  # no runner: no query was started
    assert f"sink k: nothing new to read (no new file in {data}" in caplog.text
    with icesql.Session(home=home) as s:
        assert s.store.get_sink_state("k").status == "stopped"

    write_json_lines(data, "2.json", [{"id": 3}])
    with icesql.Session(home=home, spark=spark) as s:
        s.run(once=True, sinks=["k"])
        assert s.engine.status() != []
    assert _ids(home, wh) == [1, 2, 3]
    assert _check(home) is not None


def test_every_unfinished_state_starts_spark(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, data, wh = tmp_path / "home", tmp_path / "in", tmp_path / "wh"
    write_json_lines(data, "1.json", [{"id": 1}])
    with icesql.Session(home=home, spark=spark) as s:
        _setup(s, data, wh, clean=True)
        s.run(once=True)
    assert _ids(home, wh) == [1] and not (data / "1.json").exists()  # archived by CLEAN SOURCE
    assert _check(home) == f"no new file in {data}"
    (sink_dir,) = (home / "sinks").iterdir()
    checkpoint = sink_dir / "checkpoint-files"
    assert last_batch(checkpoint) is not None

    monkeypatch.setenv("ICESQL_PRECHECK", "0")  # turned off: every sink starts
    with icesql.Session(home=home) as s:
        assert s.engine._with_input(s.sink_plans(["k"])) == s.sink_plans(["k"])
    monkeypatch.delenv("ICESQL_PRECHECK")

    # a file that appeared since
    write_json_lines(data, "2.json", [{"id": 2}])
    assert _check(home) is None
    (data / "2.json").unlink()
    assert _check(home) is not None

    # the last batch planned and not committed (a run killed during it): it is replayed
    commits = checkpoint / "commits"
    last = max(commits.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    kept = last.read_bytes()
    last.unlink()
    assert _check(home) is None
    last.write_bytes(kept)

    # a batch staged and not committed to the table (killed before the commit)
    staging = sink_dir / "staging"
    staging.mkdir(exist_ok=True)
    from icesql.engine.commit.staging import StagedBatch, Staging

    Staging(staging).add(StagedBatch(batch_id=99))
    assert _check(home) is None
    for p in staging.iterdir():
        p.unlink()
    assert _check(home) is not None

    # CLEAN SOURCE behind the committed files (killed before it archived the last batch)
    cleaned = checkpoint / "icesql-files" / "cleaned.json"
    kept = cleaned.read_bytes()
    cleaned.write_text(json.dumps({"through": 0}))
    assert _check(home) is None
    cleaned.write_bytes(kept)

    # a checkpoint somewhere else (ICESQL_CHECKPOINT_ROOT on an object store): not looked at
    monkeypatch.setenv("ICESQL_CHECKPOINT_ROOT", "s3://bucket/checkpoints")
    assert _check(home) is None
    monkeypatch.delenv("ICESQL_CHECKPOINT_ROOT")

    # a Spark Connect server: its half keeps records of its own
    monkeypatch.setenv("ICESQL_SPARK_MASTER", "sc://127.0.0.1:1")
    assert _check(home) is None
    monkeypatch.delenv("ICESQL_SPARK_MASTER")

    # the source now taken by Spark's own reader, whose checkpoint is newer
    other = sink_dir / "checkpoint" / "commits"
    other.mkdir(parents=True)
    later = (checkpoint / "commits").stat().st_mtime + 5
    os.utime(other, (later, later))
    assert _check(home) is None
    shutil.rmtree(sink_dir / "checkpoint")

    # a lost checkpoint: the first run on a new one
    shutil.rmtree(checkpoint)
    assert _check(home) is None


def test_a_view_or_a_first_run_is_always_run(tmp_path: Path) -> None:
    home, data, wh = tmp_path / "home", tmp_path / "in", tmp_path / "wh"
    write_json_lines(data, "1.json", [{"id": 1}])
    with icesql.Session(home=home) as s:
        _setup(s, data, wh)
        s.execute(
            "CREATE VIEW v AS SELECT id FROM src; CREATE SINK kv FROM v INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'v');"
        )
        for plan in s.sink_plans(["k", "kv"]):
            assert nothing_new(s.engine, plan) is None
        assert s.engine._spark is None
