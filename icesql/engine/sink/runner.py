"""``SinkRunner``: one sink as a Spark Structured Streaming query writing an Iceberg table.

The runner is the driver half of a sink; its parts have rooms of their own:

* ``batch`` — what runs where Spark runs Python (the batch writer, picklable);
* ``recovery`` — where the sink stands on start (committed progress, fencing, staging);
* ``policy`` — when to commit (``CommitClock``) and the timer of MAXIMUM PERIOD;
* ``commit`` — the catalog commit itself (snapshot summary, fencing, conflict retry);
* ``drain`` — Spark Connect: taking the server half's records into staging;
* ``target`` — the table's catalog and storage access, resolved once.

Life of a runner
----------------
``start()``:
    1. ``state.bump_version(name)`` gives this runner's epoch (a newer one fences older ones);
    2. the relation's DataFrame is built, the table is created when missing (``ensure_table``);
    3. recovery: the committed progress is read from the table; staged entries at or below it
       are discarded, the rest are committed at once (reason ``recovery``);
    4. ``df.writeStream.foreachBatch(...)`` starts with its checkpoint in
       ``<home>/sinks/<sink_id>/checkpoint`` (``availableNow`` with ``once=True``, else
       ``processingTime``). A bounded (batch) relation runs as one job with batch id 0.

``foreachBatch(batch_df, batch_id)``:
    1. a batch at or below ``staged_high`` is skipped: Spark replays the last batch after a crash
       and its files are already staged or committed;
    2. executors write the files (``batch.BatchWriter``);
    3. the driver stages the files durably (``staging.Staging``) before returning;
    4. the commit clock decides whether to commit now; ``flush()`` commits now (``flush``),
       ``stop()`` commits what is staged (``shutdown``). An upsert sink's maintenance that
       moves rows needs a gap (nothing staged, no batch being written), which commits by the
       period timer during the next batch never leave: when it waits for one, the batch commits
       as it ends (``maintenance``), before its period is over.

Every commit is one ``commit.commit`` call: append-only staged batches become one snapshot; when
delete files are involved each staged batch is its own snapshot (in order, in one catalog
commit) so a later batch's deletes remove an earlier batch's rows. One INFO line per commit
names the sink, table, reason, rows, bytes, files and duration.

On Spark Connect (``remote``) ``foreachBatch`` runs in the server's Python: the query's
``foreachBatch`` is then ``batch.RemoteBatch``, and ``drain.Drain`` takes its records here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from icesql.engine.base.changelog import translate_null_key
from icesql.engine.base.events import FailureEvent, Listeners, StateEvent
from icesql.engine.base.hooks import batch_delay, kill_point, mark
from icesql.engine.commit.policy import CommitClock, PeriodTimer, until_next_trigger
from icesql.engine.commit.recovery import (
    Progress,
    committed_progress,
    fenced_error,
    recover,
    warn_if_checkpoint_lost,
)
from icesql.engine.commit.staging import Staging
from icesql.engine.sink.batch import BatchWriter, RemoteBatch
from icesql.engine.sink.committer import Committing
from icesql.engine.sink.errors import execution_error, library_failure, translate_new_columns
from icesql.engine.sources.guard import translate_bad_record
from icesql.engine.sources.relation import Relation
from icesql.errors import IcesqlError
from icesql.plan import SinkPlan

log = logging.getLogger("icesql.sink")


class StateCallback(Protocol):
    def sink_id(self, name: str) -> str: ...

    def bump_version(self, name: str) -> int: ...

    def update(self, name: str, **fields: Any) -> None: ...


class SinkRunner(Committing):
    """Runs one sink. Thread-safe: commits are serialised by one lock."""

    def __init__(
        self,
        plan: SinkPlan,
        *,
        spark: Any,
        home: Path,
        state: StateCallback,
        target: Callable[[], Any],
        relation: Callable[[Any, Any], Relation],  # (backend, the source's binding) -> the relation
        relation_plan: Callable[[], Any] = lambda: None,
        trigger_interval: float = 1.0,
        period_tick: float | None = None,
        listeners: Listeners | None = None,
        local: Any = None,
    ) -> None:
        self.plan = plan
        self.local = local  # local_query.LocalSession: a bounded run without Spark (spark is None)
        self.listeners = listeners or Listeners()
        self.name = plan.name
        self.spark = spark
        self.home = Path(home)
        self.state = state
        self._resolve_target = target
        self.target: Any = None  # target.SinkTarget, resolved once when the sink starts
        self._relation_factory = relation
        self._relation_plan = relation_plan  # the source or view plan the sink reads (None: a Spark table)
        self.source: Any = None  # source_kinds.SourceProgress: the sink's position in its source
        self.trigger_interval = trigger_interval
        self.period_tick = period_tick
        self.sink_id = state.sink_id(plan.name)
        self.sink_dir = self.home / "sinks" / self.sink_id
        self.staging = Staging(self.sink_dir / "staging")
        self.checkpoint = self.sink_dir / "checkpoint"  # Spark's path (views, Spark tables, ...)
        self.progress_base = 0  # progress = base + Spark batch id (a new checkpoint restarts at 0)
        self.fallback_files = 0  # files the Arrow path left to Spark's reader
        self.key_index: Any = None  # sink.key_index.SinkKeyIndex of an upsert sink (position deletes)
        self._writer: Any = None  # the batch writer, kept across batches (the index writer has state)
        self.batch_started: float | None = None  # when the batch being written began (epoch s)
        from icesql.engine.sink.maintainer import Maintainer

        self.maintainer = Maintainer(self)  # the table's maintenance, between this sink's commits
        from icesql.engine.backends.spark.session import is_connect

        # Spark Connect: foreachBatch runs in the server's Python, which hands the files it wrote
        # to this process through a drop box at the table's location (``drain``)
        self.remote = spark is not None and is_connect(spark)
        self.drain: Any = None  # drain.Drain on Spark Connect
        self._compaction_hinted = False
        self.version: int | None = None
        self.table: Any = None
        self.relation: Relation | None = None
        self.query: Any = None
        self.progress = Progress()
        self.clock = CommitClock(plan.commit)
        self.status = "created"
        self.error: IcesqlError | None = None
        # whether a failure will be retried (set by Engine.run's supervisor): its state is then
        # 'retrying' from the start, never a 'failed' that is not final
        self.will_retry: Callable[[IcesqlError], bool] = lambda err: False
        self.last_commit_at: float | None = None
        self.last_snapshot_id: int | None = None
        self.totals = {"rows_committed": 0, "bytes_committed": 0, "files_committed": 0, "commits": 0}
        self.skipped_records = 0
        self.dead_letters: Any = None  # deadletter.DeadLetters with ON ERROR = 'dead-letter'
        self.dead_letter_count = 0  # bad records committed to the dead-letter table, over the sink's life
        self.lock = threading.RLock()
        self.stop_event = threading.Event()
        self._timer: PeriodTimer | None = None
        self._batch_thread: threading.Thread | None = None
        self.stopping = False
        self.once = False
        self._done = threading.Event()
        self._skipped_seen = 0
        self._seed_totals(state)

    def _seed_totals(self, state: Any) -> None:
        """Carry the cumulative counters of earlier runs on (when the state store keeps them)."""
        seed = getattr(state, "get", None)
        if not callable(seed):
            return
        try:
            prior = seed(self.name) or {}
            for k in self.totals:
                if isinstance(prior.get(k), int):
                    self.totals[k] = prior[k]
            if isinstance(prior.get("skipped_records"), int):
                self.skipped_records = prior["skipped_records"]
            if isinstance(prior.get("dead_letters"), int):
                self.dead_letter_count = prior["dead_letters"]
        except Exception:  # pragma: no cover - a state store without totals
            pass

    # ----------------------------------------------------------------- progress marks

    @property
    def committed_progress(self) -> int:
        return self.progress.committed

    @property
    def staged_high(self) -> int:
        return self.progress.staged_high

    # ----------------------------------------------------------------- state

    def _update(self, **fields: Any) -> None:
        try:
            self.state.update(self.name, **fields)
        except Exception:  # pragma: no cover - state reporting never kills a sink
            log.exception("sink %s: state update failed", self.name)

    def _set_status(self, status: str, **fields: Any) -> None:
        self.status = status
        self._update(status=status, **fields)
        self.listeners.state(StateEvent(self.name, status))

    def fail(self, exc: BaseException) -> IcesqlError:
        """Record ``exc`` as the sink's failure (translated into an ``IcesqlError``) and end it."""
        from icesql.engine.commit.snapshot import FencedError

        err = (
            exc
            if isinstance(exc, IcesqlError)
            else (
                translate_bad_record(exc)
                or translate_null_key(exc, self.plan.key)
                or translate_new_columns(exc, evolve=self.plan.schema_evolution)
                or library_failure(exc, self.name, self.target)
                or execution_error(exc)
            )
        )
        self.error = err
        if isinstance(err, FencedError):
            status = "fenced"
        else:
            status = "retrying" if self.will_retry(err) else "failed"
        # a failure that will be retried is logged once, by the supervisor ("restarting in ...")
        (log.debug if status == "retrying" else log.error)("sink %s %s: %s", self.name, status, err.message)
        self.listeners.failure(
            FailureEvent(self.name, type(err).__name__, err.message, bool(getattr(err, "transient", False)))
        )
        self._set_status(status, last_error=err.message)
        self.stop_event.set()
        self._done.set()
        return err

    @property
    def backend(self) -> Any:
        """Where this run's batches run (``backends.base``): Spark, or this process."""
        from icesql.engine.backends.base import backend_of

        return backend_of(self.spark, self.local)

    # ----------------------------------------------------------------- start

    @property
    def checkpoint_location(self) -> str:
        """Where Spark keeps the query's checkpoint: ``<home>/sinks/<id>/checkpoint`` plus the
        source kind's suffix (``checkpoint-files`` on the Arrow path, ``checkpoint-kafka``), or
        ``$ICESQL_CHECKPOINT_ROOT/<id><suffix>`` (a directory the Spark driver can reach, e.g. when
        a Spark Connect server runs on another machine)."""
        return self.checkpoint_root(self.source.checkpoint_suffix if self.source is not None else "")

    def checkpoint_root(self, suffix: str) -> str:
        from icesql.engine.backends.checkpoint import checkpoint_root

        return checkpoint_root(self.home, self.sink_id, suffix)

    @property
    def local_checkpoint(self) -> bool:
        from icesql.engine.backends.checkpoint import is_local

        return is_local(self.checkpoint_location)

    def prepare(self) -> None:
        """Version, table and recovery: everything before the query starts."""
        from icesql.engine.iceberg.schema import spark_schema_json
        from icesql.engine.iceberg.tables import ensure_table

        self._set_status("starting")
        try:
            self.version = int(self.state.bump_version(self.name))
            self.target = self._resolve_target()
            from icesql.engine.sources.kinds import progress_for

            source = progress_for(self, self._relation_plan())
            self.relation = self._relation_factory(self.backend, source.binding())
            self.source = source.bound(self.relation)
            schema_json = spark_schema_json(self.relation.data_schema())
            catalog = self.target.load_catalog()  # once: the dead-letter table is in it too
            self.table = ensure_table(catalog, None, schema_json, self.plan)
            committed = committed_progress(
                self.table, self.sink_id, self.version, name=self.name, table_name=self.plan.table_identifier
            )
            if self.relation.streaming and not self.source.resumes_from_table and self.local_checkpoint:
                warn_if_checkpoint_lost(self.name, self.checkpoint, committed)
            self.progress = recover(self.staging, committed)
            self._open_dead_letters(catalog)
            if self.remote and self.relation.streaming:
                from icesql.engine.backends.spark.dropbox import DropBox
                from icesql.engine.sink.drain import Drain

                box = DropBox(self.table.location(), self.sink_id, self.target.io_properties(self.table))
                self.drain = Drain(self, box)
                self.drain.open()  # takes what the server half wrote while this process was away
            pending = self.staging.pending()
            if pending:
                log.info("sink %s: recovering %d staged batch(es)", self.name, len(pending))
                self.commit("recovery")
            if self.relation.streaming and self.source.resumes_from_table:
                self._resume_source()
            if self.position_deletes:
                from icesql.engine.sink.key_index import SinkKeyIndex

                self.key_index = SinkKeyIndex(self)
                self.key_index.open()
            mark("sink prepared (table, recovery)")
        except BaseException as e:
            raise self.fail(e) from e

    def _open_dead_letters(self, catalog: Any) -> None:
        from icesql.engine.sink.deadletter import open_dead_letters

        assert self.relation is not None
        self.dead_letters = open_dead_letters(
            self.plan,
            self.relation,
            sink_id=self.sink_id,
            catalog=catalog,
            io_properties=self.target.io_properties,
            version=int(self.version or 0),
        )

    @property
    def position_deletes(self) -> bool:
        """An upsert sink that deletes by position through the key index (the default), rather
        than by equality on the KEY (``DELETE MODE = 'equality'``)."""
        from icesql.plan import DeleteMode, SinkMode

        return self.plan.mode is SinkMode.UPSERT and self.plan.delete_mode is DeleteMode.POSITION

    @property
    def index(self) -> Any:
        """The key index (``index.store.Manifest``) of an upsert sink deleting by position."""
        return self.key_index.manifest if self.key_index is not None else None

    def drop_batch_writer(self) -> Any:
        """Forget the batch writer (the next batch makes a new one); the newest key index its
        batches wrote, if any."""
        latest = getattr(getattr(self._writer, "inner", self._writer), "manifest", None)
        self._writer = None
        return latest

    def _resume_source(self) -> None:
        """The source's start on this checkpoint (``source_kinds.SourceProgress.resume``), from
        the summary of the table's last snapshot of this sink."""
        from icesql.engine.commit.snapshot import last_committed_snapshot

        last = last_committed_snapshot(self.table, self.sink_id)
        base = self.source.resume(dict(last.properties) if last is not None else None)
        if base is not None:
            self.progress_base = base

    def fenced(self, newer: int) -> Exception:
        return fenced_error(self.name, self.version, newer, self.plan.table_identifier)

    def start(self, *, once: bool = False) -> None:
        """Prepare and start the query (returns at once; see ``await_termination``)."""
        self.prepare()
        assert self.relation is not None
        self.once = once
        try:
            self.maintainer.at_start()  # a rewrite the last run handed over: beside this one
        except Exception as e:  # maintenance never keeps a sink from starting
            log.warning(
                "sink %s: the rewrite handed over by the last run did not start: %s",
                self.name,
                getattr(e, "message", None) or e,
            )
        try:
            if not self.relation.streaming:
                self._batch_thread = threading.Thread(
                    target=self._run_bounded, name=f"icesql-sink-{self.name}", daemon=True
                )
                self._set_status("running")
                self._batch_thread.start()
                return
            if self.local_checkpoint:
                Path(self.checkpoint_location).mkdir(parents=True, exist_ok=True)
            if self.remote:
                assert self.version is not None
                batch: Any = RemoteBatch(
                    self.batch_writer(),
                    self.drain.dropbox,
                    version=self.version,
                    skip_through=self.staged_high,
                    progress_base=self.progress_base,
                )
            else:
                batch = self._foreach_batch
            self.query = self.backend.start_query(
                self.relation.df,
                batch,
                checkpoint=self.checkpoint_location,
                name=f"icesql_{self.name}_{self.sink_id[:8]}_v{self.version}",
                interval=None if once else self.trigger_interval,
            )
            mark("query started")
        except BaseException as e:
            raise self.fail(e) from e
        self._set_status("running")
        if self.remote:
            self.drain.start()
        if self.plan.commit.maximum_period is not None and not once:
            self._start_timer()
        threading.Thread(target=self._watch, name=f"icesql-watch-{self.name}", daemon=True).start()

    def _start_timer(self) -> None:
        self._timer = PeriodTimer(
            self.name,
            self.clock,
            self.stop_event,
            self._commit_if_period_passed,
            self._fail_and_stop,
            tick=self.period_tick,
        ).start()

    def _commit_if_period_passed(self) -> bool:
        """The period timer's commit; False when nothing was staged (``PeriodTimer``)."""
        with self.lock:
            if self.stop_event.is_set() or not self.clock.period_due():
                return True
            return self.commit("period") is not None

    def _fail_and_stop(self, exc: BaseException) -> None:
        self.fail(exc)
        self.stop_query()

    def _run_bounded(self) -> None:
        try:
            if 0 > self.staged_high:
                self._process(self.relation.df, 0)  # type: ignore[union-attr]
            self.commit("shutdown")
            self.maintainer.at_end()
            self._set_status("stopped")
        except BaseException as e:
            if self.error is None:
                self.fail(e)
        finally:
            self._done.set()

    def _watch(self) -> None:
        q = self.query
        try:
            q.awaitTermination()
        except BaseException as e:
            if self.error is None and not self.stopping:
                self.fail(e)
        finally:
            if self.once and self.error is None and not self.stopping:
                try:
                    if self.drain is not None:
                        self.drain.take()  # every batch of the run has left its record by now
                    self.commit("shutdown")
                    self.maintainer.at_end()
                    self.source.after_run()
                    self._set_status("stopped")
                except BaseException as e:  # noqa: BLE001
                    self.fail(e)
            self.stop_event.set()
            self._done.set()

    # ----------------------------------------------------------------- batches

    def _foreach_batch(self, batch_df: Any, batch_id: int) -> None:
        try:
            self._process(batch_df, int(batch_id))
        except BaseException as e:
            if self.stopping and self.error is None:
                log.info("sink %s: batch %s interrupted by stop", self.name, batch_id)
                raise
            # Not chained: py4j hands Spark this exception's whole traceback as text, and Spark,
            # when the query is stopping, matches it against a regular expression that recurses
            # once per character after "Py4JJavaError: An error occurred while calling"
            # (StreamExecution.PROXY_ERROR): a chained Spark job failure (its whole Java stack
            # trace) overflowed the stream thread's stack (java.lang.StackOverflowError printed
            # by the JVM). The sink's error is recorded by fail().
            raise self.fail(e) from None

    def _process(self, batch_df: Any, spark_batch_id: int) -> None:
        batch_id = self.progress_base + spark_batch_id  # the sink's progress of this batch
        if batch_id <= self.staged_high:
            log.info("sink %s: batch %d already staged or committed, skipping", self.name, batch_id)
            return
        mark(f"batch {batch_id} started")
        batch_delay()
        kill_point("batch", batch_id)  # tests: a batch that fails (or dies) before it writes
        if self.error is not None:
            raise self.error
        started = time.time()
        with self.lock:
            self.maintainer.before_batch()  # a rewrite a run --once deferred to this batch
            # its files are in flight until staged (orphan cleanup), and it is written against
            # the key index as it is now: a rewrite beside the sink waits for it (maintainer)
            self.batch_started = started
        try:
            rows = self.batch_writer()(batch_df, spark_batch_id)
            mark(f"batch {batch_id} written")
            entry = self.stage_rows(rows, batch_id)
            with self.lock:
                if entry is not None:
                    self.staging.add(entry)
                    self.progress.staged_high = batch_id
                    mark(f"batch {batch_id} staged")
                    kill_point("staged", batch_id)
                self.batch_started = None
                committed = self.apply_policy(self._until_next_trigger(started))
                if not committed and entry is not None and self.maintainer.wants_gap():
                    committed = self.commit("maintenance") is not None
        finally:
            self.batch_started = None
        if committed:
            kill_point("committed", batch_id)

    def batch_writer(self) -> Any:
        """The picklable half of a batch: transform, write the files, describe them. Made once
        per run: the key index's writer keeps the index's state from batch to batch. Each batch
        takes the FileIO properties anew: credentials of an assumed role expire during a run
        (``aws.credentials`` caches them until shortly before they do)."""
        if self._writer is None:
            self._writer = self._make_batch_writer()
        else:
            assert self.target is not None and self.table is not None
            self._writer.use_io(self.target.io_properties(self.table))
        return self._writer

    def _make_batch_writer(self) -> Any:
        assert self.relation is not None and self.table is not None
        io = self.target.io_properties(self.table)
        inner: Any = BatchWriter.for_sink(self.plan, self.table, io, self.relation.name)
        if self.key_index is not None:
            inner = self.key_index.writer(inner)
        if self.relation.arrow is None:
            return inner
        letters = self.relation.letters[0] if self.relation.letters else None
        return self.relation.arrow.batch_writer(inner, skipped=self.relation.skipped, letters=letters)

    # ----------------------------------------------------------------- policy and commits

    def apply_policy(self, until_next_batch: float = 0.0) -> bool:
        """Commit if the commit clock says so; True when a commit happened. ``until_next_batch``:
        the least time before the query's next batch can start (``_until_next_trigger``)."""
        reason = self.clock.reason(lambda: self.staging.totals()[1], until_next_batch)
        return reason is not None and self.commit(reason) is not None

    def _until_next_trigger(self, batch_started: float) -> float:
        """Seconds until the query's next batch can start (``policy.until_next_trigger``); 0 for
        a query that runs its batches back to back (``once``)."""
        return 0.0 if self.once else until_next_trigger(batch_started, self.trigger_interval, time.time())

    def update_plan(self, plan: SinkPlan) -> None:
        """Take a changed definition (ALTER SINK): the commit policy applies at once; other
        changes (partitioning, file size, ...) when the sink next starts."""
        with self.lock:
            old = self.plan
            self.plan = plan
            self.clock.policy = plan.commit
        if (
            plan.commit.maximum_period is not None
            and old.commit.maximum_period is None
            and self.query is not None
            and not self.once
            and self.active
        ):
            self._start_timer()
        log.info("sink %s: commit policy now %s", self.name, plan.commit.describe())
        if self.query is not None and self.active:
            with self.lock:
                self.apply_policy()

    def flush(self) -> Any:
        """Commit everything staged now (reason ``flush``); returns the commit result or None."""
        try:
            with self.lock:
                if self.drain is not None:
                    self.drain.take(policy=False)
                return self.commit("flush")
        except BaseException as e:
            err = self.fail(e)
            self.stop_query()
            raise err from e

    # ----------------------------------------------------------------- stop

    def quiesce(self, timeout: float = 60.0) -> bool:
        """Wait (after a failure) until nothing of this runner touches the table any more: a
        commit in flight (the period timer's, retrying a transient failure in place) holds the
        lock until it ends, and a rewrite beside the sink ends on ``stop_event``. A new runner of
        the sink started before that would be fenced by this one's late commit, or fence it.
        True when it is quiet within ``timeout``."""
        self.stop_event.set()
        if not self.lock.acquire(timeout=timeout):
            return False
        self.lock.release()
        self.maintainer.join(timeout)
        return not self.maintainer.busy()

    def stop_query(self) -> None:
        q = self.query
        if q is None:
            return
        try:
            if q.isActive:
                q.stop()
        except Exception:  # pragma: no cover - stopping a dead query
            log.debug("sink %s: stop failed", self.name, exc_info=True)

    def stop(self) -> None:
        """Stop the query and commit what is staged (reason ``shutdown``)."""
        if self.status in ("stopped",) and self.query is None:
            return
        self.stopping = True
        self.stop_event.set()
        self.stop_query()
        if self._batch_thread is not None:
            self._batch_thread.join()
        if self._timer is not None:
            self._timer.join(timeout=30)
        self.maintainer.join(timeout=60)
        try:
            self.maintainer.at_stop()  # a rewrite due and not done: the next run's
        except Exception as e:  # maintenance never fails a stop
            log.warning("sink %s: the rewrite due was not handed to the next run: %s", self.name, getattr(e, "message", None) or e)
        if self.drain is not None:
            self.drain.join(timeout=30)
        if self.error is None:
            try:
                if self.drain is not None:
                    self.drain.take(policy=False)
                self.commit("shutdown")
                self._set_status("stopped")
            except BaseException as e:
                raise self.fail(e) from e
        if self.source is not None:
            self.source.close()
        self._done.set()

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait until the query ends (``once``: until the available input is committed)."""
        return self._done.wait(timeout)

    @property
    def active(self) -> bool:
        return not self._done.is_set()

    def file_format(self) -> str | None:
        """The format of the data files this sink writes: its FORMAT, else its table's
        ``write.format.default`` (None before the table is loaded)."""
        if self.plan.format:
            return self.plan.format
        if self.table is None:
            return None
        from icesql.engine.iceberg import formats

        return formats.table_format(self.table.metadata.properties)

    def status_row(self) -> dict[str, Any]:
        pending = self.staging.pending()
        rows = sum(e.rows for e in pending)
        nbytes = sum(e.bytes for e in pending)
        files = sum(e.files for e in pending)
        lag = self.clock.since_commit() if rows or files else 0.0
        return {
            "name": self.name,
            "sink_id": self.sink_id,
            "version": self.version,
            "table": self.plan.table_identifier,
            "status": self.status,
            **self.totals,
            "last_commit_at": self.last_commit_at,
            "last_snapshot_id": self.last_snapshot_id,
            "last_progress": self.committed_progress if self.committed_progress >= 0 else None,
            "last_error": self.error.message if self.error else None,
            "staged_rows": rows,
            "staged_bytes": nbytes,
            "staged_files": files,
            "state": self.status,
            "lag": round(lag, 3),  # seconds the oldest uncommitted staged data has waited
            "staged_since": min((e.created_at for e in pending), default=None),  # epoch seconds
            "skipped_records": self.skipped_records,
            "dead_letters": self.dead_letter_count,
            "dead_letter_table": self.dead_letters.name if self.dead_letters is not None else None,
            "path": "arrow" if getattr(self.relation, "arrow", None) is not None else "spark",
            "file_format": self.file_format(),
            "fallback_files": self.fallback_files,
            "maintenance_runs": self.maintainer.runs,
            "last_maintenance": self.maintainer.last,
            **(self.source.status() if self.source is not None and self.status == "running" else {}),
        }


__all__ = ["SinkRunner", "StateCallback"]
