"""Sinks on a real Spark Connect server (``--spark-master sc://host:port``).

Under Spark Connect a sink's ``foreachBatch`` runs in a Python process of the *server*, so the
sink runs in two halves (``icesql.engine.backends.spark.dropbox``): the server half writes the batch's files
(executors, ``mapInArrow``) and leaves one record per Spark batch in a drop box at the table's
location; the client half (``icesql run`` / ``serve``) stages the records durably, commits them
under the sink's policy and keeps the sink's state. These tests prove it end to end: appends
(read back by DuckDB and DataFusion), upserts, a null-KEY error, a sink committing while it
runs, an embedding program sinking its own DataFrame, and SIGKILLs of the client (while the
server's query goes on) and of the server itself.

One server (``bin/spark-submit`` from the pyspark wheel, ``local[2]``, Python workers running this
interpreter) serves the module; the crash test starts its own, because it kills it. Every client
runs in a subprocess: a Spark Connect client marks its whole process as Connect
(``SPARK_CONNECT_MODE_ENABLED``), which must not leak into the classic sessions of other tests.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.crash import ROWS_PER_FILE, add_files, check_no_duplicates, run_child, table_ids
from tests.support.pipeline_helpers import (
    changelog_file,
    dbz,
    icesql_summaries,
    load_table,
    write_json_lines,
)
from tests.support.readers import read_datafusion, read_duckdb
from tests.support.require import require
from tests.support.spark_cluster import ClusterUnavailable, ConnectServer

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    try:
        server = ConnectServer.start(tmp_path_factory.mktemp("connect"))
    except ClusterUnavailable as e:
        pytest.fail(f"the Spark Connect server did not start: {e}")
    with server:
        yield server


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    env.update(extra)
    return env


def icesql(home: Path, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "icesql", "--home", str(home), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
    )


def _rows(home: Path, warehouse: Path, table: str) -> list[tuple[Any, ...]]:
    meta = load_table(home, table, warehouse=warehouse, catalog_name="lake").metadata_location
    got = read_duckdb(meta)
    assert read_datafusion(meta) == got
    return got


def _dropbox_left(warehouse: Path) -> list[Path]:
    return sorted(warehouse.rglob("data/icesql-staging/*/*.parquet"))


def _events(k: int) -> list[dict[str, Any]]:
    return [{"id": k * 10 + j, "ts": f"2024-03-0{1 + j % 3}T08:00:00Z", "v": f"e{k}-{j}"} for j in range(10)]


APPEND = """\
CREATE CONNECTION IF NOT EXISTS lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');
CREATE SOURCE IF NOT EXISTS events FROM FILES '{data}'
  (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING', MAX FILES PER TRIGGER = 1);
CREATE SINK IF NOT EXISTS events_sink FROM events
  INTO ICEBERG CATALOG lake (NAMESPACE = 'cx', TABLE = 'events')
  PARTITION BY (day(ts));
"""


def test_append_sink_runs_on_spark_connect(connect: ConnectServer, tmp_path: Path) -> None:
    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "in"
    for k in range(3):
        write_json_lines(data, f"part-{k}.json", _events(k))
    (tmp_path / "s.sql").write_text(APPEND.format(wh=wh, data=data))

    first = icesql(home, "--spark-master", connect.url, "run", "s.sql", "--once", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    expected = sorted((r["id"], r["v"]) for k in range(3) for r in _events(k))
    assert sorted((r[0], r[2]) for r in _rows(home, wh, "cx.events")) == expected

    for k in range(3, 5):  # more files arrive; the next run takes only those
        write_json_lines(data, f"part-{k}.json", _events(k))
    second = icesql(home, "--spark-master", connect.url, "run", "s.sql", "--once", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    expected = sorted((r["id"], r["v"]) for k in range(5) for r in _events(k))
    assert sorted((r[0], r[2]) for r in _rows(home, wh, "cx.events")) == expected

    table = load_table(home, "cx.events", warehouse=wh, catalog_name="lake")
    assert [f.name for f in table.spec().fields] == ["ts_day"]
    # one Spark batch per file (MAX FILES PER TRIGGER = 1), every batch committed once, in order
    progress = [int(s["icesql.progress"]) for s in icesql_summaries(table)]
    assert progress == sorted(progress) and progress[-1] == 4
    assert _dropbox_left(wh) == []  # every record was taken
    commits = [ln for ln in (first.stderr + second.stderr).splitlines() if "commit sink=events_sink" in ln]
    assert commits and all("table=cx.events" in ln for ln in commits)
    status = icesql(home, "status", cwd=tmp_path).stdout
    assert re.search(r"events_sink \| stopped \| +50 \|", status), status


UPSERT = """\
CREATE CONNECTION IF NOT EXISTS lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');
CREATE SOURCE IF NOT EXISTS cdc FROM FILES '{data}'
  (FORMAT = 'debezium-json', SCHEMA = 'id BIGINT, name STRING, qty INT', MAX FILES PER TRIGGER = 1);
CREATE SINK IF NOT EXISTS cdc_sink FROM cdc
  INTO ICEBERG CATALOG lake (NAMESPACE = 'cx', TABLE = 'items')
  KEY (id) {enforced} MODE UPSERT;
"""


def test_upsert_sink_runs_on_spark_connect(connect: ConnectServer, tmp_path: Path) -> None:
    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "cdc"
    a = {"id": 1, "name": "a", "qty": 1}
    b = {"id": 2, "name": "b", "qty": 2}
    c = {"id": 3, "name": "c", "qty": 3}
    changelog_file(data, 0, [dbz("c", None, a, 1), dbz("c", None, b, 2), dbz("c", None, c, 3)])
    a2 = {**a, "name": "a2", "qty": 10}
    changelog_file(data, 1, [dbz("u", a, a2, 4), dbz("d", b, None, 5), dbz("u", a2, {**a2, "qty": 11}, 6)])
    (tmp_path / "s.sql").write_text(UPSERT.format(wh=wh, data=data, enforced=""))
    run = icesql(home, "--spark-master", connect.url, "run", "s.sql", "--once", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(_rows(home, wh, "cx.items")) == [(1, "a2", 11), (3, "c", 3)]

    changelog_file(data, 2, [dbz("c", None, b, 7), dbz("d", c, None, 8)])
    run = icesql(home, "--spark-master", connect.url, "run", "s.sql", "--once", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(_rows(home, wh, "cx.items")) == [(1, "a2", 11), (2, "b", 2)]
    table = load_table(home, "cx.items", warehouse=wh, catalog_name="lake")
    assert table.schema().identifier_field_names() == {"id"}
    assert _dropbox_left(wh) == []


def test_null_key_on_spark_connect_is_a_clear_error(connect: ConnectServer, tmp_path: Path) -> None:
    """The error is raised in the server's Python; the client still names sink, column and file."""
    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "cdc"
    write_json_lines(data, "bad.json", [dbz("c", None, {"id": None, "name": "x", "qty": 1}, 1)])
    (tmp_path / "s.sql").write_text(UPSERT.format(wh=wh, data=data, enforced=""))
    run = icesql(home, "--spark-master", connect.url, "run", "s.sql", "--once", cwd=tmp_path)
    assert run.returncode == 3, run.stderr[-3000:]
    err = run.stderr
    assert "sink 'cdc_sink': KEY column 'id' is null" in err and "bad.json" in err, err[-3000:]
    assert "NOT ENFORCED" in err  # the hint
    assert "Traceback" not in err


SERVE = """\
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');
CREATE SOURCE events FROM FILES '{data}'
  (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING');
CREATE SINK events_sink FROM events INTO ICEBERG CATALOG lake (NAMESPACE = 'cx', TABLE = 'live')
  WITH (MAXIMUM PERIOD = '1s', MINIMUM SIZE = '1GiB');
"""


def _wait_rows(home: Path, wh: Path, n: int, proc: subprocess.Popen[str], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        try:
            table = load_table(home, "cx.live", warehouse=wh, catalog_name="lake")
            if table.scan().count() >= n:
                return
        except Exception:  # noqa: BLE001 - the table is not there yet
            pass
        time.sleep(0.5)
    raise AssertionError(f"the table never reached {n} rows")


def test_running_sink_on_spark_connect_commits_by_period(connect: ConnectServer, tmp_path: Path) -> None:
    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "in"
    write_json_lines(data, "part-0.json", _events(0))
    (tmp_path / "s.sql").write_text(SERVE.format(wh=wh, data=data))
    proc = subprocess.Popen(
        [sys.executable, "-m", "icesql", "--home", str(home), "--spark-master", connect.url, "run", "s.sql"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        _wait_rows(home, wh, 10, proc)  # MINIMUM SIZE is out of reach: only the period commits
        write_json_lines(data, "part-1.json", _events(1))
        _wait_rows(home, wh, 20, proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    reasons = [
        ln.split("reason=")[1].split()[0] for ln in err.splitlines() if "commit sink=events_sink" in ln
    ]
    assert reasons.count("period") >= 2, err[-3000:]
    ids = sorted(r[0] for r in _rows(home, wh, "cx.live"))
    assert ids == sorted(r["id"] for k in range(2) for r in _events(k))


EMBED = """\
import sys
from pyspark.sql import SparkSession
import icesql

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
spark.range(0, 1000).selectExpr("id", "id % 7 AS bucket").createOrReplaceTempView("numbers")
with icesql.Session(home=sys.argv[2], spark=spark) as s:
    s.execute(
        "CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '" + sys.argv[3] + "');"
        "CREATE SINK numbers_sink FROM numbers INTO ICEBERG CATALOG lake (NAMESPACE = 'cx', TABLE = 'numbers')"
        " PARTITION BY (bucket);"
    )
    s.run(once=True)
spark.stop()
print("embedded: done")
"""


def test_embedding_program_on_spark_connect(connect: ConnectServer, tmp_path: Path) -> None:
    """A program with its own Connect session sinks a (bounded) temp view through ``Session``."""
    (tmp_path / "embed.py").write_text(EMBED)
    home, wh = tmp_path / "home", tmp_path / "wh"
    out = subprocess.run(
        [sys.executable, "embed.py", connect.url, str(home), str(wh)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
    )
    assert out.returncode == 0 and "embedded: done" in out.stdout, out.stderr[-3000:]
    rows = sorted(_rows(home, wh, "cx.numbers"))
    assert rows == [(i, i % 7) for i in range(1000)]
    table = load_table(home, "cx.numbers", warehouse=wh, catalog_name="lake")
    assert [f.name for f in table.spec().fields] == ["bucket"]


def test_missing_connect_client_is_a_clear_error(tmp_path: Path) -> None:
    """Without grpcio (the ``connect`` extra) an sc:// URL fails at once with the fix. The test
    environment has grpcio, so the child hides it (``sys.modules['grpc'] = None``)."""
    write_json_lines(tmp_path / "in", "part-0.json", _events(0))
    (tmp_path / "s.sql").write_text(APPEND.format(wh=tmp_path / "wh", data=tmp_path / "in"))
    probe = textwrap.dedent(
        f"""
        import sys
        sys.modules["grpc"] = None
        from icesql.cli import main
        sys.exit(main(["--home", {str(tmp_path / "home")!r}, "--spark-master", "sc://127.0.0.1:1",
                       "run", "s.sql", "--once"]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=_env()
    )
    assert out.returncode == 3, out.stderr[-3000:]
    assert "the Spark Connect client is not installed" in out.stderr
    assert "pip install 'icesql[connect]'" in out.stderr
    assert "Traceback" not in out.stderr


CONNECT_KILLS = {
    "staged": {"ICESQL_TEST_KILL_AT": "staged"},  # record staged durably, not yet deleted
    "before": {"ICESQL_TEST_KILL_COMMIT": "before:1"},  # manifests written, catalog not swapped
    "after": {"ICESQL_TEST_KILL_COMMIT": "after:1"},  # committed, runner not told
    "committed": {"ICESQL_TEST_KILL_AT": "committed"},  # committed, the record's batch may still run
}


# the default run: two of the client's kill points (one before the commit, one after it; the
# other two are the same points as on local Spark and in process, tests/engine/test_crash.py) and
# the server's SIGKILL; -m slow: every kill point and two random kills as well (142 s quiet)
@pytest.mark.parametrize(
    ("kills", "random_kills"),
    [(("staged", "after"), 0), pytest.param(tuple(CONNECT_KILLS), 2, marks=pytest.mark.slow)],
    ids=["sampled", "full"],
)
def test_sigkill_client_and_server_on_spark_connect(tmp_path: Path, kills: tuple[str, ...], random_kills: int) -> None:
    """The client is SIGKILLed after staging a record, inside the catalog commit (before and after
    the metadata swap), after a commit, and at random moments — while the server's query runs
    on and keeps leaving records; then the server itself is SIGKILLed mid-run and a new one
    takes over from the checkpoint. At the end every source row is in the table exactly once."""
    tmp = tmp_path
    data = tmp / "in"
    nxt = add_files(data, 0, 4)
    server = ConnectServer.start(tmp / "connect-1")
    try:
        for kill in kills:
            env = CONNECT_KILLS[kill]
            rc, out = run_child(tmp, env, spark_master=server.url)
            assert rc == -signal.SIGKILL, f"expected a kill for {env}, got rc={rc}\n{out[-4000:]}"
            check_no_duplicates(tmp)
            nxt = add_files(data, nxt, 2)
        rng = random.Random(int(os.environ.get("ICESQL_CRASH_SEED", "11")))
        for _ in range(random_kills):
            rc, out = run_child(tmp, {}, kill_after=rng.uniform(0.5, 6.0), spark_master=server.url)
            assert rc in (0, -signal.SIGKILL), out[-4000:]
            check_no_duplicates(tmp)
            nxt = add_files(data, nxt, 2)
        # the server dies while a client runs and a new one comes up on its address: the
        # client's session is gone, so it fails; nothing is lost or duplicated
        child = subprocess.Popen(
            [
                sys.executable, "-m", "tests.support.crash_runner", "--home", str(tmp / "home"),
                "--data", str(data), "--warehouse", str(tmp / "warehouse"), "--spark-master", server.url,
                "--continuous",
            ],
            cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        time.sleep(rng.uniform(4.0, 8.0))
        assert server.proc is not None
        os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
        server.proc = None
        nxt = add_files(data, nxt, 2)
        server = ConnectServer.start(tmp / "connect-2", port=server.port)
        out, _ = child.communicate(timeout=240)
        assert child.returncode != 0, out[-4000:]
        check_no_duplicates(tmp)
        rc, out = run_child(tmp, {}, spark_master=server.url)
        assert rc == 0, out[-4000:]
    finally:
        server.stop()
    ids = table_ids(tmp)
    expected = list(range(nxt * ROWS_PER_FILE))
    assert sorted(ids) == expected, f"missing {sorted(set(expected) - set(ids))[:20]}"
    table = load_table(tmp / "home", "ns.events", warehouse=tmp / "warehouse")
    summ = icesql_summaries(table)
    progress = [int(s["icesql.progress"]) for s in summ]
    assert progress == sorted(progress) and len(set(progress)) == len(progress)
    assert "recovery" in {s["icesql.commit-reason"] for s in summ}
    assert _dropbox_left(tmp / "warehouse") == []


@pytest.mark.weed
def test_rest_oauth2_sink_on_spark_connect_with_data_in_s3(
    connect: ConnectServer, weed: Any, tmp_path: Path
) -> None:
    """The rest catalog with OAuth2 and S3 storage on weed mini, through a Spark Connect server:
    the server half writes the files and the drop-box records to S3, the client commits. The
    secret key is in neither the client's output, the server's log, the table's metadata nor
    a drop-box record (none is left)."""
    from tests.e2e.test_weed_sinks import (
        aws_sql,
        check_data_files_in_s3,
        event,
        expected,
        metadata_texts,
        read_both,
        rest_oauth2_sql,
        unique,
        verify_catalog,
    )

    ns = unique("cx_rest")
    home, data = tmp_path / "home", tmp_path / "events"
    write_json_lines(data, "part-1.json", [event(i) for i in range(0, 12)])
    (tmp_path / "s.sql").write_text(
        aws_sql(weed)
        + rest_oauth2_sql(weed)
        + f"""
        CREATE SOURCE events FROM FILES 'events/' (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING');
        CREATE SINK events_sink FROM events INTO ICEBERG CATALOG lake (NAMESPACE = '{ns}', TABLE = 'events')
        USING AWS CONNECTION s3 PARTITION BY (day(ts));
        """
    )
    first = icesql(home, "--spark-master", connect.url, "run", "s.sql", "--once", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    write_json_lines(data, "part-2.json", [event(i) for i in range(12, 20)])
    second = icesql(home, "--spark-master", connect.url, "-v", "serve", "--once", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]

    table = verify_catalog(weed).load_table(f"{ns}.events")
    assert read_both(weed, table.metadata_location) == expected(range(20))
    check_data_files_in_s3(weed, table, ns, "events")
    assert [s["icesql.progress"] for s in icesql_summaries(table)] == ["0", "1"]
    records = weed.list_keys(prefix=f"{ns}/events/data/icesql-staging/")
    assert not [k for k in records if k.endswith(".parquet")]  # (weed keeps a folder marker)
    for text in (first.stdout, first.stderr, second.stdout, second.stderr, connect.logs(full=True)):
        assert weed.secret_key not in text
    assert weed.secret_key not in metadata_texts(weed, ns, "events")


def test_files_source_on_s3_through_spark_connect(connect: ConnectServer, weed: Any, tmp_path: Path) -> None:
    """A FILES source on S3 (``AWS CONNECTION``) read through a Spark Connect server: the server's
    Python lists and reads the prefix with the connection's keys (carried in the data source's
    options and the batch writer), and CLEAN SOURCE deletes what each run committed. The secret
    key is in neither the client's output, the server's log nor the table's metadata."""
    import uuid

    from tests.e2e.test_weed_sinks import (
        aws_sql,
        event,
        expected,
        metadata_texts,
        read_both,
        rest_oauth2_sql,
        unique,
        verify_catalog,
    )

    ns = unique("cx_s3src")
    bucket = f"landing-{uuid.uuid4().hex[:8]}"
    s3 = weed.s3_client()
    s3.create_bucket(Bucket=bucket)

    def put(key: str, ids: range) -> None:
        s3.put_object(Bucket=bucket, Key=key, Body="".join(f"{json.dumps(event(i))}\n" for i in ids).encode())

    def keys() -> list[str]:
        listed = s3.list_objects_v2(Bucket=bucket, Prefix="in/")
        return [o["Key"] for o in listed.get("Contents", []) if not o["Key"].endswith("/")]

    put("in/part-1.json", range(0, 12))
    home = tmp_path / "home"
    (tmp_path / "s.sql").write_text(
        aws_sql(weed)
        + rest_oauth2_sql(weed)
        + f"""
        CREATE SOURCE events FROM FILES 's3://{bucket}/in/'
            (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING', AWS CONNECTION = s3,
             CLEAN SOURCE = 'delete');
        CREATE SINK events_sink FROM events INTO ICEBERG CATALOG lake (NAMESPACE = '{ns}', TABLE = 'events')
        USING AWS CONNECTION s3;
        """
    )
    first = icesql(home, "--spark-master", connect.url, "run", "s.sql", "--once", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert keys() == []
    put("in/part-2.json", range(12, 20))
    second = icesql(home, "--spark-master", connect.url, "serve", "--once", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    table = verify_catalog(weed).load_table(f"{ns}.events")
    assert read_both(weed, table.metadata_location) == expected(range(20))
    for text in (first.stdout, first.stderr, second.stdout, second.stderr, connect.logs(full=True)):
        assert weed.secret_key not in text
    assert weed.secret_key not in metadata_texts(weed, ns, "events")
    assert keys() == []  # each run deleted what it committed, its last batch's file included


KAFKA = """\
CREATE SECRET IF NOT EXISTS kpw AS '{secret}';
CREATE CONNECTION IF NOT EXISTS k TO KAFKA (BROKER = '{bootstrap}') WITH (VALIDATE = false);
CREATE CONNECTION IF NOT EXISTS lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');
CREATE SOURCE IF NOT EXISTS orders FROM KAFKA CONNECTION k
  (TOPIC = 'orders', FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING') INCLUDE PARTITION, OFFSET;
CREATE SINK IF NOT EXISTS orders_sink FROM orders INTO ICEBERG CATALOG lake (NAMESPACE = 'cx', TABLE = 'orders');
-- a connection whose password the broker never accepts (it speaks PLAINTEXT only): it must
-- not reach the server's log either
CREATE CONNECTION IF NOT EXISTS ks TO KAFKA (BROKER = '{bootstrap}', SECURITY PROTOCOL = 'SASL_PLAINTEXT',
  SASL MECHANISMS = 'SCRAM-SHA-512', SASL USERNAME = 'icesql', SASL PASSWORD = SECRET kpw) WITH (VALIDATE = false);
CREATE SOURCE IF NOT EXISTS orders_sasl FROM KAFKA CONNECTION ks (TOPIC = 'orders', FORMAT = 'text');
"""


@pytest.mark.kafka
def test_kafka_source_on_spark_connect(connect: ConnectServer, tmp_path: Path) -> None:
    """A Kafka sink through Spark Connect: its tasks read the topic on the server, the client
    commits; a second run reads only the new records, the table holds each record once with the
    offsets in its summary, and a connection's SASL password reaches no log of either side."""
    from tests.support import kafka as K

    require(not K.missing_reason("noida"), K.missing_reason("noida") or "")
    secret = "kafka-connect-pw-7q"
    home, wh = tmp_path / "home", tmp_path / "wh"
    with K.broker("noida", tmp_path / "noida") as b:
        K.create_topic(b.bootstrap, "orders", 3)
        K.produce(b.bootstrap, "orders", [(None, json.dumps({"id": i, "v": f"v{i}"}).encode()) for i in range(300)])
        (tmp_path / "k.sql").write_text(KAFKA.format(secret=secret, bootstrap=b.bootstrap, wh=wh))
        first = icesql(home, "--spark-master", connect.url, "run", "k.sql", "--once", cwd=tmp_path)
        assert first.returncode == 0, first.stderr[-3000:]
        assert sorted(r[0] for r in _rows(home, wh, "cx.orders")) == list(range(300))
        K.produce(b.bootstrap, "orders", [(None, json.dumps({"id": i, "v": f"v{i}"}).encode()) for i in range(300, 420)])
        second = icesql(home, "--spark-master", connect.url, "run", "k.sql", "--once", cwd=tmp_path)
        assert second.returncode == 0, second.stderr[-3000:]
        rows = _rows(home, wh, "cx.orders")
        assert sorted(r[0] for r in rows) == list(range(420))
        replayed = {(c.partition, c.offset) for c in K.replay(b.bootstrap, "orders")}
        assert {(r[2], r[3]) for r in rows} == replayed  # each record once, where the topic has it
        table = load_table(home, "cx.orders", warehouse=wh, catalog_name="lake")
        summary = icesql_summaries(table)[-1]
        offsets = json.loads(summary["icesql.kafka-offsets"])["offsets"]
        assert {int(p): o for p, o in offsets.items()} == K.log_end(b.bootstrap, "orders")
        assert _dropbox_left(wh) == []

        # a sink of the SASL source fails at the handshake: no secret on either side
        shown = icesql(home, "--spark-master", connect.url, "exec", "SELECT * FROM orders_sasl LIMIT 1", cwd=tmp_path)
        assert shown.returncode != 0
    for text in (first.stdout, first.stderr, second.stderr, shown.stdout, shown.stderr, connect.logs(full=True)):
        assert secret not in text
