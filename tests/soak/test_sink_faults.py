"""A running sink meets a REST answer cut short at its commit (issue 16, found by the short soak:
the sink failed for good on '<input>: error: 1 validation error for TableResponse'). Real parts:
SQL text -> ``icesql.Session`` -> local Spark -> weed mini's REST catalog behind the fault proxy;
the cut is made when a batch is staged (the runner's ``staged`` test hook), so the next answer
the catalog gives is the one of the commit's table reload.

With no commit retries the sink fails on one line naming the sink, the catalog connection, its
address and the cause, as a transient failure (``run``/``serve`` restart it); with the default
retries it rides the cut out, and every row is in the table once.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.engine.connections.failures import is_transient
from icesql.errors import ExecutionError
from tests.e2e.test_weed_sinks import aws_sql, event, rest_oauth2_sql, unique, verify_catalog
from tests.support.faultproxy import FaultProxy
from tests.support.pipeline_helpers import spark_for_tests, write_json_lines
from tests.support.weed import WeedServer

pytestmark = [pytest.mark.weed, pytest.mark.spark]


@pytest.fixture(scope="module")
def spark() -> Any:
    return spark_for_tests()


def test_a_cut_commit_answer_is_retried_and_otherwise_named(
    weed: WeedServer,
    proxy: FaultProxy,
    spark: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ns = unique("cut_sink")
    home, data = tmp_path / "home", tmp_path / "events"
    write_json_lines(data, "part-1.json", [event(i) for i in range(0, 10)])
    sql = (
        aws_sql(weed)
        + rest_oauth2_sql(weed, uri=proxy.url("rest"))
        + f"""
        CREATE SOURCE events FROM FILES 'events/'
            (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING');
        CREATE SINK events_sink FROM events
        INTO ICEBERG CATALOG lake (NAMESPACE = '{ns}', TABLE = 'events')
        USING AWS CONNECTION s3;
    """
    )

    def cut_when_staged(point: str, batch_id: int | None = None) -> None:
        if point == "staged":
            proxy.cut_response_after(20, count=1, only="rest")

    monkeypatch.setattr("icesql.engine.sink.runner.kill_point", cut_when_staged)
    monkeypatch.setenv("ICESQL_COMMIT_RETRIES", "0")
    # and no restart of the sink either: since issue 36, run --once restarts a sink after a
    # transient failure as serve does, which would ride the cut out
    monkeypatch.setenv("ICESQL_RETRY_BUDGET", "0")
    with icesql.Session(home=home, spark=spark) as s:
        s.execute(sql, filename="pipeline.sql", base_dir=tmp_path)
        with pytest.raises(ExecutionError) as info:
            s.run(once=True)
    err = info.value
    assert err.render().splitlines()[0] == (
        f"icesql: error: sink events_sink: cannot use catalog connection 'lake' at {proxy.url('rest')}: "
        "connection closed before the answer was complete"
    )
    assert is_transient(err) and weed.secret_key not in err.render()

    # the default retries: the same cut at the next batch's commit is ridden out; the batch the
    # failed run staged is committed as the sink starts, the new file's once after the retry
    monkeypatch.delenv("ICESQL_COMMIT_RETRIES")
    monkeypatch.delenv("ICESQL_RETRY_BUDGET")
    write_json_lines(data, "part-2.json", [event(i) for i in range(10, 20)])
    with (
        caplog.at_level(logging.WARNING, logger="icesql.commit"),
        icesql.Session(home=home, spark=spark) as s,
    ):
        s.run(once=True)
        (st,) = s.status()
        assert (st.state, st.last_error) == ("stopped", None)
    assert "connection closed before the answer was complete; retrying in 1s (1/3)" in caplog.text
    assert proxy.snapshot()["rest"]["responses_cut"] == 2
    table = verify_catalog(weed).load_table(f"{ns}.events")
    ids = sorted(table.scan().to_arrow().column("id").to_pylist())
    assert ids == list(range(20))
