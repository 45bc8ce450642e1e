"""``icesql run`` with a real local Spark: SIGTERM/SIGINT stop the sinks with a final commit."""

from __future__ import annotations

import os
import re
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
    ``icesql.engine.commit.staging``): from then on only the final commit can make it visible."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(home.glob("sinks/*/staging/*.json")):
            return
        time.sleep(0.5)
    raise AssertionError("no batch was staged")


JVM_LOG_LINE = re.compile(r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d [A-Z]+ ")


def wait_running(home: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if " running " in icesql("status", home=home).stdout:
            return
        time.sleep(2)
    raise AssertionError("the sink never ran")


@pytest.mark.parametrize(
    ("signum", "group"),
    [(signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGTERM, True)],
    ids=["SIGTERM", "SIGINT", "SIGTERM to the process group"],
)
def test_run_stops_on_a_signal_with_a_final_commit(signum: int, group: bool, tmp_path: Path) -> None:
    """``kill PID`` (Kubernetes), Ctrl-C, and systemd's stop (SIGTERM to the whole process group,
    Spark's JVM included): each ends in a final commit of what is staged and exit 0, never in a
    failed sink. (Whether the JVM cancels a batch's job before the stop begins is timing, rarely
    hit here: ``test_a_signal_marks_the_sinks_stopping_at_once`` tests the order that covers it.)"""
    home = tmp_path / "home"
    (tmp_path / "gen.sql").write_text(GENERATOR)
    proc = subprocess.Popen(
        [sys.executable, "-m", "icesql", "--home", str(home), *SPARK_CONF, "run", "gen.sql"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable),
        start_new_session=group,
    )
    try:
        wait_running(home)
        wait_staged(home)
        if group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert "stopping sinks (final commit)" in err
    commits = [line for line in err.splitlines() if "commit sink=gen_sink" in line]
    assert commits and "reason=shutdown" in commits[-1], err[-3000:]
    # icesql's own lines never say a sink failed. Spark's JVM (log4j lines, "26/11/27 05:54:39
    # ERROR Executor: ... failed, reason: ... Shutting down") may, when it got the same SIGTERM.
    ours = [line for line in err.splitlines() if not JVM_LOG_LINE.match(line)]
    assert not [line for line in ours if "failed" in line], err[-3000:]
    status = icesql("status", home=home).stdout
    assert "gen_sink | stopped" in status and "|    0 |" not in status


def test_a_signal_marks_the_sinks_stopping_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The signal handler tells the sinks a stop is coming before the main loop's next poll
    starts the stop: a batch failing meanwhile (Spark's JVM got the same SIGTERM) is then an
    interrupted batch, not a failed sink. (A stand-in session: what is tested is the order.)"""
    import threading

    from icesql import cli
    from icesql.repl import progress

    seen: list[str] = []
    stopped = threading.Event()

    class Session:
        verbose = False
        status = None

        def stopping(self) -> None:
            seen.append("stopping")

        def stop(self) -> None:
            seen.append("stop")
            stopped.set()

    def target() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        stopped.wait(10)

    monkeypatch.setattr(progress, "configure_logging", lambda **k: None)
    assert cli._run_until_stopped(Session(), target, sinks=None) == cli.EXIT_OK  # type: ignore[arg-type]
    assert seen == ["stopping", "stop"]


def test_the_quick_start_then_a_scheduled_run_with_nothing_new(tmp_path: Path) -> None:
    """The README's first command, twice: the second run (a scheduler's next call, no new file)
    says so and exits 0 without starting Spark - it runs here with no Java to start (issue 40)."""
    import shutil

    examples = tmp_path / "examples"
    shutil.copytree(ROOT / "examples", examples, ignore=shutil.ignore_patterns("warehouse"))
    home = tmp_path / "h"
    p = icesql("run", str(examples / "quickstart.sql"), "--once", *SPARK_CONF, home=home, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "commit sink=events_sink table=analytics.events reason=" in p.stderr and " rows=120 " in p.stderr

    empty = tmp_path / "no-java"
    empty.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), ICESQL_HOME=str(home), PATH=str(empty), JAVA_HOME=str(empty))
    p = subprocess.run(
        [sys.executable, "-m", "icesql", "run", str(examples / "quickstart.sql"), "--once", *SPARK_CONF],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "sink events_sink: nothing new to read (no new file in " in p.stderr
    assert "commit sink=" not in p.stderr
