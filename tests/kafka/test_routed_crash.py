"""One sink, many tables, killed anywhere (issue 53): exactly once per table.

A seeded generator makes N tables of a random schema each (2-12 columns of mixed Kafka Connect
types, composite keys of 1-3 columns, a ``region`` key column - and so a partition - in some) and a
changelog of inserts, updates, deletes and key reuse, produced as Debezium's JSON with schemas into
one topic (Debezium's topic routing). One routed upsert sink (``TABLE = '{table}'``, ``PARTITION BY
(region)`` where a table has it) runs in a child process SIGKILLed at every point
(``cdc_runner.ROUTED_KILLS``: writing, one table's batch staged and the next not, the batch staged,
inside the catalog commit before and after the pointer swap, between two tables' commits, after a
commit), changes arriving between the kills, then once to the end. Every table must then equal the
replay of its changes in DuckDB, DataFusion and Iceberg Java, and its snapshots' progress increase
strictly (no batch committed twice to a table).

Seed: ``ICESQL_ROUTED_SEED`` (random when unset; printed, and named in failures).
"""

from __future__ import annotations

import datetime as dt
import os
import random
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import icesql
from tests.support import kafka as K
from tests.support.cdc_runner import ROUTED_KILLS, kill_everywhere
from tests.support.connect_events import event
from tests.support.pipeline_helpers import load_table
from tests.support.readers import canonical_digest, java_available, read_datafusion, read_duckdb, read_java
from tests.support.registry import schema_registry

__all__ = ["schema_registry"]

KINDS = ("int", "long", "short", "double", "bool", "string", "date", "ts", "decimal")
KEY_KINDS = ("int", "long", "string")


def _value(rng: random.Random, kind: str) -> Any:
    if rng.random() < 0.1 and kind not in KEY_KINDS:
        return None
    return {
        "int": lambda: rng.randint(-(2**31), 2**31 - 1),
        "long": lambda: rng.randint(-(2**62), 2**62),
        "short": lambda: rng.randint(-(2**15), 2**15 - 1),
        "double": lambda: rng.choice([0.5, -2.25, 1e6, 3.75, 0.1]),
        "bool": lambda: rng.random() < 0.5,
        "string": lambda: rng.choice(["a", "bb", "ccc", "é", ""]),
        "date": lambda: rng.randint(0, 20000),
        "ts": lambda: rng.randint(0, 2 * 10**15),
        "decimal": lambda: rng.randint(-99999, 99999) / 100,
    }[kind]()


def _expected(value: Any, kind: str) -> Any:
    """The value a reader returns for what the generator produced."""
    if value is None:
        return None
    if kind == "date":
        return dt.date(1970, 1, 1) + dt.timedelta(days=value)
    if kind == "ts":
        return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=value)
    if kind == "decimal":
        return Decimal(f"{value:.2f}")
    return value


class Database:
    def __init__(self, seed: int, tables: int) -> None:
        self.rng = random.Random(seed)
        self.lsn = 0
        self.columns: dict[str, list[tuple[str, str]]] = {}
        self.keys: dict[str, tuple[str, ...]] = {}
        self.state: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
        self.seen: set[str] = set()  # tables some change named
        for t in range(tables):
            name = f"t{t:02d}"
            n_key = self.rng.randint(1, 3)
            key_cols = [(f"k{i}", self.rng.choice(KEY_KINDS)) for i in range(n_key)]
            if self.rng.random() < 0.4:
                key_cols[-1] = ("region", "string")
            total = self.rng.randint(max(2, n_key), 12)
            others = [(f"c{i}", self.rng.choice(KINDS)) for i in range(total - n_key)]
            self.columns[name] = key_cols + others
            self.keys[name] = tuple(c for c, _ in key_cols)
            self.state[name] = {}

    def _key_value(self, kind: str, column: str) -> Any:
        if column == "region":
            return self.rng.choice(["eu", "us"])
        return {"int": self.rng.randint(0, 5), "long": self.rng.randint(0, 5), "string": f"s{self.rng.randint(0, 5)}"}[kind]

    def round(self, n: int) -> list[tuple[bytes, bytes]]:
        """``n`` changes as Debezium's JSON with schemas (key, value), all tables in one topic."""
        return [
            tuple(x.encode() for x in event("inventory", name, self.columns[name], self.keys[name], op, old, new, lsn))  # type: ignore[misc]
            for name, op, old, new, lsn in self.changes(n)
        ]

    def changes(self, n: int) -> list[tuple[str, str, dict[str, Any] | None, dict[str, Any] | None, int]]:
        """``n`` changes as (table, op, before, after, lsn), applied to the replay."""
        out = []
        for _ in range(n):
            name = self.rng.choice(sorted(self.columns))
            self.seen.add(name)
            cols, key, rows = self.columns[name], self.keys[name], self.state[name]
            kinds = dict(cols)
            kv = tuple(self._key_value(kinds[c], c) for c in key)
            self.lsn += 1
            old = rows.get(kv)
            new = {**dict(zip(key, kv, strict=True)), **{c: _value(self.rng, k) for c, k in cols if c not in key}}
            if old is not None and self.rng.random() < 0.3:
                out.append((name, "d", old, None, self.lsn))
                del rows[kv]
            else:
                out.append((name, "u" if old else "c", old, new, self.lsn))
                rows[kv] = new
        return out

    def expected(self, name: str) -> list[dict[str, Any]]:
        kinds = dict(self.columns[name])
        return [{c: _expected(r.get(c), kinds[c]) for c in kinds} for r in self.state[name].values()]


# Debezium's Avro (the AvroConverter): each kind's Avro type, and the value the serializer takes
AVRO_TYPES: dict[str, Any] = {
    "int": "int",
    "long": "long",
    "short": "int",  # Debezium writes INT16 as an Avro int
    "double": "double",
    "bool": "boolean",
    "string": "string",
    "date": {"type": "int", "logicalType": "date"},
    "ts": {"type": "long", "logicalType": "timestamp-micros"},
    "decimal": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
}


def _avro_value(value: Any, kind: str) -> Any:
    out = _expected(value, kind)
    return out.replace(tzinfo=dt.timezone.utc) if kind == "ts" and out is not None else out


def _image(row: dict[str, Any] | None, kinds: dict[str, str]) -> dict[str, Any] | None:
    return None if row is None else {c: _avro_value(row.get(c), k) for c, k in kinds.items()}


class AvroProducer:
    """A topic per table (``<prefix>.<table>``), each table's change events and keys registered
    under ``<topic>-value`` / ``<topic>-key`` by the real ``AvroSerializer``, as Debezium's
    AvroConverter does."""

    def __init__(self, db: Database, registry: Any, bootstrap: str, prefix: str) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        from tests.conformance.test_routed_registry import envelope, key_schema

        self.db, self.bootstrap, self.prefix = db, bootstrap, prefix
        self.client = SchemaRegistryClient({"url": registry.url})
        self.schemas = {}
        self.serializers: dict[str, tuple[Any, Any]] = {}
        for name, cols in db.columns.items():
            key = db.keys[name]
            fields = [
                {"name": c, "type": AVRO_TYPES[k]} if c in key else {"name": c, "type": ["null", AVRO_TYPES[k]], "default": None}
                for c, k in cols
            ]
            self.schemas[name] = (envelope(name, fields), key_schema(name, key, fields))
            K.create_topic(bootstrap, f"{prefix}.{name}", 2)

    def produce(self, n: int) -> None:
        from confluent_kafka.schema_registry.avro import AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        by_topic: dict[str, list[tuple[bytes, bytes | None]]] = {}
        for name, op, old, new, lsn in self.db.changes(n):
            topic = f"{self.prefix}.{name}"
            kinds = dict(self.db.columns[name])
            if name not in self.serializers:  # one each per table: the first call registers
                value_schema, key_schema_text = self.schemas[name]
                self.serializers[name] = (
                    AvroSerializer(self.client, value_schema),
                    AvroSerializer(self.client, key_schema_text),
                )
            values, keys = self.serializers[name]

            key = {c: _avro_value((old or new or {}).get(c), kinds[c]) for c in self.db.keys[name]}
            envelope_value = {
                "before": _image(old, kinds),
                "after": _image(new, kinds),
                "source": {"db": "inventory", "table": name, "ts_ms": lsn},
                "op": op,
                "ts_ms": lsn,
            }
            kctx, vctx = SerializationContext(topic, MessageField.KEY), SerializationContext(topic, MessageField.VALUE)
            records = by_topic.setdefault(topic, [])
            records.append((keys(key, kctx), values(envelope_value, vctx)))
            if op == "d":
                records.append((keys(key, kctx), None))  # Debezium's tombstone
        for topic, records in by_topic.items():
            K.produce(self.bootstrap, topic, records)


# on Spark (each killed child starts a JVM: ~30 s a kill) the default run kills at the points a
# routed sink adds and inside its catalog commit; the in-process run, and the slow run, at every one
SPARK_KILLS: tuple[dict[str, str], ...] = (
    {"ICESQL_TEST_KILL_AT": "table-staged"},
    {"ICESQL_TEST_KILL_AT": "between-tables"},
    {"ICESQL_TEST_KILL_COMMIT": "after:1"},
)


def _scenario(
    noida: Any,
    tmp_path: Path,
    *,
    tables: int,
    spark: bool,
    rounds_of: int,
    kills: tuple[dict[str, str], ...] = ROUTED_KILLS,
    registry: Any = None,
) -> None:
    """``registry``: Debezium's Avro through that registry, a topic per table (else Debezium's JSON
    with schemas, all tables in one topic)."""
    seed = int(os.environ.get("ICESQL_ROUTED_SEED") or random.randrange(1 << 30))
    print(f"ICESQL_ROUTED_SEED={seed}")
    topic = f"routed-crash-{seed}-{tmp_path.name}"
    b = noida.bootstrap
    home, wh = tmp_path / "home", tmp_path / "wh"
    db = Database(seed, tables)
    if registry is None:
        K.create_topic(b, topic, 2)
        source = (
            f"CREATE SOURCE cdc FROM KAFKA CONNECTION k (TOPIC = '{topic}', FORMAT = 'debezium-json', "
            "MAX RECORDS PER TRIGGER = 40);"
        )

        def produce_round() -> None:
            K.produce(b, topic, db.round(rounds_of))
    else:
        avro = AvroProducer(db, registry, b, topic)
        source = (
            f"CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = '{registry.url}');"
            f"CREATE SOURCE cdc FROM KAFKA CONNECTION k (TOPIC PATTERN = '{re.escape(topic)}\\..*', "
            "MAX RECORDS PER TRIGGER = 40) FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY CONNECTION csr "
            "ENVELOPE DEBEZIUM;"
        )

        def produce_round() -> None:
            avro.produce(rounds_of)

    with icesql.Session(home=home) as s:
        s.execute(
            f"CREATE CONNECTION k TO KAFKA (BROKER = '{b}');"
            f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');"
            + source
            + "CREATE SINK kk FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'inventory', TABLE = '{table}') "
            "MODE UPSERT PARTITION BY (region);"
        )

    produce_round()
    kill_everywhere(home, "kk", tmp_path / "child.log", spark=spark, between=produce_round, kills=kills)
    java = java_available()
    for name in sorted(db.columns):
        if name not in db.seen:  # no change ever named it: no table either
            assert not (wh / "inventory.db" / name).exists(), name
            continue
        table = load_table(home, f"inventory.{name}", warehouse=wh, catalog_name="lake")
        loc = table.metadata_location
        names = [c for c, _ in db.columns[name]]
        want = canonical_digest(db.expected(name))["digest"]
        for reader, rows in (("duckdb", read_duckdb(loc)), ("datafusion", read_datafusion(loc))):
            got = canonical_digest([dict(zip(names, r, strict=True)) for r in rows])
            if got["digest"] != want:
                exp = set(canonical_digest(db.expected(name))["all"])
                have = set(got["all"])
                raise AssertionError(
                    f"seed {seed}: table {name} read by {reader}: missing {sorted(exp - have)[:3]}, "
                    f"extra {sorted(have - exp)[:3]} ({len(have)} rows, {len(exp)} expected)"
                )
        if java:
            assert read_java(loc)["digest"] == want, f"seed {seed}: table {name} read by Iceberg Java"
        progress = [
            int(s.summary["icesql.progress"])
            for s in table.snapshots()
            # the sink's commits (pyiceberg's Summary says it holds any key: its maintenance's
            # compactions carry no progress)
            if s.summary is not None and s.summary.get("icesql.progress") is not None
        ]
        assert progress == sorted(set(progress)), f"seed {seed}: table {name} progress {progress}"
        spec_cols = [table.schema().find_field(f.source_id).name for f in table.spec().fields]
        assert spec_cols == (["region"] if "region" in db.keys[name] else []), name
        key = [table.schema().find_field(i).name for i in table.schema().identifier_field_ids]
        assert sorted(key) == sorted(db.keys[name]), name


def test_a_routed_sink_killed_anywhere_writes_each_table_once(noida: Any, tmp_path: Path) -> None:
    _scenario(noida, tmp_path, tables=6, spark=False, rounds_of=80)


def test_a_routed_sink_of_registry_avro_killed_anywhere_writes_each_table_once(
    noida: Any, schema_registry: Any, tmp_path: Path
) -> None:
    """The same over Debezium's Avro: a topic per table, a subject per topic (issue 53's proof
    names both)."""
    _scenario(noida, tmp_path, tables=6, spark=False, rounds_of=80, registry=schema_registry)


@pytest.mark.spark
def test_a_routed_sink_on_spark_killed_between_tables(noida: Any, tmp_path: Path) -> None:
    _scenario(noida, tmp_path, tables=6, spark=True, rounds_of=80, kills=SPARK_KILLS)


@pytest.mark.slow
@pytest.mark.parametrize("spark", [False, True], ids=["local", "spark"])
def test_fifty_tables_killed_anywhere(noida: Any, tmp_path: Path, spark: bool) -> None:
    _scenario(noida, tmp_path, tables=50, spark=spark, rounds_of=600)
