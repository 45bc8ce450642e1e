"""What a running sink tells the world besides its state: events for metrics and tests.

``Engine.add_listener(listener)`` registers a ``SinkListener``; every runner calls its methods
from its own threads (commit, timer, drain, watch), so a listener must be quick and
thread-safe, and it never holds a secret: events carry names, counts and error messages that
are already secret-free. A listener that raises is logged and otherwise ignored: observing a
sink never fails it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger("icesql.sink")


@dataclass(frozen=True)
class CommitEvent:
    sink: str
    table: str
    reason: str  # size, period, flush, shutdown, batch, recovery
    rows: int
    deletes: int
    bytes: int
    data_files: int
    delete_files: int
    batches: int
    progress: int
    snapshot_id: int | None
    duration: float  # seconds, the catalog commit included
    attempts: int  # 1 + conflicts retried
    skipped: bool  # the progress was already committed (a recovery found it there)
    # bad records committed to the dead-letter table with this commit, per reason
    dead_letters: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class FailureEvent:
    sink: str
    kind: str  # the error class name: BadRecordError, FencedError, ExecutionError, ...
    message: str
    transient: bool


@dataclass(frozen=True)
class MaintenanceEvent:
    sink: str
    step: str  # compact, expire, remove-metadata, remove-orphans, rewrite-manifests
    summary: str  # what it did, one line (files before/after, snapshots, bytes, time)
    duration: float


@dataclass(frozen=True)
class StateEvent:
    sink: str
    state: str  # starting, running, retrying (supervisor), stopped, failed, fenced


class SinkListener(Protocol):
    def on_commit(self, event: CommitEvent) -> None: ...

    def on_failure(self, event: FailureEvent) -> None: ...

    def on_state(self, event: StateEvent) -> None: ...

    def on_maintenance(self, event: MaintenanceEvent) -> None: ...


class Listeners:
    """The listeners of one engine; each call reaches every listener, whatever the others do."""

    def __init__(self) -> None:
        self._listeners: list[SinkListener] = []

    def add(self, listener: SinkListener) -> None:
        self._listeners.append(listener)

    def remove(self, listener: SinkListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _each(self, method: str, event: object) -> None:
        for listener in list(self._listeners):
            fn = getattr(listener, method, None)
            if fn is None:
                continue
            try:
                fn(event)
            except Exception:  # observing a sink never fails it
                log.exception("sink listener %r failed in %s", listener, method)

    def commit(self, event: CommitEvent) -> None:
        self._each("on_commit", event)

    def failure(self, event: FailureEvent) -> None:
        self._each("on_failure", event)

    def state(self, event: StateEvent) -> None:
        self._each("on_state", event)

    def maintenance(self, event: MaintenanceEvent) -> None:
        self._each("on_maintenance", event)


__all__ = ["CommitEvent", "FailureEvent", "Listeners", "MaintenanceEvent", "SinkListener", "StateEvent"]
