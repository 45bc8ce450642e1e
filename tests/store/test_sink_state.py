"""Sink runtime state: defaults, updates, commit counters, version bumps and fencing."""

from __future__ import annotations

import pytest

from catalog_store import CatalogStore, ObjectNotFoundError, StaleVersionError, StoreError


@pytest.fixture
def sink_store(store: CatalogStore) -> CatalogStore:
    store.create_object("source", "events", "s", {})
    store.create_object("sink", "s1", "CREATE SINK s1 ...", {"mode": "append"}, [("source", "events")])
    return store


def test_new_sink_has_default_state(sink_store: CatalogStore) -> None:
    state = sink_store.get_sink_state("s1")
    assert state is not None
    assert (state.name, state.status, state.version) == ("s1", "created", 0)
    assert (state.rows_committed, state.bytes_committed, state.files_committed, state.commits) == (0, 0, 0, 0)
    assert (state.last_commit_at, state.last_snapshot_id, state.last_progress, state.last_error) == (
        None,
    ) * 4
    assert state.object_id == sink_store.get_object("sink", "s1").object_id  # type: ignore[union-attr]
    assert sink_store.get_sink_state("nope") is None
    assert sink_store.get_sink_state("events") is None  # a source has no sink state


def test_update_sink_state(sink_store: CatalogStore) -> None:
    state = sink_store.update_sink_state("s1", status="running", last_error=None)
    assert state.status == "running"
    state = sink_store.update_sink_state(
        "s1", status="failed", last_error="boom", last_snapshot_id=2**62, last_progress=7, last_commit_at=1.5
    )
    assert (
        state.status,
        state.last_error,
        state.last_snapshot_id,
        state.last_progress,
        state.last_commit_at,
    ) == (
        "failed",
        "boom",
        2**62,
        7,
        1.5,
    )
    assert sink_store.get_sink_state("s1") == state
    assert sink_store.update_sink_state("s1", skipped_records=3).skipped_records == 3
    assert sink_store.update_sink_state("s1", dead_letters=4).dead_letters == 4
    with pytest.raises(StoreError, match="unknown sink status"):
        sink_store.update_sink_state("s1", status="exploded")
    with pytest.raises(StoreError, match="unknown sink state field"):
        sink_store.update_sink_state("s1", colour="red")
    with pytest.raises(StoreError, match="version"):
        sink_store.update_sink_state("s1", version=99)  # only bump_sink_version moves it
    with pytest.raises(StoreError, match="non-negative"):
        sink_store.update_sink_state("s1", rows_committed=-1)
    with pytest.raises(ObjectNotFoundError):
        sink_store.update_sink_state("nope", status="running")


def test_record_commit_accumulates(sink_store: CatalogStore) -> None:
    sink_store.record_sink_commit("s1", rows=10, nbytes=1000, files=1, snapshot_id=111, progress=0)
    state = sink_store.record_sink_commit(
        "s1", rows=5, nbytes=500, files=2, snapshot_id=222, progress=1, committed_at=42.0
    )
    assert (state.rows_committed, state.bytes_committed, state.files_committed, state.commits) == (
        15,
        1500,
        3,
        2,
    )
    assert (state.last_snapshot_id, state.last_progress, state.last_commit_at) == (222, 1, 42.0)


def test_version_bump_and_fencing(sink_store: CatalogStore) -> None:
    assert sink_store.bump_sink_version("s1") == 1
    assert sink_store.bump_sink_version("s1") == 2
    assert sink_store.get_sink_state("s1").version == 2  # type: ignore[union-attr]
    sink_store.update_sink_state("s1", expected_version=2, status="running")
    with pytest.raises(StaleVersionError) as info:
        sink_store.update_sink_state("s1", expected_version=1, status="stopped")
    assert (info.value.name, info.value.expected, info.value.actual) == ("s1", 1, 2)
    with pytest.raises(StaleVersionError):
        sink_store.record_sink_commit(
            "s1", rows=1, nbytes=1, files=1, snapshot_id=1, progress=1, expected_version=1
        )
    state = sink_store.get_sink_state("s1")
    assert state is not None and state.status == "running" and state.commits == 0
    with pytest.raises(ObjectNotFoundError):
        sink_store.bump_sink_version("nope")


def test_replace_keeps_state_and_drop_removes_it(sink_store: CatalogStore) -> None:
    sink_store.bump_sink_version("s1")
    sink_store.record_sink_commit("s1", rows=1, nbytes=2, files=1, snapshot_id=9, progress=0)
    sink_store.replace_object("sink", "s1", "ALTER", {"mode": "append", "x": 1}, [("source", "events")])
    state = sink_store.get_sink_state("s1")
    assert state is not None and state.version == 1 and state.rows_committed == 1
    sink_store.drop_object("sink", "s1")
    assert sink_store.get_sink_state("s1") is None
    assert sink_store._connection().execute("SELECT count(*) FROM sink_state").fetchone()[0] == 0
    # A new sink with the old name starts from scratch, with a new id.
    sink_store.create_object("sink", "s1", "CREATE SINK s1 ...", {}, [("source", "events")])
    fresh = sink_store.get_sink_state("s1")
    assert fresh is not None and fresh.version == 0 and fresh.commits == 0
    assert fresh.object_id != state.object_id


def test_list_sink_states(sink_store: CatalogStore) -> None:
    sink_store.create_object("sink", "a", "k", {}, [("source", "events")])
    sink_store.bump_sink_version("a")
    states = sink_store.list_sink_states()
    assert [(s.name, s.version) for s in states] == [("a", 1), ("s1", 0)]


def test_retrying_state_carries_the_attempt_and_the_next_attempt_time(sink_store: CatalogStore) -> None:
    state = sink_store.update_sink_state(
        "s1", status="retrying", retry_attempt=3, next_attempt_at=1234.5, last_error="catalog unreachable"
    )
    assert (state.status, state.retry_attempt, state.next_attempt_at, state.last_error) == (
        "retrying",
        3,
        1234.5,
        "catalog unreachable",
    )
    state = sink_store.update_sink_state("s1", status="running", retry_attempt=0, next_attempt_at=None)
    assert (state.status, state.retry_attempt, state.next_attempt_at) == ("running", 0, None)
    with pytest.raises(StoreError, match="next_attempt_at must be a timestamp"):
        sink_store.update_sink_state("s1", next_attempt_at="soon")
    with pytest.raises(StoreError, match="non-negative"):
        sink_store.update_sink_state("s1", retry_attempt=-1)


def test_a_routed_sinks_tables_keep_their_own_state(sink_store: CatalogStore) -> None:
    """One row per table of a routed sink: set field by field (the row made on first use),
    checked like the sink's fields, fenced by the sink's version, dropped with the sink."""
    assert sink_store.sink_tables("s1") == []
    sink_store.update_table_state("s1", "orders", rows_committed=5, commits=1, last_commit_at=2.5, last_snapshot_id=9)
    sink_store.update_table_state("s1", "customers", last_error="table shop.customers: boom")
    sink_store.update_table_state("s1", "orders", rows_committed=7, commits=2, last_progress=3)
    customers, orders = sink_store.sink_tables("s1")
    assert (customers.table, customers.rows_committed, customers.commits, customers.last_error) == (
        "customers",
        0,
        0,
        "table shop.customers: boom",
    )
    assert (orders.rows_committed, orders.commits, orders.last_commit_at, orders.last_snapshot_id) == (7, 2, 2.5, 9)
    assert orders.last_progress == 3 and orders.sink == "s1"
    with pytest.raises(StoreError, match="no state field"):
        sink_store.update_table_state("s1", "orders", status="running")
    with pytest.raises(StoreError, match="non-negative"):
        sink_store.update_table_state("s1", "orders", rows_committed=-1)
    version = sink_store.bump_sink_version("s1")
    with pytest.raises(StaleVersionError):
        sink_store.update_table_state("s1", "orders", commits=3, expected_version=version - 1)
    sink_store.drop_object("sink", "s1")
    assert sink_store.sink_tables("s1") == []
    with sink_store.transaction():
        assert sink_store._connection().execute("SELECT count(*) FROM sink_table_state").fetchone()[0] == 0
    with pytest.raises(ObjectNotFoundError):
        sink_store.update_table_state("s1", "orders", commits=1)
