"""ON ERROR = 'dead-letter': every bad record lands once in the dead-letter table, every good one
once in the target, on the Arrow path (FILES sources read by the sink) and on Spark's path (a
view), for malformed JSON, wrong types, broken CSV quoting and Debezium events without ``op``;
read back by DuckDB and DataFusion; secret values never reach the table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.engine import Engine
from icesql.plan import OnError, SinkMode, SinkPlan, SourceFormat, SourceKind, SourcePlan, ViewPlan
from tests.support.pipeline_helpers import (
    Objects,
    State,
    icesql_summaries,
    load_table,
    local_catalog,
    write_json_lines,
)
from tests.support.readers import read_datafusion, read_duckdb

pytestmark = pytest.mark.spark

SECRET = "hunter2-dead-letter-secret"  # a secret value a bad record happens to carry


def _source(name: str, path: Path, fmt: SourceFormat, schema: str, **kw: Any) -> SourcePlan:
    return SourcePlan(
        name=name, source_kind=SourceKind.FILES, path=str(path), format=fmt, schema=schema, **kw
    )


def _sink(name: str, relation: str, table: str, **kw: Any) -> SinkPlan:
    return SinkPlan(
        name=name,
        relation=relation,
        catalog_connection="cat",
        namespace=("ns",),
        table=table,
        on_error=OnError.DEAD_LETTER,
        **kw,
    )


def corpus(tmp: Path) -> dict[str, Any]:
    """The input files; returns what each sink must hold and dead-letter."""
    js, csv, dbz = tmp / "json", tmp / "csv", tmp / "dbz"
    write_json_lines(
        js,
        "a.json",
        [
            json.dumps({"id": 1, "v": "one"}),
            '{"id": 2, "v": "two"',  # malformed JSON: the brace never closes
            json.dumps({"id": 3, "v": "three"}),
            json.dumps({"id": "four", "v": "4"}),  # wrong type
            json.dumps({"id": 5, "v": f"password={SECRET}"}),  # good: a secret in the data is data
        ],
    )
    write_json_lines(js, "b.json", [json.dumps({"id": 6, "v": "six"}), f'{{"id": 7, "v": "{SECRET}" broken'])
    write_json_lines(  # lines as they are: CSV too
        csv,
        "a.csv",
        [
            "id,v",
            "10,ten",
            '11,"he said "no", twice"',  # broken quoting: Spark shifts the fields
        ],
    )
    write_json_lines(csv, "b.csv", ["id,v", "12,twelve", "x13,thirteen", "14,fourteen"])
    write_json_lines(
        dbz,
        "a.json",
        [
            json.dumps({"before": None, "after": {"id": 20, "v": "a"}, "op": "c", "source": {"lsn": 1}}),
            json.dumps({"before": None, "after": {"id": 21, "v": "b"}, "source": {"lsn": 2}}),  # no op
            json.dumps({"before": None, "after": {"id": 22, "v": "c"}, "op": "c", "source": {"lsn": 3}}),
            json.dumps({"before": None, "after": {"id": 23, "v": "d"}, "op": "x", "source": {"lsn": 4}}),
        ],
    )
    return {
        "json": {"ids": [1, 3, 5, 6], "bad": {("a.json", 2), ("a.json", 4), ("b.json", 2)}},
        "csv": {"ids": [10, 12, 14], "bad": {("a.csv", 3), ("b.csv", 3)}},
        "dbz": {"ids": [20, 22], "bad": {("a.json", 2), ("a.json", 4)}},
    }


def make_engine(home: Path, spark: Any, relations: dict[str, Any], state: State) -> Engine:
    objects = Objects({"cat": local_catalog(warehouse=home / "warehouse")}, relations)
    return Engine(
        home, objects=objects, secrets=lambda n: "x", state=state, spark=spark, trigger_interval=0.2
    )


def _ids(metadata: str, reader: Any) -> list[int]:
    return sorted(int(r[0]) for r in reader(metadata, "id"))


def _letters(home: Path, identifier: str) -> list[dict[str, Any]]:
    table = load_table(home, identifier)
    rows = read_duckdb(
        table.metadata_location,
        'sink, sink_id, batch_id, source, file, byte_offset, record, reason, error, raw, recorded_at',
    )
    names = (
        "sink",
        "sink_id",
        "batch_id",
        "source",
        "file",
        "byte_offset",
        "record",
        "reason",
        "error",
        "raw",
        "at",
    )
    return [dict(zip(names, r, strict=True)) for r in rows]


def test_bad_records_land_once_in_the_dead_letter_table(spark: Any, tmp_path: Path) -> None:
    from icesql.engine.base.secrets import remember_secret

    remember_secret(SECRET)
    home = tmp_path / "home"
    want = corpus(tmp_path)
    relations: dict[str, Any] = {
        "js": _source("js", tmp_path / "json", SourceFormat.JSON, "id BIGINT, v STRING"),
        "cs": _source("cs", tmp_path / "csv", SourceFormat.CSV, "id BIGINT, v STRING", header=True),
        "dz": _source("dz", tmp_path / "dbz", SourceFormat.DEBEZIUM_JSON, "id BIGINT, v STRING"),
        "jv": ViewPlan(name="jv", query="SELECT id, upper(v) AS v FROM js", depends_on=("js",)),
    }
    sinks = [
        _sink("sj", "js", "j"),
        _sink("sc", "cs", "c"),
        _sink("sd", "dz", "d", mode=SinkMode.UPSERT, key=("id",)),
        _sink("sv", "jv", "v", dead_letter_table=("ns", "view_errors")),  # Spark's path
    ]
    state = State(home / "state.json")
    for run in range(2):  # the second run finds nothing new: nothing is written twice
        eng = make_engine(home, spark, relations, state)
        for sink in sinks:  # one at a time: four queries at once starve local[2]'s Python workers
            eng.run([sink], once=True)
        rows = {s["name"]: s for s in eng.status()}
        if run == 0:
            status = rows
        else:  # the sources' sinks are not even started (nothing new, seen without Spark); the view's is
            assert sorted(rows) == ["sv"]
        for name in ("sj", "sc", "sd", "sv"):
            assert state.data[name]["status"] == "stopped", state.data[name]
        eng.stop()
    assert status["sj"]["dead_letters"] == 3 and status["sc"]["dead_letters"] == 2
    assert status["sd"]["dead_letters"] == 2 and status["sv"]["dead_letters"] == 3
    assert status["sj"]["path"] == "arrow" and status["sv"]["path"] == "spark"

    for table, dead, key in (
        ("ns.j", "ns.j_dead_letters", "json"),
        ("ns.c", "ns.c_dead_letters", "csv"),
        ("ns.d", "ns.d_dead_letters", "dbz"),
        ("ns.v", "ns.view_errors", "json"),
    ):
        target = load_table(home, table)
        assert _ids(target.metadata_location, read_duckdb) == want[key]["ids"], table
        assert _ids(target.metadata_location, read_datafusion) == want[key]["ids"], table
        letters = _letters(home, dead)
        where = sorted((Path(r["file"]).name, r["record"]) for r in letters)
        assert where == sorted(want[key]["bad"]), (dead, letters)  # each once
        assert {r["byte_offset"] for r in letters} == {0}
        dead_table = load_table(home, dead)
        assert sorted(r[0] for r in read_datafusion(dead_table.metadata_location, "record")) == sorted(
            r for _, r in want[key]["bad"]
        )
        for r in letters:
            assert r["sink_id"] and r["error"] and r["raw"] and r["at"] is not None
            assert SECRET not in r["raw"] and SECRET not in r["error"]
        # its commits carry the sink's progress, like the target's
        summ = icesql_summaries(dead_table)
        assert summ and {s["icesql.sink-id"] for s in summ} == {letters[0]["sink_id"]}

    by_record = {(Path(r["file"]).name, r["record"]): r for r in _letters(home, "ns.j_dead_letters")}
    assert by_record[("a.json", 2)]["reason"] == "malformed-json"
    assert by_record[("a.json", 2)]["raw"] == '{"id": 2, "v": "two"'
    assert (
        by_record[("a.json", 4)]["reason"] == "type-mismatch" and "'id'" in by_record[("a.json", 4)]["error"]
    )
    assert "********" in by_record[("b.json", 2)]["raw"]  # the secret value masked
    assert {r["source"] for r in by_record.values()} == {"js"} and {
        r["sink"] for r in by_record.values()
    } == {"sj"}
    dbz_reasons = {r["record"]: r["reason"] for r in _letters(home, "ns.d_dead_letters")}
    assert dbz_reasons == {2: "debezium-op", 4: "debezium-op"}
    csv_letters = {(Path(r["file"]).name, r["record"]): r for r in _letters(home, "ns.c_dead_letters")}
    assert csv_letters[("b.csv", 3)]["reason"] == "type-mismatch"
    assert csv_letters[("a.csv", 3)]["raw"] == '11,"he said "no", twice"'
    assert csv_letters[("a.csv", 3)]["reason"] == "malformed-csv"
