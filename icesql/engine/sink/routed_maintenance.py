"""The maintenance of a routed sink's tables (issue 53), each as a single-table sink's.

A routed sink (``sink.routed``) commits each of its tables through the ``Committing`` a
single-table sink commits with, and that calls its table's maintainer after each commit. Each
table's maintainer is a ``sink.maintainer.Maintainer`` bound to the table's ``TableSink`` (which
answers what a maintainer asks of its runner: the table, its plan and policy, key index, staging,
commit clock, the sink's lock and stop): the same steps, under the sink's MAINTENANCE options, in
the gaps between the sink's commits; a compaction of an upsert table followed by its key index.

Bounded cost: a table's maintainer is made when the table commits (``of``), and let go with its
writer and key index when the table is idle in a batch and its maintenance has nothing running,
deferred or left to plan (``release``): tables with nothing new are not looked at, and only the
few timestamps of the timed steps (expiration, orphan cleanup) are kept per table let go, so that
such a step is not due again at once when the table comes back. Rewrites beside the sink run one
at a time across the tables (a table whose compaction is due while another's runs plans it again
after its next commit). At the end of a ``run --once`` (or a stop) each table's due rewrite that
applies delete files is handed to the sink's next run, a note in the table's own staging
directory; the next run starts them beside its batches, one at a time (``at_start``: the first
table noted whose rewrite is still due; the others' notes wait for a later run, or their tables'
commits find the rewrite due again). A table's key index opens as the run first writes to it,
before the rewrite started beside it commits (after the table's first commit of the run).

``RoutedMaintainer`` is the routed runner's maintainer: the hooks a ``Maintainer`` offers a
runner, each over the tables' maintainers of the moment.
"""

from __future__ import annotations

import threading
from typing import Any

from icesql.engine.sink.maintainer import Maintainer


class RoutedMaintainer:
    """A routed sink's maintenance: a ``Maintainer`` per table that committed lately."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.tables: dict[str, Maintainer] = {}  # by table name: the tables' maintainers of the moment
        self.kept: dict[str, tuple[dict[Any, float], int | None]] = {}  # of tables let go: when each step ran
        self.runs_before = 0  # the steps of maintainers let go
        self.last: str | None = None  # the last step's line, naming its table, for the status
        self._lock = threading.RLock()

    @property
    def runs(self) -> int:
        with self._lock:
            return self.runs_before + sum(m.runs for m in self.tables.values())

    def of(self, table: Any) -> Maintainer:
        """The maintainer of ``table`` (a ``routed.TableSink``), made when it is first asked for
        (as the table commits)."""
        name = table.table_name
        with self._lock:
            m = self.tables.get(name)
            if m is None:
                m = Maintainer(
                    table,
                    others_busy=lambda: self.busy(but=name),
                    on_report=lambda line: self._reported(table, line),
                )
                m.last_run, m.metadata_checked = self.kept.pop(name, ({}, None))
                self.tables[name] = m
            return m

    def _reported(self, table: Any, line: str) -> None:
        self.last = f"{table.plan.table_identifier} {line}"

    def holds(self, name: str) -> bool:
        """Whether table ``name``'s maintenance has something running, deferred or to plan."""
        with self._lock:
            m = self.tables.get(name)
            return m is not None and not m.idle()

    def release(self, name: str) -> None:
        """Let an idle table's maintainer go (unless it has something running or deferred),
        keeping only when its timed steps ran."""
        with self._lock:
            m = self.tables.get(name)
            if m is None or not m.idle():
                return
            del self.tables[name]
            self.runs_before += m.runs
            if m.last_run or m.metadata_checked is not None:
                self.kept[name] = (m.last_run, m.metadata_checked)

    def _each(self) -> list[Maintainer]:
        with self._lock:
            return list(self.tables.values())

    # ----------------------------------------------------------------- the runner's hooks

    def after_commit(self) -> None:
        """The routed runner commits table by table: each table's maintainer is called by the
        table's own commit (``Committing.commit``)."""

    def committed_unplanned(self) -> None:
        """As ``after_commit``: each table's maintainer hears of its table's shutdown commit."""

    def before_batch(self) -> None:
        for m in self._each():
            m.before_batch()

    def wants_gap(self) -> bool:
        return any(m.wants_gap() for m in self._each())

    def at_start(self) -> None:
        """The sink is prepared (its tables recovered): the rewrite a table's note hands over
        starts beside the sink, for one table at a time (``Maintainer.at_start``; a table whose
        rewrite is due no more has its note dropped, and the next table's is looked at)."""
        with self.runner.tables_lock:
            tables = [self.runner.tables[name] for name in sorted(self.runner.tables)]
        for t in tables:
            if self.busy():
                return
            if t.table is not None and t.staging.rewrite_due() is not None:
                self.of(t).at_start()

    def at_end(self) -> None:
        """A run that ends by itself: each table's rewrite beside the sink that applies delete
        files let finish, one table after the other, and each table's due one handed over."""
        for m in self._each():
            m.at_end()

    def at_stop(self) -> None:
        """The sink stopped: each table's due rewrite handed to the next run."""
        for m in self._each():
            m.at_stop()

    def busy(self, but: str | None = None) -> bool:
        """Whether a table's rewrite runs beside the sink (``but``: another table's than this)."""
        with self._lock:
            return any(m.busy() for name, m in self.tables.items() if name != but)

    def idle(self) -> bool:
        return all(m.idle() for m in self._each())

    def join(self, timeout: float | None = None) -> None:
        for m in self._each():
            m.join(timeout)


__all__ = ["RoutedMaintainer"]
