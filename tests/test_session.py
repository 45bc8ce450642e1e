"""The library session over the real parser, analyzer and SQLite catalog store (no Spark)."""

from __future__ import annotations

import logging
import os
import stat
import string
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import icesql
from icesql.errors import AnalysisError, CatalogError, ParseError

ROOT = Path(__file__).resolve().parent.parent

PIPELINE = """
CREATE SECRET pw AS 'hunter2-top';
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');
CREATE SOURCE events FROM FILES '{data}' (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP, region STRING');
CREATE VIEW eu AS SELECT * FROM events WHERE region = 'eu';
CREATE SINK s FROM events INTO ICEBERG CATALOG lake (NAMESPACE = 'a', TABLE = 't')
  PARTITION BY (day(ts), region) WITH (MAXIMUM PERIOD = '5s');
"""


@pytest.fixture
def session(tmp_path: Path):
    with icesql.Session(home=tmp_path / "home") as s:
        yield s


def _pipeline(tmp_path: Path) -> str:
    return PIPELINE.format(wh=tmp_path / "wh", data=tmp_path / "data")


def test_definitions_persist_across_sessions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with icesql.Session(home=home) as s:
        s.execute(_pipeline(tmp_path))
    with icesql.Session(home=home) as s:
        (sinks,) = s.execute("SHOW SINKS")
        assert [r[0] for r in sinks.rows] == ["s"]
        (views,) = s.execute("SHOW VIEWS")
        assert [r[0] for r in views.rows] == ["eu"]
        (create,) = s.execute("SHOW CREATE SINK s")
        assert "PARTITION BY (day(ts), region)" in create.rows[0][1]
        (desc,) = s.execute("DESCRIBE s")
        props = dict(desc.rows)
        assert props["commit"] == "5s since the last commit"
        assert props["depends_on"] == "source events, connection lake"


def test_store_file_is_owner_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with icesql.Session(home=home) as s:
        s.execute("CREATE SECRET a AS 'b-secret-value'")
    assert stat.S_IMODE(os.stat(home / "catalog.db").st_mode) == 0o600


def test_if_not_exists_and_duplicates(session: icesql.Session, tmp_path: Path) -> None:
    session.execute(_pipeline(tmp_path))
    (r,) = session.execute("CREATE SECRET IF NOT EXISTS pw AS 'other'")
    assert "already exists" in r.message
    with pytest.raises(CatalogError) as err:
        session.execute("CREATE SECRET pw AS 'x'")
    assert "already exists" in err.value.render()


def test_drop_refused_while_dependents_exist_then_cascade(session: icesql.Session, tmp_path: Path) -> None:
    session.execute(_pipeline(tmp_path))
    with pytest.raises(CatalogError) as err:
        session.execute("DROP SOURCE events")
    rendered = err.value.render()
    assert "sink s" in rendered and "view eu" in rendered and "CASCADE" in rendered
    (r,) = session.execute("DROP SOURCE events CASCADE")
    assert "sink s" in r.message and "view eu" in r.message
    assert session.object_names("sink") == [] and session.object_names("view") == []
    (r,) = session.execute("DROP SINK IF EXISTS s")
    assert "does not exist" in r.message


def test_alter_sink_changes_commit_policy(session: icesql.Session, tmp_path: Path) -> None:
    session.execute(_pipeline(tmp_path))
    session.execute("ALTER SINK s SET (MINIMUM SIZE = '64MiB', MAXIMUM PERIOD = '1m')")
    (desc,) = session.execute("DESCRIBE s")
    assert dict(desc.rows)["commit"] == "67108864 bytes staged or 60s since the last commit"


def test_errors_carry_file_position(session: icesql.Session) -> None:
    script = "CREATE SECRET a AS 'x';\n\nCREATE SINK s FROM nowhere INTO ICEBERG CATALOG nope (NAMESPACE='a', TABLE='t');\n"
    with pytest.raises(AnalysisError) as err:
        session.execute(script, filename="p.sql")
    rendered = err.value.render()
    assert rendered.startswith("p.sql:3:")
    assert "^" in rendered
    with pytest.raises(ParseError) as perr:
        session.execute("CREATE SECRET a AS 'x';\nCREAT SINK", filename="q.sql")
    assert perr.value.render().startswith("q.sql:2:1: error:")


def test_check_reports_every_error_without_side_effects(session: icesql.Session) -> None:
    script = (
        "CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest');\n"  # rest needs URI
        "CREATE SOURCE s FROM FILES 'x' (FORMAT = 'json');\n"  # json needs SCHEMA
        "CREAT SINK;\n"  # syntax error in the middle
        "CREATE SECRET ok AS 'v';\n"
        "CREATE CONNECTION a TO AWS (REGION = 'x', BOGUS = 1);\n"
    )
    errors = session.check(script, filename="f.sql")
    lines = [e.render().splitlines()[0] for e in errors]
    assert [ln.split(":")[1] for ln in lines] == ["1", "2", "3", "5"], lines
    assert session.object_names("secret") == []  # nothing was stored


def _outputs_of(session: icesql.Session, sql: str) -> list[str]:
    out: list[str] = []
    try:
        for r in session.execute(sql):
            out.append(repr(r))
    except icesql.IcesqlError as err:
        out.append(err.render())
        out.append(repr(err))
    return out


SECRET_ALPHABET = string.ascii_letters + string.digits + "!#$%&()*+,-./:;<=>?@[]^_{|}~ '\""


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(alphabet=SECRET_ALPHABET, min_size=10, max_size=40))
def test_secret_values_never_appear_in_any_output(
    value: str, tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    home = tmp_path_factory.mktemp("redact")
    lit = value.replace("'", "''")
    statements = [
        f"CREATE SECRET s1 AS '{lit}'",
        f"ALTER SECRET s1 AS '{lit}'",
        f"CREATE SECRET s1 AS '{lit}'",  # already exists: an error
        f"CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY = '{lit}') WITH (VALIDATE = false)",
        "CREATE CONNECTION b TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY = SECRET s1) WITH (VALIDATE = false)",
        f"CREATE CONNECTION r TO ICEBERG CATALOG (TYPE = 'rest', URI = 'http://127.0.0.1:9', USER = 'u', PASSWORD = '{lit}') WITH (VALIDATE = false)",
        f"CREATE CONNECTION bad TO AWS (SECRET ACCESS KEY = '{lit}', NOPE = 1)",
        "SHOW SECRETS",
        "SHOW CONNECTIONS",
        "SHOW CREATE SECRET s1",
        "SHOW CREATE CONNECTION a",
        "SHOW CREATE CONNECTION r",
        "DESCRIBE s1",
        "DESCRIBE a",
        "DESCRIBE r",
    ]
    outputs: list[str] = []
    with icesql.Session(home=home) as s:
        for sql in statements:
            outputs.extend(_outputs_of(s, sql))
        outputs.extend(_outputs_of(s, ";\n".join(statements[7:15])))
    for text in outputs + [rec.getMessage() for rec in caplog.records]:
        assert value not in text


def test_layers_import_only_downwards() -> None:
    """syntax → analyzer → plan never pull in the executor's heavy dependencies."""
    code = (
        "import sys, icesql, icesql.analyzer, icesql.plan, icesql.session, catalog_store\n"
        "icesql.parse('SHOW SINKS'); icesql.parse('EXPLAIN SELECT * FROM lake.ns.t ORDER BY id')\n"
        "heavy = [m for m in ('pyspark', 'pyiceberg', 'pyarrow', 'duckdb', 'sqlglot', 'icesql.engine') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""
    code = "import sys, catalog_store; print([m for m in sys.modules if m.startswith('icesql')])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
