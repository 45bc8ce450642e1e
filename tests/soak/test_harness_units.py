"""The soak harness's own parts that need neither Spark nor weed: plan items, the input and its
replay, the table checks, error normalisation and the report."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

from tests.soak.harness import (
    ChildRun,
    FaultRecord,
    Input,
    Soak,
    SoakConfig,
    SoakResult,
    _norm_error,
    group_cpu_seconds,
    parse_plan_item,
    write_report,
)


def test_parse_plan_item() -> None:
    assert parse_plan_item("kill") == ("kill", {})
    assert parse_plan_item("net_cut:target=rest:nbytes=20:count=2") == (
        "net_cut",
        {"target": "rest", "nbytes": 20, "count": 2},
    )
    assert parse_plan_item("kill:delays=[4,5.5]") == ("kill", {"delays": [4, 5.5]})
    assert parse_plan_item("stop:group=true") == ("stop", {"group": True})


def test_input_files_and_replay(tmp_path: Path) -> None:
    inp = Input(tmp_path, seed=3, events_rows=5, cdc_changes=8)
    inp.feed()
    inp.feed()
    events = sorted((tmp_path / "in" / "events").glob("*.json"))
    cdc = sorted((tmp_path / "in" / "cdc").glob("*.json"))
    assert len(events) == 2 and len(cdc) == 2 and inp.files == 4
    lines = [json.loads(x) for f in events for x in f.read_text().splitlines()]
    assert [r["id"] for r in lines] == list(range(10))
    assert len(inp.expected_events()) == 10 and inp.input_rows() == 10 + 16
    # the Debezium files' modification times follow the file order (Spark reads them in that order)
    assert [f.stat().st_mtime for f in cdc] == sorted(f.stat().st_mtime for f in cdc)
    orders = inp.expected_orders()
    assert orders and all(k == (row[0], row[1]) for k, row in orders.items())
    # a replay is independent of icesql: the same seed, the same input
    again = Input(tmp_path / "again", seed=3, events_rows=5, cdc_changes=8)
    again.feed()
    again.feed()
    assert again.expected_orders() == orders


def test_table_checks_count_lost_duplicated_stale(tmp_path: Path) -> None:
    soak = Soak(SoakConfig(seed=1, workdir=tmp_path / "w", events_rows=3, cdc_changes=6))
    soak.input.feed()
    want = soak.input.expected_events()
    rows = want[1:] + [want[2]]  # one lost, one duplicated
    c = soak._check_events(rows, True)
    assert (c.lost, c.duplicated, c.unexpected, c.equals_replay) == (1, 1, 0, False)
    assert soak._check_events(list(want), True).equals_replay
    orders = list(soak.input.expected_orders().values())
    first = orders[0]
    stale = (first[0], first[1], "stale", first[3], first[4])
    c = soak._check_orders([stale, *orders[1:], orders[1]], False)
    assert (c.lost, c.duplicated, c.stale, c.duckdb_equals_datafusion) == (0, 1, 1, False)
    c = soak._check_orders(orders[1:] + [("zz", 1, None, None, dt.datetime(2024, 1, 1))], True)
    assert (c.lost, c.unexpected) == (1, 1)


def test_norm_error_masks_ports_and_ids() -> None:
    a = _norm_error(
        "HTTPConnectionPool(host='127.0.0.1', port=24567): Max retries exceeded (o436.collectToPython)"
    )
    b = _norm_error(
        "HTTPConnectionPool(host='127.0.0.1', port=29999): Max retries exceeded (o12.collectToPython)"
    )
    assert a == b


def test_group_cpu_seconds() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ntime.sleep(5)",
        ],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        while group_cpu_seconds(proc.pid) < 0.3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert group_cpu_seconds(proc.pid) >= 0.3
    finally:
        proc.kill()
        proc.wait()
    assert group_cpu_seconds(proc.pid) == 0.0


def test_report_has_the_figures(tmp_path: Path) -> None:
    cfg = SoakConfig(seed=9, minutes=1)
    r = SoakResult(config=cfg, command="cmd", started_at="now", duration=61)
    r.faults = [
        FaultRecord(0, "kill", {"kills_done": 2}, started=0.0, ended=5.0, recovered=20.0),
        FaultRecord(1, "net_cut", {"target": "rest"}, started=30.0, ended=31.0, recovered=70.0),
        FaultRecord(2, "net_blackhole", {"target": "rest"}, started=80.0, ended=85.0, stalls=1),
    ]
    r.runs = [
        ChildRun(1, "run", 0.0, ended=5.0, rc=-9, ended_because="killed by the harness"),
        ChildRun(
            2,
            "serve",
            5.0,
            ended=31.5,
            rc=3,
            ended_because="failed",
            error="<input>: error: ('Connection aborted.', RemoteDisconnected('x'))",
            fault=1,
            tracebacks=["Traceback (most recent call last):\n  ...\nValueError: x"],
        ),
    ]
    text = write_report(r, tmp_path / "r.md", title="T")
    assert (tmp_path / "r.md").read_text() == text
    for needle in (
        "# T",
        "**Seed:** 9",
        "`cmd`",
        "| SIGKILLs of the sink | 2 |",
        "| … of them during a transient fault (should have been ridden out) | 1 |",
        "net_cut ×1",
        "Connection aborted.",
        "| faults never recovered from | 1 |",
        "| kill | 1 |",
        "fault #1, net_cut",
    ):
        assert needle in text, needle
    assert r.transient_failures() == [r.runs[1]] and r.kills() == 2
