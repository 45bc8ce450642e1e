"""Spark Connect: the client half of a sink, taking the server half's records into staging.

Under Spark Connect a sink's ``foreachBatch`` (``batch.RemoteBatch``) runs in the server's
Python, which leaves one record per Spark batch in the drop box at the table's location
(``dropbox``). ``Drain`` takes the records in batch order: each is staged durably before its
record is deleted, and the runner's commit policy applies as on classic Spark.

* A batch at or below ``staged_high`` when the query started, or whose record is still waiting,
  is not written again by the server half; records left at or below ``staged_high`` by a kill
  are deleted when the sink next starts (``open``).
* A hole (a record missing while later ones wait) means an older client of the same home took it
  before the new query stopped the old run: its staged entries and commits close the hole
  (``recovery.catch_up``), or a newer version's commit fences this runner.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from icesql.engine.backends.spark.dropbox import DropBox
from icesql.engine.base.hooks import kill_point
from icesql.engine.commit.recovery import catch_up

log = logging.getLogger("icesql.sink")


class Drain:
    """The drop box of one runner (``SinkRunner``) and the thread that empties it."""

    def __init__(self, runner: Any, dropbox: DropBox) -> None:
        self.runner = runner
        self.dropbox = dropbox
        self._gap_reported = -1
        self._thread: threading.Thread | None = None

    def open(self) -> None:
        """On start: delete records the client took already (killed before deleting them), then
        take what the server half of an earlier run wrote while this process was away."""
        for stale in self.dropbox.batch_ids():
            if stale <= self.runner.staged_high:
                self.dropbox.delete(stale)
        self.take(policy=False)

    def take(self, *, policy: bool = True) -> int:
        """Move the waiting records into staging, in batch order, each staged durably before its
        record is deleted; returns how many were taken."""
        r = self.runner
        n = 0
        listed = self.dropbox.batch_ids()  # one listing per pass, outside the commit lock
        if listed is not None and not any(i > r.staged_high for i in listed):
            return n  # the idle case: nothing new
        with r.lock:
            while True:
                batch_id = r.staged_high + 1
                record = self.dropbox.get(batch_id, listed)
                if record is None:
                    if listed and listed[-1] > batch_id and self._close_gap(batch_id):
                        continue
                    return n
                entry = r.stage_rows(list(record.files), batch_id)
                if entry is not None:
                    r.staging.add(entry)
                else:  # nothing to commit, but the next record to look for moves on
                    r.staging.set_cursor(batch_id)
                r.progress.staged_high = batch_id
                kill_point("staged", batch_id)
                self.dropbox.delete(batch_id)
                n += 1
                if policy and r.apply_policy():
                    kill_point("committed", batch_id)

    def _close_gap(self, batch_id: int) -> bool:
        """The record of ``batch_id`` is missing while later ones wait: catch up with what another
        runner of this sink on the same home left. True when there is something to go on after."""
        r = self.runner
        table = r.table if r.version is not None else None
        high = catch_up(
            table,
            r.sink_id,
            r.version if r.version is not None else 0,
            r.staging,
            r.progress,
            name=r.name,
            table_name=r.plan.table_identifier,
        )
        if high >= batch_id:
            log.warning(
                "sink %s: batches %d..%d were taken by another runner of this sink; going on after them",
                r.name,
                batch_id,
                high,
            )
            r.progress.staged_high = high
            return True
        if self._gap_reported != batch_id:
            self._gap_reported = batch_id
            log.warning(
                "sink %s: waiting for the record of batch %d (later ones are there)", r.name, batch_id
            )
        return False

    # ----------------------------------------------------------------- the thread

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._loop, name=f"icesql-drain-{self.runner.name}", daemon=True
        )
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        r = self.runner
        tick = max(0.05, min(0.5, r.trigger_interval / 2))
        while not r.stop_event.wait(tick):
            try:
                self.take()
            except BaseException as e:
                if r.error is None and not r.stopping:
                    r.fail(e)
                    r.stop_query()
                return


__all__ = ["Drain"]
