"""Two processes hammering one store: no corruption, no lost write, unique contiguous versions."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path
from typing import Any

from catalog_store import MIGRATIONS, CatalogStore

ROUNDS = 60


def _hammer(path: str, worker: int, start: Any, results: Any) -> None:
    """Interleave creates, state updates, commit records and version bumps on shared sinks."""
    versions: list[int] = []
    with CatalogStore(path, timeout=30) as store:
        start.wait(30)  # both stores open before either writes, so the writes overlap
        own = f"sink_{worker}"
        store.create_object("sink", own, f"CREATE SINK {own}", {}, [("source", "events")])
        for i in range(ROUNDS):
            store.create_object(
                "view", f"v_{worker}_{i}", "CREATE VIEW ...", {"i": i}, [("source", "events")]
            )
            versions.append(store.bump_sink_version("shared"))
            store.record_sink_commit("shared", rows=worker + 1, nbytes=10, files=1, snapshot_id=i, progress=i)
            store.update_sink_state(own, status="running", last_progress=i)
            with store.transaction():  # a multi-step change another process must not split
                store.create_object("view", f"t_{worker}_{i}", "x", {}, [("view", f"v_{worker}_{i}")])
                store.drop_object("view", f"t_{worker}_{i}")
            store.create_object("source", "events", "s", {}, if_not_exists=True)
    results.put((worker, versions))


def test_two_processes_one_store(tmp_path: Path) -> None:
    path = tmp_path / "home" / "catalog.db"
    with CatalogStore(path) as store:
        store.create_object("source", "events", "s", {})
        store.create_object("sink", "shared", "CREATE SINK shared", {}, [("source", "events")])
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    results = ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(str(path), w, start, results)) for w in (0, 1)]
    for p in procs:
        p.start()
    got = dict(results.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0

    all_versions = got[0] + got[1]
    assert sorted(all_versions) == list(range(1, 2 * ROUNDS + 1))  # unique and contiguous
    for versions in got.values():
        assert versions == sorted(versions)  # each process sees its epochs grow
    with CatalogStore(path) as store:
        assert store._connection().execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert store._connection().execute("PRAGMA foreign_key_check").fetchall() == []
        shared = store.get_sink_state("shared")
        assert shared is not None
        assert shared.version == 2 * ROUNDS
        assert shared.commits == 2 * ROUNDS
        assert shared.rows_committed == ROUNDS * (1 + 2)
        assert shared.files_committed == 2 * ROUNDS
        views = {o.name for o in store.list_objects("view")}
        assert views == {f"v_{w}_{i}" for w in (0, 1) for i in range(ROUNDS)}
        for w in (0, 1):
            state = store.get_sink_state(f"sink_{w}")
            assert state is not None and state.status == "running" and state.last_progress == ROUNDS - 1
        assert len(store.dependents("source", "events")) == 2 * ROUNDS + 3


def test_threads_share_one_store(tmp_path: Path) -> None:
    with CatalogStore(tmp_path / "catalog.db") as store:
        store.create_object("source", "events", "s", {})
        store.create_object("sink", "k", "s", {}, [("source", "events")])
        versions: list[int] = []
        lock = threading.Lock()

        def work() -> None:
            for _ in range(25):
                v = store.bump_sink_version("k")
                with lock:
                    versions.append(v)
                store.record_sink_commit("k", rows=1, nbytes=1, files=1, snapshot_id=None, progress=None)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(versions) == list(range(1, 101))
        assert store.get_sink_state("k").commits == 100  # type: ignore[union-attr]


def _open_new(path: str, worker: int, start: Any, results: Any) -> None:
    start.wait(30)  # both race to create and migrate the same new file
    with CatalogStore(path, timeout=30) as store:
        store.create_object("source", f"s{worker}", "s", {})
        store.create_object("source", "common", "s", {}, if_not_exists=True)
    results.put(worker)


def test_two_processes_create_one_store(tmp_path: Path) -> None:
    path = tmp_path / "new" / "catalog.db"
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_open_new, args=(str(path), w, start, results)) for w in (0, 1)]
    for p in procs:
        p.start()
    assert sorted(results.get(timeout=60) for _ in procs) == [0, 1]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    with CatalogStore(path) as store:
        assert [o.name for o in store.list_objects()] == ["common", "s0", "s1"]
        versions = store._connection().execute("SELECT version FROM schema_migrations").fetchall()
        assert [v for (v,) in versions] == list(range(1, len(MIGRATIONS) + 1))
