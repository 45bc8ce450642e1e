"""Statement handling is table-driven: every statement kind has its analyzer entry, every plan
its effect on the catalog views and its apply method in the session."""

from __future__ import annotations

import typing

from icesql import plan as P
from icesql.analyzer.catalog import EFFECTS
from icesql.analyzer.statements import HANDLERS
from icesql.session import APPLY
from icesql.syntax import ast as A


def _subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out.add(sub)
        out |= _subclasses(sub)
    return out


def test_every_statement_kind_has_an_analyzer_entry() -> None:
    assert set(HANDLERS) == _subclasses(A.Statement)


def test_every_plan_has_an_effect_and_an_apply_method() -> None:
    plans = set(typing.get_args(P.StatementPlan))
    assert set(EFFECTS) == plans
    assert set(APPLY) == plans


def test_there_is_no_isinstance_ladder_left_in_the_session() -> None:
    import inspect

    import icesql.session as session

    source = inspect.getsource(session.Session._apply)
    assert "isinstance" not in source and "APPLY[" in source
