"""The maintenance of a routed sink's tables (issue 53), in this process (the running sink's on
both executors: tests/conformance/test_routed.py).

``icesql maintain`` / ``compact`` of a routed sink run over every table it has written, one
result (one line) per table; an upsert table's key index follows the rewrite, so a later batch
still replaces the right rows. The running sink maintains each table that commits, as a
single-table sink does; a table with nothing new is not touched. Staged files of a routed sink's
tables are protected from orphan removal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import icesql
from icesql.cli import main
from icesql.engine.commit.snapshot import COMMIT_REASON
from icesql.engine.maintenance import staged_files
from tests.support.connect_events import event
from tests.support.pipeline_helpers import load_table, write_json_lines
from tests.support.readers import read_duckdb

CUSTOMERS = [("id", "int"), ("name", "string")]
ORDERS = [("id", "int"), ("amount", "long")]
IDLE = [("id", "int"), ("note", "string")]
COLUMNS = {"customers": CUSTOMERS, "orders": ORDERS, "idle": IDLE}
SINK = (
    "CREATE SINK k FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'shop', TABLE = '{table}') "
    "KEY (id) MODE UPSERT WITH (OPTIONS);"
)
EAGER = "COMPACTION MINIMUM FILES = 2, MAXIMUM DELETE FILES = 1"


class Db:
    """Changes of three tables, with the replay of their rows."""

    def __init__(self) -> None:
        self.lsn = 0
        self.rows: dict[str, dict[int, dict[str, Any]]] = {t: {} for t in COLUMNS}

    def upsert(self, table: str, i: int, value: Any) -> str:
        self.lsn += 1
        cols = COLUMNS[table]
        old = self.rows[table].get(i)
        new = {"id": i, cols[1][0]: value}
        self.rows[table][i] = new
        return event("shop", table, cols, ["id"], "u" if old else "c", old, new, self.lsn)[1]

    def batch(self, n: int, tables: tuple[str, ...] = ("customers", "orders")) -> list[str]:
        """Changes of ``tables``: keys 0..3 again and again (replaced rows: position deletes)."""
        return [
            self.upsert(t, i % 4, f"v{self.lsn}" if t != "orders" else self.lsn)
            for i in range(n)
            for t in tables
        ]

    def expected(self, table: str) -> list[tuple[Any, ...]]:
        return sorted(tuple(r.values()) for r in self.rows[table].values())


def _table(tmp_path: Path, name: str) -> Any:
    return load_table(tmp_path / "home", f"shop.{name}", warehouse=tmp_path / "wh", catalog_name="lake")


def _files(table: Any) -> tuple[int, int]:
    summary = table.current_snapshot().summary
    return int(summary["total-data-files"]), int(summary["total-delete-files"])


def _session(tmp_path: Path, options: str) -> Any:
    s = icesql.Session(home=tmp_path / "home")
    s.execute(
        f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{tmp_path / 'wh'}');"
        f"CREATE SOURCE cdc FROM FILES '{tmp_path / 'cdc'}' (FORMAT = 'debezium-json');"
        + SINK.replace("OPTIONS", options)
    )
    return s


def _runs(s: Any, tmp_path: Path, db: Db, rounds: int, start: int = 0) -> None:
    for r in range(start, start + rounds):
        lines = db.batch(6) + (db.batch(1, ("idle",)) if r == 0 else [])
        write_json_lines(tmp_path / "cdc", f"{r}.json", lines)
        s.run(once=True, sinks=["k"])


def test_maintain_and_compact_run_over_every_table_of_a_routed_sink(tmp_path: Path, capsys: Any) -> None:
    db = Db()
    with _session(tmp_path, f"MAINTENANCE = 'off', {EAGER}") as s:
        assert s.compact(["k"]) == []  # no table written yet
        (off,) = s.maintain(["k"])  # MAINTENANCE = 'off': one run saying so
        assert off.off and off.sink == "k"
        _runs(s, tmp_path, db, 4)
        before = {t: _files(_table(tmp_path, t)) for t in ("customers", "orders")}
        assert all(data >= 4 and deletes >= 3 for data, deletes in before.values()), before
        s.execute("ALTER SINK k SET (MAINTENANCE = 'auto')")
        runs = s.maintain(["k"])
        assert [r.table for r in runs] == ["shop.customers", "shop.idle", "shop.orders"]
        by_table = {r.table: [t.kind.value for t in r.tasks] for r in runs}
        assert "compact" in by_table["shop.customers"] and "compact" in by_table["shop.orders"], by_table
        for t in ("customers", "orders"):
            data, deletes = _files(_table(tmp_path, t))
            assert deletes == 0 and data < before[t][0], (t, data, deletes, before[t])
            assert read_duckdb(_table(tmp_path, t).metadata_location) == db.expected(t)
        # a batch after the rewrite replaces the right rows: the key index followed it
        _runs(s, tmp_path, db, 1, start=4)
        for t in ("customers", "orders", "idle"):
            assert read_duckdb(_table(tmp_path, t).metadata_location) == db.expected(t), t
    # the CLI prints a line per table, naming it
    capsys.readouterr()
    assert main(["compact", "k", "--home", str(tmp_path / "home")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[1] for line in out] == ["shop.customers", "shop.idle", "shop.orders"], out
    assert all(line.startswith("k: shop.") for line in out), out
    for t in ("customers", "orders", "idle"):
        assert read_duckdb(_table(tmp_path, t).metadata_location) == db.expected(t), t
        assert _files(_table(tmp_path, t))[1] == 0


def test_maintain_of_a_routed_sink_that_wrote_nothing_yet(tmp_path: Path, capsys: Any) -> None:
    with _session(tmp_path, "MAINTENANCE = 'auto'"):
        pass
    assert main(["maintain", "k", "--home", str(tmp_path / "home")]) == 0
    assert capsys.readouterr().out.splitlines() == ["k: no table written yet, nothing to maintain"]


def test_the_running_routed_sink_compacts_its_busy_tables_and_leaves_the_idle_one(tmp_path: Path) -> None:
    db = Db()
    with _session(tmp_path, EAGER) as s:
        _runs(s, tmp_path, db, 5)
        (status,) = s.execute("SHOW SINK STATUS k")
    for t in ("customers", "orders"):
        table = _table(tmp_path, t)
        reasons = [snap.summary.get(COMMIT_REASON) for snap in table.snapshots()]
        assert "compact" in reasons, (t, reasons)
        assert _files(table)[1] <= 1, (t, _files(table))
        assert read_duckdb(table.metadata_location) == db.expected(t), t
    idle = _table(tmp_path, "idle")
    assert len(idle.snapshots()) == 1 and read_duckdb(idle.metadata_location) == db.expected("idle")


def test_staged_files_of_a_routed_sinks_tables_are_protected(tmp_path: Path) -> None:
    """A batch staged in a routed sink's table (not committed yet) names files that orphan
    removal must keep (``staged_files``)."""
    from icesql.engine.commit.staging import StagedBatch, Staging

    home = tmp_path / "home"
    staging = Staging(home / "sinks" / "sink-id" / "tables" / "shop.t%2Fx" / "staging")
    entry = StagedBatch.of_files(
        3, [{"content": 0, "rows": 1, "bytes": 10, "file": '{"file_path": "file:///wh/shop/t/data/a.parquet"}'}]
    )
    staging.add(entry)
    assert "file:///wh/shop/t/data/a.parquet" in staged_files(home)
    assert "file:///wh/shop/t/data/a.parquet" in staged_files(home, ["sink-id"])


def test_a_started_routed_sink_compacts_between_its_batches_and_upserts_right_after(tmp_path: Path) -> None:
    """Running (not ``--once``): each busy table is compacted in the gaps between the sink's
    commits, its key index following the rewrite, so every later batch still replaces the right
    rows; the idle table gets no snapshot, and its maintainer is let go."""
    from tests.support.pipeline_helpers import wait_for

    db = Db()
    with _session(tmp_path, EAGER) as s:
        s.start(["k"])
        runner = s.engine.runner("k")
        for r in range(6):
            commits = runner.totals["commits"]
            lines = db.batch(6) + (db.batch(1, ("idle",)) if r == 0 else [])
            write_json_lines(tmp_path / "cdc", f"{r}.json", lines)
            wait_for(lambda: runner.totals["commits"] > commits or not runner.active, 60, "a commit")  # noqa: B023
            assert runner.active, runner.status_row()
            for t in ("customers", "orders"):
                assert read_duckdb(_table(tmp_path, t).metadata_location) == db.expected(t), (r, t)
        assert runner.maintainer.runs > 0 and "shop." in (runner.maintainer.last or "")
        assert "idle" not in runner.maintainer.tables  # let go with its key index
        s.stop()
    for t in ("customers", "orders"):
        reasons = [snap.summary.get(COMMIT_REASON) for snap in _table(tmp_path, t).snapshots()]
        assert "compact" in reasons, (t, reasons)
    assert len(_table(tmp_path, "idle").snapshots()) == 1


def test_a_routed_run_once_hands_each_tables_due_rewrite_to_the_next_run(tmp_path: Path, caplog: Any) -> None:
    """A routed sink's ``run --once`` whose tables are due a rewrite applying delete files when it
    ends (``MINIMUM SIZE`` holds each batch to the run's end, so no gap follows its commit) does
    none in its foreground: each table's is noted in the table's own staging directory. The next
    run starts one beside its batch (one rewrite beside the sink at a time), which commits after
    the table's commit of that run, the deletes that commit made on the rows it rewrote carried
    over through the table's key index (opened as the run first writes to the table); every read
    gives the replay, also after a later run (the index followed the rewrite)."""
    import logging

    caplog.set_level(logging.INFO, logger="icesql.sink")
    db = Db()

    def notes() -> list[str]:
        return sorted(p.parent.parent.name for p in (tmp_path / "home" / "sinks").glob("*/tables/*/staging/rewrite-due"))

    def run(r: int) -> list[str]:
        seen = len(caplog.records)
        _runs(s, tmp_path, db, 1, start=r)
        for t in ("customers", "orders", "idle"):
            assert read_duckdb(_table(tmp_path, t).metadata_location) == db.expected(t), (r, t)
        return [rec.getMessage() for rec in caplog.records[seen:]]

    with _session(tmp_path, f"{EAGER}, MINIMUM SIZE = '1GiB'") as s:
        run(0)
        log = run(1)
        assert sum("compaction due, handed to the sink's next run" in m for m in log) == 2, log
        assert not any("step=compact" in m for m in log), log
        assert notes() == ["customers", "orders"]
        log = run(2)
        started = [m for m in log if "the rewrite the last run handed over starts beside the sink" in m]
        assert len(started) == 1, log  # one at a time: the first table noted
        assert any("table=shop.customers step=compact beside" in m and "rebased=0" not in m for m in log), log
        assert not any("failed" in m or "could not" in m for m in log), log
        run(3)  # after the rewrite: the key index followed it, the upserts replace the right rows
