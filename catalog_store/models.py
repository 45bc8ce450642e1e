"""Value objects returned by the catalog store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Object kinds, in the order ``find_object`` tries them (relations first: DESCRIBE events).
KINDS: tuple[str, ...] = ("source", "view", "sink", "connection", "secret")

# Sources and views share one namespace: both are relations a sink reads FROM.
NAMESPACES: dict[str, str] = {
    "secret": "secret",
    "connection": "connection",
    "source": "relation",
    "view": "relation",
    "sink": "sink",
}

SINK_STATUSES: tuple[str, ...] = (
    "created",
    "starting",
    "running",
    "retrying",  # failed on a transient cause; restarted at next_attempt_at
    "stopped",
    "failed",
    "fenced",
)


@dataclass(frozen=True)
class StoredObject:
    """One catalog object as stored.

    ``definition`` is the JSON-compatible plan dictionary given at creation (a fresh copy on
    every read). ``dependencies`` lists the (kind, name) pairs it was created with, in order.
    ``object_id`` is a uuid4 fixed for the object's whole life (ALTER keeps it); sinks use it
    as their Iceberg sink id. ``hidden`` marks internal inline secrets.
    """

    kind: str
    name: str
    sql: str
    definition: dict[str, Any]
    dependencies: tuple[tuple[str, str], ...]
    created_at: float
    updated_at: float
    object_id: str
    hidden: bool = False


@dataclass(frozen=True)
class SinkState:
    """A sink's runtime state: status, current version (epoch) and commit counters."""

    name: str
    status: str
    version: int
    rows_committed: int
    bytes_committed: int
    files_committed: int
    commits: int
    last_commit_at: float | None
    last_snapshot_id: int | None
    last_progress: int | None
    last_error: str | None
    updated_at: float
    skipped_records: int = 0  # bad records dropped under ON ERROR = 'skip'
    retry_attempt: int = 0  # restarts after transient failures in the current streak (0: none)
    next_attempt_at: float | None = None  # when a 'retrying' sink is restarted next (epoch seconds)
    dead_letters: int = 0  # bad records committed to the dead-letter table (ON ERROR = 'dead-letter')
    object_id: str = field(default="", compare=False)


@dataclass(frozen=True)
class SinkTableState:
    """One table of a routed sink (TABLE a template): what the sink committed to it, over all its
    runs (``CatalogStore.record_table_commit``)."""

    sink: str
    table: str
    rows_committed: int
    bytes_committed: int
    files_committed: int
    commits: int
    last_commit_at: float | None
    last_snapshot_id: int | None
    last_progress: int | None
    last_error: str | None
    updated_at: float
