"""``icesql.Session``: the library entry point that composes store, analyzer and executor.

    with icesql.Session(home="~/.icesql") as s:
        s.execute("CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local')")
        s.execute("CREATE SINK ...")
        s.run(once=True)

Parsing and analysis never start Spark; the engine (``icesql.engine``) is imported the first
time something needs it: a connection check, a sink run, a flush.

Each statement plan is applied by the method ``APPLY`` names for its type (a test checks that
every plan type has one); what SHOW, DESCRIBE and EXPLAIN return is built in ``icesql.results``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from catalog_store import StoreError
from icesql import plan as P
from icesql import results as R
from icesql.analyzer.catalog import EFFECTS, OverlayCatalog, object_kind
from icesql.errors import CatalogError, ExecutionError, IcesqlError, UsageError
from icesql.results import INLINE_SECRET_PREFIX, Result, SinkStatus
from icesql.sessions.names import Names, SparkWorld, check_statement, check_tables, missing_table
from icesql.syntax import ast as A

if TYPE_CHECKING:
    from catalog_store import CatalogStore
    from icesql.engine.engine import Engine
    from icesql.observe.health import SinkReport
    from icesql.observe.server import ObserveServer

# The name the overlay had when it lived here.
OverlayCatalogView = OverlayCatalog


def default_home() -> Path:
    from icesql import settings

    return _home_path(settings.HOME.get() or "~/.icesql")


def blank_prefix(text: str, start: int) -> str:
    """``text`` with everything before ``start`` blanked out except newlines, so that a
    statement parsed on its own keeps the line and column it has in the whole script.
    (``icesql.syntax.parser.parse_range`` does this without copying the script.)"""
    return re.sub(r"[^\n]", " ", text[:start]) + text[start:]


_HOME_HINT = "point --home (or ICESQL_HOME) at a directory icesql may create and write"
# What VALIDATE CONNECTION checks, and what CREATE checks over the network before it stores
_CONNECTIONS = (
    P.AwsConnectionPlan,
    P.GcsConnectionPlan,
    P.AzureConnectionPlan,
    P.CatalogConnectionPlan,
    P.KafkaConnectionPlan,
)
_Validated = (
    P.AwsConnectionPlan
    | P.GcsConnectionPlan
    | P.AzureConnectionPlan
    | P.CatalogConnectionPlan
    | P.KafkaConnectionPlan
    | P.SourcePlan
)


def _home_path(home: str | os.PathLike[str]) -> Path:
    try:
        return Path(home).expanduser()
    except RuntimeError:  # ~user of a user that does not exist
        raise UsageError(f"cannot use {str(home)!r} as the icesql home: no such user", hint=_HOME_HINT) from None


def _make_home(home: Path) -> None:
    """Create the home (owner-only) or say, as a usage error, why it cannot be one."""
    problem = None
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
    except FileExistsError:
        problem = "it is a file, not a directory"
    except NotADirectoryError:
        problem = "a part of the path is a file, not a directory"
    except PermissionError:
        problem = "permission denied"
    except (OSError, ValueError) as exc:
        problem = getattr(exc, "strerror", None) or str(exc)
    if problem is None and not home.is_dir():
        problem = "it is not a directory"
    if problem is not None:
        raise UsageError(f"cannot use {str(home)!r} as the icesql home: {problem}", hint=_HOME_HINT)


# --------------------------------------------------------------------------- catalog views


class StoreCatalogView:
    """The analyzer's view of the catalog store."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def get(self, kind: str, name: str) -> P.ObjectPlan | None:
        obj = self._session.store.get_object(kind, name)
        if obj is None:
            return None
        plan: P.ObjectPlan = P.plan_from_dict(obj.definition)
        return plan

    def secret_exists(self, name: str) -> bool:
        return self._session.store.get_object("secret", name) is not None

    def relation_columns(self, name: str) -> tuple[P.Column, ...] | None:
        rel = self.get("source", name) or self.get("view", name)
        if isinstance(rel, P.SourcePlan) and rel.columns:
            return rel.columns
        return None

    def names(self, kind: str) -> list[str]:
        """Every object of a kind, for did-you-mean hints (an error's cost only)."""
        return [o.name for o in self._session.store.list_objects(kind)]


# --------------------------------------------------------------------------- session


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

        self.home = _home_path(home) if home is not None else default_home()
        _make_home(self.home)
        try:
            self.store: CatalogStore = CatalogStore(self.home / "catalog.db", secret_key=settings.SECRET_KEY.get())
        except StoreOpenError as err:
            raise UsageError(f"cannot use {str(self.home)!r} as the icesql home: {err.message}", hint=_HOME_HINT) from None
        except StoreError as err:
            raise CatalogError(err.message, hint=err.hint) from None
        self.validate = validate
        self.verbose = verbose
        self._created: dict[str, None] = {}  # sinks created (or named IF NOT EXISTS), in order
        self._spark = spark
        self._spark_master = spark_master
        self._spark_conf = dict(spark_conf or {})
        self._engine: Engine | None = None
        self._view = StoreCatalogView(self)
        self._observer: ObserveServer | None = None
        self._running: list[str] = []  # the sinks run or started here, for the observer
        # decided now: a Spark this session starts later knows only what icesql gives it
        self._world = SparkWorld.of(spark, spark_master, self._spark_conf)

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
        """The executor, created (and Spark started) only when first needed."""
        if self._engine is None:
            from icesql.engine.engine import Engine

            self._engine = Engine(
                self.home,
                objects=_ObjectResolver(self),
                secrets=self._secret_value,
                state=_StateCallback(self),
                spark=self._spark,
                spark_master=self._spark_master,
                spark_conf=self._spark_conf,
            )
        return self._engine

    def _secret_value(self, name: str) -> str:
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
            analyzed = analyze(stmt, self._view, source=source, filename=filename, base_dir=_base(base_dir))
            check_statement(analyzed.plan, stmt, Names(self._view, self._view), self._world)
            # A warning renders against the analyzer's masked copy of the whole source: the
            # inline secret it warns about, or one elsewhere on its line, never shows.
            warnings = tuple(w.render() for w in analyzed.warnings)
            result = self._apply(analyzed.plan, stmt)
        except IcesqlError as err:
            raise _located(err, stmt, source, filename) from None
        except StoreError as err:
            # A clash with another process, a missing ICESQL_SECRET_KEY, ...: same error tree.
            raise CatalogError(err.message, stmt.span, err.hint, _masked(source), filename) from None
        return dataclasses.replace(result, warnings=warnings + result.warnings)

    def _execute_atomic(
        self, sql: str, *, filename: str | None, base_dir: str | os.PathLike[str] | None
    ) -> list[Result]:
        """Validate the whole script, check its connections, then apply it in one transaction."""
        from icesql.analyzer import analyze

        stmts = self.parse(sql, filename=filename)
        overlay = OverlayCatalog(self._view)
        steps: list[tuple[A.Statement, P.StatementPlan, tuple[str, ...]]] = []
        bdir = _base(base_dir)
        for stmt in stmts:
            try:
                analyzed = analyze(stmt, overlay, source=sql, filename=filename, base_dir=bdir)
                check_statement(analyzed.plan, stmt, Names(overlay, self._view), self._world)
                overlay.apply(analyzed.plan)
            except IcesqlError as err:
                raise _located(err, stmt, sql, filename) from None
            steps.append((stmt, analyzed.plan, tuple(w.render() for w in analyzed.warnings)))
        # Network checks (CREATE CONNECTION, VALIDATE CONNECTION) before the store's write lock
        # is taken: another process must not wait on a slow catalog.
        pending = _PendingSecrets(self)
        for stmt, plan, _ in steps:
            try:
                self._precheck(plan, overlay, pending)
            except IcesqlError as err:
                raise _located(err, stmt, sql, filename) from None
            pending.record(plan)
        created = dict(self._created)
        results: list[Result] = []
        try:
            with self.store.transaction():
                for stmt, plan, warnings in steps:
                    try:
                        result = self._apply(plan, stmt, checked=True)
                    except IcesqlError as err:
                        raise _located(err, stmt, sql, filename) from None
                    except StoreError as err:
                        raise CatalogError(err.message, stmt.span, err.hint, _masked(sql), filename) from None
                    results.append(dataclasses.replace(result, warnings=warnings + result.warnings))
        except StoreError as err:  # the commit itself
            self._created = created
            raise CatalogError(err.message, None, err.hint, _masked(sql), filename) from None
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
        overlay = OverlayCatalog(self._view)
        bdir = _base(base_dir)

        def failed(err: IcesqlError, stmt: A.Statement | None) -> None:
            errors.append(_located(err, stmt, sql, filename))

        def analyze_all(stmts: list[A.Statement]) -> None:
            for stmt in stmts:
                try:
                    analyzed = analyze(stmt, overlay, source=sql, filename=filename, base_dir=bdir)
                    # without a query's names: sqlglot is the engine's, and check imports no engine
                    check_statement(analyzed.plan, stmt, Names(overlay, self._view), self._world, queries=False)
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

    # ----------------------------------------------------------------- applying plans

    def _apply(self, plan: P.StatementPlan, stmt: A.Statement, *, checked: bool = False) -> Result:
        """Apply one plan (``checked``: its network checks were done before, see ``_precheck``)."""
        method = APPLY[type(plan)]
        return method(self, plan, stmt, checked)

    def _apply_secret(self, plan: P.CreateSecretPlan, stmt: A.Statement, checked: bool) -> Result:
        if plan.replace:
            self.store.alter_secret(plan.name, plan.value.reveal())
            return Result("ALTER SECRET", "ALTER SECRET")
        created = self.store.create_secret(plan.name, plan.value.reveal(), if_not_exists=plan.if_not_exists)
        msg = "CREATE SECRET" if created else f"secret {plan.name!r} already exists, skipping"
        return Result("CREATE SECRET", msg)

    def _deps_of(self, definition: P.ObjectPlan) -> tuple[tuple[str, str], ...]:
        obj = self.store.get_object(object_kind(definition), definition.name)
        return tuple(obj.dependencies) if obj is not None else ()

    def _apply_create(self, plan: P.CreateObjectPlan, stmt: A.Statement, checked: bool) -> Result:
        d = plan.definition
        kind = object_kind(d)
        label = f"CREATE {kind.upper()}"
        if plan.if_not_exists and self.store.get_object(kind, d.name) is not None:
            self._remember_sink(kind, d.name)
            return Result(label, f"{kind} {d.name!r} already exists, skipping")
        if kind == "sink":
            self._check_cleaned_sources(d.name, plan.dependencies)
        if plan.replace and self.store.get_object(kind, d.name) is not None:
            self.store.replace_object(kind, d.name, plan.sql, P.to_dict(d), plan.dependencies)
            restarted = self._relation_changed(kind, d.name)
            return Result(f"CREATE OR REPLACE {kind.upper()}", f"CREATE OR REPLACE {kind.upper()}" + restarted)
        if self.store.get_object(kind, d.name) is not None:
            raise CatalogError(
                f"{kind} {d.name!r} already exists",
                hint=f"use CREATE {kind.upper()} IF NOT EXISTS, or DROP {kind.upper()} {d.name} first",
            )
        if not checked and self._needs_validation(d):
            # Validate before storing (a connection that cannot connect is not kept), outside
            # the store's write lock, with inline secrets that are not stored yet.
            assert isinstance(d, _Validated)
            inline = {n: v.reveal() for n, v in plan.inline_secrets}
            self._validate_definition(d, lambda n: inline[n] if n in inline else self._secret_value(n))
        with self.store.transaction():
            for name, value in plan.inline_secrets:
                if self.store.get_object("secret", name) is not None:
                    self.store.alter_secret(name, value.reveal())
                else:
                    self.store.create_secret(name, value.reveal(), hidden=True)
            self.store.create_object(kind, d.name, plan.sql, P.to_dict(d), plan.dependencies)
        self._remember_sink(kind, d.name)
        return Result(label, label)

    def _check_cleaned_sources(self, sink: str, dependencies: tuple[tuple[str, str], ...]) -> None:
        """A FILES source with CLEAN SOURCE feeds one sink: a second one would miss the files the
        first moves away or deletes once it has committed them."""
        stack, seen = [d for d in dependencies if d[0] in ("view", "source")], set()
        while stack:
            kind, name = stack.pop()
            if (kind, name) in seen:
                continue
            seen.add((kind, name))
            obj = self.store.get_object(kind, name)
            if obj is None:
                continue
            if kind == "view":
                stack.extend(d for d in obj.dependencies if d[0] in ("view", "source"))
                continue
            source = P.plan_from_dict(obj.definition)
            if source.clean_source is P.CleanSource.OFF:
                continue
            readers = sorted({n for k, n in _all_dependents(self.store, "source", name) if k == "sink"} - {sink})
            if readers:
                raise CatalogError(
                    f"source {name!r} has CLEAN SOURCE = '{source.clean_source.value}' and sink "
                    f"{readers[0]!r} already reads it: a second sink would miss the files the first "
                    "one moves away",
                    hint="give each sink a source of its own (its own directory), or create the "
                    "source without CLEAN SOURCE",
                )

    def _remember_sink(self, kind: str, name: str) -> None:
        if kind == "sink":
            self._created[name] = None

    def _apply_alter_source(self, plan: P.AlterSourcePlan, stmt: A.Statement, checked: bool) -> Result:
        obj = self.store.get_object("source", plan.name)
        assert obj is not None, "the analyzer checked that the source exists"
        self.store.replace_object(
            "source", plan.name, _with_schema(obj.sql, plan.definition.schema), P.to_dict(plan.definition), obj.dependencies
        )
        return Result("ALTER SOURCE", "ALTER SOURCE" + self._relation_changed("source", plan.name))

    def _relation_changed(self, kind: str, name: str) -> str:
        """A source's schema or a view's query changed: the sinks reading it that run here restart
        (a restart adds the new columns to their tables); returns what the result says of them."""
        readers = [n for k, n in _all_dependents(self.store, kind, name) if k == "sink"]
        if self._engine is None or not readers:
            return ""
        restarted = self._engine.relation_changed(readers, f"{kind} {name} changed")
        return f" (sinks restarting: {', '.join(restarted)})" if restarted else ""

    def _apply_alter_sink(self, plan: P.AlterSinkPlan, stmt: A.Statement, checked: bool) -> Result:
        self.store.replace_object("sink", plan.name, plan.sql, P.to_dict(plan.definition), self._deps_of(plan.definition))
        if self._engine is not None:
            # A running sink picks the new commit policy up at once.
            self._engine.update_sink(plan.definition)
        return Result("ALTER SINK", "ALTER SINK")

    def _apply_drop(self, plan: P.DropPlan, stmt: A.Statement, checked: bool) -> Result:
        label = f"DROP {plan.kind.upper()}"
        if self.store.get_object(plan.kind, plan.name) is None:
            if plan.if_exists:
                return Result(label, f"{plan.kind} {plan.name!r} does not exist, skipping")
            raise CatalogError(f"{plan.kind} {plan.name!r} does not exist")
        from catalog_store import DependentObjectsError

        dependents = _all_dependents(self.store, plan.kind, plan.name)
        for kind, name in [(plan.kind, plan.name), *dependents]:
            if kind == "sink" and self._engine is not None and (plan.cascade or kind == plan.kind):
                self._engine.stop_sink(name)
        try:
            dropped = self.store.drop_object(plan.kind, plan.name, cascade=plan.cascade)
        except DependentObjectsError as err:
            names = ", ".join(f"{k} {n}" for k, n in err.dependents)
            verb = "depends" if len(err.dependents) == 1 else "depend"
            raise CatalogError(
                f"cannot drop {plan.kind} {plan.name!r}: {names} {verb} on it",
                hint=f"drop them first, or use DROP {plan.kind.upper()} {plan.name} CASCADE",
            ) from None
        # (the store deletes hidden inline secrets that nothing uses any more)
        for kind, name in dropped:
            if kind == "sink":
                self._created.pop(name, None)
        extra = [f"{k} {n}" for k, n in dropped if (k, n) != (plan.kind, plan.name)]
        msg = label + (f" (also dropped {', '.join(extra)})" if extra else "")
        return Result(label, msg)

    def _apply_show(self, plan: P.ShowPlan, stmt: A.Statement, checked: bool) -> Result:
        kind = plan.kind.rstrip("s").lower()
        objects = self.store.list_objects(kind)
        return R.show_secrets(objects) if kind == "secret" else R.show_objects(plan.kind, objects)

    def _apply_show_create(self, plan: P.ShowCreatePlan, stmt: A.Statement, checked: bool) -> Result:
        obj = self.store.get_object(plan.kind, plan.name)
        if obj is None:
            raise CatalogError(f"{plan.kind} {plan.name!r} does not exist", stmt.span)
        return R.show_create(plan.kind, plan.name, obj.sql)

    def _apply_sink_status(self, plan: P.ShowSinkStatusPlan, stmt: A.Statement, checked: bool) -> Result:
        statuses = self.status()
        if plan.name is not None:
            if self.store.get_object("sink", plan.name) is None:
                raise CatalogError(f"sink {plan.name!r} does not exist", stmt.span)
            statuses = [s for s in statuses if s.name == plan.name]
        return R.sink_status(statuses)

    def _apply_describe(self, plan: P.DescribePlan, stmt: A.Statement, checked: bool) -> Result:
        obj = self.store.find_object(plan.name)
        if obj is None:
            raise CatalogError(
                f"no object named {plan.name!r}", stmt.span, hint="SHOW SINKS, SHOW SOURCES, ... list what exists"
            )
        state = self.store.get_sink_state(obj.name) if obj.kind == "sink" else None
        return R.describe(obj, state)

    def _apply_explain(self, plan: P.ExplainPlan, stmt: A.Statement, checked: bool) -> Result:
        return R.explain(plan.sink)

    def _apply_explain_select(self, plan: P.ExplainSelectPlan, stmt: A.Statement, checked: bool) -> Result:
        assert isinstance(stmt, A.Explain) and isinstance(stmt.statement, A.Select)
        select = plan.select
        try:
            decision = self.engine.route_select(select, self._sink_storage)
        except IcesqlError as err:
            raise self._table_error(err, select, stmt.statement) from None
        return R.explain_select(select, decision)

    def _table_error(self, err: IcesqlError, plan: P.SelectPlan, stmt: A.Select) -> IcesqlError:
        """A connection table's error pointing at the name, a missing one saying what exists."""
        from icesql.analyzer.queries import query_span
        from icesql.engine.table_reader import MissingTableError

        if isinstance(err, MissingTableError):
            err = missing_table(err, self._open_catalog, self._secret_value)
        ref = getattr(err, "table_ref", None)
        if ref is not None and err.span is None:
            err.span = query_span(stmt, ref.start - plan.base, ref.end - plan.base)
        return err

    def _open_catalog(self, connection: str) -> tuple[Any, P.CatalogConnectionPlan, P.AwsConnectionPlan | None]:
        found: tuple[Any, P.CatalogConnectionPlan, P.AwsConnectionPlan | None]
        found = self.engine.connection_catalog(connection, self._sink_storage(connection))
        return found

    def _apply_validate(self, plan: P.ValidateConnectionPlan, stmt: A.Statement, checked: bool) -> Result:
        if not checked:
            self._validate_connection(plan.name, force=True)
        return Result("VALIDATE CONNECTION", f"connection {plan.name!r} is valid")

    def _apply_flush(self, plan: P.FlushSinkPlan, stmt: A.Statement, checked: bool) -> Result:
        if self._engine is None:
            return Result("FLUSH SINK", "no sink is running")
        self._engine.flush(plan.name)
        return Result("FLUSH SINK", "FLUSH SINK")

    def _apply_select(self, plan: P.SelectPlan, stmt: A.Statement, checked: bool) -> Result:
        from icesql.analyzer.queries import query_span
        from icesql.engine.query import QueryAnalysisError, QueryError

        assert isinstance(stmt, A.Select)
        # source offsets -> offsets in the query text (``plan.base`` is where that text starts)
        try:
            if plan.relations and plan.tables:  # Spark will run it: its tables are checked first
                check_tables(plan, self._open_catalog, self._secret_value)
            out = self.engine.select(plan, self._sink_storage)
        except (QueryError, QueryAnalysisError) as err:
            if err.position is not None and err.span is None:
                start = plan.source_offset(err.position) - plan.base
                err.span = query_span(stmt, start, start + err.length)
            raise
        except IcesqlError as err:
            raise self._table_error(err, plan, stmt) from None
        return R.query_rows(out.columns, out.rows, plan.limit)

    def _sink_storage(self, connection: str) -> tuple[str | None, ...]:
        """The storage connections a connection's table files are read with: the ``USING AWS |
        GCS | AZURE CONNECTION`` of a sink writing through it (a catalog that vends no storage
        credentials needs it, as the sink did), else none (the catalog's own)."""
        for obj in self.store.list_objects("sink"):
            sink = P.plan_from_dict(obj.definition)
            if isinstance(sink, P.SinkPlan) and sink.catalog_connection == connection:
                if sink.aws_connection or sink.storage_connection:
                    return (sink.aws_connection, sink.storage_connection)
        return ()

    def _apply_show_tables(self, plan: P.ShowTablesPlan, stmt: A.Statement, checked: bool) -> Result:
        where = ".".join((plan.connection, *plan.namespace))
        return R.show_tables(where, self.tables(plan.connection, plan.namespace))

    def tables(self, connection: str, namespace: Sequence[str] = ()) -> list[tuple[str, ...]]:
        """The tables (namespace parts + name) of an ICEBERG CATALOG connection, in
        ``namespace`` or in every top-level namespace."""
        from icesql.engine.table_reader import in_catalog

        catalog, conn, aws = self.engine.connection_catalog(connection, self._sink_storage(connection))

        def listing() -> list[tuple[str, ...]]:
            namespaces = [tuple(namespace)] if namespace else catalog.list_namespaces()
            return [tuple(t) for ns in namespaces for t in catalog.list_tables(tuple(ns))]

        where = ".".join((connection, *namespace))
        found: list[tuple[str, ...]] = in_catalog(conn, aws, self._secret_value, f"list tables in {where}", listing)
        return found

    def _apply_describe_table(self, plan: P.DescribeTablePlan, stmt: A.Statement, checked: bool) -> Result:
        from icesql.engine.table_reader import MissingTableError

        storage = self._sink_storage(plan.connection)
        try:
            table = self.engine.load_table(plan.connection, plan.namespace, plan.table, storage)
        except MissingTableError as err:
            err.span = err.span or stmt.span
            if isinstance(stmt, A.DescribeTable) and stmt.name.span is not None:
                err.span = stmt.name.span
            raise missing_table(err, self._open_catalog, self._secret_value) from None
        return R.describe_table(".".join((plan.connection, *plan.namespace, plan.table)), table)

    def _apply_show_snapshots(self, plan: P.ShowSnapshotsPlan, stmt: A.Statement, checked: bool) -> Result:
        obj = self.store.get_object("sink", plan.sink)
        if obj is None:
            raise CatalogError(f"sink {plan.sink!r} does not exist", stmt.span)
        sink = P.plan_from_dict(obj.definition)
        assert isinstance(sink, P.SinkPlan)
        table = self.engine.load_table(
            sink.catalog_connection, sink.namespace, sink.table, (sink.aws_connection, sink.storage_connection)
        )
        return R.show_snapshots(plan.sink, table.snapshots(), obj.object_id)

    def _needs_validation(self, d: P.ObjectPlan, view: Any = None) -> bool:
        """A connection is checked unless the session or its WITH (VALIDATE = false) says not
        to; a Kafka source, whether its topic exists, unless its connection is not checked."""
        if not self.validate:
            return False
        if isinstance(d, _CONNECTIONS):
            return d.validate
        if isinstance(d, P.SourcePlan) and d.kafka is not None:
            conn = (view or self._view).get("connection", d.kafka.connection)
            return isinstance(conn, P.KafkaConnectionPlan) and conn.validate
        return False

    def _precheck(self, plan: P.StatementPlan, view: OverlayCatalog, pending: _PendingSecrets) -> None:
        """The network part of a statement (connection checks), done before anything is
        applied; objects and secrets created earlier in the script are looked up in ``view``
        and ``pending``."""
        if isinstance(plan, P.CreateObjectPlan) and self._needs_validation(plan.definition, view):
            d = plan.definition
            if plan.if_not_exists and self.store.get_object(object_kind(d), d.name) is not None:
                return  # kept as it is: the definition given here is not applied, so not checked
            assert isinstance(d, _Validated)
            inline = {n: v.reveal() for n, v in plan.inline_secrets}
            self._validate_definition(d, lambda n: inline[n] if n in inline else pending.value(n), view)
        elif isinstance(plan, P.ValidateConnectionPlan):
            d2 = view.get("connection", plan.name)
            if not isinstance(d2, _CONNECTIONS):
                raise CatalogError(f"connection {plan.name!r} does not exist")
            self._validate_definition(d2, pending.value, view)

    # ----------------------------------------------------------------- connections

    def _validate_definition(
        self,
        d: _Validated,
        secrets: P.SecretResolver | None = None,
        view: Any = None,
    ) -> None:
        resolver = secrets or self._secret_value
        if isinstance(d, P.KafkaConnectionPlan | P.SourcePlan):
            from icesql.engine.kafka.connection import validate_kafka_connection

            if isinstance(d, P.KafkaConnectionPlan):
                validate_kafka_connection(d, secrets=resolver)
                return
            assert d.kafka is not None
            conn = (view or self._view).get("connection", d.kafka.connection)
            assert isinstance(conn, P.KafkaConnectionPlan), "the analyzer checked the connection"
            validate_kafka_connection(conn, secrets=resolver, topic=d.kafka.topic)
            return
        from icesql.engine import catalogs

        if isinstance(d, P.CatalogConnectionPlan):
            aws = self._aws(d.aws_connection, view or self._view)
            storage: Any = (view or self._view).get("connection", d.storage_connection) if d.storage_connection else None
            catalogs.validate_connection(d, aws=aws, storage=(storage,), secrets=resolver, home=self.home)
        else:  # a storage connection: AWS, GCS, AZURE
            catalogs.validate_connection(d, secrets=resolver, home=self.home)

    def _aws(self, name: str | None, view: Any) -> P.AwsConnectionPlan | None:
        if name is None:
            return None
        plan = view.get("connection", name)
        if not isinstance(plan, P.AwsConnectionPlan):
            raise ExecutionError(f"connection {name!r} is not an AWS connection")
        return plan

    def _validate_connection(self, name: str, *, force: bool = False) -> None:
        plan = self._view.get("connection", name)
        if not isinstance(plan, _CONNECTIONS):
            raise CatalogError(f"connection {name!r} does not exist")
        self._validate_definition(plan)

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
        ``icesql.engine.compact.CompactResult`` per sink (``icesql.repl.format.format_compaction``
        gives a line)."""
        return [self.engine.compact(plan) for plan in self.sink_plans(sinks)]

    def maintain(self, sinks: Sequence[str] | None = None, *, dry_run: bool = False) -> list[Any]:
        """Maintain the tables of the named sinks (all when None) under their options: compact,
        rewrite manifests, expire snapshots and delete orphan files, each when due. For tables
        whose sinks are not running (a running sink's commit in between makes a step retry).
        ``dry_run`` changes nothing and says what would be done. Returns one
        ``icesql.engine.maintenance.MaintenanceRun`` per sink
        (``icesql.repl.format.format_maintenance`` gives its lines)."""
        return [self.engine.maintain(plan, dry_run=dry_run) for plan in self.sink_plans(sinks)]

    def flush(self, name: str | None = None) -> None:
        if self._engine is not None:
            self._engine.flush(name)

    def status(self) -> list[SinkStatus]:
        """Each sink's state from the store, with live figures when it runs here."""
        return self._statuses(self._live())

    def _live(self) -> dict[str, dict[str, Any]]:
        """The engine's status rows of the sinks running (or retrying) here, by name."""
        return {row["name"]: row for row in self._engine.status()} if self._engine is not None else {}

    def _statuses(self, live: dict[str, dict[str, Any]]) -> list[SinkStatus]:
        out = []
        for obj in self.store.list_objects("sink"):
            st = self.store.get_sink_state(obj.name)
            lv = live.get(obj.name, {})
            out.append(
                SinkStatus(
                    name=obj.name,
                    state=lv.get("state") or (st.status if st else "created"),
                    rows_committed=st.rows_committed if st else 0,
                    bytes_committed=st.bytes_committed if st else 0,
                    files_committed=st.files_committed if st else 0,
                    commits=st.commits if st else 0,
                    last_commit_at=st.last_commit_at if st else None,
                    last_snapshot_id=st.last_snapshot_id if st else None,
                    last_error=st.last_error if st else None,
                    lag=lv.get("lag"),
                    skipped_records=st.skipped_records if st else 0,
                    dead_letters=st.dead_letters if st else 0,
                    retry_attempt=lv.get("retry_attempt", st.retry_attempt if st else 0),
                    next_attempt_at=lv.get("next_attempt_at", st.next_attempt_at if st else None),
                    maintenance_runs=int(lv.get("maintenance_runs") or 0),
                    last_maintenance=lv.get("last_maintenance"),
                    source_lag=lv.get("source_lag"),
                    file_format=(fmt := lv.get("file_format") or getattr(P.plan_from_dict(obj.definition), "format", None)),
                    readers=P.FORMAT_READERS.get(fmt) if fmt else None,
                )
            )
        return out

    # ----------------------------------------------------------------- observing

    def serve_metrics(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve Prometheus metrics (``/metrics``), health (``/healthz``, ``/readyz``) and a
        status page (``/``) for the sinks this session runs, on a background thread; returns
        the base URL (``port=0`` picks a free port). Stopped by ``close()``. Needs
        ``pip install 'icesql[metrics]'``."""
        if self._observer is not None:
            return self._observer.url
        try:
            from icesql.observe.metrics import SinkMetrics
            from icesql.observe.server import ObserveServer
        except ImportError as exc:
            raise ExecutionError(
                f"metrics need prometheus_client ({exc})", hint="pip install 'icesql[metrics]'"
            ) from None
        from icesql import settings

        grace = settings.READY_GRACE.get_float() or 0.0
        metrics = SinkMetrics(self._sink_reports, grace=grace)
        try:
            server = ObserveServer(metrics, self._sink_reports, host=host, port=port, grace=grace)
        except OSError as exc:
            raise ExecutionError(
                f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}",
                hint="choose another --metrics-port (0 picks a free one)",
            ) from None
        self.engine.add_listener(metrics)
        self._observer = server.start()
        return server.url

    def _observe(self, names: Iterable[str]) -> None:
        for name in names:
            if name not in self._running:
                self._running.append(name)

    def _sink_reports(self) -> list[SinkReport]:
        """The sinks run here as the observer sees them: live figures, else the store's."""
        from icesql.observe.health import SinkReport

        live = self._live()
        statuses = {s.name: s for s in self._statuses(live)}
        reports = []
        for name in list(self._running):
            obj = self.store.get_object("sink", name)
            st = statuses.get(name)
            if obj is None or st is None:  # dropped meanwhile
                continue
            plan = P.plan_from_dict(obj.definition)
            assert isinstance(plan, P.SinkPlan)
            lv = live.get(name, {})
            reports.append(
                SinkReport(
                    name=name,
                    table=plan.table_identifier,
                    state=st.state,
                    rows_committed=st.rows_committed,
                    bytes_committed=st.bytes_committed,
                    commits=st.commits,
                    last_commit_at=st.last_commit_at,
                    last_snapshot_id=st.last_snapshot_id,
                    last_error=lv.get("last_error") or st.last_error,
                    retry_attempt=st.retry_attempt,
                    next_attempt_at=st.next_attempt_at,
                    retrying_since=lv.get("retrying_since"),
                    staged_rows=int(lv.get("staged_rows") or 0),
                    staged_bytes=int(lv.get("staged_bytes") or 0),
                    staged_files=int(lv.get("staged_files") or 0),
                    staged_since=lv.get("staged_since"),
                    skipped_records=st.skipped_records,
                    maximum_period=plan.commit.maximum_period,
                    minimum_size=plan.commit.minimum_size,
                    backlog_files=lv.get("backlog_files"),
                    backlog_bytes=lv.get("backlog_bytes"),
                    source_lag=lv.get("source_lag_partitions"),
                )
            )
        return reports

    def object_names(self, kind: str) -> list[str]:
        return [o.name for o in self.store.list_objects(kind)]

    def relation_columns(self, name: str) -> tuple[P.Column, ...]:
        return tuple(self.engine.relation_columns(name))


# --------------------------------------------------------------------------- executor glue


class _ObjectResolver:
    def __init__(self, session: Session) -> None:
        self._s = session

    def connection(
        self, name: str
    ) -> P.StorageConnectionPlan | P.CatalogConnectionPlan | P.KafkaConnectionPlan:
        plan = self._s._view.get("connection", name)
        if not isinstance(plan, _CONNECTIONS):
            raise ExecutionError(f"connection {name!r} does not exist")
        return plan

    def relation(self, name: str) -> P.SourcePlan | P.ViewPlan | None:
        plan = self._s._view.get("source", name) or self._s._view.get("view", name)
        return plan if isinstance(plan, (P.SourcePlan, P.ViewPlan)) else None


class _StateCallback:
    def __init__(self, session: Session) -> None:
        self._s = session

    def sink_id(self, name: str) -> str:
        obj = self._s.store.get_object("sink", name)
        if obj is None:
            raise ExecutionError(f"sink {name!r} does not exist")
        return obj.object_id

    def bump_version(self, name: str) -> int:
        return self._s.store.bump_sink_version(name)

    def get(self, name: str) -> dict[str, Any] | None:
        """The stored runtime state, so a restarted runner carries its counters on."""
        st = self._s.store.get_sink_state(name)
        return dataclasses.asdict(st) if st is not None else None

    def update(self, name: str, **fields: Any) -> None:
        if self._s.store.get_object("sink", name) is not None:
            self._s.store.update_sink_state(name, **fields)


# --------------------------------------------------------------------------- dispatch

# Every statement plan and the method that applies it (a test checks that each plan type has
# one, and that it is the same set the analyzer's catalog views record effects for).
APPLY: dict[type[Any], Callable[[Session, Any, A.Statement, bool], Result]] = {
    P.CreateSecretPlan: Session._apply_secret,
    P.CreateObjectPlan: Session._apply_create,
    P.AlterSinkPlan: Session._apply_alter_sink,
    P.AlterSourcePlan: Session._apply_alter_source,
    P.DropPlan: Session._apply_drop,
    P.ShowPlan: Session._apply_show,
    P.ShowCreatePlan: Session._apply_show_create,
    P.ShowSinkStatusPlan: Session._apply_sink_status,
    P.DescribePlan: Session._apply_describe,
    P.ExplainPlan: Session._apply_explain,
    P.ExplainSelectPlan: Session._apply_explain_select,
    P.ValidateConnectionPlan: Session._apply_validate,
    P.FlushSinkPlan: Session._apply_flush,
    P.SelectPlan: Session._apply_select,
    P.ShowTablesPlan: Session._apply_show_tables,
    P.DescribeTablePlan: Session._apply_describe_table,
    P.ShowSnapshotsPlan: Session._apply_show_snapshots,
}
assert APPLY.keys() == EFFECTS.keys()


class _PendingSecrets:
    """Secret values a script creates before they are stored (for its connection checks)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._values: dict[str, str] = {}
        self._dropped: set[str] = set()

    def record(self, plan: P.StatementPlan) -> None:
        if isinstance(plan, P.CreateSecretPlan):
            if plan.replace or not (plan.if_not_exists and self._exists(plan.name)):
                self._values[plan.name] = plan.value.reveal()
                self._dropped.discard(plan.name)
        elif isinstance(plan, P.CreateObjectPlan):
            for name, value in plan.inline_secrets:
                self._values[name] = value.reveal()
        elif isinstance(plan, P.DropPlan) and plan.kind == "secret":
            self._values.pop(plan.name, None)
            self._dropped.add(plan.name)

    def _exists(self, name: str) -> bool:
        return name in self._values or self._session.store.get_object("secret", name) is not None

    def value(self, name: str) -> str:
        if name in self._values:
            return self._values[name]
        if name in self._dropped:
            raise ExecutionError(f"secret {name!r} does not exist")
        return self._session._secret_value(name)


# --------------------------------------------------------------------------- helpers


def _base(base_dir: str | os.PathLike[str] | None) -> Path:
    return Path(base_dir) if base_dir is not None else Path.cwd()


def _located(err: IcesqlError, stmt: A.Statement | None, source: str | None, filename: str | None) -> IcesqlError:
    """The error pointing at its statement when it has no span of its own, quoting the source
    with every secret value masked, named after the file."""
    if err.span is None and stmt is not None and stmt.span is not None:
        err.span = stmt.span
    err.source = _masked(source)  # the quoted line must never show a secret's value
    return err.with_source(None, filename)


def _masked(source: str | None) -> str | None:
    from icesql.syntax.redaction import masked_text

    return masked_text(source) if source is not None else None


def _with_schema(create_sql: str, schema: str | None) -> str:
    """A stored CREATE SOURCE statement with its SCHEMA option replaced by ``schema``."""
    from icesql.syntax.parser import parse_one

    stmt = parse_one(create_sql)
    assert isinstance(stmt, A.CreateSource)
    options = [o for o in stmt.options if o.key_is_string or o.name != "SCHEMA"]
    if schema is not None:
        options.insert(0, A.Option("SCHEMA", A.StringLit(schema)))
    return dataclasses.replace(stmt, options=tuple(options)).to_sql()


def _all_dependents(store: CatalogStore, kind: str, name: str) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    stack = [(kind, name)]
    while stack:
        for dep in store.dependents(*stack.pop()):
            if dep not in seen:
                seen.append(dep)
                stack.append(dep)
    return seen


__all__ = ["INLINE_SECRET_PREFIX", "Result", "Session", "SinkStatus", "default_home"]
