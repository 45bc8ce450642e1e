"""``compact``: an upserted table rewritten without delete files, rows unchanged.

A real upsert sink (SQL → ``icesql.Session`` → local Spark) writes a partitioned table over
several commits, each with an equality-delete file; ``Session.compact`` rewrites it. DuckDB and
DataFusion read the same rows before and after, and equal to an independent replay of the
changes; afterwards the table has no delete files, the sink goes on upserting on top of the
compacted files, and a commit racing the compaction makes it start over.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.engine.maintenance.compact import compact_table
from icesql.repl.format import format_compaction
from tests.support.pipeline_helpers import changelog_file, dbz, load_table, write_json_lines
from tests.support.readers import read_datafusion, read_duckdb

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def row(i: int, name: str, qty: int) -> dict[str, Any]:
    return {"id": i, "name": name, "qty": qty}


def rounds() -> list[list[dict[str, Any]]]:
    """Three batches over 40 keys: inserts, then updates and deletes of earlier keys."""
    lsn = iter(range(1, 10_000))
    first = [dbz("c", None, row(i, f"n{i}", i), next(lsn)) for i in range(40)]
    second = [dbz("u", row(i, f"n{i}", i), row(i, f"u{i}", i * 10), next(lsn)) for i in range(0, 40, 3)]
    second += [dbz("d", row(i, f"n{i}", i), None, next(lsn)) for i in range(1, 40, 5)]
    third = [dbz("c", None, row(i, f"again{i}", -i), next(lsn)) for i in range(1, 12, 5)]  # re-inserted
    third += [dbz("u", row(i, f"u{i}", i * 10), row(i, f"v{i}", 7), next(lsn)) for i in range(0, 40, 6)]
    return [first, second, third]


def replay(batches: list[list[dict[str, Any]]]) -> list[tuple[Any, ...]]:
    state: dict[int, tuple[Any, ...]] = {}
    for batch in batches:
        for ch in batch:
            if ch["op"] == "d":
                state.pop(ch["before"]["id"], None)
            else:
                a = ch["after"]
                state[a["id"]] = (a["id"], a["name"], a["qty"])
    return sorted(state.values())


SQL = """
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');
CREATE SOURCE cdc FROM FILES '{data}'
  (FORMAT = 'debezium-json', SCHEMA = 'id BIGINT, name STRING, qty INT', MAX FILES PER TRIGGER = 1);
CREATE SINK cdc_sink FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 'items')
  PARTITION BY (bucket(4, id)) KEY (id) MODE UPSERT
  WITH (MAINTENANCE = 'off');  -- these tests compact by hand
"""


def read_both(meta: str) -> list[tuple[Any, ...]]:
    duck = sorted(read_duckdb(meta))
    assert sorted(read_datafusion(meta)) == duck, "DuckDB and DataFusion disagree"
    return duck


def files_by_content(table: Any) -> dict[int, int]:
    out: dict[int, int] = {}
    for f in table.inspect.files().to_pylist():
        out[f["content"]] = out.get(f["content"], 0) + 1
    return out


def upsert_sink_run(spark: Any, home: Path, wh: Path, data: Path) -> list[list[dict[str, Any]]]:
    """The upsert sink of ``SQL`` run once over the three ``rounds``; returns the rounds."""
    batches = rounds()
    for k, b in enumerate(batches):
        changelog_file(data, k, b)
    with icesql.Session(home=home, spark=spark) as s:
        s.execute(SQL.format(wh=wh, data=data))
        s.run(once=True)
    return batches


def test_compact_rewrites_an_upserted_table_without_deletes(spark: Any, tmp_path: Path) -> None:
    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "cdc"
    batches = upsert_sink_run(spark, home, wh, data)
    table = load_table(home, "ns.items", warehouse=wh, catalog_name="lake")
    assert files_by_content(table).get(1, 0) >= 2  # position deletes from the upserts (key index)
    before = read_both(table.metadata_location)
    assert before == replay(batches)

    with icesql.Session(home=home) as s:
        (result,) = s.compact(["cdc_sink"])
        assert s._engine is not None and s._engine._spark is None  # no Spark was started
    assert not result.skipped and result.delete_files_before >= 2
    assert result.rows == len(before) and result.deleted_rows > 0
    table = load_table(home, "ns.items", warehouse=wh, catalog_name="lake")
    assert files_by_content(table) == {0: result.data_files_after}
    assert result.data_files_after <= 4  # one file per bucket at most
    summary = table.current_snapshot().summary
    assert summary.operation.value == "replace"
    assert summary["total-delete-files"] == "0" and summary["total-equality-deletes"] == "0"
    assert summary["total-records"] == str(len(before))
    assert read_both(table.metadata_location) == before

    # the sink goes on: its next upserts delete rows of the compacted files
    more = [dbz("u", None, row(0, "after", 1), 50_000), dbz("d", row(3, "u3", 30), None, 50_001)]
    changelog_file(data, 3, more)
    with icesql.Session(home=home, spark=spark) as s:
        s.run(once=True, sinks=["cdc_sink"])
    table = load_table(home, "ns.items", warehouse=wh, catalog_name="lake")
    assert read_both(table.metadata_location) == replay([*batches, more])

    # the CLI: one line per sink, then nothing left to do but the newest delete file
    out = subprocess.run(
        [sys.executable, "-m", "icesql", "--home", str(home), "compact"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("cdc_sink: ns.items: ") and "-> " in out.stdout, out.stdout
    again = subprocess.run(
        [sys.executable, "-m", "icesql", "--home", str(home), "compact", "cdc_sink"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == 0 and "nothing to compact" in again.stdout, again.stdout + again.stderr
    table = load_table(home, "ns.items", warehouse=wh, catalog_name="lake")
    assert read_both(table.metadata_location) == replay([*batches, more])

    missing = subprocess.run(
        [sys.executable, "-m", "icesql", "--home", str(home), "compact", "nope"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=tmp_path,
    )  # fmt: skip
    assert missing.returncode != 0 and "nope" in missing.stderr and "Traceback" not in missing.stderr


def test_a_commit_during_compaction_makes_it_start_over(spark: Any, tmp_path: Path) -> None:
    import pyarrow as pa

    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "cdc"
    batches = upsert_sink_run(spark, home, wh, data)
    table = load_table(home, "ns.items", warehouse=wh, catalog_name="lake")
    other = load_table(home, "ns.items", warehouse=wh, catalog_name="lake")
    calls: list[int] = []

    def another_writer() -> None:  # commits once, after the first attempt wrote its files
        if not calls:
            other.append(
                pa.table(
                    {"id": [1000], "name": ["other"], "qty": [1]},
                    schema=other.schema().as_arrow(),
                )
            )
        calls.append(1)

    on_disk_before = {str(p) for p in wh.rglob("*.parquet")}
    result = compact_table(table, before_commit=another_writer)
    assert result.attempts == 2 and len(calls) == 2
    table = load_table(home, "ns.items", warehouse=wh, catalog_name="lake")
    assert read_both(table.metadata_location) == sorted([*replay(batches), (1000, "other", 1)])
    assert files_by_content(table) == {0: result.data_files_after}
    # the first attempt's files were deleted: what is new on disk is the table's files and the
    # other writer's one
    live = {f["file_path"].removeprefix("file://") for f in table.inspect.files().to_pylist()}
    new_on_disk = {str(p) for p in wh.rglob("*.parquet")} - on_disk_before
    assert live <= new_on_disk and len(new_on_disk - live) == 1


@pytest.mark.java
def test_java_reader_reads_a_compacted_table(spark: Any, tmp_path: Path) -> None:
    """Iceberg's reference implementation reads the replace snapshot (its manifests of DELETED
    entries included) and sees the same rows as a replay of the changes."""
    from tests.support.readers import canonical_digest, read_java

    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "cdc"
    batches = upsert_sink_run(spark, home, wh, data)
    with icesql.Session(home=home) as s:
        (result,) = s.compact(["cdc_sink"])
    assert not result.skipped
    table = load_table(home, "ns.items", warehouse=wh, catalog_name="lake")
    got = read_java(table.metadata_location)
    want = canonical_digest([{"id": i, "name": n, "qty": q} for i, n, q in replay(batches)])
    assert got["rows"] == want["rows"] and got["digest"] == want["digest"], (got["all"][:5], want["all"][:5])


def test_partitions_that_need_nothing_keep_their_files(spark: Any, tmp_path: Path) -> None:
    """An append sink by region: 'eu' gets a file per commit, 'us' one file in all. Compaction
    merges 'eu' and carries the 'us' file over untouched (same path, sequence number and
    snapshot), and a second compaction has nothing to do."""
    home, wh, data = tmp_path / "home", tmp_path / "wh", tmp_path / "in"
    write_json_lines(data, "0.json", [{"id": i, "region": "eu" if i % 2 else "us"} for i in range(10)])
    os.utime(data / "0.json", (1_700_000_000, 1_700_000_000))
    write_json_lines(data, "1.json", [{"id": i, "region": "eu"} for i in range(10, 15)])
    os.utime(data / "1.json", (1_700_000_001, 1_700_000_001))
    with icesql.Session(home=home, spark=spark) as s:
        s.execute(
            f"""
            CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');
            CREATE SOURCE ev FROM FILES '{data}'
              (FORMAT = 'json', SCHEMA = 'id BIGINT, region STRING', MAX FILES PER TRIGGER = 1);
            CREATE SINK ev_sink FROM ev INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 'ev')
              PARTITION BY (region);
            """
        )
        s.run(once=True)
    table = load_table(home, "ns.ev", warehouse=wh, catalog_name="lake")

    def files() -> dict[str, list[tuple[str, int]]]:
        out: dict[str, list[tuple[str, int]]] = {}
        for f in table.inspect.entries().to_pylist():
            if f["status"] == 2:  # DELETED: listed in the snapshot that removed the file
                continue
            region = f["data_file"]["partition"]["region"]
            out.setdefault(region, []).append((f["data_file"]["file_path"], f["sequence_number"]))
        return out

    before = files()
    assert len(before["eu"]) == 2 and len(before["us"]) == 1
    rows = read_both(table.metadata_location)
    with icesql.Session(home=home) as s:
        (result,) = s.compact(["ev_sink"])
        (again,) = s.compact(["ev_sink"])
    assert (result.data_files_before, result.data_files_after, result.data_files_kept) == (3, 2, 1)
    assert "1 kept as they were" in format_compaction(result)
    table.refresh()
    after = files()
    assert after["us"] == before["us"]  # same file, same sequence number
    assert len(after["eu"]) == 1 and after["eu"][0][0] not in {p for p, _ in before["eu"]}
    assert read_both(table.metadata_location) == rows
    assert again.skipped and "nothing to compact" in format_compaction(again)


def test_the_sink_says_when_to_compact(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Once the table holds ICESQL_COMPACT_HINT delete files (default 10), one warning per run."""
    monkeypatch.setenv("ICESQL_COMPACT_HINT", "2")
    with caplog.at_level("WARNING", logger="icesql.sink"):
        upsert_sink_run(spark, tmp_path / "home", tmp_path / "wh", tmp_path / "cdc")
    hints = [r.getMessage() for r in caplog.records if "icesql compact" in r.getMessage()]
    assert len(hints) == 1, hints
    assert (
        hints[0].startswith("sink cdc_sink: table ns.items holds ")
        and "'icesql compact cdc_sink'" in hints[0]
    )


def test_a_sink_that_compacts_its_table_hints_only_when_its_compactions_fall_behind() -> None:
    """The hint sends the user to ``icesql compact``: right for a sink that leaves its table
    alone, noise for one whose maintenance rewrites the files past MAXIMUM DELETE FILES (its next
    step would do the same); that one says so only past twice the number, and 0 stays off."""
    from icesql.engine.sink.committer import compaction_hint_at
    from icesql.plan import MaintenancePolicy

    assert compaction_hint_at(MaintenancePolicy(automatic=False), 10) == 10
    assert compaction_hint_at(MaintenancePolicy(compaction=False), 10) == 10
    assert compaction_hint_at(MaintenancePolicy(maximum_delete_files=10), 10) == 21
    assert compaction_hint_at(MaintenancePolicy(), 10) == 10  # 4: past 8 already
    assert compaction_hint_at(MaintenancePolicy(), 0) == 0
