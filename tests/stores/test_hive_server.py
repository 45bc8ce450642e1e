"""pyiceberg's Hive catalog, and Iceberg Java through Spark 3.5, against a loopback Hive Metastore."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError

from tests.support.hive import HiveMetastore

# What the server and the clients do by themselves (no icesql): kept out of CI's time, since
# tests/stores/test_store_*.py run icesql against the same server
pytestmark = [pytest.mark.hive, pytest.mark.slow]

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
NO_RETRY = {"commit.retry.num-retries": "0"}  # pyiceberg 0.12 retries a conflicting append 4 times


def rows(*pairs: tuple[int, str]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "name": n} for i, n in pairs], schema=SCHEMA)


def read(table: Any) -> list[tuple[int, str]]:
    return sorted((r["id"], r["name"]) for r in table.scan().to_arrow().to_pylist())


@pytest.fixture
def hive(hive_metastore: HiveMetastore) -> Iterator[tuple[HiveMetastore, Any, str]]:
    """(metastore, HiveCatalog, a fresh namespace that exists)."""
    catalog = hive_metastore.catalog()
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    yield hive_metastore, catalog, namespace


def test_create_append_read_drop(hive: tuple[HiveMetastore, Any, str]) -> None:
    hms, catalog, ns = hive
    assert (ns,) in catalog.list_namespaces()
    table = catalog.create_table(f"{ns}.events", SCHEMA)
    assert table.location() == f"file:{hms.warehouse_dir}/{ns}.db/events"
    table.append(rows((1, "a"), (2, "b")))
    after_first = table.metadata_location
    table.append(rows((3, "c")))

    loaded = catalog.load_table(f"{ns}.events")
    assert read(loaded) == [(1, "a"), (2, "b"), (3, "c")]
    assert len(loaded.snapshots()) == 2
    with hms.thrift_client() as client:
        hive_table = client.get_table(ns, "events")
    assert hive_table.tableType == "EXTERNAL_TABLE"
    assert hive_table.parameters["table_type"] == "ICEBERG"
    assert hive_table.parameters["metadata_location"] == loaded.metadata_location
    assert hive_table.parameters["previous_metadata_location"] == after_first

    catalog.drop_table(f"{ns}.events")
    with pytest.raises(NoSuchTableError):
        catalog.load_table(f"{ns}.events")
    catalog.drop_namespace(ns)
    assert (ns,) not in catalog.list_namespaces()


def test_stale_table_append_conflicts(hive: tuple[HiveMetastore, Any, str]) -> None:
    """pyiceberg's Hive commit takes a metastore lock, re-reads the table under it and checks the
    stale Table's requirements: the second append fails, unless pyiceberg's own retry rebases it
    (the default). The lock is released either way."""
    _hms, catalog, ns = hive
    catalog.create_table(f"{ns}.t", SCHEMA, properties=NO_RETRY).append(rows((0, "base")))
    first, second = catalog.load_table(f"{ns}.t"), catalog.load_table(f"{ns}.t")
    first.append(rows((1, "first")))
    with pytest.raises(CommitFailedException, match="Requirement failed: branch main has changed"):
        second.append(rows((2, "second")))
    assert read(catalog.load_table(f"{ns}.t")) == [(0, "base"), (1, "first")]

    catalog.create_table(f"{ns}.retried", SCHEMA).append(rows((0, "base")))  # retries: 4 (default)
    first, second = catalog.load_table(f"{ns}.retried"), catalog.load_table(f"{ns}.retried")
    first.append(rows((1, "first")))
    second.append(rows((2, "second")))  # conflicts, refreshes, lands
    assert read(catalog.load_table(f"{ns}.retried")) == [(0, "base"), (1, "first"), (2, "second")]


@pytest.mark.java
def test_iceberg_java_reads_and_writes_through_the_metastore(hive: tuple[HiveMetastore, Any, str]) -> None:
    """Iceberg Java 1.10 (Spark 3.5 harness, ``SparkCatalog`` of ``type=hive``) reads what pyiceberg
    wrote and appends to it under the metastore lock; it also creates a table pyiceberg reads; a
    pyiceberg Table loaded before the Java append then conflicts."""
    hms, catalog, ns = hive
    table = catalog.create_table(f"{ns}.shared", SCHEMA, properties=NO_RETRY)
    table.append(rows((1, "py"), (2, "py")))
    stale = catalog.load_table(f"{ns}.shared")

    before, _, after, snapshots, _, _ = hms.iceberg_java_sql(
        [
            f"SELECT id, name FROM h.{ns}.shared ORDER BY id",
            f"INSERT INTO h.{ns}.shared VALUES (3, 'java')",
            f"SELECT id, name FROM h.{ns}.shared ORDER BY id",
            f"SELECT operation FROM h.{ns}.shared.snapshots ORDER BY committed_at",
            f"CREATE TABLE h.{ns}.from_java (id BIGINT NOT NULL, name STRING) USING iceberg",
            f"INSERT INTO h.{ns}.from_java VALUES (10, 'x'), (11, 'y')",
        ]
    )
    assert before == [{"id": 1, "name": "py"}, {"id": 2, "name": "py"}]
    assert after == [*before, {"id": 3, "name": "java"}]
    assert [s["operation"] for s in snapshots] == ["append", "append"]

    assert read(catalog.load_table(f"{ns}.shared")) == [(1, "py"), (2, "py"), (3, "java")]
    with pytest.raises(CommitFailedException, match="Requirement failed: branch main has changed"):
        stale.append(rows((4, "stale")))
    catalog.load_table(f"{ns}.shared").append(rows((4, "fresh")))
    assert read(catalog.load_table(f"{ns}.shared")) == [(1, "py"), (2, "py"), (3, "java"), (4, "fresh")]
    assert read(catalog.load_table(f"{ns}.from_java")) == [(10, "x"), (11, "y")]
