"""Golden plan and error cases (``tests/golden/plan``, ``tests/golden/analysis_errors``).

Rewrite the expectations with ``pytest tests/analyzer/test_golden.py --update-golden`` and
review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.analyzer.golden import cases, golden_files, render_file, split_expected

PLAN_FILES = golden_files("plan")
ERROR_FILES = golden_files("analysis_errors")


def _check(path: Path, update: bool, expect_error: bool) -> None:
    actual = render_file(path)
    expected_path = path.with_suffix(".expected")
    got = split_expected(actual)
    for name, out in got.items():
        is_error = out.startswith(("AnalysisError", "ParseError"))
        assert not out.startswith("ParseError"), f"{path.name}::{name} does not parse:\n{out}"
        assert is_error == expect_error, (
            f"{path.name}::{name}: expected {'an error' if expect_error else 'a plan'}:\n{out}"
        )
    if update:
        expected_path.write_text(actual)
        return
    assert expected_path.exists(), f"{expected_path} missing: run with --update-golden"
    want = split_expected(expected_path.read_text())
    assert sorted(got) == sorted(want), "cases differ from the expected file: run with --update-golden"
    for name in got:
        assert got[name] == want[name], f"{path.name}::{name}"


@pytest.mark.parametrize("path", PLAN_FILES, ids=[p.stem for p in PLAN_FILES])
def test_plan_golden(path: Path, update_golden: bool) -> None:
    _check(path, update_golden, expect_error=False)


@pytest.mark.parametrize("path", ERROR_FILES, ids=[p.stem for p in ERROR_FILES])
def test_error_golden(path: Path, update_golden: bool) -> None:
    _check(path, update_golden, expect_error=True)


def test_enough_golden_cases() -> None:
    total = sum(len(cases(p)) for p in PLAN_FILES + ERROR_FILES)
    assert total >= 100, total
