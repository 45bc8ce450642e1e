"""CREATE CONNECTION ... TO CONFLUENT SCHEMA REGISTRY through the session, against the stand-in:
what is refused (with a caret), stored, shown, described, validated and dropped; and a password
that shows nowhere (outputs, errors, plan JSON, history, the CLI's output)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql import plan as P
from icesql.errors import AnalysisError, CatalogError, ExecutionError, ParseError
from icesql.syntax import parse_one, to_sql
from tests.support.registry import RegistryServer

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "registry-pw-0451"  # the secure_registry fixture's


def connect(server: RegistryServer, *, validate: bool = True, name: str = "csr") -> str:
    ca = ", SSL CERTIFICATE AUTHORITY = SECRET ca" if server.ca_pem else ""
    auth = ", USERNAME = 'icesql', PASSWORD = SECRET pw" if server.username else ""
    return (
        f"CREATE CONNECTION {name} TO CONFLUENT SCHEMA REGISTRY (URL = '{server.url}'{auth}{ca})"
        + ("" if validate else " WITH (VALIDATE = false)")
    )


def secrets(server: RegistryServer, password: str = PASSWORD) -> str:
    out = f"CREATE SECRET pw AS '{password}';"
    if server.ca_pem:
        out += f" CREATE SECRET ca AS '{server.ca_pem}';"
    return out


@pytest.fixture
def session(tmp_path: Path) -> Any:
    with icesql.Session(home=tmp_path / "home") as s:
        yield s


def test_the_statement_round_trips_and_redacts() -> None:
    sql = (
        "CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = 'https://r:8081', USERNAME = 'u', "
        "PASSWORD = SECRET pw, SSL CERTIFICATE AUTHORITY = SECRET ca) WITH (VALIDATE = FALSE)"
    )
    stmt = parse_one(sql)
    assert to_sql(stmt) == sql and parse_one(to_sql(stmt)) == stmt
    assert parse_one(sql.lower()) == parse_one(sql.replace("https://r:8081", "https://r:8081".lower()).lower())
    # a plain string where the password goes is never printed back
    typed = "CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = 'http://r', USERNAME = 'u', PASSWORD = 'hunter2-secret')"
    assert "hunter2-secret" not in to_sql(parse_one(typed), redact=True)


@pytest.mark.parametrize(
    ("options", "message", "caret"),
    [
        ("USERNAME = 'u'", "CONFLUENT SCHEMA REGISTRY connection needs URL", "csr"),
        ("URL = 'registry:8081'", "URL of a schema registry is an http:// or https:// URL, found 'registry:8081'", "'registry:8081'"),
        ("URL = 'ftp://r'", "URL of a schema registry is an http:// or https:// URL", "'ftp://r'"),
        ("URL = 'https://u:pw@r:8081'", "URL of a schema registry must not hold credentials", "'https://u:**@r:8081'"),
        ("URL = 'http://r', USERNAME = 'u'", "USERNAME needs PASSWORD", "USERNAME = 'u'"),
        ("URL = 'http://r', PASSWORD = SECRET pw", "PASSWORD needs USERNAME", "PASSWORD = SECRET pw"),
        ("URL = 'http://r', BROKER = 'h:9092'", "unknown CONFLUENT SCHEMA REGISTRY option BROKER", "BROKER = '******'"),
        ("URL = 'http://r', USERNAME = 'u', PASSWORD = SECRET nope", "secret", "nope"),
        ("URL = 'http://r', USERNAME = 'u', PASSWORD = 'plain-pw-9'", "PASSWORD expects SECRET name", "'****"),
    ],
)
def test_refused_with_a_caret(session: Any, options: str, message: str, caret: str) -> None:
    session.execute("CREATE SECRET pw AS 'x1234'")
    sql = f"CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY ({options}) WITH (VALIDATE = false)"
    with pytest.raises(AnalysisError) as e:
        session.execute(sql)
    rendered = e.value.render()
    assert message in e.value.message, rendered
    assert "plain-pw-9" not in rendered and "u:pw@" not in e.value.message
    lines = rendered.splitlines()
    marks = next(line for line in lines if set(line.strip()) == {"^"})
    start = marks.index("^")
    assert lines[lines.index(marks) - 1][start:].startswith(caret), rendered


def test_stored_shown_described_and_round_tripped(session: Any, schema_registry: RegistryServer) -> None:
    session.execute(connect(schema_registry))
    (shown,) = session.execute("SHOW CONNECTIONS")
    assert shown.rows == (("csr", "confluent schema registry", schema_registry.url),)
    (create,) = session.execute("SHOW CREATE CONNECTION csr")
    assert create.rows[0][1] == f"CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = '{schema_registry.url}')"
    (described,) = session.execute("DESCRIBE csr")
    assert ("url", schema_registry.url) in described.rows and ("kind", "connection") in described.rows
    stored = session.store.get_object("connection", "csr")
    plan = P.plan_from_dict(stored.definition)
    assert plan == P.SchemaRegistryConnectionPlan("csr", schema_registry.url)
    assert P.plan_from_dict(json.loads(json.dumps(P.to_dict(plan)))) == plan


def test_validate_lists_the_subjects_once(session: Any, secure_registry: RegistryServer) -> None:
    secure_registry.register("orders-value", '"string"')
    session.execute(secrets(secure_registry) + connect(secure_registry))
    assert secure_registry.requests.count(("GET", "/subjects")) == 1
    (result,) = session.execute("VALIDATE CONNECTION csr")
    assert result.message == "connection 'csr' is valid"
    assert secure_registry.requests.count(("GET", "/subjects")) == 2


def test_wrong_password_is_one_line_with_a_hint(session: Any, secure_registry: RegistryServer) -> None:
    session.execute(secrets(secure_registry, password="wrong-pw-3141"))
    with pytest.raises(ExecutionError) as e:
        session.execute(connect(secure_registry))
    assert e.value.message == "schema registry csr refused the credentials (401): check USERNAME and PASSWORD"
    rendered = e.value.render()
    assert "wrong-pw-3141" not in rendered and "hint:" in rendered
    assert session.store.get_object("connection", "csr") is None  # not kept


def test_without_the_ca_tls_fails_clearly(session: Any, secure_registry: RegistryServer) -> None:
    session.execute(f"CREATE SECRET pw AS '{PASSWORD}'")
    sql = f"CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = '{secure_registry.url}', USERNAME = 'icesql', PASSWORD = SECRET pw)"
    with pytest.raises(ExecutionError) as e:
        session.execute(sql)
    assert "TLS handshake with schema registry csr" in e.value.message and "certificate verify failed" in e.value.message


def test_unreachable_names_the_url_without_credentials(session: Any, secure_registry: RegistryServer) -> None:
    secure_registry.stop()
    session.execute(secrets(secure_registry))
    with pytest.raises(ExecutionError) as e:
        session.execute(connect(secure_registry))
    assert e.value.message == f"schema registry csr unreachable at {secure_registry.url} (connection refused)"
    assert "check URL" in (e.value.hint or "") and PASSWORD not in e.value.render()
    # WITH (VALIDATE = false) stores it; VALIDATE CONNECTION says the same later
    session.execute(connect(secure_registry, validate=False))
    with pytest.raises(ExecutionError, match="unreachable at"):
        session.execute("VALIDATE CONNECTION csr")


def test_drop(session: Any, schema_registry: RegistryServer) -> None:
    session.execute(connect(schema_registry, validate=False))
    (dropped,) = session.execute("DROP CONNECTION csr")
    assert session.store.get_object("connection", "csr") is None and dropped.statement.startswith("DROP")


def test_a_secret_it_names_cannot_be_dropped(session: Any, secure_registry: RegistryServer) -> None:
    session.execute(secrets(secure_registry) + connect(secure_registry, validate=False))
    with pytest.raises((CatalogError, AnalysisError)) as e:
        session.execute("DROP SECRET pw")
    assert "csr" in e.value.message
    session.execute("DROP SECRET pw CASCADE")
    assert session.store.get_object("connection", "csr") is None


def test_not_a_parse_error_to_name_things_registry_or_schema() -> None:
    for sql in (
        "CREATE SECRET schema AS 'x'",
        "CREATE SECRET registry AS 'x'",
        "CREATE SECRET confluent AS 'x'",
        "CREATE SOURCE registry FROM KAFKA CONNECTION confluent (TOPIC = 't', FORMAT = 'json', SCHEMA = 'a INT')",
    ):
        assert parse_one(to_sql(parse_one(sql))) == parse_one(sql)
    with pytest.raises(ParseError):
        parse_one("CREATE CONNECTION c TO CONFLUENT REGISTRY (URL = 'http://r')")


def test_the_password_shows_nowhere_through_the_cli(tmp_path: Path, secure_registry: RegistryServer) -> None:
    home = tmp_path / ".icesql"
    (tmp_path / "p.sql").write_text(
        f"CREATE SECRET pw AS '{PASSWORD}';\n"
        + (f"CREATE SECRET ca AS '{secure_registry.ca_pem}';\n")
        + connect(secure_registry)
        + ";\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("ICESQL_HOME", None)

    def icesql_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "icesql", "--home", str(home), *args],
            capture_output=True, text=True, env=env, cwd=tmp_path, input="", timeout=120,
        )

    runs = [icesql_cli("-v", "run", "p.sql", "--once")]
    runs.append(icesql_cli("exec", "SHOW CREATE CONNECTION csr"))
    runs.append(icesql_cli("exec", "DESCRIBE csr"))
    runs.append(icesql_cli("exec", "VALIDATE CONNECTION csr"))
    secure_registry.stop()
    runs.append(icesql_cli("-v", "exec", "VALIDATE CONNECTION csr"))
    assert runs[3].returncode == 0, runs[3].stderr
    assert runs[4].returncode != 0 and "unreachable at" in runs[4].stderr, runs[4].stderr
    for p in runs:
        assert PASSWORD not in p.stdout and PASSWORD not in p.stderr
    store = {home / "catalog.db", home / "catalog.db-wal", home / "catalog.db-shm"}
    for f in tmp_path.rglob("*"):
        if f.is_file() and f.suffix != ".sql" and f not in store:
            assert PASSWORD.encode() not in f.read_bytes(), f
    # the plan's JSON names the secret, never its value
    with icesql.Session(home=home) as s:
        stored = s.store.get_object("connection", "csr")
        assert stored is not None and PASSWORD not in json.dumps(stored.definition)
        assert stored.definition["password"] == {"$type": "SecretName", "name": "pw"}


def test_a_password_typed_inline_is_masked_in_history_and_errors(session: Any) -> None:
    from icesql.repl.redact import redact_secrets

    sql = (
        "CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = 'http://r', USERNAME = 'u', "
        "PASSWORD = 'typed-pw-2718', PASWORD = 'typo-pw-1618')"
    )
    assert "typed-pw-2718" not in redact_secrets(sql) and "typo-pw-1618" not in redact_secrets(sql)
    with pytest.raises(AnalysisError) as e:
        session.execute(sql)
    assert "typed-pw-2718" not in e.value.render() and "typo-pw-1618" not in e.value.render()


def test_a_password_in_the_url_is_masked_where_the_statement_is_quoted(session: Any) -> None:
    from icesql.repl.redact import redact_secrets

    sql = "CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = 'https://u:url-pw-5772@r:8081')"
    with pytest.raises(AnalysisError) as e:
        session.execute(sql)
    assert "url-pw-5772" not in e.value.render() and "https://u:" in e.value.render()
    assert "url-pw-5772" not in redact_secrets(sql)
