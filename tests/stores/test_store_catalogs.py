"""``TYPE = 'glue'`` and ``TYPE = 'hive'`` catalog connections, built from their plans as a sink
builds them (``catalogs.load_catalog``): a commit that another writer beats is retried and lands
once, and the failures a user meets are one line with a hint.

The other writer: for Glue, pyiceberg's own Glue catalog on the same moto server (moto does not
emulate Glue's ``VersionId`` check: the conflict is found by the committing catalog's requirement
check against what Glue answers, which is how pyiceberg meets a conflict on AWS as well, before
AWS's own check); for Hive, Iceberg Java (Spark 3.5 with Iceberg's HiveCatalog) committing under
the metastore's lock.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from icesql.engine.commit.snapshot import CommitRequest, commit
from icesql.engine.connections.catalogs import load_catalog, validate_connection
from icesql.engine.iceberg.tables import ensure_table
from icesql.engine.iceberg.writer import DataFileWriter, WriteSpec
from icesql.errors import IcesqlError
from icesql.plan import AwsConnectionPlan, CatalogConnectionPlan, CatalogType, SecretName, SinkPlan
from tests.engine.test_schema import f, struct
from tests.support.hive import HiveMetastore
from tests.support.moto import MotoServer
from tests.support.readers import read_duckdb

SCHEMA = struct(f("id", "long"), f("v", "string"))


class Secrets(dict[str, str]):
    def __call__(self, name: str) -> str:
        return self[name]


def _plan(ns: str) -> SinkPlan:
    return SinkPlan(name="s", relation="r", catalog_connection="lake", namespace=(ns,), table="t")


def _rows(table: Any) -> list[tuple[int, str]]:
    return sorted((r["id"], r["v"]) for r in table.scan().to_arrow().to_pylist())


def _commit_beaten_by(table: Any, other_writes: Any) -> Any:
    """Commit two rows through icesql's commit; ``other_writes()`` commits right after icesql's
    reload of the table and before icesql's commit (the first attempt only)."""
    real_refresh = table.refresh
    calls = {"n": 0}

    def refresh_then_someone_commits() -> Any:
        out = real_refresh()
        calls["n"] += 1
        if calls["n"] == 1:
            other_writes()
        return out

    table.refresh = refresh_then_someone_commits
    w = DataFileWriter(WriteSpec.from_table(table))
    w.write(pa.record_batch({"id": pa.array([1, 2], pa.int64()), "v": ["icesql", "icesql"]}))
    return commit(table, CommitRequest(w.close(), [], "s", 1, 1), backoff=0.01)


# --------------------------------------------------------------------------- Glue (moto)


def _glue(moto: MotoServer, bucket: str, **kw: Any) -> tuple[CatalogConnectionPlan, AwsConnectionPlan]:
    aws = AwsConnectionPlan(
        name="aws",
        access_key_id=moto.access_key,
        secret_access_key=SecretName("k"),
        region=moto.region,
        endpoint=moto.endpoint,
    )
    conn = CatalogConnectionPlan(
        name="lake",
        catalog_type=CatalogType.GLUE,
        uri=kw.get("uri", moto.endpoint),
        warehouse=f"s3://{bucket}/wh",
        aws_connection="aws",
    )
    return conn, aws


@pytest.mark.glue
def test_glue_commit_beaten_by_another_writer_is_retried(moto_server: MotoServer, tmp_path: Path) -> None:
    bucket = moto_server.create_bucket(f"icesql-{uuid.uuid4().hex[:10]}")
    conn, aws = _glue(moto_server, bucket)
    secrets = Secrets(k=moto_server.secret_key)
    catalog = load_catalog(conn, aws=aws, secrets=secrets, home=tmp_path)
    ns = f"ns_{uuid.uuid4().hex[:8]}"
    table = ensure_table(catalog, None, SCHEMA, _plan(ns))
    assert (ns,) in validate_connection(conn, aws=aws, secrets=secrets, home=tmp_path)

    other = moto_server.glue_catalog(warehouse=f"s3://{bucket}/wh").load_table(f"{ns}.t")
    arrow = pa.table({"id": pa.array([100], pa.int64()), "v": ["other"]}, schema=other.schema().as_arrow())
    result = _commit_beaten_by(table, lambda: other.append(arrow))
    assert result.attempts == 2 and not result.skipped
    fresh = load_catalog(conn, aws=aws, secrets=secrets, home=tmp_path).load_table(f"{ns}.t")
    assert _rows(fresh) == [(1, "icesql"), (2, "icesql"), (100, "other")]
    assert [s.summary.operation.value for s in fresh.metadata.snapshots] == ["append", "append"]
    # DuckDB reads the table from moto's S3
    got = read_duckdb(fresh.metadata_location, "id, v", s3=moto_server.s3_properties())
    assert sorted(got) == [(1, "icesql"), (2, "icesql"), (100, "other")]


@pytest.mark.glue
def test_glue_errors_are_one_line(moto_server: MotoServer, tmp_path: Path) -> None:
    bucket = moto_server.create_bucket(f"icesql-{uuid.uuid4().hex[:10]}")
    conn, aws = _glue(moto_server, bucket)
    secrets = Secrets(k=moto_server.secret_key)
    catalog = load_catalog(conn, aws=aws, secrets=secrets, home=tmp_path)
    from icesql.engine.select.tables import open_table

    # an unknown database
    with pytest.raises(IcesqlError) as err:
        open_table(catalog, conn, aws, secrets, ("no_such_db",), "t")
    assert "\n" not in err.value.message and "no_such_db" in err.value.message
    # the Glue endpoint unreachable
    dead, _ = _glue(moto_server, bucket, uri="http://127.0.0.1:9")
    with pytest.raises(IcesqlError) as err:
        validate_connection(dead, aws=aws, secrets=secrets, home=tmp_path)
    assert "catalog connection 'lake'" in err.value.message and "unreachable" in err.value.message
    assert "\n" not in err.value.message and err.value.hint
    assert moto_server.secret_key not in str(err.value)


# --------------------------------------------------------------------------- Hive


def _hive(hms: HiveMetastore, **kw: Any) -> CatalogConnectionPlan:
    return CatalogConnectionPlan(
        name="lake", catalog_type=CatalogType.HIVE, uri=kw.get("uri", hms.uri), warehouse=hms.warehouse
    )


@pytest.mark.hive
@pytest.mark.java
def test_hive_commit_beaten_by_iceberg_java_is_retried(hive_metastore: HiveMetastore, tmp_path: Path) -> None:
    """Iceberg Java (Spark 3.5, HiveCatalog) commits in between: icesql's commit retries and
    lands once; Java reads both writers' rows."""
    conn = _hive(hive_metastore)
    catalog = load_catalog(conn, aws=None, secrets=Secrets(), home=tmp_path)
    ns = f"ns_{uuid.uuid4().hex[:8]}"
    table = ensure_table(catalog, None, SCHEMA, _plan(ns))
    result = _commit_beaten_by(
        table, lambda: hive_metastore.iceberg_java_sql([f"INSERT INTO h.{ns}.t VALUES (100, 'java')"])
    )
    assert result.attempts == 2 and not result.skipped
    fresh = load_catalog(conn, aws=None, secrets=Secrets(), home=tmp_path).load_table(f"{ns}.t")
    assert _rows(fresh) == [(1, "icesql"), (2, "icesql"), (100, "java")]
    (java_rows,) = hive_metastore.iceberg_java_sql([f"SELECT id, v FROM h.{ns}.t"])
    assert sorted((r["id"], r["v"]) for r in java_rows) == [(1, "icesql"), (2, "icesql"), (100, "java")]


@pytest.mark.hive
def test_hive_errors_are_one_line(hive_metastore: HiveMetastore, tmp_path: Path) -> None:
    conn = _hive(hive_metastore)
    catalog = load_catalog(conn, aws=None, secrets=Secrets(), home=tmp_path)
    from icesql.engine.select.tables import open_table

    with pytest.raises(IcesqlError) as err:
        open_table(catalog, conn, None, Secrets(), ("no_such_db",), "t")
    assert "\n" not in err.value.message and "no_such_db" in err.value.message
    dead = _hive(hive_metastore, uri="thrift://127.0.0.1:9")
    with pytest.raises(IcesqlError) as err:
        validate_connection(dead, aws=None, secrets=Secrets(), home=tmp_path)
    assert "catalog connection 'lake'" in err.value.message and "unreachable" in err.value.message
    assert "\n" not in err.value.message and err.value.hint
