"""KAFKA connections and sources through the library session (no broker, no Spark): what is
stored, shown, described, refused and checked over the network (the check itself replaced by a
recorder: ``tests/kafka`` runs it against real brokers)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql import plan as P
from icesql.errors import AnalysisError, CatalogError, ExecutionError
from icesql.repl.redact import redact_secrets

PASSWORD = "kafka-pw-7fd2c1b9"

SETUP = f"""
CREATE SECRET kafka_pw AS '{PASSWORD}';
CREATE CONNECTION k TO KAFKA (BROKER 'localhost:9092', SECURITY PROTOCOL = 'SASL_PLAINTEXT',
    SASL MECHANISMS = 'SCRAM-SHA-256', SASL USERNAME = 'icesql', SASL PASSWORD = SECRET kafka_pw)
    WITH (VALIDATE = false);
CREATE SOURCE users FROM KAFKA CONNECTION k (TOPIC = 'users', FORMAT = 'json', SCHEMA = 'name STRING',
    KEY FORMAT = 'json', KEY SCHEMA = 'id BIGINT')
    INCLUDE PARTITION AS p, OFFSET, TIMESTAMP AS ts, HEADERS ENVELOPE UPSERT;
"""


@pytest.fixture
def session(tmp_path: Path):
    with icesql.Session(home=tmp_path / "home") as s:
        s.execute(SETUP)
        yield s


def _columns(session: icesql.Session, source: str) -> tuple[P.Column, ...]:
    obj = session.store.get_object("source", source)
    assert obj is not None
    plan = P.plan_from_dict(obj.definition)
    assert isinstance(plan, P.SourcePlan)
    return plan.columns


def test_show_and_describe_a_kafka_source(session: icesql.Session) -> None:
    (conns,) = session.execute("SHOW CONNECTIONS")
    assert conns.rows == (("k", "kafka (sasl_plaintext)", "localhost:9092"),)
    (sources,) = session.execute("SHOW SOURCES")
    assert sources.rows == (("users", "kafka (json)", "topic users on k"),)
    (desc,) = session.execute("DESCRIBE users")
    props = dict(desc.rows)
    assert props["columns"] == (
        "id bigint, name string, p int, offset bigint, ts timestamp, headers array<struct<key:string,value:binary>>"
    )
    assert props["kafka.topic"] == "users"
    assert props["kafka.envelope"] == "upsert"
    assert props["kafka.key_columns"] == "id bigint"
    assert props["kafka.include"] == "partition AS p, offset AS offset, timestamp AS ts, headers AS headers"
    assert props["depends_on"] == "connection k"
    (desc,) = session.execute("DESCRIBE k")
    props = dict(desc.rows)
    assert props["sasl_password"] == "SECRET kafka_pw"
    assert props["brokers"] == "localhost:9092"


def test_show_create_gives_back_a_statement_that_recreates_it(session: icesql.Session, tmp_path: Path) -> None:
    (conn,) = session.execute("SHOW CREATE CONNECTION k")
    (src,) = session.execute("SHOW CREATE SOURCE users")
    assert src.rows[0][1] == (
        "CREATE SOURCE users FROM KAFKA CONNECTION k (TOPIC = 'users', FORMAT = 'json', SCHEMA = 'name STRING', "
        "KEY FORMAT = 'json', KEY SCHEMA = 'id BIGINT', ENVELOPE = 'upsert') "
        "INCLUDE PARTITION AS p, OFFSET, TIMESTAMP AS ts, HEADERS"
    )
    with icesql.Session(home=tmp_path / "again") as s:
        s.execute(f"CREATE SECRET kafka_pw AS '{PASSWORD}'")
        s.execute(conn.rows[0][1] + ";\n" + src.rows[0][1])
        assert _columns(s, "users") == _columns(session, "users")


def test_drop_connection_refused_while_a_source_reads_it(session: icesql.Session) -> None:
    with pytest.raises(CatalogError) as err:
        session.execute("DROP CONNECTION k")
    assert "source users" in err.value.render() and "CASCADE" in err.value.render()
    with pytest.raises(CatalogError) as err:
        session.execute("DROP SECRET kafka_pw")
    assert "connection k" in err.value.render()
    (r,) = session.execute("DROP CONNECTION k CASCADE")
    assert "source users" in r.message
    assert session.object_names("source") == []


def test_alter_source_recomputes_the_columns(session: icesql.Session) -> None:
    session.execute("ALTER SOURCE users SET (SCHEMA = 'name STRING, email STRING')")
    assert [c.name for c in _columns(session, "users")] == ["id", "name", "email", "p", "offset", "ts", "headers"]


def test_upsert_sink_must_key_on_the_record_key(session: icesql.Session, tmp_path: Path) -> None:
    session.execute(f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{tmp_path / 'wh'}')")
    with pytest.raises(AnalysisError) as err:
        session.execute("CREATE SINK s FROM users INTO ICEBERG CATALOG lake (NAMESPACE = 'a', TABLE = 't') KEY (name)")
    assert "expected KEY (id)" in err.value.render()
    session.execute("CREATE SINK s FROM users INTO ICEBERG CATALOG lake (NAMESPACE = 'a', TABLE = 't') KEY (id)")
    sink = session.sink_plans(["s"])[0]
    assert sink.key == ("id",) and [c.name for c in sink.columns][:2] == ["id", "name"]


def _outputs(session: icesql.Session, sql: str) -> list[str]:
    try:
        return [repr(r) for r in session.execute(sql)]
    except icesql.IcesqlError as err:
        return [err.render(), repr(err)]


def test_the_sasl_password_never_shows(session: icesql.Session, caplog: pytest.LogCaptureFixture) -> None:
    bad = f"CREATE CONNECTION k2 TO KAFKA (BROKER = 'h:9092', SECURITY PROTOCOL = 'SASL_SSL', SASL MECHANISMS = 'PLAIN', SASL USERNAME = 'u', SASL PASSWORD = '{PASSWORD}')"
    outputs: list[str] = []
    for sql in (
        "SHOW CREATE CONNECTION k",
        "DESCRIBE k",
        "DESCRIBE kafka_pw",
        "SHOW CONNECTIONS",
        "SHOW SECRETS",
        bad,  # a plain string: an error, whose message and source line hide it
        bad.replace("BROKER", "BROKERR"),  # an unknown option before it
        bad.replace("= '", "'"),  # no '=' before it
        bad.replace("SASL PASSWORD", "SASL PASWORD"),  # a misspelled option name
    ):
        outputs.extend(_outputs(session, sql))
    obj = session.store.get_object("connection", "k")
    assert obj is not None
    outputs.append(json.dumps(obj.definition))
    outputs.append(obj.sql)
    outputs.append(redact_secrets(bad))
    assert any("expects SECRET name" in o for o in outputs)
    for text in outputs + [rec.getMessage() for rec in caplog.records]:
        assert PASSWORD not in text


def test_sources_of_many_topics_are_shown_described_and_recreated(session: icesql.Session, tmp_path: Path) -> None:
    session.execute(
        "CREATE SOURCE shards FROM KAFKA CONNECTION k (TOPICS = ('orders.eu', 'orders.us'), FORMAT = 'json', "
        "SCHEMA = 'id BIGINT') INCLUDE PARTITION;"
        "CREATE SOURCE cdc FROM KAFKA CONNECTION k (TOPIC PATTERN 'db1\\.inv\\..*', TOPIC REFRESH '5s', "
        "FORMAT = 'text') INCLUDE TOPIC AS t;"
    )
    (sources,) = session.execute("SHOW SOURCES")
    rows = {r[0]: r[2] for r in sources.rows}
    assert rows["shards"] == "topics 'orders.eu', 'orders.us' on k"
    assert rows["cdc"] == "the topics matching 'db1\\.inv\\..*' on k"
    props = dict(session.execute("DESCRIBE shards")[0].rows)
    assert props["columns"] == "id bigint, partition int, topic string"  # the records' topic, unasked
    assert props["kafka.topics"] == "orders.eu, orders.us"
    assert "kafka.topic" not in props and "kafka.topic_pattern" not in props
    props = dict(session.execute("DESCRIBE cdc")[0].rows)
    assert props["columns"] == "value string, t string"
    assert props["kafka.topic_pattern"] == "db1\\.inv\\..*"
    assert props["kafka.topic_refresh"] == 5.0
    (conn,) = session.execute("SHOW CREATE CONNECTION k")
    shown = {n: session.execute(f"SHOW CREATE SOURCE {n}")[0].rows[0][1] for n in ("shards", "cdc")}
    assert shown["cdc"] == (
        "CREATE SOURCE cdc FROM KAFKA CONNECTION k (TOPIC PATTERN = 'db1\\.inv\\..*', TOPIC REFRESH = '5s', "
        "FORMAT = 'text') INCLUDE TOPIC AS t"
    )
    with icesql.Session(home=tmp_path / "again") as s:
        s.execute(f"CREATE SECRET kafka_pw AS '{PASSWORD}'")
        s.execute(conn.rows[0][1] + ";\n" + ";\n".join(shown.values()))
        for n in shown:
            assert s.store.get_object("source", n).definition == session.store.get_object("source", n).definition


class _Checks:
    """Stands for ``validate_kafka_connection``: records what would have been checked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[str, ...], str]] = []

    def __call__(self, plan: P.KafkaConnectionPlan, *, secrets: Any, topics: Sequence[str] = ()) -> list[str]:
        password = secrets(plan.sasl_password.name) if plan.sasl_password is not None else ""
        self.calls.append((plan.name, tuple(topics), password))
        return []


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> _Checks:
    from icesql.engine.connections import kafka as connection

    recorder = _Checks()
    monkeypatch.setattr(connection, "validate_kafka_connection", recorder)
    return recorder


def test_validate_checks_the_connection_and_the_topic(tmp_path: Path, checks: _Checks) -> None:
    with icesql.Session(home=tmp_path / "home") as s:
        s.execute(
            f"CREATE SECRET pw AS '{PASSWORD}';"
            "CREATE CONNECTION k TO KAFKA (BROKER = 'h:9092', SECURITY PROTOCOL = 'SASL_SSL',"
            " SASL MECHANISMS = 'PLAIN', SASL USERNAME = 'u', SASL PASSWORD = SECRET pw);"
            "CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text')"
        )
        # a script is checked whole before it is applied: the secret comes from the script
        assert checks.calls == [("k", (), PASSWORD), ("k", ("orders",), PASSWORD)]
        s.execute("CREATE SOURCE s2 FROM KAFKA CONNECTION k (TOPIC = 'refunds', FORMAT = 'bytes')")
        s.execute("VALIDATE CONNECTION k")
        assert checks.calls[2:] == [("k", ("refunds",), PASSWORD), ("k", (), PASSWORD)]
        # WITH (VALIDATE = false): neither the connection nor its sources' topics are checked
        s.execute(
            "CREATE CONNECTION quiet TO KAFKA (BROKER = 'h:9092') WITH (VALIDATE = false);"
            "CREATE SOURCE s3 FROM KAFKA CONNECTION quiet (TOPIC = 'x', FORMAT = 'text')"
        )
        assert len(checks.calls) == 4
        s.execute("VALIDATE CONNECTION quiet")  # asked for: checked
        assert checks.calls[-1] == ("quiet", (), "")
        # TOPICS: every topic is checked; TOPIC PATTERN: the brokers only (it may match no topic yet)
        s.execute(
            "CREATE SOURCE many FROM KAFKA CONNECTION k (TOPICS = ('a', 'b'), FORMAT = 'text');"
            "CREATE SOURCE pat FROM KAFKA CONNECTION k (TOPIC PATTERN = 'a.*', FORMAT = 'text')"
        )
        assert checks.calls[-2:] == [("k", ("a", "b"), PASSWORD), ("k", (), PASSWORD)]
    with icesql.Session(home=tmp_path / "other", validate=False) as s:
        s.execute(
            "CREATE CONNECTION k TO KAFKA (BROKER = 'h:9092');"
            "CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'x', FORMAT = 'text')"
        )
    assert len(checks.calls) == 7


def test_a_failed_check_stores_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from icesql.engine.connections import kafka as connection

    reachable: list[str] = []

    def refuse(plan: P.KafkaConnectionPlan, *, secrets: Any, topics: Sequence[str] = ()) -> list[str]:
        if plan.brokers[0] not in reachable:
            raise ExecutionError("broker unreachable", hint="check it")
        if topics:
            raise ExecutionError(f"unknown topic '{topics[0]}'", hint="create it first")
        return []

    monkeypatch.setattr(connection, "validate_kafka_connection", refuse)
    with icesql.Session(home=tmp_path / "home") as s:
        with pytest.raises(ExecutionError, match="unreachable"):
            s.execute("CREATE CONNECTION k TO KAFKA (BROKER = 'h:9092')")
        assert s.object_names("connection") == []
        reachable.append("h:9092")
        s.execute("CREATE CONNECTION k TO KAFKA (BROKER = 'h:9092')")
        with pytest.raises(ExecutionError, match="unknown topic 'nope'"):
            s.execute("CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'nope', FORMAT = 'text')")
        assert s.object_names("source") == []
