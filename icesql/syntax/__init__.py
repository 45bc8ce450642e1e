"""The syntax layer: SQL text to typed ast, canonical printer, parse errors.

Light to import: Lark is loaded only when something is parsed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from icesql.syntax import ast

if TYPE_CHECKING:
    from icesql.syntax.parser import expected_tokens, is_complete, parse, parse_one, split_statements
    from icesql.syntax.printer import format_script, to_sql

_LAZY = {
    "parse": "icesql.syntax.parser",
    "parse_one": "icesql.syntax.parser",
    "split_statements": "icesql.syntax.parser",
    "is_complete": "icesql.syntax.parser",
    "expected_tokens": "icesql.syntax.parser",
    "to_sql": "icesql.syntax.printer",
    "format_script": "icesql.syntax.printer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'icesql.syntax' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ast",
    "expected_tokens",
    "format_script",
    "is_complete",
    "parse",
    "parse_one",
    "split_statements",
    "to_sql",
]
