"""The shell's completion knows KAFKA connections and sources: their option lists, the
connection a source reads, INCLUDE items and ENVELOPE words."""

from __future__ import annotations

from icesql.repl.completion import Suggestion, suggest


def kinds(text: str) -> dict[str, Suggestion]:
    return {s.kind: s for s in suggest(text)}


def test_kafka_is_a_connection_kind_and_a_source_kind() -> None:
    assert "KAFKA" in kinds("CREATE CONNECTION k TO ").get("keyword", Suggestion("keyword", ())).values
    assert "KAFKA" in kinds("CREATE SOURCE s FROM ").get("keyword", Suggestion("keyword", ())).values


def test_connection_options_and_values() -> None:
    names = kinds("CREATE CONNECTION k TO KAFKA (").get("option")
    assert names is not None
    assert {"BROKER", "BROKERS", "SECURITY PROTOCOL", "SASL MECHANISMS", "SASL USERNAME", "SASL PASSWORD",
            "SSL CERTIFICATE AUTHORITY", "SSL CERTIFICATE", "SSL KEY"} <= set(names.values)
    values = kinds("CREATE CONNECTION k TO KAFKA (BROKER = 'b:1', SECURITY PROTOCOL = ").get("value")
    assert values is not None and "'sasl_ssl'" in values.values
    assert kinds("CREATE CONNECTION k TO KAFKA (SASL PASSWORD = ")["keyword"].values == ("SECRET",)


def test_a_source_offers_kafka_connections_and_its_own_options() -> None:
    assert kinds("CREATE SOURCE s FROM KAFKA CONNECTION ")["object"].values == ("connection",)
    names = kinds("CREATE SOURCE s FROM KAFKA CONNECTION k (")["option"].values
    assert {"TOPIC", "FORMAT", "START OFFSET", "START TIMESTAMP", "ENVELOPE", "KEY FORMAT", "KEY SCHEMA",
            "MAX RECORDS PER TRIGGER", "CONSUMER GROUP"} <= set(names)
    assert "CLEAN SOURCE" not in names and "HEADER" in names
    # HEADER only once the format is csv, as for files
    assert "HEADER" not in kinds("CREATE SOURCE s FROM KAFKA CONNECTION k (FORMAT = 'json', ")["option"].values
    values = kinds("CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'o', FORMAT = ")["value"].values
    assert {"'json'", "'csv'", "'text'", "'bytes'", "'debezium-json'", "'avro'", "'protobuf'"} == set(values)


def test_include_and_envelope_words() -> None:
    after = "CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'o', FORMAT = 'text') "
    assert {"INCLUDE", "ENVELOPE", "FORMAT"} <= set(kinds(after)["keyword"].values)
    assert kinds(after + "INCLUDE ")["keyword"].values == ("KEY", "PARTITION", "OFFSET", "TIMESTAMP", "HEADERS", "TOPIC")
    assert kinds(after + "INCLUDE KEY AS k, PA")["keyword"] == Suggestion(
        "keyword", ("KEY", "PARTITION", "OFFSET", "TIMESTAMP", "HEADERS", "TOPIC"), "PA"
    )
    assert kinds(after + "ENVELOPE ")["keyword"].values == ("NONE", "UPSERT", "DEBEZIUM")
