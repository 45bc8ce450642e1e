"""Sinks on every catalog path a real server offers here, through the public path only:
SQL text → ``icesql.Session`` → Spark pipeline → Iceberg tables in ``weed mini``.

* ``rest`` with OAuth2 client credentials (``USER`` + ``PASSWORD = SECRET``), data files
  written with the sink's ``USING AWS CONNECTION`` (weed's catalog vends no storage
  credentials);
* ``s3tables`` with SigV4 (``WAREHOUSE`` as a table bucket ARN, ``URI`` = weed's catalog),
  an append sink and a ``MODE UPSERT`` sink with ``KEY``;
* wrong credentials, through the library and through the CLI: a one-line error naming the
  connection, and the wrong secret nowhere.

Every table is read back by two independent readers over S3 (DuckDB's iceberg extension and
iceberg-rust through DataFusion), its data files are listed in weed's S3 with boto3, and its
snapshot summaries and partition spec are checked.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets as pysecrets
import subprocess
import sys
import traceback
import uuid
from pathlib import Path
from typing import Any

import pytest

import icesql
from tests.support.pipeline_helpers import icesql_summaries, write_json_lines
from tests.support.readers import read_datafusion, read_duckdb
from tests.support.weed import WeedServer

pytestmark = [pytest.mark.weed, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- helpers


def s3_props(weed: WeedServer) -> dict[str, str]:
    """FileIO-style S3 properties for the test's own readers."""
    return weed.s3_properties()


def verify_catalog(weed: WeedServer) -> Any:
    """The test's own pyiceberg view of weed's catalog (not icesql's), to inspect metadata."""
    return weed.rest_catalog(name="verify")


def aws_sql(weed: WeedServer) -> str:
    return f"""
        CREATE SECRET ak AS '{weed.access_key}';
        CREATE SECRET sk AS '{weed.secret_key}';
        CREATE CONNECTION s3 TO AWS (
            ACCESS KEY ID = SECRET ak, SECRET ACCESS KEY = SECRET sk,
            ENDPOINT = '{weed.s3_endpoint}', REGION = 'us-east-1'
        );
    """


def rest_oauth2_sql(weed: WeedServer, uri: str | None = None) -> str:
    """Connection ``lake``: weed's REST catalog with OAuth2 client credentials (secret ``pw``),
    at ``uri`` when given (a fault proxy in front of it)."""
    return f"""
        CREATE SECRET pw AS '{weed.secret_key}';
        CREATE CONNECTION lake TO ICEBERG CATALOG (
            TYPE = 'rest', URI = '{uri or weed.iceberg_uri}', WAREHOUSE = '{weed.table_bucket}',
            USER = '{weed.access_key}', PASSWORD = SECRET pw
        );
    """


def event(i: int, v: str = "v") -> dict[str, Any]:
    return {"id": i, "ts": f"2024-03-0{1 + i % 3}T{i % 24:02d}:15:00Z", "v": f"{v}{i}"}


def expected(ids: range | list[int], v: str = "v") -> list[tuple[Any, ...]]:
    return sorted(((i, dt.datetime(2024, 3, 1 + i % 3, i % 24, 15), f"{v}{i}") for i in ids), key=repr)


def read_both(weed: WeedServer, metadata_location: str) -> list[tuple[Any, ...]]:
    """The rows as DuckDB reads them, after checking that DataFusion reads the same."""
    duck = read_duckdb(metadata_location, s3=s3_props(weed))
    fusion = read_datafusion(metadata_location, s3=s3_props(weed))
    assert duck == fusion, "DuckDB and DataFusion disagree"
    return duck


def data_keys(weed: WeedServer, namespace: str, table: str) -> set[str]:
    return {k for k in weed.list_keys(prefix=f"{namespace}/{table}/data/") if k.endswith(".parquet")}


def check_data_files_in_s3(weed: WeedServer, table: Any, namespace: str, name: str) -> None:
    """Every file of the table's current snapshot is an object in weed's table bucket."""
    in_s3 = data_keys(weed, namespace, name)
    assert in_s3, "no data files in weed's S3"
    prefix = f"s3://{weed.table_bucket}/"
    files = table.inspect.files().to_pylist()
    assert files
    for f in files:
        assert f["file_path"].startswith(prefix), f["file_path"]
        key = f["file_path"][len(prefix) :]
        if f["content"] == 0:
            assert key in in_s3, f"{key} is not in weed's S3"
        else:
            assert key in weed.list_keys(prefix=key), f"delete file {key} is not in weed's S3"


def check_summaries(session: icesql.Session, sink: str, table: Any, runs: int) -> list[dict[str, str]]:
    """One icesql snapshot per run, carrying the sink's stable id, its version and its progress."""
    obj = session.store.get_object("sink", sink)
    assert obj is not None
    summ = icesql_summaries(table)
    assert len(summ) == runs, summ
    assert {s["icesql.sink-id"] for s in summ} == {obj.object_id}
    versions = [int(s["icesql.sink-version"]) for s in summ]
    assert versions == sorted(versions) and len(set(versions)) == runs
    progress = [int(s["icesql.progress"]) for s in summ]
    assert progress == sorted(progress) and len(set(progress)) == runs
    assert {s["icesql.commit-reason"] for s in summ} == {"batch"}
    return summ


def spec_of(table: Any) -> list[tuple[str, str, str]]:
    """(transform, source column, partition field name) of the table's partition spec."""
    schema = table.schema()
    return [(str(f.transform), schema.find_column_name(f.source_id), f.name) for f in table.spec().fields]


def metadata_texts(weed: WeedServer, namespace: str, table: str) -> str:
    client = weed.s3_client()
    out = []
    for key in weed.list_keys(prefix=f"{namespace}/{table}/metadata/"):
        if key.endswith(".json"):
            out.append(client.get_object(Bucket=weed.table_bucket, Key=key)["Body"].read().decode())
    assert out
    return "\n".join(out)


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------- rest + OAuth2


def test_rest_oauth2_sink_partitioned_two_runs(weed: WeedServer, spark: Any, tmp_path: Path) -> None:
    ns = unique("e2e_rest")
    home = tmp_path / "home"
    data = tmp_path / "events"
    write_json_lines(data, "part-1.json", [event(i) for i in range(0, 12)])
    write_json_lines(data, "part-2.json", [event(i) for i in range(12, 24)])
    sql = (
        aws_sql(weed)
        + rest_oauth2_sql(weed)
        + f"""
        CREATE SOURCE events FROM FILES 'events/'
            (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING');
        CREATE SINK events_sink FROM events
        INTO ICEBERG CATALOG lake (NAMESPACE = '{ns}', TABLE = 'events')
        USING AWS CONNECTION s3
        PARTITION BY (day(ts), bucket(4, id));
    """
    )
    with icesql.Session(home=home, spark=spark) as s:
        s.execute(sql, filename="pipeline.sql", base_dir=tmp_path)  # 'events/' resolves here
        s.run(once=True)
        (st,) = s.status()
        assert (st.name, st.state, st.rows_committed, st.commits) == ("events_sink", "stopped", 24, 1)

    catalog = verify_catalog(weed)
    table = catalog.load_table(f"{ns}.events")
    assert read_both(weed, table.metadata_location) == expected(range(24))
    files_after_first = data_keys(weed, ns, "events")

    # more files arrive; a later run (a new Session on the same home) adds only them
    write_json_lines(data, "part-3.json", [event(i) for i in range(24, 30)])
    with icesql.Session(home=home, spark=spark) as s:
        s.run(once=True, sinks=["events_sink"])
        (st,) = s.status()
        assert (st.state, st.rows_committed, st.commits, st.last_error) == ("stopped", 30, 2, None)
        table = catalog.load_table(f"{ns}.events")
        check_summaries(s, "events_sink", table, runs=2)

    assert read_both(weed, table.metadata_location) == expected(range(30))
    check_data_files_in_s3(weed, table, ns, "events")
    assert files_after_first < data_keys(weed, ns, "events")
    assert table.location() == f"s3://{weed.table_bucket}/{ns}/events"
    assert spec_of(table) == [("day", "ts", "ts_day"), ("bucket[4]", "id", "id_bucket")]
    # partition values in the files' paths, as the spec says
    assert all("/ts_day=2024-03-0" in k and "/id_bucket=" in k for k in data_keys(weed, ns, "events"))
    # no credential ended up in the table's metadata
    meta = metadata_texts(weed, ns, "events")
    assert weed.secret_key not in meta


# --------------------------------------------------------------------------- s3tables + SigV4


def test_s3tables_sigv4_append_and_upsert(weed: WeedServer, spark: Any, tmp_path: Path) -> None:
    ns = unique("e2e_s3t")
    home = tmp_path / "home"
    data = tmp_path / "orders"
    write_json_lines(data, "a.json", [event(i) for i in range(0, 10)])
    arn = f"arn:aws:s3tables:us-east-1:000000000000:bucket/{weed.table_bucket}"
    sql = (
        aws_sql(weed)
        + f"""
        CREATE CONNECTION tables TO ICEBERG CATALOG (
            TYPE = 's3tables', WAREHOUSE = '{arn}', URI = '{weed.iceberg_uri}', AWS CONNECTION = s3
        );
        CREATE SOURCE orders FROM FILES '{data}'
            (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING');
        CREATE SINK orders_log FROM orders
        INTO ICEBERG CATALOG tables (NAMESPACE = '{ns}', TABLE = 'orders_log')
        PARTITION BY (day(ts), bucket(4, id));
        CREATE SINK orders_latest FROM orders
        INTO ICEBERG CATALOG tables (NAMESPACE = '{ns}', TABLE = 'orders_latest')
        KEY (id) MODE UPSERT
        PARTITION BY (bucket(4, id))
        WITH (MAINTENANCE = 'off');  -- the delete files of the upsert commit are checked below
    """
    )
    with icesql.Session(home=home, spark=spark) as s:
        s.execute(sql)
        s.run(once=True)
        assert {(x.name, x.state, x.rows_committed) for x in s.status()} == {
            ("orders_log", "stopped", 10),
            ("orders_latest", "stopped", 10),
        }

    # updates of ids 5..9 and new ids 10..14
    write_json_lines(data, "b.json", [event(i, "new") for i in range(5, 15)])
    with icesql.Session(home=home, spark=spark) as s:
        s.run(once=True, sinks=["orders_log", "orders_latest"])
        catalog = verify_catalog(weed)
        log_table = catalog.load_table(f"{ns}.orders_log")
        latest = catalog.load_table(f"{ns}.orders_latest")
        check_summaries(s, "orders_log", log_table, runs=2)
        check_summaries(s, "orders_latest", latest, runs=2)

    # append: every row; upsert: the latest row per key (equality deletes applied by both readers)
    assert read_both(weed, log_table.metadata_location) == sorted(
        expected(range(10)) + expected(range(5, 15), "new"), key=repr
    )
    assert read_both(weed, latest.metadata_location) == sorted(
        expected(range(5)) + expected(range(5, 15), "new"), key=repr
    )
    for name, table in (("orders_log", log_table), ("orders_latest", latest)):
        assert table.location().startswith(f"s3://{weed.table_bucket}/{ns}/{name}")
        check_data_files_in_s3(weed, table, ns, name)
        assert weed.secret_key not in metadata_texts(weed, ns, name)
    assert spec_of(log_table) == [("day", "ts", "ts_day"), ("bucket[4]", "id", "id_bucket")]
    assert spec_of(latest) == [("bucket[4]", "id", "id_bucket")]
    schema = latest.schema()
    assert [schema.find_column_name(i) for i in schema.identifier_field_ids] == ["id"]
    contents = {f["content"] for f in latest.inspect.files().to_pylist()}
    assert contents == {0, 1}, "the upsert commit carries data and position-delete files (key index)"

    # compaction on the table bucket: same rows, no delete files, files in weed's S3
    with icesql.Session(home=home) as s:
        (result,) = s.compact(["orders_latest"])
    assert not result.skipped and result.delete_files_before >= 1
    latest = verify_catalog(weed).load_table(f"{ns}.orders_latest")
    assert {f["content"] for f in latest.inspect.files().to_pylist()} == {0}
    assert read_both(weed, latest.metadata_location) == sorted(
        expected(range(5)) + expected(range(5, 15), "new"), key=repr
    )
    check_data_files_in_s3(weed, latest, ns, "orders_latest")
    assert weed.secret_key not in metadata_texts(weed, ns, "orders_latest")


# --------------------------------------------------------------------------- wrong credentials


def wrong_secret() -> str:
    return "wrong-" + pysecrets.token_hex(12)


def test_wrong_catalog_password_fails_cleanly(
    weed: WeedServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = wrong_secret()
    sql = f"""CREATE SECRET wrong AS '{wrong}';
CREATE CONNECTION bad TO ICEBERG CATALOG (
    TYPE = 'rest', URI = '{weed.iceberg_uri}', WAREHOUSE = '{weed.table_bucket}',
    USER = '{weed.access_key}', PASSWORD = SECRET wrong
) WITH (VALIDATE = true);
"""
    with icesql.Session(home=tmp_path / "home") as s:
        with pytest.raises(icesql.IcesqlError) as info:
            s.execute(sql, filename="bad.sql")
        err = info.value
        rendered = err.render()
        first = rendered.splitlines()[0]
        assert first.startswith("bad.sql:2:1: error: ")
        assert "catalog connection 'bad'" in first and "authentication rejected" in first
        assert "PASSWORD" in (err.hint or "")
        # a connection that cannot connect is not kept; the secret created before it is
        assert [r[0] for r in s.execute("SHOW CONNECTIONS")[0].rows] == []
        assert [r[0] for r in s.execute("SHOW SECRETS")[0].rows] == ["wrong"]
        assert s._engine is None, "validating a connection does not start Spark"
    texts = [
        rendered,
        str(err),
        repr(err),
        err.message,
        err.hint or "",
        "".join(traceback.format_exception(type(err), err, err.__traceback__)),
        caplog.text,
        *(r.getMessage() for r in caplog.records),
    ]
    assert err.__cause__ is None and err.__context__ is None
    for text in texts:
        assert wrong not in text
    # the quoted source line cannot leak it either: CREATE SECRET's literal is masked
    assert any("debug" == r.levelname.lower() for r in caplog.records), "DEBUG logs were captured"


def test_cli_exec_wrong_password_exit_3(weed: WeedServer, tmp_path: Path) -> None:
    wrong = wrong_secret()
    statements = (
        f"CREATE SECRET wrong AS '{wrong}'; "
        f"CREATE CONNECTION bad TO ICEBERG CATALOG (TYPE = 'rest', URI = '{weed.iceberg_uri}', "
        f"WAREHOUSE = '{weed.table_bucket}', USER = '{weed.access_key}', PASSWORD = SECRET wrong)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICESQL_")}
    proc = subprocess.run(
        [sys.executable, "-m", "icesql", "--home", str(tmp_path / "home"), "exec", statements],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert wrong not in proc.stdout and wrong not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, proc.stderr
    assert "catalog connection 'bad'" in errors[0] and "authentication rejected" in errors[0]
