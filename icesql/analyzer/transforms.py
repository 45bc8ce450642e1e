"""PARTITION BY: transforms resolved, checked against the Iceberg spec and the source columns.

Each transform knows the Iceberg type families it accepts (as pyiceberg's transform classes
do). Spark has no ``time`` or ``uuid`` type, but they are listed for completeness. Partition
field names follow the Iceberg Java convention (``PartitionSpec.Builder``): identity keeps the
column name, the others append ``_bucket``, ``_trunc``, ``_year``, ``_month``, ``_day``,
``_hour`` or ``_null`` (void).
"""

from __future__ import annotations

from dataclasses import dataclass

from icesql.analyzer.diagnostics import Context, did_you_mean, find_column, one_of
from icesql.analyzer.schema import iceberg_family
from icesql.plan import Column, PartitionFieldPlan, Transform
from icesql.syntax.ast import Ident, NumberLit, PartitionArg, PartitionField

MAX_INT = 2**31 - 1

_SPELLINGS: dict[str, Transform] = {
    "identity": Transform.IDENTITY,
    "bucket": Transform.BUCKET,
    "truncate": Transform.TRUNCATE,
    "year": Transform.YEAR,
    "years": Transform.YEAR,
    "month": Transform.MONTH,
    "months": Transform.MONTH,
    "day": Transform.DAY,
    "days": Transform.DAY,
    "hour": Transform.HOUR,
    "hours": Transform.HOUR,
    "void": Transform.VOID,
}

_PRIMITIVE = frozenset(
    {
        "boolean",
        "int",
        "long",
        "float",
        "double",
        "decimal",
        "date",
        "time",
        "timestamp",
        "timestamptz",
        "string",
        "binary",
        "uuid",
        "fixed",
    }
)
_TIMESTAMPS = frozenset({"timestamp", "timestamptz"})
_DATES = frozenset({"date"}) | _TIMESTAMPS


@dataclass(frozen=True)
class _Rule:
    accepts: frozenset[str] | None  # Iceberg type families; None: any type
    takes_param: bool
    suffix: str
    accepts_text: str


_RULES: dict[Transform, _Rule] = {
    Transform.IDENTITY: _Rule(_PRIMITIVE, False, "", "a primitive (not a struct, array or map)"),
    # every primitive but boolean and floating point (Iceberg spec, bucket transform)
    Transform.BUCKET: _Rule(
        _PRIMITIVE - {"boolean", "float", "double"},
        True,
        "_bucket",
        "int, bigint, decimal, date, timestamp, string or binary",
    ),
    Transform.TRUNCATE: _Rule(
        frozenset({"int", "long", "decimal", "string", "binary"}),
        True,
        "_trunc",
        "int, bigint, decimal, string or binary",
    ),
    Transform.YEAR: _Rule(_DATES, False, "_year", "a date or timestamp"),
    Transform.MONTH: _Rule(_DATES, False, "_month", "a date or timestamp"),
    Transform.DAY: _Rule(_DATES, False, "_day", "a date or timestamp"),
    Transform.HOUR: _Rule(_TIMESTAMPS, False, "_hour", "a timestamp"),
    Transform.VOID: _Rule(None, False, "_null", "any type"),
}
_TIME = frozenset({Transform.YEAR, Transform.MONTH, Transform.DAY, Transform.HOUR})


def analyze_partition(
    ctx: Context, fields: tuple[PartitionField, ...], columns: tuple[Column, ...] | None
) -> tuple[PartitionFieldPlan, ...]:
    """Resolve every field; ``columns`` None means the source's schema is unknown (static checks only)."""
    by_name = {c.name.lower(): c for c in columns} if columns is not None else None
    out: list[PartitionFieldPlan] = []
    seen_fields: dict[tuple[Transform, str, int | None], PartitionField] = {}
    seen_names: dict[str, PartitionField] = {}
    time_on: dict[str, tuple[Transform, PartitionField]] = {}
    for pf in fields:
        transform, col_ident, param = _resolve(ctx, pf)
        col_name = col_ident.name
        if by_name is not None:
            column = find_column(
                ctx, by_name, col_ident, col_name, f"partition column {col_name} does not exist in the source"
            )
            col_name = column.name
            family = iceberg_family(column.type)
            rule = _RULES[transform]
            if rule.accepts is not None and family not in rule.accepts:
                raise ctx.error(
                    f"{transform.value} cannot partition column {col_name} of type {column.type}",
                    pf,
                    f"{transform.value} needs {rule.accepts_text}",
                )
        key = (transform, col_name.lower(), param)
        if key in seen_fields:
            raise ctx.error(
                f"duplicate partition field {_describe(transform, col_name, param)}",
                pf,
                "list each field once",
            )
        seen_fields[key] = pf
        if transform in _TIME:
            prior = time_on.get(col_name.lower())
            if prior is not None:
                raise ctx.error(
                    f"column {col_name} is already partitioned by {prior[0].value}; "
                    f"{transform.value}({col_name}) would be redundant",
                    pf,
                    "use one time transform (year, month, day or hour) per column",
                )
            time_on[col_name.lower()] = (transform, pf)
        name = col_name + _RULES[transform].suffix
        if name.lower() in seen_names:
            raise ctx.error(
                f"partition field name {name} is used twice",
                pf,
                f"{_describe(transform, col_name, param)} and an earlier field are both named {name}",
            )
        if by_name is not None and transform is not Transform.IDENTITY and name.lower() in by_name:
            # Iceberg refuses a partition name equal to a schema field unless it is that field's identity
            raise ctx.error(
                f"partition field name {name} clashes with the column {by_name[name.lower()].name}",
                pf,
                "Iceberg names this partition field after the column; rename the column in a view",
            )
        seen_names[name.lower()] = pf
        out.append(PartitionFieldPlan(col_name, transform, param, name))
    return tuple(out)


def _describe(transform: Transform, column: str, param: int | None) -> str:
    return PartitionFieldPlan(column, transform, param).describe()


def _resolve(ctx: Context, pf: PartitionField) -> tuple[Transform, Ident, int | None]:
    if pf.transform is None:
        arg = pf.args[0] if pf.args else None
        if arg is None or arg.column is None:
            raise ctx.error("expected a column or a transform", pf)
        return Transform.IDENTITY, arg.column, None
    word = pf.transform.name.lower()
    transform = _SPELLINGS.get(word)
    if transform is None:
        hint = did_you_mean(word, list(_SPELLINGS))
        raise ctx.error(
            f"unknown partition transform {pf.transform.name}",
            pf.transform,
            (hint.lower() if hint else None)
            or "transforms: identity, bucket(N, col), truncate(W, col), year, month, day, hour, void",
        )
    rule = _RULES[transform]
    name = transform.value
    if not rule.takes_param:
        if len(pf.args) != 1:
            raise ctx.error(
                f"{name} takes one argument (a column), found {len(pf.args)}", pf, f"write {name}(column)"
            )
        arg = pf.args[0]
        if arg.column is None:
            raise ctx.error(f"{name} expects a column, found {_arg_text(arg)}", arg, f"write {name}(column)")
        return transform, arg.column, None
    letter = "N" if transform is Transform.BUCKET else "W"
    usage = f"write {name}({letter}, column), e.g. {name}({16 if letter == 'N' else 4}, id)"
    if len(pf.args) != 2:
        raise ctx.error(
            f"{name} takes two arguments ({letter} and a column), found {len(pf.args)}", pf, usage
        )
    numbers = [a for a in pf.args if a.number is not None]
    cols = [a for a in pf.args if a.column is not None]
    if len(numbers) != 1 or len(cols) != 1:
        bad = pf.args[1] if len(cols) == 2 else pf.args[0]
        what = "two columns" if len(cols) == 2 else "two numbers"
        raise ctx.error(f"{name} expects a number {letter} and a column, found {what}", bad, usage)
    num = numbers[0].number
    assert num is not None and cols[0].column is not None
    param = _positive(ctx, num, f"{name} {letter}", usage)
    return transform, cols[0].column, param


def _positive(ctx: Context, num: NumberLit, what: str, usage: str) -> int:
    value = num.value
    shown = num.text if len(num.text) <= 24 else num.text[:21] + "..."
    if not isinstance(value, int) or value <= 0:
        raise ctx.error(f"{what} must be a positive integer, found {shown}", num, usage)
    if value > MAX_INT:
        raise ctx.error(f"{what} must be at most {MAX_INT}, found {shown}", num, usage)
    return value


def _arg_text(arg: PartitionArg) -> str:
    if arg.number is not None:
        return f"number {arg.number.text}"
    return "nothing"


def check_upsert_partition(
    ctx: Context,
    fields: tuple[PartitionField, ...],
    plans: tuple[PartitionFieldPlan, ...],
    key: tuple[str, ...],
    implicit: bool = False,
) -> None:
    """In MODE UPSERT an update must never move a key between partitions (Flink's rule too).

    ``void`` is exempt: it maps every row to null, so it cannot move anything.
    """
    keys = {k.lower() for k in key}
    for pf, plan in zip(fields, plans, strict=True):
        if plan.transform is Transform.VOID:
            continue
        if plan.source_column.lower() not in keys:
            raise ctx.error(
                f"in MODE UPSERT every partition column must be part of KEY; {plan.source_column} is not"
                + (" (KEY without MODE means MODE UPSERT)" if implicit else ""),
                pf,
                f"add {plan.source_column} to KEY ({', '.join(key)}), or partition by a key column",
            )


def transform_names() -> str:
    return one_of(sorted(_SPELLINGS), quote="")
