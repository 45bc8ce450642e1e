"""The many-tables benchmark (issue 53, ``benchmarks/tables.py``) without Spark: its data generator
at tiny size (the three layouts hold the same changes, the expected states are their replay) and
run.py's goals and report on made-up results."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from benchmarks import run
from benchmarks import tables as T


def _replay(lines: list[dict]) -> dict:
    state: dict = {}
    for e in lines:
        r = e["after"] if e["op"] != "d" else e["before"]
        if e["op"] == "d":
            del state[r["id"]]
        else:
            state[r["id"]] = r
    return state


def test_generator_layouts_agree(tmp_path: Path) -> None:
    d = T.generate(tmp_path / "t", tables=3, changes=400)
    again = T.generate(tmp_path / "t", tables=3, changes=400)  # cached: loaded, not rewritten
    assert again == d and d.base == 100 and d.events == 3 * 500
    routed = [json.loads(x) for f in sorted(Path(d.routed_dir).iterdir()) for x in f.read_text().splitlines()]
    assert len(routed) == d.events
    assert all(set(e) == {"schema", "payload"} for e in routed)
    lsns = [e["payload"]["source"]["lsn"] for e in routed]
    assert lsns == sorted(lsns)  # the stream's order is the lsn order
    by_table = Counter(e["payload"]["source"]["table"] for e in routed)
    assert by_table == dict.fromkeys(d.names, 500)
    for n in d.names:
        plain = [json.loads(x) for x in (Path(d.per_table_dir(n)) / "events.json").read_text().splitlines()]
        mine = [e["payload"] for e in routed if e["payload"]["source"]["table"] == n]
        assert [(e["op"], e["source"]["lsn"]) for e in plain] == [(e["op"], e["source"]["lsn"]) for e in mine]
        ops = Counter(e["op"] for e in plain)
        assert ops["r"] == 100 and 250 <= ops["u"] <= 310 and 20 <= ops["d"] <= 60  # 70 % / 10 % of 400
        state = _replay(plain)
        expected = pq.read_table(d.expected(n))
        assert expected.num_rows == len(state) == d.expected_rows[n]
        assert sorted(expected.column("id").to_pylist(), key=str) == sorted(state, key=str)
        base, changes = (pq.read_table(p) for p in d.merge_files(n))
        assert base.num_rows == 100 and changes.num_rows == 400
        assert set(changes.column("op").to_pylist()) <= {"I", "U", "D"}
        assert expected.column_names == d.columns[n] and 3 <= len(d.columns[n]) <= 10
    # key reuse: some insert names a key deleted before it
    reused = 0
    for n in d.names:
        gone: set = set()
        for e in [json.loads(x) for x in (Path(d.per_table_dir(n)) / "events.json").read_text().splitlines()]:
            if e["op"] == "d":
                gone.add(e["before"]["id"])
            elif e["op"] == "c" and e["after"]["id"] in gone:
                reused += 1
    assert reused > 0


def test_tables_goals_and_report_on_made_up_results() -> None:
    def run_(name: str, seconds: float, mem: float) -> dict:
        return {"name": name, "status": "ok", "seconds": seconds, "wall_seconds": seconds, "peak_rss_mb": mem,
                "tables_verified": 100, "rows_in_tables": 10, "load_before": 1, "load_after": 2}

    tb = {"dataset": {"tables": 100, "changes_per_table": 20_000, "base_keys_per_table": 5_000},
          "icesql_routed": run_("icesql_routed", 100, 1500),
          "icesql_separate": run_("icesql_separate", 400, 900),
          "spark35_merge_tables": run_("spark35_merge_tables", 500, 3000)}
    ratios = {r["ratio"]: r for r in run.compute_ratios({"tables": tb})}
    sep = ratios["tables: one routed sink's wall time / 100 separate sinks' (lower is better)"]
    assert (sep["value"], sep["met"]) == (0.25, False)
    mem = ratios["tables: one routed sink's peak RSS, MB (absolute)"]
    assert (mem["value"], mem["met"]) == (1500, True)
    merge = ratios["tables: one routed sink vs Spark+Iceberg Java MERGE INTO per table (100 tables, one process)"]
    assert (merge["value"], merge["met"]) == (5.0, True)
    # a routed run whose tables differ from the replay misses its goals, with the reason
    tb["icesql_routed"] = {"name": "icesql_routed", "status": "error", "error": "WRONG OUTPUT: 2 tables differ"}
    bad = {r["ratio"]: r for r in run.compute_ratios({"tables": tb})}
    assert bad[merge["ratio"]]["met"] is False and "WRONG OUTPUT" in bad[merge["ratio"]]["sides"]
    res = {"started": "x", "command": "python benchmarks/run.py --only tables", "total_seconds": 1.0,
           "sections": {"tables": tb}, "ratios": list(ratios.values()),
           "machine": {k: "?" for k in ("nproc", "cpu", "mem_gib", "os", "java", "python", "project_venv_pyspark_pyarrow",
                                        "harness_pyspark_pyarrow", "pyiceberg", "duckdb", "loadavg_start")}}
    md = run.render_markdown(res)
    assert "### One sink, many tables (absolute)" in md and "| icesql_separate | ok |" in md
    assert "tables" not in run.DEFAULT_SECTIONS
