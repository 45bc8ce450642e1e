"""``run --once`` on Spark retries a transient failure under the supervisor's policy: the retried
run resumes from what the failed one committed and staged (every row once), each retry is one
log line, a failure that stays transient ends the run when the budget is spent (``icesql run
--once`` exits 3 with the one-line message), and a failure that is not transient is not retried.
The failures come from ``ICESQL_TEST_FAIL_AT`` (``icesql.engine.base.hooks``), saying by default what
Spark says when its Python worker did not connect back in time."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.base import hooks
from icesql.engine.connections.failures import CatalogUnavailableError
from icesql.engine.sink.supervisor import RetryPolicy
from icesql.errors import ExecutionError
from icesql.plan import SinkPlan, SourceFormat, SourceKind, SourcePlan
from tests.engine.test_pipeline import Heard, make_engine
from tests.support.pipeline_helpers import (
    State,
    icesql_summaries,
    load_table,
    write_json_lines,
)

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
QUICK = RetryPolicy(backoff=0.2, backoff_max=1.0, budget=120.0)
WORKER_LATE = "Spark's Python worker did not connect back in time"


def source(path: Path) -> SourcePlan:
    return SourcePlan(
        name="events",
        source_kind=SourceKind.FILES,
        path=str(path),
        format=SourceFormat.JSON,
        schema="id BIGINT, v STRING",
        max_files_per_trigger=1,  # a batch per file: a failure lands between batches
    )


def plan() -> SinkPlan:
    return SinkPlan(name="s", relation="events", catalog_connection="cat", namespace=("ns",), table="events")


def inputs(directory: Path, files: int = 3, rows: int = 5) -> list[int]:
    for f in range(files):
        write_json_lines(directory, f"f{f}.json", [{"id": f * rows + i, "v": f"v{i}"} for i in range(rows)])
        os.utime(directory / f"f{f}.json", (1_700_000_000 + f, 1_700_000_000 + f))  # read in this order
    return list(range(files * rows))


@pytest.fixture
def failing(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``failing(point, times=None, text=None)``: batches fail at ``point``."""

    def arm(point: str, times: int | None = None, text: str | None = None) -> None:
        monkeypatch.setenv("ICESQL_TEST_FAIL_AT", point)
        if times is not None:
            monkeypatch.setenv("ICESQL_TEST_FAIL_TIMES", str(times))
        if text is not None:
            monkeypatch.setenv("ICESQL_TEST_FAIL_WITH", text)
        hooks.reset_failures()

    yield arm
    hooks.reset_failures()


def retry_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "restarting in" in r.getMessage()]


@pytest.mark.parametrize("point", ["staged:1", "committed:1"])
def test_a_once_run_retries_a_transient_failure_and_commits_every_row_once(
    spark: Any, tmp_path: Path, failing: Any, caplog: pytest.LogCaptureFixture, point: str
) -> None:
    """The second batch fails once after it was staged (its rows are in staging, not in the
    table) or after it was committed (Spark has not recorded the batch as done, and replays it)."""
    ids = inputs(tmp_path / "in")
    failing(point, times=1)
    state, heard = State(), Heard()
    engine = make_engine(tmp_path / "home", spark, {"events": source(tmp_path / "in")}, state)
    engine.add_listener(heard)
    caplog.set_level(logging.INFO, logger="icesql")
    t0 = time.monotonic()
    engine.run([plan()], once=True, retry=QUICK)
    elapsed = time.monotonic() - t0

    table = load_table(tmp_path / "home", "ns.events")
    assert sorted(r["id"] for r in table.scan().to_arrow().to_pylist()) == ids  # each row once
    progress = [int(s["icesql.progress"]) for s in icesql_summaries(table)]
    assert progress == sorted(set(progress))  # no batch committed twice
    # one line per retry: the injected failure's, and any a loaded machine adds for real (the
    # suite beside it made Spark's own worker miss its 10 s twice in one run of this test)
    lines = retry_lines(caplog)
    assert len(lines) == len(heard.failures) >= 1
    assert all(WORKER_LATE in line and "(attempt " in line for line in lines)
    assert lines[0].startswith("sink s: restarting in 0.2s (attempt 1; gives up 120s after the first failure): ")
    # never logged as failed (py4j logs the batch's exception on its own, as for any failed batch)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("icesql")]
    assert heard.states.count("starting") == len(lines) + 1 and "failed" not in heard.states
    assert heard.states[-1] == "stopped" and state.get("s")["status"] == "stopped"
    if point.startswith("staged"):  # the failed run's staged batch, committed by the retry's recovery
        assert "recovery" in [s["icesql.commit-reason"] for s in icesql_summaries(table)]
    print(f"\n{point}: a --once run with one retry took {elapsed:.1f}s")


def test_a_failure_that_stays_transient_spends_the_retries(
    spark: Any, tmp_path: Path, failing: Any, caplog: pytest.LogCaptureFixture
) -> None:
    inputs(tmp_path / "in", files=1)
    failing("batch")  # every attempt, before the batch writes anything
    heard = Heard()
    engine = make_engine(tmp_path / "home", spark, {"events": source(tmp_path / "in")})
    engine.add_listener(heard)
    caplog.set_level(logging.INFO, logger="icesql")
    t0 = time.monotonic()
    with pytest.raises(CatalogUnavailableError) as info:
        engine.run([plan()], once=True, retry=RetryPolicy(backoff=0.5, backoff_max=1.0, budget=4.0))
    elapsed = time.monotonic() - t0
    message = info.value.message
    assert message.startswith(f"sink s: cannot write or commit: {WORKER_LATE} (gave up after ")
    assert message.endswith("ICESQL_RETRY_BUDGET is 4s)") and "\n" not in message
    attempts = len(retry_lines(caplog))  # as many as fit in the budget on this machine's load
    assert attempts >= 1 and f"(gave up after {attempts} restart(s) in " in message
    assert heard.states.count("starting") == attempts + 1
    assert heard.states[-1] == "failed"
    print(f"\n{attempts} retries, then failed, in {elapsed:.1f}s")


def test_a_failure_that_is_not_transient_is_not_retried(
    spark: Any, tmp_path: Path, failing: Any, caplog: pytest.LogCaptureFixture
) -> None:
    inputs(tmp_path / "in")
    failing("staged:0", text="the disk said no")
    state, heard = State(), Heard()
    engine = make_engine(tmp_path / "home", spark, {"events": source(tmp_path / "in")}, state)
    engine.add_listener(heard)
    caplog.set_level(logging.INFO, logger="icesql")
    with pytest.raises(ExecutionError) as info:
        engine.run([plan()], once=True, retry=QUICK)
    assert not isinstance(info.value, CatalogUnavailableError)
    assert "the disk said no" in info.value.message
    assert retry_lines(caplog) == [] and heard.states.count("starting") == 1
    assert state.get("s")["status"] == "failed"


def test_icesql_run_once_exits_3_with_one_line_when_the_retries_are_spent(tmp_path: Path) -> None:
    """The command, in its own process: exit code 3, one line per retry, the error on one line."""
    inputs(tmp_path / "data", files=1)
    script = tmp_path / "pipeline.sql"
    script.write_text(
        "CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = './warehouse');\n"
        "CREATE SOURCE events FROM FILES 'data/' (FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING');\n"
        "CREATE SINK s FROM events INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 'events');\n"
    )
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        ICESQL_HOME=str(tmp_path / "home"),
        ICESQL_SPARK_MASTER="local[2]",
        ICESQL_TEST_FAIL_AT="batch",
        ICESQL_RETRY_BACKOFF="0.5",
        ICESQL_RETRY_BACKOFF_MAX="1",
        ICESQL_RETRY_BUDGET="3",
    )
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "icesql", "run", str(script), "--once"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    elapsed = time.monotonic() - t0
    assert p.returncode == 3, p.stderr
    retries = [ln for ln in p.stderr.splitlines() if "sink s: restarting in" in ln]
    assert len(retries) >= 1 and all(WORKER_LATE in ln for ln in retries)
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("icesql: error:")]  # what the run ends with
    assert len(errors) == 1, p.stderr
    assert f"sink s: cannot write or commit: {WORKER_LATE} (gave up after " in errors[0]
    assert "ICESQL_RETRY_BUDGET is 3s" in errors[0] and "Traceback" not in p.stderr
    assert "hint: the machine is overloaded" in p.stderr
    assert "Python Proxy" not in p.stderr  # py4j's copy of the sink's own failure is not shown
    print(f"\nicesql run --once: {len(retries)} retries, exit 3, in {elapsed:.1f}s")
