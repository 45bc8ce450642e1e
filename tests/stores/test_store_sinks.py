"""An append sink and an upsert sink on every object store and catalog icesql proves, each on
the real server the suite starts: GCS (fake-gcs-server), Azure Blob (azurite), AWS Glue (moto's
server, with S3 on moto) and a Hive metastore (hive-metastore 2.3 from the pyspark wheel).

Each backend runs the same script (``icesql run --once`` in a child process, as a scheduled job
runs it, on the path without Spark) through SIGKILLs - on GCS and Azure at every kill point
(after a batch is staged, on the writer while it writes, after a commit), on Glue and Hive after
a commit (CI's time: the kill loops of tests/engine/test_crash.py cover every point) - then a
clean run, then a restart with new files. The rows read back must equal the input exactly once (append) and the replayed latest row per key
(upsert), through every reader that reaches the store:

==========  ===============  ===========================  ===========================================
backend     icesql SELECT    DuckDB                       Iceberg Java (Spark 3.5)
==========  ===============  ===========================  ===========================================
gcs         yes              yes (httpfs ``gs://``)       no: the harness has no GCS FileIO jars
azure       yes              yes (azure extension)        no: the harness has no Azure FileIO jars
glue        yes              yes (httpfs, moto's S3)      no: the harness has no Glue client (AWS SDK)
hive        yes              yes (local warehouse)        yes: HiveCatalog on the same metastore
==========  ===============  ===========================  ===========================================

GCS and Azure sinks read their FILES source from the same store (listing, reading and CLEAN
SOURCE = 'archive' there); the Glue and Hive sinks read local files (S3 sources are proven
against weed in tests/e2e/test_s3_files_source.py).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icesql.engine.iceberg.table_files import live_files, path_key
from icesql.engine.maintenance.expire import expire_snapshots
from icesql.engine.maintenance.orphans import remove_orphan_files, staged_files
from icesql.session import Session
from tests.support.azurite import Azurite
from tests.support.gcs import FakeGcs
from tests.support.hive import HiveMetastore
from tests.support.moto import MotoServer

ROOT = Path(__file__).resolve().parents[2]
ROWS_PER_FILE = 20
KEYS = 30  # k = id % KEYS: a key at most once per file, so the latest row per key is the max id


@dataclass
class Backend:
    """One store and catalog: the SQL that creates the connections (the catalog is ``lake``),
    where the sinks' input goes, and the readers that can reach its tables."""

    name: str
    setup_sql: str
    source_root: str  # events/ and changes/ below it
    source_options: str  # ', GCS CONNECTION = g' ...
    put: Callable[[str, bytes], None]  # a file under source_root
    names: Callable[[str], list[str]]  # file names under source_root/<dir>
    read_other: dict[str, Callable[[str], list[tuple[Any, ...]]]] = field(default_factory=dict)
    archive: bool = False  # CLEAN SOURCE = 'archive' on the append sink's source
    secrets: tuple[str, ...] = ()  # values that must show nowhere: logs, SHOW CREATE, table metadata
    # where the runs are SIGKILLed: every kill point on GCS and Azure; CI's time takes one (after a
    # commit, before it is recorded: the exactly-once hazard) on the slower catalog servers
    kills: tuple[str, ...] = ("committed:2",)
    # a namespace of its own: the Glue and Hive catalogs live as long as the test session
    namespace: str = field(default_factory=lambda: f"icesql_{uuid.uuid4().hex[:8]}")


def _rows(k: int) -> list[dict[str, Any]]:
    return [
        {"id": i, "k": f"k{i % KEYS}", "v": i * 10, "ts": f"2026-01-0{1 + i % 5}T10:00:00Z"}
        for i in range(k * ROWS_PER_FILE, (k + 1) * ROWS_PER_FILE)
    ]


def _script(b: Backend) -> str:
    archive = (
        f", CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = '{b.source_root}/archive/'" if b.archive else ""
    )
    schema = "id BIGINT, k STRING, v BIGINT, ts TIMESTAMP"
    return f"""{b.setup_sql}
CREATE SOURCE IF NOT EXISTS events FROM FILES '{b.source_root}/events/'
  (FORMAT = 'json', SCHEMA = '{schema}', MAX FILES PER TRIGGER = 2{b.source_options}{archive});
CREATE SOURCE IF NOT EXISTS changes FROM FILES '{b.source_root}/changes/'
  (FORMAT = 'json', SCHEMA = '{schema}', MAX FILES PER TRIGGER = 1{b.source_options});
CREATE SINK IF NOT EXISTS appends FROM events
  INTO ICEBERG CATALOG lake (NAMESPACE = '{b.namespace}', TABLE = 'events')
  PARTITION BY (bucket(4, id));
CREATE SINK IF NOT EXISTS upserts FROM changes
  INTO ICEBERG CATALOG lake (NAMESPACE = '{b.namespace}', TABLE = 'latest')
  KEY (k) NOT ENFORCED MODE UPSERT;
"""


def _put_files(b: Backend, first: int, count: int) -> None:
    for k in range(first, first + count):
        body = "\n".join(json.dumps(r) for r in _rows(k)).encode()
        b.put(f"events/part-{k:04d}.json", body)
        b.put(f"changes/part-{k:04d}.json", body)


def _run(home: Path, script: Path, kill_at: str | None = None) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICESQL_TEST_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if kill_at:
        env["ICESQL_TEST_KILL_AT"] = kill_at
    proc = subprocess.run(
        [sys.executable, "-m", "icesql", "--home", str(home), "run", str(script), "--once"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        start_new_session=True,  # the kill hook kills its own process group, not pytest's
    )
    return proc.returncode, proc.stdout + proc.stderr


def _select(session: Session, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in session.execute(sql)[-1].rows]


def _metadata_location(session: Session, namespace: str, table: str) -> str:
    return str(session.engine.load_table("lake", (namespace,), table).metadata_location)


def check_stores_run(b: Backend, tmp_path: Path) -> None:
    home, script = tmp_path / "home", tmp_path / "pipeline.sql"
    script.write_text(_script(b))
    _put_files(b, 0, 6)
    logs = []
    for point in b.kills:
        code, log = _run(home, script, point)
        logs.append(log)
        assert code == -signal.SIGKILL, f"{b.name}: the run was not killed at {point} (exit {code}):\n{log[-3000:]}"
    code, log = _run(home, script)
    logs.append(log)
    assert code == 0, f"{b.name}: the clean run failed:\n{log[-3000:]}"
    _put_files(b, 6, 3)  # a restart with more input
    code, log = _run(home, script)
    logs.append(log)
    assert code == 0, f"{b.name}: the restart failed:\n{log[-3000:]}"
    session = Session(home=home)  # what the runs left, read through one session
    try:
        _no_secret_shows(b, session, "\n".join(logs))
        _compacted(b, session)
        _maintain(b, session, home)
        _read_back(b, session)
    finally:
        session.close()
    if b.archive:  # every file the append sink committed moved under the archive directory
        assert b.names("events") == [] and len(b.names("archive")) == 9, (b.names("events"), b.names("archive"))


def _read_back(b: Backend, session: Session) -> None:
    """Every reader that reaches the store reads both tables equal to the input: exactly once
    (append) and the replay (upsert)."""
    every = [r for k in range(9) for r in _rows(k)]
    want_append = sorted((r["id"], r["k"], r["v"]) for r in every)
    latest: dict[str, dict[str, Any]] = {}
    for r in every:  # files in order, a key once per file
        latest[r["k"]] = r
    want_upsert = sorted((r["k"], r["id"], r["v"]) for r in latest.values())

    got = _select(session, f"SELECT id, k, v FROM lake.{b.namespace}.events ORDER BY id LIMIT 100000")
    assert got == want_append, f"{b.name}: icesql's SELECT of the append table: {len(got)} rows, {len(want_append)} expected"
    got = _select(session, f"SELECT k, id, v FROM lake.{b.namespace}.latest ORDER BY k LIMIT 100000")
    assert got == want_upsert, f"{b.name}: icesql's SELECT of the upsert table differs"
    for reader, read in b.read_other.items():
        rows = sorted(read(_metadata_location(session, b.namespace, "events")))
        assert rows == want_append, f"{b.name}: {reader} reads {len(rows)} rows of the append table"
        rows = sorted(read(_metadata_location(session, b.namespace, "latest")))
        assert sorted((k, i, v) for i, k, v in rows) == want_upsert, f"{b.name}: {reader} reads the upsert table wrong"


def _no_secret_shows(b: Backend, session: Session, logs: str) -> None:
    """The store's credentials are in none of the runs' output, SHOW CREATE of the connections,
    or the tables' metadata."""
    shown = [str(r) for r in session.execute("SHOW CONNECTIONS")[-1].rows]
    for (name,) in ((r[0],) for r in session.execute("SHOW CONNECTIONS")[-1].rows):
        shown.append(session.execute(f"SHOW CREATE CONNECTION {name}")[-1].rows[0][-1])
    metadata = []
    for name in ("events", "latest"):
        table = session.engine.load_table("lake", (b.namespace,), name)
        with table.io.new_input(table.metadata_location).open() as f:
            metadata.append(f.read().decode())
    for value in b.secrets:
        for where, text in (("the runs' output", logs), ("SHOW", "\n".join(shown)), ("table metadata", "\n".join(metadata))):
            assert value not in text, f"{b.name}: a secret shows in {where}"


def _compacted(b: Backend, session: Session) -> None:
    """Both sinks compacted their tables on the store as they ran (a ``replace`` snapshot)."""
    for name in ("events", "latest"):
        table = session.engine.load_table("lake", (b.namespace,), name)
        ops = {s.summary.operation.value for s in table.snapshots() if s.summary is not None}
        assert "replace" in ops, f"{b.name}: {name} was never compacted: {ops}"


def _maintain(b: Backend, session: Session, home: Path) -> None:
    """Expiry and orphan cleanup on the store, by the functions the sinks' maintenance runs
    (compaction already ran inside the sinks: their logs say ``step=compact``), with every file
    old enough: a file planted under each table goes, every file a snapshot reads stays (the
    readers read the tables whole afterwards)."""
    for name in ("events", "latest"):
        table = session.engine.load_table("lake", (b.namespace,), name)
        planted = f"{table.location().rstrip('/')}/data/planted-orphan.parquet"
        buf = io.BytesIO()
        pq.write_table(pa.table({"x": [1]}), buf)
        with table.io.new_output(planted).create(overwrite=True) as out:
            out.write(buf.getvalue())
        expired = expire_snapshots(table, time.time() + 1, keep_at_least=1)
        assert expired.expired and expired.snapshots_after == 1, f"{b.name}: {expired}"
        table = session.engine.load_table("lake", (b.namespace,), name)
        data, deletes = live_files(table, table.current_snapshot())
        live = {path_key(f.path) for f in (*data, *deletes)}
        removed = remove_orphan_files(table, time.time() + 1, protected_paths=staged_files(home))
        gone = {path_key(p) for p in removed.deleted}
        # the planted file, and what the killed runs wrote and never committed
        assert path_key(planted) in gone and not gone & live, f"{b.name}: {name}: {removed.deleted}"


def _duckdb(secret: str | None = None, extension: str = "duckdb_extension_httpfs", **kw: Any) -> Any:
    from tests.support.readers import read_duckdb

    return lambda location: read_duckdb(location, "id, k, v", secret=secret, extension=extension, **kw)


# --------------------------------------------------------------------------- the backends


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _landing(fs: Any, landing: str) -> tuple[Callable[[str, bytes], None], Callable[[str], list[str]]]:
    """(put a file, the file names under a directory) of a bucket or container, through pyarrow."""
    from pyarrow import fs as pafs

    def put(name: str, body: bytes) -> None:
        with fs.open_output_stream(f"{landing}/{name}") as f:
            f.write(body)

    def names(d: str) -> list[str]:
        found = fs.get_file_info(pafs.FileSelector(f"{landing}/{d}", recursive=True, allow_not_found=True))
        return sorted(i.base_name for i in found if i.type == pafs.FileType.File)

    return put, names


@pytest.fixture
def gcs_backend(fake_gcs: FakeGcs, tmp_path: Path) -> Backend:
    lake, landing = _unique("lake"), _unique("landing")
    fake_gcs.create_bucket(lake)
    fake_gcs.create_bucket(landing)
    put, names = _landing(fake_gcs.pyarrow_fs(), landing)

    setup = f"""
CREATE CONNECTION IF NOT EXISTS g TO GCS (PROJECT = '{fake_gcs.project}', ENDPOINT = '{fake_gcs.endpoint}');
CREATE CONNECTION IF NOT EXISTS lake TO ICEBERG CATALOG (
  TYPE = 'sql', URI = 'sqlite:///{tmp_path}/catalog.db', WAREHOUSE = 'gs://{lake}/wh', GCS CONNECTION = g);
"""
    return Backend(
        "gcs",
        setup,
        f"gs://{landing}",
        ", GCS CONNECTION = g",
        put,
        names,
        {"duckdb": _duckdb(fake_gcs.duckdb_secret())},
        archive=True,
        kills=("staged:1", "write:2", "committed:3"),
    )


@pytest.fixture
def azure_backend(azurite: Azurite, tmp_path: Path) -> Backend:
    lake, landing = _unique("lake"), _unique("landing")
    azurite.create_container(lake)
    azurite.create_container(landing)
    put, names = _landing(azurite.pyarrow_fs(), landing)

    account = azurite.account_name
    sas = azurite.sas_token(lake)
    # the warehouse in Iceberg Java's spelling (container@account.dfs.core.windows.net), written
    # with a SAS token for that container; the source in pyiceberg's (abfs://container/path),
    # read with the account key
    setup = f"""
CREATE SECRET IF NOT EXISTS az_key AS '{azurite.account_key}';
CREATE SECRET IF NOT EXISTS lake_sas AS '{sas}';
CREATE CONNECTION IF NOT EXISTS landing_az TO AZURE (ACCOUNT NAME = '{account}', ACCOUNT KEY = SECRET az_key, ENDPOINT = '{azurite.endpoint}');
CREATE CONNECTION IF NOT EXISTS lake_az TO AZURE (ACCOUNT NAME = '{account}', SAS TOKEN = SECRET lake_sas, ENDPOINT = '{azurite.endpoint}');
CREATE CONNECTION IF NOT EXISTS lake TO ICEBERG CATALOG (
  TYPE = 'sql', URI = 'sqlite:///{tmp_path}/catalog.db',
  WAREHOUSE = 'abfss://{lake}@{account}.dfs.core.windows.net/wh', AZURE CONNECTION = lake_az);
"""
    secret = (
        "CREATE SECRET icesql_az (TYPE azure, CONNECTION_STRING "
        f"'{azurite.connection_string}DfsEndpoint={azurite.endpoint};')"
    )
    return Backend(
        "azure",
        setup,
        f"abfs://{landing}",
        ", AZURE CONNECTION = landing_az",
        put,
        names,
        {"duckdb": _duckdb(secret, "duckdb_extension_azure")},
        archive=True,
        secrets=(azurite.account_key, sas.split("sig=", 1)[1].split("&", 1)[0]),
        kills=("staged:1", "write:2", "committed:3"),
    )


@pytest.fixture
def glue_backend(moto_server: MotoServer, tmp_path: Path) -> Backend:
    bucket = _unique("warehouse")
    moto_server.create_bucket(bucket)
    local = tmp_path / "in"
    secret_key = f"sk-{uuid.uuid4().hex}"  # moto checks no key: one that shows only if it leaks
    setup = f"""
CREATE SECRET IF NOT EXISTS moto_secret AS '{secret_key}';
CREATE CONNECTION IF NOT EXISTS aws TO AWS (
  ACCESS KEY ID = '{moto_server.access_key}', SECRET ACCESS KEY = SECRET moto_secret,
  REGION = '{moto_server.region}', ENDPOINT = '{moto_server.endpoint}');
CREATE CONNECTION IF NOT EXISTS lake TO ICEBERG CATALOG (
  TYPE = 'glue', URI = '{moto_server.endpoint}', WAREHOUSE = 's3://{bucket}/wh', AWS CONNECTION = aws);
"""
    return Backend(
        "glue",
        setup,
        str(local),
        "",
        lambda name, body: _local_put(local, name, body),
        lambda d: sorted(p.name for p in (local / d).glob("*")),
        {"duckdb": _duckdb(s3=moto_server.s3_properties())},
        secrets=(secret_key,),
    )


def _local_put(root: Path, name: str, body: bytes) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name("." + path.name)
    tmp.write_bytes(body)
    tmp.rename(path)


@pytest.fixture
def hive_backend(hive_metastore: HiveMetastore, tmp_path: Path) -> Backend:
    local = tmp_path / "in"
    setup = f"""
CREATE CONNECTION IF NOT EXISTS lake TO ICEBERG CATALOG (
  TYPE = 'hive', URI = '{hive_metastore.uri}', WAREHOUSE = '{hive_metastore.warehouse}');
"""
    return Backend(
        "hive",
        setup,
        str(local),
        "",
        lambda name, body: _local_put(local, name, body),
        lambda d: sorted(p.name for p in (local / d).glob("*")),
        {"duckdb": _duckdb()},
    )


@pytest.mark.parametrize(
    "store",
    [
        pytest.param("gcs", marks=pytest.mark.gcs),
        pytest.param("azure", marks=pytest.mark.azure),
        pytest.param("glue", marks=pytest.mark.glue),
        pytest.param("hive", marks=pytest.mark.hive),
    ],
)
def test_append_and_upsert_through_kills(store: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    check_stores_run(request.getfixturevalue(f"{store}_backend"), tmp_path)
