"""KAFKA connections and sources in the front-end: the spellings that mean one plan, the columns
a source has (the contract with the engine), START TIMESTAMP, and the words that stay names.
The error messages themselves are golden cases (tests/golden/analysis_errors/kafka.sql)."""

from __future__ import annotations

import pytest

from icesql.analyzer import MemoryCatalog, analyze
from icesql.analyzer.options import epoch_ms
from icesql.errors import AnalysisError
from icesql.plan import (
    Column,
    CreateObjectPlan,
    KafkaConnectionPlan,
    KafkaEnvelope,
    KafkaMetadata,
    SecretName,
    SourceFormat,
    SourceKind,
    SourcePlan,
    plan_from_dict,
    to_dict,
)
from icesql.syntax import ast as a
from icesql.syntax.lexer import option_list_kind, significant, tokenize
from icesql.syntax.parser import parse, parse_one
from icesql.syntax.printer import to_sql

CONNECTION = "CREATE CONNECTION k TO KAFKA (BROKER = 'localhost:9092') WITH (VALIDATE = false)"


def catalog() -> MemoryCatalog:
    cat = MemoryCatalog()
    cat.add_secret("pw")
    cat.apply(analyze(parse_one(CONNECTION), cat).plan)
    return cat


def plan_of(sql: str, cat: MemoryCatalog | None = None) -> SourcePlan | KafkaConnectionPlan:
    cat = cat or catalog()
    result = analyze(parse_one(sql), cat, source=sql)
    assert isinstance(result.plan, CreateObjectPlan)
    definition = result.plan.definition
    assert isinstance(definition, SourcePlan | KafkaConnectionPlan)
    # what the store keeps reads back as the same plan
    assert plan_from_dict(to_dict(definition)) == definition
    return definition


def source(options: str, tail: str = "") -> SourcePlan:
    plan = plan_of(f"CREATE SOURCE s FROM KAFKA CONNECTION k ({options}) {tail}")
    assert isinstance(plan, SourcePlan)
    return plan


def columns(plan: SourcePlan) -> list[tuple[str, str]]:
    return [(c.name, c.type) for c in plan.columns]


# --------------------------------------------------------------------------- spellings


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE CONNECTION k2 TO KAFKA (BROKER = 'b:9092', SECURITY PROTOCOL = 'SASL_SSL', SASL MECHANISMS = 'PLAIN', "
        "SASL USERNAME = 'u', SASL PASSWORD = SECRET pw)",
        "CREATE CONNECTION k2 TO KAFKA (BROKER 'b:9092', SECURITY PROTOCOL 'SASL_SSL', SASL MECHANISMS 'PLAIN', "
        "SASL USERNAME 'u', SASL PASSWORD = SECRET pw)",
        "create connection k2 to kafka (brokers = ('b:9092'), security protocol = 'sasl_ssl', sasl mechanism = 'plain', "
        "sasl username = 'u', sasl password secret = pw)",
    ],
)
def test_connection_spellings_give_one_plan(sql: str) -> None:
    assert plan_of(sql) == KafkaConnectionPlan(
        name="k2",
        brokers=("b:9092",),
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_username="u",
        sasl_password=SecretName("pw"),
    )


@pytest.mark.parametrize(
    "tail",
    [
        "(TOPIC = 'u', FORMAT = 'json', SCHEMA = 'v STRING', ENVELOPE = 'upsert', KEY FORMAT = 'text')",
        "(TOPIC 'u', SCHEMA = 'v STRING') KEY FORMAT TEXT VALUE FORMAT JSON ENVELOPE UPSERT",
        "(TOPIC 'u', SCHEMA = 'v STRING') FORMAT JSON ENVELOPE UPSERT",
        "(TOPIC = 'u', SCHEMA = 'v STRING', ENVELOPE = 'UPSERT') FORMAT 'json'",
    ],
)
def test_materialize_clauses_mean_the_options(tail: str) -> None:
    plan = plan_of(f"CREATE SOURCE s FROM KAFKA CONNECTION k {tail}")
    assert isinstance(plan, SourcePlan) and plan.kafka is not None
    assert plan.format is SourceFormat.JSON
    assert plan.kafka.envelope is KafkaEnvelope.UPSERT
    assert plan.kafka.key_format is SourceFormat.TEXT
    assert columns(plan) == [("key", "string"), ("v", "string")]


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE CONNECTION k TO KAFKA (BROKER 'a:1', BROKERS ('a:1', 'b:2',), SASL PASSWORD = SECRET p)",
        "CREATE SOURCE IF NOT EXISTS s FROM KAFKA CONNECTION \"K\" (TOPIC 'o', MAX RECORDS PER TRIGGER 5) "
        "KEY FORMAT BYTES FORMAT 'text' INCLUDE KEY AS \"Key\", PARTITION, offset as o ENVELOPE NONE",
        "CREATE SOURCE s FROM KAFKA CONNECTION k",
        "CREATE SOURCE s FROM KAFKA CONNECTION k INCLUDE HEADERS",
    ],
)
def test_round_trip(sql: str) -> None:
    (stmt,) = parse(sql)
    assert parse(to_sql(stmt)) == [stmt]
    assert parse(to_sql(parse(to_sql(stmt))[0])) == [stmt]


def test_the_tree_keeps_include_and_the_connection() -> None:
    stmt = parse_one("CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC 'o') INCLUDE PARTITION AS p, OFFSET")
    assert isinstance(stmt, a.CreateSource)
    assert stmt.source_kind is a.SourceKind.KAFKA and stmt.connection == a.Ident("k")
    assert stmt.include == (a.IncludeItem(a.Ident("partition"), a.Ident("p")), a.IncludeItem(a.Ident("offset")))
    # the dictionary form of a statement without them reads as before they existed
    files = parse_one("CREATE SOURCE f FROM FILES 'x' (FORMAT = 'parquet')").to_dict()
    assert "connection" not in files and "include" not in files


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE SECRET kafka AS 'x'",
        "CREATE SECRET include AS 'x'",
        "CREATE SECRET envelope AS 'x'",
        "CREATE SECRET format AS 'x'",
        "CREATE SECRET value AS 'x'",
        "DROP SOURCE offset",
        "CREATE SOURCE kafka FROM KAFKA CONNECTION kafka (TOPIC = 'include')",
        "CREATE SINK include FROM envelope TO ICEBERG CATALOG kafka NAMESPACE format TABLE value KEY (value, format)",
    ],
)
def test_the_new_keywords_stay_names(sql: str) -> None:
    assert parse(to_sql(parse_one(sql))) == [parse_one(sql)]


def test_option_lists_are_told_apart_lexically() -> None:
    def kind(text: str) -> str | None:
        toks = significant(tokenize(text))
        at = max(i for i, t in enumerate(toks) if t.text == "(")
        return option_list_kind([t.upper for t in toks if t.kind.name == "WORD"], toks[:at])

    assert kind("CREATE CONNECTION k TO KAFKA (") == "kafka"
    assert kind("CREATE SOURCE s FROM KAFKA CONNECTION k (") == "kafka_source"
    assert kind('CREATE SOURCE s FROM KAFKA CONNECTION "K" (') == "kafka_source"
    assert kind("CREATE SOURCE s FROM FILES 'x' (") == "source"


# --------------------------------------------------------------------------- columns


@pytest.mark.parametrize(
    ("options", "tail", "expected"),
    [
        ("FORMAT = 'text'", "", [("value", "string")]),
        ("FORMAT = 'bytes'", "", [("value", "binary")]),
        ("FORMAT = 'json', SCHEMA = 'a INT, b STRING'", "", [("a", "int"), ("b", "string")]),
        ("FORMAT = 'csv', SCHEMA = 'a INT'", "", [("a", "int")]),
        ("FORMAT = 'debezium-json', SCHEMA = 'a INT'", "INCLUDE OFFSET", [("a", "int"), ("offset", "bigint")]),
        (
            "FORMAT = 'text'",
            "INCLUDE KEY, PARTITION, OFFSET, TIMESTAMP, HEADERS",
            [
                ("value", "string"),
                ("key", "string"),
                ("partition", "int"),
                ("offset", "bigint"),
                ("timestamp", "timestamp"),
                ("headers", "array<struct<key:string,value:binary>>"),
            ],
        ),
        ("FORMAT = 'text', KEY FORMAT = 'bytes'", "INCLUDE KEY AS k", [("value", "string"), ("k", "binary")]),
        (
            "FORMAT = 'text', KEY FORMAT = 'json', KEY SCHEMA = 'id BIGINT, r STRING'",
            "INCLUDE KEY",
            [("value", "string"), ("key", "struct<id:bigint,r:string>")],
        ),
        ("FORMAT = 'bytes', ENVELOPE = 'upsert'", "", [("key", "string"), ("value", "binary")]),
        ("FORMAT = 'bytes', ENVELOPE = 'upsert', KEY FORMAT = 'bytes'", "", [("key", "binary"), ("value", "binary")]),
        (
            "FORMAT = 'json', SCHEMA = 'v STRING', ENVELOPE = 'upsert', KEY FORMAT = 'json', KEY SCHEMA = 'id BIGINT'",
            "INCLUDE KEY AS record_key, TIMESTAMP AS ts",
            [("id", "bigint"), ("v", "string"), ("record_key", "struct<id:bigint>"), ("ts", "timestamp")],
        ),
    ],
)
def test_columns_key_then_value_then_include(options: str, tail: str, expected: list[tuple[str, str]]) -> None:
    plan = source(f"TOPIC = 't', {options}", tail)
    assert plan.source_kind is SourceKind.KAFKA
    assert columns(plan) == expected
    assert plan.kafka is not None
    key = plan.kafka.key_columns
    if plan.kafka.envelope is KafkaEnvelope.UPSERT:
        assert plan.columns[: len(key)] == key and key
    else:
        assert key == ()


def test_upsert_key_columns_keep_not_null() -> None:
    plan = source(
        "TOPIC = 't', FORMAT = 'text', ENVELOPE = 'upsert', KEY FORMAT = 'json', KEY SCHEMA = 'id BIGINT NOT NULL'"
    )
    assert plan.kafka is not None and plan.kafka.key_columns == (Column("id", "bigint", nullable=False),)


def test_include_items_in_order_with_names() -> None:
    plan = source("TOPIC = 't', FORMAT = 'text'", "INCLUDE HEADERS AS h, OFFSET")
    assert plan.kafka is not None
    assert [(i.what, i.name) for i in plan.kafka.include] == [
        (KafkaMetadata.HEADERS, "h"),
        (KafkaMetadata.OFFSET, "offset"),
    ]


def test_source_depends_on_its_connection() -> None:
    result = analyze(parse_one("CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 't', FORMAT = 'text')"), catalog())
    assert isinstance(result.plan, CreateObjectPlan)
    assert result.plan.dependencies == (("connection", "k"),)


def test_connection_depends_on_its_secrets() -> None:
    cat = catalog()
    cat.add_secret("ca")
    result = analyze(
        parse_one(
            "CREATE CONNECTION k2 TO KAFKA (BROKER = 'b:1', SECURITY PROTOCOL = 'SASL_SSL', SASL MECHANISMS = 'PLAIN', "
            "SASL USERNAME = SECRET pw, SASL PASSWORD = SECRET pw, SSL CERTIFICATE AUTHORITY = SECRET ca)"
        ),
        cat,
    )
    assert isinstance(result.plan, CreateObjectPlan)
    assert result.plan.dependencies == (("secret", "pw"), ("secret", "ca"))


# --------------------------------------------------------------------------- START TIMESTAMP


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1970-01-01T00:00:00Z", 0),
        ("2026-01-01T00:00:00Z", 1767225600000),
        ("2026-01-01T00:00:00", 1767225600000),  # no zone: UTC
        ("2026-01-01 00:00:00", 1767225600000),
        ("2026-01-01", 1767225600000),
        ("2026-01-01T01:00:00+01:00", 1767225600000),
        ("2026-01-01T00:00:00.123z", 1767225600123),
        ("yesterday", None),
        ("1969-12-31T23:59:59Z", None),
        ("", None),
    ],
)
def test_start_timestamp(text: str, ms: int | None) -> None:
    assert epoch_ms(text) == ms


def test_start_timestamp_in_the_plan() -> None:
    plan = source("TOPIC = 't', FORMAT = 'text', START TIMESTAMP = '2026-01-01T00:00:00Z'")
    assert plan.kafka is not None and plan.kafka.start_timestamp_ms == 1767225600000
    assert plan.kafka.start_offset == "earliest"
    with pytest.raises(AnalysisError, match="START TIMESTAMP expects"):
        source("TOPIC = 't', FORMAT = 'text', START TIMESTAMP = 1.5")


def test_a_source_without_catalog_view_still_plans() -> None:
    from icesql.analyzer.diagnostics import Context
    from icesql.analyzer.sources import analyze_source

    stmt = parse_one("CREATE SOURCE s FROM KAFKA CONNECTION nowhere (TOPIC = 't', FORMAT = 'text')")
    assert isinstance(stmt, a.CreateSource)
    plan = analyze_source(Context(None, None, None), stmt, None)
    assert plan.kafka is not None and plan.kafka.connection == "nowhere"
