"""``tests/support/require.py``: a missing server, broker or reader skips a test on a developer's
machine and fails it under CI (``CI=true``, as ``.ci/run`` runs), in each of its three forms
(``require`` in a test, ``missing``, the ``@requires`` marker that ``tests/conftest.py`` applies).

A real pytest runs a small test file in a child process, with and without ``CI``."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.require import under_ci

ROOT = Path(__file__).resolve().parents[1]

CASES = '''
import pytest
from tests.support.require import missing, require, requires


def test_present():
    require(True, "never said")


def test_absent():
    require(False, "the frobnicator is not installed")
    raise AssertionError("not reached")


def test_missing():
    missing("the widget server is not installed")


@requires(False, "the marked tool is not installed")
def test_marked():
    raise AssertionError("not reached")


@requires(True, "never said")
def test_marked_present():
    pass
'''


def _outcomes(tmp_path: Path, ci: str | None) -> dict[str, tuple[str, str]]:
    """Each case's outcome (passed, skipped, failed, error) and message under ``CI=ci``."""
    (tmp_path / "test_cases.py").write_text(CASES)
    report = tmp_path / f"report-{ci}.xml"
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    # tests.conftest as a plugin: its pytest_runtest_setup applies the @requires markers
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-q",
         f"--junitxml={report}", "test_cases.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert report.exists(), proc.stdout + proc.stderr
    out: dict[str, tuple[str, str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = [c for c in case if c.tag in ("skipped", "failure", "error")]
        if not kinds:
            out[case.get("name", "")] = ("passed", "")
        else:
            tag = {"skipped": "skipped", "failure": "failed", "error": "error"}[kinds[0].tag]
            out[case.get("name", "")] = (tag, kinds[0].get("message", ""))
    return out


@pytest.mark.parametrize("ci", [None, "false"])
def test_a_missing_tool_skips_outside_ci(tmp_path: Path, ci: str | None) -> None:
    got = _outcomes(tmp_path, ci)
    assert {name: kind for name, (kind, _) in got.items()} == {
        "test_present": "passed",
        "test_absent": "skipped",
        "test_missing": "skipped",
        "test_marked": "skipped",
        "test_marked_present": "passed",
    }
    assert "the frobnicator is not installed" in got["test_absent"][1]
    assert "the widget server is not installed" in got["test_missing"][1]
    assert "the marked tool is not installed" in got["test_marked"][1]


@pytest.mark.parametrize("ci", ["true"])
def test_a_missing_tool_fails_under_ci(tmp_path: Path, ci: str) -> None:
    got = _outcomes(tmp_path, ci)
    # the marker is checked while the test is set up: a failure there is reported as an error
    assert {name: kind for name, (kind, _) in got.items()} == {
        "test_present": "passed",
        "test_absent": "failed",
        "test_missing": "failed",
        "test_marked": "error",
        "test_marked_present": "passed",
    }
    assert "the frobnicator is not installed" in got["test_absent"][1]
    assert "the widget server is not installed" in got["test_missing"][1]
    assert "the marked tool is not installed" in got["test_marked"][1]


def test_under_ci_reads_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, ci in [("true", True), ("1", True), ("yes", True), ("", False), ("0", False), ("False", False), ("no", False)]:
        monkeypatch.setenv("CI", value)
        assert under_ci() is ci, value
    monkeypatch.delenv("CI")
    assert under_ci() is False
