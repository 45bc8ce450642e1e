"""icesql: a SQL front-end that streams Spark data into Apache Iceberg tables.

The facade is light on purpose: ``import icesql`` loads neither Lark, Spark, pyiceberg nor
pyarrow; each is imported when first needed::

    import icesql
    stmts = icesql.parse(text)          # typed, frozen ast nodes with source spans
    stmt = icesql.parse_one(text)
    stmt.to_sql()                       # canonical SQL
    with icesql.Session(home="...") as s:
        s.execute("CREATE SINK ...")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from icesql.errors import (
    AnalysisError,
    CatalogError,
    ExecutionError,
    IcesqlError,
    ParseError,
    Span,
    UsageError,
)

__version__ = "0.1.0"

if TYPE_CHECKING:
    from icesql.session import Session
    from icesql.syntax import ast
    from icesql.syntax.parser import expected_tokens, parse, parse_one, split_statements
    from icesql.syntax.printer import format_script, to_sql

# name -> (module, attribute or None for the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    "parse": ("icesql.syntax.parser", "parse"),
    "parse_one": ("icesql.syntax.parser", "parse_one"),
    "split_statements": ("icesql.syntax.parser", "split_statements"),
    "expected_tokens": ("icesql.syntax.parser", "expected_tokens"),
    "to_sql": ("icesql.syntax.printer", "to_sql"),
    "format_script": ("icesql.syntax.printer", "format_script"),
    "ast": ("icesql.syntax.ast", None),
    "Session": ("icesql.session", "Session"),
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'icesql' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(target[0])
    value = module if target[1] is None else getattr(module, target[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AnalysisError",
    "CatalogError",
    "ExecutionError",
    "IcesqlError",
    "ParseError",
    "Session",
    "Span",
    "UsageError",
    "__version__",
    "ast",
    "expected_tokens",
    "format_script",
    "parse",
    "parse_one",
    "split_statements",
    "to_sql",
]
