"""Kafka sources whose schemas come from a Confluent Schema Registry: the spellings (Materialize's
clauses and the option list), what the analyzer refuses (with a caret), and CREATE SOURCE fetching
the subjects' latest schemas from the stand-in into the plan and the source's columns.
The columns come from the Avro decoder's own mapping (``sources.registry.avro``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql import plan as P
from icesql.analyzer.registry import struct_ddl
from icesql.analyzer.schema import parse_schema
from icesql.errors import AnalysisError, CatalogError, ExecutionError, ParseError
from icesql.syntax import parse_one, to_sql
from tests.support.registry import RegistryServer

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "total", "type": {"type": "record", "name": "Money", "fields": [{"name": "cents", "type": "long"}]}},
    ],
}
KEY = {"type": "record", "name": "OrderKey", "namespace": "shop", "fields": [{"name": "order_id", "type": "long"}]}
ROW = {"type": "record", "name": "Value", "namespace": "db.inventory.customers", "fields": [
    {"name": "id", "type": "int"}, {"name": "email", "type": "string"}]}
DEBEZIUM = {
    "type": "record",
    "name": "Envelope",
    "namespace": "db.inventory.customers",
    "fields": [
        {"name": "before", "type": ["null", ROW], "default": None},
        {"name": "after", "type": ["null", "db.inventory.customers.Value"], "default": None},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
    ],
}
SOURCE = "CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC = 'orders')"
USING = "USING CONFLUENT SCHEMA REGISTRY CONNECTION csr"


@pytest.fixture
def session(tmp_path: Path, schema_registry: RegistryServer) -> Any:
    with icesql.Session(home=tmp_path / "home") as s:
        s.execute(
            f"CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = '{schema_registry.url}');"
            "CREATE CONNECTION k TO KAFKA (BROKER = 'localhost:9092') WITH (VALIDATE = false)"
        )
        yield s


def stored(session: Any, name: str = "orders") -> P.SourcePlan:
    obj = session.store.get_object("source", name)
    assert obj is not None
    plan = P.plan_from_dict(obj.definition)
    assert isinstance(plan, P.SourcePlan) and plan.kafka is not None
    return plan


# --------------------------------------------------------------------------- spellings


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        (
            f"{SOURCE} FORMAT AVRO {USING}",
            "CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'avro', SCHEMA REGISTRY = csr)",
        ),
        (
            f"{SOURCE} FORMAT AVRO {USING} ENVELOPE DEBEZIUM",
            "CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'avro', SCHEMA REGISTRY = csr, "
            "ENVELOPE = 'debezium')",
        ),
        (
            "CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'avro', SCHEMA REGISTRY = csr, "
            "ENVELOPE = 'debezium')",
            "CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'avro', SCHEMA REGISTRY = csr, "
            "ENVELOPE = 'debezium')",
        ),
        (
            f"{SOURCE} KEY FORMAT AVRO {USING} VALUE FORMAT PROTOBUF {USING} ENVELOPE UPSERT",
            "CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC = 'orders', KEY FORMAT = 'avro', SCHEMA REGISTRY = csr, "
            "FORMAT = 'protobuf', ENVELOPE = 'upsert')",
        ),
        (
            f"{SOURCE} KEY FORMAT TEXT VALUE FORMAT JSON {USING} ENVELOPE UPSERT",
            "CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC = 'orders', KEY FORMAT = 'text', FORMAT = 'json', "
            "SCHEMA REGISTRY = csr, ENVELOPE = 'upsert')",
        ),
        (
            "create source orders from kafka connection k (topic 'orders', subject name strategy = 'record', "
            "record name = 'shop.Order') format avro using confluent schema registry connection csr",
            "CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC = 'orders', SUBJECT NAME STRATEGY = 'record', "
            "RECORD NAME = 'shop.Order', FORMAT = 'avro', SCHEMA REGISTRY = csr)",
        ),
    ],
)
def test_spellings_print_as_the_option_list_and_round_trip(written: str, canonical: str) -> None:
    stmt = parse_one(written)
    assert to_sql(stmt) == canonical
    assert parse_one(canonical) == stmt


def test_key_and_value_through_two_registries_is_a_parse_error() -> None:
    with pytest.raises(ParseError) as e:
        parse_one(f"{SOURCE} KEY FORMAT AVRO {USING} VALUE FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY CONNECTION other")
    assert e.value.message == "the key and the value name different schema registries"


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("tail", "message", "caret"),
    [
        ("FORMAT AVRO", "FORMAT 'avro' reads its schemas from a schema registry", "AVRO"),
        ("FORMAT PROTOBUF", "FORMAT 'protobuf' reads its schemas from a schema registry", "PROTOBUF"),
        (
            "FORMAT TEXT ENVELOPE DEBEZIUM",
            "ENVELOPE 'debezium' needs the value's schema from a schema registry, found FORMAT 'text'",
            "ENVELOPE DEBEZIUM",
        ),
        (
            "FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY CONNECTION k",
            "connection k is a KAFKA connection, expected a CONFLUENT SCHEMA REGISTRY connection",
            "k",
        ),
        ("FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY CONNECTION nope", "unknown connection nope", "nope"),
        (
            "FORMAT TEXT USING CONFLUENT SCHEMA REGISTRY CONNECTION csr",
            "SCHEMA REGISTRY applies with FORMAT or KEY FORMAT 'avro', 'protobuf' or 'json', found FORMAT 'text'",
            "USING",
        ),
    ],
)
def test_refused_with_a_caret(session: Any, tail: str, message: str, caret: str) -> None:
    with pytest.raises(AnalysisError) as e:
        session.execute(f"{SOURCE} {tail}")
    assert e.value.message == message
    rendered = e.value.render().splitlines()
    marks = next(i for i, line in enumerate(rendered) if line.strip() and set(line.strip()) == {"^"})
    assert rendered[marks - 1][rendered[marks].index("^") :].startswith(caret), "\n".join(rendered)
    assert e.value.hint


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("FORMAT = 'avro', SCHEMA REGISTRY = csr, SCHEMA = 'a INT'", "FORMAT 'avro' through a schema registry takes no SCHEMA"),
        ("FORMAT = 'avro', SCHEMA REGISTRY = csr, RECORD NAME = 'shop.Order'", "RECORD NAME applies with SUBJECT NAME STRATEGY"),
        ("FORMAT = 'avro', SCHEMA REGISTRY = csr, SUBJECT NAME STRATEGY = 'record'", "SUBJECT NAME STRATEGY 'record' needs RECORD NAME"),
        ("FORMAT = 'json', SCHEMA = 'a INT', VALUE SUBJECT = 'x'", "VALUE SUBJECT applies with a schema registry"),
        ("FORMAT = 'avro', SCHEMA REGISTRY = csr, KEY SUBJECT = 'k'", "KEY SUBJECT applies when the key is read through the schema registry"),
        ("FORMAT = 'debezium-json', SCHEMA = 'a INT', ENVELOPE = 'debezium'", "ENVELOPE 'debezium' needs the value's schema"),
        ("FORMAT = 'avro', SCHEMA REGISTRY = csr, SUBJECT NAME STRATEGY = 'nope'", "invalid SUBJECT NAME STRATEGY 'nope'"),
    ],
)
def test_option_rules(session: Any, options: str, message: str) -> None:
    with pytest.raises(AnalysisError) as e:
        session.execute(f"CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC = 'orders', {options})")
    assert e.value.message.startswith(message), e.value.render()
    assert e.value.span is not None


# --------------------------------------------------------------------------- CREATE SOURCE


def test_create_fetches_the_latest_schema_and_fills_the_columns(session: Any, schema_registry: RegistryServer) -> None:
    schema_registry.register("orders-value", json.dumps({**ORDER, "fields": ORDER["fields"][:1]}))
    latest = schema_registry.register("orders-value", json.dumps(ORDER))
    (result,) = session.execute(f"{SOURCE} FORMAT AVRO {USING} INCLUDE OFFSET")
    assert result.statement == "CREATE SOURCE"
    plan = stored(session)
    spec = plan.kafka
    assert spec is not None
    assert (spec.registry, spec.value_schema_type, spec.value_subject) == ("csr", "AVRO", "orders-value")
    assert (spec.value_schema_id, spec.value_schema_version) == (latest["id"], 2)
    assert json.loads(spec.value_schema or "") == ORDER and spec.value_referenced == ()
    assert plan.format is P.SourceFormat.AVRO and spec.key_schema_type is None
    assert plan.schema == "`id` BIGINT NOT NULL, `note` STRING, `total` STRUCT<`cents`: BIGINT NOT NULL> NOT NULL"
    assert plan.columns == (
        P.Column("id", "bigint", False),
        P.Column("note", "string"),
        P.Column("total", "struct<cents:bigint>", False),
        P.Column("offset", "bigint"),
    )
    assert parse_schema(plan.schema) == plan.columns[:3]  # the DDL reads back as the same columns
    (create,) = session.execute("SHOW CREATE SOURCE orders")
    assert create.rows[0][1] == (
        "CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'avro', SCHEMA REGISTRY = csr) "
        "INCLUDE OFFSET"
    )
    (described,) = session.execute("DESCRIBE orders")
    rows = dict(described.rows)
    assert rows["kafka.registry"] == "csr" and rows["kafka.value_schema_id"] == latest["id"]
    (sources,) = session.execute("SHOW SOURCES")
    assert sources.rows == (("orders", "kafka (avro)", "topic orders on k, schemas from csr"),)
    assert P.plan_from_dict(json.loads(json.dumps(P.to_dict(plan)))) == plan


def test_a_subject_that_does_not_exist(session: Any) -> None:
    with pytest.raises(ExecutionError) as e:
        session.execute(f"{SOURCE}\n  FORMAT AVRO {USING}")
    assert e.value.message == "subject 'orders-value' does not exist in schema registry csr"
    assert "VALUE SUBJECT" in (e.value.hint or "")
    rendered = e.value.render()
    assert ":2:" in rendered.splitlines()[0] and "^" in rendered  # points at the USING clause
    assert session.store.get_object("source", "orders") is None


def test_a_subject_of_another_type(session: Any, schema_registry: RegistryServer) -> None:
    schema_registry.register("orders-value", '{"type": "object"}', "JSON")
    with pytest.raises(ExecutionError, match="holds a JSON schema, but the source reads AVRO"):
        session.execute(f"{SOURCE} FORMAT AVRO {USING}")


def test_debezium_columns_are_the_after_record(session: Any, schema_registry: RegistryServer) -> None:
    schema_registry.register("dbserver1.inventory.customers-value", json.dumps(DEBEZIUM))
    session.execute(
        "CREATE SOURCE customers FROM KAFKA CONNECTION k (TOPIC = 'dbserver1.inventory.customers') "
        f"FORMAT AVRO {USING} ENVELOPE DEBEZIUM"
    )
    plan = stored(session, "customers")
    assert plan.kafka is not None and plan.kafka.envelope is P.KafkaEnvelope.DEBEZIUM
    assert plan.columns == (P.Column("id", "int"), P.Column("email", "string"))
    assert plan.schema == "`id` INT, `email` STRING"


def test_upsert_with_a_registry_key(session: Any, schema_registry: RegistryServer) -> None:
    schema_registry.register("orders-key", json.dumps(KEY))
    schema_registry.register("orders-value", json.dumps(ORDER))
    session.execute(f"{SOURCE} KEY FORMAT AVRO {USING} VALUE FORMAT AVRO {USING} ENVELOPE UPSERT INCLUDE KEY AS k")
    plan = stored(session)
    spec = plan.kafka
    assert spec is not None
    assert (spec.key_schema_type, spec.key_subject, spec.key_schema_version) == ("AVRO", "orders-key", 1)
    assert json.loads(spec.key_schema_text or "") == KEY
    assert spec.key_columns == (P.Column("order_id", "bigint", False),)
    assert [c.name for c in plan.columns] == ["order_id", "id", "note", "total", "k"]
    assert plan.columns[-1] == P.Column("k", "struct<order_id:bigint>")


def test_subject_name_strategies(session: Any, schema_registry: RegistryServer) -> None:
    schema_registry.register("shop.Order", json.dumps(ORDER))
    schema_registry.register("orders-shop.Order", json.dumps(ORDER))
    schema_registry.register("custom", json.dumps(ORDER))
    for name, options, subject in (
        ("a", "SUBJECT NAME STRATEGY = 'record', RECORD NAME = 'shop.Order'", "shop.Order"),
        ("b", "SUBJECT NAME STRATEGY = 'TopicRecordNameStrategy', RECORD NAME = 'shop.Order'", "orders-shop.Order"),
        ("c", "VALUE SUBJECT = 'custom'", "custom"),
    ):
        session.execute(
            f"CREATE SOURCE {name} FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'avro', SCHEMA REGISTRY = csr, {options})"
        )
        spec = stored(session, name).kafka
        assert spec is not None and spec.value_subject == subject


def test_a_script_sees_the_columns_and_drop_follows_dependents(
    tmp_path: Path, schema_registry: RegistryServer
) -> None:
    schema_registry.register("orders-value", json.dumps(ORDER))
    with icesql.Session(home=tmp_path / "home") as s:
        s.execute(
            f"""
            CREATE SECRET pw AS 'unused-pw-1';
            CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = '{schema_registry.url}');
            CREATE CONNECTION k TO KAFKA (BROKER = 'localhost:9092') WITH (VALIDATE = false);
            {SOURCE} FORMAT AVRO {USING};
            CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = './warehouse');
            CREATE SINK sk FROM orders INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't') KEY (id) MODE UPSERT;
            """,
            atomic=True,
            base_dir=tmp_path,
        )
        sink = P.plan_from_dict(s.store.get_object("sink", "sk").definition)
        assert [c.name for c in sink.columns] == ["id", "note", "total"]
        with pytest.raises(AnalysisError):  # a key column the registry's schema does not have
            s.execute("CREATE SINK sk2 FROM orders INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't2') KEY (nope) MODE UPSERT")
        with pytest.raises((CatalogError, AnalysisError)) as e:
            s.execute("DROP CONNECTION csr")
        assert "orders" in e.value.message
        s.execute("DROP CONNECTION csr CASCADE")
        assert s.store.get_object("source", "orders") is None and s.store.get_object("sink", "sk") is None


def test_alter_source_is_refused(session: Any, schema_registry: RegistryServer) -> None:
    schema_registry.register("orders-value", json.dumps(ORDER))
    session.execute(f"{SOURCE} FORMAT AVRO {USING}")
    with pytest.raises(AnalysisError, match="reads its schema from schema registry csr"):
        session.execute("ALTER SOURCE orders SET (SCHEMA = 'a INT')")


def test_struct_ddl_quotes_names() -> None:
    struct = {"type": "struct", "fields": [
        {"name": "we`ird", "type": "long", "nullable": True},
        {"name": "m", "type": {"type": "map", "keyType": "string", "valueType": {"type": "array", "elementType": "integer"}}},
    ]}
    ddl = struct_ddl(struct)
    assert ddl == "`we``ird` BIGINT, `m` MAP<STRING, ARRAY<INT>>"
    assert parse_schema(ddl) == (P.Column("we`ird", "bigint"), P.Column("m", "map<string,array<int>>"))


def test_with_the_real_avro_decoder(tmp_path: Path, schema_registry: RegistryServer) -> None:
    schema_registry.register("orders-value", json.dumps(ORDER))
    with icesql.Session(home=tmp_path / "home") as s:
        s.execute(
            f"CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = '{schema_registry.url}');"
            "CREATE CONNECTION k TO KAFKA (BROKER = 'localhost:9092') WITH (VALIDATE = false);"
            f"{SOURCE} FORMAT AVRO {USING}"
        )
        plan = stored(s)
        assert [c.name for c in plan.columns] == ["id", "note", "total"]
        assert plan.columns[0].type == "bigint" and plan.columns[1] == P.Column("note", "string")


def test_check_leaves_the_registry_alone_and_the_columns_unknown(session: Any, schema_registry: RegistryServer) -> None:
    before = len(schema_registry.requests)
    errors = session.check(
        f"{SOURCE} FORMAT AVRO {USING} INCLUDE OFFSET;"
        "CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = './warehouse');"
        "CREATE SINK sk FROM orders INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't') KEY (id) MODE UPSERT"
    )
    assert errors == [] and len(schema_registry.requests) == before
