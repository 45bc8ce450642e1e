"""SELECT without Spark: a query that reads only connection tables, answered by DuckDB.

Spark takes 10-20 s to start; a look at a table should not wait for it. A ``SelectPlan`` whose
relations are all connection tables (no icesql source or view, no table of the Spark session)
is *routed* here (``route``): its Spark SQL is parsed by sqlglot (``read='spark'``), checked
against an allow-list, rewritten where Spark and DuckDB differ, and written as DuckDB SQL; the
tables are read on the driver exactly as the Spark path reads them (``table_reader.read_rows``:
every delete applied) and registered in an in-process DuckDB as Arrow. Everything else runs on
Spark, and so does a query that DuckDB fails on (``FastPathDeclined``): DuckDB's answer is
taken only when it is the one Spark would give.

Why an allow-list rather than a deny-list: sqlglot translates most of Spark SQL, but it
translates Spark's *non-ANSI* semantics (``CAST`` becomes ``TRY_CAST``, ``x / 0`` becomes NULL)
while Spark 4 runs in ANSI mode, and many functions have the same name and a different answer
in corner cases (``substring`` at position 0, ``upper('ß')``, ``size(NULL)`` in legacy mode,
decimal ``avg``'s type). A construct not listed below goes to Spark, so a new sqlglot release or
a query nobody thought of costs speed, never a wrong answer. Each entry was checked against Spark
(``tests/engine/test_select_fastpath.py`` runs the same corpus on both and compares what the
user sees).

What the translation makes explicit:

* NULL ordering: Spark sorts NULLs first ascending and last descending; every ``ORDER BY`` key
  gets its ``NULLS FIRST``/``NULLS LAST`` written out, and the DuckDB connection's
  ``default_null_order`` is set to the one sqlglot's DuckDB dialect assumes.
* ANSI casts: ``CAST`` stays a failing cast (an error, then Spark, instead of a NULL) and is
  allowed only between types whose conversion is the same in both engines (``_CASTS``).
* Integral and decimal ``sum``: cast back to Spark's result type, so that an overflow fails in
  DuckDB (and Spark reports it) instead of being answered in a wider type.
* ``upper``/``lower``: non-ASCII text raises in DuckDB (Java and DuckDB case-map ``ß`` and
  friends differently), so such rows go to Spark.
* Time zones: the DuckDB connection's ``TimeZone`` is Spark's session time zone, so
  ``CAST(ts AS DATE)``, ``year(ts)`` and timestamp literals read the same; values come back as
  PySpark returns them (``to_python``).
* Column names: Spark names an unaliased expression after its SQL (``count(1)``,
  ``(id + 1)``); ``spark_name`` writes those names for the allowed nodes, and an expression
  it cannot name goes to Spark.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("icesql.select")

DUCKDB = "duckdb"
SPARK = "spark"


class FastPathDeclined(Exception):
    """DuckDB could not answer (a binder error, an ANSI guard, an overflow): Spark answers."""


@dataclass(frozen=True)
class Route:
    """Where a SELECT runs and why; ``sql`` is the DuckDB SQL when ``path`` is ``duckdb``."""

    path: str
    reason: str
    sql: str | None = None
    names: tuple[str | None, ...] = ()  # Spark's name of each projection (None: a star)

    @property
    def fast(self) -> bool:
        return self.path == DUCKDB


@dataclass(frozen=True)
class Settings:
    """The Spark settings a fast-path answer depends on, read without starting Spark."""

    time_zone: str = "UTC"
    ansi: bool = True
    other: tuple[str, ...] = ()  # spark.sql.* settings that may change results

    @staticmethod
    def from_conf(conf: Mapping[str, Any], spark: Any = None) -> Settings:
        """From the session's ``--conf`` (or a running Spark session handed to icesql)."""
        values = {str(k): str(v) for k, v in conf.items()}
        if spark is not None:
            for key in ("spark.sql.session.timeZone", "spark.sql.ansi.enabled", "spark.sql.caseSensitive"):
                try:
                    values[key] = str(spark.conf.get(key))
                except Exception:  # not set, or a Connect session that cannot say
                    pass
        other = tuple(
            sorted(k for k, v in values.items() if k.startswith("spark.sql.") and not _harmless(k, v))
        )
        return Settings(
            time_zone=values.get("spark.sql.session.timeZone", "UTC") or "UTC",
            ansi=values.get("spark.sql.ansi.enabled", "true").lower() == "true",
            other=other,
        )


# spark.sql settings that do not change a query's answer (or are read here)
_HARMLESS = (
    "spark.sql.session.timeZone",
    "spark.sql.ansi.enabled",
    "spark.sql.shuffle.partitions",
    "spark.sql.execution.arrow.",
    "spark.sql.streaming.",
    "spark.sql.adaptive.",
    "spark.sql.files.",
    "spark.sql.catalog.",
    "spark.sql.extensions",
    "spark.sql.warehouse.dir",
    "spark.sql.sources.",
)


def _harmless(key: str, value: str) -> bool:
    if key == "spark.sql.caseSensitive":
        return value.lower() == "false"
    return key.startswith(_HARMLESS)


# --------------------------------------------------------------------------- the allow-list

def _allowed_nodes() -> tuple[type, ...]:
    from sqlglot import exp

    return (
        # query structure
        exp.Select, exp.Union, exp.From, exp.Join, exp.Table, exp.TableAlias, exp.Subquery,
        exp.With, exp.CTE, exp.Where, exp.Group, exp.Having, exp.Order, exp.Ordered, exp.Limit,
        exp.Offset, exp.Distinct, exp.Alias, exp.Column, exp.Identifier, exp.Star, exp.Paren,
        exp.Tuple, exp.Dot,
        # literals and types
        exp.Literal, exp.Boolean, exp.Null, exp.DataType, exp.DataTypeParam,
        # operators: no division or modulo (ANSI division by zero fails in Spark, is NULL in
        # DuckDB; decimal division's result scale is Spark's own rule)
        exp.Add, exp.Sub, exp.Mul, exp.Neg, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE,
        exp.NullSafeEQ, exp.And, exp.Or, exp.Not, exp.Is, exp.In, exp.Between, exp.Like,
        exp.Case, exp.If,
        # functions (see _FUNCTIONS for the conditions each is allowed under)
        exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Upper, exp.Lower, exp.Length,
        exp.Trim, exp.Coalesce, exp.Abs, exp.Year, exp.Month, exp.Day, exp.Concat, exp.DPipe,
        exp.ArraySize, exp.Cast, exp.TryCast, exp.TsOrDsToDate,
    )


# Spark type -> the Arrow kinds a CAST to it accepts unchanged in both engines. From integral
# to floating point and decimal, between decimals (both round HALF_UP), date <-> timestamp in
# the session time zone, strings to dates; not from floating point or decimal to integral
# (Spark truncates, DuckDB rounds), nor timestamps to strings (different text).
_CASTS: dict[str, tuple[str, ...]] = {
    "TINYINT": ("int",),
    "SMALLINT": ("int",),
    "INT": ("int",),
    "BIGINT": ("int",),
    "FLOAT": ("int", "float"),
    "DOUBLE": ("int", "float", "decimal"),
    "DECIMAL": ("int", "decimal"),
    "STRING": ("int", "string", "decimal", "date", "bool"),
    "DATE": ("date", "timestamp", "string"),
    "TIMESTAMP": ("date", "timestamp"),
    "BOOLEAN": ("bool",),
}

# sqlglot type -> Spark's spelling in a column name (``CAST(x AS BIGINT)``)
_TYPE_NAMES = {
    "TINYINT": "TINYINT", "SMALLINT": "SMALLINT", "INT": "INT", "BIGINT": "BIGINT", "FLOAT": "FLOAT",
    "DOUBLE": "DOUBLE", "DECIMAL": "DECIMAL", "TEXT": "STRING", "VARCHAR": "STRING", "DATE": "DATE",
    "TIMESTAMP": "TIMESTAMP", "TIMESTAMPTZ": "TIMESTAMP", "TIMESTAMPLTZ": "TIMESTAMP", "BOOLEAN": "BOOLEAN",
}

_OPERATORS = {
    "Add": "+", "Sub": "-", "Mul": "*", "EQ": "=", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=",
    "NullSafeEQ": "<=>", "And": "AND", "Or": "OR",
}


def _kind(t: Any) -> str | None:
    """An Arrow type's kind for the checks below."""
    import pyarrow as pa

    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_date32(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "list"
    if pa.types.is_map(t):
        return "map"
    return None


def _readable(t: Any, top: bool = True) -> bool:
    """Whether Spark's path and this one read a column of Arrow type ``t`` the same (a
    timestamp without a zone only at the top level: ``spark_view``)."""
    import pyarrow as pa

    kind = _kind(t)
    if kind == "timestamp_ntz" and not top:
        return False
    if kind is None:
        return False
    if kind == "timestamp" and t.tz not in ("UTC", "+00:00"):
        return False
    if kind == "struct":
        return all(_readable(t.field(i).type, False) for i in range(t.num_fields))
    if kind == "list":
        return _readable(t.value_type, False)
    if kind == "map":
        return _readable(t.key_type, False) and _readable(t.item_type, False)
    return not (pa.types.is_timestamp(t) and t.unit != "us")


class _Decline(Exception):
    """The reason a query goes to Spark."""


@dataclass
class _Scope:
    """What the checks know: the tables by alias (Arrow schemas), the names a query binds."""

    schemas: Mapping[str, Any]  # table alias (``__icesql_table_N``) -> Arrow schema
    text: str
    qualifiers: set[str] = field(default_factory=set)  # table names and aliases in FROM clauses
    ctes: set[str] = field(default_factory=set)

    def column_type(self, column: Any) -> Any:
        """The Arrow type of a column reference when every table that has such a column agrees."""
        parts = [p.name for p in column.parts]
        found = []
        for schema in self.schemas.values():
            for skip in range(len(parts)):
                t = _field_type(schema, parts[skip:])
                if t is not None and (skip == 0 or parts[skip - 1].lower() in self.qualifiers):
                    found.append(t)
                    break
        if not found or any(str(t) != str(found[0]) for t in found):
            return None
        return found[0]


def _field_type(schema: Any, path: Sequence[str]) -> Any:
    import pyarrow as pa

    fields = {f.name.lower(): f for f in schema}
    t = None
    for name in path:
        f = fields.get(name.lower())
        if f is None:
            return None
        t = f.type
        fields = {t.field(i).name.lower(): t.field(i) for i in range(t.num_fields)} if pa.types.is_struct(t) else {}
    return t


def route(sql: str, *, relations: Sequence[str], tables: Mapping[str, Any], settings: Settings,
          limit: int | None) -> Route:
    """Decide where a SELECT runs. ``sql`` is the plan's Spark SQL (tables already replaced by
    their aliases), ``tables`` each alias's Arrow schema, ``limit`` the default LIMIT."""
    if relations:
        return Route(SPARK, f"reads icesql source or view {', '.join(relations)} (Spark previews those)")
    if not settings.ansi:
        return Route(SPARK, "spark.sql.ansi.enabled is false: casts and overflows follow Spark's legacy rules")
    if settings.other:
        return Route(SPARK, f"these Spark settings may change the answer: {', '.join(settings.other)}")
    for schema in tables.values():
        for f in schema:
            if not _readable(f.type):
                return Route(SPARK, f"column {f.name} has type {f.type}, which only Spark's path reads")
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        trees = sqlglot.parse(sql, read="spark")
    except SqlglotError as e:
        return Route(SPARK, f"sqlglot does not read it ({str(e).splitlines()[0][:120]})")
    if len(trees) != 1 or not isinstance(trees[0], exp.Select | exp.Union):
        return Route(SPARK, "not a single query sqlglot reads")
    tree = trees[0]
    scope = _Scope(tables, sql)
    try:
        _check(tree, scope)
        names = _projection_names(tree, scope)
        _rewrite(tree, scope)
        if limit is not None and tree.args.get("limit") is None:
            tree.set("limit", exp.Limit(expression=exp.Literal.number(limit)))
    except _Decline as why:
        return Route(SPARK, str(why))
    try:
        text = tree.sql(dialect="duckdb")
    except SqlglotError as e:
        return Route(SPARK, f"sqlglot cannot write it for DuckDB ({e})")
    return Route(DUCKDB, "reads only connection tables with constructs DuckDB answers as Spark does", text, names)


def _check(tree: Any, scope: _Scope) -> None:
    from sqlglot import exp

    allowed = _allowed_nodes()
    for cte in tree.find_all(exp.CTE):
        scope.ctes.add(cte.alias_or_name.lower())
    for table in tree.find_all(exp.Table):
        name = table.name
        if table.args.get("db") or table.args.get("catalog") or (
            name not in scope.schemas and name.lower() not in scope.ctes
        ):
            raise _Decline(f"reads {table.sql(dialect='spark')}, which is not a connection table")
        scope.qualifiers.add(name.lower())
        if table.alias:
            scope.qualifiers.add(table.alias.lower())
    for sub in tree.find_all(exp.Subquery):
        if sub.alias:
            scope.qualifiers.add(sub.alias.lower())
    scope.qualifiers |= scope.ctes
    for node in tree.walk():
        if not isinstance(node, allowed):
            what = node.sql(dialect="spark") if isinstance(node, exp.Func) else type(node).__name__
            raise _Decline(f"uses {what[:60]}, which the fast path does not translate")
        _check_node(node, scope)


def _check_node(node: Any, scope: _Scope) -> None:
    from sqlglot import exp

    if isinstance(node, exp.Join):
        kind = (node.args.get("kind") or "").upper()
        if kind in ("SEMI", "ANTI") or node.args.get("using") is not None or node.args.get("method"):
            raise _Decline("a SEMI/ANTI, NATURAL or USING join (output columns differ)")
    elif isinstance(node, exp.Cast):  # TryCast is a Cast
        target = _type_name(node.to)
        sources = _CASTS.get(target)
        if sources is None:
            raise _Decline(f"CAST to {node.to.sql(dialect='spark')}")
        kind = _operand_kind(node.this, scope)
        if isinstance(node.this, exp.Literal) and node.this.is_string and target in ("DATE", "TIMESTAMP"):
            kind = "date"  # a typed literal: read in the session time zone by both
        if kind is None or kind not in sources:
            raise _Decline(f"{node.sql(dialect='spark')[:60]}: a cast from {kind or 'an unchecked type'} to {target}")
    elif isinstance(node, exp.Avg):
        # of integers and doubles both answer a DOUBLE; Spark sums integers as doubles and
        # DuckDB exactly, which differs only past 2^53
        kind = _operand_kind(node.this, scope)
        if kind not in ("int", "float"):
            raise _Decline(
                f"avg of {kind or 'an unchecked type'} (Spark's avg of a DECIMAL is a DECIMAL(p+4, s+4), DuckDB's a DOUBLE)"
            )
    elif isinstance(node, exp.Sum):
        kind = _operand_kind(node.this, scope)
        if kind not in ("int", "float", "decimal"):
            raise _Decline(f"sum of {kind or 'an unchecked type'}")
    elif isinstance(node, exp.Count):
        inner = node.this
        if isinstance(inner, exp.Distinct) and len(inner.expressions) != 1:
            raise _Decline("count(DISTINCT) of several columns")
    elif isinstance(node, exp.Concat | exp.DPipe):
        parts = node.expressions if isinstance(node, exp.Concat) else [node.this, node.expression]
        if any(_operand_kind(p, scope) != "string" for p in parts):
            raise _Decline("concat of a value that is not a string (Spark and DuckDB write numbers differently)")
    elif isinstance(node, exp.Like):
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string and "\\" not in pattern.this):
            raise _Decline("LIKE with a pattern that is not a plain string (Spark's default escape is \\, DuckDB has none)")
        if node.args.get("escape") is not None:
            raise _Decline("LIKE ... ESCAPE")
    elif isinstance(node, exp.ArraySize):
        if _operand_kind(node.this, scope) != "list":
            raise _Decline("size of a value that is not an array")
    elif isinstance(node, exp.Year | exp.Month | exp.Day):
        # sqlglot reads Spark's year(x) as YEAR(TsOrDsToDate(x)): DuckDB's YEAR(CAST(x AS DATE)),
        # the date in the session time zone (DuckDB's TimeZone), as Spark takes it
        inner = node.this.this if isinstance(node.this, exp.TsOrDsToDate) else node.this
        if _operand_kind(inner, scope) not in ("date", "timestamp"):
            raise _Decline(f"{node.key} of a value that is not a date or a timestamp")
    elif isinstance(node, exp.TsOrDsToDate):
        if not isinstance(node.parent, exp.Year | exp.Month | exp.Day) or node.args.get("format") is not None:
            raise _Decline("to_date")
    elif isinstance(node, exp.Trim):
        if node.args.get("expression") is not None or node.args.get("position") is not None:
            raise _Decline("TRIM with characters or a side")
    elif isinstance(node, exp.Star):
        if any(node.args.get(k) for k in node.args):
            raise _Decline("a star with EXCEPT / REPLACE / RENAME")
    elif isinstance(node, exp.Dot):
        if not isinstance(node.this, exp.Column | exp.Dot):
            raise _Decline("a field of an expression")
    elif isinstance(node, exp.Literal) and not node.is_string:
        text = node.this
        if any(c in text for c in "eE") or text.endswith(("L", "l", "D", "d", "S", "s", "Y", "y", "BD", "bd")):
            raise _Decline(f"the numeric literal {text} (Spark's literal types)")
        if len(text.replace(".", "").lstrip("0")) > 18:  # Spark: a DECIMAL; DuckDB: a HUGEINT or a DOUBLE
            raise _Decline(f"the numeric literal {text} (more digits than a BIGINT holds)")
    elif isinstance(node, exp.DataType) and node.this == exp.DataType.Type.DECIMAL:
        if len(node.expressions) != 2:
            raise _Decline("DECIMAL without precision and scale")


def _type_name(t: Any) -> str:
    name = t.this.name if hasattr(t.this, "name") else str(t.this)
    return _TYPE_NAMES.get(name, name)


def _operand_kind(node: Any, scope: _Scope) -> str | None:
    """The kind of a column reference or literal; None for what is not checked."""
    from sqlglot import exp

    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column | exp.Dot):
        column = node if isinstance(node, exp.Column) else None
        if column is None:
            return None
        t = scope.column_type(column)
        return _kind(t) if t is not None else None
    if isinstance(node, exp.Literal):
        if node.is_string:
            return "string"
        return "decimal" if "." in node.this else "int"
    if isinstance(node, exp.Cast):
        target = _type_name(node.to)
        return {"TINYINT": "int", "SMALLINT": "int", "INT": "int", "BIGINT": "int", "DOUBLE": "float",
                "FLOAT": "float", "DECIMAL": "decimal", "STRING": "string", "DATE": "date",
                "TIMESTAMP": "timestamp", "BOOLEAN": "bool"}.get(target)
    if isinstance(node, exp.Upper | exp.Lower | exp.Trim):
        return "string"
    return None


# --------------------------------------------------------------------------- names


def _projection_names(tree: Any, scope: _Scope) -> tuple[str | None, ...]:
    from sqlglot import exp

    first = tree
    while isinstance(first, exp.Union):
        first = first.this
    while isinstance(first, exp.Subquery):
        first = first.this
    if not isinstance(first, exp.Select):
        raise _Decline("a query whose first part is not a SELECT")
    names: list[str | None] = []
    stars = sum(_is_star(e) for e in first.expressions)
    if stars > 1 and stars < len(first.expressions):
        raise _Decline("several stars beside other columns (the names are matched by position)")
    if stars:
        # a star's columns keep DuckDB's names, which are Spark's only where the inner queries
        # name their columns themselves (DuckDB calls count(*) count_star(), Spark count(1))
        for inner in tree.find_all(exp.Select):
            if inner is not first and not all(isinstance(e, exp.Column | exp.Alias) or _is_star(e) for e in inner.expressions):
                raise _Decline("a star over a subquery with an unaliased expression (add an alias)")
    for e in first.expressions:
        if _is_star(e):
            names.append(None)
        elif isinstance(e, exp.Alias):
            names.append(e.alias)
        else:
            names.append(spark_name(e, scope, top=True))
    return tuple(names)


def _is_star(e: Any) -> bool:
    from sqlglot import exp

    return isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))


def spark_name(node: Any, scope: _Scope, *, top: bool = False) -> str:
    """The column name Spark gives an unaliased expression (its "pretty SQL")."""
    from sqlglot import exp

    def name(n: Any) -> str:
        return spark_name(n, scope)

    if isinstance(node, exp.Paren):
        return spark_name(node.this, scope, top=top)
    if isinstance(node, exp.Column):
        parts = [p.name for p in node.parts]
        if top:
            return parts[-1]
        while len(parts) > 1 and parts[0].lower() in scope.qualifiers:
            parts = parts[1:]
        return ".".join(parts)
    if isinstance(node, exp.Dot):
        return node.name if top else f"{name(node.this)}.{node.name}"
    if isinstance(node, exp.Literal):
        return node.this
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Null):
        return "NULL"
    op = _OPERATORS.get(type(node).__name__)
    if op is not None:
        return f"({name(node.this)} {op} {name(node.expression)})"
    if isinstance(node, exp.NEQ):
        return f"(NOT ({name(node.this)} = {name(node.expression)}))"
    if isinstance(node, exp.Neg):
        if isinstance(node.this, exp.Literal) and not node.this.is_string:
            return f"-{node.this.this}"  # Spark's parser reads -1 as one literal
        return f"(- {name(node.this)})"
    if isinstance(node, exp.Not):
        inner = node.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Is):
            return f"({name(inner.this)} IS NOT {name(inner.expression)})"
        return f"(NOT {name(inner)})"
    if isinstance(node, exp.Is):
        return f"({name(node.this)} IS {name(node.expression)})"
    if isinstance(node, exp.In):
        if node.args.get("query") is not None:
            raise _Decline("an unaliased IN (subquery) (add an alias)")
        return f"({name(node.this)} IN ({', '.join(name(e) for e in node.expressions)}))"
    if isinstance(node, exp.Between):
        return f"between({name(node.this)}, {name(node.args['low'])}, {name(node.args['high'])})"
    if isinstance(node, exp.Like):
        return f"{name(node.this)} LIKE {name(node.expression)}"
    if isinstance(node, exp.Case):
        subject = node.this
        parts = ["CASE"]
        for when in node.args.get("ifs") or []:
            cond = when.this
            text = f"({name(subject)} = {name(cond)})" if subject is not None else name(cond)
            parts.append(f"WHEN {text} THEN {name(when.args['true'])}")
        if node.args.get("default") is not None:
            parts.append(f"ELSE {name(node.args['default'])}")
        return " ".join(parts) + " END"
    if isinstance(node, exp.If):
        false = node.args.get("false")
        args = [name(node.this), name(node.args["true"])] + ([name(false)] if false is not None else [])
        return f"(IF({', '.join(args)}))"
    if isinstance(node, exp.Cast):
        child = node.this
        if top and isinstance(child, exp.Column | exp.Dot):
            return spark_name(child, scope, top=True)
        if isinstance(child, exp.Literal) and child.is_string and not top:
            raise _Decline("an unaliased typed literal (add an alias)")
        return f"CAST({name(child)} AS {_spark_type(node.to)})"
    if isinstance(node, exp.Count):
        inner = node.this
        if inner is None or isinstance(inner, exp.Star):
            return "count(1)"
        if isinstance(inner, exp.Distinct):
            return f"count(DISTINCT {', '.join(name(e) for e in inner.expressions)})"
        return f"count({name(inner)})"
    if isinstance(node, exp.Concat | exp.DPipe):
        parts = node.expressions if isinstance(node, exp.Concat) else [node.this, node.expression]
        return f"concat({', '.join(name(p) for p in parts)})"
    if isinstance(node, exp.Trim):
        return f"trim({name(node.this)})"
    if isinstance(node, exp.TsOrDsToDate):
        return name(node.this)
    if isinstance(node, exp.Func):
        written = _written_name(node, scope.text)
        if written is None:
            raise _Decline(f"an unaliased {type(node).__name__} (add an alias)")
        args = [a for a in node.args.values() if a is not None and not isinstance(a, bool | str)]
        flat: list[Any] = []
        for a in args:
            flat.extend(a if isinstance(a, list) else [a])
        return f"{written}({', '.join(name(a) for a in flat)})"
    raise _Decline(f"an unaliased {type(node).__name__} whose Spark column name is not known (add an alias)")


def _written_name(node: Any, text: str) -> str | None:
    """A function's name as the query spells it, lower case (Spark names ``ucase(v)`` so)."""
    meta = node.meta or {}
    start, end = meta.get("start"), meta.get("end")
    if start is None or end is None:
        return None
    word = text[start : end + 1]
    return word.lower() if word.replace("_", "").isalnum() else None


def _spark_type(t: Any) -> str:
    from sqlglot import exp

    name = _type_name(t)
    if t.this == exp.DataType.Type.DECIMAL:
        p, s = (e.this.this if hasattr(e.this, "this") else e.this for e in t.expressions)
        return f"DECIMAL({p},{s})"
    return name


# --------------------------------------------------------------------------- rewrites


def _rewrite(tree: Any, scope: _Scope) -> None:
    """Spark's semantics made explicit in the tree that sqlglot writes for DuckDB."""
    from sqlglot import exp

    for ordered in list(tree.find_all(exp.Ordered)):
        # Spark: NULLS FIRST ascending, NULLS LAST descending, unless the query says
        if ordered.args.get("nulls_first") is None:
            ordered.set("nulls_first", not ordered.args.get("desc"))
    for cast in list(tree.find_all(exp.Cast)):
        if not isinstance(cast, exp.TryCast) or not cast.args.get("safe"):
            # Spark's CAST under ANSI fails; sqlglot reads it as TRY_CAST (non-ANSI Spark)
            cast.replace(exp.Cast(this=cast.this, to=cast.to))
    for total in list(tree.find_all(exp.Sum)):
        t = _operand_type(total.this, scope)
        kind = _kind(t) if t is not None else None
        if kind == "int":
            total.replace(exp.Cast(this=total.copy(), to=exp.DataType.build("BIGINT")))
        elif kind == "decimal":
            precision = min(38, t.precision + 10)
            total.replace(exp.Cast(this=total.copy(), to=exp.DataType.build(f"DECIMAL({precision}, {t.scale})")))
    for fn in list(tree.find_all(exp.Upper, exp.Lower)):
        arg = fn.this.copy()
        checked = exp.Case(
            ifs=[
                exp.If(
                    this=exp.RegexpLike(this=arg.copy(), expression=exp.Literal.string("[^\\x00-\\x7F]")),
                    true=exp.Anonymous(this="error", expressions=[exp.Literal.string(_ASCII_GUARD)]),
                )
            ],
            default=type(fn)(this=arg),
        )
        fn.replace(exp.Paren(this=checked))


_ASCII_GUARD = "icesql: non-ASCII text in upper/lower, answered by Spark"


def _operand_type(node: Any, scope: _Scope) -> Any:
    from sqlglot import exp

    while isinstance(node, exp.Paren):
        node = node.this
    return scope.column_type(node) if isinstance(node, exp.Column) else None



__all__ = ["DUCKDB", "SPARK", "FastPathDeclined", "Route", "Settings", "route", "spark_name"]
