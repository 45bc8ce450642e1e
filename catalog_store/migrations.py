"""Numbered schema migrations, sqlite-utils style.

Each step runs in its own ``BEGIN IMMEDIATE`` transaction and is recorded in
``schema_migrations`` (version, description, applied_at) in that same transaction, so a crash
leaves the store at a whole version and two processes opening an old store at once apply each
step exactly once. Steps are append-only: never edit a released step, add a new one.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .errors import StoreError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Migration:
    """One schema step: ``apply`` runs inside an open transaction on the connection."""

    version: int
    description: str
    apply: Callable[[sqlite3.Connection], None]


def _run(*statements: str) -> Callable[[sqlite3.Connection], None]:
    # Not executescript(): it commits first, which would break the step's transaction.
    def apply(conn: sqlite3.Connection) -> None:
        for statement in statements:
            conn.execute(statement)

    return apply


_V1 = _run(
    """CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE objects (
        object_id  TEXT PRIMARY KEY,
        kind       TEXT NOT NULL CHECK (kind IN ('secret', 'connection', 'source', 'view', 'sink')),
        name       TEXT NOT NULL,
        namespace  TEXT NOT NULL,   -- sources and views share 'relation'
        sql        TEXT NOT NULL,
        definition TEXT NOT NULL,   -- JSON
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        UNIQUE (namespace, name)
    )""",
    """CREATE TABLE dependencies (
        object_id  TEXT NOT NULL REFERENCES objects (object_id) ON DELETE CASCADE,
        depends_on TEXT NOT NULL REFERENCES objects (object_id) ON DELETE RESTRICT,
        position   INTEGER NOT NULL,
        PRIMARY KEY (object_id, depends_on)
    )""",
    """CREATE TABLE secrets (
        object_id TEXT PRIMARY KEY REFERENCES objects (object_id) ON DELETE CASCADE,
        value     TEXT NOT NULL
    )""",
)

_V2 = _run(
    """CREATE TABLE sink_state (
        object_id        TEXT PRIMARY KEY REFERENCES objects (object_id) ON DELETE CASCADE,
        status           TEXT NOT NULL DEFAULT 'created'
                         CHECK (status IN ('created', 'starting', 'running', 'stopped', 'failed', 'fenced')),
        version          INTEGER NOT NULL DEFAULT 0,
        rows_committed   INTEGER NOT NULL DEFAULT 0,
        bytes_committed  INTEGER NOT NULL DEFAULT 0,
        files_committed  INTEGER NOT NULL DEFAULT 0,
        commits          INTEGER NOT NULL DEFAULT 0,
        last_commit_at   REAL,
        last_snapshot_id INTEGER,
        last_progress    INTEGER,
        last_error       TEXT,
        updated_at       REAL NOT NULL
    )""",
    # Sinks created before this step get a fresh state row.
    """INSERT INTO sink_state (object_id, updated_at)
       SELECT object_id, updated_at FROM objects WHERE kind = 'sink'""",
)


def _v3(conn: sqlite3.Connection) -> None:
    _run(
        "ALTER TABLE objects ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0",
        # 'plain' or 'fernet-scrypt-v1' (see crypto.py); values written before are plain.
        "ALTER TABLE secrets ADD COLUMN encoding TEXT NOT NULL DEFAULT 'plain'",
        "CREATE INDEX dependencies_depends_on ON dependencies (depends_on)",
    )(conn)
    # The per-store salt for deriving the encryption key from ICESQL_SECRET_KEY.
    conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('secret_salt', ?)", (os.urandom(16).hex(),))


# SQLite cannot change a CHECK constraint in place: step 5 rebuilds sink_state with the new
# status and the retry columns, copying every row. Nothing references sink_state, so dropping
# it is safe with foreign keys on.
_V5 = _run(
    """CREATE TABLE sink_state_v5 (
        object_id        TEXT PRIMARY KEY REFERENCES objects (object_id) ON DELETE CASCADE,
        status           TEXT NOT NULL DEFAULT 'created'
                         CHECK (status IN ('created', 'starting', 'running', 'retrying', 'stopped',
                                           'failed', 'fenced')),
        version          INTEGER NOT NULL DEFAULT 0,
        rows_committed   INTEGER NOT NULL DEFAULT 0,
        bytes_committed  INTEGER NOT NULL DEFAULT 0,
        files_committed  INTEGER NOT NULL DEFAULT 0,
        commits          INTEGER NOT NULL DEFAULT 0,
        last_commit_at   REAL,
        last_snapshot_id INTEGER,
        last_progress    INTEGER,
        last_error       TEXT,
        updated_at       REAL NOT NULL,
        skipped_records  INTEGER NOT NULL DEFAULT 0,
        retry_attempt    INTEGER NOT NULL DEFAULT 0,
        next_attempt_at  REAL
    )""",
    """INSERT INTO sink_state_v5 (object_id, status, version, rows_committed, bytes_committed,
           files_committed, commits, last_commit_at, last_snapshot_id, last_progress, last_error,
           updated_at, skipped_records)
       SELECT object_id, status, version, rows_committed, bytes_committed, files_committed,
           commits, last_commit_at, last_snapshot_id, last_progress, last_error, updated_at,
           skipped_records
       FROM sink_state""",
    "DROP TABLE sink_state",
    "ALTER TABLE sink_state_v5 RENAME TO sink_state",
)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "objects, dependencies, secrets", _V1),
    Migration(2, "sink runtime state", _V2),
    Migration(3, "hidden objects, encrypted secrets, reverse dependency index", _v3),
    Migration(
        4,
        "count of records skipped by ON ERROR = 'skip'",
        _run("ALTER TABLE sink_state ADD COLUMN skipped_records INTEGER NOT NULL DEFAULT 0"),
    ),
    Migration(5, "sinks restarted after a transient failure: status 'retrying', attempt, next attempt", _V5),
    Migration(
        6,
        "count of records committed to a dead-letter table (ON ERROR = 'dead-letter')",
        _run("ALTER TABLE sink_state ADD COLUMN dead_letters INTEGER NOT NULL DEFAULT 0"),
    ),
    Migration(
        7,
        "what a routed sink committed to each of its tables",
        _run(
            """CREATE TABLE sink_table_state (
                object_id        TEXT NOT NULL REFERENCES objects (object_id) ON DELETE CASCADE,
                table_name       TEXT NOT NULL,
                rows_committed   INTEGER NOT NULL DEFAULT 0,
                bytes_committed  INTEGER NOT NULL DEFAULT 0,
                files_committed  INTEGER NOT NULL DEFAULT 0,
                commits          INTEGER NOT NULL DEFAULT 0,
                last_commit_at   REAL,
                last_snapshot_id INTEGER,
                last_progress    INTEGER,
                last_error       TEXT,
                updated_at       REAL NOT NULL,
                PRIMARY KEY (object_id, table_name)
            )"""
        ),
    ),
)


def _ensure_table(conn: sqlite3.Connection) -> None:
    conn.execute(
        """CREATE TABLE IF NOT EXISTS schema_migrations (
            version     INTEGER PRIMARY KEY,
            description TEXT NOT NULL,
            applied_at  REAL NOT NULL
        )"""
    )


def applied_versions(conn: sqlite3.Connection) -> list[int]:
    """The migration versions recorded in the store, ascending."""
    _ensure_table(conn)
    return [int(row[0]) for row in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]


def migrate(
    conn: sqlite3.Connection,
    upto: int | None = None,
    migrations: Sequence[Migration] = MIGRATIONS,
) -> list[int]:
    """Apply every missing step up to ``upto`` (all by default); returns the versions applied.

    ``conn`` must be in autocommit mode (``isolation_level=None``). Raises ``StoreError`` when
    the store was written by a newer release that knows steps this one does not.
    """
    known = max((m.version for m in migrations), default=0)
    applied: list[int] = []
    for migration in migrations:
        if upto is not None and migration.version > upto:
            break
        conn.execute("BEGIN IMMEDIATE")
        try:
            _ensure_table(conn)
            done = {int(r[0]) for r in conn.execute("SELECT version FROM schema_migrations")}
            newest = max(done, default=0)
            if newest > known:
                raise StoreError(
                    f"the catalog store is at schema version {newest}, but this release only "
                    f"knows versions up to {known}",
                    hint="upgrade icesql (or point --home at another directory)",
                )
            if migration.version not in done:
                migration.apply(conn)
                conn.execute(
                    "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.description, time.time()),
                )
                applied.append(migration.version)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    if applied:
        log.info("catalog store schema migrated: applied %s", ", ".join(map(str, applied)))
    return applied
