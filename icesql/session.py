"""``icesql.Session``: the library entry point that composes store, analyzer and engine.

    with icesql.Session(home="~/.icesql") as s:
        s.execute("CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local')")
        s.execute("CREATE SINK ...")
        s.run(once=True)

Parsing and analysis never start Spark; the engine (``icesql.engine``) is imported the first
time something needs it: a connection check, a sink run, a flush, a SELECT.

This module holds the session's life, its statements (``execute``, ``check``) and its sinks'
runs; the parts it composes live in ``icesql.sessions``: each statement plan is applied by the
function ``APPLY`` names for its type (``sessions.dispatch``: ``definitions``, ``inspection``,
``tables``, ``validation``), the names a statement reads are checked before Spark starts
(``sessions.names``), and what SHOW, DESCRIBE and EXPLAIN return is built in ``icesql.results``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from catalog_store import StoreError
from icesql import plan as P
from icesql.analyzer.catalog import OverlayCatalog
from icesql.errors import CatalogError, ExecutionError, IcesqlError, UsageError
from icesql.results import INLINE_SECRET_PREFIX, Result, SinkStatus
from icesql.sessions import observing
from icesql.sessions.dispatch import APPLY
from icesql.sessions.errors import base_dir_of, located, masked
from icesql.sessions.home import HOME_HINT, default_home, home_path, make_home
from icesql.sessions.names import Names, SparkWorld, check_statement
from icesql.sessions.registry import capture_schemas
from icesql.sessions.store_views import ObjectResolver, StateCallback, StoreCatalogView
from icesql.sessions.tables import tables
from icesql.sessions.validation import PendingSecrets, precheck
from icesql.syntax import ast as A

if TYPE_CHECKING:
    from catalog_store import CatalogStore
    from icesql.engine.engine import Engine
    from icesql.observe.health import SinkReport
    from icesql.observe.server import ObserveServer

# The name the overlay had when it lived here.
OverlayCatalogView = OverlayCatalog


def blank_prefix(text: str, start: int) -> str:
    """``text`` with everything before ``start`` blanked out except newlines, so that a
    statement parsed on its own keeps the line and column it has in the whole script.
    (``icesql.syntax.parser.parse_range`` does this without copying the script.)"""
    return re.sub(r"[^\n]", " ", text[:start]) + text[start:]


class Session:
    """A connection to an icesql home: its catalog store, and the sinks it runs."""

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        *,
        spark: Any = None,
        spark_master: str | None = None,
        spark_conf: dict[str, str] | None = None,
        validate: bool = True,
        verbose: bool = False,
    ) -> None:
        from catalog_store import CatalogStore, StoreOpenError
        from icesql import settings

        self.home = home_path(home) if home is not None else default_home()
        make_home(self.home)
        try:
            self.store: CatalogStore = CatalogStore(self.home / "catalog.db", secret_key=settings.SECRET_KEY.get())
        except StoreOpenError as err:
            raise UsageError(f"cannot use {str(self.home)!r} as the icesql home: {err.message}", hint=HOME_HINT) from None
        except StoreError as err:
            raise CatalogError(err.message, hint=err.hint) from None
        self.validate = validate
        self.verbose = verbose
        self.catalog_view = StoreCatalogView(self.store)  # what the analyzer sees of the store
        # decided now: a Spark this session starts later knows only what icesql gives it
        self.spark_world = SparkWorld.of(spark, spark_master, spark_conf or {})
        self._created: dict[str, None] = {}  # sinks created (or named IF NOT EXISTS), in order
        self._spark = spark
        self._spark_master = spark_master
        self._spark_conf = dict(spark_conf or {})
        self._engine: Engine | None = None
        self._observer: ObserveServer | None = None
        self._running: list[str] = []  # the sinks run or started here, for the observer

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop running sinks (final commit, reason ``shutdown``), the metrics server, and close
        the store."""
        try:
            self.stop()
        finally:
            if self._observer is not None:
                self._observer.close()
                self._observer = None
            self.store.close()

    def stopping(self) -> None:
        """Say that a stop is coming (``Engine.stopping``); safe in a signal handler."""
        if self._engine is not None:
            self._engine.stopping()

    def stop(self) -> None:
        if self._engine is not None:
            self._engine.stop()

    @property
    def engine(self) -> Engine:
        """The engine, created (and Spark started) only when first needed."""
        if self._engine is None:
            from icesql.engine.engine import Engine

            self._engine = Engine(
                self.home,
                objects=ObjectResolver(self.catalog_view),
                secrets=self.secret_value,
                state=StateCallback(self.store),
                spark=self._spark,
                spark_master=self._spark_master,
                spark_conf=self._spark_conf,
            )
        return self._engine

    @property
    def running_engine(self) -> Engine | None:
        """The engine if something created it already (sinks may run there), else None."""
        return self._engine

    def secret_value(self, name: str) -> str:
        from catalog_store import ObjectNotFoundError

        try:
            return self.store.get_secret(name)
        except ObjectNotFoundError:
            raise ExecutionError(
                f"secret {name!r} does not exist", hint="create it with CREATE SECRET name AS '...'"
            ) from None

    @property
    def created_sinks(self) -> list[str]:
        """The sinks ``execute`` created (or named with IF NOT EXISTS), in order: what ``run``
        runs when no sink is named."""
        return list(self._created)

    def remember_sink(self, name: str) -> None:
        """A sink ``execute`` created (or named with IF NOT EXISTS): ``run`` runs it."""
        self._created[name] = None

    def forget_sink(self, name: str) -> None:
        self._created.pop(name, None)

    # ----------------------------------------------------------------- statements

    def parse(self, sql: str, *, filename: str | None = None) -> list[A.Statement]:
        from icesql.syntax.parser import parse

        return parse(sql, filename=filename)

    def execute(
        self,
        sql: str,
        *,
        filename: str | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        atomic: bool = False,
    ) -> list[Result]:
        """Parse, validate and apply every statement of ``sql`` in order.

        By default statements before a failing one stay applied (as in psql; ``execute_iter``
        yields each result as it is applied). With ``atomic=True`` the whole script is
        validated first (each statement against what the earlier ones would create) and then
        applied in one catalog-store transaction: an error anywhere applies nothing. Errors
        are ``IcesqlError`` subclasses carrying the source text, so ``err.render()`` shows the
        line and a caret.
        """
        if atomic:
            return self._execute_atomic(sql, filename=filename, base_dir=base_dir)
        return list(self.execute_iter(sql, filename=filename, base_dir=base_dir))

    def execute_iter(
        self, sql: str, *, filename: str | None = None, base_dir: str | os.PathLike[str] | None = None
    ) -> Iterator[Result]:
        """Like ``execute``, yielding each statement's result once it is applied, so that a
        caller can show what was done before an error (the error is raised by the next step)."""
        for stmt in self.parse(sql, filename=filename):
            yield self.execute_statement(stmt, source=sql, filename=filename, base_dir=base_dir)

    def execute_statement(
        self,
        stmt: A.Statement,
        *,
        source: str | None = None,
        filename: str | None = None,
        base_dir: str | os.PathLike[str] | None = None,
    ) -> Result:
        from icesql.analyzer import analyze

        try:
            analyzed = analyze(stmt, self.catalog_view, source=source, filename=filename, base_dir=base_dir_of(base_dir))
            check_statement(analyzed.plan, stmt, Names(self.catalog_view, self.catalog_view), self.spark_world)
            # A warning renders against the analyzer's masked copy of the whole source: the
            # inline secret it warns about, or one elsewhere on its line, never shows.
            warnings = tuple(w.render() for w in analyzed.warnings)
            plan = capture_schemas(analyzed.plan, stmt, self.catalog_view, self.secret_value)
            result = self._apply(plan, stmt)
        except IcesqlError as err:
            raise located(err, stmt, source, filename) from None
        except StoreError as err:
            # A clash with another process, a missing ICESQL_SECRET_KEY, ...: same error tree.
            raise CatalogError(err.message, stmt.span, err.hint, masked(source), filename) from None
        return dataclasses.replace(result, warnings=warnings + result.warnings)

    def _execute_atomic(
        self, sql: str, *, filename: str | None, base_dir: str | os.PathLike[str] | None
    ) -> list[Result]:
        """Validate the whole script, check its connections, then apply it in one transaction."""
        from icesql.analyzer import analyze

        stmts = self.parse(sql, filename=filename)
        overlay = OverlayCatalog(self.catalog_view)
        steps: list[tuple[A.Statement, P.StatementPlan, tuple[str, ...]]] = []
        bdir = base_dir_of(base_dir)
        known = PendingSecrets(self)  # the secrets a registry source's schemas are fetched with
        for stmt in stmts:
            try:
                analyzed = analyze(stmt, overlay, source=sql, filename=filename, base_dir=bdir)
                check_statement(analyzed.plan, stmt, Names(overlay, self.catalog_view), self.spark_world)
                plan = capture_schemas(analyzed.plan, stmt, overlay, known.value)
                overlay.apply(plan)
                known.record(plan)
            except IcesqlError as err:
                raise located(err, stmt, sql, filename) from None
            steps.append((stmt, plan, tuple(w.render() for w in analyzed.warnings)))
        # Network checks (CREATE CONNECTION, VALIDATE CONNECTION) before the store's write lock
        # is taken: another process must not wait on a slow catalog.
        pending = PendingSecrets(self)
        for stmt, plan, _ in steps:
            try:
                precheck(self, plan, overlay, pending)
            except IcesqlError as err:
                raise located(err, stmt, sql, filename) from None
            pending.record(plan)
        created = dict(self._created)
        results: list[Result] = []
        try:
            with self.store.transaction():
                for stmt, plan, warnings in steps:
                    try:
                        result = self._apply(plan, stmt, checked=True)
                    except IcesqlError as err:
                        raise located(err, stmt, sql, filename) from None
                    except StoreError as err:
                        raise CatalogError(err.message, stmt.span, err.hint, masked(sql), filename) from None
                    results.append(dataclasses.replace(result, warnings=warnings + result.warnings))
        except StoreError as err:  # the commit itself
            self._created = created
            raise CatalogError(err.message, None, err.hint, masked(sql), filename) from None
        except BaseException:
            self._created = created  # nothing was stored
            raise
        return results

    def check(
        self, sql: str, *, filename: str | None = None, base_dir: str | os.PathLike[str] | None = None
    ) -> list[IcesqlError]:
        """Parse and validate every statement without side effects; return every error.

        One syntax error does not hide the errors after it: when the script does not parse as
        a whole, each statement is parsed on its own (keeping its position in the file). Later
        statements are validated against the objects the earlier ones would create. Time and
        memory grow linearly with the script.
        """
        from icesql.analyzer import analyze
        from icesql.syntax.parser import parse, parse_range, split_statements

        errors: list[IcesqlError] = []
        overlay = OverlayCatalog(self.catalog_view)
        bdir = base_dir_of(base_dir)

        def failed(err: IcesqlError, stmt: A.Statement | None) -> None:
            errors.append(located(err, stmt, sql, filename))

        def analyze_all(stmts: list[A.Statement]) -> None:
            for stmt in stmts:
                try:
                    analyzed = analyze(stmt, overlay, source=sql, filename=filename, base_dir=bdir)
                    # without a query's names: sqlglot is the engine's, and check imports no engine
                    check_statement(analyzed.plan, stmt, Names(overlay, self.catalog_view), self.spark_world, queries=False)
                    overlay.apply(analyzed.plan)
                except IcesqlError as err:
                    failed(err, stmt)

        try:
            whole = parse(sql, filename=filename)
        except IcesqlError:
            pass
        else:
            analyze_all(whole)
            return errors
        line, line_start, counted = 1, 0, 0
        for start, end in split_statements(sql):
            newlines = sql.count("\n", counted, start)
            if newlines:
                line += newlines
                line_start = sql.rfind("\n", counted, start) + 1
            counted = start
            try:
                stmts = parse_range(sql, start, end, line=line, line_start=line_start, filename=filename)
            except IcesqlError as err:
                failed(err, None)
                continue
            analyze_all(stmts)
        return errors

    def _apply(self, plan: P.StatementPlan, stmt: A.Statement, *, checked: bool = False) -> Result:
        """Apply one plan (``checked``: its network checks were done before, see ``precheck``)."""
        method = APPLY[type(plan)]
        return method(self, plan, stmt, checked)

    # ----------------------------------------------------------------- running

    def sink_plans(self, names: Sequence[str] | None = None) -> list[P.SinkPlan]:
        if names is None:
            objs = self.store.list_objects("sink")
        else:
            objs = []
            for n in names:
                o = self.store.get_object("sink", n)
                if o is None:
                    raise CatalogError(f"sink {n!r} does not exist")
                objs.append(o)
        return [P.plan_from_dict(o.definition) for o in objs]

    def run(self, *, once: bool = False, sinks: Sequence[str] | None = None) -> None:
        """Run sinks: the named ones, else those created by ``execute`` so far, else all.

        ``once=True`` processes what is available, commits and returns; otherwise it blocks
        until the sinks stop or ``stop()`` is called (Ctrl-C in the CLI). With no Spark session
        given, a sink reading a FILES source on the Arrow path (appends and upserts) or appending
        from a Kafka topic runs in this process without starting Spark, ``once`` or not
        (``engine.local_query``; ``ICESQL_LOCAL_RUN=0`` turns it off).
        """
        names = list(sinks) if sinks is not None else (self.created_sinks or None)
        plans = self.sink_plans(names)
        if not plans:
            return
        self._observe(p.name for p in plans)
        self.engine.run(plans, once=once)

    def warm_up(self) -> None:
        """Start Spark (if this session has none yet) and prepare it for running sinks in the
        background: the Arrow path's data source is registered and run once by a throwaway query
        of a one-line file, and Spark's Python workers import the writer's modules: a session's
        first sink otherwise spends a few seconds more before its first batch. ``run`` and
        ``start`` do part of this themselves as they start the first sink (registration and
        workers); call it earlier (for example while the program does other work) to overlap
        all of it with that work. ``engine.wait_warm()`` waits for it."""
        self.engine.warm_up(query=True)

    def serve(self, *, once: bool = False) -> None:
        """Run every sink of the catalog store."""
        self.run(once=once, sinks=[o.name for o in self.store.list_objects("sink")])

    def start(self, sinks: Sequence[str] | None = None) -> None:
        """Start sinks in the background (the shell uses this) and return at once (without Spark
        where ``run`` would go without it)."""
        for plan in self.sink_plans(sinks):
            self._observe([plan.name])
            self.engine.start_sink(plan)

    def compact(self, sinks: Sequence[str] | None = None) -> list[Any]:
        """Rewrite the tables of the named sinks (all when None) without delete files and with
        few data files, so that every reader stays fast after many upserts. Safe while the sinks
        run: a commit in between makes the compaction start over. Returns one
        ``icesql.engine.maintenance.compact.CompactResult`` per table: a sink's, or each one a
        routed sink (TABLE a template) has written (``icesql.repl.format.format_compaction``
        gives a line naming it)."""
        return [result for plan in self.sink_plans(sinks) for result in self.engine.compact(plan)]

    def maintain(self, sinks: Sequence[str] | None = None, *, dry_run: bool = False) -> list[Any]:
        """Maintain the tables of the named sinks (all when None) under their options: compact,
        rewrite manifests, expire snapshots and delete orphan files, each when due. For tables
        whose sinks are not running (a running sink's commit in between makes a step retry).
        ``dry_run`` changes nothing and says what would be done. Returns one
        ``icesql.engine.maintenance.MaintenanceRun`` per table: a sink's, or each one a routed
        sink has written (``icesql.repl.format.format_maintenance`` gives its lines)."""
        return [run for plan in self.sink_plans(sinks) for run in self.engine.maintain(plan, dry_run=dry_run)]

    def flush(self, name: str | None = None) -> None:
        if self._engine is not None:
            self._engine.flush(name)

    def status(self) -> list[SinkStatus]:
        """Each sink's state from the store, with live figures when it runs here."""
        return observing.statuses(self.store, observing.live_rows(self._engine))

    # ----------------------------------------------------------------- observing

    def serve_metrics(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve Prometheus metrics (``/metrics``), health (``/healthz``, ``/readyz``) and a
        status page (``/``) for the sinks this session runs, on a background thread; returns
        the base URL (``port=0`` picks a free port). Stopped by ``close()``. Needs
        ``pip install 'icesql[metrics]'``."""
        if self._observer is None:
            self._observer = observing.serve_metrics(self.engine, self._sink_reports, host, port)
        return self._observer.url

    def _observe(self, names: Iterable[str]) -> None:
        for name in names:
            if name not in self._running:
                self._running.append(name)

    def _sink_reports(self) -> list[SinkReport]:
        """The sinks run here as the observer sees them: live figures, else the store's."""
        return observing.sink_reports(self.store, self._engine, self._running)

    def object_names(self, kind: str) -> list[str]:
        return [o.name for o in self.store.list_objects(kind)]

    def relation_columns(self, name: str) -> tuple[P.Column, ...]:
        return tuple(self.engine.relation_columns(name))

    def tables(self, connection: str, namespace: Sequence[str] = ()) -> list[tuple[str, ...]]:
        """The tables (namespace parts + name) of an ICEBERG CATALOG connection, in
        ``namespace`` or in every top-level namespace."""
        return tables(self, connection, namespace)


__all__ = [
    "APPLY",
    "INLINE_SECRET_PREFIX",
    "OverlayCatalogView",
    "Result",
    "Session",
    "SinkStatus",
    "StoreCatalogView",
    "blank_prefix",
    "default_home",
]
