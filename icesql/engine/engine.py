"""``Engine``: the facade the session uses to run sinks on Spark.

Importing this module imports neither pyspark nor pyiceberg: Spark starts the first time
something needs it (``start_sink``, ``run``, ``relation_columns``).

::

    engine = Engine(home, objects=resolver, secrets=secret_lookup, state=state_store)
    engine.run([sink_plan], once=True)          # process what is available, commit, stop
    engine.start_sink(plan); engine.flush(); engine.stop()

``objects`` resolves names to plans (``ObjectResolver``); ``state`` receives the sink's runtime
state (``StateCallback``: ``sink_id``, ``bump_version``, ``update`` with ``status``,
``rows_committed``, ``bytes_committed``, ``files_committed``, ``commits``, ``last_commit_at``
(epoch seconds), ``last_snapshot_id``, ``last_progress``, ``last_error``, ``skipped_records``).
If the callback also has ``get(name) -> dict`` the cumulative counters continue from it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icesql import settings
from icesql.engine.base.events import Listeners, SinkListener
from icesql.engine.connections.target import ObjectResolver
from icesql.engine.select.service import SelectService
from icesql.engine.sink.warmup import Warmer
from icesql.engine.sources.binding import SourceBinder
from icesql.errors import ExecutionError, IcesqlError
from icesql.plan import Column, SecretResolver, SinkPlan, SourcePlan

if (
    TYPE_CHECKING
):  # the runner pulls in Spark's side of the engine (sources, batch): 0.1-0.2 s a SELECT need not pay
    from icesql.engine.sink.runner import StateCallback

log = logging.getLogger("icesql.engine")


def default_trigger_interval() -> float:
    """``ICESQL_TRIGGER_INTERVAL`` in seconds (1 by default), never below the period at which a
    running query looks at an idle source (``local.query.IDLE_CHECK``): a running query with no
    interval would look at it in a loop."""
    from icesql.engine.backends.local.query import IDLE_CHECK

    value = settings.TRIGGER_INTERVAL.get_float()
    return max(IDLE_CHECK, value if value is not None else 1.0)


class Engine:
    def __init__(
        self,
        home: Path,
        *,
        objects: ObjectResolver,
        secrets: SecretResolver,
        state: StateCallback,
        spark: Any = None,
        spark_master: str | None = None,
        spark_conf: Mapping[str, Any] | None = None,
        trigger_interval: float | None = None,
    ) -> None:
        self.home = Path(home)
        self.objects = objects
        self.secrets = secrets
        self.state = state
        self._spark = spark
        self._spark_master = spark_master
        self._spark_conf = dict(spark_conf or {})
        # seconds between the starts of a running sink's batches (ICESQL_TRIGGER_INTERVAL)
        self.trigger_interval = (
            trigger_interval if trigger_interval is not None else default_trigger_interval()
        )
        self._runners: dict[str, Any] = {}
        self._lock = threading.RLock()
        self._any_done = threading.Condition(self._lock)
        self.warmer = Warmer()  # Spark's Python workers and data source, warmed in the background
        self._supervisors: list[Any] = []  # supervisor.Supervisor of each Engine.run under way
        self.listeners = Listeners()
        self.sources = SourceBinder(objects, secrets)  # relations bound to their connections
        self.selects = SelectService(self)  # SELECT: DuckDB over the tables' rows, or Spark
        self._spark_needed: set[str] = set()  # sinks whose run without Spark met a batch needing it

    def add_listener(self, listener: SinkListener) -> None:
        """Receive every sink's commits, failures and state changes (``events``)."""
        self.listeners.add(listener)

    # ----------------------------------------------------------------- spark

    @property
    def spark(self) -> Any:
        if self._spark is None:
            from icesql.engine.backends.spark.session import get_spark
            from icesql.engine.base.hooks import mark

            mark("spark starting")
            # while this thread waits seconds for the JVM, another imports what the driver needs
            # next (pyiceberg, its catalogs and FileIO: ~1.3 s of CPU); pyarrow first, here, and
            # the thread is joined before anything else is imported, so no module is imported by
            # both threads at once
            import pyarrow  # noqa: F401

            preimport = threading.Thread(target=_preimport, name="icesql-preimport", daemon=True)
            preimport.start()
            try:
                self._spark = get_spark(self._spark_master, self._spark_conf)
            finally:
                preimport.join()
            mark("spark ready")
        return self._spark

    @property
    def spark_master(self) -> str | None:
        """The master the session was given (None: ``ICESQL_SPARK_MASTER`` or the default)."""
        return self._spark_master

    @property
    def spark_conf(self) -> dict[str, Any]:
        """The Spark settings the session was given (``--conf``)."""
        return self._spark_conf

    @property
    def started_spark(self) -> Any:
        """The Spark session when one was given or started, else None (never starts one)."""
        return self._spark

    # ----------------------------------------------------------------- resolution

    def target(self, plan: SinkPlan) -> Any:
        """The sink's table with its connections resolved (``target.SinkTarget``)."""
        from icesql.engine.connections.target import resolve_target

        return resolve_target(plan, self.objects, secrets=self.secrets, home=self.home)

    def relation(self, name: str, *, on_error: Any = None, arrow: Any = None) -> Any:
        """The ``sources.relation.Relation`` a sink reading ``name`` on Spark would consume
        (``sources.binding``)."""
        from icesql.engine.backends.base import backend_of

        return self.sources.relation(backend_of(self.spark, None), name, on_error=on_error, arrow=arrow)

    def kafka_binding(self, plan: SourcePlan, binding: Any = None) -> Any:
        """A KAFKA source's binding with its connection's settings (``sources.binding``)."""
        return self.sources.kafka_binding(plan, binding)

    def source_io(self, plan: SourcePlan) -> dict[str, str]:
        """The FileIO properties a FILES source's files are read with (``sources.binding``)."""
        return self.sources.source_io(plan)

    @property
    def remote(self) -> bool:
        """Whether sinks run on a Spark Connect server (started or not)."""
        from icesql.settings import SPARK_MASTER

        if self._spark is not None:
            from icesql.engine.backends.spark.session import is_connect

            return bool(is_connect(self._spark))
        return (self._spark_master or SPARK_MASTER.get() or "").startswith("sc://")

    def relation_columns(self, name: str) -> tuple[Column, ...]:
        """The columns of relation ``name`` as Spark sees them (changelog columns left out)."""
        from icesql.engine.sources.relation import columns_of

        return columns_of(self.relation(name).df)

    # ----------------------------------------------------------------- queries and tables

    def connection_catalog(self, connection: str, sink_storage: str | Sequence[str | None] = ()) -> Any:
        """(live catalog, connection plan, its AWS connection) of a connection (``select.service``)."""
        return self.selects.connection_catalog(connection, sink_storage)

    def load_table(
        self,
        connection: str,
        namespace: tuple[str, ...],
        table: str,
        sink_storage: str | Sequence[str | None] = (),
    ) -> Any:
        """A connection's table, loaded (``select.service``)."""
        return self.selects.load_table(connection, namespace, table, sink_storage)

    def route_select(self, plan: Any, storage: Any, schemas: dict[str, Any] | None = None) -> Any:
        """Where a SELECT runs and why (``select.service``)."""
        return self.selects.route_select(plan, storage, schemas)

    def select(self, plan: Any, storage: Any, *, path: str | None = None) -> Any:
        """Run a ``SelectPlan`` on DuckDB or Spark (``select.service``)."""
        return self.selects.select(plan, storage, path=path)

    # ----------------------------------------------------------------- sinks

    def _runner(self, plan: SinkPlan, local: Any = None) -> Any:
        from icesql.engine.sink.runner import SinkRunner

        runner: Any = SinkRunner
        if plan.routed:  # one sink, many tables (issue 53)
            from icesql.engine.sink.routed import RoutedRunner

            runner = RoutedRunner
        return runner(
            plan,
            spark=None if local is not None else self.spark,
            home=self.home,
            state=self.state,
            target=lambda: self.target(plan),
            relation=lambda backend, arrow: self.sources.relation(
                backend, plan.relation, on_error=plan.on_error, arrow=arrow
            ),
            relation_plan=lambda: self.objects.relation(plan.relation),
            trigger_interval=self.trigger_interval,
            listeners=self.listeners,
            local=local,
        )

    def local_session(self, plan: SinkPlan) -> Any:
        """The ``local_query.LocalSession`` ``plan`` runs in without Spark, or None
        when it needs Spark: ``ICESQL_LOCAL_RUN=0``, a Spark session already given or running, a
        master that is not local, a Spark Connect server, a checkpoint not on this machine, a relation
        that is not a source, or what its source kind says (``SourceProgress.runs_locally``)."""
        from icesql.engine.backends.checkpoint import checkpoint_root, local_path
        from icesql.engine.backends.local.query import LocalSession
        from icesql.engine.backends.spark.session import DEFAULT_CONF, DEFAULT_MASTER
        from icesql.engine.sources.kinds import SOURCE_KINDS
        from icesql.settings import SPARK_MASTER

        if not settings.LOCAL_RUN.enabled() or self._spark is not None or plan.name in self._spark_needed:
            return None
        session = LocalSession.from_conf(
            self._spark_master or SPARK_MASTER.get() or DEFAULT_MASTER, {**DEFAULT_CONF, **self._spark_conf}
        )
        relation = self.objects.relation(plan.relation)
        if session is None or not isinstance(relation, SourcePlan):
            return None
        kind = SOURCE_KINDS[relation.source_kind]()
        if local_path(checkpoint_root(self.home, self.state.sink_id(plan.name), kind.checkpoint_suffix)) is None:
            return None
        why = kind.runs_locally(relation, plan, session)
        if why is not None:
            log.debug("sink %s: runs on Spark: %s", plan.name, why)
            return None
        return session

    def warm_up(self, *, query: bool = False) -> None:
        """Prepare Spark for running sinks, in the background, once per engine (``sink.warmup``)."""
        self.warmer.warm_up(lambda: self.spark, query=query)

    def wait_warm(self, timeout: float | None = None) -> None:
        """Wait for ``warm_up`` to finish (a no-op when it was never started)."""
        self.warmer.wait(timeout)

    def start_sink(self, plan: SinkPlan, *, once: bool = False, will_retry: Any = None) -> None:
        """Start ``plan`` (returns once its query runs). A running sink of that name is stopped first.
        ``will_retry(error)`` says whether a failure will be retried (the sink is then
        ``retrying`` rather than ``failed``). ``once``: a bounded run. In this process, without
        Spark, where the sink can (``local_session``); a batch there that needs Spark restarts it
        on Spark."""
        from icesql.engine.backends.local.query import SparkNeeded

        with self._lock:
            old = self._runners.get(plan.name)
        if old is not None and isinstance(old.error, SparkNeeded):
            self._spark_needed.add(plan.name)
        local = self.local_session(plan)
        if local is None:
            self.warm_up()
        else:
            log.info("sink %s: runs in this process, without starting Spark", plan.name)
        if old is not None and old.active:
            old.stop()
        runner = self._runner(plan, local)
        if will_retry is not None:
            runner.will_retry = will_retry
        with self._lock:
            self._runners[plan.name] = runner
        runner.start(once=once)
        threading.Thread(target=self._notify_when_done, args=(runner,), daemon=True).start()

    def compact(self, plan: SinkPlan) -> list[Any]:
        """Rewrite the sink's table without delete files (``compact.compact_table``); no Spark.
        One ``CompactResult`` per table: the sink's, or each a routed sink has written."""
        from icesql.engine.maintenance.compact import compact_table

        target = self.target(plan)
        return [
            compact_table(table, io_properties=target.io_properties(table), max_file_size=plan.maximum_file_size)
            for table in self._sink_tables(plan, target)
        ]

    def maintain(self, plan: SinkPlan, *, dry_run: bool = False) -> list[Any]:
        """Run every maintenance step due on the sink's table (``maintenance.maintain_table``)
        under its options; no Spark. One ``maintenance.MaintenanceRun`` per table: the sink's,
        or each a routed sink has written. The files the staged batches of this home's sinks
        name (a routed sink's tables' too) are never taken for orphans."""
        from icesql.engine.maintenance import MaintenanceRun, maintain_table, sink_policy, staged_files

        policy = sink_policy(plan)
        if not policy.automatic:
            return [MaintenanceRun(sink=plan.name, table=plan.table_identifier, dry_run=dry_run, off=True)]
        target = self.target(plan)
        return [
            maintain_table(
                table,
                policy,
                sink=plan.name,
                protected_paths=lambda: staged_files(self.home),
                io_properties=target.io_properties(table),
                dry_run=dry_run,
            )
            for table in self._sink_tables(plan, target)
        ]

    def _sink_tables(self, plan: SinkPlan, target: Any) -> list[Any]:
        """The Iceberg tables a sink writes: its table (``ExecutionError`` when missing), or a
        routed sink's tables, those it has staged into (``routed.table_names``) that exist, in
        name order (none before it first ran)."""
        if not plan.routed:
            return [target.load_table()]
        from pyiceberg.exceptions import NoSuchTableError

        from icesql.engine.sink.routed import table_names

        catalog = target.load_catalog()
        tables = []
        for name in table_names(self.home / "sinks" / self.state.sink_id(plan.name)):
            try:
                tables.append(catalog.load_table((*plan.namespace, name)))
            except NoSuchTableError:  # staged into, never created (its first commit failed)
                continue
        return tables

    def _notify_when_done(self, runner: Any) -> None:
        runner.await_termination()
        with self._any_done:
            self._any_done.notify_all()

    def update_sink(self, plan: SinkPlan) -> None:
        """A sink's definition changed (ALTER SINK): a running sink applies the new commit policy
        at once; the rest of the definition applies when it next starts."""
        with self._lock:
            runner = self._runners.get(plan.name)
        if runner is not None and runner.active:
            runner.update_plan(plan)

    def relation_changed(self, names: Iterable[str], why: str) -> list[str]:
        """The relation these sinks read changed (ALTER SOURCE, CREATE OR REPLACE VIEW): each one
        running here restarts, as after a batch with new columns (``SchemaChangedError``: what it
        staged is committed on restart, and the table gains the new columns as it starts).
        Returns the names of the sinks that restart."""
        from icesql.engine.base.restarts import SchemaChangedError

        out = []
        for name in names:
            with self._lock:
                runner = self._runners.get(name)
                supervised = any(name in sup.plans for sup in self._supervisors)
            if runner is None or not runner.active or runner.stopping:
                continue
            if supervised or runner.once:
                # whoever runs it restarts it (the supervisor, or ``run(once=True)``)
                runner.fail(SchemaChangedError(f"sink {name}: {why}; the sink restarts to read it"))
                runner.stop_query()
            else:  # started on its own (the shell): stopped (committing) and started again here
                log.info("sink %s: %s; the sink restarts to read it", name, why)
                self.start_sink(runner.plan)
            out.append(name)
        return out

    def stop_sink(self, name: str) -> None:
        """Stop a sink, committing what it has staged (``shutdown``); it is not restarted."""
        for supervisor in list(self._supervisors):
            supervisor.forget(name)
        with self._lock:
            runner = self._runners.get(name)
        if runner is None:
            return
        runner.stop()

    def flush(self, name: str | None = None) -> None:
        """Commit what the sink (every running sink when ``name`` is None) has staged."""
        with self._lock:
            runners = (
                [self._runners[name]]
                if name is not None and name in self._runners
                else ([] if name is not None else list(self._runners.values()))
            )
        if name is not None and not runners:
            raise ExecutionError(f"sink '{name}' is not running")
        for r in runners:
            if r.active:
                r.flush()

    def run(self, plans: Iterable[SinkPlan], once: bool = False, *, retry: Any = None) -> None:
        """Run ``plans``. ``once``: process what is available, commit, stop; else until stopped.

        The sinks are supervised (``supervisor.Supervisor``, with ``retry`` or the
        ``RetryPolicy`` of the settings): a sink that failed on a transient cause is restarted
        with backoff, resuming from what it committed and staged. Without ``once`` a sink that
        failed for good stays failed while the others go on, and its error is raised once every
        sink has ended (or ``stop()`` was called); with ``once`` such a failure stops the others
        at once (a final commit each) and is raised, and so is a transient failure whose retries
        are spent.
        """
        from icesql.engine.base.hooks import mark
        from icesql.engine.sink.supervisor import RetryPolicy, Supervisor

        plans = list(plans)
        if once:
            if settings.LOCAL_RUN.enabled():  # a run without Spark never converts to pandas
                from icesql.engine.select.duck import without_pandas

                without_pandas()
            plans = self._with_input(plans)
            mark("precheck done")
            if not plans:
                return
        supervisor = Supervisor(self, plans, retry or RetryPolicy.from_settings(), once=once)
        with self._lock:
            self._supervisors.append(supervisor)
        try:
            supervisor.run()
        finally:
            with self._lock:
                self._supervisors.remove(supervisor)
            mark("run ended")

    def _with_input(self, plans: list[SinkPlan]) -> list[SinkPlan]:
        """The sinks a bounded run may find input for: those with certainly nothing new
        (``precheck``, answered without Spark) are left out, each with one log line."""
        from icesql.engine.sink.precheck import nothing_new

        if not settings.PRECHECK.enabled():
            return plans
        out = []
        for plan in plans:
            why = nothing_new(self, plan)
            if why is None:
                out.append(plan)
                continue
            log.info("sink %s: nothing new to read (%s; checked without Spark)", plan.name, why)
            try:
                self.state.update(plan.name, status="stopped")
            except Exception:  # pragma: no cover - state reporting never stops a run
                log.debug("sink %s: state update failed", plan.name, exc_info=True)
        return out

    def await_any_termination(self, timeout: float | None = None) -> str | None:
        """Block until some running sink ends; returns its name (None on timeout or when none run)."""
        with self._any_done:
            active = [r for r in self._runners.values() if r.active]
            if not active and self._runners:
                return None
            ended = self._any_done.wait_for(
                lambda: any(not r.active for r in active) or not active, timeout=timeout
            )
            if not ended:
                return None
            for r in active:
                if not r.active:
                    return r.name
            return None

    def status(self) -> list[dict[str, Any]]:
        """Each sink's ``SinkRunner.status_row()``; a supervised sink's row also says whether it
        is ``retrying`` (``retry_attempt``, ``next_attempt_at``, ``retrying_since``)."""
        with self._lock:
            runners = list(self._runners.values())
            supervisors = list(self._supervisors)
        rows = []
        for r in runners:
            row = r.status_row()
            for supervisor in supervisors:
                row.update(supervisor.overlay(r.name) or {})
            rows.append(row)
        return rows

    def runner(self, name: str) -> Any:
        return self._runners[name]

    def stopping(self) -> None:
        """Mark every running sink as stopping, at once (a signal handler calls this before
        ``stop``): a batch that fails from now on was interrupted by the stop - a SIGTERM to the
        whole process group stops Spark's JVM too, which cancels the batch's job - and does not
        fail the sink; ``stop`` still commits what is staged."""
        with self._lock:
            runners = list(self._runners.values())
        for r in runners:
            if r.active:
                r.stopping = True

    def stop(self) -> None:
        """Stop every running sink with a final commit (and end the supervision of ``run``)."""
        with self._lock:
            supervisors = list(self._supervisors)
        for supervisor in supervisors:
            supervisor.stop()
        with self._lock:
            runners = list(self._runners.values())
        errors: list[IcesqlError] = []
        for r in runners:
            if r.active:
                try:
                    r.stop()
                except IcesqlError as e:
                    errors.append(e)
        if errors:
            raise errors[0]

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


DRIVER_MODULES = (
    "pyiceberg.table",
    "pyiceberg.io.pyarrow",
    "pyiceberg.catalog.sql",
    "pyiceberg.catalog.rest",
)


def _preimport() -> None:
    """Import the third-party modules a sink's driver side uses once Spark runs (best effort;
    none of them imports pyspark or icesql)."""
    import importlib

    for name in DRIVER_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the real import reports it where it matters
            log.debug("pre-import of %s failed", name, exc_info=True)
