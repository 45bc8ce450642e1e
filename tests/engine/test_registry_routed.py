"""A routed sink's split of Debezium Avro records named by their schema ids
(``sources.registry.routed``), without a broker: a fake registry client, messages built as the
routed sink gets them (``decode.MESSAGE_COLUMNS`` and the changelog's position)."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pyarrow as pa

from icesql.engine.base.changelog import BLK, FILE, LINE
from icesql.engine.connections.registry import RegisteredSchema, RegistryNotFoundError
from icesql.engine.sources.registry.routed import RegistrySplit
from icesql.routing import parse_template

ROW = {"type": "record", "name": "Value", "fields": [{"name": "id", "type": "int"}, {"name": "v", "type": "string"}]}
ENVELOPE = {
    "type": "record",
    "name": "Envelope",
    "fields": [
        {"name": "before", "type": ["null", ROW], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {
            "name": "source",
            "type": {"type": "record", "name": "Source", "fields": [{"name": "table", "type": "string"}]},
        },
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": "long"},
    ],
}
KEY = {"type": "record", "name": "Key", "fields": [{"name": "id", "type": "int"}]}
SCHEMAS = {1: ENVELOPE, 2: KEY}


class FakeClient:
    def schema_by_id(self, schema_id: int, subject: str | None = None) -> RegisteredSchema:
        if schema_id not in SCHEMAS:
            raise RegistryNotFoundError(f"schema {schema_id} not found")
        return RegisteredSchema("AVRO", json.dumps(SCHEMAS[schema_id]), id=schema_id)


def framed(schema_id: int, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMAS[schema_id]), record)
    return b"\x00" + schema_id.to_bytes(4, "big") + out.getvalue()


def messages(records: list[tuple[bytes | None, bytes | None]]) -> pa.Table:
    n = len(records)
    return pa.table(
        {
            "key": pa.array([k for k, _ in records], pa.binary()),
            "value": pa.array([v for _, v in records], pa.binary()),
            FILE: pa.array(["t"] * n),
            BLK: pa.array([0] * n, pa.int64()),
            LINE: pa.array(range(n), pa.int64()),
        }
    )


def event(table: str, op: str, row: dict[str, Any], ts: int) -> dict[str, Any]:
    before, after = (row, None) if op == "d" else (None, row)
    return {"before": before, "after": after, "source": {"table": table}, "op": op, "ts_ms": ts}


def test_records_split_by_table_keyed_by_their_key_schema_bad_ones_reported() -> None:
    key = framed(2, {"id": 1})
    batch = messages(
        [
            (key, framed(1, event("a", "c", {"id": 1, "v": "x"}, 1))),
            (key, framed(1, event("b", "c", {"id": 1, "v": "y"}, 2))),
            (None, b"\x00\x00\x00\x10\x92\x02"),  # schema id 4242: not in the registry
            (key, framed(1, event("a", "d", {"id": 1, "v": "x"}, 3))),
            (key, None),  # the tombstone after a delete: no row
            (key, framed(1, event("a", "u", {"id": 1, "v": "z"}, 4))[:-2]),  # truncated
            (b"plain", framed(1, event("b", "u", {"id": 1, "v": "w"}, 5))),  # no registry key: the sink's KEY
        ]
    )
    split = RegistrySplit(lambda: FakeClient())(batch, parse_template("{table}"), topics=True, fallback_key=("id",))
    assert sorted(split.tables) == ["a", "b"]
    a = split.tables["a"].arrow()
    assert a.column("id").to_pylist() == [1, 1] and a.column("__op").to_pylist() == ["c", "d"]
    assert split.tables["a"].key == ("id",) and split.tables["a"].spark_schema_json()["fields"][1]["type"] == "string"
    assert split.tables["b"].arrow().column("v").to_pylist() == ["y", "w"]
    reasons = dict(split.bad)
    assert sorted(reasons) == [2, 5]
    assert "is not in the schema registry" in reasons[2]


def test_an_unknown_key_schema_is_a_bad_record_and_no_key_leaves_no_key() -> None:
    batch = messages(
        [
            (b"\x00\x00\x00\x00\x09", framed(1, event("a", "c", {"id": 1, "v": "x"}, 1))),
            (None, framed(1, event("a", "c", {"id": 2, "v": "x"}, 2))),
        ]
    )
    split = RegistrySplit(lambda: FakeClient())(batch, parse_template("{table}"), topics=True, fallback_key=())
    assert [i for i, _ in split.bad] == [0] and "key's schema id 9" in split.bad[0][1]
    assert split.tables["a"].key == ()
