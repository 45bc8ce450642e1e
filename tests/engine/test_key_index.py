"""Upserts through the key index: position deletes, never the wrong row.

Each case runs an upsert sink (the default DELETE MODE: position deletes from the key index) and
reads the table with DuckDB and DataFusion, comparing with an independent replay of the changes.
No equality-delete file is written unless another writer changed the table under a running sink.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from icesql.engine.engine import Engine
from icesql.engine.index.store import IndexStore
from icesql.plan import (
    DeleteMode,
    MaintenancePolicy,
    PartitionFieldPlan,
    SinkMode,
    SinkPlan,
    SourceFormat,
    SourceKind,
    SourcePlan,
    Transform,
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

SCHEMA = "id BIGINT, region STRING, v STRING"


def source(data: Path) -> SourcePlan:
    return SourcePlan(
        "cdc", SourceKind.FILES, path=str(data), format=SourceFormat.DEBEZIUM_JSON, schema=SCHEMA
    )


def sink(**kw: Any) -> SinkPlan:
    return SinkPlan(
        name="u",
        relation="cdc",
        catalog_connection="cat",
        namespace=("ns",),
        table="t",
        key=kw.pop("key", ("id",)),
        mode=SinkMode.UPSERT,
        # the delete files themselves are checked here: no compaction behind the tests' back
        maintenance=kw.pop("maintenance", MaintenancePolicy(automatic=False)),
        **kw,
    )


def engine(
    home: Path, spark: Any, data: Path, state: State, *, source_plan: SourcePlan | None = None, **kw: Any
) -> Engine:
    """An engine whose relation ``cdc`` is ``source_plan`` (default: ``source(data)``)."""
    objects = Objects(
        {"cat": local_catalog(warehouse=home / "warehouse")}, {"cdc": source_plan or source(data)}
    )
    return Engine(
        home, objects=objects, secrets=lambda n: "x", state=state, spark=spark, trigger_interval=0.2, **kw
    )


def c(i: int, v: str, region: str = "eu", lsn: int = 0) -> dict[str, Any]:
    return {"op": "c", "after": {"id": i, "region": region, "v": v}, "source": {"lsn": lsn}}


def u(i: int, v: str, region: str = "eu", lsn: int = 0) -> dict[str, Any]:
    return {
        "op": "u",
        "before": {"id": i, "region": region},
        "after": {"id": i, "region": region, "v": v},
        "source": {"lsn": lsn},
    }


def d(i: int, region: str = "eu", lsn: int = 0) -> dict[str, Any]:
    return {"op": "d", "before": {"id": i, "region": region}, "source": {"lsn": lsn}}


def replay(events: list[dict[str, Any]], key: tuple[str, ...] = ("id",)) -> list[tuple[Any, ...]]:
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    for e in events:
        row = e["before"] if e["op"] == "d" else e["after"]
        k = tuple(row[c] for c in key)
        if e["op"] == "d":
            state.pop(k, None)
        else:
            state[k] = e["after"]
    return sorted(((r["id"], r["region"], r["v"]) for r in state.values()), key=repr)


def foreign_append(table: Any, key: int) -> None:
    """Another writer (pyiceberg) appends a row of key ``key``."""
    row = {"id": pa.array([key], pa.int64()), "region": ["eu"], "v": ["foreign"]}
    table.append(pa.table(row, schema=table.schema().as_arrow()))


def live_deletes(home: Path) -> list[Any]:
    """The live delete files (pyiceberg DataFiles), from the manifests."""
    from icesql.engine.base.pyiceberg_v3 import enable_v3

    enable_v3()
    table = load_table(home, "ns.t")
    return [
        e.data_file
        for manifest in table.current_snapshot().manifests(table.io)
        for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
        if int(e.data_file.content) != 0
    ]


def delete_kinds(home: Path) -> set[int]:
    """The contents of the live delete files (1 position, 2 equality), from the manifests."""
    return {int(f.content) for f in live_deletes(home)}


def index_matches_the_table(spark: Any, home: Path, state: State, key: tuple[str, ...] = ("id",)) -> int:
    """The sink's key index, as a restart opens it without a rebuild (the manifest of the table's
    snapshot, or the last one followed through the commits made since: another writer's append
    after the sink's last commit, a manifest rewrite), holds exactly the (KEY, file, position) of
    every live row of the table, as a rebuild from the table reads them. Returns the entries."""
    from icesql.engine.backends.hashing import key_arrow_fields, key_schema
    from icesql.engine.index import shard as S
    from icesql.engine.index.build import live_entries, plan_live_files
    from icesql.engine.index.follow import follow, table_changes
    from icesql.engine.index.upsert import followable, valid_manifest

    table = load_table(home, "ns.t")
    sink_id = state.sink_id("u")
    store = IndexStore(table.location(), sink_id, {})
    m = valid_manifest(store, table, sink_id=sink_id, key=key)
    if m is None:
        progress = max(p for p, _v, _n in store.manifests())
        base = followable(store, table, sink_id=sink_id, key=key, progress=progress)
        assert base is not None, store.manifests()
        changes = table_changes(table, base[1], sink_id)
        assert changes is not None
        m = follow(table, store, base[0], changes, key=key, progress=progress, version=base[0].version)
    fields = key_arrow_fields(table.schema(), key)
    got = sorted(
        tuple(r.values())
        for chain in m.chains
        for r in S.plain_paths(S.load(store.read_entries, chain, fields)).to_pylist()
    )
    ks = key_schema(table.schema(), key)
    expected = sorted(
        tuple(r.values())
        for p in plan_live_files(table)
        for r in live_entries(table.io, p, key, ks).to_pylist()
    )
    assert got == expected
    return len(got)


def readers_agree(home: Path, expected: list[tuple[Any, ...]]) -> None:
    meta = load_table(home, "ns.t").metadata_location
    assert read_duckdb(meta) == expected
    assert read_datafusion(meta) == expected


def test_updates_and_deletes_by_position_over_several_runs(spark: Any, tmp_path: Path, caplog: Any) -> None:
    home, data, state = tmp_path / "home", tmp_path / "in", State()
    events: list[dict[str, Any]] = []
    batches = [
        [c(i, f"a{i}", lsn=i) for i in range(20)],
        [u(i, f"b{i}", lsn=100 + i) for i in range(0, 20, 2)] + [d(i, lsn=200 + i) for i in range(1, 20, 5)],
        [c(50, "new", lsn=300), u(4, "c4", lsn=301), u(4, "c4-again", lsn=302), d(6, lsn=303)],
    ]
    caplog.set_level(logging.INFO, logger="icesql.sink")
    for n, batch in enumerate(batches):
        write_json_lines(data, f"b{n}.json", batch)
        events += batch
        engine(home, spark, data, state).run([sink()], once=True)
        readers_agree(home, replay(events))
    assert delete_kinds(home) == {1}, "position deletes only: no equality-delete file"
    # the index of the table's progress is reused by the next run, never rebuilt
    builds = [r for r in caplog.records if "key index built" in r.getMessage()]
    assert len(builds) == 1  # the first run, on the empty new table


def test_delete_and_reinsert_in_one_batch_and_delete_of_an_unknown_key(spark: Any, tmp_path: Path) -> None:
    home, data, state = tmp_path / "home", tmp_path / "in", State()
    first = [c(1, "a", lsn=1), c(2, "b", lsn=2)]
    second = [d(1, lsn=10), c(1, "a-again", lsn=11), d(99, lsn=12), c(3, "c", lsn=13), d(3, lsn=14)]
    write_json_lines(data, "1.json", first)
    engine(home, spark, data, state).run([sink()], once=True)
    write_json_lines(data, "2.json", second)
    engine(home, spark, data, state).run([sink()], once=True)
    readers_agree(home, replay(first + second))
    assert replay(first + second) == [(1, "eu", "a-again"), (2, "eu", "b")]


def test_composite_key_and_a_row_moving_to_another_partition(spark: Any, tmp_path: Path) -> None:
    """KEY (id, region) PARTITION BY region: a row 'moves' by a delete in one partition and an
    insert in another; the position delete lands in the partition of the row it deletes."""
    home, data, state = tmp_path / "home", tmp_path / "in", State()
    plan = sink(
        key=("id", "region"), partition_by=(PartitionFieldPlan("region", Transform.IDENTITY, name="region"),)
    )
    first = [c(i, f"v{i}", region="eu" if i % 2 else "us", lsn=i) for i in range(10)]
    second = [
        d(1, region="eu", lsn=20),
        c(1, "moved", region="us", lsn=21),
        u(2, "changed", region="us", lsn=22),
    ]
    write_json_lines(data, "1.json", first)
    engine(home, spark, data, state).run([plan], once=True)
    write_json_lines(data, "2.json", second)
    engine(home, spark, data, state).run([plan], once=True)
    readers_agree(home, replay(first + second, key=("id", "region")))
    table = load_table(home, "ns.t")
    for task in table.scan().plan_files():
        for df in task.delete_files:
            assert df.partition == task.file.partition


def test_a_foreign_append_between_runs_is_followed_into_the_index(
    spark: Any, tmp_path: Path, caplog: Any
) -> None:
    """Another writer appends a row with a key the sink knows; the next run brings the index up
    to date from the other writer's file (not a rebuild of the whole table), so an update of that
    key removes both rows (the table is upserted again)."""
    home, data, state = tmp_path / "home", tmp_path / "in", State()
    write_json_lines(data, "1.json", [c(1, "a", lsn=1), c(2, "b", lsn=2)])
    engine(home, spark, data, state).run([sink()], once=True)
    table = load_table(home, "ns.t")
    foreign_append(table, 1)
    caplog.set_level(logging.INFO, logger="icesql.sink")
    write_json_lines(data, "2.json", [u(1, "a2", lsn=10)])
    engine(home, spark, data, state).run([sink()], once=True)
    messages = [r.getMessage() for r in caplog.records]
    assert any("key index followed the table: 0 file(s) removed, 1 added (1 row(s))" in m for m in messages)
    assert not any("key index built" in m for m in messages)
    readers_agree(home, [(1, "eu", "a2"), (2, "eu", "b")])


def test_a_foreign_append_while_the_sink_runs_deletes_by_equality_then_rebuilds(
    spark: Any, tmp_path: Path
) -> None:
    """A batch is staged against the index; another writer appends a row of one of its keys
    before the commit; the commit also deletes the batch's keys by equality (so the foreign row
    goes too), and the index follows the table for the next batch."""
    from icesql.plan import CommitPolicy

    home, data, state = tmp_path / "home", tmp_path / "in", State()
    write_json_lines(data, "1.json", [c(1, "a", lsn=1), c(2, "b", lsn=2)])
    engine(home, spark, data, state).run([sink()], once=True)
    eng = engine(home, spark, data, state)
    plan = sink(commit=CommitPolicy(maximum_period=3600))  # commits only when flushed
    eng.start_sink(plan)
    runner = eng.runner("u")
    write_json_lines(data, "2.json", [u(2, "b2", lsn=10)])
    wait_for(lambda: runner.status_row()["staged_rows"] == 1, what="the batch staged")
    table = load_table(home, "ns.t")
    foreign_append(table, 2)
    eng.flush("u")
    readers_agree(home, [(1, "eu", "a"), (2, "eu", "b2")])
    write_json_lines(data, "3.json", [u(1, "a3", lsn=20)])
    wait_for(lambda: runner.status_row()["staged_rows"] == 1, what="the next batch staged")
    eng.flush("u")
    eng.stop()
    readers_agree(home, [(1, "eu", "a3"), (2, "eu", "b2")])


def test_missing_index_files_are_rebuilt_from_the_table(spark: Any, tmp_path: Path, caplog: Any) -> None:
    """The index is a cache: S3 Tables' own maintenance (or anyone) may remove its files."""
    home, data, state = tmp_path / "home", tmp_path / "in", State()
    first = [c(i, f"a{i}", lsn=i) for i in range(10)]
    write_json_lines(data, "1.json", first)
    engine(home, spark, data, state).run([sink()], once=True)
    table = load_table(home, "ns.t")
    store = IndexStore(table.location(), state.sink_id("u"), {})
    shard_files = [f for f in store.files() if "/" in f]
    assert shard_files
    store.delete(shard_files[0])
    caplog.set_level(logging.INFO, logger="icesql.sink")
    second = [u(i, f"b{i}", lsn=100 + i) for i in range(10)]
    write_json_lines(data, "2.json", second)
    engine(home, spark, data, state).run([sink()], once=True)
    assert any("key index built" in r.getMessage() for r in caplog.records)
    readers_agree(home, replay(first + second))


def test_delete_mode_equality_keeps_equality_deletes(spark: Any, tmp_path: Path) -> None:
    home, data, state = tmp_path / "home", tmp_path / "in", State()
    events = [c(1, "a", lsn=1), c(2, "b", lsn=2)]
    write_json_lines(data, "1.json", events)
    engine(home, spark, data, state).run([sink(delete_mode=DeleteMode.EQUALITY)], once=True)
    more = [u(1, "a2", lsn=10)]
    write_json_lines(data, "2.json", more)
    engine(home, spark, data, state).run([sink(delete_mode=DeleteMode.EQUALITY)], once=True)
    readers_agree(home, replay(events + more))
    assert delete_kinds(home) == {2}


def test_a_foreign_append_before_the_first_commit(spark: Any, tmp_path: Path) -> None:
    """The table is new, the first batch is staged, and another writer appends first: the first
    commit deletes its keys by equality too, and nothing fails."""
    from icesql.plan import CommitPolicy

    home, data, state = tmp_path / "home", tmp_path / "in", State()
    eng = engine(home, spark, data, state)
    eng.start_sink(sink(commit=CommitPolicy(maximum_period=3600)))
    runner = eng.runner("u")
    write_json_lines(data, "1.json", [c(1, "a", lsn=1), c(2, "b", lsn=2)])
    wait_for(lambda: runner.status_row()["staged_rows"] == 2, what="the first batch staged")
    table = load_table(home, "ns.t")
    foreign_append(table, 2)
    eng.flush("u")
    eng.stop()
    readers_agree(home, [(1, "eu", "a"), (2, "eu", "b")])


def staged_beside_a_foreign_key(spark: Any, tmp_path: Path, key: int) -> tuple[Path, Path, Any, Any]:
    """Keys 1 and 2 committed; a running sink (period of an hour) with ``u(2, 'b2')`` staged, and
    another writer's row of ``key`` appended meanwhile. Returns (home, input dir, engine, runner)."""
    from icesql.plan import CommitPolicy

    home, data, state = tmp_path / "home", tmp_path / "in", State()
    write_json_lines(data, "1.json", [c(1, "a", lsn=1), c(2, "b", lsn=2)])
    engine(home, spark, data, state).run([sink()], once=True)
    eng = engine(home, spark, data, state)
    eng.start_sink(sink(commit=CommitPolicy(maximum_period=3600)))
    runner = eng.runner("u")
    write_json_lines(data, "2.json", [u(2, "b2", lsn=10)])
    wait_for(lambda: runner.status_row()["staged_rows"] == 1, what="the batch staged")
    foreign_append(load_table(home, "ns.t"), key)
    return home, data, eng, runner


def test_a_key_another_writer_appended_while_the_sink_runs_is_upserted_later(
    spark: Any, tmp_path: Path, caplog: Any
) -> None:
    """Another writer appends a key the sink never saw while a batch is staged; after the commit
    the index follows the table (the other writer's file is read; the index is not just the
    batch's manifest, which does not know that row), so the sink's later update of that key
    replaces the other writer's row."""
    home, data, eng, runner = staged_beside_a_foreign_key(spark, tmp_path, 5)
    caplog.set_level(logging.INFO, logger="icesql.sink")
    eng.flush("u")
    assert any(
        "key index followed the table: 0 file(s) removed, 1 added" in r.getMessage() for r in caplog.records
    )
    write_json_lines(data, "3.json", [u(5, "e-sink", lsn=20)])
    wait_for(lambda: runner.status_row()["staged_rows"] == 1, what="the next batch staged")
    eng.flush("u")
    eng.stop()
    readers_agree(home, [(1, "eu", "a"), (2, "eu", "b2"), (5, "eu", "e-sink")])


def test_a_commit_while_a_batch_is_written_leaves_the_index_to_that_batch(spark: Any, tmp_path: Path) -> None:
    """The period timer (here: a flush) commits a stale batch while the next batch is being
    written against the index: the rebuild waits for a commit with no batch in flight (it would
    delete the index files that batch reads and writes, and the batch after it would start from
    an index without its keys), which the batch in flight makes as it ends (reason
    ``maintenance``, long before its period); that commit deletes its keys by equality too."""
    import threading

    home, data, eng, runner = staged_beside_a_foreign_key(spark, tmp_path, 7)

    entered, gate = threading.Event(), threading.Event()
    real = runner.batch_writer

    def gated() -> Any:
        writer = real()

        def write(df: Any, batch_id: int) -> Any:
            entered.set()
            assert gate.wait(120)
            return writer(df, batch_id)

        return write

    runner.batch_writer = gated
    try:
        write_json_lines(data, "3.json", [c(3, "c", lsn=20)])
        assert entered.wait(120), "the next batch started"
        assert runner.batch_started is not None
        eng.flush("u")  # commits the first batch (with equality deletes) while the next one is written
        commits = runner.totals["commits"]
    finally:
        gate.set()
    wait_for(
        lambda: runner.totals["commits"] == commits + 1, what="the batch in flight committed as it ended"
    )
    reasons = [s["icesql.commit-reason"] for s in icesql_summaries(load_table(home, "ns.t"))]
    assert reasons[-2:] == ["flush", "maintenance"]
    write_json_lines(data, "4.json", [u(3, "c2", lsn=30), u(7, "g-sink", lsn=31)])
    wait_for(lambda: runner.status_row()["staged_rows"] == 2, what="the last batch staged")
    eng.flush("u")
    eng.stop()
    assert runner.error is None
    readers_agree(home, [(1, "eu", "a"), (2, "eu", "b2"), (3, "eu", "c2"), (7, "eu", "g-sink")])


@pytest.mark.parametrize(
    "other", ["upsert by position", "upsert by deletion vectors", "upsert by equality", "full compaction"]
)
def test_a_restart_follows_what_another_writer_did_or_rebuilds(
    spark: Any, tmp_path: Path, caplog: Any, other: str
) -> None:
    """Between two runs of sink ``u`` another writer changes the table: a second upsert sink on
    the same table (its position deletes hit ``u``'s rows, or its equality deletes), or a full
    compaction (every file rewritten); on a v3 table the other sink's deletes are deletion
    vectors. The next run of ``u`` follows position deletes, deletion vectors and
    rewrites into its index from the files they wrote (no Spark job over the table), rebuilds
    after equality deletes (which only a read of the whole table can apply to the index), and
    the table is upserted right either way."""
    import dataclasses

    from icesql.engine.maintenance.compact import compact_table

    home, data, state = tmp_path / "home", tmp_path / "in", State()
    first = [c(i, f"a{i}", lsn=i) for i in range(1, 9)]
    write_json_lines(data, "1.json", first)
    version = 3 if other == "upsert by deletion vectors" else 2
    engine(home, spark, data, state).run([sink(format_version=version)], once=True)
    theirs: list[dict[str, Any]] = []
    if other == "full compaction":
        compact_table(load_table(home, "ns.t"))
    else:
        mode = DeleteMode.EQUALITY if other == "upsert by equality" else DeleteMode.POSITION
        theirs = [u(1, "theirs1", lsn=50), d(2, lsn=51), c(20, "theirs20", lsn=52)]
        other_data = tmp_path / "other"
        write_json_lines(other_data, "1.json", theirs)
        other_sink = dataclasses.replace(sink(delete_mode=mode), name="u2")
        engine(home, spark, other_data, state, source_plan=source(other_data)).run([other_sink], once=True)
    caplog.set_level(logging.INFO, logger="icesql.sink")
    second = [u(3, "b3", lsn=100), d(4, lsn=101), u(20, "b20", lsn=102), c(30, "b30", lsn=103)]
    write_json_lines(data, "2.json", second)
    engine(home, spark, data, state).run([sink(format_version=version)], once=True)
    messages = [r.getMessage() for r in caplog.records if "key index" in r.getMessage()]
    if version == 3:
        assert "PUFFIN" in {str(f.file_format).upper().rsplit(".", 1)[-1] for f in live_deletes(home)}
    if other == "upsert by equality":
        assert any("key index built" in m for m in messages), messages
    else:
        assert any("key index followed the table" in m for m in messages), messages
        assert not any("key index built" in m for m in messages), messages
    readers_agree(home, replay(first + theirs + second))
    assert index_matches_the_table(spark, home, state) == len(replay(first + theirs + second))


def test_a_follow_takes_files_read_and_hashed_ahead(spark: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """What a rewrite beside a sink does: the files it wrote are read and hashed before it waits
    for the sink's lock (``hash_files``); the follow under the lock reads none of them, only
    takes off the deletes committed on them since, and gives the index a plain follow gives."""
    from icesql.engine.backends.hashing import key_arrow_fields, key_schema
    from icesql.engine.index import build
    from icesql.engine.index import shard as S
    from icesql.engine.index.build import live_entries, plan_live_files
    from icesql.engine.index.follow import follow, hash_files, table_changes
    from icesql.engine.index.upsert import followable
    from icesql.engine.maintenance.compact import compact_table
    from tests.support.iceberg_tables import position_deletes, sink_commit

    home, data, state = tmp_path / "home", tmp_path / "in", State()
    first = [c(i, f"a{i}", lsn=i) for i in range(1, 40)]
    second = [u(i, f"b{i}", lsn=100 + i) for i in range(1, 40, 3)] + [d(i, lsn=200 + i) for i in range(2, 40, 7)]
    write_json_lines(data, "1.json", first)
    engine(home, spark, data, state).run([sink()], once=True)
    write_json_lines(data, "2.json", second)
    engine(home, spark, data, state).run([sink()], once=True)
    key = ("id",)
    table = load_table(home, "ns.t")
    sink_id = state.sink_id("u")
    store = IndexStore(table.location(), sink_id, {})
    progress = max(p for p, _v, _n in store.manifests())
    base = followable(store, table, sink_id=sink_id, key=key, progress=progress)
    assert base is not None
    rewrite = compact_table(table)  # another writer rewrites every file
    hashed = hash_files(table, rewrite.added_files, key=key, shards=base[0].shards)
    table.refresh()
    first_new = rewrite.added_files[0]
    sink_commit(table, 1, [], [position_deletes(table, {first_new: [0, 2]})], sink_id="another")
    table.refresh()
    changes = table_changes(table, base[1], sink_id)
    assert changes is not None and set(changes.added) == set(rewrite.added_files)
    fields = key_arrow_fields(table.schema(), key)

    def entries(m: Any) -> list[tuple[Any, ...]]:
        return sorted(
            tuple(r.values())
            for chain in m.chains
            for r in S.plain_paths(S.load(store.read_entries, chain, fields)).to_pylist()
        )

    ks = key_schema(table.schema(), key)
    expected = sorted(
        tuple(r.values()) for p in plan_live_files(table) for r in live_entries(table.io, p, key, ks).to_pylist()
    )
    version = base[0].version
    plain = entries(follow(table, store, base[0], changes, key=key, progress=progress, version=version))

    def no_read(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the follow read a file it was given read and hashed")

    monkeypatch.setattr(build, "file_entries", no_read)
    ahead = entries(
        follow(table, store, base[0], changes, key=key, progress=progress, version=version, hashed=hashed)
    )
    assert ahead == plain == expected
    assert len(expected) == len(replay(first + second)) - 2


@pytest.mark.parametrize("fmt", ["orc", "avro"])
def test_the_index_follows_and_rebuilds_from_orc_and_avro_files(tmp_path: Path, caplog: Any, fmt: str) -> None:
    """An upsert sink writing ORC or Avro (run without Spark): its index follows another
    writer's append (pyiceberg's, which writes the table's format through icesql's registry)
    and is rebuilt from the table's files when its own are gone; the table then equals the
    replay, read by icesql (DuckDB and DataFusion read Parquet only)."""
    from icesql.engine.select.tables import read_rows

    home, data, state = tmp_path / "home", tmp_path / "in", State()

    def rows() -> list[tuple[Any, ...]]:
        table = load_table(home, "ns.t")
        return sorted((tuple(r.values()) for r in read_rows(table, table.current_snapshot()).to_pylist()), key=repr)

    first = [c(i, f"a{i}", lsn=i) for i in range(10)]
    write_json_lines(data, "1.json", first)
    engine(home, None, data, state).run([sink(format=fmt)], once=True)
    table = load_table(home, "ns.t")
    assert table.properties["write.format.default"] == fmt
    foreign_append(table, 1)
    caplog.set_level(logging.INFO, logger="icesql.sink")
    second = [u(1, "b1", lsn=100), u(2, "b2", lsn=101)]
    write_json_lines(data, "2.json", second)
    engine(home, None, data, state).run([sink(format=fmt)], once=True)
    messages = [r.getMessage() for r in caplog.records]
    assert any("key index followed the table: 0 file(s) removed, 1 added (1 row(s))" in m for m in messages)
    assert rows() == replay(first + second)
    table = load_table(home, "ns.t")
    store = IndexStore(table.location(), state.sink_id("u"), {})
    for f in [f for f in store.files() if "/" in f]:
        store.delete(f)
    caplog.clear()
    third = [u(i, f"c{i}", lsn=200 + i) for i in range(0, 10, 3)] + [d(5, lsn=300)]
    write_json_lines(data, "3.json", third)
    engine(home, None, data, state).run([sink(format=fmt)], once=True)
    assert any("key index built" in r.getMessage() for r in caplog.records)
    assert rows() == replay(first + second + third)
    assert index_matches_the_table(None, home, state) == len(replay(first + second + third))
    table = load_table(home, "ns.t")
    deletes = [e.data_file for m in table.current_snapshot().manifests(table.io)
               for e in m.fetch_manifest_entry(table.io, discard_deleted=True) if int(e.data_file.content) != 0]
    assert deletes and {str(x.file_format.value) for x in deletes} == {fmt.upper()}
