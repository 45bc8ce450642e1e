"""Issue 18, session side: psql-like execution, whole-or-nothing scripts, warnings that never
show another statement's secret, homes that cannot be homes, read-only stores."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import icesql
from icesql.errors import AnalysisError, CatalogError, IcesqlError, UsageError

VALUE = "Zq7vK2mWx9Lp"


def no_part_of(value: str, text: str) -> bool:
    return not any(value[i : i + 5] in text for i in range(len(value) - 4))


@pytest.fixture
def session(tmp_path: Path):
    with icesql.Session(home=tmp_path / "home") as s:
        yield s


def test_execute_iter_yields_what_was_applied_before_the_error(session: icesql.Session) -> None:
    seen = []
    with pytest.raises(CatalogError):
        for result in session.execute_iter("CREATE SECRET a AS 'x'; SHOW SECRETS; CREATE SECRET a AS 'y'; SHOW SINKS"):
            seen.append(result.statement)
    assert seen == ["CREATE SECRET", "SHOW SECRETS"]
    assert session.object_names("secret") == ["a"]


def test_an_atomic_script_applies_nothing_when_a_statement_is_invalid(session: icesql.Session) -> None:
    with pytest.raises(AnalysisError):
        session.execute("CREATE SECRET a AS 'x';\nDROP SINK nowhere;", atomic=True)
    assert session.object_names("secret") == []


def test_an_atomic_script_applies_nothing_when_the_store_refuses_a_statement(
    session: icesql.Session, tmp_path: Path
) -> None:
    session.execute("CREATE SECRET taken AS 'x'")
    script = (
        f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{tmp_path / 'wh'}') WITH (VALIDATE = false);\n"
        "CREATE SOURCE g FROM GENERATOR (ROWS PER SECOND = 1, SCHEMA = 'id BIGINT');\n"
        "CREATE SINK k FROM g INTO ICEBERG CATALOG lake (NAMESPACE = 'a', TABLE = 'b');\n"
        "CREATE SECRET taken AS 'again';\n"  # exists: only the store knows
    )
    with pytest.raises(CatalogError) as info:
        session.execute(script, filename="s.sql", atomic=True)
    assert info.value.render().startswith('s.sql:4:1: error: secret "taken" already exists')
    assert session.object_names("connection") == [] and session.object_names("sink") == []
    assert session.created_sinks == []
    results = session.execute(script.replace("taken", "fresh"), atomic=True)
    assert [r.statement for r in results] == ["CREATE CONNECTION", "CREATE SOURCE", "CREATE SINK", "CREATE SECRET"]
    assert session.created_sinks == ["k"]


def test_a_warning_never_shows_a_secret_of_another_statement_on_its_line(
    no_spark_of_the_program: None, session: icesql.Session, tmp_path: Path
) -> None:
    sql = (
        f"CREATE SECRET pw AS '{VALUE}'; CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local') "
        "WITH (VALIDATE = false); CREATE SINK k FROM spark_tbl INTO ICEBERG CATALOG lake (NAMESPACE = 'a', TABLE = 'b')"
    )
    # a Spark with a metastore may hold spark_tbl: the sink is created with a warning
    with icesql.Session(home=tmp_path / "hive", spark_conf={"spark.sql.catalogImplementation": "hive"}) as hive:
        results = hive.execute(sql)
    warnings = "\n".join(w for r in results for w in r.warnings)
    assert "spark_tbl is not an icesql source or view" in warnings
    assert no_part_of(VALUE, warnings)
    # icesql's own Spark has no such table: an error, as careful with the secret
    with pytest.raises(IcesqlError) as info:
        session.execute(sql)
    assert "unknown source or view spark_tbl" in info.value.render() and no_part_of(VALUE, info.value.render())


def test_errors_of_check_and_execute_never_show_a_secret_elsewhere_on_the_line(session: icesql.Session) -> None:
    sql = f"CREATE SECRET pw AS '{VALUE}'; DROP SINK nowhere; CREATE SECRET q '{VALUE}'"
    rendered = [e.render() for e in session.check(sql)]
    assert len(rendered) == 2 and all(no_part_of(VALUE, r) for r in rendered)
    with pytest.raises(IcesqlError) as info:
        session.execute(sql)
    assert no_part_of(VALUE, info.value.render())


def test_check_is_not_fooled_by_a_syntax_error_into_wrong_positions(session: icesql.Session) -> None:
    sql = "SHOW SINKS;\r\n\r\nCREAT SINK;\r\n  DROP SINK nowhere;\nCREATE SOURCE s FROM FILES 42;"
    lines = [e.render().splitlines()[0] for e in session.check(sql, filename="f.sql")]
    assert lines == [
        "f.sql:3:1: error: expected a statement (CREATE, ALTER, DROP, SHOW, DESCRIBE, EXPLAIN, VALIDATE, FLUSH, SELECT or WITH), found 'CREAT'",
        "f.sql:4:13: error: unknown sink nowhere",
        "f.sql:5:28: error: expected string, found '42'",
    ]


@pytest.mark.parametrize("sql", ["SHOW SINKS", "CREATE SECRET s AS 'x'"])
def test_a_home_that_cannot_be_a_home_is_a_usage_error(tmp_path: Path, sql: str) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for home in (a_file, a_file / "under", Path("/proc/icesql-home"), "~nosuchuser_icesql/home"):
        with pytest.raises(UsageError) as info:
            icesql.Session(home=home)
        assert "as the icesql home" in info.value.message and info.value.hint


def test_icesql_secret_key_once_used_is_needed_for_every_later_secret(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("ICESQL_SECRET_KEY", "passphrase-one")
    with icesql.Session(home=home) as s:
        s.execute("CREATE SECRET a AS 'encrypted-value'")
    monkeypatch.delenv("ICESQL_SECRET_KEY")
    with icesql.Session(home=home) as s:
        with pytest.raises(CatalogError) as info:
            s.execute(f"CREATE SECRET b AS '{VALUE}'")
        assert "ICESQL_SECRET_KEY" in info.value.message
        with pytest.raises(CatalogError):
            s.execute(f"ALTER SECRET a AS '{VALUE}'")
        assert s.object_names("secret") == ["a"]
    raw = (home / "catalog.db").read_bytes()
    assert VALUE.encode() not in raw


def test_a_read_only_store_can_still_be_read(tmp_path: Path) -> None:
    from catalog_store import CatalogStore, StoreError

    home = tmp_path / "home"
    with icesql.Session(home=home) as s:
        s.execute("CREATE SECRET a AS 'x'")
    store = CatalogStore(home / "catalog.db", read_only=True)
    try:
        assert store.read_only and [o.name for o in store.list_objects("secret")] == ["a"]
        with pytest.raises(StoreError, match="read-only"):
            store.create_secret("b", "y")
    finally:
        store.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes whatever the permissions say")
def test_a_home_that_may_only_be_read_opens_read_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with icesql.Session(home=home) as s:
        s.execute("CREATE SECRET a AS 'x'")
    os.chmod(home / "catalog.db", stat.S_IRUSR)
    os.chmod(home, stat.S_IRUSR | stat.S_IXUSR)
    try:
        with icesql.Session(home=home) as s:
            assert s.store.read_only
            (secrets,) = s.execute("SHOW SECRETS")
            assert [r[0] for r in secrets.rows] == ["a"]
            with pytest.raises(CatalogError, match="read-only"):
                s.execute("CREATE SECRET b AS 'y'")
    finally:
        os.chmod(home, stat.S_IRWXU)
        os.chmod(home / "catalog.db", stat.S_IRUSR | stat.S_IWUSR)
