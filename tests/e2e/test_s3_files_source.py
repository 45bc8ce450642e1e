"""FILES sources on object storage (issue 11): ``CREATE SOURCE ... FROM FILES 's3://bucket/prefix/'
(..., AWS CONNECTION = aws)`` lists and reads the prefix with the connection's keys, region and
endpoint (pyarrow's S3 filesystem; Spark's S3 connector is not installed here), on ``weed mini``.

Files arrive while the sink runs; every row lands once (DuckDB and DataFusion agree with the
expected rows); wrong keys stop the sink with one line naming the source and the connection, and
no key in it.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.errors import IcesqlError
from tests.e2e.test_weed_sinks import aws_sql, event, expected, read_both, rest_oauth2_sql, verify_catalog
from tests.support.pipeline_helpers import wait_for
from tests.support.weed import WeedServer

pytestmark = [pytest.mark.weed, pytest.mark.spark]


def put_json_lines(weed: WeedServer, bucket: str, key: str, rows: list[dict[str, Any]]) -> None:
    body = "".join(json.dumps(r) + "\n" for r in rows).encode()
    weed.s3_client().put_object(Bucket=bucket, Key=key, Body=body)


@pytest.fixture()
def landing(weed: WeedServer) -> str:
    bucket = f"landing-{uuid.uuid4().hex[:8]}"
    weed.s3_client().create_bucket(Bucket=bucket)
    return bucket


def test_files_arriving_on_s3_while_the_sink_runs(weed: WeedServer, spark: Any, tmp_path: Path, landing: str) -> None:
    ns = f"e2e_s3src_{uuid.uuid4().hex[:8]}"
    put_json_lines(weed, landing, "events/part-1.json", [event(i) for i in range(0, 10)])
    sql = (
        aws_sql(weed)
        + rest_oauth2_sql(weed)
        + f"""
        CREATE SOURCE events FROM FILES 's3://{landing}/events/'
            (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING', AWS CONNECTION = s3);
        CREATE SINK events_sink FROM events
        INTO ICEBERG CATALOG lake (NAMESPACE = '{ns}', TABLE = 'events')
        USING AWS CONNECTION s3
        WITH (MAXIMUM PERIOD = '1s');
    """
    )
    with icesql.Session(home=tmp_path / "home", spark=spark) as s:
        s.execute(sql)
        s.start(["events_sink"])
        wait_for(lambda: s.status()[0].rows_committed == 10, timeout=120, what="the first file committed")
        put_json_lines(weed, landing, "events/part-2.json", [event(i) for i in range(10, 25)])
        time.sleep(0.5)
        put_json_lines(weed, landing, "events/part-3.json", [event(i) for i in range(25, 30)])
        wait_for(lambda: s.status()[0].rows_committed == 30, timeout=120, what="the arriving files committed")
        s.stop()
        (st,) = s.status()
        assert st.last_error is None
    table = verify_catalog(weed).load_table(f"{ns}.events")
    assert read_both(weed, table.metadata_location) == expected(range(30))


def test_clean_source_archives_on_s3_what_each_run_committed(
    weed: WeedServer, spark: Any, tmp_path: Path, landing: str
) -> None:
    """CLEAN SOURCE = 'archive' on S3: after each ``run --once`` the prefix holds no file the
    table has, the archive holds each under its key, and nothing is read twice."""
    ns = f"e2e_s3clean_{uuid.uuid4().hex[:8]}"
    put_json_lines(weed, landing, "events/part-1.json", [event(i) for i in range(0, 10)])
    put_json_lines(weed, landing, "events/part-2.json", [event(i) for i in range(10, 15)])
    sql = (
        aws_sql(weed)
        + rest_oauth2_sql(weed)
        + f"""
        CREATE SOURCE events FROM FILES 's3://{landing}/events/'
            (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING', AWS CONNECTION = s3,
             CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = 's3://{landing}/done/');
        CREATE SINK events_sink FROM events
        INTO ICEBERG CATALOG lake (NAMESPACE = '{ns}', TABLE = 'events')
        USING AWS CONNECTION s3;
    """
    )

    def keys(prefix: str) -> list[str]:
        listed = weed.s3_client().list_objects_v2(Bucket=landing, Prefix=prefix)
        # (pyarrow's S3 filesystem leaves an empty "directory/" marker where it moved the last file)
        return sorted(o["Key"] for o in listed.get("Contents", []) if not o["Key"].endswith("/"))

    with icesql.Session(home=tmp_path / "home", spark=spark) as s:
        s.execute(sql)
        s.run(once=True, sinks=["events_sink"])
        assert keys("events/") == []
        put_json_lines(weed, landing, "events/part-3.json", [event(i) for i in range(15, 20)])
        s.run(once=True, sinks=["events_sink"])
        (st,) = s.status()
        assert st.last_error is None
    assert keys("events/") == []
    assert keys("done/") == [f"done/events/part-{k}.json" for k in (1, 2, 3)]
    table = verify_catalog(weed).load_table(f"{ns}.events")
    assert read_both(weed, table.metadata_location) == expected(range(20))


def test_wrong_keys_name_the_connection_and_show_no_key(
    weed: WeedServer, spark: Any, tmp_path: Path, landing: str
) -> None:
    put_json_lines(weed, landing, "in/a.json", [event(1)])
    wrong = "wrong-secret-key-1234"
    sql = (
        rest_oauth2_sql(weed)
        + f"""
        CREATE SECRET bad AS '{wrong}';
        CREATE CONNECTION s3 TO AWS (
            ACCESS KEY ID = 'nobody', SECRET ACCESS KEY = SECRET bad,
            ENDPOINT = '{weed.s3_endpoint}', REGION = 'us-east-1'
        ) WITH (VALIDATE = false);
        CREATE SOURCE src FROM FILES 's3://{landing}/in/'
            (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING', AWS CONNECTION = s3);
        CREATE SINK k FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'e2e_s3src_bad', TABLE = 't');
    """
    )
    with icesql.Session(home=tmp_path / "home", spark=spark) as s:
        s.execute(sql)
        with pytest.raises(IcesqlError) as info:
            s.run(once=True, sinks=["k"])
    text = info.value.render()
    assert "AWS CONNECTION s3" in text and "source 'src'" in text, text
    assert wrong not in text and "Traceback" not in text


def test_aws_connection_needs_an_s3_path_and_an_aws_connection(tmp_path: Path) -> None:
    with icesql.Session(home=tmp_path / "home", validate=False) as s:
        s.execute(
            "CREATE CONNECTION a TO AWS (REGION = 'eu-west-1');"
            "CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '/tmp/w');"
        )
        errors = s.check(
            "CREATE SOURCE x FROM FILES '/tmp/in/' (FORMAT = 'json', SCHEMA = 'id BIGINT', AWS CONNECTION = a);"
        )
        assert errors and "s3://" in errors[0].message
        errors = s.check(
            "CREATE SOURCE x FROM FILES 's3://b/p/' (FORMAT = 'json', SCHEMA = 'id BIGINT', AWS CONNECTION = lake);"
        )
        assert errors and "expected an AWS connection" in errors[0].message
        s.execute("CREATE SOURCE x FROM FILES 's3://b/p/' (FORMAT = 'json', SCHEMA = 'id BIGINT', AWS CONNECTION = a);")
        with pytest.raises(IcesqlError) as info:
            s.execute("DROP CONNECTION a;")
        assert "x" in info.value.message
