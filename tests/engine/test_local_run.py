"""A bounded run without Spark (issue 40): ``run --once`` of a FILES append sink runs its query in
icesql's own process (``engine.local_query``) and must be indistinguishable from Spark's run in
what it leaves behind - the same rows in the same table, and a checkpoint either path takes up.

The exactly-once kill tests run on both paths: ``tests/engine/test_crash.py`` (SIGKILL inside a
file write, after staging, inside the catalog commit, after the commit and before the checkpoint
records the batch, and at random moments)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.engine.backends.checkpoint import RETAIN, CheckpointLog, batch_ids
from icesql.engine.backends.local.query import LocalSession
from tests.support.pipeline_helpers import icesql_summaries, load_table, wait_for, write_json_lines

pytestmark = pytest.mark.spark

SCHEMA = (
    "id BIGINT, name STRING, price DECIMAL(10,2), score DOUBLE, ok BOOLEAN, day DATE, ts TIMESTAMP, "
    "ntz TIMESTAMP_NTZ, tags ARRAY<STRING>, point STRUCT<x: INT, y: INT>"
)


def _rows(start: int, n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "name": f"n{i}" if i % 7 else None,
            "price": f"{i * 1.25:.2f}",
            "score": i / 3,
            "ok": i % 2 == 0,
            "day": f"2026-11-{1 + i % 28:02d}",
            "ts": f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:15:00" + ("Z" if i % 2 else "+02:00"),
            "ntz": f"2026-11-{1 + i % 28:02d} 0{i % 10}:30:00",
            "tags": [f"t{i % 3}", "x"] if i % 5 else [],
            "point": {"x": i, "y": -i} if i % 4 else None,
        }
        for i in range(start, start + n)
    ]


def _setup(s: icesql.Session, data: Path, wh: Path, sinks: tuple[str, ...] = ("k",), options: str = "") -> None:
    s.execute(
        f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');"
        f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'json', SCHEMA = '{SCHEMA}'{options});"
    )
    for name in sinks:
        s.execute(
            f"CREATE SINK {name} FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = '{name}') "
            "PARTITION BY (day(ts), bucket(4, id));"
        )


def _table(home: Path, wh: Path, name: str) -> Any:
    return load_table(home, f"n.{name}", warehouse=wh, catalog_name="lake")


def _content(home: Path, wh: Path, name: str) -> list[dict[str, Any]]:
    return sorted(_table(home, wh, name).scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def _run_local(home: Path, sinks: list[str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.clear()
    with caplog.at_level("INFO", logger="icesql.engine"), icesql.Session(home=home) as s:
        s.run(once=True, sinks=sinks)
        assert s.engine._spark is None  # no JVM was started
    for name in sinks:
        assert f"sink {name}: runs in this process, without starting Spark" in caplog.text


def test_a_run_without_spark_writes_what_spark_writes(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home, data, wh = tmp_path / "home", tmp_path / "in", tmp_path / "wh"
    write_json_lines(data, "1.json", _rows(0, 300))
    write_json_lines(data, "2.json", _rows(300, 200))
    with icesql.Session(home=home) as s:
        _setup(s, data, wh, sinks=("here", "spark"))
    _run_local(home, ["here"], caplog)
    with icesql.Session(home=home, spark=spark) as s:
        s.run(once=True, sinks=["spark"])
    here, there = _table(home, wh, "here"), _table(home, wh, "spark")
    assert here.schema() == there.schema()
    assert here.spec() == there.spec()
    rows = _content(home, wh, "here")
    assert len(rows) == 500
    assert rows == _content(home, wh, "spark")
    # the same files' partitions, and the snapshot says the same progress
    assert icesql_summaries(here)[-1]["icesql.progress"] == icesql_summaries(there)[-1]["icesql.progress"]


def test_runs_with_and_without_spark_take_turns_on_one_checkpoint(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home, data, wh = tmp_path / "home", tmp_path / "in", tmp_path / "wh"
    write_json_lines(data, "1.json", _rows(0, 10))
    with icesql.Session(home=home) as s:
        _setup(s, data, wh, options=", MAX FILES PER TRIGGER = 1")
    _run_local(home, ["k"], caplog)  # a first run: the checkpoint is made here
    write_json_lines(data, "2.json", _rows(10, 10))
    with icesql.Session(home=home, spark=spark) as s:
        s.run(once=True, sinks=["k"])  # Spark takes up batch 1
    write_json_lines(data, "3.json", _rows(20, 10))
    write_json_lines(data, "4.json", _rows(30, 10))
    _run_local(home, ["k"], caplog)  # two batches of one file each, after Spark's
    assert [r["id"] for r in _content(home, wh, "k")] == list(range(40))
    progress = [int(x["icesql.progress"]) for x in icesql_summaries(_table(home, wh, "k"))]
    assert progress == sorted(progress) and progress[-1] == 3
    (checkpoint,) = (home / "sinks").glob("*/checkpoint-files")
    log = CheckpointLog(checkpoint)
    assert log.planned() == log.committed() == [0, 1, 2, 3]
    assert [log.offset(b) for b in range(4)] == [{"seq": n} for n in (1, 2, 3, 4)]
    # every batch's metadata is Spark's (the run without Spark copied it from Spark's batch 1)
    meta = [json.loads((checkpoint / "offsets" / str(b)).read_text().splitlines()[1]) for b in range(4)]
    assert meta[2]["conf"] == meta[1]["conf"] == meta[3]["conf"]
    assert json.loads((checkpoint / "metadata").read_text())["id"]
    write_json_lines(data, "5.json", _rows(40, 5))
    with icesql.Session(home=home, spark=spark) as s:
        s.run(once=True, sinks=["k"])  # and Spark after two batches without it
    assert [r["id"] for r in _content(home, wh, "k")] == list(range(45))


def test_a_batch_only_spark_reads_restarts_the_sink_on_spark(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A malformed record: the Arrow path leaves its file to Spark's reader, which applies ON
    ERROR. The run without Spark stops that batch before staging anything and the sink restarts
    on Spark at once, which replays the batch from the checkpoint: every good row once."""
    home, data, wh = tmp_path / "home", tmp_path / "in", tmp_path / "wh"
    write_json_lines(data, "1.json", _rows(0, 5))
    with icesql.Session(home=home) as s:
        _setup(s, data, wh, options=", ON ERROR = 'skip'")
    _run_local(home, ["k"], caplog)
    good = [json.dumps(r) for r in _rows(5, 4)]
    (data / "2.json").write_text("\n".join([*good[:2], '{"id": 9, "name": ', *good[2:]]) + "\n")
    caplog.clear()
    with caplog.at_level("INFO"), icesql.Session(home=home) as s:  # Spark is started only for the restart
        s.run(once=True, sinks=["k"])
        state = s.store.get_sink_state("k")
        assert s.engine._spark is spark  # (the session's active one, here the tests')
    assert "runs in this process, without starting Spark" in caplog.text
    assert "needs Spark's reader: the sink restarts on Spark" in caplog.text
    assert [r["id"] for r in _content(home, wh, "k")] == list(range(9))
    assert state.status == "stopped"
    assert state.skipped_records == 1


def test_which_sinks_run_without_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, data, wh = tmp_path / "home", tmp_path / "in", tmp_path / "wh"
    data.mkdir()
    with icesql.Session(home=home) as s:
        _setup(s, data, wh)
        s.execute(
            "CREATE SINK up FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'u') KEY (id) MODE UPSERT;"
            "CREATE VIEW v AS SELECT id, name FROM src;"
            "CREATE SINK viewed FROM v INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'v');"
            f"CREATE SOURCE guessed FROM FILES '{data}' (FORMAT = 'parquet');"
            "CREATE SINK pq FROM guessed INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'p');"
        )
        plans = {p.name: p for p in s.sink_plans(["k", "up", "viewed", "pq"])}
        engine = s.engine
        # icesql's own default of 8 shuffle partitions (backends.spark.session.DEFAULT_CONF)
        expected = LocalSession(parallelism=engine_cores(), time_zone="UTC", shuffle_partitions="8")
        assert engine.local_session(plans["k"]) == expected
        assert engine.local_session(plans["up"]) is not None  # reduced per KEY in Arrow (test_local_upsert)
        assert engine.local_session(plans["viewed"]) is None  # a view is Spark SQL
        assert engine.local_session(plans["pq"]) is not None  # its schema from the files' footers
        monkeypatch.setenv("ICESQL_LOCAL_RUN", "0")
        assert engine.local_session(plans["k"]) is None
        monkeypatch.delenv("ICESQL_LOCAL_RUN")
        monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))  # Spark would read settings of its own
        assert engine.local_session(plans["k"]) is None
        assert engine._spark is None


def engine_cores() -> int:
    import os

    return os.cpu_count() or 1


@pytest.mark.parametrize(
    ("master", "conf", "expected"),
    [
        ("local[*]", {}, LocalSession(parallelism=engine_cores())),
        ("local", {}, LocalSession(parallelism=1)),
        ("local[3]", {"spark.sql.session.timeZone": "Europe/Paris"}, LocalSession(3, "Europe/Paris")),
        ("local[2, 4]", {"spark.sql.timestampType": "TIMESTAMP_NTZ"}, LocalSession(2, "UTC", "TIMESTAMP_NTZ")),
        ("local[4]", {"spark.default.parallelism": "6"}, LocalSession(parallelism=6)),
        ("local[2]", {"spark.sql.shuffle.partitions": "3"}, LocalSession(parallelism=2, shuffle_partitions="3")),
        ("spark://host:7077", {}, None),
        ("yarn", {}, None),
        ("sc://localhost:15002", {}, None),
    ],
)
def test_the_session_a_run_without_spark_stands_for(master: str, conf: dict[str, str], expected: Any) -> None:
    assert LocalSession.from_conf(master, conf) == expected


def test_the_checkpoint_log_is_written_as_spark_writes_it(tmp_path: Path) -> None:
    log = CheckpointLog(tmp_path)
    log.ensure_metadata()
    first = (tmp_path / "metadata").read_text()
    log.ensure_metadata()
    assert (tmp_path / "metadata").read_text() == first  # a query keeps its id
    log.write_offsets(0, {"seq": 3})
    lines = (tmp_path / "offsets" / "0").read_text().splitlines()
    assert lines[0] == "v1" and json.loads(lines[2]) == {"seq": 3}
    meta = json.loads(lines[1])
    assert meta["batchWatermarkMs"] == 0 and meta["conf"]["spark.sql.shuffle.partitions"]
    with pytest.raises(FileExistsError):
        log.write_offsets(0, {"seq": 4})  # a batch's offsets are never rewritten
    log.write_commit(0)
    assert (tmp_path / "commits" / "0").read_text() == 'v1\n{"nextBatchWatermarkMs":0}'
    # a later batch copies the conf of the one before (Spark's, when Spark wrote it)
    (tmp_path / "offsets" / "0").write_text("v1\n" + json.dumps({**meta, "conf": {"a": "b"}}) + '\n{"seq": 3}')
    log.write_offsets(1, {"seq": 5})
    assert json.loads((tmp_path / "offsets" / "1").read_text().splitlines()[1])["conf"] == {"a": "b"}
    log.write_commit(1)
    for b in range(2, RETAIN + 5):
        log.write_offsets(b, {"seq": b + 4})
        log.write_commit(b)
    # the newest RETAIN batches are kept, as Spark's minBatchesToRetain keeps them
    assert batch_ids(tmp_path / "offsets") == batch_ids(tmp_path / "commits") == list(range(5, RETAIN + 5))
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_running_sink_without_spark_looks_at_an_idle_source_sooner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark's processing-time trigger looks at the source once an interval, so a file arriving
    just after a look waits the whole interval. Without Spark, an idle local source is looked at
    every ``IDLE_CHECK`` seconds (a stat of the directory), while a batch still starts at most once
    an interval: with an 8 s trigger, a file dropped into an idle sink is committed long before the
    next interval, and one dropped right after that batch waits for the interval (the interval
    set by ``ICESQL_TRIGGER_INTERVAL``)."""
    from icesql.engine.backends.local.query import IDLE_CHECK, LocalQuery, LocalStreamFrame

    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "data"
    data.mkdir()
    interval = 8.0
    monkeypatch.setenv("ICESQL_TRIGGER_INTERVAL", "8")
    with icesql.Session(home=home) as s:
        _setup(s, data, wh)
        assert s.engine.trigger_interval == interval
        s.start(["k"])
        runner = s.engine.runner("k")
        assert isinstance(runner.query, LocalQuery) and runner.query.interval == interval
        time.sleep(1.0)  # the first look found nothing: Spark's next look would be at 8 s
        dropped = time.monotonic()
        write_json_lines(data, "a.json", _rows(0, 10))
        wait_for(lambda: runner.totals["commits"] >= 1, 60, "the first batch")
        first = time.monotonic() - dropped
        write_json_lines(data, "b.json", _rows(10, 10))
        wait_for(lambda: runner.totals["commits"] >= 2, 60, "the second batch")
        second = time.monotonic() - dropped
        s.stop()
    assert first < interval / 2, f"an idle sink took {first:.1f} s to take a new file"
    assert second >= interval - 0.5, f"two batches {second:.1f} s apart: less than the {interval} s interval"
    assert len(_content(home, wh, "k")) == 20
    # the rule itself: cheap looks every IDLE_CHECK s or ten times their cost, never less often
    # than the interval; an object store's listing (a billed request) once an interval
    frame = LocalStreamFrame(lambda: None, runner.relation.df.schema, lambda e: None)
    assert frame.idle_check(1.0, 0.001) == IDLE_CHECK
    assert frame.idle_check(1.0, 0.05) == pytest.approx(0.5)
    assert frame.idle_check(1.0, 0.5) == 1.0
    remote = LocalStreamFrame(lambda: None, runner.relation.df.schema, lambda e: None, cheap_checks=False)
    assert remote.idle_check(1.0, 0.001) == 1.0


@pytest.mark.parametrize(("value", "expected"), [(None, 1.0), ("0.25", 0.25), ("0", 0.1), ("-3", 0.1), ("soon", 1.0)])
def test_the_trigger_interval_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str | None, expected: float
) -> None:
    """``ICESQL_TRIGGER_INTERVAL``: 1 s unset (or unreadable), never below 0.1 s (a running
    query without an interval would look at an idle source in a loop)."""
    from icesql.engine.engine import default_trigger_interval

    if value is None:
        monkeypatch.delenv("ICESQL_TRIGGER_INTERVAL", raising=False)
    else:
        monkeypatch.setenv("ICESQL_TRIGGER_INTERVAL", value)
    assert default_trigger_interval() == expected
