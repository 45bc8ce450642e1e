"""One sink, many tables, from Debezium's Avro through a Confluent Schema Registry (issue 53).

Debezium with the AvroConverter registers each table's change events under ``<topic>-value`` and
its keys (records of the primary-key fields) under ``<topic>-key``, one topic per table. One
``TOPIC PATTERN`` source without VALUE SUBJECT reads them all, each record with its own writer
schema (its schema id); a routed sink writes a table per ``{table}``. Records are produced with the
real ``AvroSerializer`` against the stand-in registry (tests/support/registry.py) into a real broker;
each table must equal the replay of its changes computed here, and be the same on both executors.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.support.conformance import Twins, assert_same_tables
from tests.support.registry import RegistryServer, schema_registry

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

__all__ = ["schema_registry"]

PREFIX = "dbserver1.inventory"
UTC = dt.timezone.utc

# table -> (key fields, the row's fields as Avro types)
TABLES: dict[str, tuple[tuple[str, ...], list[dict[str, Any]]]] = {
    "customers": (
        ("id",),
        [
            {"name": "id", "type": "int"},
            {"name": "name", "type": ["null", "string"], "default": None},
            {"name": "balance", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
            {"name": "vip", "type": "boolean"},
            {"name": "born", "type": {"type": "int", "logicalType": "date"}},
        ],
    ),
    "orders": (
        ("order_id", "line"),
        [
            {"name": "order_id", "type": "long"},
            {"name": "line", "type": "int"},
            {"name": "qty", "type": "int"},
            {"name": "price", "type": "double"},
            {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        ],
    ),
    "products": (
        ("sku",),
        [
            {"name": "sku", "type": "string"},
            {"name": "weight", "type": "double"},
            {"name": "stock", "type": "long"},
        ],
    ),
    "shipments": (  # its topic is created between the two runs
        ("id",),
        [{"name": "id", "type": "long"}, {"name": "carrier", "type": "string"}],
    ),
}
COLOR = {"name": "color", "type": ["null", "string"], "default": None}  # products v2


def envelope(table: str, fields: list[dict[str, Any]]) -> str:
    """Debezium's Avro value schema of ``table``: Envelope(before, after, source, op, ts_ms)."""
    ns = f"{PREFIX}.{table}"
    value = {"type": "record", "name": "Value", "namespace": ns, "fields": fields}
    source = {
        "type": "record",
        "name": "Source",
        "namespace": "io.debezium.connector.mysql",
        "fields": [
            {"name": "db", "type": "string"},
            {"name": "table", "type": ["null", "string"], "default": None},
            {"name": "ts_ms", "type": "long"},
        ],
    }
    return json.dumps(
        {
            "type": "record",
            "name": "Envelope",
            "namespace": ns,
            "fields": [
                {"name": "before", "type": ["null", value], "default": None},
                {"name": "after", "type": ["null", f"{ns}.Value"], "default": None},
                {"name": "source", "type": source},
                {"name": "op", "type": "string"},
                {"name": "ts_ms", "type": ["null", "long"], "default": None},
            ],
        }
    )


def key_schema(table: str, names: tuple[str, ...], fields: list[dict[str, Any]]) -> str:
    types = {f["name"]: f["type"] for f in fields}
    return json.dumps(
        {
            "type": "record",
            "name": "Key",
            "namespace": f"{PREFIX}.{table}",
            "fields": [{"name": n, "type": types[n]} for n in names],
        }
    )


def row_of(table: str, k: int, version: int, wide: bool) -> dict[str, Any]:
    """Table ``table``'s row for key number ``k`` at ``version``: every type, some nulls."""
    if table == "customers":
        return {
            "id": k,
            "name": None if k % 4 == 0 else f"c{k} v{version} ünï",
            "balance": Decimal(f"{k * 101 - 250 + version}.{(k * 7 + version) % 100:02d}"),
            "vip": (k + version) % 2 == 0,
            "born": dt.date(1970, 1, 1) + dt.timedelta(days=k * 997 - 3000 + version),
        }
    if table == "orders":
        return {
            "order_id": 10_000_000_000 + k // 3,
            "line": k % 3,
            "qty": k * 3 + version,
            "price": (k + 0.25) * (version + 1),
            "placed": dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(hours=k, microseconds=version * 17 + 1),
        }
    if table == "products":
        row: dict[str, Any] = {"sku": f"sku-{k}", "weight": k / 8 + version, "stock": 2**40 + k * version}
        if wide:
            row["color"] = None if k % 2 else f"red{version}"
        return row
    return {"id": k, "carrier": f"dhl-{version}"}


class Database:
    """The tables' change events (c, u, d; deleted keys created again) and their replay."""

    def __init__(self) -> None:
        self.state: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {t: {} for t in TABLES}
        self.version = 0
        self.ts = 1_700_000_000_000

    def changes(self, table: str, n: int, wide: bool = False) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        """``n`` change events of ``table`` as (key, envelope); a delete is followed by its
        tombstone (envelope None), as Debezium writes it."""
        names = TABLES[table][0]
        out: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        for i in range(n):
            self.version += 1
            self.ts += 1
            k = (i * 7 + self.version) % 9
            row = row_of(table, k, self.version, wide)
            key = {c: row[c] for c in names}
            now = self.state[table]
            old = now.get(tuple(key.values()))
            if old is not None and self.version % 3 == 0:
                op, before, after = "d", old, None
                del now[tuple(key.values())]
            else:
                op, before, after = ("c", None, row) if old is None else ("u", old, row)
                now[tuple(key.values())] = row
            source = {"db": "inventory", "table": table, "ts_ms": self.ts}
            out.append((key, {"before": before, "after": after, "source": source, "op": op, "ts_ms": self.ts}))
            if op == "d":
                out.append((key, None))
        return out

    def rows(self, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
        return sorted((tuple(_normal(r.get(c)) for c in columns) for r in self.state[table].values()), key=repr)


def _produce(noida: Any, registry: RegistryServer, table: str, events: list[Any], fields: list[dict[str, Any]]) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from tests.support import kafka as K

    topic = f"{PREFIX}.{table}"
    client = SchemaRegistryClient({"url": registry.url})
    values = AvroSerializer(client, envelope(table, fields))
    keys = AvroSerializer(client, key_schema(table, TABLES[table][0], fields))
    kctx, vctx = SerializationContext(topic, MessageField.KEY), SerializationContext(topic, MessageField.VALUE)
    names = [f["name"] for f in fields]

    def full(v: dict[str, Any]) -> dict[str, Any]:  # an image of an older version: its new field null
        return {**v, **{i: {n: v[i].get(n) for n in names} for i in ("before", "after") if v[i] is not None}}

    events = [(k, None if v is None else full(v)) for k, v in events]
    K.produce(
        noida.bootstrap,
        topic,
        [(keys(k, kctx), None if v is None else values(v, vctx)) for k, v in events],
    )


def _normal(v: Any) -> Any:
    """A value comparable between the replay and the table (an instant as UTC's wall clock, as
    the table state reads a timestamp)."""
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(UTC).replace(tzinfo=None)
    return v


def test_routed_sink_of_debezium_avro_a_subject_per_topic(
    spark: Any, noida: Any, schema_registry: RegistryServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Three topics, a schema each (every type: int, long, double, boolean, string, date,
    timestamp-micros, decimal), c/u/d with keys deleted and created again, keys registered as
    ``<topic>-key`` records (orders' composite): each table equals its replay on both executors
    and between them. A topic created between the runs gets its table; products' v2 adds a
    nullable field, which widens that table alone; a record naming an unknown schema id is a dead
    letter while the other tables are written."""
    from tests.support import kafka as K

    for table in ("customers", "orders", "products"):
        K.create_topic(noida.bootstrap, f"{PREFIX}.{table}", 2)
    K.create_topic(noida.bootstrap, "dbserver1.other", 1)
    twins = Twins.make(
        tmp_path,
        spark,
        caplog,
        connection=f"CREATE CONNECTION kb TO KAFKA (BROKER = '{noida.bootstrap}');"
        f"CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = '{schema_registry.url}');",
    )
    twins.execute(
        "CREATE SOURCE inventory FROM KAFKA CONNECTION kb (TOPIC PATTERN = 'dbserver1\\.inventory\\..*') "
        "FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY CONNECTION csr ENVELOPE DEBEZIUM;"
        "CREATE SINK inv FROM inventory INTO ICEBERG CATALOG lake (NAMESPACE = 'inv', TABLE = '{table}') "
        "MODE UPSERT WITH (ON ERROR = 'dead-letter');"
    )
    db = Database()
    for r in range(2):
        wide = r == 1
        tables = ["customers", "orders", "products"] + (["shipments"] if r == 1 else [])
        if r == 1:
            K.create_topic(noida.bootstrap, f"{PREFIX}.shipments", 1)
        for table in tables:
            fields = TABLES[table][1] + ([COLOR] if wide and table == "products" else [])
            _produce(noida, schema_registry, table, db.changes(table, 40, wide), fields)
        if r == 0:  # a record naming a schema the registry does not hold, on the customers topic
            K.produce(noida.bootstrap, f"{PREFIX}.customers", [(None, b"\x00" + (4242).to_bytes(4, "big") + b"\x02")])
        K.produce(noida.bootstrap, "dbserver1.other", [(None, b"not read")])
        twins.run(["inv"])
        for table in tables:
            columns = [f["name"] for f in TABLES[table][1]] + (["color"] if wide and table == "products" else [])
            here, there = twins.states(f"inv.{table}", ", ".join(columns))
            got = sorted((tuple(_normal(v) for v in row) for row in here.rows), key=repr)
            assert got == db.rows(table, columns), f"round {r} table {table}"
            assert_same_tables(here, there)
            iceberg = twins["spark"].table(f"inv.{table}")
            key = [iceberg.schema().find_field(i).name for i in iceberg.schema().identifier_field_ids]
            assert sorted(key) == sorted(TABLES[table][0]), table
        names = [f.name for f in twins["in_process"].table("inv.customers").schema().fields]
        assert "color" not in names  # products' new field widens products alone
    here, there = twins.states("inv.inv_dead_letters", "reason, error")
    assert len(here.rows) == 1 and "schema id 4242" in here.rows[0][1], here.rows
    assert here.rows == there.rows
