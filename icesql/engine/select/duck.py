"""Running a routed SELECT on DuckDB: one in-process DuckDB session per engine in the Spark session's
time zone, the tables' Arrow rows registered as views the way Spark shows them, and the result's
column names spelled as Spark would.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from icesql.engine.base.values import to_python
from icesql.engine.select.route import FastPathDeclined, Settings


def without_pandas() -> None:
    """Import pyarrow with its one optional look for pandas answered "absent" (as the FILES
    source's runner does, ``files.source``): that import costs 0.3-0.7 s of a fresh ``icesql
    exec`` and the fast path never converts to pandas; whatever asks pyarrow for pandas later
    (``to_pandas``, Spark's path) still gets it imported then."""
    import importlib.abc

    if "pandas" in sys.modules or "pyarrow" in sys.modules:
        return

    class _NoPandas(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
            if name == "pandas" or name.startswith("pandas."):
                raise ImportError("not needed by the SELECT fast path")
            return None

    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        import pyarrow as pa

        pa.array([0])
        import pyarrow.dataset  # noqa: F401  # its module-level look for pandas, answered now
    except ImportError:
        pass
    finally:
        sys.meta_path.remove(finder)


class DuckSession:
    """One in-process DuckDB for a session's fast-path queries (created on the first)."""

    def __init__(self, settings: Settings) -> None:
        import duckdb

        self.settings = settings
        self._lock = threading.Lock()
        self.con = duckdb.connect(":memory:")
        # sqlglot's DuckDB dialect writes ORDER BY keys assuming this default (it leaves out the
        # NULLS LAST it implies), so the connection states it rather than trusting the build's
        self.con.execute("SET default_null_order = 'nulls_last'")
        self.con.execute(f"SET TimeZone = '{settings.time_zone.replace(chr(39), '')}'")
        self.con.execute("SET threads = 2")

    def run(self, sql: str, tables: Mapping[str, Any], names: Sequence[str | None]) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        import duckdb

        with self._lock:
            try:
                for alias, arrow in tables.items():
                    self.con.register(alias, spark_view(arrow, self.settings.time_zone))
                answer = self.con.execute(sql)
                # to_arrow_table since DuckDB 1.4; fetch_arrow_table before (deprecated after)
                result = answer.to_arrow_table() if hasattr(answer, "to_arrow_table") else answer.fetch_arrow_table()
            except duckdb.Error as e:
                raise FastPathDeclined(str(e).splitlines()[0][:200]) from None
            finally:
                for alias in tables:
                    try:
                        self.con.unregister(alias)
                    except duckdb.Error:
                        pass
        for f in result.schema:
            if has_map(f.type):
                # Spark's path hands a map's entries over in an order of its own (not the
                # file's), and the printed dict shows it
                raise FastPathDeclined(f"column {f.name} is a map (Spark orders its entries its own way)")
            if has_binary(f.type):
                raise FastPathDeclined(f"column {f.name} is binary (not compared with Spark's values yet)")
        return column_names(result.column_names, names), to_python(result)

    def close(self) -> None:
        try:
            self.con.close()
        except Exception:
            pass


def spark_view(table: Any, time_zone: str) -> Any:
    """A table as Spark's path sees it: ``spark.createDataFrame`` takes an Arrow timestamp
    without a zone (an Iceberg ``timestamp``) as a TIMESTAMP, its wall time read in the session
    time zone, and every function and the value PySpark returns follow from that; the same
    instant here makes DuckDB see what Spark sees."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for i, f in enumerate(table.schema):
        if pa.types.is_timestamp(f.type) and f.type.tz is None:
            local = pc.assume_timezone(table.column(i), time_zone, ambiguous="earliest", nonexistent="latest")
            table = table.set_column(i, pa.field(f.name, pa.timestamp("us", tz="UTC"), f.nullable), local.cast(pa.timestamp("us", tz="UTC")))
    return table


def has_binary(t: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return True
    if pa.types.is_struct(t):
        return any(has_binary(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return has_binary(t.value_type)
    return False


def has_map(t: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_map(t):
        return True
    if pa.types.is_struct(t):
        return any(has_map(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return has_map(t.value_type)
    return False


def column_names(duck: Sequence[str], names: Sequence[str | None]) -> tuple[str, ...]:
    """Spark's names of the result's columns: ``names`` (one per projection, None for a star)
    matched by position with DuckDB's (``duck``), a star's columns keeping DuckDB's names, which
    are the tables' (there is at most one star beside other projections)."""
    if None not in names:
        return tuple(str(n) for n in names)
    if all(n is None for n in names):
        return tuple(duck)
    out: list[str] = []
    width = len(duck) - (len(names) - 1)  # the star's columns, when it is the only one
    pos = 0
    for n in names:
        if n is None:
            take = width if len(names) > 1 else len(duck)
            out.extend(duck[pos : pos + take])
            pos += take
        else:
            out.append(n)
            pos += 1
    return tuple(out) if len(out) == len(duck) else tuple(duck)
