"""Words the shell offers beyond the grammar's "what comes next": option names and values
per option list, partition transforms, and the keyword set used for colouring.

Nothing is listed twice: option names, aliases, enumerated values and which options name a
connection or take a secret come from the analyzer's option tables (``OptionTable``); the
transforms from the plan's ``Transform`` enum; keywords from the grammar's terminals. Each is
imported on first use, so the shell's first prompt does not wait for them.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any

# Which option list the cursor is in -> (module, table, discriminator filter).
_TABLES: dict[str, tuple[str, str]] = {
    "aws": ("icesql.analyzer.connections", "AWS_OPTIONS"),
    "iceberg_catalog": ("icesql.analyzer.connections", "CATALOG_OPTIONS"),
    "connection_with": ("icesql.analyzer.connections", "CONNECTION_WITH_OPTIONS"),
    "files": ("icesql.analyzer.sources", "SOURCE_OPTIONS"),
    "generator": ("icesql.analyzer.sources", "SOURCE_OPTIONS"),
    "sink_target": ("icesql.analyzer.sinks", "TARGET_OPTIONS"),
    "sink": ("icesql.analyzer.sinks", "SINK_OPTIONS"),
    "alter_sink": ("icesql.analyzer.sinks", "ALTER_OPTIONS"),
}

# The option whose value decides which other options apply (``applies`` in the table).
DISCRIMINATORS: dict[str, tuple[str, ...]] = {
    "iceberg_catalog": ("TYPE", "CATALOG TYPE"),
    "files": ("FORMAT",),
}


@dataclass(frozen=True)
class OptionInfo:
    name: str  # the spelling offered (canonical name or an alias)
    values: tuple[str, ...]  # literal values worth offering after '='
    object_kind: str | None  # 'connection' when the value names one
    takes_secret: bool  # ``= SECRET name`` fits


def _table(list_kind: str) -> Any:
    module, attr = _TABLES[list_kind]
    return getattr(importlib.import_module(module), attr)


def _spec_values(spec: Any) -> tuple[str, ...]:
    kind = spec.kind.name
    if spec.choices:
        return tuple(f"'{c}'" for c in spec.choices)
    if kind == "BOOL":
        return ("true", "false")
    return ()


def _applies(spec: Any, list_kind: str, discriminator: str | None) -> bool:
    applies = spec.applies
    if applies is None:
        return True
    if list_kind == "generator":
        return "generator" in applies
    if list_kind == "files" and applies == frozenset({"generator"}):
        return False
    return discriminator is None or discriminator in applies


@functools.lru_cache(maxsize=64)
def options_for(list_kind: str, discriminator: str | None = None) -> tuple[OptionInfo, ...]:
    """The options accepted in ``list_kind`` (every spelling), narrowed by the discriminator
    (the catalog ``TYPE`` or source ``FORMAT`` already written), in table order."""
    if list_kind not in _TABLES:
        return ()
    table = _table(list_kind)
    if discriminator is not None and list_kind == "iceberg_catalog":
        choices = next((s.choices for s in table.specs if s.name == "TYPE"), None) or {}
        discriminator = choices.get(discriminator, discriminator)
    out = []
    for spec in table.specs:
        if not _applies(spec, list_kind, discriminator):
            continue
        kind = spec.kind.name
        for name in spec.all_names:
            out.append(
                OptionInfo(
                    name=name,
                    values=_spec_values(spec),
                    object_kind="connection" if kind == "CONNECTION" else None,
                    takes_secret=kind in ("SECRET", "STRING_OR_SECRET"),
                )
            )
        if kind in ("SECRET", "STRING_OR_SECRET"):
            # ``PASSWORD SECRET = name``: the design document's spelling of ``PASSWORD = SECRET name``
            out.append(OptionInfo(f"{spec.name} SECRET", (), "secret", False))
    return tuple(out)


def option_names_for(list_kind: str, discriminator: str | None = None) -> tuple[str, ...]:
    return tuple(o.name for o in options_for(list_kind, discriminator))


def option_info(list_kind: str, name: str) -> OptionInfo | None:
    return next((o for o in options_for(list_kind) if o.name == name), None)


@functools.lru_cache(maxsize=1)
def transforms() -> tuple[str, ...]:
    """Canonical partition transform names (``bucket``, ``day``, ...)."""
    from icesql.plan import Transform

    return tuple(t.value for t in Transform)


STATEMENT_KEYWORDS: tuple[str, ...] = (
    "CREATE",
    "ALTER",
    "DROP",
    "SHOW",
    "DESCRIBE",
    "EXPLAIN",
    "VALIDATE",
    "FLUSH",
)

# Spark SQL words coloured inside CREATE VIEW bodies (the grammar keeps those verbatim).
_SPARK_WORDS = frozenset(
    "SELECT DISTINCT WHERE GROUP ORDER HAVING LIMIT JOIN LEFT RIGHT FULL OUTER INNER ON AND OR "
    "CASE WHEN THEN ELSE END CAST UNION ALL NULL TRUE FALSE IS LIKE BETWEEN".split()
)


@functools.lru_cache(maxsize=1)
def keywords() -> frozenset[str]:
    """Every keyword of the grammar (upper case), plus common Spark SQL words."""
    try:
        from icesql.syntax.parser import get_parser

        terminals = get_parser(with_transformer=False).terminals
        words = {
            str(t.pattern.value).upper()
            for t in terminals
            if t.pattern.type == "str" and str(t.pattern.value).replace(" ", "").isalpha()
        }
    except Exception:
        words = set(STATEMENT_KEYWORDS)
    return frozenset(words | _SPARK_WORDS)
