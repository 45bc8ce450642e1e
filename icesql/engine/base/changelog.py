"""The changelog's vocabulary: the columns a change carries (operation and position), the order that
picks the last change per KEY, and the rules for a null KEY.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from icesql.engine.base.arrays import row_numbers
from icesql.engine.base.wire import marked_message, short_path
from icesql.errors import ExecutionError

CORRUPT = "_corrupt_record"
OP = "__op"
SEQ = "__seq"
FILE = "__file"
BLK = "__blk"
LINE = "__line"
POSITION = (SEQ, FILE, BLK, LINE)
CHANGELOG_COLUMNS = (OP, *POSITION)
INTERNAL_COLUMNS = frozenset((CORRUPT, *CHANGELOG_COLUMNS))


def last_per_key(t: Any, key: Sequence[str]) -> Any:
    """The last change of each key, in the changelog's order (nulls first, as on Spark's path)."""

    names = t.column_names
    order = [c for c in POSITION if c in names]
    if order:
        try:  # pyarrow >= 25 takes the null placement per key (the option is deprecated there)
            t = t.sort_by([(c, "ascending", "at_start") for c in order])
        except (TypeError, ValueError):  # an older pyarrow: two-element keys only
            t = t.sort_by([(c, "ascending") for c in order], null_placement="at_start")
    t = t.append_column("__i", row_numbers(t.num_rows))
    last = t.group_by(list(key), use_threads=False).aggregate([("__i", "max")]).column("__i_max")
    return t.take(last).drop_columns(["__i"])


NULL_KEY_MARKER = "ICESQL-NULL-KEY:"


class NullKeyError(ExecutionError):
    """A change whose KEY has a null column reached an upsert sink with an enforced KEY."""


def drop_null_keys(b: Any, key: list[str], *, enforced: bool, sink: str, relation: str) -> Any:
    """``b`` without its changes whose KEY has a null column, and how many there were.

    An enforced KEY fails the batch instead, naming the sink, the column and where the change
    came from (a null cannot be an Iceberg identifier field, so such a change can neither be
    stored nor deleted by key)."""
    import pyarrow.compute as pc

    names = b.schema.names
    mask = None
    for k in key:
        m = pc.is_null(b.column(names.index(k)))
        mask = m if mask is None else pc.or_(mask, m)
    n = (pc.sum(mask).as_py() or 0) if mask is not None else 0
    if not n:
        return b, 0
    if enforced:
        # the first such change in file order (the batch arrives sorted by key)
        row = min(
            b.filter(mask).to_pylist(),
            key=lambda x: (str(x.get(FILE) or ""), x.get(BLK) or 0, x.get(LINE) or 0),
        )
        col = next(k for k in key if row.get(k) is None)
        where = f"a change read from '{relation}'"
        if row.get(FILE):
            path = short_path(str(row[FILE]))
            rec = f"record {int(row.get(LINE) or 0) + 1}"
            if row.get(BLK):
                rec += f" of the split at byte {row[BLK]}"
            where += f" (file '{path}', {rec})"
        raise ValueError(
            f"{NULL_KEY_MARKER}sink '{sink}': KEY column '{col}' is null in {where}; KEY columns must be non-null|END"
        )
    return b.filter(pc.invert(mask)), n


def quote_column(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def translate_null_key(exc: BaseException, key: tuple[str, ...] | list[str]) -> NullKeyError | None:
    """Turn a Spark failure raised by ``FileWriterTask`` for a null KEY into a ``NullKeyError``."""
    body = marked_message(exc, NULL_KEY_MARKER)
    if body is None:
        return None
    return NullKeyError(
        body,
        hint=f"fix the source, or declare KEY ({', '.join(key)}) NOT ENFORCED to drop changes "
        "with a null key (counted as skipped records in SHOW SINK STATUS)",
    )
