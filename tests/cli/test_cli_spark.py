"""``icesql run`` with a real local Spark: SIGTERM/SIGINT stop the sinks with a final commit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_cli import ROOT, icesql

pytestmark = pytest.mark.spark

GENERATOR = """\
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = './warehouse');
CREATE SOURCE gen FROM GENERATOR (ROWS PER SECOND = 50, SCHEMA = 'id BIGINT, v STRING');
-- commits only on shutdown: rows in the table prove the final commit
CREATE SINK gen_sink FROM gen INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't')
WITH (MAXIMUM PERIOD = '1h', MINIMUM SIZE = '1GiB');
"""

SPARK_CONF = [
    "--conf",
    "spark.ui.enabled=false",
    "--conf",
    "spark.sql.shuffle.partitions=2",
    "--spark-master",
    "local[2]",
]


def wait_staged(home: Path, timeout: float = 180) -> None:
    """Until a micro-batch is staged (``<home>/sinks/<id>/staging/<batch>.json``, see
    ``icesql.engine.staging``): from then on only the final commit can make it visible."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(home.glob("sinks/*/staging/*.json")):
            return
        time.sleep(0.5)
    raise AssertionError("no batch was staged")


def wait_running(home: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if " running " in icesql("status", home=home).stdout:
            return
        time.sleep(2)
    raise AssertionError("the sink never ran")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_run_stops_on_a_signal_with_a_final_commit(signum: int, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (tmp_path / "gen.sql").write_text(GENERATOR)
    proc = subprocess.Popen(
        [sys.executable, "-m", "icesql", "--home", str(home), *SPARK_CONF, "run", "gen.sql"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable),
    )
    try:
        wait_running(home)
        wait_staged(home)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert "stopping sinks (final commit)" in err
    commits = [line for line in err.splitlines() if "commit sink=gen_sink" in line]
    assert commits and "reason=shutdown" in commits[-1], err[-3000:]
    status = icesql("status", home=home).stdout
    assert "gen_sink | stopped" in status and "|    0 |" not in status
