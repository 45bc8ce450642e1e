"""Sinks on Spark writing Iceberg tables on GCS (fake-gcs-server) and Azure Blob (azurite): the
two Spark paths a sink can take besides the path without Spark (tests/stores/test_store_sinks.py).

* Classic local Spark (``icesql.Session(spark=...)``: given a Spark session, every sink runs on
  it, never in this process): in one session and one ``run --once``, per store, an append sink
  reading a FILES source on the store itself (Spark runs icesql's Arrow path: its Python data
  source lists and reads the prefix through the GCS / AZURE CONNECTION, executors write) and an
  upsert sink reading a VIEW over local JSON files (Spark's own JSON reader and SQL: the Arrow
  path does not take views; executors write data and equality-delete files to the store). A
  streaming-query listener sees each sink's query start on Spark, and the log never says a sink
  runs without Spark. A VIEW over the gs:// source cannot run on Spark (Spark's GCS connector is
  not installed): it fails with the one-line error naming the connection, and the hint
  (``Engine.relation`` checks the sources under a view, not only a source read directly).
* Spark Connect (``--spark-master sc://``; a server of its own, about a minute): a FILES source on gs:// and
  one on abfs:// read by the server's Python, the table files and drop-box records written by
  the server to gs:// and abfss://, committed by the client, in one ``run --once``; a second run
  takes only the new files.

Rows are read back with icesql's SELECT and with DuckDB (httpfs ``gs://``, the azure extension).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.errors import IcesqlError
from tests.support.azurite import Azurite
from tests.support.gcs import FakeGcs
from tests.support.pipeline_helpers import spark_for_tests, write_json_lines
from tests.support.readers import read_duckdb
from tests.support.spark_cluster import ClusterUnavailable, ConnectServer

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = "id BIGINT, k STRING, v BIGINT"
LOCAL_LINE = "runs in this process, without starting Spark"


@pytest.fixture(scope="module")
def spark() -> Any:
    # getOrCreate: the one local Spark session of the run (tests/e2e/conftest.py does the same)
    return spark_for_tests()


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _rows(lo: int, hi: int) -> list[dict[str, Any]]:
    return [{"id": i, "k": f"k{i % 7}", "v": i * 10} for i in range(lo, hi)]


def _body(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _put(fs: Any, path: str, rows: list[dict[str, Any]]) -> None:
    with fs.open_output_stream(path) as f:
        f.write(_body(rows))


def _gcs_sql(gcs: FakeGcs, lake: str, tmp: Path) -> str:
    return f"""
CREATE CONNECTION IF NOT EXISTS g TO GCS (PROJECT = '{gcs.project}', ENDPOINT = '{gcs.endpoint}');
CREATE CONNECTION IF NOT EXISTS lake_gs TO ICEBERG CATALOG (
  TYPE = 'sql', URI = 'sqlite:///{tmp}/gs-catalog.db', WAREHOUSE = 'gs://{lake}/wh', GCS CONNECTION = g);
"""


def _azure_sql(az: Azurite, lake: str, tmp: Path) -> str:
    # as in test_store_sinks: the warehouse in Iceberg Java's spelling, written with a SAS token
    # for its container; the source in pyiceberg's (abfs://container/path), read with the key
    return f"""
CREATE SECRET IF NOT EXISTS az_key AS '{az.account_key}';
CREATE SECRET IF NOT EXISTS lake_sas AS '{az.sas_token(lake)}';
CREATE CONNECTION IF NOT EXISTS landing_az TO AZURE (ACCOUNT NAME = '{az.account_name}', ACCOUNT KEY = SECRET az_key, ENDPOINT = '{az.endpoint}');
CREATE CONNECTION IF NOT EXISTS lake_az TO AZURE (ACCOUNT NAME = '{az.account_name}', SAS TOKEN = SECRET lake_sas, ENDPOINT = '{az.endpoint}');
CREATE CONNECTION IF NOT EXISTS lake_az_cat TO ICEBERG CATALOG (
  TYPE = 'sql', URI = 'sqlite:///{tmp}/az-catalog.db',
  WAREHOUSE = 'abfss://{lake}@{az.account_name}.dfs.core.windows.net/wh', AZURE CONNECTION = lake_az);
"""


def _azure_duckdb_secret(az: Azurite) -> str:
    return (
        "CREATE SECRET icesql_az (TYPE azure, CONNECTION_STRING "
        f"'{az.connection_string}DfsEndpoint={az.endpoint};')"
    )


def _select(s: icesql.Session, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in s.execute(sql)[-1].rows]


def _metadata(s: icesql.Session, catalog: str, ns: str, table: str) -> str:
    return str(s.engine.load_table(catalog, (ns,), table).metadata_location)


class _Started:
    """The names of the streaming queries Spark started (a ``StreamingQueryListener``)."""

    def __init__(self, spark: Any) -> None:
        from pyspark.sql.streaming import StreamingQueryListener

        names: list[str] = []

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - pyspark's name
                names.append(str(event.name))

            def onQueryProgress(self, event: Any) -> None:  # noqa: N802
                pass

            def onQueryIdle(self, event: Any) -> None:  # noqa: N802
                pass

            def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
                pass

        self.names = names
        self.listener = Listener()
        self.spark = spark
        spark.streams.addListener(self.listener)

    def close(self) -> None:
        self.spark.streams.removeListener(self.listener)


# ------------------------------------------------------------------ classic local Spark


@pytest.mark.spark
@pytest.mark.gcs
@pytest.mark.azure
def test_sinks_on_local_spark_write_gcs_and_azure_tables(
    spark: Any,
    fake_gcs: FakeGcs,
    azurite: Azurite,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    gs_lake, gs_landing = _unique("lake"), _unique("landing")
    az_lake, az_landing = _unique("lake"), _unique("landing")
    fake_gcs.create_bucket(gs_lake)
    fake_gcs.create_bucket(gs_landing)
    azurite.create_container(az_lake)
    azurite.create_container(az_landing)
    gfs, afs = fake_gcs.pyarrow_fs(), azurite.pyarrow_fs()
    _put(gfs, f"{gs_landing}/events/part-0.json", _rows(0, 20))
    _put(gfs, f"{gs_landing}/events/part-1.json", _rows(20, 35))
    _put(afs, f"{az_landing}/events/part-0.json", _rows(100, 120))
    _put(afs, f"{az_landing}/events/part-1.json", _rows(120, 135))
    # the upserts' input: local files Spark's own reader takes one per batch, by mtime; a key
    # at most once per file, so the latest row per key is the one of the later file
    changes = tmp_path / "changes"
    first, second = _rows(0, 7), [{**r, "v": r["v"] + 1} for r in _rows(3, 10)]
    for n, rows in enumerate((first, second)):
        path = write_json_lines(changes, f"{n:03d}.json", rows)
        os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))

    ns = f"spark_{uuid.uuid4().hex[:8]}"
    sql = (
        _gcs_sql(fake_gcs, gs_lake, tmp_path)
        + _azure_sql(azurite, az_lake, tmp_path)
        + f"""
CREATE SOURCE gs_events FROM FILES 'gs://{gs_landing}/events/' (FORMAT = 'json', SCHEMA = '{SCHEMA}', GCS CONNECTION = g);
CREATE SOURCE az_events FROM FILES 'abfs://{az_landing}/events/'
  (FORMAT = 'json', SCHEMA = '{SCHEMA}', AZURE CONNECTION = landing_az);
CREATE SOURCE changes FROM FILES '{changes}' (FORMAT = 'json', SCHEMA = '{SCHEMA}', MAX FILES PER TRIGGER = 1);
CREATE VIEW scaled AS SELECT k, id, v * 2 AS v2 FROM changes WHERE id >= 0;
CREATE SINK gs_append FROM gs_events INTO ICEBERG CATALOG lake_gs (NAMESPACE = '{ns}', TABLE = 'events')
  PARTITION BY (bucket(4, id));
CREATE SINK gs_upsert FROM scaled INTO ICEBERG CATALOG lake_gs (NAMESPACE = '{ns}', TABLE = 'latest')
  KEY (k) NOT ENFORCED MODE UPSERT;
CREATE SINK az_append FROM az_events INTO ICEBERG CATALOG lake_az_cat (NAMESPACE = '{ns}', TABLE = 'events')
  PARTITION BY (bucket(4, id));
CREATE SINK az_upsert FROM scaled INTO ICEBERG CATALOG lake_az_cat (NAMESPACE = '{ns}', TABLE = 'latest')
  KEY (k) NOT ENFORCED MODE UPSERT;
"""
    )
    sinks = ["gs_append", "gs_upsert", "az_append", "az_upsert"]
    want_append_gs = sorted((r["id"], r["k"], r["v"]) for r in _rows(0, 35))
    want_append_az = sorted((r["id"], r["k"], r["v"]) for r in _rows(100, 135))
    latest = {r["k"]: r for r in [*first, *second]}
    want_upsert = sorted((r["k"], r["id"], r["v"] * 2) for r in latest.values())

    caplog.set_level(logging.INFO, logger="icesql")
    started = _Started(spark)
    try:
        with icesql.Session(home=tmp_path / "home", spark=spark) as s:
            s.execute(sql)
            s.run(once=True, sinks=sinks)
            assert s.engine._spark is spark
            executors = {n: getattr(s.engine.runner(n).query, "executor", "spark query") for n in sinks}
            status = {st.name: st for st in s.status()}
            for name in sinks:
                assert status[name].last_error is None, (name, status[name].last_error)
            assert {n: status[n].rows_committed for n in sinks} == {
                "gs_append": 35, "gs_upsert": 14, "az_append": 35, "az_upsert": 14,
            }  # fmt: skip

            for cat in ("lake_gs", "lake_az_cat"):
                want = want_append_gs if cat == "lake_gs" else want_append_az
                got = _select(s, f"SELECT id, k, v FROM {cat}.{ns}.events ORDER BY id LIMIT 100000")
                assert got == want, f"{cat}: SELECT of the append table: {len(got)} rows"
                got = _select(s, f"SELECT k, id, v2 FROM {cat}.{ns}.latest ORDER BY k LIMIT 100000")
                assert got == want_upsert, f"{cat}: SELECT of the upsert table: {got}"

            gs_secret = fake_gcs.duckdb_secret()
            events_meta = _metadata(s, "lake_gs", ns, "events")
            latest_meta = _metadata(s, "lake_gs", ns, "latest")
            assert events_meta.startswith(f"gs://{gs_lake}/wh/"), events_meta
            assert sorted(read_duckdb(events_meta, "id, k, v", secret=gs_secret)) == want_append_gs
            assert sorted(read_duckdb(latest_meta, "k, id, v2", secret=gs_secret)) == want_upsert
            az_secret, az_ext = _azure_duckdb_secret(azurite), "duckdb_extension_azure"
            events_meta = _metadata(s, "lake_az_cat", ns, "events")
            latest_meta = _metadata(s, "lake_az_cat", ns, "latest")
            assert events_meta.startswith(f"abfss://{az_lake}@"), events_meta
            assert (
                sorted(read_duckdb(events_meta, "id, k, v", secret=az_secret, extension=az_ext))
                == want_append_az
            )
            assert (
                sorted(read_duckdb(latest_meta, "k, id, v2", secret=az_secret, extension=az_ext))
                == want_upsert
            )
    finally:
        started.close()
    # every sink ran on the given Spark session, none in this process: the appends' batches
    # planned here and run on Spark (``backends.spark.planned``), the upserts over a view as
    # Spark's own streaming query (a view is Spark's plan over the source's streaming DataFrame)
    assert executors == {"gs_append": "spark", "az_append": "spark", "gs_upsert": "spark query", "az_upsert": "spark query"}
    for name in ("gs_upsert", "az_upsert"):
        assert any(n.startswith(f"icesql_{name}_") for n in started.names), (name, started.names)
    assert LOCAL_LINE not in caplog.text


@pytest.mark.spark
@pytest.mark.gcs
def test_a_view_over_a_gcs_source_is_refused_with_the_arrow_path_error(
    spark: Any,
    fake_gcs: FakeGcs,
    tmp_path: Path,
) -> None:
    """Spark's GCS connector is not installed: only the Arrow path reads a gs:// FILES source, and
    a view over it cannot take that path. The sink fails with one line naming the source, its
    path and its connection, and the hint."""
    lake, landing = _unique("lake"), _unique("landing")
    fake_gcs.create_bucket(lake)
    fake_gcs.create_bucket(landing)
    _put(fake_gcs.pyarrow_fs(), f"{landing}/events/part-0.json", _rows(0, 5))
    ns = f"spark_{uuid.uuid4().hex[:8]}"
    sql = (
        _gcs_sql(fake_gcs, lake, tmp_path)
        + f"""
CREATE SOURCE gs_events FROM FILES 'gs://{landing}/events/' (FORMAT = 'json', SCHEMA = '{SCHEMA}', GCS CONNECTION = g);
CREATE VIEW gs_viewed AS SELECT id, upper(k) AS k FROM gs_events;
CREATE SINK gs_view_sink FROM gs_viewed INTO ICEBERG CATALOG lake_gs (NAMESPACE = '{ns}', TABLE = 'never');
"""
    )
    with icesql.Session(home=tmp_path / "home", spark=spark) as s:
        s.execute(sql)
        with pytest.raises(IcesqlError) as info:
            s.run(once=True, sinks=["gs_view_sink"])
    text = info.value.render()
    assert len(info.value.message.splitlines()) == 1 and "Traceback" not in text, text
    assert f"source 'gs_events' reads gs://{landing}/events/ through GCS CONNECTION g" in text, text
    assert "which only icesql's Arrow path can do" in text and "a view over it cannot" in text, text


# ------------------------------------------------------------------ Spark Connect


@pytest.fixture(scope="module")
def connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    try:
        server = ConnectServer.start(tmp_path_factory.mktemp("connect"))
    except ClusterUnavailable as e:
        pytest.fail(f"the Spark Connect server did not start: {e}")
    with server:
        yield server


def _icesql(home: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # a child: a Spark Connect client marks its whole process as Connect
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    return subprocess.run(
        [sys.executable, "-m", "icesql", "--home", str(home), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


@pytest.mark.spark
@pytest.mark.gcs
@pytest.mark.azure
def test_files_sources_on_gcs_and_azure_through_spark_connect(
    connect: ConnectServer,
    fake_gcs: FakeGcs,
    azurite: Azurite,
    tmp_path: Path,
) -> None:
    gs_lake, gs_landing = _unique("lake"), _unique("landing")
    az_lake, az_landing = _unique("lake"), _unique("landing")
    fake_gcs.create_bucket(gs_lake)
    fake_gcs.create_bucket(gs_landing)
    azurite.create_container(az_lake)
    azurite.create_container(az_landing)
    gfs, afs = fake_gcs.pyarrow_fs(), azurite.pyarrow_fs()
    _put(gfs, f"{gs_landing}/in/part-0.json", _rows(0, 12))
    _put(afs, f"{az_landing}/in/part-0.json", _rows(100, 112))

    ns = f"cx_{uuid.uuid4().hex[:8]}"
    home = tmp_path / "home"
    (tmp_path / "s.sql").write_text(
        _gcs_sql(fake_gcs, gs_lake, tmp_path)
        + _azure_sql(azurite, az_lake, tmp_path)
        + f"""
CREATE SOURCE IF NOT EXISTS gs_events FROM FILES 'gs://{gs_landing}/in/' (FORMAT = 'json', SCHEMA = '{SCHEMA}', GCS CONNECTION = g);
CREATE SOURCE IF NOT EXISTS az_events FROM FILES 'abfs://{az_landing}/in/'
  (FORMAT = 'json', SCHEMA = '{SCHEMA}', AZURE CONNECTION = landing_az);
CREATE SINK IF NOT EXISTS gs_sink FROM gs_events INTO ICEBERG CATALOG lake_gs (NAMESPACE = '{ns}', TABLE = 'events')
  PARTITION BY (bucket(4, id));
CREATE SINK IF NOT EXISTS az_sink FROM az_events INTO ICEBERG CATALOG lake_az_cat (NAMESPACE = '{ns}', TABLE = 'events');
"""
    )
    first = _icesql(home, "--spark-master", connect.url, "run", "s.sql", "--once", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-4000:]
    _put(gfs, f"{gs_landing}/in/part-1.json", _rows(12, 20))
    _put(afs, f"{az_landing}/in/part-1.json", _rows(112, 120))
    second = _icesql(home, "--spark-master", connect.url, "run", "s.sql", "--once", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-4000:]
    (tmp_path / "client.log").write_text(first.stderr + second.stderr)  # for a look after a failure
    for out in (first, second):
        assert LOCAL_LINE not in out.stderr, out.stderr[-3000:]
        for sink in ("gs_sink", "az_sink"):
            assert f"commit sink={sink}" in out.stderr, (sink, out.stderr[-3000:])
    # the server ran both sinks' queries, on the Arrow path's Python data source
    server_log = connect.logs(full=True)
    for sink in ("gs_sink", "az_sink"):
        assert f"Starting icesql_{sink}_" in server_log, sink
    assert "DataSourceV2 named 'icesql_files'" in server_log

    want_gs = sorted((r["id"], r["k"], r["v"]) for r in _rows(0, 20))
    want_az = sorted((r["id"], r["k"], r["v"]) for r in _rows(100, 120))
    with icesql.Session(home=home) as s:  # reads only: no Spark, no Connect in this process
        assert _select(s, f"SELECT id, k, v FROM lake_gs.{ns}.events ORDER BY id LIMIT 100000") == want_gs
        assert _select(s, f"SELECT id, k, v FROM lake_az_cat.{ns}.events ORDER BY id LIMIT 100000") == want_az
        gs_table = s.engine.load_table("lake_gs", (ns,), "events")
        az_table = s.engine.load_table("lake_az_cat", (ns,), "events")
        gs_meta, az_meta = str(gs_table.metadata_location), str(az_table.metadata_location)
        # one commit per run, in order; every file under the store's warehouse
        for table in (gs_table, az_table):
            progress = [s_.summary.additional_properties.get("icesql.progress") for s_ in table.snapshots()]
            assert progress == ["0", "1"], progress
        gs_files = [t.file.file_path for t in gs_table.scan().plan_files()]
        az_files = [t.file.file_path for t in az_table.scan().plan_files()]
    assert gs_files and all(f.startswith(f"gs://{gs_lake}/wh/") for f in gs_files), gs_files
    assert az_files and all(f.startswith(f"abfss://{az_lake}@") for f in az_files), az_files
    assert sorted(read_duckdb(gs_meta, "id, k, v", secret=fake_gcs.duckdb_secret())) == want_gs
    assert (
        sorted(
            read_duckdb(
                az_meta, "id, k, v", secret=_azure_duckdb_secret(azurite), extension="duckdb_extension_azure"
            )
        )
        == want_az
    )
    # the drop box on each store is empty: the client took every record the server left
    from pyarrow import fs as pafs

    for fs, root in ((gfs, gs_lake), (afs, az_lake)):
        left = fs.get_file_info(pafs.FileSelector(f"{root}/wh", recursive=True, allow_not_found=True))
        records = [i.path for i in left if "icesql-staging" in i.path and i.path.endswith(".parquet")]
        assert records == [], records
    # no key or SAS signature in either side's output
    for text in (first.stdout, first.stderr, second.stdout, second.stderr, connect.logs(full=True)):
        assert azurite.account_key not in text
