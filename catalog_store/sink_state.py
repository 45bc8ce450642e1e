"""The ``sink_state`` table: a sink's runtime state read, checked and fenced over one connection.

A sink's state row holds its status, its version (the fencing epoch every runner start bumps)
and its commit counters. ``fence`` is what keeps a stale runner from writing: it compares the
version the runner holds with the stored one inside the caller's transaction.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from .errors import StaleVersionError, StoreError
from .models import SINK_STATUSES, SinkState
from .objects import require_id

COUNTERS = (
    "rows_committed",
    "bytes_committed",
    "files_committed",
    "commits",
    "skipped_records",
    "retry_attempt",
    "dead_letters",
)
_OPTIONAL_INTS = ("last_snapshot_id", "last_progress")
_TIMESTAMPS = ("last_commit_at", "next_attempt_at")
STATE_FIELDS = ("status", *COUNTERS, *_TIMESTAMPS, *_OPTIONAL_INTS, "last_error")
# the fields of one table of a routed sink (``sink_table_state``)
TABLE_FIELDS = (*COUNTERS[:4], "last_commit_at", *_OPTIONAL_INTS, "last_error")
_STATE_COLUMNS = (
    "o.name, o.object_id, s.status, s.version, s.rows_committed, s.bytes_committed, "
    "s.files_committed, s.commits, s.last_commit_at, s.last_snapshot_id, s.last_progress, "
    "s.last_error, s.updated_at, s.skipped_records, s.retry_attempt, s.next_attempt_at, s.dead_letters"
)


def is_count(value: object) -> bool:
    """An int that is not a bool (``True`` is no row count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_state_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` for ``update_sink_state``, each checked against its column's type."""
    unknown = sorted(set(fields) - set(STATE_FIELDS))
    if unknown:
        raise StoreError(
            f"unknown sink state field(s) {', '.join(unknown)}; expected some of {', '.join(STATE_FIELDS)}"
        )
    for key, value in fields.items():
        if key == "status":
            if value not in SINK_STATUSES:
                raise StoreError(f"unknown sink status {value!r}; expected one of {', '.join(SINK_STATUSES)}")
        elif key in COUNTERS:
            if not is_count(value) or value < 0:
                raise StoreError(f"{key} must be a non-negative integer")
        elif key in _OPTIONAL_INTS:
            if value is not None and not is_count(value):
                raise StoreError(f"{key} must be an integer or None")
        elif key in _TIMESTAMPS:
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise StoreError(f"{key} must be a timestamp (seconds) or None")
        elif key == "last_error" and value is not None and not isinstance(value, str):
            raise StoreError("last_error must be a string or None")
    return dict(fields)


def fence(conn: sqlite3.Connection, name: str, expected_version: int | None) -> str:
    """The sink's id, its state row made sure of; ``StaleVersionError`` when
    ``expected_version`` is given and the stored version has moved on."""
    object_id = require_id(conn, "sink", name)
    ensure_state(conn, object_id)
    if expected_version is not None:
        row = conn.execute("SELECT version FROM sink_state WHERE object_id = ?", (object_id,)).fetchone()
        if int(row[0]) != expected_version:
            raise StaleVersionError(name, expected_version, int(row[0]))
    return object_id


def ensure_state(conn: sqlite3.Connection, object_id: str) -> None:
    """Give a sink its state row (version 0) when it has none."""
    conn.execute(
        "INSERT OR IGNORE INTO sink_state (object_id, updated_at) VALUES (?, ?)", (object_id, time.time())
    )


def read_sink_state(conn: sqlite3.Connection, name: str) -> SinkState | None:
    """The sink's runtime state (the defaults when it has no row yet), or None for no sink."""
    row = conn.execute(
        f"SELECT {_STATE_COLUMNS} FROM objects o LEFT JOIN sink_state s ON s.object_id = o.object_id "
        "WHERE o.kind = 'sink' AND o.name = ?",
        (name,),
    ).fetchone()
    if row is None:
        return None
    (
        name,
        object_id,
        status,
        version,
        rows,
        nbytes,
        files,
        commits,
        last_at,
        snapshot,
        progress,
        error,
        updated,
        skipped,
        attempt,
        next_at,
        dead_letters,
    ) = row
    if status is None:  # no state row yet: the defaults
        return SinkState(name, "created", 0, 0, 0, 0, 0, None, None, None, None, 0.0, object_id=object_id)
    return SinkState(
        name=name,
        status=status,
        version=version,
        rows_committed=rows,
        bytes_committed=nbytes,
        files_committed=files,
        commits=commits,
        last_commit_at=last_at,
        last_snapshot_id=snapshot,
        last_progress=progress,
        last_error=error,
        updated_at=updated,
        skipped_records=skipped,
        retry_attempt=attempt,
        next_attempt_at=next_at,
        dead_letters=dead_letters,
        object_id=object_id,
    )
