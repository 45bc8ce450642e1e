"""The grammar file: its text and the keywords it declares, read without Lark.

The parser builds its Lark parsers from ``grammar_text()``; the redactor and the shell ask
``keywords()`` which words are the dialect's. Both live here, below the parser and the
redactor, so that neither has to import the other for them.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

GRAMMAR_FILE = "icesql.lark"


def grammar_text() -> str:
    """The grammar source: the source tree's when this code runs from one (so the grammar
    always matches the code beside it, even with another checkout installed), else the
    installed ``icesql.grammar`` package's."""
    path = Path(__file__).resolve().parents[2] / "grammar" / GRAMMAR_FILE
    if path.is_file():
        return path.read_text(encoding="utf-8")
    from importlib.resources import files

    return files("icesql.grammar").joinpath(GRAMMAR_FILE).read_text(encoding="utf-8")


@functools.cache
def keywords() -> frozenset[str]:
    """Every keyword of the grammar, upper case (read from the grammar text, without Lark; once
    per process)."""
    return frozenset(m.group(1).upper() for m in re.finditer(r'^[A-Z]+: "([a-z]+)"i$', grammar_text(), re.M))


__all__ = ["GRAMMAR_FILE", "grammar_text", "keywords"]
