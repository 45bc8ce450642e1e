"""Spark Connect: schemas can be read, sinks are refused at once with a clear error.

A sink's ``foreachBatch`` is a bound method of its ``SinkRunner`` (locks, the state store's
callbacks, the catalog, the staging area). Under Spark Connect the client must pickle it and a
server-side Python process runs it, so it cannot be serialised (``cannot pickle
'_thread.RLock' object``) and, even if it could, commits and state would happen in another
process. ``Engine.start_sink`` therefore refuses a Connect session before starting anything.

The first tests need no server. The last one starts a real Spark Connect server from the pyspark
wheel's jars (slow, and skipped unless the Connect client's ``grpcio`` is importable).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.errors import ExecutionError
from icesql.executor.spark import SINKS_ON_CONNECT_HINT, sinks_need_classic
from tests.support.pipeline_helpers import write_json_lines

DDL = """
    CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{warehouse}');
    CREATE SOURCE events FROM FILES '{data}' (FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING');
    CREATE SINK events_sink FROM events INTO ICEBERG CATALOG lake (NAMESPACE = 'e2e', TABLE = 'events');
"""


class _FakeConnectSession:
    """Stands for ``pyspark.sql.connect.session.SparkSession`` (no server behind it)."""


_FakeConnectSession.__module__ = "pyspark.sql.connect.session"


class _FakeClassicSession:
    pass


def test_sinks_need_classic_by_url_and_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ICESQL_SPARK_MASTER", raising=False)
    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
    assert sinks_need_classic("sc://127.0.0.1:15002")
    assert not sinks_need_classic("local[*]")
    assert not sinks_need_classic("spark://127.0.0.1:7077")
    assert not sinks_need_classic(None)
    assert sinks_need_classic(spark=_FakeConnectSession())
    assert not sinks_need_classic(spark=_FakeClassicSession())
    # a session handed in wins over the URL
    assert not sinks_need_classic("sc://h:1", spark=_FakeClassicSession())
    monkeypatch.setenv("ICESQL_SPARK_MASTER", "sc://127.0.0.1:15002")
    assert sinks_need_classic(None)


def _events(tmp_path: Path) -> tuple[Path, Path, Path]:
    data = tmp_path / "events"
    write_json_lines(data, "part-1.json", [{"id": i, "v": f"v{i}"} for i in range(3)])
    return data, tmp_path / "home", tmp_path / "warehouse"


@pytest.mark.parametrize("how", ["url", "session"])
def test_run_on_spark_connect_is_refused_at_once(tmp_path: Path, how: str) -> None:
    """Nothing listens on the URL: the refusal comes before any connection attempt."""
    data, home, warehouse = _events(tmp_path)
    kwargs: dict[str, Any] = (
        {"spark_master": "sc://127.0.0.1:1"} if how == "url" else {"spark": _FakeConnectSession()}
    )
    with icesql.Session(home=home, **kwargs) as s:
        s.execute(DDL.format(warehouse=warehouse, data=data))
        with pytest.raises(ExecutionError) as e:
            s.run(once=True)
    assert "Spark Connect" in e.value.message
    assert e.value.hint == SINKS_ON_CONNECT_HINT
    assert "\n" not in e.value.message
    assert not list(warehouse.rglob("*.metadata.json"))  # no table: nothing was started


@pytest.mark.spark
@pytest.mark.slow
def test_connect_server_reads_schemas_and_refuses_sinks(tmp_path: Path) -> None:
    if importlib.util.find_spec("grpc") is None:
        pytest.skip("the Spark Connect client needs grpcio (pip install 'pyspark[connect]')")
    from tests.support.spark_cluster import ClusterUnavailable, ConnectServer

    data, home, warehouse = _events(tmp_path)
    try:
        server = ConnectServer.start(tmp_path / "connect")
    except ClusterUnavailable as e:
        pytest.fail(f"the Spark Connect server did not start: {e}")
    with server, icesql.Session(home=home, spark_master=server.url) as s:
        s.execute(DDL.format(warehouse=warehouse, data=data))
        cols = s.engine.relation_columns("events")
        assert [(c.name, c.type) for c in cols] == [("id", "bigint"), ("v", "string")]
        with pytest.raises(ExecutionError) as e:
            s.run(once=True)
        assert e.value.hint == SINKS_ON_CONNECT_HINT
        s.engine.spark.stop()  # close the client before the server goes away
