"""The analyzer: syntax tree + catalog view -> validated, typed plans.

``analyze(stmt, catalog)`` returns an ``Analyzed`` (the plan and any warnings) or raises the
first ``AnalysisError`` of the statement, with a span on the offending option, value or
transform. Option lists are checked against a table per object kind (``options.py``); secret
values never reach a plan, its SQL, a warning or an error (``redaction.py``).

Imports neither Lark, Spark, pyiceberg nor pyarrow.
"""

from __future__ import annotations

from icesql.analyzer.catalog import CatalogView, MemoryCatalog, OverlayCatalog
from icesql.analyzer.diagnostics import AnalysisWarning
from icesql.analyzer.schema import SchemaError, parse_schema
from icesql.analyzer.statements import Analyzed, analyze
from icesql.analyzer.units import parse_duration, parse_size

__all__ = [
    "AnalysisWarning",
    "Analyzed",
    "CatalogView",
    "MemoryCatalog",
    "OverlayCatalog",
    "SchemaError",
    "analyze",
    "parse_duration",
    "parse_schema",
    "parse_size",
]
