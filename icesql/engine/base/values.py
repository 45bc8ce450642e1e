"""Values as Spark hands them to Python: Row and Arrow columns converted to the Python values Spark's
collect gives (timestamps in the session's zone, maps as dicts, decimals, binaries).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any


class Row(tuple):
    """A struct value as PySpark returns it (``pyspark.sql.Row``: a tuple with field names),
    printed the same, without importing pyspark."""

    __fields__: list[str]

    def __new__(cls, names: Sequence[str], values: Sequence[Any]) -> Row:
        row = super().__new__(cls, values)
        row.__fields__ = list(names)
        return row

    def asDict(self, recursive: bool = False) -> dict[str, Any]:  # noqa: N802  # PySpark's name
        def conv(v: Any) -> Any:
            if recursive and isinstance(v, Row):
                return v.asDict(True)
            return v

        return {k: conv(v) for k, v in zip(self.__fields__, self, strict=True)}

    def __repr__(self) -> str:
        return "Row({})".format(", ".join(f"{k}={v!r}" for k, v in zip(self.__fields__, tuple(self), strict=True)))


def to_python(table: Any) -> list[tuple[Any, ...]]:
    """Arrow rows as PySpark's ``collect()`` returns them: a timestamp with a zone as a naive
    datetime in the process's local time (``datetime.fromtimestamp``), one without as its wall
    time, a struct as a ``Row``-like tuple, a map as a dict."""
    columns = [_converter(f.type) for f in table.schema]
    data = [conv(col.to_pylist() if not _needs_raw(col.type) else col) for conv, col in zip(columns, table.columns, strict=True)]
    return list(zip(*data, strict=True)) if data else []


def _needs_raw(t: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_timestamp(t) or pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t)


def _converter(t: Any) -> Callable[[Any], list[Any]]:
    """A function from a column (a Python list, or the Arrow array when ``_needs_raw``) to values."""
    import pyarrow as pa

    if pa.types.is_timestamp(t):
        def stamps(col: Any) -> list[Any]:
            micros = col.cast(pa.timestamp(t.unit, t.tz)).cast(pa.int64()) if t.unit == "us" else _micros(col)
            return [_timestamp(v, t.tz is not None) for v in micros.to_pylist()]

        return stamps
    if pa.types.is_struct(t):
        names = [t.field(i).name for i in range(t.num_fields)]
        children = [_converter(t.field(i).type) for i in range(t.num_fields)]

        def structs(col: Any) -> list[Any]:
            col = _combined(col)
            parts = [conv(_raw_or_list(col.field(i))) for i, conv in enumerate(children)]
            valid = col.is_valid().to_pylist()
            return [Row(names, vals) if ok else None for ok, *vals in zip(valid, *parts, strict=True)] if parts else [
                Row(names, ()) if ok else None for ok in valid
            ]

        return structs
    if pa.types.is_map(t):
        keys = _converter(t.key_type)
        items = _converter(t.item_type)

        def maps(col: Any) -> list[Any]:
            col = _combined(col)
            ks = keys(_raw_or_list(col.keys))
            vs = items(_raw_or_list(col.items))
            out: list[Any] = []
            offsets = col.offsets.to_pylist()
            for i, ok in enumerate(col.is_valid().to_pylist()):
                out.append(dict(zip(ks[offsets[i] : offsets[i + 1]], vs[offsets[i] : offsets[i + 1]], strict=True)) if ok else None)
            return out

        return maps
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = _converter(t.value_type)

        def lists(col: Any) -> list[Any]:
            col = _combined(col)
            values = inner(_raw_or_list(col.flatten()))
            offsets = col.offsets.to_pylist()
            base = offsets[0] if offsets else 0
            return [
                values[offsets[i] - base : offsets[i + 1] - base] if ok else None
                for i, ok in enumerate(col.is_valid().to_pylist())
            ]

        return lists
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return lambda values: [None if v is None else bytes(v) for v in values]
    return lambda values: values


def _combined(col: Any) -> Any:
    import pyarrow as pa

    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _raw_or_list(arr: Any) -> Any:
    return arr if _needs_raw(arr.type) else arr.to_pylist()


def _micros(col: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    factor = {"s": 1_000_000, "ms": 1000, "ns": None}[col.type.unit]
    raw = col.cast(pa.int64())
    if factor is None:
        return pc.divide(raw, 1000)
    return pc.multiply(raw, factor)


_EPOCH = dt.datetime(1970, 1, 1)


def _timestamp(micros: int | None, zoned: bool) -> dt.datetime | None:
    if micros is None:
        return None
    if zoned:  # PySpark's TimestampType.fromInternal
        return dt.datetime.fromtimestamp(micros // 1_000_000).replace(microsecond=micros % 1_000_000)
    return _EPOCH + dt.timedelta(microseconds=micros)  # TimestampNTZType.fromInternal
