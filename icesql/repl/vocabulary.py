"""Words the shell offers beyond the grammar's "what comes next": option names and values
per option list, partition transforms, a sink's formats, and the keyword set used for colouring.

Nothing is listed twice: option names, aliases, enumerated values and which options name a
connection or take a secret come from the dialect's option declarations
(``icesql.syntax.options``, which the analyzer's tables are built from too); the transforms
from the plan's ``Transform`` enum; keywords from the grammar. Each is imported on first use,
so the shell's first prompt does not wait for them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

# Which option list the cursor is in -> the list's key in icesql.syntax.options.LISTS.
_TABLES: dict[str, str] = {
    "aws": "aws",
    "gcs": "gcs",
    "azure": "azure",
    "iceberg_catalog": "iceberg_catalog",
    "kafka": "kafka",
    "schema_registry": "schema_registry",
    "connection_with": "connection_with",
    "files": "source",
    "generator": "source",
    "kafka_source": "kafka_source",
    "sink_target": "sink_target",
    "sink": "sink",
    "alter_sink": "alter_sink",
    "alter_source": "alter_source",
}

# The option whose value decides which other options apply (``applies`` in the table).
DISCRIMINATORS: dict[str, tuple[str, ...]] = {
    "iceberg_catalog": ("TYPE", "CATALOG TYPE"),
    "files": ("FORMAT",),
    "kafka_source": ("FORMAT",),
}


@dataclass(frozen=True)
class OptionInfo:
    name: str  # the spelling offered (canonical name or an alias)
    values: tuple[str, ...]  # literal values worth offering after '='
    object_kind: str | None  # 'connection' when the value names one
    takes_secret: bool  # ``= SECRET name`` fits


def _specs(list_kind: str) -> tuple[Any, ...]:
    from icesql.syntax.options import LISTS

    return LISTS[_TABLES[list_kind]]


def _spec_values(spec: Any, list_kind: str) -> tuple[str, ...]:
    kind = spec.kind.name
    if list_kind == "sink" and spec.name == "FORMAT":
        return tuple(f"'{f}'" for f in sink_formats())
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
    specs = _specs(list_kind)
    if discriminator is not None and list_kind == "iceberg_catalog":
        choices = next((s.choices for s in specs if s.name == "TYPE"), None) or {}
        discriminator = choices.get(discriminator, discriminator)
    out = []
    for spec in specs:
        if not _applies(spec, list_kind, discriminator):
            continue
        kind = spec.kind.name
        for name in spec.all_names:
            out.append(
                OptionInfo(
                    name=name,
                    values=_spec_values(spec, list_kind),
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


@functools.lru_cache(maxsize=1)
def include_items() -> tuple[str, ...]:
    """What a Kafka source's ``INCLUDE`` clause adds (``KEY``, ``PARTITION``, ...)."""
    from icesql.plan import KafkaMetadata

    return tuple(m.name for m in KafkaMetadata)


@functools.lru_cache(maxsize=1)
def sink_formats() -> tuple[str, ...]:
    """A sink's data file formats (``FORMAT = 'orc'``, ``FORMAT ORC``), as the plan lists them;
    the analyzer checks the value, so the option declares no ``choices``."""
    from icesql.plan import DATA_FILE_FORMATS

    return DATA_FILE_FORMATS


@functools.lru_cache(maxsize=1)
def envelopes() -> tuple[str, ...]:
    """Materialize's ``ENVELOPE UPSERT`` / ``NONE`` / ``DEBEZIUM`` after a Kafka source's options."""
    from icesql.plan import KafkaEnvelope

    return tuple(e.name for e in KafkaEnvelope)


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
        from icesql.syntax.parser import keywords as grammar_keywords

        words = set(grammar_keywords())
    except Exception:
        words = set(STATEMENT_KEYWORDS)
    return frozenset(words | _SPARK_WORDS)
