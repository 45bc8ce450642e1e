"""icesql's registry client against the stand-in, with the schemas written by Confluent's own client
and serializers (``confluent_kafka.schema_registry``): what they register, icesql reads back by id,
by GUID and by subject, references resolved; and its failures, one line each, transient or not."""

from __future__ import annotations

import json
import pickle
import tempfile
import uuid
from typing import Any

import pytest

from icesql.engine.connections import failures
from icesql.engine.connections.registry import (
    SUBJECT_NOT_FOUND,
    RegistryClient,
    RegistryConfig,
    RegistryError,
    RegistryNotFoundError,
    RegistryUnavailableError,
    client_for,
)
from tests.support.registry import RegistryServer

sr = pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry import SchemaRegistryClient, header_schema_id_serializer  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONSerializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}],
    }
)
PAY = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Pay",
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "required": ["id"],
    }
)


def confluent(server: RegistryServer) -> Any:
    conf: dict[str, Any] = {"url": server.url}
    if server.username:
        conf["basic.auth.user.info"] = f"{server.username}:{server.password}"
    if server.ca_pem:
        with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as f:
            f.write(server.ca_pem)
        conf["ssl.ca.location"] = f.name
    return SchemaRegistryClient(conf)


def ours(server: RegistryServer, **kw: Any) -> RegistryClient:
    return RegistryClient(
        RegistryConfig("csr", server.url, server.username, server.password, server.ca_pem, **kw)
    )


def protobuf_order() -> Any:
    """shop.Order importing shop/money.proto: a schema with a reference, as protoc would make it."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    money = descriptor_pb2.FileDescriptorProto(name="shop/money.proto", package="shop", syntax="proto3")
    m = money.message_type.add(name="Money")
    m.field.add(name="cents", number=1, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    order = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto", package="shop", syntax="proto3", dependency=["shop/money.proto"]
    )
    o = order.message_type.add(name="Order")
    o.field.add(name="id", number=1, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    o.field.add(name="total", number=2, type=field.TYPE_MESSAGE, type_name=".shop.Money", label=field.LABEL_OPTIONAL)
    pool.Add(money)
    pool.Add(order)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def framed_id(data: bytes) -> int:
    assert data[0] == 0
    return int.from_bytes(data[1:5], "big")


def test_avro_registered_by_the_serializer_reads_back_by_id_guid_and_subject(schema_registry: RegistryServer) -> None:
    ctx = SerializationContext("orders", MessageField.VALUE)
    data = AvroSerializer(confluent(schema_registry), ORDER)({"id": 1, "note": "x"}, ctx)
    client = ours(schema_registry)
    by_id = client.schema_by_id(framed_id(data))
    assert by_id.schema_type == "AVRO" and json.loads(by_id.schema) == json.loads(ORDER)
    latest = client.latest("orders-value")
    assert (latest.id, latest.version, latest.subject) == (by_id.id, 1, "orders-value")
    assert client.version("orders-value", 1).schema == latest.schema
    assert client.subjects() == ["orders-value"]
    # the serializer writing the schema's GUID in a header instead of the 5-byte prefix
    headers: list[tuple[str, bytes]] = []
    AvroSerializer(confluent(schema_registry), ORDER, conf={"schema.id.serializer": header_schema_id_serializer})(
        {"id": 2, "note": None}, SerializationContext("orders", MessageField.VALUE, headers)
    )
    (name, value), = headers
    assert name == "__value_schema_id" and value[0] == 1 and len(value) == 17
    guid = str(uuid.UUID(bytes=value[1:]))
    by_guid = client.schema_by_guid(guid)
    assert by_guid.id == by_id.id and by_guid.schema == by_id.schema
    # the same schema registered again keeps its id; a new one gets the next id and version
    again = AvroSerializer(confluent(schema_registry), ORDER)({"id": 3, "note": None}, ctx)
    assert framed_id(again) == by_id.id
    wider = json.loads(ORDER)
    wider["fields"].append({"name": "qty", "type": "int", "default": 1})
    data2 = AvroSerializer(confluent(schema_registry), json.dumps(wider))({"id": 4, "note": None, "qty": 2}, ctx)
    assert framed_id(data2) != by_id.id
    assert client.latest("orders-value").version == 2


def test_protobuf_references_are_resolved_transitively(schema_registry: RegistryServer) -> None:
    order = protobuf_order()
    msg = order(id=5)
    msg.total.cents = 100
    data = ProtobufSerializer(order, confluent(schema_registry), {"use.deprecated.format": False})(
        msg, SerializationContext("orders", MessageField.VALUE)
    )
    client = ours(schema_registry)
    found = client.schema_by_id(framed_id(data))
    assert found.schema_type == "PROTOBUF"
    assert [(r.name, r.subject, r.version) for r in found.references] == [("shop/money.proto", "shop/money.proto", 1)]
    (name, text), = found.referenced
    assert name == "shop/money.proto" and text == client.latest("shop/money.proto").schema
    # what the decoders get is Confluent's serialized form: a FileDescriptorProto in base64
    import base64

    from google.protobuf import descriptor_pb2

    fd = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(found.schema))
    assert fd.name == "shop/order.proto" and list(fd.dependency) == ["shop/money.proto"]


def test_avro_named_type_reference_two_levels_deep(schema_registry: RegistryServer) -> None:
    cents = schema_registry.register("shop.Cents", json.dumps({"type": "fixed", "name": "Cents", "namespace": "shop", "size": 8}))
    money_schema = {"type": "record", "name": "Money", "namespace": "shop", "fields": [{"name": "c", "type": "shop.Cents"}]}
    money = schema_registry.register(
        "shop.Money", json.dumps(money_schema), references=[{"name": "shop.Cents", "subject": "shop.Cents", "version": 1}]
    )
    order = {"type": "record", "name": "Order", "namespace": "shop", "fields": [{"name": "total", "type": "shop.Money"}]}
    top = schema_registry.register(
        "orders-value", json.dumps(order), references=[{"name": "shop.Money", "subject": "shop.Money", "version": 1}]
    )
    found = ours(schema_registry).schema_by_id(top["id"])
    assert [n for n, _ in found.referenced] == ["shop.Cents", "shop.Money"]  # what is imported comes first
    assert cents["id"] != money["id"] != top["id"]


def test_json_schema_through_the_serializer(schema_registry: RegistryServer) -> None:
    data = JSONSerializer(PAY, confluent(schema_registry))({"id": 3}, SerializationContext("pay", MessageField.VALUE))
    found = ours(schema_registry).schema_by_id(framed_id(data))
    assert found.schema_type == "JSON" and json.loads(found.schema)["title"] == "Pay"


def test_schemas_are_cached_forever_latest_is_not(schema_registry: RegistryServer) -> None:
    sid = schema_registry.register("orders-value", ORDER)["id"]
    client = ours(schema_registry)
    client.schema_by_id(sid)
    before = len(schema_registry.requests)
    client.schema_by_id(sid)
    client.version("orders-value", 1)
    assert len(schema_registry.requests) == before + 1  # the version, once; the id came from the cache
    client.version("orders-value", 1)
    client.latest("orders-value")
    client.latest("orders-value")
    assert len(schema_registry.requests) == before + 3


def test_the_client_pickles_as_its_config_and_hides_the_password(secure_registry: RegistryServer) -> None:
    client = client_for(RegistryConfig("csr", secure_registry.url, "icesql", secure_registry.password, secure_registry.ca_pem))
    assert client_for(client.config) is client  # one per process and configuration
    copy = pickle.loads(pickle.dumps(client))
    assert copy is client  # unpickled in the same process: the same client, its caches shared
    payload = pickle.dumps(client.config)
    assert len(payload) < 4000
    for text in (repr(client), repr(client.config), str(client.config)):
        assert secure_registry.password not in text and "BEGIN CERTIFICATE" not in text


def test_basic_auth_and_tls_with_the_connection_ca(secure_registry: RegistryServer) -> None:
    secure_registry.register("orders-value", ORDER)
    assert ours(secure_registry).subjects() == ["orders-value"]
    wrong = RegistryClient(RegistryConfig("csr", secure_registry.url, "icesql", "not-it", secure_registry.ca_pem))
    with pytest.raises(RegistryError) as e:
        wrong.subjects()
    assert str(e.value.message) == "schema registry csr refused the credentials (401): check USERNAME and PASSWORD"
    assert not e.value.transient and "not-it" not in e.value.render()
    untrusted = RegistryClient(RegistryConfig("csr", secure_registry.url, "icesql", secure_registry.password))
    with pytest.raises(RegistryError) as e:
        untrusted.subjects()
    assert e.value.message.startswith(f"TLS handshake with schema registry csr at {secure_registry.url} failed")
    assert "certificate verify failed" in e.value.message and not e.value.transient
    assert "SSL CERTIFICATE AUTHORITY" in (e.value.hint or "")


def test_not_found_is_permanent_and_names_what(schema_registry: RegistryServer) -> None:
    client = ours(schema_registry)
    with pytest.raises(RegistryNotFoundError) as e:
        client.latest("nope-value")
    assert e.value.error_code == SUBJECT_NOT_FOUND and not e.value.transient
    assert e.value.message.startswith("schema registry csr has no subject 'nope-value'")
    with pytest.raises(RegistryNotFoundError) as e:
        client.schema_by_id(99)
    assert e.value.error_code == 40403 and "schema id 99" in e.value.message
    schema_registry.register("orders-value", ORDER)
    with pytest.raises(RegistryNotFoundError) as e:
        client.version("orders-value", 7)
    assert e.value.error_code == 40402


def test_server_errors_are_retried_then_transient(schema_registry: RegistryServer) -> None:
    schema_registry.register("orders-value", ORDER)
    client = ours(schema_registry)
    schema_registry.fail_next(2)  # the client's own retries get past two
    assert client.subjects() == ["orders-value"]
    schema_registry.fail_next(3, status=503)
    with pytest.raises(RegistryUnavailableError) as e:
        client.subjects()
    assert e.value.transient and e.value.status == 503
    assert e.value.message == "schema registry csr failed on its side (HTTP 503: injected failure)"
    # what a Spark task's error text carries reads back as transient, in the same words
    err = failures.describe_failure(RuntimeError("Python worker: " + e.value.marked()), label="sink s", endpoint=None)
    assert failures.is_transient(err) and e.value.message in err.message


def test_a_registry_down_is_transient_and_named_by_url(schema_registry: RegistryServer) -> None:
    schema_registry.register("orders-value", ORDER)
    client = ours(schema_registry, timeout=2.0)
    schema_registry.stop()
    with pytest.raises(RegistryUnavailableError) as e:
        client.latest("orders-value")
    assert e.value.message == f"schema registry csr unreachable at {schema_registry.url} (connection refused)"
    assert e.value.transient and "check URL" in (e.value.hint or "")
    schema_registry.start()  # back on the same port, schemas kept
    assert client.latest("orders-value").version == 1
    refused = RegistryError("schema registry csr refused the credentials (401): check USERNAME and PASSWORD")
    err = failures.describe_failure(RuntimeError(refused.marked()), label="sink s", endpoint=None)
    assert not failures.is_transient(err)


def test_an_answer_that_is_not_a_registry(tmp_path: Any) -> None:
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<html>hello</html>")

        def log_message(self, *a: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = RegistryClient(RegistryConfig("csr", f"http://127.0.0.1:{server.server_address[1]}"))
        with pytest.raises(RegistryError) as e:
            client.subjects()
        assert "did not answer as a schema registry" in e.value.message and not e.value.transient
    finally:
        server.shutdown()
        server.server_close()


def test_the_stand_in_answers_the_real_clients_other_calls(schema_registry: RegistryServer) -> None:
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    client = confluent(schema_registry)
    sid = client.register_schema("orders-value", Schema(ORDER, "AVRO"))
    assert client.register_schema("orders-value", Schema(ORDER, "AVRO")) == sid
    found = client.lookup_schema("orders-value", Schema(ORDER, "AVRO"))
    assert (found.schema_id, found.version, found.subject) == (sid, 1, "orders-value")
    assert client.get_subjects() == ["orders-value"] and client.get_versions("orders-value") == [1]
    assert client.get_latest_version("orders-value").schema_id == sid
    assert client.get_schema(sid).schema_str == ORDER
    assert client.get_compatibility() == "BACKWARD"
    assert client.set_compatibility("orders-value", "FULL") == {"compatibility": "FULL"}
    assert client.get_compatibility("orders-value") == "FULL"
    with pytest.raises(SchemaRegistryError) as e:
        client.get_latest_version("missing-value")
    assert (e.value.http_status_code, e.value.error_code) == (404, 40401)
    with pytest.raises(SchemaRegistryError) as e:
        client.lookup_schema("orders-value", Schema(PAY, "JSON"))
    assert e.value.error_code == 40403
