"""Decode throughput of registry-framed Kafka records (issue 52): the Protobuf and JSON Schema
decoders against the obvious Python code a user would write instead.

    PYTHONPATH=. .venv/bin/python benchmarks/registry_proto_json_decode.py [--records 1000000] [--batch 10000]

The records are simple (an int64 id, a string, a double, a bool, an int32 and a timestamp), their
bodies made once before timing: Protobuf as the serializer frames them after the 5-byte prefix (the
message-index byte 0, then the message; the first few are checked against confluent-kafka's own
ProtobufSerializer), JSON as its JSONSerializer writes them. Each decoder is called on batches of
``--batch`` bodies, as a Kafka fetch hands them over, and must give one row per record. Peers, same
bodies, same Arrow result: Protobuf parsed per record then ``json_format.MessageToDict`` into
``pa.Table.from_pylist`` (the documented route to dicts); JSON by ``json.loads`` per record into
``pa.Table.from_pylist``. Best of ``--repeat`` runs; records per second.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROTO = """syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Event { int64 id = 1; string name = 2; double amount = 3; bool ok = 4; int32 count = 5;
                google.protobuf.Timestamp at = 6; }
"""
JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "amount": {"type": "number"},
        "ok": {"type": "boolean"},
        "count": {"type": "integer", "connect.type": "int32"},
        "at": {"type": "string", "format": "date-time"},
    },
    "required": ["id"],
}


def records(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "name": f"customer-{i % 9973}",
            "amount": i * 0.25,
            "ok": i % 3 == 0,
            "count": i % 1000,
            "seconds": 1_700_000_000 + i,
            "nanos": (i % 1000) * 1000,
        }
        for i in range(n)
    ]


def proto_bodies(rows: list[dict[str, Any]]) -> tuple[Any, Any, list[bytes]]:
    from google.protobuf import message_factory

    from icesql.engine.connections.registry import RegisteredSchema
    from icesql.engine.sources.registry.protobuf import compile_schema, message_of

    schema = RegisteredSchema("PROTOBUF", PROTO)
    cls = message_factory.GetMessageClass(message_of(compile_schema(schema)))
    bodies = [b"\x00" + message(cls, r).SerializeToString() for r in rows]
    check_proto(cls, rows[:3], bodies[:3])
    return schema, cls, bodies


def message(cls: Any, r: dict[str, Any]) -> Any:
    m = cls(id=r["id"], name=r["name"], amount=r["amount"], ok=r["ok"], count=r["count"])
    m.at.seconds, m.at.nanos = r["seconds"], r["nanos"]
    return m


def check_proto(cls: Any, rows: list[dict[str, Any]], bodies: list[bytes]) -> None:
    """The bodies are what confluent-kafka's serializer writes after its 5-byte prefix."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    ser = ProtobufSerializer(cls, SchemaRegistryClient.new_client({"url": "mock://bench"}), {})
    ctx = SerializationContext("bench", MessageField.VALUE)
    for r, body in zip(rows, bodies, strict=True):
        m = message(cls, r)
        assert ser(m, ctx)[5:] == body, "the benchmark's bodies differ from the serializer's"


def json_bodies(rows: list[dict[str, Any]]) -> tuple[Any, list[bytes]]:
    import datetime as dt

    from icesql.engine.connections.registry import RegisteredSchema

    utc = dt.timezone.utc
    bodies = []
    for r in rows:
        at = dt.datetime.fromtimestamp(r["seconds"], utc).replace(microsecond=r["nanos"] // 1000)
        doc = {k: r[k] for k in ("id", "name", "amount", "ok", "count")}
        doc["at"] = at.isoformat().replace("+00:00", "Z")
        bodies.append(json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode())
    return RegisteredSchema("JSON", json.dumps(JSON_SCHEMA)), bodies


def best(fn: Callable[[], int], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def in_batches(bodies: list[bytes], size: int) -> list[list[bytes]]:
    return [bodies[i : i + size] for i in range(0, len(bodies), size)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import pyarrow as pa
    from google.protobuf import json_format

    from icesql.engine.sources.registry.jsonschema import JsonSchemaDecoder
    from icesql.engine.sources.registry.protobuf import ProtobufDecoder

    rows = records(args.records)
    p_schema, cls, p_bodies = proto_bodies(rows)
    j_schema, j_bodies = json_bodies(rows)
    p_batches, j_batches = in_batches(p_bodies, args.batch), in_batches(j_bodies, args.batch)
    del rows

    def icesql_proto() -> int:
        d = ProtobufDecoder(p_schema, p_schema)
        n = 0
        for b in p_batches:
            batch, bad = d.decode(b)
            assert not bad
            n += batch.num_rows
        assert n == args.records
        return n

    def peer_proto() -> int:
        n = 0
        for b in p_batches:
            dicts = [
                json_format.MessageToDict(cls.FromString(x[1:]), preserving_proto_field_name=True) for x in b
            ]
            n += pa.Table.from_pylist(dicts).num_rows
        return n

    def icesql_json() -> int:
        d = JsonSchemaDecoder(j_schema, j_schema)
        n = 0
        for b in j_batches:
            batch, bad = d.decode(b)
            assert not bad
            n += batch.num_rows
        assert n == args.records
        return n

    def peer_json() -> int:
        n = 0
        for b in j_batches:
            n += pa.Table.from_pylist([json.loads(x) for x in b]).num_rows
        return n

    print(f"{args.records:,} records, batches of {args.batch:,}, best of {args.repeat}")
    print(f"{'decoder':<44} {'records/s':>12} {'vs peer':>8}")
    for label, mine, peer, peer_label in (
        (
            "Protobuf (icesql ProtobufDecoder)",
            icesql_proto,
            peer_proto,
            "FromString + MessageToDict + from_pylist",
        ),
        ("JSON Schema (icesql JsonSchemaDecoder)", icesql_json, peer_json, "json.loads + from_pylist"),
    ):
        t_mine, t_peer = best(mine, args.repeat), best(peer, args.repeat)
        print(f"{label:<44} {args.records / t_mine:>12,.0f} {t_peer / t_mine:>7.2f}x")
        print(f"{'  peer: ' + peer_label:<44} {args.records / t_peer:>12,.0f}")


if __name__ == "__main__":
    main()
