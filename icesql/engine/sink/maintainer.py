"""Table maintenance driven by a running sink: between its own commits, never racing them.

The runner calls ``after_commit()`` after every commit it makes (holding its commit lock, with
nothing staged). The maintainer then plans the table's maintenance (``maintenance.planner``,
under the sink's ``MaintenancePolicy``) and:

* runs **one small step** now (snapshot expiration, a manifest rewrite, one slice of orphan-file
  cleanup, a small compaction), when the time left before the sink's next commit is due allows
  it (MAXIMUM PERIOD minus what has passed, or ``SMALL_STEP_BUDGET`` without a period); a due
  compaction runs at least every other gap (each commit may add delete files, and those are what
  slow readers down), the other steps take turns between, so a sink committing every second
  spreads them over its commits. A small compaction expected to take longer than that time runs
  beside the sink instead, as a large one does (below): the expectation is what the compactions
  run in a gap took lately (``_gap_seconds``, a moving average), and each compaction run beside
  halves it, so that a machine that is busy for a while moves compactions out of the gaps and
  one that calms down takes them back;
* removes the **metadata files** the table's metadata log has dropped, when due (every
  ``metadata_check_versions`` versions): one listing of the metadata directory, no commit and no
  manifest read, so it takes no turn and runs in the same gap, before the step;
* starts a **large compaction** beside the sink, on a thread of its own: it reads and writes
  without the lock, then waits for a gap (the lock, nothing staged) to commit. Its commit goes on
  top of the sink's commits made meanwhile (``compact``'s rebase); position deletes the sink
  committed meanwhile on rows it rewrote are carried over through the sink's keys
  (``carry_over``), so the compaction never loses the race and never undoes an upsert. What it
  can do before the gap it does before (the deletes committed so far carried over, the written
  files' key-index entries read and hashed: ``_hash_written``); the gap holds the sink up only
  for what came since, the commit and the index's follow (logged as ``held=``). A ``run --once``
  starts it only as its next batch begins: its last batch is followed by the stop, not by a gap;
* at the end of a run that ends by itself (``run --once``, a bounded relation), runs **no rewrite
  in the foreground**: a compaction still due then that applies delete files (one its last commit
  put off to a next batch the run does not have, or one its shutdown commit made due) is **handed
  to the sink's next run** (``at_end``; ``at_stop`` does the same for a stopped running sink): a
  durable note in the sink's staging directory, read as the next run starts (``at_start``), which
  starts the rewrite beside its first batch and lets it commit in a gap after its first commit
  (at the latest the one its end leaves: ``at_end`` lets a rewrite beside the sink that applies
  delete files finish, as it does one a batch of the run started). A scheduled ``run --once``
  thus returns as soon as its input is committed, and a table fed only by such runs is still
  rewritten, one run later. What a ``run --once`` does between its commits is a running sink's:
  small compactions (an append sink's merges of small files) in the gaps, large ones beside its
  next batch; a merge without deletes still due at its end is left to later runs.

A rewrite of an upsert sink's table (small or large) commits only in a gap with nothing staged and
no batch being written (batches are written against the key index, which it moves). A sink that
commits by its period timer does so while its next batch is being written, so such gaps come
only from a commit at the end of a batch: while a compaction waits for one (``wants_gap``), the
runner commits each batch as it ends (reason ``maintenance``), before its period is over.

After a step that moved rows (a compaction), the key index of an upsert sink follows them before
the next batch (the index must say where every key's row is: ``index.follow`` reads the keys of
the files the rewrite wrote; a rebuild from the table when it cannot); a step that did not (a manifest
rewrite) only moves the index's snapshot on. Orphan-file cleanup never deletes a file a staged
batch names, and its safety age reaches back past the oldest batch or rewrite in flight.

Every step logs one line (``maintenance sink=... step=... ``) and is counted in the sink's status
and its listeners' ``on_maintenance`` (metrics); the metadata cleanup only when it deleted (or
failed to delete) something, since it runs every few commits and mostly finds nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from icesql.engine.base.events import MaintenanceEvent

log = logging.getLogger("icesql.sink")

SMALL_STEP_BUDGET = 5.0  # seconds a step may take between two commits of a sink without a period
GAP_WAIT = 0.2  # how often a finished compaction looks for a gap to commit in
GAP_AVERAGE = 0.5  # weight of the newest in-gap compaction in the moving average of their times


def _one_line(e: BaseException) -> str:
    """An error for a warning line: icesql's own by its message (``str`` would render its
    headline and hint on lines of their own), any other as it prints."""
    return getattr(e, "message", None) or str(e)


def describe(result: Any, held: float | None = None) -> str:
    """What a step did, in one line (files, snapshots, bytes, time); ``held``: a compaction that
    ran beside the sink (only its commit took a gap between the sink's commits), and the seconds
    it held the sink's commit lock for that."""
    kind = getattr(getattr(result, "kind", None), "value", getattr(result, "kind", "compact"))
    d = f"{getattr(result, 'duration', 0.0):.2f}s"
    if hasattr(result, "data_files_after"):  # CompactResult
        step = "step=compact" if held is None else "step=compact beside"
        d += "" if held is None else f" held={held:.2f}s"
        if result.skipped:
            return f"{step} nothing to rewrite, {d}"
        return (
            f"{step} data_files={result.data_files_before}->{result.data_files_after} "
            f"delete_files={result.delete_files_before}->{getattr(result, 'delete_files_after', 0)} "
            f"bytes={result.bytes_before}->{result.bytes_after} rebased={getattr(result, 'rebased', 0)} {d}"
        )
    if kind == "expire":
        return (
            f"step=expire snapshots={result.snapshots_before}->{result.snapshots_after} "
            f"files_deleted={result.files_deleted} bytes_removed={result.bytes_deleted} {d}"
        )
    if kind in ("remove-orphans", "remove-metadata"):
        deleted = getattr(result, "deleted", ())
        failed = getattr(result, "files_failed", 0)
        also = f" files_failed={failed}" if failed else ""
        removed = getattr(result, "bytes_deleted", 0)
        return f"step={kind} files_deleted={len(deleted)}{also} bytes_removed={removed} {d}"
    if kind == "rewrite-manifests":
        return (
            f"step=rewrite-manifests manifests={getattr(result, 'manifests_before', '?')}->"
            f"{getattr(result, 'manifests_after', '?')} {d}"
        )
    return f"step={kind} {d}"


class Maintainer:
    """The maintenance of one running sink's table (see the module docstring)."""

    def __init__(
        self,
        runner: Any,
        *,
        others_busy: Callable[[], bool] | None = None,
        on_report: Callable[[str], None] | None = None,
    ) -> None:
        self.runner = runner  # a SinkRunner, or a routed sink's TableSink (``routed_maintenance``)
        # a routed sink's table: another table's rewrite beside the sink holds this one's back
        # (one at a time), and its steps are reported to the sink's (``on_report``: the line)
        self._others_busy = others_busy or (lambda: False)
        self._on_report = on_report
        self.last_run: dict[Any, float] = {}
        self.metadata_checked: int | None = None  # the table's metadata version at the last metadata cleanup
        self.runs = 0
        self.last: str | None = None  # the last step's line, for the status
        self._large: threading.Thread | None = None
        self._large_task: Any = None  # the task of the rewrite beside the sink
        self._large_started: float | None = None
        self._gap = threading.Event()
        self._turn = 0
        self._last_kind: Any = None
        self._compaction_waits = False  # a due compaction found a batch in flight
        self._large_waits = False  # a rewrite beside the sink is written and waits for a gap
        self._gap_seconds = 0.0  # what a compaction in a gap took lately (moving average)
        self._hashed: Any = None  # a rewrite beside the sink: the index entries of the files it wrote
        self._deferred: Any = None  # a run --once: the rewrite beside the sink waits for its next batch
        self._unplanned = False  # a commit was made that no planning followed (a shutdown commit)
        self._due: Any = None  # the compaction the last planning found due (None: none)
        # set by the run's first commit (or its end): a rewrite handed over by the last run,
        # started before this run's first batch, commits only after it, never ahead of it
        self._run_committed = threading.Event()

    @property
    def policy(self) -> Any:
        from icesql.engine.maintenance import sink_policy

        return sink_policy(self.runner.plan)

    def busy(self) -> bool:
        return self._large is not None and self._large.is_alive()

    def idle(self) -> bool:
        """Nothing running, deferred or left to plan: the maintainer may be let go (a routed
        sink's idle table) and made anew when its table next commits."""
        return not self.busy() and self._deferred is None and not self._unplanned

    def wants_gap(self) -> bool:
        """Whether maintenance waits for a gap between the commits of an upsert sink (nothing
        staged, no batch being written): a compaction that was due while a batch was in flight,
        a rewrite beside the sink ready to commit, the key index to rebuild. A sink committing by
        its period timer commits while its next batch is being written, and never leaves such a
        gap by itself; asked at the end of each batch, which then commits at once."""
        r = self.runner
        if r.index is None or r.remote:
            return False
        if r.key_index.stale:
            return True
        return self._compaction_waits or (self._large_waits and self.busy())

    # ----------------------------------------------------------------- between commits

    def after_commit(self) -> None:
        """Called by the runner after each of its commits, holding its lock, nothing staged."""
        self._run_committed.set()
        self._gap.set()
        self._deferred = None  # planned again below, on the table as it is now
        self._unplanned = False
        policy = self.policy
        if not policy.automatic or self.runner.table is None:
            return
        from icesql.engine.maintenance import StepKind, Weight

        started = time.monotonic()
        tasks = self._plan(policy)
        if tasks is None:
            return
        for task in tasks:
            if task.kind is StepKind.REMOVE_METADATA and self._budget(started) > 0:
                self._run(task)
        tasks = [t for t in tasks if t.kind is not StepKind.REMOVE_METADATA]
        # what a run's end or a stop hands to the next run when no compaction has done it by then
        self._due = next((t for t in tasks if t.kind is StepKind.COMPACT), None)
        small = [t for t in tasks if t.weight is Weight.SMALL]
        large = [t for t in tasks if t.weight is Weight.LARGE and t.kind is StepKind.COMPACT]
        self._compaction_waits = (
            any(t.kind is StepKind.COMPACT for t in tasks) and not self.busy() and not self._may_compact()
        )
        if large and not self.busy() and self._may_compact():
            self._begin_large(large[0])
        small = [
            t for t in small if not (t.kind is StepKind.COMPACT and (self.busy() or not self._may_compact()))
        ]
        if not small or self._budget(started) <= 0:
            return
        task = self._next(small)
        if task.kind is StepKind.COMPACT and self._gap_seconds > self._budget(started):
            # it would hold the sink's next commit back: beside the sink, only its commit in a gap
            self._begin_large(task)
            others = [t for t in small if t.kind is not StepKind.COMPACT]
            if not others:
                return
            task = self._next(others)
        self._run(task)

    def _next(self, small: list[Any]) -> Any:
        """One step per gap: a due compaction every other gap at least (delete files are what
        slow readers down, and each commit may add some), the other steps in turn between."""
        from icesql.engine.maintenance import StepKind

        compact = [t for t in small if t.kind is StepKind.COMPACT]
        others = [t for t in small if t.kind is not StepKind.COMPACT]
        if compact and (not others or self._last_kind is not StepKind.COMPACT):
            task = compact[0]
        else:
            task = others[self._turn % len(others)]
            self._turn += 1
        self._last_kind = task.kind
        return task

    def _may_compact(self) -> bool:
        # on Spark Connect the key index's writer lives in the server: a rewrite of an upsert
        # sink's table would need the sink to restart, so it is left to `icesql maintain`
        if self.runner.remote and self.runner.index is not None:
            return False
        # a batch being written (a commit by the period timer, say) is written against the key
        # index, which a rewrite moves: the rewrite waits for a commit with no batch in flight
        return self.runner.index is None or self.runner.batch_started is None

    def _budget(self, started: float) -> float:
        period = self.runner.plan.commit.maximum_period
        spent = time.monotonic() - started
        if period is None:
            return SMALL_STEP_BUDGET - spent
        return period - self.runner.clock.since_commit() - spent

    def _run(self, task: Any) -> None:
        from icesql.engine.maintenance import StepKind, remove_orphan_files, run_task

        r = self.runner
        began = time.monotonic()
        try:
            if task.kind is StepKind.REMOVE_ORPHANS:
                result = remove_orphan_files(
                    r.table, self._orphan_cutoff(), protected_paths=self._protected, under=task.under
                )
            else:
                result = run_task(
                    r.table,
                    task,
                    self.policy,
                    io_properties=dict(r.target.io_properties(r.table)),
                    # the key index follows the rows to where the rewrite wrote them
                    track=r.key_index.key_columns() if task.kind is StepKind.COMPACT and r.index is not None else None,
                )
        except Exception as e:  # a step that fails is logged and tried again later
            log.warning("sink %s: maintenance step %s failed: %s", r.name, task.kind.value, _one_line(e))
            # a step run on a timer (expiration, orphan cleanup) is due again after its interval,
            # not at the next commit: a cause that lasts (a damaged staging entry) would log a
            # warning per commit
            self.last_run[task.run_key] = time.time()
            if task.kind is StepKind.REMOVE_METADATA:
                # due again once the metadata moved on, not at the very next commit
                self.metadata_checked = self._metadata_version()
            return
        self.last_run[task.run_key] = time.time()
        if task.kind is StepKind.REMOVE_METADATA:
            self._metadata_removed(result)
            return
        r.table.refresh()
        if task.kind is StepKind.COMPACT:
            self._rewrite_done()
        if task.kind is StepKind.COMPACT and not getattr(result, "skipped", False):
            self._follow_rewrite(moved=getattr(result, "moved", None))
        elif task.kind is StepKind.REWRITE_MANIFESTS:
            self._rows_unchanged()
        if task.kind is StepKind.COMPACT:
            self._took_in_gap(time.monotonic() - began)
        self._report(task.kind.value, result)

    def _took_in_gap(self, seconds: float) -> None:
        """A compaction took ``seconds`` of a gap between the sink's commits (one beside the sink:
        none to speak of): the moving average the next one is judged by."""
        self._gap_seconds = GAP_AVERAGE * seconds + (1 - GAP_AVERAGE) * self._gap_seconds

    def _metadata_version(self) -> int | None:
        from icesql.engine.maintenance.metadata import metadata_version

        return metadata_version(self.runner.table.metadata_location or "")

    def _metadata_removed(self, result: Any) -> None:
        """After a metadata cleanup (which reloaded the table, commits nothing): due again once the
        metadata moved on, at once while old files are left beyond its batch."""
        if not result.remaining:
            self.metadata_checked = self._metadata_version()
        if result.deleted or result.files_failed:
            self._report(result.kind, result)

    def _orphan_cutoff(self) -> float:
        """Files older than this may be orphans: the policy's safety age, reaching back past every
        write in flight (a batch being written, a rewrite not yet committed). On Spark Connect the
        server's batches in flight are unknown here: at least an hour back."""
        now = time.time()
        cutoff = now - self.policy.orphan_file_age
        starts = [s for s in (self.runner.batch_started, self._large_started) if s is not None]
        if self.runner.remote:
            starts.append(now - 3600)
        return min([cutoff, *(s - 60 for s in starts)])

    def _protected(self) -> set[str]:
        """The files a staged batch of any sink of this home names (the drop box is protected
        by the cleanup itself)."""
        from icesql.engine.maintenance import staged_files

        return set(staged_files(self.runner.home))

    # ----------------------------------------------------------------- beside the sink

    def _begin_large(self, task: Any) -> None:
        """Start a rewrite beside the sink. A ``run --once`` starts it as its next batch begins
        (``before_batch``): after its last batch the run stops, which leaves the rewrite no gap
        to commit in, so one started then would be read and written only to be thrown away."""
        if self.runner.once:
            self._deferred = task
            log.debug("sink %s: compaction beside the sink waits for the next batch", self.runner.name)
            return
        self._start_large(task)

    def before_batch(self) -> None:
        """Called by the runner as a batch begins, holding its lock, before the batch counts as
        in flight: a rewrite a ``run --once`` deferred starts now, against the table the last
        commit left (nothing was committed since, by this sink)."""
        task, self._deferred = self._deferred, None
        if task is not None and not self.busy() and self._may_compact():
            self._start_large(task)

    def committed_unplanned(self) -> None:
        """The runner committed without asking for maintenance (a shutdown commit): a run that
        ends now plans its compaction at its end (``at_end``)."""
        self._run_committed.set()
        self._unplanned = True

    def at_start(self) -> None:
        """Called by the runner once it is prepared, before its first batch: a rewrite the sink's
        last run handed over (``at_end``, ``at_stop``: the note in its staging directory) starts
        now, beside the sink, planned again on the table as it is (the note is a hint; the table
        says what is due). It reads and writes while the batches are read and written, and
        commits in a gap after the run's first commit (or at its end when it has none), as any
        rewrite beside the sink: never ahead of the run's first batch, which would hold that batch
        up, and in the same order whichever executor runs the sink. A note whose
        rewrite is due no more (another run or ``icesql compact`` did it) is dropped."""
        r = self.runner
        if r.staging.rewrite_due() is None:
            return
        policy = self.policy
        if not policy.automatic or not policy.compaction or r.table is None:
            r.staging.clear_rewrite_due()
            return
        if not self._may_compact():  # Spark Connect's upsert sinks: left to `icesql maintain`
            return
        from icesql.engine.maintenance import StepKind

        tasks = self._plan(policy)
        if tasks is None:  # planning failed: the note stays for the next run
            return
        task = next((t for t in tasks if t.kind is StepKind.COMPACT), None)
        if task is None or not task.applies_deletes:
            r.staging.clear_rewrite_due()
            return
        log.info("sink %s: the rewrite the last run handed over starts beside the sink: %s", r.name, task.describe())
        self._due = task
        self._start_large(task)

    def at_end(self) -> None:
        """A run that ends by itself (``run --once``, a bounded relation) has committed all its
        input. A compaction its table is due then that applies delete files is not run in the
        foreground: it is handed to the sink's next run (``_hand_over``: a durable note), which
        starts it beside its first batch (``at_start``); a ``run --once`` from a scheduler
        returns as soon as its input is committed, and its table is still rewritten, one run
        later. The compaction due is the one the last commit put off to a next batch the run
        does not have, or one planned now after a shutdown commit, or one the last gap left
        undone (another step's turn, no time left). Such a rewrite already going on beside the
        sink (handed over by the last run, or started beside a batch) is let finish: the stopped
        sink leaves it the gap to commit in, and without that a table fed by one-batch runs would
        never see one done. A rewrite that only merges files without deletes is neither waited
        for nor handed on: it would hold a bulk load up to rewrite all it just wrote (10M rows:
        6.6 -> 14.3 s), for little a reader gains; the merges that fit the gaps between a run's
        commits are done there, as a running sink's. ``MAINTENANCE = 'off'`` or ``COMPACTION =
        'off'`` leave it all out."""
        policy = self.policy
        if not policy.automatic or not policy.compaction or self.runner.table is None:
            return
        self._run_committed.set()  # a run without a commit: the rewrite handed over takes its end
        if self.busy():
            assert self._large is not None
            if self._large_task is None or not self._large_task.applies_deletes:
                return  # a merge beside the sink: the stop ends it
            self._large.join()  # committed (nothing owed), or failed (owed: handed on below)
        task, self._deferred = self._deferred, None
        if task is None and self._unplanned:
            from icesql.engine.maintenance import StepKind

            task = next((t for t in self._plan(policy) or () if t.kind is StepKind.COMPACT), None)
        elif task is None:
            task = self._due
        self._unplanned = False
        if task is not None and self._hands_over(task):
            self._hand_over(task)

    def at_stop(self) -> None:
        """A sink stopped (``stop``) with a compaction applying delete files due and not done (a
        rewrite beside it ends with the stop, uncommitted): handed to its next run, as at the end
        of a ``run --once``."""
        task = self._due
        if task is not None and self._hands_over(task):
            self._hand_over(task)

    def _hands_over(self, task: Any) -> bool:
        """Whether ``task`` is a rewrite the next run is handed: one applying delete files, under
        a policy that compacts, of a table the sink may rewrite (not an upsert sink on Spark
        Connect, whose rewrites are left to ``icesql maintain``)."""
        policy = self.policy
        r = self.runner
        return (
            bool(task.applies_deletes)
            and policy.automatic
            and policy.compaction
            and r.table is not None
            and not (r.remote and r.index is not None)
        )

    def _hand_over(self, task: Any) -> None:
        """Leave a durable note that the table owes ``task`` (in the sink's staging directory,
        beside the batches it owes the table: per sink, fsync'd, no catalog commit and nothing
        another writer sees). A crash before the note is written loses only the hint: the next
        run's first commit plans the rewrite again from the table. Handed over, it is owed by
        this run no more (a stop after the end of a ``run --once`` does not note it again)."""
        r = self.runner
        self._due = None
        snapshot = r.table.current_snapshot() if r.table is not None else None
        try:
            r.staging.set_rewrite_due(
                {
                    "reason": task.reason,
                    "read_bytes": task.read_bytes,
                    "snapshot_id": getattr(snapshot, "snapshot_id", None),
                    "at": time.time(),
                }
            )
        except OSError as e:
            log.warning("sink %s: could not note the compaction due for the next run: %s", r.name, _one_line(e))
            return
        log.info("sink %s: compaction due, handed to the sink's next run: %s", r.name, task.reason)

    def _rewrite_done(self) -> None:
        """A compaction ran to its end (committed, or found nothing to rewrite): nothing is owed."""
        self._due = None
        try:
            self.runner.staging.clear_rewrite_due()
        except OSError as e:  # the next run plans again and finds nothing due
            log.debug("sink %s: could not drop the note of a rewrite due: %s", self.runner.name, _one_line(e))

    def _plan(self, policy: Any) -> list[Any] | None:
        """The steps due on the sink's table now; None when planning failed (it never fails a
        sink: it is tried again after the next commit)."""
        from icesql.engine.maintenance import plan_maintenance

        try:
            return plan_maintenance(
                self.runner.table,
                policy,
                time.time(),
                last_run=self.last_run,
                metadata_checked=self.metadata_checked,
            )
        except Exception:
            log.debug("sink %s: maintenance planning failed", self.runner.name, exc_info=True)
            return None

    def _start_large(self, task: Any) -> None:
        if self._others_busy():  # planned again after the table's next commit
            log.debug("sink %s: a compaction beside the sink waits for another table's", self.runner.name)
            return
        self._large_task = task
        self._large_started = time.time()
        self._large = threading.Thread(
            target=self._run_large, args=(task,), name=f"icesql-compact-{self.runner.name}", daemon=True
        )
        self._large.start()

    def _run_large(self, task: Any) -> None:
        """A rewrite beside the sink: read and write freely, commit in a gap between its commits."""
        from icesql.engine.maintenance.compact import CompactionStopped, CompactMode, compact_table

        r = self.runner
        held = False
        held_at = 0.0

        def wait_for_gap() -> None:
            nonlocal held, held_at
            if held:
                return
            self._large_waits = True
            while not r.stop_event.is_set():
                if not self._run_committed.is_set():
                    # a rewrite handed over by the last run goes after this run's first commit
                    # (so both executors commit the two in one order, and no batch waits for it)
                    self._run_committed.wait(GAP_WAIT)
                    continue
                acquired = r.lock.acquire(timeout=GAP_WAIT)
                if acquired:
                    # a gap: nothing staged and no batch being written (a batch is written against
                    # the key index, which the rewrite's commit moves)
                    if not r.staging.pending() and r.batch_started is None:
                        held = True
                        held_at = time.monotonic()
                        self._large_waits = False
                        return
                    r.lock.release()
                self._gap.clear()
                self._gap.wait(GAP_WAIT)
            raise CompactionStopped("the sink stopped while the rewrite waited for a gap")

        # deletes by position through a key index: a routed sink's table opens its index as the
        # run first writes to it, so a rewrite handed over (started before) finds it open by the
        # time it commits, after the table's first commit of the run
        keyed = r.index is not None or bool(getattr(r, "position_deletes", False))
        try:
            table = r.target.load_catalog().load_table((*r.plan.namespace, r.plan.table))
            result = compact_table(
                table,
                mode=CompactMode.AUTO,
                policy=self.policy,
                io_properties=dict(r.target.io_properties(table)),
                max_file_size=self.policy.target_file_size,
                before_commit=wait_for_gap,
                carry_over=self._carry_over if keyed else None,
                on_written=self._hash_written if keyed else None,
                # a stopped sink (a run --once at the end of its input) has no gap left to commit
                # in: the rewrite ends at once instead of being finished, then thrown away
                stopped=r.stop_event.is_set,
            )
            self.last_run[task.run_key] = time.time()
            self._rewrite_done()
            if held:
                r.table.refresh()
                if not result.skipped:
                    self._follow_rewrite(self._hashed)
            self._took_in_gap(0.0)  # only its commit took a gap
            self._report("compact", result, held=time.monotonic() - held_at if held else 0.0)
        except Exception as e:
            if not r.stop_event.is_set():
                log.warning("sink %s: compaction beside the sink failed: %s", r.name, _one_line(e))
        finally:
            self._large_waits = False
            self._hashed = None
            if held:
                r.lock.release()
            self._large_started = None

    def _carry_over(self, conflicts: Any, new_files: Any) -> list[Any]:
        """Position deletes the sink committed meanwhile on rows the compaction rewrote: the same
        rows, found by KEY in the files it wrote, deleted there (in the compaction's commit). The
        written files' keys are the entries ``_hash_written`` read already, when it could."""
        import pyarrow as pa

        from icesql.engine.backends.hashing import key_schema
        from icesql.engine.iceberg.deletes import position_deletes
        from icesql.engine.iceberg.writer import FILE_PATH, POS, DataFileWriter, WriteSpec
        from icesql.engine.index import shard
        from icesql.engine.index.build import file_entries

        r = self.runner
        if r.key_index is None:  # never dropped: the rewrite fails (and is tried again) instead
            from icesql.errors import ExecutionError

            raise ExecutionError(f"sink {r.name}: the key index of {r.plan.table_identifier} is not open")
        table = r.table
        key = r.key_index.key_columns()
        ks = key_schema(table.schema(), key)
        ahead = self._hashed.files if self._hashed is not None else {}

        def entries(path: str) -> pa.Table:
            found = ahead.get(path)
            return found if found is not None else file_entries(table.io, path, key, ks)

        keys = [
            file_entries(table.io, path, key, ks).take(pa.array(sorted(positions), pa.int64())).select(key)
            for d in conflicts
            for path, positions in position_deletes(table.io, d).items()
        ]
        if not keys:
            return []
        gone = pa.concat_tables(keys).group_by(key).aggregate([])
        deletes = []
        for f in new_files:
            hit = entries(getattr(f, "file_path", None) or f.path).join(
                gone, keys=key, join_type="inner", use_threads=False
            )
            if hit.num_rows:
                deletes.append(hit.select([*key, shard.PATH, shard.POS]).rename_columns([*key, FILE_PATH, POS]))
        if not deletes:
            return []
        spec = WriteSpec.from_table(table, io_properties=dict(r.target.io_properties(table)))
        writer = DataFileWriter(spec, "position_deletes")
        try:
            all_deletes = pa.concat_tables(deletes).sort_by([(FILE_PATH, "ascending"), (POS, "ascending")])
            writer.write(all_deletes)
            return writer.close()
        except BaseException:
            writer.abort()
            raise

    # ----------------------------------------------------------------- the key index

    def _follow_rewrite(self, hashed: Any = None, moved: Any = None) -> None:
        """Rows moved: the key index follows them before the next batch (from the files the
        rewrite removed and wrote, and another writer's rows committed since the index's
        snapshot, so a stale index is no more), or is rebuilt from the table. ``hashed``: the
        written files, read and hashed already."""
        r = self.runner
        if r.key_index is None:
            return
        r.key_index.stale = False
        r.key_index.follow(hashed, moved)

    def _hash_written(self, new_files: Any) -> None:
        """A rewrite beside the sink wrote ``new_files``: their index entries, read and hashed
        now, outside the sink's lock, for the follow after its commit (which holds it)."""
        from icesql.engine.index.follow import hash_files

        r = self.runner
        index = r.index
        if index is None:
            return
        try:
            paths = [getattr(f, "file_path", None) or f.path for f in new_files]
            self._hashed = hash_files(r.table, paths, key=r.key_index.key_columns(), shards=index.shards)
        except Exception as e:  # the follow reads them itself
            log.debug("sink %s: could not read the rewrite's files ahead: %s", r.name, _one_line(e))

    def _rows_unchanged(self) -> None:
        """A snapshot that moved no row (a manifest rewrite): the index still describes the table,
        unless it was stale already (another writer's rows it does not know: the sink's commits
        go on deleting by equality until it is rebuilt)."""
        r = self.runner
        if r.key_index is not None and r.table.current_snapshot() is not None:
            r.key_index.rows_unchanged(r.table.current_snapshot().snapshot_id)

    # ----------------------------------------------------------------- reporting

    def _report(self, step: str, result: Any, held: float | None = None) -> None:
        r = self.runner
        line = describe(result, held=held)
        self.runs += 1
        self.last = f"{step}: {line}"
        if self._on_report is not None:
            self._on_report(self.last)
        log.info("maintenance sink=%s table=%s %s", r.name, r.plan.table_identifier, line)
        r.listeners.maintenance(MaintenanceEvent(r.name, step, line, float(getattr(result, "duration", 0.0))))

    def join(self, timeout: float | None = None) -> None:
        if self._large is not None:
            self._large.join(timeout)


__all__ = ["Maintainer", "describe"]
