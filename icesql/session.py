"""``icesql.Session``: the library entry point that composes store, analyzer and executor.

    with icesql.Session(home="~/.icesql") as s:
        s.execute("CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local')")
        s.execute("CREATE SINK ...")
        s.run(once=True)

Parsing and analysis never start Spark; the engine (``icesql.engine``) is imported the first
time something needs it: a connection check, a sink run, a flush.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from catalog_store import StoreError
from icesql import plan as P
from icesql.errors import CatalogError, ExecutionError, IcesqlError, Span
from icesql.syntax import ast as A

if TYPE_CHECKING:
    from catalog_store import CatalogStore
    from icesql.engine.engine import Engine
    from icesql.observe.health import SinkReport
    from icesql.observe.server import ObserveServer

INLINE_SECRET_PREFIX = "__inline__."

_KIND_OF_DEFINITION: dict[type[Any], str] = {
    P.AwsConnectionPlan: "connection",
    P.CatalogConnectionPlan: "connection",
    P.SourcePlan: "source",
    P.ViewPlan: "view",
    P.SinkPlan: "sink",
}


@dataclass(frozen=True)
class Result:
    """What one statement produced: a status message, and rows for SHOW/DESCRIBE/EXPLAIN."""

    statement: str
    message: str
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[object, ...], ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class SinkStatus:
    name: str
    state: str
    rows_committed: int = 0
    bytes_committed: int = 0
    files_committed: int = 0
    commits: int = 0
    last_commit_at: float | None = None
    last_snapshot_id: int | None = None
    last_error: str | None = None
    lag: float | None = None
    skipped_records: int = 0  # bad records (ON ERROR = 'skip') and null-key changes (KEY NOT ENFORCED)
    retry_attempt: int = 0  # restarts after transient failures in the current streak
    next_attempt_at: float | None = None  # when a 'retrying' sink is restarted next


def default_home() -> Path:
    from icesql import settings

    return Path(settings.HOME.get() or "~/.icesql").expanduser()


def blank_prefix(text: str, start: int) -> str:
    """``text`` with everything before ``start`` blanked out except newlines, so that a
    statement parsed on its own keeps the line and column it has in the whole script."""
    return re.sub(r"[^\n]", " ", text[:start]) + text[start:]


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


class OverlayCatalogView:
    """A catalog view that records a script's CREATEs and DROPs in memory on top of another
    view, so ``check`` validates later statements against earlier ones without storing."""

    _DROPPED = object()

    def __init__(self, base: Any) -> None:
        self._base = base
        self._objects: dict[tuple[str, str], Any] = {}

    def get(self, kind: str, name: str) -> P.ObjectPlan | None:
        found = self._objects.get((kind, name))
        if found is self._DROPPED:
            return None
        if found is not None:
            return found  # type: ignore[no-any-return]
        return self._base.get(kind, name)  # type: ignore[no-any-return]

    def secret_exists(self, name: str) -> bool:
        found = self._objects.get(("secret", name))
        if found is not None:
            return found is not self._DROPPED
        return bool(self._base.secret_exists(name))

    def relation_columns(self, name: str) -> tuple[P.Column, ...] | None:
        rel = self.get("source", name) or self.get("view", name)
        if isinstance(rel, P.SourcePlan) and rel.columns:
            return rel.columns
        if (("source", name) in self._objects) or (("view", name) in self._objects):
            return None
        return self._base.relation_columns(name)  # type: ignore[no-any-return]

    def apply(self, plan: P.StatementPlan) -> None:
        if isinstance(plan, P.CreateSecretPlan):
            self._objects[("secret", plan.name)] = True
        elif isinstance(plan, P.CreateObjectPlan):
            d = plan.definition
            self._objects[(_KIND_OF_DEFINITION[type(d)], d.name)] = d
            for name, _ in plan.inline_secrets:
                self._objects[("secret", name)] = True
        elif isinstance(plan, P.AlterSinkPlan):
            self._objects[("sink", plan.name)] = plan.definition
        elif isinstance(plan, P.DropPlan):
            self._objects[(plan.kind, plan.name)] = self._DROPPED


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
        from catalog_store import CatalogStore

        self.home = Path(home).expanduser() if home is not None else default_home()
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        from icesql import settings

        self.store: CatalogStore = CatalogStore(
            self.home / "catalog.db", secret_key=settings.SECRET_KEY.get()
        )
        self.validate = validate
        self.verbose = verbose
        self.created_sinks: list[str] = []
        self._spark = spark
        self._spark_master = spark_master
        self._spark_conf = dict(spark_conf or {})
        self._engine: Engine | None = None
        self._view = StoreCatalogView(self)
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

    # ----------------------------------------------------------------- statements

    def parse(self, sql: str, *, filename: str | None = None) -> list[A.Statement]:
        from icesql.syntax.parser import parse

        return parse(sql, filename=filename)

    def execute(
        self, sql: str, *, filename: str | None = None, base_dir: str | os.PathLike[str] | None = None
    ) -> list[Result]:
        """Parse, validate and apply every statement of ``sql`` in order.

        Statements before a failing one stay applied (as in psql). Errors are
        ``IcesqlError`` subclasses carrying the source text, so ``err.render()`` shows the
        line and a caret.
        """
        stmts = self.parse(sql, filename=filename)
        results: list[Result] = []
        for stmt in stmts:
            results.append(self.execute_statement(stmt, source=sql, filename=filename, base_dir=base_dir))
        return results

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
            analyzed = analyze(
                stmt,
                self._view,
                source=source,
                filename=filename,
                base_dir=Path(base_dir) if base_dir is not None else Path.cwd(),
            )
            # A warning renders against the analyzer's masked copy of the source: the inline
            # secret it warns about sits right under its caret.
            warnings = tuple(w.render() for w in analyzed.warnings)
            result = self._apply(analyzed.plan, stmt)
        except IcesqlError as err:
            if err.span is None and stmt.span is not None:
                err.span = stmt.span
            err.source = _masked(source)  # the quoted line must never show a secret's value
            raise err.with_source(None, filename) from None
        except StoreError as err:
            # A clash with another process, a missing ICESQL_SECRET_KEY, ...: same error tree.
            raise CatalogError(err.message, stmt.span, err.hint, _masked(source), filename) from None
        return dataclasses.replace(result, warnings=warnings + result.warnings)

    def check(
        self, sql: str, *, filename: str | None = None, base_dir: str | os.PathLike[str] | None = None
    ) -> list[IcesqlError]:
        """Parse and validate every statement without side effects; return every error.

        Each statement is parsed on its own (keeping its position in the file), so one syntax
        error does not hide the errors after it. Later statements are validated against the
        objects the earlier ones would create.
        """
        from icesql.analyzer import analyze
        from icesql.syntax.parser import parse, split_statements

        errors: list[IcesqlError] = []
        masked = _masked(sql)
        overlay = OverlayCatalogView(self._view)
        bdir = Path(base_dir) if base_dir is not None else Path.cwd()
        for start, end in split_statements(sql):
            if not sql[start:end].strip(" \t\r\n;"):
                continue
            try:
                stmts = parse(blank_prefix(sql[:end], start), filename=filename)
            except IcesqlError as err:
                err.source = masked
                errors.append(err.with_source(None, filename))
                continue
            for stmt in stmts:
                try:
                    analyzed = analyze(stmt, overlay, source=sql, filename=filename, base_dir=bdir)
                    overlay.apply(analyzed.plan)
                except IcesqlError as err:
                    err.source = masked
                    errors.append(err.with_source(None, filename))
        return errors

    # ----------------------------------------------------------------- applying plans

    def _apply(self, plan: P.StatementPlan, stmt: A.Statement) -> Result:
        if isinstance(plan, P.CreateSecretPlan):
            return self._apply_secret(plan)
        if isinstance(plan, P.CreateObjectPlan):
            return self._apply_create(plan)
        if isinstance(plan, P.AlterSinkPlan):
            self.store.replace_object(
                "sink", plan.name, plan.sql, P.to_dict(plan.definition), self._deps_of(plan.definition)
            )
            if self._engine is not None:
                # A running sink picks the new commit policy up at once.
                self._engine.update_sink(plan.definition)
            return Result("ALTER SINK", "ALTER SINK")
        if isinstance(plan, P.DropPlan):
            return self._apply_drop(plan)
        if isinstance(plan, P.ShowPlan):
            return self._show(plan.kind)
        if isinstance(plan, P.ShowCreatePlan):
            obj = self.store.get_object(plan.kind, plan.name)
            if obj is None:
                raise CatalogError(f"{plan.kind} {plan.name!r} does not exist", stmt.span)
            return Result(
                f"SHOW CREATE {plan.kind.upper()}",
                f"SHOW CREATE {plan.kind.upper()}",
                ("name", "create_sql"),
                ((plan.name, obj.sql),),
            )
        if isinstance(plan, P.ShowSinkStatusPlan):
            statuses = self.status()
            if plan.name is not None:
                if self.store.get_object("sink", plan.name) is None:
                    raise CatalogError(f"sink {plan.name!r} does not exist", stmt.span)
                statuses = [s for s in statuses if s.name == plan.name]
            cols = tuple(f.name for f in dataclasses.fields(SinkStatus))
            rows = tuple(
                tuple(_fmt_status_value(f, getattr(s, f)) for f in cols) for s in statuses
            )
            return Result("SHOW SINK STATUS", "SHOW SINK STATUS", cols, rows)
        if isinstance(plan, P.DescribePlan):
            return self._describe(plan.name, stmt)
        if isinstance(plan, P.ExplainPlan):
            return self._explain(plan.sink)
        if isinstance(plan, P.ValidateConnectionPlan):
            self._validate_connection(plan.name, force=True)
            return Result("VALIDATE CONNECTION", f"connection {plan.name!r} is valid")
        if isinstance(plan, P.FlushSinkPlan):
            if self._engine is None:
                return Result("FLUSH SINK", "no sink is running")
            self._engine.flush(plan.name)
            return Result("FLUSH SINK", "FLUSH SINK")
        raise ExecutionError(f"unsupported statement {type(plan).__name__}")  # pragma: no cover

    def _apply_secret(self, plan: P.CreateSecretPlan) -> Result:
        if plan.replace:
            self.store.alter_secret(plan.name, plan.value.reveal())
            return Result("ALTER SECRET", "ALTER SECRET")
        created = self.store.create_secret(
            plan.name, plan.value.reveal(), if_not_exists=plan.if_not_exists
        )
        msg = "CREATE SECRET" if created else f"secret {plan.name!r} already exists, skipping"
        return Result("CREATE SECRET", msg)

    def _deps_of(self, definition: P.ObjectPlan) -> tuple[tuple[str, str], ...]:
        obj = self.store.get_object(_KIND_OF_DEFINITION[type(definition)], definition.name)
        return tuple(obj.dependencies) if obj is not None else ()

    def _apply_create(self, plan: P.CreateObjectPlan) -> Result:
        d = plan.definition
        kind = _KIND_OF_DEFINITION[type(d)]
        label = f"CREATE {kind.upper()}"
        if plan.if_not_exists and self.store.get_object(kind, d.name) is not None:
            if kind == "sink" and d.name not in self.created_sinks:
                self.created_sinks.append(d.name)
            return Result(label, f"{kind} {d.name!r} already exists, skipping")
        if self.store.get_object(kind, d.name) is not None:
            raise CatalogError(
                f"{kind} {d.name!r} already exists",
                hint=f"use CREATE {kind.upper()} IF NOT EXISTS, or DROP {kind.upper()} {d.name} first",
            )
        if isinstance(d, (P.AwsConnectionPlan, P.CatalogConnectionPlan)) and self.validate and d.validate:
            # Validate before storing (a connection that cannot connect is not kept), outside
            # the store's write lock, with inline secrets that are not stored yet.
            inline = {n: v.reveal() for n, v in plan.inline_secrets}
            self._validate_definition(d, lambda n: inline[n] if n in inline else self._secret_value(n))
        with self.store.transaction():
            for name, value in plan.inline_secrets:
                if self.store.get_object("secret", name) is not None:
                    self.store.alter_secret(name, value.reveal())
                else:
                    self.store.create_secret(name, value.reveal(), hidden=True)
            self.store.create_object(kind, d.name, plan.sql, P.to_dict(d), plan.dependencies)
        if kind == "sink" and d.name not in self.created_sinks:
            self.created_sinks.append(d.name)
        return Result(label, label)

    def _apply_drop(self, plan: P.DropPlan) -> Result:
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
            if kind == "sink" and name in self.created_sinks:
                self.created_sinks.remove(name)
        extra = [f"{k} {n}" for k, n in dropped if (k, n) != (plan.kind, plan.name)]
        msg = label + (f" (also dropped {', '.join(extra)})" if extra else "")
        return Result(label, msg)

    def _show(self, plural: str) -> Result:
        kind = plural.rstrip("s").lower()
        objects = self.store.list_objects(kind)
        if kind == "secret":
            rows = tuple((o.name, _fmt_time(o.created_at)) for o in objects)
            return Result("SHOW SECRETS", "SHOW SECRETS", ("name", "created_at"), rows)
        out = []
        for o in objects:
            definition = P.plan_from_dict(o.definition)
            out.append((o.name, _object_type(definition), _object_summary(definition)))
        return Result(
            f"SHOW {plural.upper()}", f"SHOW {plural.upper()}", ("name", "type", "details"), tuple(out)
        )

    def _describe(self, name: str, stmt: A.Statement) -> Result:
        obj = self.store.find_object(name)
        if obj is None:
            raise CatalogError(
                f"no object named {name!r}", stmt.span, hint="SHOW SINKS, SHOW SOURCES, ... list what exists"
            )
        if obj.kind == "secret":
            rows: list[tuple[object, ...]] = [("kind", "secret"), ("name", obj.name), ("value", "********")]
        else:
            definition = P.plan_from_dict(obj.definition)
            rows = [("kind", obj.kind), *_flatten(definition)]
            if isinstance(definition, P.SinkPlan):
                state = self.store.get_sink_state(obj.name)
                if state is not None:
                    rows.append(("status", state.status))
        rows.append(("depends_on", ", ".join(f"{k} {n}" for k, n in obj.dependencies) or "-"))
        return Result("DESCRIBE", "DESCRIBE", ("property", "value"), tuple(rows))

    def _explain(self, sink: P.SinkPlan) -> Result:
        rows: list[tuple[object, ...]] = [
            ("sink", sink.name),
            ("reads", sink.relation),
            ("catalog", sink.catalog_connection),
            ("table", sink.table_identifier),
            ("mode", sink.mode.value + (f" KEY ({', '.join(sink.key)})" if sink.key else "")),
        ]
        if sink.columns:
            for c in sink.columns:
                key = " (identifier field, required)" if c.name in sink.key else ""
                rows.append(("column", f"{c.name} {c.type}{key}"))
        else:
            rows.append(("schema", "derived from the relation when the sink starts"))
        rows.append(
            ("partition spec", ", ".join(p.describe() for p in sink.partition_by) or "unpartitioned")
        )
        rows.append(("format", f"{sink.format}, format version {sink.format_version}"))
        rows.append(("maximum file size", f"{sink.maximum_file_size} bytes"))
        rows.append(("commit", sink.commit.describe()))
        rows.append(("maintenance", sink.maintenance.describe()))
        for k, v in sink.properties:
            rows.append(("property", f"{k} = {v}"))
        return Result("EXPLAIN", "EXPLAIN", ("item", "value"), tuple(rows))

    # ----------------------------------------------------------------- connections

    def _validate_definition(
        self, d: P.AwsConnectionPlan | P.CatalogConnectionPlan, secrets: P.SecretResolver | None = None
    ) -> None:
        from icesql.engine import catalogs

        resolver = secrets or self._secret_value
        if isinstance(d, P.CatalogConnectionPlan):
            aws = self._aws(d.aws_connection)
            catalogs.validate_connection(d, aws=aws, secrets=resolver, home=self.home)
        else:
            catalogs.validate_aws_connection(d, secrets=resolver)

    def _aws(self, name: str | None) -> P.AwsConnectionPlan | None:
        if name is None:
            return None
        plan = self._view.get("connection", name)
        if not isinstance(plan, P.AwsConnectionPlan):
            raise ExecutionError(f"connection {name!r} is not an AWS connection")
        return plan

    def _validate_connection(self, name: str, *, force: bool = False) -> None:
        plan = self._view.get("connection", name)
        if not isinstance(plan, (P.AwsConnectionPlan, P.CatalogConnectionPlan)):
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
        until the sinks stop or ``stop()`` is called (Ctrl-C in the CLI).
        """
        names = list(sinks) if sinks is not None else (self.created_sinks or None)
        plans = self.sink_plans(names)
        if not plans:
            return
        self._observe(p.name for p in plans)
        self.engine.run(plans, once=once)

    def serve(self, *, once: bool = False) -> None:
        """Run every sink of the catalog store."""
        self.run(once=once, sinks=[o.name for o in self.store.list_objects("sink")])

    def start(self, sinks: Sequence[str] | None = None) -> None:
        """Start sinks in the background (the shell uses this) and return at once."""
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
                    retry_attempt=lv.get("retry_attempt", st.retry_attempt if st else 0),
                    next_attempt_at=lv.get("next_attempt_at", st.next_attempt_at if st else None),
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

    def connection(self, name: str) -> P.AwsConnectionPlan | P.CatalogConnectionPlan:
        plan = self._s._view.get("connection", name)
        if not isinstance(plan, (P.AwsConnectionPlan, P.CatalogConnectionPlan)):
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


# --------------------------------------------------------------------------- formatting


def _masked(source: str | None) -> str | None:
    from icesql.syntax.redaction import mask_secret_literals

    return mask_secret_literals(source) if source is not None else None


def _all_dependents(store: CatalogStore, kind: str, name: str) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    stack = [(kind, name)]
    while stack:
        for dep in store.dependents(*stack.pop()):
            if dep not in seen:
                seen.append(dep)
                stack.append(dep)
    return seen


def _fmt_time(ts: float | None) -> str:
    if ts is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _fmt_status_value(field: str, value: Any) -> Any:
    if field in ("last_commit_at", "next_attempt_at"):
        return _fmt_time(value)
    if value is None:
        return "-"
    return value


def _object_type(d: P.ObjectPlan) -> str:
    if isinstance(d, P.AwsConnectionPlan):
        return "aws"
    if isinstance(d, P.CatalogConnectionPlan):
        return f"iceberg catalog ({d.catalog_type.value})"
    if isinstance(d, P.SourcePlan):
        return d.source_kind.value + (f" ({d.format.value})" if d.format else "")
    if isinstance(d, P.ViewPlan):
        return "view"
    return f"iceberg sink ({d.mode.value})"


def _object_summary(d: P.ObjectPlan) -> str:
    if isinstance(d, P.AwsConnectionPlan):
        return ", ".join(x for x in (d.region and f"region {d.region}", d.endpoint) if x) or "-"
    if isinstance(d, P.CatalogConnectionPlan):
        return d.uri or d.warehouse or "-"
    if isinstance(d, P.SourcePlan):
        return d.path or (f"{d.rows_per_second} rows/s" if d.rows_per_second else "-")
    if isinstance(d, P.ViewPlan):
        return ", ".join(d.depends_on) or "-"
    return f"{d.relation} -> {d.catalog_connection}.{d.table_identifier}"


def _flatten(d: Any, prefix: str = "") -> Iterator[tuple[str, object]]:
    """(property, value) rows of a plan for DESCRIBE; secret references shown by name only."""
    for f in dataclasses.fields(d):
        value = getattr(d, f.name)
        key = prefix + f.name
        if value is None or value == () or value == "":
            continue
        if isinstance(value, P.SecretName):
            yield key, f"SECRET {value.name}" if not value.name.startswith(INLINE_SECRET_PREFIX) else "********"
        elif isinstance(value, P.CommitPolicy):
            yield key, value.describe()
        elif isinstance(value, tuple) and value and isinstance(value[0], P.PartitionFieldPlan):
            yield key, ", ".join(p.describe() for p in value)
        elif isinstance(value, tuple) and value and isinstance(value[0], P.Column):
            yield key, ", ".join(f"{c.name} {c.type}" for c in value)
        elif isinstance(value, tuple) and value and isinstance(value[0], tuple):
            yield key, ", ".join(f"{k}={v}" for k, v in value)
        elif isinstance(value, tuple):
            yield key, ", ".join(str(v) for v in value)
        elif isinstance(value, enum.Enum):
            yield key, value.value
        else:
            yield key, value


__all__ = ["Result", "Session", "SinkStatus", "default_home", "Span"]
