"""pyiceberg's Glue catalog against moto's server (Glue + S3 + STS on one loopback port)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.exceptions import CommitFailedException

from tests.support.moto import MotoServer
from tests.support.readers import read_duckdb

# What the server and the clients do by themselves (no icesql): kept out of CI's time, since
# tests/stores/test_store_*.py run icesql against the same server
pytestmark = [pytest.mark.glue, pytest.mark.slow]

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
NO_RETRY = {"commit.retry.num-retries": "0"}  # pyiceberg 0.12 retries a conflicting append 4 times


def rows(*pairs: tuple[int, str]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "name": n} for i, n in pairs], schema=SCHEMA)


def read(table: Any) -> list[tuple[int, str]]:
    return sorted((r["id"], r["name"]) for r in table.scan().to_arrow().to_pylist())


@pytest.fixture
def glue(moto_server: MotoServer) -> Iterator[tuple[MotoServer, Any, str]]:
    """(server, GlueCatalog on a fresh bucket's ``wh/``, a fresh namespace that exists)."""
    bucket = moto_server.create_bucket(f"icesql-{uuid.uuid4().hex[:12]}")
    catalog = moto_server.glue_catalog(warehouse=f"s3://{bucket}/wh")
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    yield moto_server, catalog, namespace


def test_create_append_read_back(glue: tuple[MotoServer, Any, str]) -> None:
    server, catalog, ns = glue
    assert (ns,) in catalog.list_namespaces()
    table = catalog.create_table(f"{ns}.events", SCHEMA)
    bucket = catalog.properties["warehouse"].split("/")[2]
    assert table.location() == f"s3://{bucket}/wh/{ns}.db/events"
    table.append(rows((1, "a"), (2, "b")))

    loaded = catalog.load_table(f"{ns}.events")
    assert read(loaded) == [(1, "a"), (2, "b")]
    assert loaded.metadata_location.startswith(f"s3://{bucket}/wh/{ns}.db/events/metadata/00001-")
    glue_table = server.client("glue").get_table(DatabaseName=ns, Name="events")["Table"]
    assert glue_table["Parameters"]["table_type"] == "ICEBERG"
    assert glue_table["Parameters"]["metadata_location"] == loaded.metadata_location
    keys = [o["Key"] for o in server.client("s3").list_objects_v2(Bucket=bucket)["Contents"]]
    assert any(k.endswith(".parquet") for k in keys)
    catalog.drop_table(f"{ns}.events")
    assert catalog.list_tables(ns) == []


def test_stale_table_append_conflicts(glue: tuple[MotoServer, Any, str]) -> None:
    """Two Table objects at one version both append: the second fails pyiceberg's requirement check
    (made against what Glue holds), unless pyiceberg's own retry rebases it (the default)."""
    _server, catalog, ns = glue
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


def test_moto_accepts_a_stale_glue_version_id(
    glue: tuple[MotoServer, Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real Glue refuses ``UpdateTable`` with a stale ``VersionId`` (ConcurrentModificationException,
    which pyiceberg raises as CommitFailedException); moto ignores it. So when two writers read the
    same Glue version at the same moment, on moto the later commit silently replaces the earlier:
    conflict tests on moto only exercise pyiceberg's client-side requirement check."""
    server, catalog, ns = glue
    catalog.create_table(f"{ns}.race", SCHEMA, properties=NO_RETRY)
    loser = catalog.load_table(f"{ns}.race")
    glue_seen_by_loser = catalog._get_glue_table(ns, "race")  # what the loser's commit will read

    other = server.glue_catalog(warehouse=catalog.properties["warehouse"])
    other.load_table(f"{ns}.race").append(rows((1, "lands first")))
    version_now = server.client("glue").get_table(DatabaseName=ns, Name="race")["Table"]["VersionId"]
    assert version_now != glue_seen_by_loser["VersionId"]

    # the loser's commit reads Glue just before the other writer's commit lands
    monkeypatch.setattr(catalog, "_get_glue_table", lambda database_name, table_name: glue_seen_by_loser)
    loser.append(rows((2, "lands second")))  # real Glue: CommitFailedException
    monkeypatch.undo()

    final = catalog.load_table(f"{ns}.race")
    assert read(final) == [(2, "lands second")]  # the first commit is lost
    assert len(final.snapshots()) == 1


def test_sts_assume_role_credentials_work(glue: tuple[MotoServer, Any, str]) -> None:
    """moto's STS issues credentials for any role ARN (no IAM role needed) and every service
    accepts them, with the session token, as it accepts any keys."""
    server, catalog, ns = glue
    sts = server.client("sts")
    role = "arn:aws:iam::123456789012:role/icesql-writer"
    creds = sts.assume_role(RoleArn=role, RoleSessionName="icesql-test", DurationSeconds=900)["Credentials"]
    assert creds["AccessKeyId"].startswith("ASIA") and creds["SessionToken"]
    assumed = server.client(
        "sts",
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
    )
    assert (
        assumed.get_caller_identity()["Arn"]
        == "arn:aws:sts::123456789012:assumed-role/icesql-writer/icesql-test"
    )

    catalog.create_table(f"{ns}.sts", SCHEMA)
    as_role = server.glue_catalog(
        warehouse=catalog.properties["warehouse"],
        **{
            "glue.access-key-id": creds["AccessKeyId"],
            "glue.secret-access-key": creds["SecretAccessKey"],
            "glue.session-token": creds["SessionToken"],
            "s3.access-key-id": creds["AccessKeyId"],
            "s3.secret-access-key": creds["SecretAccessKey"],
            "s3.session-token": creds["SessionToken"],
        },
    )
    table = as_role.load_table(f"{ns}.sts")
    table.append(rows((7, "role")))
    assert read(catalog.load_table(f"{ns}.sts")) == [(7, "role")]


def test_duckdb_reads_the_table_from_moto_s3(glue: tuple[MotoServer, Any, str]) -> None:
    """DuckDB's iceberg_scan on the metadata file, through an S3 secret on moto (path-style, no TLS)."""
    server, catalog, ns = glue
    table = catalog.create_table(f"{ns}.duck", SCHEMA)
    table.append(rows((1, "a"), (2, "b")))
    table.append(rows((3, "c")))
    location = catalog.load_table(f"{ns}.duck").metadata_location
    assert location.startswith("s3://")
    assert read_duckdb(location, s3=server.s3_properties()) == [(1, "a"), (2, "b"), (3, "c")]
