"""What a session says of its sinks: ``statuses`` (SHOW SINK STATUS, ``icesql status``: the
store's figures, live ones for the sinks running here), and what its observer serves
(``serve_metrics``: Prometheus metrics, health and the status page, over ``sink_reports``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from icesql import plan as P
from icesql.errors import ExecutionError
from icesql.results import SinkStatus

if TYPE_CHECKING:
    from catalog_store import CatalogStore
    from icesql.engine.engine import Engine
    from icesql.observe.health import SinkReport
    from icesql.observe.server import ObserveServer


def live_rows(engine: Engine | None) -> dict[str, dict[str, Any]]:
    """The engine's status rows of the sinks running (or retrying) here, by name."""
    return {row["name"]: row for row in engine.status()} if engine is not None else {}


def statuses(store: CatalogStore, live: dict[str, dict[str, Any]]) -> list[SinkStatus]:
    """Each sink's state from the store, with the live figures of those in ``live``."""
    out = []
    for obj in store.list_objects("sink"):
        st = store.get_sink_state(obj.name)
        lv = live.get(obj.name, {})
        sink_plan = P.plan_from_dict(obj.definition)
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
                file_format=(fmt := lv.get("file_format") or getattr(sink_plan, "format", None)),
                readers=P.FORMAT_READERS.get(fmt) if fmt else None,
                table=getattr(sink_plan, "table_identifier", None),
            )
        )
        tables = lv.get("tables")
        if tables is None and getattr(sink_plan, "routed", False):  # not running here: the store's
            ns = ".".join(getattr(sink_plan, "namespace", ()) or ())
            tables = [{**dataclasses.asdict(t), "table": f"{ns}.{t.table}"} for t in store.sink_tables(obj.name)]
        out += [_table_status(out[-1], t) for t in tables or ()]
    return out


def _table_status(sink: SinkStatus, t: dict[str, Any]) -> SinkStatus:
    """One table of a routed sink (issue 53), under its sink's row."""
    return SinkStatus(
        name=sink.name,
        state=sink.state,
        rows_committed=int(t.get("rows_committed") or 0),
        bytes_committed=int(t.get("bytes_committed") or 0),
        files_committed=int(t.get("files_committed") or 0),
        commits=int(t.get("commits") or 0),
        last_commit_at=t.get("last_commit_at"),
        last_snapshot_id=t.get("last_snapshot_id"),
        last_error=t.get("last_error"),
        lag=t.get("lag"),
        file_format=sink.file_format,
        readers=sink.readers,
        table=t.get("table"),
    )


def sink_reports(store: CatalogStore, engine: Engine | None, observed: Sequence[str]) -> list[SinkReport]:
    """The sinks ``observed`` (run here) as the observer sees them: live figures, else the store's."""
    from icesql.observe.health import SinkReport

    live = live_rows(engine)
    by_name: dict[str, SinkStatus] = {}
    for s in statuses(store, live):
        by_name.setdefault(s.name, s)  # the sink's own row; a routed sink's table rows follow it
    reports = []
    for name in list(observed):
        obj = store.get_object("sink", name)
        st = by_name.get(name)
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
                tables=lv.get("tables"),
            )
        )
    return reports


def serve_metrics(engine: Engine, reports: Callable[[], list[SinkReport]], host: str, port: int) -> ObserveServer:
    """Start the observer's HTTP server over ``reports`` (its metrics listening to ``engine``)."""
    try:
        from icesql.observe.metrics import SinkMetrics
        from icesql.observe.server import ObserveServer
    except ImportError as exc:
        raise ExecutionError(
            f"metrics need prometheus_client ({exc})", hint="pip install 'icesql[metrics]'"
        ) from None
    from icesql import settings

    grace = settings.READY_GRACE.get_float() or 0.0
    metrics = SinkMetrics(reports, grace=grace)
    try:
        server = ObserveServer(metrics, reports, host=host, port=port, grace=grace)
    except OSError as exc:
        raise ExecutionError(
            f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}",
            hint="choose another --metrics-port (0 picks a free one)",
        ) from None
    engine.add_listener(metrics)
    started: ObserveServer = server.start()
    return started


__all__ = ["live_rows", "serve_metrics", "sink_reports", "statuses"]
