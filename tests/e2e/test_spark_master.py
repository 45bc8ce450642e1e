"""A sink on a real Spark standalone cluster: ``Session(spark_master="spark://127.0.0.1:P")``.

One Master and one Worker (1 core, 1 GB) start on loopback from the pyspark wheel's jars
(``tests/support/spark_cluster.py``). The sink runs in a child Python process so that its
session really is a new one bound to that master (in this process ``getOrCreate`` would hand back
the run's shared ``local[2]`` session); the child reports the master its SparkContext used and
the executors it had. The table is then read here with DuckDB.

About 60-90 s on a 2-core machine (two daemons, an executor JVM, Python workers): in the default
run, the one proof that a sink runs on a standalone master.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.pipeline_helpers import load_table, write_json_lines
from tests.support.readers import read_duckdb
from tests.support.require import require
from tests.support.spark_cluster import ClusterUnavailable, StandaloneCluster, java_binary

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import json, sys
    import icesql

    home, warehouse, data, master = sys.argv[1:5]
    with icesql.Session(home=home, spark_master=master) as s:
        s.execute(f'''
            CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{warehouse}');
            CREATE SOURCE events FROM FILES '{data}'
                (FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING');
            CREATE SINK events_sink FROM events
                INTO ICEBERG CATALOG lake (NAMESPACE = 'e2e', TABLE = 'events');
        ''')
        s.run(once=True)
        (st,) = s.status()
        sc = s._engine.spark.sparkContext
        executors = sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
        print("RESULT " + json.dumps({
            "master": sc.master, "state": st.state, "rows": st.rows_committed,
            "error": st.last_error, "executors": executors,
        }))
    """
)


def test_sink_runs_on_standalone_master(tmp_path: Path) -> None:
    require(java_binary() is not None, "java is not installed")
    data = tmp_path / "events"
    data.mkdir()
    rows = [{"id": i, "v": f"v{i}"} for i in range(25)]
    write_json_lines(data, "part-1.json", rows[:12])
    write_json_lines(data, "part-2.json", rows[12:])
    home, warehouse = tmp_path / "home", tmp_path / "warehouse"

    try:
        cluster = StandaloneCluster.start(tmp_path / "cluster")
    except ClusterUnavailable as e:
        pytest.fail(f"the standalone cluster did not start: {e}")
    with cluster:
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(home), str(warehouse), str(data), cluster.master_url],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        out = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        assert proc.returncode == 0 and out, (
            f"rc={proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}\n"
            + cluster.logs()
        )
    result = json.loads(out[-1][len("RESULT ") :])
    assert result == {
        "master": cluster.master_url,
        "state": "stopped",
        "rows": len(rows),
        "error": None,
        "executors": 1,
    }, result

    table = load_table(home, "e2e.events", warehouse=warehouse, catalog_name="lake")
    assert sorted(read_duckdb(table.metadata_location)) == sorted((r["id"], r["v"]) for r in rows)
