"""The Spark side of a sink: files → partitioned Iceberg table, commit policy, upsert, fencing."""

from __future__ import annotations

import datetime as dt
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.engine import Engine
from icesql.plan import (
    CommitPolicy,
    OnError,
    PartitionFieldPlan,
    SinkMode,
    SinkPlan,
    SourceFormat,
    SourceKind,
    SourcePlan,
    Transform,
    ViewPlan,
)
from tests.support.pipeline_helpers import (
    Objects,
    State,
    icesql_summaries,
    load_table,
    local_catalog,
    wait_for,
    write_json_lines,
)
from tests.support.readers import read_datafusion, read_duckdb

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc


def events_source(path: Path, **kw: Any) -> SourcePlan:
    return SourcePlan(
        name=kw.pop("name", "events"),
        source_kind=SourceKind.FILES,
        path=str(path),
        format=kw.pop("format", SourceFormat.JSON),
        schema=kw.pop("schema", "id BIGINT, ts TIMESTAMP, v STRING"),
        **kw,
    )


def sink(name: str = "s", table: str = "events", **kw: Any) -> SinkPlan:
    return SinkPlan(
        name=name,
        relation=kw.pop("relation", "events"),
        catalog_connection="cat",
        namespace=("ns",),
        table=table,
        **kw,
    )


def make_engine(
    home: Path, spark: Any, relations: dict[str, Any], state: State | None = None, **kw: Any
) -> Engine:
    objects = Objects({"cat": local_catalog(warehouse=home / "warehouse")}, relations)
    return Engine(
        home,
        objects=objects,
        secrets=lambda n: "x",
        state=state or State(),
        spark=spark,
        trigger_interval=kw.pop("trigger_interval", 0.2),
    )


def ev(i: int) -> dict[str, Any]:
    day = 1 + i % 3
    return {"id": i, "ts": f"2024-01-0{day}T{i % 24:02d}:00:00Z", "v": f"v{i}"}


def expected_rows(ids: range | list[int]) -> list[tuple[Any, ...]]:
    out = []
    for i in ids:
        day = 1 + i % 3
        out.append((i, dt.datetime(2024, 1, day, i % 24), f"v{i}"))
    return sorted(out, key=repr)


# --------------------------------------------------------------------------- files → table, run once twice


class Heard:
    """A ``SinkListener`` that keeps what it hears."""

    def __init__(self) -> None:
        self.commits: list[Any] = []
        self.failures: list[Any] = []
        self.states: list[str] = []

    def on_commit(self, event: Any) -> None:
        self.commits.append(event)

    def on_failure(self, event: Any) -> None:
        self.failures.append(event)

    def on_state(self, event: Any) -> None:
        self.states.append(event.state)


def test_json_files_to_partitioned_table_exactly_once(spark: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    data = tmp_path / "in"
    write_json_lines(data, "f1.json", [ev(i) for i in range(0, 10)])
    write_json_lines(data, "f2.json", [ev(i) for i in range(10, 20)])
    state = State()
    plan = sink(partition_by=(PartitionFieldPlan("ts", Transform.DAY, name="ts_day"),))
    eng = make_engine(home, spark, {"events": events_source(data)}, state)
    heard = Heard()
    eng.add_listener(heard)
    eng.run([plan], once=True)

    table = load_table(home, "ns.events")
    assert table.spec().fields[0].name == "ts_day"
    # listeners hear the commit and the states, with the figures the log line has
    (event,) = heard.commits
    assert (event.sink, event.reason, event.rows, event.delete_files) == ("s", "batch", 20, 0)
    assert event.data_files >= 2 and event.bytes > 0 and event.snapshot_id == table.current_snapshot().snapshot_id
    assert heard.states == ["starting", "running", "stopped"] and heard.failures == []
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(20))
    summ = icesql_summaries(table)
    sid = state.sink_id("s")
    assert summ[-1]["icesql.sink-id"] == sid
    assert summ[-1]["icesql.sink-version"] == "1"
    assert summ[-1]["icesql.commit-reason"] == "batch"
    first_progress = int(summ[-1]["icesql.progress"])

    # more files arrive; a second run (new version) picks up only them
    write_json_lines(data, "f3.json", [ev(i) for i in range(20, 30)])
    eng2 = make_engine(home, spark, {"events": events_source(data)}, state)
    eng2.run([plan], once=True)
    # and a third run with nothing new commits nothing
    eng3 = make_engine(home, spark, {"events": events_source(data)}, state)
    eng3.run([plan], once=True)

    table = load_table(home, "ns.events")
    summ = icesql_summaries(table)
    assert summ[-1]["icesql.sink-version"] == "2"
    assert int(summ[-1]["icesql.progress"]) > first_progress
    assert len(summ) == 2
    ids = sorted(r["id"] for r in table.scan().to_arrow().to_pylist())
    assert ids == list(range(30))
    meta = table.metadata_location
    assert read_duckdb(meta) == expected_rows(range(30))
    assert read_datafusion(meta) == expected_rows(range(30))
    st = state.get("s")
    assert st["status"] == "stopped"
    assert st["rows_committed"] == 30
    assert st["commits"] == 2
    assert st["last_snapshot_id"] == table.current_snapshot().snapshot_id


# --------------------------------------------------------------------------- commit policy


def reasons(home: Path, ident: str = "ns.events") -> list[str]:
    try:
        table = load_table(home, ident)
    except Exception:
        return []
    return [s["icesql.commit-reason"] for s in icesql_summaries(table)]


def test_commit_policy_flush_and_shutdown(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="icesql.sink")
    home, data = tmp_path / "home", tmp_path / "in"
    data.mkdir()
    eng = make_engine(home, spark, {"events": events_source(data)})
    eng.start_sink(sink(commit=CommitPolicy(minimum_size=64 * 1024 * 1024)))
    runner = eng.runner("s")
    write_json_lines(data, "a.json", [ev(i) for i in range(5)])
    wait_for(lambda: runner.status_row()["staged_rows"] == 5, what="staged rows")
    assert reasons(home) == []  # below MINIMUM SIZE and no period: nothing committed
    eng.flush("s")
    assert reasons(home) == ["flush"]
    write_json_lines(data, "b.json", [ev(i) for i in range(5, 12)])
    wait_for(lambda: runner.status_row()["staged_rows"] == 7, what="staged rows")
    eng.stop()
    assert reasons(home) == ["flush", "shutdown"]
    table = load_table(home, "ns.events")
    assert sorted(r["id"] for r in table.scan().to_arrow().to_pylist()) == list(range(12))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("commit sink=s")]
    assert len(lines) == 2
    assert "reason=flush" in lines[0] and "rows=5" in lines[0] and "table=ns.events" in lines[0]
    assert "reason=shutdown" in lines[1] and "rows=7" in lines[1] and "duration=" in lines[1]
    st = eng.status()[0]
    assert st["status"] == "stopped" and st["rows_committed"] == 12 and st["commits"] == 2


def test_commit_policy_size_and_period(spark: Any, tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "in"
    data.mkdir()
    eng = make_engine(home, spark, {"events": events_source(data)})
    # "by_size": every staged batch is above 1 byte → reason size.
    # "by_period": never big enough; once ALTER SINK adds MAXIMUM PERIOD = 1s, the timer commits
    # 1 s after the last commit, even when no batch arrives.
    eng.start_sink(sink("by_size", table="by_size", commit=CommitPolicy(minimum_size=1)))
    eng.start_sink(sink("by_period", table="by_period", commit=CommitPolicy(minimum_size=1 << 30)))
    p = eng.runner("by_period")
    write_json_lines(data, "a.json", [ev(i) for i in range(4)])
    wait_for(lambda: reasons(home, "ns.by_size") == ["size"], what="size commit")
    wait_for(lambda: p.status_row()["staged_rows"] == 4, what="staged rows")
    assert reasons(home, "ns.by_period") == []
    eng.update_sink(
        sink("by_period", table="by_period", commit=CommitPolicy(minimum_size=1 << 30, maximum_period=1.0))
    )
    wait_for(lambda: reasons(home, "ns.by_period") == ["period"], what="period commit")
    # idle: no new batch, nothing staged → no empty commits
    time.sleep(1.5)
    assert reasons(home, "ns.by_period") == ["period"]
    write_json_lines(data, "b.json", [ev(i) for i in range(4, 8)])
    wait_for(lambda: reasons(home, "ns.by_size") == ["size", "size"], what="second size commit")
    wait_for(lambda: reasons(home, "ns.by_period") == ["period", "period"], what="second period commit")
    # the snapshot is visible a moment before the runner clears the entries it covers
    wait_for(lambda: p.status_row()["staged_rows"] == 0, what="staging cleared after the commit")
    eng.stop()
    assert reasons(home, "ns.by_period") == ["period", "period"]  # nothing left for shutdown
    for ident in ("ns.by_size", "ns.by_period"):
        table = load_table(home, ident)
        assert sorted(r["id"] for r in table.scan().to_arrow().to_pylist()) == list(range(8))


# --------------------------------------------------------------------------- upsert


def dbz(
    op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, lsn: int, wrap: bool = False
) -> dict[str, Any]:
    e = {
        "before": before,
        "after": after,
        "op": op,
        "ts_ms": 1700000000000 + lsn,
        "source": {"lsn": lsn, "ts_ms": 1},
    }
    return {"payload": e} if wrap else e


def test_upsert_debezium_changelog(spark: Any, tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "cdc"
    r = lambda i, name, qty: {"id": i, "name": name, "qty": qty}  # noqa: E731
    # batch 0: the update of 1 comes first in the file but has the higher LSN: it wins
    write_json_lines(
        data,
        "0001.json",
        [
            dbz("u", r(1, "a", 1), r(1, "a2", 10), lsn=20),
            dbz("c", None, r(1, "a", 1), lsn=10),
            dbz("c", None, r(2, "b", 2), lsn=11, wrap=True),
            dbz("c", None, r(3, "c", 3), lsn=12),
        ],
    )
    # batch 1: delete 2, update 3 twice, insert 4, snapshot-read 5
    write_json_lines(
        data,
        "0002.json",
        [
            dbz("d", r(2, "b", 2), None, lsn=30),
            dbz("u", r(3, "c", 3), r(3, "c2", 30), lsn=31),
            dbz("u", r(3, "c2", 30), r(3, "c3", 31), lsn=32),
            dbz("c", None, r(4, "d", 4), lsn=33),
            dbz("r", None, r(5, "e", 5), lsn=34),
        ],
    )
    # batch 2: re-insert 2, delete 4, update 5; delete of a key never seen
    write_json_lines(
        data,
        "0003.json",
        [
            dbz("c", None, r(2, "b-again", 22), lsn=40),
            dbz("d", r(4, "d", 4), None, lsn=41),
            dbz("u", r(5, "e", 5), r(5, "e2", 50), lsn=42),
            dbz("d", r(99, "x", 0), None, lsn=43),
        ],
    )
    src = SourcePlan(
        name="cdc",
        source_kind=SourceKind.FILES,
        path=str(data),
        format=SourceFormat.DEBEZIUM_JSON,
        schema="id BIGINT, name STRING, qty INT",
        max_files_per_trigger=1,
    )
    plan = sink("up", table="orders", relation="cdc", key=("id",), mode=SinkMode.UPSERT)
    eng = make_engine(home, spark, {"cdc": src})
    eng.run([plan], once=True)
    table = load_table(home, "ns.orders")
    expected = sorted([(1, "a2", 10), (2, "b-again", 22), (3, "c3", 31), (5, "e2", 50)], key=repr)
    meta = table.metadata_location
    assert read_duckdb(meta) == expected
    assert read_datafusion(meta) == expected
    summ = icesql_summaries(table)
    assert [s["icesql.progress"] for s in summ] == ["0", "1", "2"]
    assert table.schema().identifier_field_names() == {"id"}
    assert [(c.name, c.type) for c in eng.relation_columns("cdc")] == [
        ("id", "bigint"),
        ("name", "string"),
        ("qty", "int"),
    ]


# --------------------------------------------------------------------------- bad records


def test_bad_records_fail_names_source_file_and_field(spark: Any, tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "in"
    write_json_lines(data, "good.json", [ev(1)])
    write_json_lines(
        data, "bad.json", [json_line(ev(2)), '{"id": "two", "ts": "2024-01-01T00:00:00Z", "v": "x"}']
    )
    eng = make_engine(home, spark, {"events": events_source(data)})
    from icesql.engine.sources.guard import BadRecordError

    with pytest.raises(BadRecordError) as ei:
        eng.run([sink()], once=True)
    msg = ei.value.message
    assert "source 'events'" in msg and "bad.json" in msg and "field 'id'" in msg and "record 2" in msg
    st = eng.status()[0]
    assert st["status"] == "failed" and "bad.json" in st["last_error"]


def test_bad_records_skip_counts(spark: Any, tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "in"
    write_json_lines(
        data,
        "a.json",
        [json_line(ev(1)), "not json at all", json_line(ev(2)), '{"id": 3, "ts": "yesterday"}'],
    )
    eng = make_engine(home, spark, {"events": events_source(data)})
    eng.run([sink(on_error=OnError.SKIP)], once=True)  # the sink's WITH (ON ERROR = 'skip')
    table = load_table(home, "ns.events")
    assert sorted(r["id"] for r in table.scan().to_arrow().to_pylist()) == [1, 2]
    assert eng.status()[0]["skipped_records"] == 2


def json_line(d: dict[str, Any]) -> str:
    import json

    return json.dumps(d)


# --------------------------------------------------------------------------- views, generator, Spark views


def test_view_generator_and_spark_temp_view(spark: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    gen = SourcePlan(
        name="gen",
        source_kind=SourceKind.GENERATOR,
        schema="id BIGINT, name STRING, ts TIMESTAMP",
        total_rows=50,
    )
    view = ViewPlan(name="evens", query="SELECT id, name, ts FROM gen WHERE id % 2 = 0", depends_on=("gen",))
    spark.range(7).selectExpr("id", "id * 10 AS x").createOrReplaceTempView("my_batch_view")
    eng = make_engine(home, spark, {"gen": gen, "evens": view})
    assert [c.name for c in eng.relation_columns("evens")] == ["id", "name", "ts"]
    assert [(c.name, c.type) for c in eng.relation_columns("my_batch_view")] == [
        ("id", "bigint"),
        ("x", "bigint"),
    ]
    eng.run(
        [sink("v", table="evens", relation="evens"), sink("b", table="mine", relation="my_batch_view")],
        once=True,
    )
    rows = load_table(home, "ns.evens").scan().to_arrow().to_pylist()
    assert sorted(r["id"] for r in rows) == list(range(0, 50, 2))
    r4 = next(r for r in rows if r["id"] == 4)
    assert r4["name"] == "name-4" and r4["ts"] == dt.datetime(2024, 1, 1, 0, 0, 4, tzinfo=UTC)
    assert sorted(r["x"] for r in load_table(home, "ns.mine").scan().to_arrow().to_pylist()) == [
        0,
        10,
        20,
        30,
        40,
        50,
        60,
    ]
    # a bounded relation runs once: running it again adds nothing
    eng.run([sink("b", table="mine", relation="my_batch_view")], once=True)
    assert len(load_table(home, "ns.mine").scan().to_arrow()) == 7


# --------------------------------------------------------------------------- fencing, concurrent writers


def test_fencing_older_version_refused(spark: Any, tmp_path: Path) -> None:
    from icesql.engine.commit.snapshot import FencedError

    data = tmp_path / "in"
    wh = tmp_path / "warehouse"
    write_json_lines(data, "a.json", [ev(i) for i in range(3)])
    state = State()
    objects = Objects({"cat": local_catalog(warehouse=wh)}, {"events": events_source(data)})

    def engine(home: Path) -> Engine:
        return Engine(
            home, objects=objects, secrets=lambda n: "x", state=state, spark=spark, trigger_interval=0.2
        )

    old = engine(tmp_path / "home-old")
    old.start_sink(sink(commit=CommitPolicy(minimum_size=1 << 30)))
    runner = old.runner("s")
    wait_for(lambda: runner.status_row()["staged_rows"] == 3, what="old runner staged")
    new = engine(tmp_path / "home-new")  # another process, its own checkpoint: version 2
    new.run([sink()], once=True)
    with pytest.raises(FencedError):
        old.flush("s")
    assert runner.status_row()["status"] == "fenced"
    old.stop()
    from pyiceberg.catalog.sql import SqlCatalog

    table = SqlCatalog("cat", uri=f"sqlite:///{wh}/catalog.db", warehouse=wh.as_uri()).load_table("ns.events")
    summ = icesql_summaries(table)
    assert [s["icesql.sink-version"] for s in summ] == ["2"]
    assert len(table.scan().to_arrow()) == 3


def test_concurrent_writer_conflict_is_retried(spark: Any, tmp_path: Path) -> None:
    import pyarrow as pa

    home, data = tmp_path / "home", tmp_path / "in"
    data.mkdir()
    eng = make_engine(home, spark, {"events": events_source(data)})
    eng.start_sink(sink(commit=CommitPolicy(minimum_size=1 << 30)))
    runner = eng.runner("s")
    write_json_lines(data, "a.json", [ev(i) for i in range(5)])
    wait_for(lambda: runner.status_row()["staged_rows"] == 5, what="staged")
    table = runner.table
    other = load_table(home, "ns.events")
    foreign = pa.Table.from_pylist(
        [{"id": 1000, "ts": dt.datetime(2024, 1, 1, tzinfo=UTC), "v": "foreign"}],
        schema=other.schema().as_arrow(),
    )
    real_refresh = table.refresh
    calls = {"n": 0}

    def racing_refresh() -> Any:
        out = real_refresh()
        calls["n"] += 1
        if calls["n"] == 1:  # another writer commits right after our reload: our commit conflicts
            load_table(home, "ns.events").append(foreign)
        return out

    table.refresh = racing_refresh  # type: ignore[method-assign]
    result = runner.flush()
    table.refresh = real_refresh  # type: ignore[method-assign]
    assert result.attempts >= 2
    eng.stop()
    final = load_table(home, "ns.events")
    assert sorted(r["id"] for r in final.scan().to_arrow().to_pylist()) == [0, 1, 2, 3, 4, 1000]
