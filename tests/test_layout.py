"""The house rules of docs/ARCHITECTURE.md, checked: the engine's wings stack (no import circle, no
import from a lower wing to a higher one), at most twelve top-level rooms, no module over 700 lines,
no private name imported across modules, every module importable, and every module path written as
a string (lazy registries, ``py-io-impl``, logger-free dotted names) resolves."""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GRAPH_TOOL = ROOT.parent / "shared" / "tools" / "import_graph.py"
# bottom first; wings on one level never import each other (docs/ARCHITECTURE.md)
LAYERS = "base,connections,iceberg,backends|commit,sources|index,maintenance|select,sink,engine"
MAX_LINES = 700


def _python_files(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py") if "__pycache__" not in p.parts)


def test_the_engine_import_graph_has_no_circle_and_no_upward_import() -> None:
    if not GRAPH_TOOL.exists():
        if os.environ.get("CI"):
            pytest.fail(f"the import graph tool is missing: {GRAPH_TOOL}")
        pytest.skip(f"the import graph tool is not here ({GRAPH_TOOL})")
    out = subprocess.run(
        [sys.executable, str(GRAPH_TOOL), "icesql/engine", "--layers", LAYERS, "--max-lines", str(MAX_LINES)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "not in any layer" not in out.stdout, out.stdout


def test_the_engine_has_at_most_twelve_top_level_rooms() -> None:
    engine = ROOT / "icesql" / "engine"
    rooms = sorted(
        p.name
        for p in engine.iterdir()
        if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")
    )
    assert len(rooms) <= 12, rooms
    wings = {w for level in LAYERS.split(",") for w in level.split("|")} - {"engine"}
    assert set(rooms) == wings | {"engine.py"}, "every room stands in a layer of LAYERS"


def test_no_module_is_over_700_lines() -> None:
    long = [
        f"{p.relative_to(ROOT)}: {n}"
        for p in _python_files("icesql", "catalog_store")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    ]
    assert not long, long


def test_no_private_name_is_imported_across_modules() -> None:
    crossing = []
    for p in _python_files("icesql", "catalog_store"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("icesql", "catalog_store")):
                crossing += [
                    f"{p.relative_to(ROOT)}:{node.lineno} {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not crossing, crossing


def _modules() -> list[str]:
    import icesql

    return sorted(m.name for m in pkgutil.walk_packages(icesql.__path__, "icesql.") if not m.name.endswith("__main__"))


def test_every_module_imports() -> None:
    failed = []
    for name in _modules():
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - listed below
            failed.append(f"{name}: {type(e).__name__}: {e}")
    assert not failed, failed


DOTTED = re.compile(r"""["'](icesql\.engine(?:\.[A-Za-z_][A-Za-z0-9_]*)+)["']""")


def test_every_module_path_written_as_a_string_resolves() -> None:
    """A move of a module breaks these silently otherwise: the import graph does not see them."""
    found: dict[str, str] = {}
    for p in _python_files("icesql"):
        for m in DOTTED.finditer(p.read_text(encoding="utf-8")):
            found.setdefault(m.group(1), str(p.relative_to(ROOT)))
    assert found, "no dotted module path found: the pattern is wrong"
    broken = []
    for dotted, where in sorted(found.items()):
        parts = dotted.split(".")
        for i in range(len(parts), 1, -1):
            try:
                obj: object = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            try:
                for attr in parts[i:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                broken.append(f"{dotted} ({where})")
            break
        else:
            broken.append(f"{dotted} ({where})")
    assert not broken, broken

