"""The SELECT fast path's routing and translation, without Spark: EXPLAIN SELECT through the
front-end, and what ``fastpath.route`` makes of Spark SQL (the differential test against Spark
is ``test_select_fastpath.py``)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from icesql.analyzer import MemoryCatalog, analyze
from icesql.engine.select import duck
from icesql.engine.select import route as fastpath
from icesql.plan import CatalogConnectionPlan, CatalogType, ExplainSelectPlan
from icesql.syntax.parser import parse, parse_one
from icesql.syntax.printer import to_sql

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("v", pa.string()),
        ("d", pa.decimal128(10, 2)),
        ("x", pa.float64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("s", pa.struct([("f", pa.int32())])),
    ]
)


def route(sql: str, limit: int | None = None, **settings: object) -> fastpath.Route:
    return fastpath.route(sql, relations=(), tables={"t0": SCHEMA}, settings=fastpath.Settings(**settings), limit=limit)  # type: ignore[arg-type]


def test_explain_select_parses_prints_and_analyses_without_running() -> None:
    text = "EXPLAIN SELECT * FROM lake.ns.t FOR VERSION AS OF 7 WHERE v = 'a;b' -- c"
    [stmt] = parse(text)
    assert parse(to_sql(stmt)) == [stmt]
    catalog = MemoryCatalog()
    catalog.add(CatalogConnectionPlan("lake", CatalogType.LOCAL, warehouse="/wh"))
    plan = analyze(parse_one("EXPLAIN SELECT * FROM lake.ns.t FOR VERSION AS OF 7"), catalog).plan
    assert isinstance(plan, ExplainSelectPlan)
    [ref] = plan.select.tables
    assert (ref.identifier, ref.snapshot_id, plan.select.limit) == ("lake.ns.t", 7, 100)


def test_order_by_states_sparks_null_ordering_and_the_default_limit() -> None:
    r = route("SELECT id FROM t0 ORDER BY v, x DESC, d ASC NULLS LAST, id DESC NULLS FIRST", limit=100)
    assert r.fast
    assert r.sql == (
        "SELECT id FROM t0 ORDER BY v NULLS FIRST, x DESC, d ASC, id DESC NULLS FIRST LIMIT 100"
    ), r.sql  # DuckDB's default (set on the connection) is NULLS LAST both ways
    assert route("SELECT id FROM t0 LIMIT 5", limit=None).sql == "SELECT id FROM t0 LIMIT 5"


def test_casts_fail_as_ansi_spark_does_and_sums_keep_sparks_type() -> None:
    r = route("SELECT CAST(id AS STRING), try_cast(v AS DATE), sum(id), sum(d) FROM t0")
    assert r.fast and r.sql is not None
    assert "CAST(id AS TEXT)" in r.sql and "TRY_CAST(v AS DATE)" in r.sql
    assert "CAST(SUM(id) AS BIGINT)" in r.sql and "CAST(SUM(d) AS DECIMAL(20, 2))" in r.sql


def test_spark_column_names() -> None:
    r = route(
        "SELECT count(*), t0.id, s.f, id + 1, -1, -x, v IS NOT NULL, v LIKE 'a%', id BETWEEN 1 AND 2, "
        "CASE WHEN id > 1 THEN 'a' ELSE 'b' END, UCASE(v), v || 'x', CAST(id AS STRING), "
        "CAST(d AS DECIMAL(12, 3)) + 1, id <> 2, id AS k, * FROM t0"
    )
    assert r.names == (
        "count(1)", "id", "f", "(id + 1)", "-1", "(- x)", "(v IS NOT NULL)", "v LIKE a%", "between(id, 1, 2)",
        "CASE WHEN (id > 1) THEN a ELSE b END", "ucase(v)", "concat(v, x)", "id", "(CAST(d AS DECIMAL(12,3)) + 1)",
        "(NOT (id = 2))", "k", None,
    )
    assert duck.column_names(["a", "b", "id", "v"], ("n", None, "z")) == ("n", "b", "id", "z")


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT id / 2 FROM t0", "Div"),
        ("SELECT avg(d) FROM t0", "avg of decimal"),
        ("SELECT CAST(x AS INT) FROM t0", "a cast from float to INT"),
        ("SELECT CAST(ts AS STRING) FROM t0", "a cast from timestamp to STRING"),
        ("SELECT * FROM somewhere_else", "not a connection table"),
        ("SELECT * FROM t0 JOIN t0 USING (id)", "USING"),
        ("SELECT v LIKE 'a\\\\_b' FROM t0", "LIKE"),
        ("SELECT 1e3", "numeric literal"),
        ("SELECT sum(x * 2) FROM t0", "sum of an unchecked type"),
        ("SELECT id, sum(id) OVER (ORDER BY id) FROM t0", "Window"),
        ("SELECT explode(array(1, 2))", "EXPLODE"),
        ("SELEC 1", "sqlglot"),
        ("SELECT * FROM (SELECT count(*) FROM t0) q", "a star over a subquery"),
        ("WITH c AS (SELECT id + 1 FROM t0) SELECT * FROM c", "a star over a subquery"),
    ],
)
def test_what_goes_to_spark(sql: str, reason: str) -> None:
    r = route(sql)
    assert r.path == fastpath.SPARK and reason.lower() in r.reason.lower(), r


def test_settings_that_send_everything_to_spark() -> None:
    assert "ansi" in route("SELECT 1", ansi=False).reason
    conf = fastpath.Settings.from_conf({"spark.sql.caseSensitive": "true", "spark.sql.shuffle.partitions": "4"})
    assert conf.other == ("spark.sql.caseSensitive",)
    assert fastpath.Settings.from_conf({"spark.sql.session.timeZone": "Asia/Tokyo"}) == fastpath.Settings("Asia/Tokyo")
    weird = fastpath.route("SELECT 1", relations=(), tables={"t0": pa.schema([("t", pa.time64("us"))])},
                           settings=fastpath.Settings(), limit=None)
    assert weird.path == fastpath.SPARK and "time64" in weird.reason


def test_values_come_back_as_pyspark_returns_them(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    try:
        t = pa.table(
            {
                "ts": pa.array([0, None], pa.timestamp("us", tz="UTC")),
                "ntz": pa.array([1, 2], pa.timestamp("us")),
                "s": pa.array([{"f": 1, "l": [1, None]}, None], pa.struct([("f", pa.int32()), ("l", pa.list_(pa.int64()))])),
            }
        )
        from icesql.engine.base.values import to_python

        rows = to_python(t)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert rows[0][0] == dt.datetime(1970, 1, 1, 5, 30) and rows[1][0] is None  # local time, naive
    assert rows[0][1] == dt.datetime(1970, 1, 1, 0, 0, 0, 1)  # wall time
    assert repr(rows[0][2]) == "Row(f=1, l=[1, None])" and rows[0][2].asDict() == {"f": 1, "l": [1, None]}
    assert rows[1][2] is None
