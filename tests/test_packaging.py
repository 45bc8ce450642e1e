"""The wheel check of .ci/check_wheel.py reads the tree, so it cannot drift: a package folder added
under icesql/ is expected in the wheel without anyone listing it, and a wheel that lacks one file of
the tree fails the check. (CI runs the check itself on a real build: .ci/run.)"""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def check_wheel() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_wheel", ROOT / ".ci" / "check_wheel.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_package_folder_of_the_tree_is_expected_in_the_wheel() -> None:
    expected = check_wheel().tree_files()
    for init in sorted((ROOT / "icesql").rglob("__init__.py")) + [ROOT / "catalog_store" / "__init__.py"]:
        if "__pycache__" not in init.parts:
            assert init.relative_to(ROOT).as_posix() in expected
    assert {"icesql/grammar/__init__.py", "icesql/grammar/icesql.lark"} <= expected


def test_a_wheel_missing_a_file_of_the_tree_fails_the_check(tmp_path: Path) -> None:
    cw = check_wheel()
    expected = sorted(cw.tree_files())
    dropped = next(f for f in expected if f.startswith("icesql/engine/") and f.count("/") >= 3)
    wheel = tmp_path / "icesql-0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name in expected:
            if name != dropped:
                z.writestr(name, "")
    assert cw.compare(wheel) == [dropped]
    with zipfile.ZipFile(wheel, "a") as z:
        z.writestr(dropped, "")
    assert cw.compare(wheel) == []


def test_packages_are_found_not_listed() -> None:
    """A hand-written list left icesql.engine.iceberg.formats and .stores out of the wheel (issue 51)."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert "packages" not in {k for k in setuptools if not isinstance(setuptools[k], dict)}
    assert setuptools["packages"]["find"]["include"] == ["icesql", "icesql.*", "catalog_store", "catalog_store.*"]
    assert setuptools["package-dir"] == {"icesql.grammar": "grammar"}
