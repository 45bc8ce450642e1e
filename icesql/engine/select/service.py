"""SELECT: a query over connection tables, sources and views, run on DuckDB over the tables'
Arrow rows when the fast path translates it (``route``, ``duck``), else on Spark (``spark``); the
tables' catalogs and rows cached between queries (``tables.TableCache``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from icesql.errors import IcesqlError

log = logging.getLogger("icesql.engine")


class SelectService:
    """The engine's SELECTs (``Engine.select``): one per engine, holding the table cache and the
    DuckDB session. ``engine`` gives the catalog store's objects, the secrets, the home and Spark."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._cache: Any = None  # tables.TableCache of SELECTs (created on the first)
        self._duck: Any = None  # duck.DuckSession (created on the first fast-path SELECT)

    def connection_catalog(self, connection: str, sink_storage: str | Sequence[str | None] = ()) -> Any:
        """(live catalog, connection plan, its AWS connection) of an ICEBERG CATALOG connection;
        its tables read files with the storage connections named in ``sink_storage`` (one name,
        or several) layered on top, when given (those of a sink writing there)."""
        if isinstance(sink_storage, str):
            sink_storage = (sink_storage,)
        from icesql.engine.connections.target import (
            aws_connection,
            catalog_connection,
            load_connection_catalog,
            storage_connection,
        )

        conn = catalog_connection(self.engine.objects, connection)
        aws = aws_connection(self.engine.objects, conn.aws_connection)
        catalog = load_connection_catalog(
            conn,
            aws=aws,
            storage=(storage_connection(self.engine.objects, conn.storage_connection),),
            sink_storage=tuple(storage_connection(self.engine.objects, n) for n in sink_storage),
            secrets=self.engine.secrets,
            home=self.engine.home,
        )
        return catalog, conn, aws

    def load_table(
        self,
        connection: str,
        namespace: tuple[str, ...],
        table: str,
        sink_storage: str | Sequence[str | None] = (),
    ) -> Any:
        from icesql.engine.select.tables import open_table

        catalog, conn, aws = self.connection_catalog(connection, sink_storage)
        return open_table(catalog, conn, aws, self.engine.secrets, namespace, table)

    def table_cache(self) -> Any:
        if self._cache is None:
            from icesql.engine.select.tables import TableCache

            self._cache = TableCache(self.connection_catalog, self.engine.secrets)
        return self._cache

    def select_settings(self) -> Any:
        """The Spark settings a fast-path answer depends on (``fastpath.Settings``), from the
        session's ``--conf`` or the running Spark session, never starting one."""
        import dataclasses

        from icesql.engine.select.route import Settings
        from icesql.settings import SPARK_MASTER

        settings = Settings.from_conf(self.engine.spark_conf, self.engine.started_spark)
        master = self.engine.spark_master or SPARK_MASTER.get() or ""
        if self.engine.started_spark is None and master.startswith("sc://"):
            # a Spark Connect server's session settings (time zone, ANSI) are its own
            settings = dataclasses.replace(
                settings, other=(*settings.other, f"a Spark Connect server ({master})")
            )
        return settings

    def route_select(self, plan: Any, storage: Any, schemas: dict[str, Any] | None = None) -> Any:
        """Where ``plan`` runs and why (``fastpath.Route``); ``schemas``: each table alias's Arrow
        schema (read from the tables' metadata when not given)."""
        from icesql.engine.select.route import SPARK, Route, route

        if plan.relations:  # decided without opening a table
            return route(
                plan.sql,
                relations=plan.relations,
                tables={},
                settings=self.select_settings(),
                limit=plan.limit,
            )
        if schemas is None:
            from icesql.engine.select.tables import arrow_schema

            cache = self.table_cache()
            cache.begin()
            schemas = {}
            for ref in plan.tables:
                table, snapshot, travelled = self._open_ref(cache, ref, storage)
                schemas[ref.alias] = arrow_schema(table, snapshot, travelled=travelled)
        try:
            return route(
                plan.sql, relations=(), tables=schemas, settings=self.select_settings(), limit=plan.limit
            )
        except Exception as e:  # a sqlglot bug must cost speed, never the answer
            log.debug("SELECT routing failed: %r", e, exc_info=True)
            return Route(SPARK, f"the fast path's check failed ({type(e).__name__})")

    def _open_ref(self, cache: Any, ref: Any, storage: Any) -> Any:
        try:
            return cache.open(ref, storage(ref.connection))
        except IcesqlError as err:
            err.table_ref = ref  # type: ignore[attr-defined]  # where the statement names it
            raise

    def select(self, plan: Any, storage: Any, *, path: str | None = None) -> Any:
        """Run a ``SelectPlan``: on DuckDB when it reads only connection tables with what the
        fast path translates (``fastpath``), else on Spark (``query.run_select``);
        ``storage(connection)`` names the storage connections a connection's table files are read
        with (None: the catalog's own). ``path`` forces one (the differential tests)."""
        import time

        from icesql.engine.select import route as fastpath

        started = time.perf_counter()
        if path != fastpath.SPARK and not plan.relations:
            from icesql.engine.select.duck import without_pandas

            without_pandas()
        cache = self.table_cache()
        cache.begin()
        # within one query each connection's catalog is loaded once, each table loaded once and
        # each (table, snapshot) read once: a self-join or two tables of a catalog cost no more I/O;
        # between queries catalogs and the rows of unchanged snapshots are kept
        read_already: dict[str, Any] = {}

        def read(ref: Any) -> Any:
            if ref.alias not in read_already:
                table, snapshot, travelled = self._open_ref(cache, ref, storage)
                try:
                    read_already[ref.alias] = cache.rows(table, snapshot, travelled)
                except IcesqlError as err:
                    err.table_ref = ref  # type: ignore[attr-defined]
                    raise
            return read_already[ref.alias]

        if path == fastpath.SPARK:
            decision = fastpath.Route(fastpath.SPARK, "asked for Spark")
        elif plan.relations:
            decision = self.route_select(plan, storage)
        else:
            decision = self.route_select(plan, storage, {ref.alias: read(ref).schema for ref in plan.tables})
        if decision.fast:
            try:
                out = self._duck_session().run(
                    decision.sql, {r.alias: read(r) for r in plan.tables}, decision.names
                )
            except fastpath.FastPathDeclined as why:
                if path == fastpath.DUCKDB:
                    raise
                fastpath.log.debug("SELECT on spark: DuckDB declined at run time (%s)", why)
            else:
                fastpath.log.debug(
                    "SELECT on duckdb (%.3f s): %s", time.perf_counter() - started, decision.reason
                )
                from icesql.engine.select.spark import QueryRows

                return QueryRows(out[0], tuple(out[1]))
        elif path == fastpath.DUCKDB:
            raise fastpath.FastPathDeclined(decision.reason)
        else:
            fastpath.log.debug("SELECT on spark: %s", decision.reason)
        from icesql.engine.select.spark import run_select

        return run_select(self.engine.spark, plan, self.engine.objects.relation, read, bind=self.engine.kafka_binding)

    def _duck_session(self) -> Any:
        from icesql.engine.select.duck import DuckSession

        settings = self.select_settings()
        if self._duck is None or self._duck.settings != settings:
            if self._duck is not None:
                self._duck.close()
            self._duck = DuckSession(settings)
        return self._duck

