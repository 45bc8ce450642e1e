"""Golden cases: SQL -> canonical SQL + ast JSON, and SQL -> rendered syntax error.

Run ``pytest tests/syntax --update-golden`` to rewrite the expectations, then review the diff.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from icesql import ParseError
from icesql.syntax.parser import parse
from icesql.syntax.printer import format_script
from tests.syntax.golden import Case, all_cases, write_cases

PARSE_CASES = all_cases("parse")
ERROR_CASES = all_cases("syntax_errors")
_pending: dict[str, list[Case]] = defaultdict(list)


def _ast_json(sql: str) -> str:
    return "\n".join(json.dumps(s.to_dict(), ensure_ascii=False) for s in parse(sql))


def _rewrite(case: Case, all_in_file: list[Case]) -> None:
    write_cases(case.file, all_in_file)


def _check(case: Case, produced: dict[str, str], update: bool, cases: list[Case]) -> None:
    if update:
        case.sections = produced
        write_cases(case.file, [c for c in cases if c.file == case.file])
        return
    for name, text in produced.items():
        assert name in case.sections, f"{case.id}: no '--- {name}' section; run with --update-golden"
        assert text == case.sections[name], f"{case.id}: {name} differs"


def test_there_are_enough_golden_cases() -> None:
    assert len(PARSE_CASES) + len(ERROR_CASES) >= 150
    assert len(ERROR_CASES) >= 40


@pytest.mark.parametrize("case", PARSE_CASES, ids=[c.id for c in PARSE_CASES])
def test_parse_golden(case: Case, update_golden: bool) -> None:
    stmts = parse(case.sql, filename="case.sql")
    produced = {"canonical": format_script(stmts).rstrip("\n"), "ast": _ast_json(case.sql)}
    _check(case, produced, update_golden, PARSE_CASES)


@pytest.mark.parametrize("case", PARSE_CASES, ids=[c.id for c in PARSE_CASES])
def test_round_trip(case: Case) -> None:
    stmts = parse(case.sql)
    for stmt in stmts:
        assert parse(stmt.to_sql()) == [stmt]
    # and the canonical text is a fixed point
    canonical = format_script(stmts)
    assert format_script(parse(canonical)) == canonical


@pytest.mark.parametrize("case", PARSE_CASES, ids=[c.id for c in PARSE_CASES])
def test_spans_point_into_the_whole_input(case: Case) -> None:
    for stmt in parse(case.sql):
        span = stmt.span
        assert span is not None
        assert 0 <= span.start < span.end <= len(case.sql)
        before = case.sql[: span.start]
        assert span.line == before.count("\n") + 1
        assert span.column == span.start - before.rfind("\n")


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c.id for c in ERROR_CASES])
def test_syntax_error_golden(case: Case, update_golden: bool) -> None:
    with pytest.raises(ParseError) as info:
        parse(case.sql, filename="case.sql")
    err = info.value
    assert err.span is not None
    assert 1 <= err.span.line <= max(1, case.sql.count("\n") + 1)
    _check(case, {"error": err.render()}, update_golden, ERROR_CASES)


@pytest.mark.parametrize("case", PARSE_CASES, ids=[c.id for c in PARSE_CASES])
def test_fast_path_matches_lark(case: Case) -> None:
    from icesql.syntax.parser import _fast_parse, get_parser

    fast = _fast_parse(case.sql)  # must not fall back for any valid golden case
    slow = get_parser().parse(case.sql)
    assert fast == slow
    assert [s.span for s in fast] == [s.span for s in slow]
    assert [getattr(s, "query_span", None) for s in fast] == [getattr(s, "query_span", None) for s in slow]
