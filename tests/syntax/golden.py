"""Reading and rewriting golden case files.

A file holds several cases::

    === case name
    SQL text (any number of lines)
    --- canonical
    expected output
    --- ast
    expected output

Sections after the input are named by the test that owns the directory; ``--update-golden``
rewrites them from what the code produces now (review the diff before committing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


@dataclass
class Case:
    file: Path
    name: str
    sql: str
    sections: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.file.stem}:{self.name}"


def read_cases(path: Path) -> list[Case]:
    cases: list[Case] = []
    current: Case | None = None
    section: str | None = None
    lines: list[str] = []

    def flush() -> None:
        if current is None:
            return
        text = "\n".join(lines)
        if section is None:
            current.sql = text
        else:
            current.sections[section] = text

    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith("=== "):
            flush()
            current = Case(path, line[4:].strip(), "")
            cases.append(current)
            section, lines = None, []
        elif line.startswith("--- ") and current is not None and line[4:].strip().isidentifier():
            flush()
            section, lines = line[4:].strip(), []
        else:
            lines.append(line)
    flush()
    for case in cases:
        case.sql = case.sql.strip("\n")
        case.sections = {k: v.strip("\n") for k, v in case.sections.items()}
    return cases


def write_cases(path: Path, cases: list[Case]) -> None:
    out: list[str] = []
    for case in cases:
        out.append(f"=== {case.name}")
        out.append(case.sql)
        for name, text in case.sections.items():
            out.append(f"--- {name}")
            out.append(text)
        out.append("")
    path.write_text("\n".join(out), encoding="utf-8")


def all_cases(kind: str) -> list[Case]:
    cases: list[Case] = []
    for path in sorted((GOLDEN / kind).glob("*.golden")):
        cases.extend(read_cases(path))
    return cases
