"""Upserts and changelogs without Spark (issue 39): ``run --once`` of a Debezium FILES sink runs
in icesql's own process (``engine.local_query``) and must leave what Spark's run leaves.

* the differential: the same random changelog (``tests/support/cdc_changelog.py``: a composite
  KEY of a string and a long, several changes of one key in a batch, deletes of absent keys,
  LSN order differing from line order) through sinks run without Spark and sinks run on Spark,
  round after round - position deletes through the key index, equality deletes, and a changelog
  appended - and every table equals the replay and its twin, read by DuckDB and DataFusion;
* turns on one key index: the index is sharded by Spark's hash of the KEY (``index.hashing``
  computes it here), so a key a run without Spark inserted must be found by a batch on Spark and
  the other way round; every round updates or deletes keys the other path wrote, and the table
  never holds two rows of a key;
* a rebuild of the key index without Spark gives Spark's shards, entry for entry.

The SIGKILL cases on this path: ``tests/e2e/test_cdc_randomized.py`` (children run without Spark).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import icesql
from tests.support.cdc_changelog import SCHEMA, Changelog, as_tuples, expected_state, write_round
from tests.support.pipeline_helpers import load_table, wait_for
from tests.support.readers import read_datafusion, read_duckdb

pytestmark = pytest.mark.spark

SINKS = {
    "pos": "KEY (region, id) MODE UPSERT PARTITION BY (region, bucket(4, id))",
    "eq": "KEY (region, id) MODE UPSERT WITH (DELETE MODE = 'equality')",
    "log": "MODE APPEND",
}


def _setup(home: Path, wh: Path, data: Path, names: list[str]) -> None:
    with icesql.Session(home=home) as s:
        s.execute(
            f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');"
            f"CREATE SOURCE cdc FROM FILES '{data}' (FORMAT = 'debezium-json', SCHEMA = '{SCHEMA}');"
        )
        for name in names:
            kind = name.split("_")[0]
            s.execute(
                f"CREATE SINK {name} FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = '{name}') "
                f"{SINKS[kind]}"
            )


def _run(home: Path, spark: Any, sinks: list[str]) -> None:
    with icesql.Session(home=home, spark=spark) as s:
        s.run(once=True, sinks=sinks)
        assert (s.engine._spark is None) == (spark is None), "the run took the other path"


def _rows(home: Path, wh: Path, name: str) -> list[tuple[Any, ...]]:
    meta = load_table(home, f"n.{name}", warehouse=wh, catalog_name="lake").metadata_location
    got = read_duckdb(meta)
    assert read_datafusion(meta) == got
    return got


def _delete_contents(home: Path, wh: Path, name: str) -> set[int]:
    table = load_table(home, f"n.{name}", warehouse=wh, catalog_name="lake")
    out = set()
    for manifest in table.current_snapshot().manifests(table.io):
        for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            out.add(int(e.data_file.content))
    return out - {0}


def test_changes_without_spark_write_what_spark_writes(spark: Any, tmp_path: Path) -> None:
    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "cdc"
    names = [f"{kind}_{path}" for kind in SINKS for path in ("here", "spark")]
    _setup(home, wh, data, names)
    gen = Changelog(11, keys_per_region=60)
    appended: list[Any] = []
    base = time.time()
    for round_no in range(4):
        rnd = gen.next_round(150, max_files=3)
        write_round(data, rnd, base)
        appended += [c for _, changes in rnd.files for c in changes]
        _run(home, None, [n for n in names if n.endswith("_here")])
        _run(home, spark, [n for n in names if n.endswith("_spark")])
        want = as_tuples(expected_state(gen.changes))
        for kind in ("pos", "eq"):
            here = _rows(home, wh, f"{kind}_here")
            assert here == want, f"{kind} after round {round_no}"
            assert _rows(home, wh, f"{kind}_spark") == here
        assert sorted(_rows(home, wh, "log_here"), key=repr) == sorted(_rows(home, wh, "log_spark"), key=repr)
    assert len(_rows(home, wh, "log_here")) == sum(1 for c in gen.changes if c.op != "d")
    assert _delete_contents(home, wh, "pos_here") <= {1}  # position deletes only
    # on both executors a batch writes one position-delete file per partition, not one per
    # partition and key index shard
    assert _deletes_per_partition(home, wh, "pos_here") == 1
    assert _deletes_per_partition(home, wh, "pos_spark") == 1


def _deletes_per_partition(home: Path, wh: Path, name: str) -> int:
    """The most delete files one commit added in one partition."""
    from collections import Counter

    from pyiceberg.manifest import ManifestEntryStatus

    table = load_table(home, f"n.{name}", warehouse=wh, catalog_name="lake")
    most = 0
    for snap in table.snapshots():
        counts: Counter[str] = Counter()
        for manifest in snap.manifests(table.io):
            if manifest.added_snapshot_id != snap.snapshot_id:
                continue
            for e in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                if e.status == ManifestEntryStatus.ADDED and int(e.data_file.content) == 1:
                    counts[repr(e.data_file.partition)] += 1
        most = max(most, *counts.values(), 0)
    return most
    assert _delete_contents(home, wh, "eq_here") <= {2}


def test_runs_with_and_without_spark_take_turns_on_one_key_index(spark: Any, tmp_path: Path) -> None:
    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "cdc"
    _setup(home, wh, data, ["pos_k"])
    # few keys, many changes: most changes of a round hit keys the other path wrote
    gen = Changelog(23, keys_per_region=12)
    base = time.time()
    for round_no, path in enumerate([None, spark, None, None, spark, None]):
        write_round(data, gen.next_round(60, max_files=2), base)
        _run(home, path, ["pos_k"])
        got = _rows(home, wh, "pos_k")
        keys = [(r[0], r[1]) for r in got]
        assert len(keys) == len(set(keys)), f"two rows of a key after round {round_no}"
        assert got == as_tuples(expected_state(gen.changes)), f"round {round_no}"


def test_a_key_index_rebuilt_without_spark_is_sparks(spark: Any, tmp_path: Path) -> None:
    from icesql.engine.backends.hashing import key_arrow_fields
    from icesql.engine.backends.local.frames import LocalBackend
    from icesql.engine.backends.local.query import LocalSession
    from icesql.engine.backends.spark.frames import SparkBackend
    from icesql.engine.index.build import build_index
    from icesql.engine.index.shard import load
    from icesql.engine.index.store import IndexStore

    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "cdc"
    _setup(home, wh, data, ["pos_k"])
    gen = Changelog(5, keys_per_region=200)
    base = time.time()
    for _ in range(2):
        write_round(data, gen.next_round(300, max_files=2), base)
        _run(home, None, ["pos_k"])
    table = load_table(home, "n.pos_k", warehouse=wh, catalog_name="lake")
    built = {}
    on_spark = SparkBackend(spark)
    here = LocalBackend(LocalSession(parallelism=on_spark.parallelism))  # the same cores, so the same shards
    for name, backend in (("here", here), ("spark", on_spark)):
        store = IndexStore(str(tmp_path / "index" / name), "s", {})
        built[name] = (
            build_index(backend, table, store, key=["region", "id"], progress=9, version=1, io_properties={}),
            store,
        )
    (mh, sh), (ms, ss) = built["here"], built["spark"]
    assert mh.shards == ms.shards and mh.shard_keys == ms.shard_keys and mh.keys == ms.keys > 0
    fields = key_arrow_fields(table.schema(), ["region", "id"])
    for shard in range(mh.shards):
        a = load(sh.read_entries, mh.chains[shard], fields).to_pylist()
        b = load(ss.read_entries, ms.chains[shard], fields).to_pylist()
        key = lambda r: (r["region"], r["id"], r["__path"], r["__pos"])  # noqa: E731
        assert sorted(a, key=key) == sorted(b, key=key), f"shard {shard}"


def test_a_running_sink_runs_without_spark(spark: Any, tmp_path: Path) -> None:
    """A sink left running (``Session.start``) with no Spark session given: Spark's processing-time
    trigger in this process, a commit per batch as files arrive; Spark takes up its checkpoint."""
    from icesql.engine.backends.local.query import LocalQuery

    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "cdc"
    _setup(home, wh, data, ["pos_k"])
    gen = Changelog(31, keys_per_region=30)
    base = time.time()
    with icesql.Session(home=home) as s:
        s.start(["pos_k"])
        runner = s.engine.runner("pos_k")
        assert isinstance(runner.query, LocalQuery) and runner.query.interval is not None
        for round_no in range(3):
            commits = runner.totals["commits"]
            write_round(data, gen.next_round(80, max_files=1), base)
            wait_for(lambda: runner.totals["commits"] > commits or not runner.active, 60, "a commit")  # noqa: B023
            assert runner.active, runner.status_row()
            assert _rows(home, wh, "pos_k") == as_tuples(expected_state(gen.changes)), f"round {round_no}"
        assert runner.query.recentProgress  # one record per trigger, as Spark's query keeps them
        s.stop()
        assert s.engine._spark is None
    write_round(data, gen.next_round(80, max_files=1), base)
    _run(home, spark, ["pos_k"])  # Spark takes up the checkpoint and the key index
    assert _rows(home, wh, "pos_k") == as_tuples(expected_state(gen.changes))


def test_a_running_sink_moves_to_spark_when_a_batch_needs_it(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file the Arrow reader cannot read exactly as Spark would (a malformed record under ON
    ERROR = 'skip'): the supervisor restarts the running sink on Spark at once, without a backoff,
    and Spark replays that batch from the checkpoint; every good change is applied once."""
    import json
    import threading

    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "cdc"
    data.mkdir()
    with icesql.Session(home=home) as s:
        s.execute(
            f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');"
            f"CREATE SOURCE cdc FROM FILES '{data}' (FORMAT = 'debezium-json', SCHEMA = 'id BIGINT, v STRING', "
            "ON ERROR = 'skip');"
            "CREATE SINK k FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'k') KEY (id) MODE UPSERT"
        )

    def change(i: int, v: str) -> str:
        return json.dumps({"op": "c", "after": {"id": i, "v": v}, "source": {"lsn": i}})

    (data / "1.json").write_text("\n".join(change(i, "a") for i in range(5)) + "\n")
    caplog.set_level("INFO", logger="icesql")
    with icesql.Session(home=home) as s:
        done = threading.Event()
        thread = threading.Thread(target=lambda: (s.run(sinks=["k"]), done.set()), daemon=True)
        thread.start()
        wait_for(lambda: s.engine._runners.get("k") is not None and s.engine.runner("k").totals["commits"] > 0, 60, "batch 1")
        assert s.engine._spark is None
        (data / ".2.json").write_text("\n".join([change(1, "b"), '{"op": "c", "after": ', change(7, "b")]) + "\n")
        (data / ".2.json").rename(data / "2.json")
        wait_for(lambda: s.engine._spark is not None and s.engine.runner("k").totals["commits"] > 0, 180, "Spark's batch")
        rows = [(0, "a"), (1, "b"), (2, "a"), (3, "a"), (4, "a"), (7, "b")]
        wait_for(lambda: _rows(home, wh, "k") == rows, 60, "the rows")
        state = s.store.get_sink_state("k")
        s.stop()
        thread.join(60)
        assert done.is_set()
    assert state.skipped_records == 1
    assert "needs Spark's reader: the sink restarts on Spark" in caplog.text
    assert "restarting in" not in caplog.text  # at once, not after a backoff


def test_the_key_index_follows_a_rewrite_from_the_shards_the_batches_left_in_this_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A running upsert sink without Spark whose maintenance rewrites its table in the gaps
    between commits (``MAXIMUM DELETE FILES = 1``): the key index follows each rewrite from the
    shards the batches' tasks keep in this process (``index.shard.cached``) and leaves each shard
    there as it is after the rewrite, so the next batch does not load it. What the cache holds for
    the index's chains is what loading those chains from the store gives, and the table stays the
    replay of the changes (the index finds every row it must delete)."""
    import logging

    from icesql.engine.backends.hashing import key_arrow_fields
    from icesql.engine.index import shard as S

    caplog.set_level(logging.INFO, logger="icesql.sink")
    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "cdc"
    with icesql.Session(home=home) as s:
        s.execute(
            f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');"
            f"CREATE SOURCE cdc FROM FILES '{data}' (FORMAT = 'debezium-json', SCHEMA = '{SCHEMA}');"
            "CREATE SINK k FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'k') "
            "KEY (region, id) MODE UPSERT WITH (COMPACTION MINIMUM FILES = 2, MAXIMUM DELETE FILES = 1)"
        )
    gen = Changelog(37, keys_per_region=40)
    base = time.time()
    with icesql.Session(home=home) as s:
        s.start(["k"])
        runner = s.engine.runner("k")
        for round_no in range(5):
            commits = runner.totals["commits"]
            write_round(data, gen.next_round(80, max_files=1), base)
            wait_for(lambda: runner.totals["commits"] > commits or not runner.active, 60, "a commit")  # noqa: B023
            assert runner.active, runner.status_row()
            wait_for(lambda: runner.maintainer.idle(), 60, "the maintenance after the commit")
            assert _rows(home, wh, "k") == as_tuples(expected_state(gen.changes)), f"round {round_no}"
        with runner.lock:
            index = runner.key_index
            store = index.store()
            manifest = runner.drop_batch_writer() or index.manifest
            fields = key_arrow_fields(runner.table.schema(), index.key_columns())
            held = 0
            for shard, chain in enumerate(manifest.chains):
                cached = S.cached(store.root, shard, chain)
                if cached is not None:
                    held += 1
                    loaded = S.load(store.read_entries, chain, fields)
                    assert sorted(cached.to_pylist(), key=repr) == sorted(loaded.to_pylist(), key=repr), shard
        s.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert any("key index followed the table" in m for m in messages), messages
    assert any("step=compact" in m for m in messages), messages
    assert held == len(manifest.chains), f"{held} of {len(manifest.chains)} shards held in this process"

