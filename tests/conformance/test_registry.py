"""Kafka sources read through a Confluent Schema Registry, on both executors (issue 52).

Records are produced with the real client's serializers (``confluent_kafka.schema_registry``:
``JSONSerializer``, ``ProtobufSerializer``, ``AvroSerializer``) against the stand-in registry
(tests/support/registry.py: no Confluent-compatible server installs here, SPEC section 5) into
a real broker (noida-db), framed all three ways a record can name its schema: the 5-byte id
prefix, the 17-byte GUID prefix and the ``__value_schema_id`` header. The same rows produced as
plain JSON go to a second table; the tables must hold the same rows, and each executor's table
must equal the other's (``support.conformance``).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.conformance import Twins, assert_same_tables
from tests.support.registry import RegistryServer, schema_registry

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

__all__ = ["schema_registry"]

SINK = "INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = '{table}')"


def _confluent(server: RegistryServer) -> Any:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": server.url})


def _framed(
    serialize: Any, server: RegistryServer, topic: str, rows: list[dict[str, Any]]
) -> list[tuple[Any, ...]]:
    """Kafka records (key, value, headers) of ``rows``: every third with the id prefix, every
    third with the GUID prefix, every third with the id in a header (the serializers' three forms)."""
    from confluent_kafka.schema_registry import header_schema_id_serializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    plain, in_header = serialize(None), serialize({"schema.id.serializer": header_schema_id_serializer})
    out: list[tuple[Any, ...]] = []
    for i, row in enumerate(rows):
        key = str(row["id"]).encode()
        if i % 3 == 2:
            headers: list[tuple[str, bytes]] = []
            value = in_header(row, SerializationContext(topic, MessageField.VALUE, headers))
            out.append((key, value, headers))
            continue
        value = plain(row, SerializationContext(topic, MessageField.VALUE))
        if i % 3 == 1:  # the GUID form: magic 1, the schema's GUID, the same body
            sid = int.from_bytes(value[1:5], "big")
            guid = server.state.schemas[sid].guid
            value = b"\x01" + uuid.UUID(guid).bytes + value[5:]
        out.append((key, value, None))
    return out


ROWS_SCHEMA = "id BIGINT, name STRING, price DOUBLE, ok BOOLEAN, tags ARRAY<STRING>"


def _rows(start: int, n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "name": (f"n{i} ünïcödé ✓" if i % 4 else None),
            "price": [0.0, -1.5, 1e300, 2.25][i % 4] * (i + 1),
            "ok": i % 2 == 0,
            "tags": [f"t{j}" for j in range(i % 3)],
        }
        for i in range(start, start + n)
    ]


def _differential(
    twins: Twins,
    noida: Any,
    topic: str,
    source_sql: str,
    records: list[tuple[Any, ...]],
    rows: list[dict[str, Any]],
) -> None:
    """The registry source's table and a plain JSON source's table of the same rows: equal rows,
    and equal on both executors."""
    from tests.support import kafka as K

    K.create_topic(noida.bootstrap, topic, 2)
    K.create_topic(noida.bootstrap, f"{topic}-json", 2)
    twins.execute(
        source_sql
        + f"CREATE SOURCE plain FROM KAFKA CONNECTION kb (TOPIC = '{topic}-json', FORMAT = 'json', SCHEMA = '{ROWS_SCHEMA}');"
        f"CREATE SINK r FROM reg {SINK.format(table='reg')};"
        f"CREATE SINK p FROM plain {SINK.format(table='plain')};"
    )
    K.produce(noida.bootstrap, topic, [K.Record(key=k, value=v, headers=h) for k, v, h in records])
    K.produce(
        noida.bootstrap, f"{topic}-json", [(str(r["id"]).encode(), json.dumps(r).encode()) for r in rows]
    )
    twins.run(["r", "p"])
    here, there = twins.states("n.reg", "id, name, price, ok, tags")
    plain, _ = twins.states("n.plain", "id, name, price, ok, tags")
    assert len(here.rows) == len(rows)
    assert here.rows == plain.rows
    assert_same_tables(here, there)


def _twins(
    tmp_path: Path, spark: Any, caplog: pytest.LogCaptureFixture, noida: Any, registry: RegistryServer
) -> Twins:
    return Twins.make(
        tmp_path,
        spark,
        caplog,
        connection=f"CREATE CONNECTION kb TO KAFKA (BROKER = '{noida.bootstrap}');"
        f"CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = '{registry.url}');",
    )


JSON_SCHEMA = {
    "type": "object",
    "title": "Order",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": ["string", "null"]},
        "price": {"type": "number"},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id", "price", "ok", "tags"],
}


def test_json_schema_records_equal_plain_json(
    spark: Any, noida: Any, schema_registry: RegistryServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    topic = "registry-json"
    schema_registry.register(f"{topic}-value", json.dumps(JSON_SCHEMA), schema_type="JSON")
    client = _confluent(schema_registry)
    rows = _rows(0, 60)
    records = _framed(
        lambda conf: JSONSerializer(json.dumps(JSON_SCHEMA), client, conf=conf), schema_registry, topic, rows
    )
    twins = _twins(tmp_path, spark, caplog, noida, schema_registry)
    _differential(
        twins,
        noida,
        topic,
        f"CREATE SOURCE reg FROM KAFKA CONNECTION kb (TOPIC = '{topic}') FORMAT JSON USING CONFLUENT SCHEMA "
        "REGISTRY CONNECTION csr;",
        records,
        rows,
    )


ORDER_PROTO = """syntax = "proto3";
package icesql.conformance;
message Order { int64 id = 1; optional string name = 2; double price = 3; bool ok = 4; repeated string tags = 5; }
"""


def test_protobuf_records_equal_plain_json(
    spark: Any, noida: Any, schema_registry: RegistryServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Protobuf as Spark's ``from_protobuf`` reads it by default: a proto3 field without presence
    holding its zero value (id 0, price 0.0, ok false) reads null; ``optional`` name keeps ''."""
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    from tests.engine.test_registry_protobuf import classes

    topic = "registry-protobuf"
    order = classes(ORDER_PROTO).Order
    client = _confluent(schema_registry)

    def serializer(conf: Any) -> Any:
        ser = ProtobufSerializer(order, client, {"use.deprecated.format": False, **(conf or {})})
        return lambda row, ctx: ser(order(**{k: v for k, v in row.items() if v is not None}), ctx)

    rows = _rows(0, 60)
    records = _framed(serializer, schema_registry, topic, rows)  # registers the subject
    twins = _twins(tmp_path, spark, caplog, noida, schema_registry)
    from tests.support import kafka as K

    K.create_topic(noida.bootstrap, topic, 2)
    twins.execute(
        f"CREATE SOURCE reg FROM KAFKA CONNECTION kb (TOPIC = '{topic}') FORMAT PROTOBUF USING CONFLUENT SCHEMA "
        "REGISTRY CONNECTION csr;"
        f"CREATE SINK r FROM reg {SINK.format(table='reg')};"
    )
    K.produce(noida.bootstrap, topic, [K.Record(key=k, value=v, headers=h) for k, v, h in records])
    twins.run(["r"])
    here, there = twins.states("n.reg", "id, name, price, ok, tags")

    def zero_is_null(v: Any) -> Any:
        return None if v in (0, False) and v is not None else v

    want = sorted(
        (
            (zero_is_null(r["id"]), r["name"], zero_is_null(r["price"]), zero_is_null(r["ok"]), r["tags"])
            for r in rows
        ),
        key=repr,
    )
    got = sorted(((a, b, c, d, list(e) if e is not None else e) for a, b, c, d, e in here.rows), key=repr)
    assert got == want
    assert_same_tables(here, there)


def _avro_rows(n: int) -> list[dict[str, Any]]:
    """Rows for an Avro schema of every type: extremes, nulls, unicode, nested values."""
    import datetime as dt
    import decimal

    utc = dt.timezone.utc
    stamps = [
        dt.datetime(1900, 1, 1, 0, 0, 0, 1, tzinfo=utc),
        dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=utc),
        dt.datetime(2026, 11, 28, 10, 15, 30, 123456, tzinfo=utc),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=utc),
    ]
    days = [dt.date(1, 1, 1), dt.date(1969, 12, 31), dt.date(2026, 11, 28), dt.date(9999, 12, 31)]
    ints = [-(2**31), 2**31 - 1, 0, 7]
    longs = [-(2**63), 2**63 - 1, 0, -7]
    doubles = [1.7976931348623157e308, -5e-324, -0.5, 2.0]
    out = []
    for i in range(n):
        k = i % 4
        out.append(
            {
                "id": i,
                "b": i % 3 == 0,
                "i": ints[k],
                "l": longs[k],
                "f": [1.5, -0.25, 3.0e38, 0.0][k],
                "d": doubles[k],
                "s": ["", "ascii", "ünïcödé ✓ 日本語 🧊", 'quote " backslash \\ newline \n tab \t'][k],
                "e": ["RED", "GREEN", "BLUE", "RED"][k],
                "n": None if k == 0 else f"n{i}",
                "rec": {"x": ints[k], "y": None if k == 1 else f"y{i}", "inner": {"z": longs[k]}},
                "arr": [] if k == 0 else list(range(k)),
                "dec": decimal.Decimal(["-99999999.99", "0.01", "12345678.90", "0.00"][k]),
                "day": days[k],
                "tm": [0, 86_399_999, 3_600_000, 1][k],
                "tu": [0, 86_399_999_999, 1, 42][k],
                "tsm": stamps[k].replace(microsecond=stamps[k].microsecond // 1000 * 1000),
                "tsu": stamps[k],
                "lts": stamps[k].replace(tzinfo=None),
                "uid": str(uuid.UUID(int=i * 7919 + 1)),
                "bin": bytes([i % 256, 0, 255]) * k,
                "fx": bytes([k, 1, 2, 3]),
                "m": {f"k{j}": longs[(j + k) % 4] for j in range(k)},
                "odd": [float("nan"), float("inf"), float("-inf"), None][k],
            }
        )
    return out


AVRO_ROWS = {
    "type": "record",
    "name": "Everything",
    "namespace": "icesql.conformance",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "n", "type": ["null", "string"], "default": None},
        {
            "name": "rec",
            "type": {
                "type": "record",
                "name": "Rec",
                "fields": [
                    {"name": "x", "type": "int"},
                    {"name": "y", "type": ["null", "string"], "default": None},
                    {
                        "name": "inner",
                        "type": {
                            "type": "record",
                            "name": "Inner",
                            "fields": [{"name": "z", "type": "long"}],
                        },
                    },
                ],
            },
        },
        {"name": "arr", "type": {"type": "array", "items": "int"}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "bin", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "m", "type": {"type": "map", "values": "long"}},
        {"name": "odd", "type": ["null", "double"], "default": None},
    ],
}
# the columns a JSON twin of the same rows can hold on the Arrow path (Spark's JSON reader has no
# binary, fixed or map reading there, and no NaN or infinity in JSON numbers)
TWIN = (
    "id BIGINT, b BOOLEAN, i INT, l BIGINT, f FLOAT, d DOUBLE, s STRING, e STRING, n STRING, "
    "rec STRUCT<x: INT, y: STRING, inner: STRUCT<z: BIGINT>>, arr ARRAY<INT>, dec DECIMAL(10,2), day DATE, "
    "tm INT, tu BIGINT, tsm TIMESTAMP, tsu TIMESTAMP, lts TIMESTAMP_NTZ, uid STRING"
)
TWIN_COLUMNS = "id, b, i, l, f, d, s, e, n, rec, arr, dec, day, tm, tu, tsm, tsu, lts, uid"


def _as_json(row: dict[str, Any]) -> dict[str, Any]:
    """A row as JSON text a Spark JSON reader reads as the Avro decoder reads the Avro one."""
    return {
        **{
            k: row[k] for k in ("id", "b", "i", "l", "f", "d", "s", "e", "n", "rec", "arr", "tm", "tu", "uid")
        },
        "dec": str(row["dec"]),
        "day": row["day"].isoformat(),
        "tsm": row["tsm"].isoformat(),
        "tsu": row["tsu"].isoformat(),
        "lts": row["lts"].isoformat(),
    }


def _avro_and_twin(
    spark: Any,
    noida: Any,
    schema_registry: RegistryServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    topic: str,
) -> tuple[Twins, list[dict[str, Any]]]:
    """The rows of ``_avro_rows`` as registry-framed Avro (the real AvroSerializer, all three
    framings) in table ``reg`` and as plain JSON in ``plain``, on both executors."""
    from confluent_kafka.schema_registry.avro import AvroSerializer

    from tests.support import kafka as K

    schema_registry.register(f"{topic}-value", json.dumps(AVRO_ROWS))
    client = _confluent(schema_registry)
    rows = _avro_rows(48)
    records = _framed(
        lambda conf: AvroSerializer(client, json.dumps(AVRO_ROWS), conf=conf), schema_registry, topic, rows
    )
    twins = _twins(tmp_path, spark, caplog, noida, schema_registry)
    for t in (topic, f"{topic}-json"):
        K.create_topic(noida.bootstrap, t, 2)
    twins.execute(
        f"CREATE SOURCE reg FROM KAFKA CONNECTION kb (TOPIC = '{topic}') FORMAT AVRO USING CONFLUENT SCHEMA "
        "REGISTRY CONNECTION csr;"
        f"CREATE SOURCE plain FROM KAFKA CONNECTION kb (TOPIC = '{topic}-json', FORMAT = 'json', SCHEMA = '{TWIN}');"
        f"CREATE SINK r FROM reg {SINK.format(table='reg')};"
        f"CREATE SINK p FROM plain {SINK.format(table='plain')};"
    )
    K.produce(noida.bootstrap, topic, [K.Record(key=k, value=v, headers=h) for k, v, h in records])
    K.produce(
        noida.bootstrap,
        f"{topic}-json",
        [(str(r["id"]).encode(), json.dumps(_as_json(r)).encode()) for r in rows],
    )
    twins.run(["r", "p"])
    return twins, rows


def test_avro_records_of_every_type_equal_plain_json(
    spark: Any, noida: Any, schema_registry: RegistryServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every Avro type the decoder maps, produced by the real AvroSerializer in all three
    framings: the columns a JSON twin can hold equal the twin's (both executors), and the rest
    (bytes, fixed, a map, NaN and infinities) equal what was produced."""
    twins, rows = _avro_and_twin(spark, noida, schema_registry, tmp_path, caplog, "registry-avro")
    here, there = twins.states("n.reg", TWIN_COLUMNS)
    plain, _ = twins.states("n.plain", TWIN_COLUMNS)
    assert len(here.rows) == len(rows)
    assert here.rows == plain.rows
    assert_same_tables(here, there)
    rest, rest_there = twins.states("n.reg", "id, bin, fx, m")
    assert rest.rows == rest_there.rows
    by_id = {r["id"]: r for r in rows}
    assert sorted(r[0] for r in rest.rows) == sorted(by_id)
    for rid, binary, fixed, mapping in rest.rows:
        row = by_id[rid]
        assert bytes(binary) == row["bin"] and bytes(fixed) == row["fx"], rid
        assert dict(mapping or {}) == row["m"], (rid, mapping)
    # NaN equals nothing, not even itself: compared as text, read by pyiceberg on both executors
    for executor in twins:
        odd = twins[executor].table("n.reg").scan(selected_fields=("id", "odd")).to_arrow().sort_by("id")
        assert [repr(v) for v in odd.column("odd").to_pylist()] == [repr(r["odd"]) for r in rows], executor


def test_a_registry_version_that_adds_a_field_widens_the_table_on_both_executors(
    spark: Any, noida: Any, schema_registry: RegistryServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """v2 of the subject adds a nullable field: the batch with its records restarts the sink,
    which reads v2 and adds the column (in one commit), old rows null (Spark's tasks raise the
    same marked error as this process's)."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from tests.support import kafka as K

    def item(fields: list[dict[str, Any]]) -> str:
        return json.dumps({"type": "record", "name": "Item", "fields": fields})

    v1 = item([{"name": "id", "type": "long"}, {"name": "v", "type": "string"}])
    v2 = item(
        [
            {"name": "id", "type": "long"},
            {"name": "v", "type": "string"},
            {"name": "w", "type": ["null", "double"], "default": None},
        ]
    )
    topic = "registry-evolves"
    schema_registry.register(f"{topic}-value", v1)
    K.create_topic(noida.bootstrap, topic, 2)
    twins = _twins(tmp_path, spark, caplog, noida, schema_registry)
    twins.execute(
        f"CREATE SOURCE reg FROM KAFKA CONNECTION kb (TOPIC = '{topic}') FORMAT AVRO USING CONFLUENT SCHEMA "
        f"REGISTRY CONNECTION csr; CREATE SINK r FROM reg {SINK.format(table='reg')};"
    )
    ctx = SerializationContext(topic, MessageField.VALUE)
    client = _confluent(schema_registry)
    first = AvroSerializer(client, v1)
    K.produce(
        noida.bootstrap, topic, [(str(i).encode(), first({"id": i, "v": f"a{i}"}, ctx)) for i in range(4)]
    )
    twins.run(["r"])
    second = AvroSerializer(client, v2)
    K.produce(
        noida.bootstrap,
        topic,
        [(str(i).encode(), second({"id": i, "v": f"b{i}", "w": i / 4}, ctx)) for i in range(4, 8)],
    )
    twins.run(["r"])
    here, there = twins.states("n.reg")
    assert [p for _, p, _, _ in here.schema] == ["id", "v", "w"]
    assert here.rows == sorted(
        [*((i, f"a{i}", None) for i in range(4)), *((i, f"b{i}", i / 4) for i in range(4, 8))], key=repr
    )
    assert_same_tables(here, there)


def test_avro_keys_and_values_with_envelope_upsert(
    spark: Any, noida: Any, schema_registry: RegistryServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """KEY FORMAT AVRO ... VALUE FORMAT AVRO ... ENVELOPE UPSERT: the key record's fields are the
    row's key, a later value replaces the row, a tombstone deletes it; both executors."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from tests.support import kafka as K

    key_schema = json.dumps(
        {
            "type": "record",
            "name": "Key",
            "fields": [{"name": "region", "type": "string"}, {"name": "id", "type": "long"}],
        }
    )
    value_schema = json.dumps(
        {
            "type": "record",
            "name": "Value",
            "fields": [
                {"name": "qty", "type": "int"},
                {"name": "note", "type": ["null", "string"], "default": None},
            ],
        }
    )
    topic = "registry-upsert"
    schema_registry.register(f"{topic}-key", key_schema)
    schema_registry.register(f"{topic}-value", value_schema)
    K.create_topic(noida.bootstrap, topic, 2)
    twins = _twins(tmp_path, spark, caplog, noida, schema_registry)
    using = "USING CONFLUENT SCHEMA REGISTRY CONNECTION csr"
    twins.execute(
        f"CREATE SOURCE ups FROM KAFKA CONNECTION kb (TOPIC = '{topic}') KEY FORMAT AVRO {using} "
        f"VALUE FORMAT AVRO {using} ENVELOPE UPSERT;"
        f"CREATE SINK k FROM ups {SINK.format(table='ups')} KEY (region, id) MODE UPSERT;"
    )
    client = _confluent(schema_registry)
    keys, values = AvroSerializer(client, key_schema), AvroSerializer(client, value_schema)
    kctx, vctx = (
        SerializationContext(topic, MessageField.KEY),
        SerializationContext(topic, MessageField.VALUE),
    )
    state: dict[tuple[str, int], tuple[Any, ...]] = {}
    for r in range(3):
        records = []
        for i in range(r * 4, r * 4 + 16):
            key = {"region": ["eu", "us"][i % 2], "id": i % 11}
            if (i + r) % 5 == 0:
                records.append((keys(key, kctx), None))  # a tombstone
                state.pop((key["region"], key["id"]), None)
            else:
                value = {"qty": i, "note": None if i % 3 else f"r{r} ✓"}
                records.append((keys(key, kctx), values(value, vctx)))
                state[(key["region"], key["id"])] = (key["region"], key["id"], i, value["note"])
        K.produce(noida.bootstrap, topic, records)
        twins.run(["k"])
        here, there = twins.states("n.ups", "region, id, qty, note")
        assert here.rows == sorted(state.values(), key=repr), f"round {r}"
        assert_same_tables(here, there)


def test_bad_registry_records_go_to_the_dead_letter_table_on_both_executors(
    spark: Any, noida: Any, schema_registry: RegistryServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """ON ERROR = 'dead-letter': a record without the framing, one naming an unknown schema and
    one whose body does not decode land in the dead-letter table (with their position, the error
    and their bytes), the good ones in the target; in process too (no move to Spark)."""
    import base64

    from tests.support import kafka as K

    topic = "registry-letters"
    sid = int(schema_registry.register(f"{topic}-value", json.dumps(JSON_SCHEMA), schema_type="JSON")["id"])
    K.create_topic(noida.bootstrap, topic, 1)
    twins = _twins(tmp_path, spark, caplog, noida, schema_registry)
    twins.execute(
        f"CREATE SOURCE reg FROM KAFKA CONNECTION kb (TOPIC = '{topic}', ON ERROR = 'dead-letter') FORMAT JSON "
        f"USING CONFLUENT SCHEMA REGISTRY CONNECTION csr; CREATE SINK r FROM reg {SINK.format(table='reg')};"
    )

    def framed(schema_id: int, body: bytes) -> bytes:
        return b"\x00" + schema_id.to_bytes(4, "big") + body

    good = [
        framed(sid, json.dumps({"id": i, "price": 1.0, "ok": True, "tags": []}).encode()) for i in range(3)
    ]
    bad = [b"\x07junk", framed(4242, b'{"id": 9}'), framed(sid, b'{"id": ')]
    K.produce(
        noida.bootstrap, topic, [(b"k", v) for v in [good[0], bad[0], good[1], bad[1], bad[2], good[2]]]
    )
    twins.run(["r"])
    here, there = twins.states("n.reg", "id")
    assert here.rows == [(0,), (1,), (2,)]
    assert_same_tables(here, there)
    columns = "sink, source, file, byte_offset, reason, error, raw"
    here, there = twins.states("n.reg_dead_letters", columns)
    assert [r[3] for r in here.rows] == [1, 3, 4]  # their offsets
    assert [base64.b64decode(r[6].removeprefix("base64:")) for r in here.rows] == bad
    assert "magic byte 7" in here.rows[0][5] and "schema id 4242" in here.rows[1][5]
    assert {r[4] for r in here.rows} == {"schema-registry"}
    assert here.rows == there.rows


@pytest.mark.java
def test_avro_records_of_every_type_read_by_iceberg_java(
    spark: Any, noida: Any, schema_registry: RegistryServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The third reader: Iceberg Java reads the Avro table of both executors alike, its twin
    columns as the JSON twin's, and the rest as produced."""
    from tests.support.readers import java_available, read_java

    if not java_available():
        pytest.skip("the Iceberg Java readers harness is not built (../shared/tools/iceberg-readers-setup)")
    twins, rows = _avro_and_twin(spark, noida, schema_registry, tmp_path, caplog, "registry-avro-java")
    read = {
        (e, t): read_java(twins[e].table(f"n.{t}").metadata_location) for e in twins for t in ("reg", "plain")
    }
    assert read["in_process", "reg"]["digest"] == read["spark", "reg"]["digest"]
    assert read["in_process", "plain"]["digest"] == read["spark", "plain"]["digest"]
    assert read["spark", "reg"]["rows"] == len(rows)
    twin = [c.strip() for c in TWIN_COLUMNS.split(",")]

    def project(lines: list[str], keys: list[str]) -> list[str]:
        return sorted(json.dumps({k: json.loads(line)[k] for k in keys}, sort_keys=True) for line in lines)

    assert project(read["spark", "reg"]["all"], twin) == project(read["spark", "plain"]["all"], twin)
    by_id = {r["id"]: r for r in rows}
    for line in read["spark", "reg"]["all"]:
        got = json.loads(line)
        row = by_id[got["id"]]
        assert (got["bin"], got["fx"], got["m"] or {}) == (row["bin"].hex(), row["fx"].hex(), row["m"]), got[
            "id"
        ]
        assert got["odd"] == (None if row["odd"] is None else repr(row["odd"])), got["id"]
