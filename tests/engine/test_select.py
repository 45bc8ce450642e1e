"""SELECT, SHOW TABLES, DESCRIBE of a table and SHOW SNAPSHOTS through the public path:
SQL text -> ``icesql.Session`` -> Spark (one local session for the module) and the local
catalog. Sources and views are previewed as batches; the tables sinks write are read with every
delete applied and compared with what DuckDB reads; errors carry a caret and no secret."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import icesql
from icesql.errors import IcesqlError
from tests.support import iceberg_tables as it
from tests.support.pipeline_helpers import write_json_lines
from tests.support.readers import norm, read_duckdb

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def session(tmp_path: Path, spark: Any) -> Any:
    s = icesql.Session(home=tmp_path / "home", spark=spark)
    s.execute(f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{tmp_path / 'wh'}')")
    yield s
    s.close()


def select(session: Any, sql: str) -> Any:
    [result] = session.execute(sql)
    return result


def rows_of(result: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(norm(v) for v in r) for r in result.rows), key=repr)


def test_previews_of_each_source_format_and_a_view(session: Any, tmp_path: Path) -> None:
    write_json_lines(tmp_path / "j", "a.json", [{"id": i, "v": f"j{i}"} for i in range(3)])
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.csv").write_text("id,v\n1,c1\n2,c2\n")
    (tmp_path / "p").mkdir()
    pq.write_table(pa.table({"id": pa.array([7, 8], pa.int64()), "v": ["p7", "p8"]}), tmp_path / "p" / "a.parquet")
    session.execute(
        f"""
        CREATE SOURCE j FROM FILES '{tmp_path / "j"}' (FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING');
        CREATE SOURCE c FROM FILES '{tmp_path / "c"}' (FORMAT = 'csv', SCHEMA = 'id INT, v STRING', HEADER = true);
        CREATE SOURCE p FROM FILES '{tmp_path / "p"}' (FORMAT = 'parquet');
        CREATE SOURCE g FROM GENERATOR (ROWS PER SECOND = 5, SCHEMA = 'id BIGINT, name STRING');
        CREATE VIEW jv AS SELECT id * 10 AS id10, upper(v) AS v FROM j WHERE id > 0;
        """
    )
    assert rows_of(select(session, "SELECT * FROM j")) == [(0, "j0"), (1, "j1"), (2, "j2")]
    assert rows_of(select(session, "SELECT id, v FROM c")) == [(1, "c1"), (2, "c2")]
    assert rows_of(select(session, "select * from p")) == [(7, "p7"), (8, "p8")]
    assert rows_of(select(session, "SELECT * FROM jv")) == [(10, "J1"), (20, "J2")]
    # a generator yields its first rows, the ones a sink would read first; LIMIT 100 by default
    gen = select(session, "SELECT * FROM g ORDER BY id")
    assert gen.columns == ("id", "name") and len(gen.rows) == 100
    assert gen.rows[:2] == ((0, "name-0"), (1, "name-1")) and "add one to see more" in gen.warnings[0]
    limited = select(session, "SELECT * FROM g LIMIT 250")
    assert len(limited.rows) == 250 and limited.warnings == ()
    # a change feed shows its operations
    events = [
        {"op": "c", "after": {"id": 1, "v": "a"}},
        {"op": "u", "before": {"id": 1, "v": "a"}, "after": {"id": 1, "v": "b"}},
        {"op": "d", "before": {"id": 1, "v": "b"}},
    ]
    write_json_lines(tmp_path / "d", "a.json", events)
    session.execute(f"CREATE SOURCE d FROM FILES '{tmp_path / 'd'}' (FORMAT = 'debezium-json', SCHEMA = 'id BIGINT, v STRING')")
    cdc = select(session, "SELECT * FROM d")
    assert cdc.columns == ("id", "v", "__op") and rows_of(cdc) == [(1, "a", "c"), (1, "b", "d"), (1, "b", "u")]
    # a query joining a source and a view
    joined = select(session, "WITH x AS (SELECT * FROM jv) SELECT j.v, x.v AS up FROM j JOIN x ON j.id * 10 = x.id10")
    assert rows_of(joined) == [("j1", "J1"), ("j2", "J2")]


def _event(i: int, v: str = "v") -> dict[str, Any]:
    return {"id": i, "ts": f"2024-03-0{1 + i % 3}T{i % 24:02d}:15:00Z", "region": ["eu", "us"][i % 2], "v": f"{v}{i}"}


def test_sink_tables_read_as_duckdb_reads_them_with_time_travel(session: Any, tmp_path: Path) -> None:
    src = tmp_path / "events"
    write_json_lines(src, "a.json", [_event(i) for i in range(20)])
    session.execute(
        f"""
        CREATE SOURCE events FROM FILES '{src}' (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP, region STRING, v STRING');
        CREATE SINK appended FROM events INTO ICEBERG CATALOG lake (NAMESPACE = 'analytics', TABLE = 'appended')
            PARTITION BY (day(ts), region);
        CREATE SINK upserted FROM events INTO ICEBERG CATALOG lake (NAMESPACE = 'analytics', TABLE = 'upserted')
            KEY (id) MODE UPSERT;
        """
    )
    session.run(once=True, sinks=["appended", "upserted"])
    write_json_lines(src, "b.json", [_event(i, "new") for i in range(5, 25)])
    session.run(once=True, sinks=["appended", "upserted"])

    for name, count in (("appended", 40), ("upserted", 25)):
        table = session.engine.load_table("lake", ("analytics",), name)
        duck = read_duckdb(table.metadata_location)
        got = select(session, f"SELECT id, ts, region, v FROM lake.analytics.{name} LIMIT 1000")
        assert rows_of(got) == duck and len(duck) == count, name
    upserted = session.engine.load_table("lake", ("analytics",), "upserted")
    second = [
        s.summary.additional_properties
        for s in upserted.snapshots()
        if s.summary.additional_properties.get("icesql.progress") == "1"
    ]
    assert second and int(second[0].get("added-delete-files", 0)) > 0, second  # the upsert deleted rows
    assert {r[3] for r in select(session, "SELECT * FROM lake.analytics.upserted WHERE id = 7").rows} == {"new7"}

    # time travel: the first snapshot holds the first run's rows only
    first = min(upserted.snapshots(), key=lambda s: s.timestamp_ms)
    old = select(session, f"SELECT v FROM lake.analytics.upserted FOR VERSION AS OF {first.snapshot_id} WHERE id = 7")
    assert old.rows == (("v7",),)
    at = dt.datetime.fromtimestamp(first.timestamp_ms / 1000, dt.timezone.utc).isoformat()
    older = select(session, f"SELECT count(*) FROM lake.analytics.upserted FOR TIMESTAMP AS OF '{at}'")
    assert older.rows == ((20,),)

    # a source joined with a table
    j = select(session, "SELECT e.id, t.v FROM events e JOIN lake.analytics.upserted t ON e.id = t.id WHERE e.id = 3")
    assert rows_of(j) == [(3, "v3")]

    # SHOW TABLES, DESCRIBE, SHOW SNAPSHOTS
    assert rows_of(select(session, "SHOW TABLES IN lake")) == [("analytics", "appended"), ("analytics", "upserted")]
    desc = dict(select(session, "DESCRIBE lake.analytics.upserted").rows[:3])
    assert desc["table"] == "lake.analytics.upserted"
    described = select(session, "DESCRIBE lake.analytics.appended").rows
    assert ("partition spec", "day(ts), identity(region)") in described
    assert ("column", "1: id long") in described
    assert ("identifier fields", "id") in select(session, "DESCRIBE lake.analytics.upserted").rows
    snaps = [r for r in select(session, "SHOW SNAPSHOTS OF SINK upserted").rows if r[3] != "compact"]
    assert [r[4] for r in snaps] == ["1", "0"]  # the sink's progress, newest first
    assert snaps[0][2] in ("overwrite", "delete") and snaps[0][5] == 20 and snaps[0][6] > 0  # added / deleted


def test_a_table_with_equality_deletes(session: Any) -> None:
    catalog, _, _ = session.engine.connection_catalog("lake")
    table = it.sink_table(catalog, "eq")
    it.sink_commit(table, 0, it.data(table, range(10), v="a"))
    table = catalog.load_table(("ns", "eq"))
    it.sink_commit(table, 1, it.data(table, [2, 3], v="b"), it.equality_deletes(table, [2, 3, 4]))
    table = catalog.load_table(("ns", "eq"))
    assert any(f["content"] == 2 for f in table.inspect.files().to_pylist())
    got = select(session, "SELECT id, region, v FROM lake.ns.eq")
    assert rows_of(got) == read_duckdb(table.metadata_location)
    assert sorted(r[0] for r in got.rows) == [0, 1, 2, 3, 5, 6, 7, 8, 9]


def test_a_table_named_twice_is_loaded_and_read_once(session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from icesql.engine.connections import target
    from icesql.engine.select import tables as table_reader

    catalog, _, _ = session.engine.connection_catalog("lake")
    table = it.sink_table(catalog, "twice", upsert=False)
    it.sink_commit(table, 0, it.data(table, range(4)))
    counts = {"catalogs": 0, "reads": 0}

    def counted(fn: Any, what: str) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[what] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(target, "load_connection_catalog", counted(target.load_connection_catalog, "catalogs"))
    monkeypatch.setattr(table_reader, "read_rows", counted(table_reader.read_rows, "reads"))
    got = select(session, "SELECT a.id, b.id FROM lake.ns.twice a JOIN lake.ns.twice b ON a.id = b.id + 1")
    assert rows_of(got) == [(1, 0), (2, 1), (3, 2)]
    assert counts == {"catalogs": 1, "reads": 1}


def _error(session: Any, sql: str) -> IcesqlError:
    with pytest.raises(IcesqlError) as info:
        session.execute(sql)
    return info.value


def test_errors_point_at_the_name_and_hide_secrets(session: Any, tmp_path: Path) -> None:
    write_json_lines(tmp_path / "j", "a.json", [{"id": 1, "v": "x"}])
    session.execute(f"CREATE SOURCE j FROM FILES '{tmp_path / 'j'}' (FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING')")

    catalog, _, _ = session.engine.connection_catalog("lake")
    catalog.create_namespace_if_not_exists("analytics")  # (the earlier tests' sinks made it)
    missing = _error(session, "SELECT *\nFROM lake.analytics.nope").render()
    assert "table lake.analytics.nope does not exist" in missing
    assert missing.splitlines()[1:3] == ["  FROM lake.analytics.nope", "       ^^^^^^^^^^^^^^^^^^^"]
    assert missing.splitlines()[3].startswith("hint: ") and "lake.analytics" in missing.splitlines()[3]
    nowhere = _error(session, "SELECT * FROM lake.analytix.nope").render()
    assert nowhere.splitlines()[0] == "<input>:1:15: error: namespace lake.analytix does not exist"
    assert "did you mean analytics?" in nowhere

    column = _error(session, "SELECT id, nope FROM j").render()
    assert "column `nope` does not exist" in column
    assert column.splitlines()[2] == "             ^^^^"
    assert "Traceback" not in column and len(column.splitlines()) == 4

    secret = "s3cr3t-catalog-pass"
    session.execute(
        f"""CREATE SECRET pw AS '{secret}';
        CREATE CONNECTION down TO ICEBERG CATALOG (TYPE = 'rest', URI = 'http://127.0.0.1:9', USER = 'u',
            PASSWORD = SECRET pw) WITH (VALIDATE = false)"""
    )
    down = _error(session, "SELECT * FROM down.ns.t")
    text = down.render()
    assert "down" in down.message and secret not in text and "Traceback" not in text
    assert text.splitlines()[2] == "                ^^^^^^^^^"


def test_check_of_a_select_never_starts_spark(tmp_path: Path) -> None:
    script = tmp_path / "q.sql"
    script.write_text(
        "CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local') WITH (VALIDATE = false);\n"
        "CREATE SOURCE g FROM GENERATOR (ROWS PER SECOND = 1, SCHEMA = 'id BIGINT');\n"
        "SELECT * FROM g JOIN lake.a.t FOR VERSION AS OF 1 USING (id);\nSHOW TABLES IN lake;\n"
        "DESCRIBE lake.a.t;\n"
    )
    probe = (
        "import sys\nfrom icesql.cli import main\n"
        f"rc = main(['check', {str(script)!r}, '--home', {str(tmp_path / 'home')!r}])\n"
        "heavy = sorted(m for m in ('pyspark', 'py4j', 'pyiceberg', 'pyarrow', 'icesql.engine') if m in sys.modules)\n"
        "print('RC', rc, 'HEAVY', heavy)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60
    )
    assert "RC 0 HEAVY []" in p.stdout, p.stdout + p.stderr


def test_csv_and_json_lines_formats(tmp_path: Path) -> None:
    from icesql.repl.format import format_csv, format_json_lines

    rows = [(1, "a,b", None, dt.date(2024, 1, 2)), (2, 'q"', 1.5, None)]
    cols = ("id", "v", "x", "d")
    assert format_csv(cols, rows) == 'id,v,x,d\n1,"a,b",,2024-01-02\n2,"q""",1.5,\n'
    lines = [json.loads(line) for line in format_json_lines(cols, rows).splitlines()]
    assert lines == [{"id": 1, "v": "a,b", "x": None, "d": "2024-01-02"}, {"id": 2, "v": 'q"', "x": 1.5, "d": None}]


def test_an_evolved_table_reads_in_its_current_schema_and_travels_to_the_old_one(session: Any) -> None:
    from pyiceberg.types import StringType

    from icesql.engine.iceberg.writer import DataFileWriter, WriteSpec

    catalog, _, _ = session.engine.connection_catalog("lake")
    table = it.sink_table(catalog, "evolved", upsert=False)
    assert select(session, "SELECT * FROM lake.ns.evolved").rows == ()  # no snapshot yet: no rows
    it.sink_commit(table, 0, it.data(table, [1, 2]))
    table = catalog.load_table(("ns", "evolved"))
    first = table.current_snapshot().snapshot_id
    with table.update_schema() as update:
        update.add_column("extra", StringType())
        update.rename_column("v", "value")
    table = catalog.load_table(("ns", "evolved"))
    writer = DataFileWriter(WriteSpec.from_table(table))
    writer.write(pa.record_batch({"id": pa.array([3], pa.int64()), "region": ["us"], "value": ["y"], "extra": ["e"]}))
    it.sink_commit(table, 1, writer.close())
    table = catalog.load_table(("ns", "evolved"))

    now = select(session, "SELECT * FROM lake.ns.evolved")
    assert now.columns == ("id", "region", "value", "extra")
    assert rows_of(now) == read_duckdb(table.metadata_location)
    assert ("x", None) in [(r[2], r[3]) for r in now.rows]  # an older file: the new column is null
    old = select(session, f"SELECT * FROM lake.ns.evolved FOR SYSTEM_VERSION AS OF {first}")
    assert old.columns == ("id", "region", "v") and rows_of(old) == [(1, "eu", "x"), (2, "eu", "x")]


def test_icesql_exec_prints_csv_and_one_line_errors(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable)
    conf = ["--spark-master", "local[1]", "--conf", "spark.ui.enabled=false", "--home", str(home)]

    def icesql_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "icesql", *args, *conf], capture_output=True, text=True, env=env, timeout=300
        )

    sql = (
        "CREATE SOURCE g FROM GENERATOR (ROWS PER SECOND = 1, SCHEMA = 'id BIGINT, name STRING');"
        "SELECT id, name FROM g ORDER BY id LIMIT 2;"
        "SELECT nope FROM g"
    )
    p = icesql_cli("exec", "--format", "csv", sql)
    assert p.stdout == "id,name\n0,name-0\n1,name-1\n", p.stdout + p.stderr
    err = [line for line in p.stderr.splitlines() if not line.startswith(("WARN", "Setting", "Using", "To adjust"))]
    assert p.returncode == 1 and "Traceback" not in p.stderr
    at = sql.index("nope")
    assert err[-4:] == [
        f"<exec>:1:{at + 1}: error: column `nope` does not exist",
        f"  {sql}",
        " " * (at + 2) + "^^^^",
        "hint: columns there: `id`, `name`",
    ], err
    # --format json through the CLI too: one object per row on stdout, nothing else there
    p = icesql_cli(
        "exec",
        "--format",
        "json",
        "CREATE SOURCE IF NOT EXISTS g FROM GENERATOR (ROWS PER SECOND = 1, SCHEMA = 'id BIGINT, name STRING');"
        "SELECT id, name FROM g ORDER BY id LIMIT 2",
    )
    assert p.returncode == 0, p.stderr
    assert [json.loads(line) for line in p.stdout.splitlines()] == [
        {"id": 0, "name": "name-0"},
        {"id": 1, "name": "name-1"},
    ], p.stdout
    p = icesql_cli("exec", "SELECT * FORM g")
    assert p.returncode == 1 and "Traceback" not in p.stderr and "<exec>:1:" in p.stderr, p.stderr
