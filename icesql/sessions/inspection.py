"""SHOW, SHOW CREATE, SHOW SINK STATUS, DESCRIBE and EXPLAIN CREATE SINK: what the store holds,
fetched here and rendered by ``icesql.results``. Each ``apply_*`` is the ``APPLY`` entry of its
plan (``icesql.sessions.dispatch``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from icesql import plan as P
from icesql import results as R
from icesql.errors import CatalogError
from icesql.results import Result
from icesql.syntax import ast as A

if TYPE_CHECKING:
    from icesql.session import Session


def apply_show(session: Session, plan: P.ShowPlan, stmt: A.Statement, checked: bool) -> Result:
    kind = plan.kind.rstrip("s").lower()
    objects = session.store.list_objects(kind)
    return R.show_secrets(objects) if kind == "secret" else R.show_objects(plan.kind, objects)


def apply_show_create(session: Session, plan: P.ShowCreatePlan, stmt: A.Statement, checked: bool) -> Result:
    obj = session.store.get_object(plan.kind, plan.name)
    if obj is None:
        raise CatalogError(f"{plan.kind} {plan.name!r} does not exist", stmt.span)
    return R.show_create(plan.kind, plan.name, obj.sql)


def apply_sink_status(session: Session, plan: P.ShowSinkStatusPlan, stmt: A.Statement, checked: bool) -> Result:
    statuses = session.status()
    if plan.name is not None:
        if session.store.get_object("sink", plan.name) is None:
            raise CatalogError(f"sink {plan.name!r} does not exist", stmt.span)
        statuses = [s for s in statuses if s.name == plan.name]
    return R.sink_status(statuses)


def apply_describe(session: Session, plan: P.DescribePlan, stmt: A.Statement, checked: bool) -> Result:
    obj = session.store.find_object(plan.name)
    if obj is None:
        raise CatalogError(
            f"no object named {plan.name!r}", stmt.span, hint="SHOW SINKS, SHOW SOURCES, ... list what exists"
        )
    state = session.store.get_sink_state(obj.name) if obj.kind == "sink" else None
    return R.describe(obj, state)


def apply_explain(session: Session, plan: P.ExplainPlan, stmt: A.Statement, checked: bool) -> Result:
    return R.explain(plan.sink)


__all__ = ["apply_describe", "apply_explain", "apply_show", "apply_show_create", "apply_sink_status"]
