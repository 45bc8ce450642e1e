"""SELECT's fast path (``icesql.engine.select.route``: DuckDB over the tables read on the driver)
against Spark's path, in one session over the same tables.

Every query of the corpus runs twice through ``Session.execute``: once with the engine made to
take the fast path (it fails if the fast path declines) and once made to take Spark; the
results must be the same as the user gets them: column names, the Python values with their
types (``Result.rows``), and the printed table, CSV and JSON lines. The fallback corpus checks
that the queries the fast path must not answer go to Spark (EXPLAIN SELECT says so) and get
Spark's answer. The session's time zone is not UTC for part of it, nor is the process's."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import functools
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import icesql
from icesql.engine.select import route as fastpath
from icesql.repl.format import format_csv, format_json_lines, format_table
from tests.support import iceberg_tables as it

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
TYPED = "lake.ns.typed"


def _typed_rows(first: int, n: int) -> pa.Table:
    ids = list(range(first, first + n))

    def some(i: int, value: Any, every: int = 7) -> Any:
        return None if i % every == 3 else value

    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([some(i, ["alpha", "beta", " gamma ", "delta"][i % 4]) for i in ids], pa.string()),
            "d": pa.array([some(i, decimal.Decimal(i * 37 % 1000 - 300).scaleb(-2), 5) for i in ids], pa.decimal128(10, 2)),
            "x": pa.array([some(i, (i % 9 - 4) * 0.25, 6) for i in ids], pa.float64()),
            "n": pa.array([some(i, i % 4, 8) for i in ids], pa.int32()),
            # around midnight in New York and in UTC, so that the time zone decides the date
            "ts": pa.array([some(i, 1709251200_000000 + i * 5_400_000_000, 9) for i in ids], pa.timestamp("us", tz="UTC")),
            "ntz": pa.array([some(i, 1709251200_000000 + i * 3_600_000_000, 10) for i in ids], pa.timestamp("us")),
            "dt": pa.array([some(i, dt.date(2024, 2, 20) + dt.timedelta(days=i), 4) for i in ids], pa.date32()),
            "s": pa.array(
                [some(i, {"f": some(i + 1, i * 2), "g": ["x", "y"][i % 2]}) for i in ids],
                pa.struct([("f", pa.int32()), ("g", pa.string())]),
            ),
            "arr": pa.array([some(i, list(range(i % 4)) + ([None] if i % 5 == 0 else []), 6) for i in ids], pa.list_(pa.int32())),
            "m": pa.array([some(i, [("k", i), ("z", None)] if i % 2 else [], 8) for i in ids], pa.map_(pa.string(), pa.int32())),
            "flag": pa.array([some(i, i % 3 == 0, 5) for i in ids], pa.bool_()),
        }
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp("fastpath")
    s = icesql.Session(home=tmp / "home", spark=spark)
    s.execute(f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{tmp / 'wh'}')")
    catalog, _, _ = s.engine.connection_catalog("lake")
    catalog.create_namespace("ns")
    typed = catalog.create_table(("ns", "typed"), schema=_typed_rows(0, 1).schema)
    typed.append(_typed_rows(0, 24))
    first = catalog.load_table(("ns", "typed")).current_snapshot()
    time.sleep(0.01)
    catalog.load_table(("ns", "typed")).append(_typed_rows(24, 16))
    other = pa.table({"id": pa.array([1, 2, 5, 8, 50, None], pa.int64()), "name": ["one", "two", "five", None, "fifty", "none"]})
    catalog.create_table(("ns", "other"), schema=other.schema).append(other)
    # an upserted table with equality deletes, one with position deletes
    eq = it.sink_table(catalog, "eq")
    it.sink_commit(eq, 0, it.data(eq, range(10), v="a"))
    eq = catalog.load_table(("ns", "eq"))
    it.sink_commit(eq, 1, it.data(eq, [2, 3], v="b"), it.equality_deletes(eq, [2, 3, 4]))
    pos = it.sink_table(catalog, "pos", upsert=False)
    it.sink_commit(pos, 0, it.data(pos, range(12), v="p"))
    pos = catalog.load_table(("ns", "pos"))
    [data_file] = [f["file_path"] for f in pos.inspect.files().to_pylist()]
    it.sink_commit(pos, 1, (), [it.position_deletes(pos, {data_file: [0, 5, 11]})])
    spark.range(3).createOrReplaceTempView("spark_only")
    s.first_snapshot = first  # type: ignore[attr-defined]
    yield s
    s.close()


@contextlib.contextmanager
def forced(session: Any, path: str) -> Iterator[None]:
    engine = session.engine
    engine.select = functools.partial(type(engine).select, engine, path=path)
    try:
        yield
    finally:
        del engine.select


def run(session: Any, sql: str, path: str | None = None) -> Any:
    with forced(session, path) if path else contextlib.nullcontext():
        [result] = session.execute(sql)
    return result


def explain(session: Any, sql: str) -> dict[str, Any]:
    [result] = session.execute(f"EXPLAIN {sql}")
    return dict(result.rows)


def _typed(value: Any) -> Any:
    """A value with the types of everything in it (a struct's class name, too)."""
    if isinstance(value, tuple):
        return (type(value).__name__, repr(value), [_typed(v) for v in value])
    if isinstance(value, list):
        return ["list", *[_typed(v) for v in value]]
    if isinstance(value, dict):
        return ["dict", *[(_typed(k), _typed(v)) for k, v in value.items()]]
    return (type(value).__name__, repr(value))


def same(session: Any, sql: str, *, ordered: bool = True) -> Any:
    """Run ``sql`` on both paths; assert the user sees the same; the fast path's result."""
    fast = run(session, sql, fastpath.DUCKDB)
    slow = run(session, sql, fastpath.SPARK)
    assert fast.columns == slow.columns, (sql, fast.columns, slow.columns)
    fast_rows, slow_rows = [_typed(r) for r in fast.rows], [_typed(r) for r in slow.rows]
    if not ordered:
        fast_rows, slow_rows = sorted(fast_rows, key=repr), sorted(slow_rows, key=repr)
    assert fast_rows == slow_rows, (sql, fast.rows, slow.rows)
    if ordered:
        assert format_table(fast.columns, fast.rows) == format_table(slow.columns, slow.rows), sql
        assert format_csv(fast.columns, fast.rows) == format_csv(slow.columns, slow.rows), sql
        assert format_json_lines(fast.columns, fast.rows) == format_json_lines(slow.columns, slow.rows), sql
    assert (fast.message, fast.warnings) == (slow.message, slow.warnings), sql
    return fast


CORPUS = [
    # projections, the default LIMIT, NULL ordering both ways, LIMIT / OFFSET
    f"SELECT id, v, d, x, n, ts, ntz, dt, s, arr, flag FROM {TYPED} ORDER BY id",
    "SELECT * FROM lake.ns.other ORDER BY id",
    f"SELECT id, v, d, x FROM {TYPED} ORDER BY v, id",
    f"SELECT id, v FROM {TYPED} ORDER BY v DESC, id DESC",
    f"SELECT id, x FROM {TYPED} ORDER BY x ASC NULLS LAST, id DESC NULLS FIRST",
    f"SELECT id, d FROM {TYPED} ORDER BY d DESC NULLS FIRST, id LIMIT 7",
    f"SELECT id FROM {TYPED} ORDER BY id LIMIT 5 OFFSET 3",
    f"SELECT v FROM {TYPED} ORDER BY 1 LIMIT 3",
    f"SELECT DISTINCT v FROM {TYPED} ORDER BY v",
    # aggregates: count, sum, avg over doubles and integers, min/max, GROUP BY, HAVING
    f"SELECT count(*), count(v), count(DISTINCT v), sum(id), sum(n), sum(d), avg(x), avg(n), min(d), max(d) FROM {TYPED}",
    f"SELECT min(ts), max(ts), min(ntz), max(dt), min(v), max(v), sum(x) FROM {TYPED}",
    f"SELECT v, count(*) AS rows, sum(d) AS total, avg(x), max(id) FROM {TYPED} GROUP BY v ORDER BY v",
    f"SELECT v, n, sum(x) FROM {TYPED} GROUP BY v, n HAVING count(*) > 1 ORDER BY v, n",
    f"SELECT flag, count(*) FROM {TYPED} GROUP BY 1 ORDER BY 1",
    # WHERE with IN, BETWEEN, LIKE, IS NULL, NOT, comparisons
    f"SELECT id FROM {TYPED} WHERE id IN (1, 2, 3, 30) AND x BETWEEN -1 AND 1 ORDER BY id",
    f"SELECT id, v FROM {TYPED} WHERE v LIKE 'a%' OR v LIKE '%mm%' OR v LIKE '_elta' ORDER BY id",
    f"SELECT id FROM {TYPED} WHERE v IS NULL OR d IS NULL ORDER BY id",
    f"SELECT id FROM {TYPED} WHERE v IS NOT NULL AND NOT flag AND id NOT IN (4, 5) ORDER BY id",
    f"SELECT id, id IN (1, 2), x BETWEEN 0 AND 1, v LIKE 'b%', v IS NULL, id <> 3, id <=> NULL, NOT flag FROM {TYPED} ORDER BY id",
    f"SELECT id FROM {TYPED} WHERE d >= 1.5 AND d < 3 AND ts >= TIMESTAMP '2024-03-01 12:00:00' ORDER BY id",
    f"SELECT id FROM {TYPED} WHERE dt = DATE '2024-03-01' OR dt BETWEEN DATE '2024-03-20' AND DATE '2024-03-22' ORDER BY id",
    # CASE, IF, COALESCE, arithmetic
    f"SELECT id, CASE WHEN id > 20 THEN 'big' WHEN id > 5 THEN 'mid' ELSE 'small' END, CASE v WHEN 'beta' THEN 1 ELSE 0 END FROM {TYPED} ORDER BY id",
    f"SELECT id, if(flag, 1, 0), coalesce(v, 'none'), nvl(n, -1), id + 1, id * 2 - n, -x, abs(x) FROM {TYPED} ORDER BY id",
    # CAST
    f"SELECT id, CAST(id AS STRING), CAST(id AS DOUBLE), CAST(n AS BIGINT), CAST(d AS DECIMAL(12, 3)), CAST(d AS DOUBLE) FROM {TYPED} ORDER BY id",
    f"SELECT id, CAST(ts AS DATE), CAST(dt AS TIMESTAMP), CAST(id AS DECIMAL(20, 2)), CAST(d AS STRING), CAST('2024-01-02' AS DATE) AS day FROM {TYPED} ORDER BY id",
    # string functions
    f"SELECT id, upper(v), lower(v), ucase(v), length(v), trim(v), concat(v, '-x'), v || '!', concat(v, v) FROM {TYPED} ORDER BY id",
    f"SELECT upper(v) AS u, count(*) FROM {TYPED} GROUP BY upper(v) ORDER BY u",
    # decimals: precision and scale of results
    f"SELECT id, d + 1, d - 0.5, d * 2, d * d, d + x, d * n FROM {TYPED} ORDER BY id",
    f"SELECT min(d * d), max(-d), min(d + 0.001), max(d * 2) FROM {TYPED}",
    # timestamps with and without a zone, dates
    f"SELECT id, ts, ntz, dt, year(ts), month(ts), day(ts), year(dt), month(dt), day(dt) FROM {TYPED} ORDER BY id",
    f"SELECT CAST(ts AS DATE) AS day, count(*) FROM {TYPED} GROUP BY CAST(ts AS DATE) ORDER BY day",
    # nested fields
    f"SELECT id, s, s.f, s.g, arr, size(arr) FROM {TYPED} ORDER BY id",
    f"SELECT s.g, sum(s.f) AS f FROM {TYPED} WHERE s.f > 4 GROUP BY s.g ORDER BY s.g",
    f"SELECT t.s.f + 1 AS next, upper(t.s.g) FROM {TYPED} t ORDER BY t.id",
    # joins of two connection tables, subqueries, CTEs, UNION
    f"SELECT t.id, o.name, t.v FROM {TYPED} t JOIN lake.ns.other o ON t.id = o.id ORDER BY t.id",
    f"SELECT o.id, o.name, t.v FROM lake.ns.other o LEFT JOIN {TYPED} t ON t.id = o.id ORDER BY o.id, t.v",
    f"SELECT a.*, b.* FROM (SELECT id, v, d, ts, s, arr FROM {TYPED}) a JOIN lake.ns.other b ON a.id = b.id ORDER BY a.id",
    f"SELECT o.name, count(t.id) AS n FROM lake.ns.other o FULL OUTER JOIN {TYPED} t ON t.id = o.id GROUP BY o.name ORDER BY o.name",
    f"WITH big AS (SELECT id, d FROM {TYPED} WHERE id > 10) SELECT count(*), sum(d) FROM big",
    f"SELECT q.v, q.total FROM (SELECT v, sum(d) AS total FROM {TYPED} GROUP BY v) q ORDER BY q.total DESC",
    f"SELECT id FROM {TYPED} WHERE id < 3 UNION ALL SELECT id FROM lake.ns.other ORDER BY id",
    f"SELECT id FROM {TYPED} WHERE id IN (SELECT id FROM lake.ns.other) ORDER BY id",
    # upserted tables: equality deletes, position deletes
    "SELECT * FROM lake.ns.eq ORDER BY id",
    "SELECT v, count(*) FROM lake.ns.eq GROUP BY v ORDER BY v",
    "SELECT * FROM lake.ns.pos ORDER BY id",
    "SELECT count(*), min(id), max(id) FROM lake.ns.pos",
    # no table at all
    "SELECT 1, 'x', 1.5, true, NULL, 1 + 2 AS three",
]


@pytest.mark.parametrize("sql", CORPUS)
def test_the_fast_path_answers_as_spark_does(world: Any, sql: str) -> None:
    plan = explain(world, sql)
    assert plan["path"] == "duckdb", plan["reason"]
    same(world, sql)


def test_time_travel_to_an_older_snapshot(world: Any) -> None:
    first = world.first_snapshot
    by_id = f"SELECT count(*), max(id), sum(d) FROM {TYPED} FOR VERSION AS OF {first.snapshot_id}"
    assert explain(world, by_id)["path"] == "duckdb"
    assert same(world, by_id).rows[0][:2] == (24, 23)  # the first append only
    at = dt.datetime.fromtimestamp(first.timestamp_ms / 1000, dt.timezone.utc).isoformat()
    same(world, f"SELECT id, v FROM {TYPED} FOR TIMESTAMP AS OF '{at}' ORDER BY id DESC LIMIT 4")
    same(world, f"SELECT a.id FROM {TYPED} FOR VERSION AS OF {first.snapshot_id} a JOIN {TYPED} b ON a.id = b.id + 20 ORDER BY 1")


@pytest.fixture
def new_york(world: Any, spark: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Spark's session time zone New York, the process's (where PySpark turns timestamps into
    datetimes) Kolkata; both back afterwards."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT id, ts, ntz, CAST(ts AS DATE), year(ts), month(ts), day(ts) FROM {TYPED} ORDER BY id",
        f"SELECT CAST(ts AS DATE) AS day, count(*), min(ts) FROM {TYPED} GROUP BY CAST(ts AS DATE) ORDER BY day",
        f"SELECT id FROM {TYPED} WHERE ts >= TIMESTAMP '2024-03-01 12:00:00' AND ts < TIMESTAMP '2024-03-02 00:00:00' ORDER BY id",
        f"SELECT id, CAST(dt AS TIMESTAMP) FROM {TYPED} ORDER BY id",
    ],
)
def test_timestamps_in_a_session_time_zone_that_is_not_utc(world: Any, new_york: None, sql: str) -> None:
    assert explain(world, sql)["path"] == "duckdb"
    same(world, sql)


FALLBACKS = [
    (f"SELECT avg(d) FROM {TYPED}", "avg of decimal"),
    (f"SELECT id / 2 FROM {TYPED} ORDER BY id", "Div"),
    (f"SELECT id % 3 FROM {TYPED} ORDER BY id", "Mod"),
    (f"SELECT id, row_number() OVER (ORDER BY id) FROM {TYPED} ORDER BY id", "Window"),
    (f"SELECT substring(v, 0, 2) FROM {TYPED} ORDER BY id", "SUBSTRING"),
    (f"SELECT CAST(x AS INT) FROM {TYPED} ORDER BY id", "a cast from float to INT"),
    (f"SELECT CAST(ts AS STRING) FROM {TYPED} ORDER BY id", "a cast from timestamp to STRING"),
    (f"SELECT concat(v, id) FROM {TYPED} ORDER BY id", "concat of a value that is not a string"),
    (f"SELECT date_format(ts, 'yyyy-MM') FROM {TYPED} ORDER BY id", "DATE_FORMAT"),
    (f"SELECT id, arr[0] FROM {TYPED} WHERE size(arr) > 0 ORDER BY id", "Bracket"),
    (f"SELECT * FROM {TYPED} t JOIN lake.ns.other USING (id) ORDER BY id", "USING"),
    ("SELECT * FROM spark_only ORDER BY id", "not a connection table"),
]


@pytest.mark.parametrize(("sql", "reason"), FALLBACKS)
def test_what_the_fast_path_leaves_to_spark(world: Any, sql: str, reason: str) -> None:
    plan = explain(world, sql)
    assert plan["path"] == "spark" and reason in plan["reason"], plan
    assert "duckdb sql" not in plan
    auto, slow = run(world, sql), run(world, sql, fastpath.SPARK)
    assert (auto.columns, auto.rows) == (slow.columns, slow.rows)


def test_a_map_in_the_result_goes_to_spark_at_run_time(world: Any) -> None:
    sql = f"SELECT id, m FROM {TYPED} ORDER BY id"
    assert explain(world, sql)["path"] == "duckdb"
    with pytest.raises(fastpath.FastPathDeclined, match="map"):
        run(world, sql, fastpath.DUCKDB)
    auto, slow = run(world, sql), run(world, sql, fastpath.SPARK)
    assert (auto.columns, auto.rows) == (slow.columns, slow.rows)


def test_non_ascii_text_in_upper_goes_to_spark_at_run_time(world: Any, caplog: pytest.LogCaptureFixture) -> None:
    catalog, _, _ = world.engine.connection_catalog("lake")
    words = pa.table({"w": ["straße", "abc", None]})
    catalog.create_table(("ns", "words"), schema=words.schema).append(words)
    sql = "SELECT w, upper(w), lower(w) FROM lake.ns.words ORDER BY w"
    assert explain(world, sql)["path"] == "duckdb"
    with caplog.at_level("DEBUG", logger="icesql.select"):
        got = run(world, sql)
    assert "DuckDB declined at run time" in caplog.text and "non-ASCII" in caplog.text
    assert got.rows == ((None, None, None), ("abc", "ABC", "abc"), ("straße", "STRASSE", "straße"))  # Java's ß -> SS
    ascii_only = "SELECT upper(w) AS u FROM lake.ns.words WHERE w = 'abc'"
    assert same(world, ascii_only).rows == (("ABC",),)


def test_a_source_or_view_goes_to_spark(world: Any) -> None:
    world.execute("CREATE SOURCE IF NOT EXISTS g FROM GENERATOR (ROWS PER SECOND = 1, SCHEMA = 'id BIGINT')")
    plan = explain(world, f"SELECT g.id, t.v FROM g JOIN {TYPED} t ON g.id = t.id ORDER BY g.id LIMIT 3")
    assert plan["path"] == "spark" and "source or view g" in plan["reason"]


def test_rows_are_kept_between_queries_until_the_snapshot_changes(world: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from icesql.engine.select import tables as table_reader

    catalog, _, _ = world.engine.connection_catalog("lake")
    kept = it.sink_table(catalog, "kept", upsert=False)
    it.sink_commit(kept, 0, it.data(kept, range(3)))
    reads: list[int] = []
    real = table_reader.read_rows

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(table_reader, "read_rows", counted)
    assert run(world, "SELECT count(*) FROM lake.ns.kept").rows == ((3,),)
    assert run(world, "SELECT max(id) FROM lake.ns.kept").rows == ((2,),)
    assert len(reads) == 1  # the second query read nothing
    it.sink_commit(catalog.load_table(("ns", "kept")), 1, it.data(catalog.load_table(("ns", "kept")), [7]))
    assert run(world, "SELECT max(id) FROM lake.ns.kept").rows == ((7,),)  # the new snapshot, read once
    assert len(reads) == 2


def test_exec_answers_without_importing_pyspark_and_says_which_path(world: Any, tmp_path: Path) -> None:
    home = world.home
    probe = (
        "import sys\nfrom icesql.cli import main\n"
        f"rc = main(['exec', '-v', '--format', 'csv', '--home', {str(home)!r}, "
        f"'SELECT id, v FROM {TYPED} WHERE id < 3 ORDER BY id; EXPLAIN SELECT count(*) FROM {TYPED}'])\n"
        "print('RC', rc, 'PYSPARK', sorted(m for m in ('pyspark', 'py4j', 'pandas') if m in sys.modules))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert "RC 0 PYSPARK []" in p.stdout, p.stdout + p.stderr
    assert p.stdout.startswith("id,v\n0,alpha\n1,beta\n2, gamma \n"), p.stdout
    assert "SELECT on duckdb" in p.stderr, p.stderr
