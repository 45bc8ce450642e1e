"""Schema migrations: numbered, recorded, and an old store upgrades in place."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from catalog_store import MIGRATIONS, CatalogStore, StoreError
from catalog_store.migrations import migrate


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_fresh_store_records_every_step(store: CatalogStore) -> None:
    rows = (
        store._connection()
        .execute("SELECT version, description, applied_at FROM schema_migrations")
        .fetchall()
    )
    assert [r[0] for r in rows] == [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert all(r[1] and r[2] > 0 for r in rows)
    assert store.schema_version == len(MIGRATIONS)


def test_old_store_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "catalog.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, upto=1) == [1]
    assert _tables(conn) == {"schema_migrations", "meta", "objects", "dependencies", "secrets"}
    assert "hidden" not in _columns(conn, "objects")
    # Data as the release with schema 1 wrote it.
    rows = [
        ("id-pw", "secret", "pw", "secret", "CREATE SECRET pw AS '********'", "{}"),
        ("id-cat", "connection", "cat", "connection", "CREATE CONNECTION cat ...", '{"type": "rest"}'),
        ("id-src", "source", "events", "relation", "CREATE SOURCE events ...", '{"format": "json"}'),
        ("id-sink", "sink", "s1", "sink", "CREATE SINK s1 ...", '{"mode": "append"}'),
    ]
    conn.executemany(
        "INSERT INTO objects (object_id, kind, name, namespace, sql, definition, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, 1.0, 2.0)",
        rows,
    )
    conn.executemany(
        "INSERT INTO dependencies (object_id, depends_on, position) VALUES (?, ?, ?)",
        [("id-cat", "id-pw", 0), ("id-sink", "id-src", 0), ("id-sink", "id-cat", 1)],
    )
    conn.execute("INSERT INTO secrets (object_id, value) VALUES ('id-pw', 'old-plain-value')")
    conn.close()

    with CatalogStore(path) as store:
        assert store.schema_version == len(MIGRATIONS)
        c = store._connection()
        assert {"sink_state"} <= _tables(c)
        assert "hidden" in _columns(c, "objects") and "encoding" in _columns(c, "secrets")
        assert "skipped_records" in _columns(c, "sink_state")
        assert "dead_letters" in _columns(c, "sink_state")
        assert c.execute("SELECT value FROM meta WHERE key = 'secret_salt'").fetchone() is not None
        sink = store.get_object("sink", "s1")
        assert sink is not None
        assert (sink.object_id, sink.sql, sink.definition) == (
            "id-sink",
            "CREATE SINK s1 ...",
            {"mode": "append"},
        )
        assert sink.dependencies == (("source", "events"), ("connection", "cat"))
        assert (sink.created_at, sink.updated_at, sink.hidden) == (1.0, 2.0, False)
        assert store.get_secret("pw") == "old-plain-value"
        state = store.get_sink_state("s1")  # backfilled by the sink_state step
        assert state is not None and state.status == "created" and state.version == 0
        assert state.skipped_records == 0
        assert (state.retry_attempt, state.next_attempt_at) == (0, None)  # the rebuilt table (step 5)
        assert store.update_sink_state("s1", status="retrying").status == "retrying"
        assert store.bump_sink_version("s1") == 1
        assert store.dependents("secret", "pw") == [("connection", "cat")]
        store.create_secret("inline", "x", hidden=True)
        assert [o.name for o in store.list_objects("secret")] == ["pw"]
    # Reopening applies nothing more.
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn) == []
    conn.close()


def test_migration_steps_are_atomic(tmp_path: Path) -> None:
    from catalog_store.migrations import Migration

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("step failed")

    conn = sqlite3.connect(tmp_path / "c.db", isolation_level=None)
    with pytest.raises(RuntimeError):
        migrate(conn, migrations=(*MIGRATIONS, Migration(len(MIGRATIONS) + 1, "broken", broken)))
    assert "half_done" not in _tables(conn)
    assert [r[0] for r in conn.execute("SELECT version FROM schema_migrations")] == [
        m.version for m in MIGRATIONS
    ]
    conn.close()


def test_store_from_a_newer_release_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    CatalogStore(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("INSERT INTO schema_migrations VALUES (99, 'future', 0)")
    conn.close()
    with pytest.raises(StoreError, match="schema version 99"):
        CatalogStore(path)


def test_connection_settings(store: CatalogStore) -> None:
    conn = store._connection()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000
    assert conn.execute("PRAGMA secure_delete").fetchone()[0] == 1


def test_step_5_keeps_every_sink_state_row(tmp_path: Path) -> None:
    """Step 5 rebuilds sink_state (a CHECK constraint cannot change in place): rows survive."""
    path = tmp_path / "catalog.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, upto=4)
    conn.execute(
        "INSERT INTO objects (object_id, kind, name, namespace, sql, definition, created_at, updated_at) "
        "VALUES ('id-sink', 'sink', 's1', 'sink', 'CREATE SINK s1 ...', '{}', 1.0, 2.0)"
    )
    conn.execute(
        "INSERT INTO sink_state (object_id, status, version, rows_committed, commits, last_error, "
        "updated_at, skipped_records) VALUES ('id-sink', 'failed', 7, 120, 3, 'boom', 5.0, 2)"
    )
    conn.close()
    with CatalogStore(path) as store:
        state = store.get_sink_state("s1")
        assert state is not None
        assert (state.status, state.version, state.rows_committed, state.commits, state.last_error) == (
            "failed",
            7,
            120,
            3,
            "boom",
        )
        assert (state.skipped_records, state.retry_attempt, state.next_attempt_at) == (2, 0, None)
        store.drop_object("sink", "s1")  # the rebuilt table still cascades from objects
        assert store._connection().execute("SELECT count(*) FROM sink_state").fetchone()[0] == 0
