"""Every statement plan and the function that applies it to a session (``APPLY``; a test checks
that each plan type has one, the same set the analyzer's catalog views record effects for).
FLUSH SINK, a word to the running sinks, is applied here."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from icesql import plan as P
from icesql.analyzer.catalog import EFFECTS
from icesql.results import Result
from icesql.sessions import definitions, inspection, tables, validation
from icesql.syntax import ast as A

if TYPE_CHECKING:
    from icesql.session import Session


def apply_flush(session: Session, plan: P.FlushSinkPlan, stmt: A.Statement, checked: bool) -> Result:
    engine = session.running_engine
    if engine is None:
        return Result("FLUSH SINK", "no sink is running")
    engine.flush(plan.name)
    return Result("FLUSH SINK", "FLUSH SINK")


# (session, plan, statement, checked: its network checks were done before) -> result
Apply = Callable[["Session", Any, A.Statement, bool], Result]

APPLY: dict[type[Any], Apply] = {
    P.CreateSecretPlan: definitions.apply_secret,
    P.CreateObjectPlan: definitions.apply_create,
    P.AlterSinkPlan: definitions.apply_alter_sink,
    P.AlterSourcePlan: definitions.apply_alter_source,
    P.DropPlan: definitions.apply_drop,
    P.ShowPlan: inspection.apply_show,
    P.ShowCreatePlan: inspection.apply_show_create,
    P.ShowSinkStatusPlan: inspection.apply_sink_status,
    P.DescribePlan: inspection.apply_describe,
    P.ExplainPlan: inspection.apply_explain,
    P.ExplainSelectPlan: tables.apply_explain_select,
    P.ValidateConnectionPlan: validation.apply_validate,
    P.FlushSinkPlan: apply_flush,
    P.SelectPlan: tables.apply_select,
    P.ShowTablesPlan: tables.apply_show_tables,
    P.DescribeTablePlan: tables.apply_describe_table,
    P.ShowSnapshotsPlan: tables.apply_show_snapshots,
}
assert APPLY.keys() == EFFECTS.keys()

__all__ = ["APPLY", "Apply", "apply_flush"]
