"""Golden cases for the analyzer.

A golden ``.sql`` file holds cases, each starting with a ``-- case: name`` line. Text before the
first case is a preamble shared by every case of the file. Each case runs in a fresh
``MemoryCatalog``: the preamble and every statement of the case but the last are analyzed and
applied to it, then the last statement is the subject. The expected output of ``name.sql``
lives in ``name.expected``: for each case the plan as ``icesql.plan.to_dict`` JSON (plus any
warnings), or the rendered error.

Paths resolve against ``/base`` so plans do not depend on where the tests run.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icesql.analyzer import MemoryCatalog, analyze
from icesql.errors import IcesqlError
from icesql.plan import CreateObjectPlan, CreateSecretPlan, to_dict
from icesql.syntax.parser import parse

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
BASE_DIR = Path("/base")
_CASE = re.compile(r"^-- case: *(\S+) *$", re.MULTILINE)


@dataclass
class Case:
    name: str
    preamble: str
    text: str


def cases(path: Path) -> list[Case]:
    text = path.read_text()
    parts = _CASE.split(text)
    preamble = parts[0]
    return [Case(parts[i], preamble, parts[i + 1].strip("\n") + "\n") for i in range(1, len(parts), 2)]


def run_case(case: Case, filename: str) -> str:
    catalog = MemoryCatalog()
    catalog.spark_tables["spark_db.events"] = None
    try:
        for stmt in parse(case.preamble) if case.preamble.strip() else []:
            catalog.apply(analyze(stmt, catalog, source=case.preamble, base_dir=BASE_DIR).plan)
        stmts = parse(case.text, filename=filename)
        for stmt in stmts[:-1]:
            catalog.apply(analyze(stmt, catalog, source=case.text, base_dir=BASE_DIR).plan)
        result = analyze(stmts[-1], catalog, source=case.text, filename=filename, base_dir=BASE_DIR)
    except IcesqlError as e:
        return f"{type(e).__name__}\n{e.render()}\n"
    out = compact_json(plan_json(result.plan)) + "\n"
    for w in result.warnings:
        out += w.render() + "\n"
    return out


def compact_json(obj: Any, indent: str = "") -> str:
    """JSON with one key per line, but anything that fits in 100 columns on one line."""
    flat = json.dumps(obj)
    if len(flat) + len(indent) <= 100 or not isinstance(obj, dict | list):
        return flat
    inner = indent + "  "
    if isinstance(obj, list):
        items = [inner + compact_json(x, inner) for x in obj]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    items = [f"{inner}{json.dumps(k)}: {compact_json(v, inner)}" for k, v in obj.items()]
    return "{\n" + ",\n".join(items) + "\n" + indent + "}"


def plan_json(plan: Any) -> Any:
    """``to_dict`` of a plan, with each ``Redacted`` value shown as the string it prints as."""
    if isinstance(plan, CreateSecretPlan):
        plan = dataclasses.replace(plan, value=repr(plan.value))  # type: ignore[arg-type]
    if isinstance(plan, CreateObjectPlan):
        plan = dataclasses.replace(
            plan,
            inline_secrets=tuple((n, repr(v)) for n, v in plan.inline_secrets),  # type: ignore[misc]
        )
    return to_dict(plan)


def render_file(path: Path) -> str:
    chunks = []
    for case in cases(path):
        chunks.append(f"-- case: {case.name}\n{run_case(case, path.name)}")
    return "\n".join(chunks)


def golden_files(kind: str) -> list[Path]:
    return sorted((GOLDEN / kind).glob("*.sql"))


def split_expected(text: str) -> dict[str, str]:
    parts = _CASE.split(text)
    return {parts[i]: parts[i + 1].strip("\n") for i in range(1, len(parts), 2)}
