"""One sink, many tables (issue 53) on both executors: a Debezium changelog of several tables in
one source (Kafka Connect JSON with schemas.enable, as Debezium's topic routing puts many tables in
one topic), routed by ``TABLE = '{table}'``; each table is created on first sight with its own
columns and key, and equals its replay (DuckDB, checked against DataFusion) on both executors."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

import icesql
from tests.support.conformance import Twins, assert_same_tables
from tests.support.connect_events import event
from tests.support.pipeline_helpers import write_json_lines

pytestmark = pytest.mark.spark

KINDS = ("int", "long", "double", "bool", "string", "date", "ts", "time", "decimal")


def _value(rng: random.Random, kind: str) -> Any:
    return {
        "int": lambda: rng.randint(-1000, 1000),
        "long": lambda: rng.randint(-(10**12), 10**12),
        "double": lambda: rng.choice([0.5, -2.25, 1e6, 3.75]),
        "bool": lambda: rng.random() < 0.5,
        "string": lambda: rng.choice(["a", "bb", "ccc", "é"]),
        "date": lambda: rng.randint(0, 20000),
        "ts": lambda: rng.randint(0, 2 * 10**15),
        "time": lambda: rng.randint(0, 86_400 * 10**6 - 1),
        "decimal": lambda: rng.randint(-99999, 99999) / 100,
    }[kind]()


class Db:
    """Tables of a random schema each and their changes, with the replay of their final state."""

    def __init__(self, seed: int, tables: int, key: tuple[str, ...]) -> None:
        self.rng = random.Random(seed)
        self.key = key
        self.lsn = 0
        self.tables: dict[str, list[tuple[str, str]]] = {}
        self.appended: dict[str, int] = {}  # rows an APPEND sink writes: every change but deletes
        self.state: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
        for t in range(tables):
            self.add_table(f"t{t}")

    def add_table(self, name: str) -> None:
        others = [(f"c{i}", self.rng.choice(KINDS)) for i in range(self.rng.randint(1, 5))]
        self.tables[name] = [(k, "int") for k in self.key] + others
        self.state[name] = {}

    def changes(self, n: int) -> list[str]:
        out = []
        for _ in range(n):
            name = self.rng.choice(sorted(self.tables))
            cols, rows = self.tables[name], self.state[name]
            key = tuple(self.rng.randint(0, 6) for _ in self.key)  # few keys: updates, deletes, reuse
            self.lsn += 1
            old = rows.get(key)
            new = {**dict(zip(self.key, key, strict=True)), **{c: _value(self.rng, k) for c, k in cols if c not in self.key}}
            if old is not None and self.rng.random() < 0.3:
                out.append(event("db", name, cols, self.key, "d", old, None, self.lsn)[1])
                del rows[key]
            else:
                out.append(event("db", name, cols, self.key, "u" if old else "c", old, new, self.lsn)[1])
                rows[key] = new
                self.appended[name] = self.appended.get(name, 0) + 1
        return out

    def rows(self, name: str) -> int:
        return len(self.state[name])


def _stamp(path: Path, k: int) -> None:
    os.utime(path, (1_700_000_000 + k, 1_700_000_000 + k))


def test_routed_upserts_of_many_tables(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Three tables, then a fourth created mid-run and a field added to one table's events: each
    table gets its own columns (the new field widens only its table), key and partitioning."""
    data = tmp_path / "cdc"
    db = Db(53, 3, ("id",))
    twins = Twins.make(tmp_path, spark, caplog)
    twins.execute(
        f"CREATE SOURCE cdc FROM FILES '{data}' (FORMAT = 'debezium-json');"
        "CREATE SINK k FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'db', TABLE = 'app_{table}') "
        "KEY (id) MODE UPSERT PARTITION BY (bucket(2, id));"
    )
    for r in range(3):
        if r == 1:
            db.add_table("t3")  # a table first seen in a later batch
        if r == 2:
            db.tables["t0"].append(("added", "string"))  # its events bring a new field
        _stamp(write_json_lines(data, f"{r}.json", db.changes(60)), r)
        twins.run(["k"])
        for name in sorted(db.tables):
            here, there = twins.states(f"db.app_{name}")
            assert len(here.rows) == db.rows(name), f"round {r} table {name}"
            assert_same_tables(here, there, files=False)
    t0 = [f[1] for f in twins["in_process"].state("db.app_t0").schema]
    t1 = [f[1] for f in twins["in_process"].state("db.app_t1").schema]
    assert "added" in t0 and "added" not in t1
    table = twins["in_process"].table("db.app_t1")
    assert [table.schema().find_field(i).name for i in table.schema().identifier_field_ids] == ["id"]
    assert len(table.spec().fields) == 1
    # the sink's last commit (its maintenance may have compacted the table since)
    summary = [s.summary for s in table.snapshots() if s.summary.get("icesql.progress") is not None][-1]
    assert summary["icesql.progress"] == "2"
    for executor in twins.values():  # each table's key index: position deletes, never equality ones
        added = [a for n in db.tables for a in executor.state(f"db.app_{n}").added]
        assert sum(int(a.get("added-position-delete-files", 0)) for a in added) > 0
        assert sum(int(a.get("added-equality-delete-files", 0)) for a in added) == 0
    # SHOW SINK STATUS: the sink's row (its template), then a row per table it wrote, over all its
    # runs (the store keeps each table's counters)
    _stamp(write_json_lines(data, "3.json", db.changes(20)), 3)
    with icesql.Session(home=twins["in_process"].home) as s:
        s.run(once=True, sinks=["k"])
        (result,) = s.execute("SHOW SINK STATUS k")
    rows = [dict(zip(result.columns, r, strict=True)) for r in result.rows]
    assert rows[0]["table"] == "db.app_{table}"
    tables = {r["table"]: r for r in rows[1:]}
    assert set(tables) <= {f"db.app_{n}" for n in db.tables} and tables
    assert all(r["commits"] >= 1 and r["rows_committed"] > 0 and r["last_error"] == "-" for r in tables.values())
    # the in-process runs' tables sum to the sink's row
    assert rows[0]["rows_committed"] == sum(r["rows_committed"] for r in tables.values())
    assert rows[0]["commits"] == sum(r["commits"] for r in tables.values())


def test_routed_kafka_keys(spark: Any, noida: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """One topic holding three tables (Debezium's topic routing): each table's KEY is its records'
    key, here composite; a message without a schema block is a dead letter, the others commit. A
    second sink appends the same changes to a table per ``{topic}`` and table."""
    from tests.support import kafka as K

    topic = "routed-many"
    K.create_topic(noida.bootstrap, topic, 2)
    twins = Twins.with_kafka(tmp_path, spark, caplog, noida.bootstrap)
    twins.execute(
        f"CREATE SOURCE cdc FROM KAFKA CONNECTION kb (TOPIC = '{topic}', FORMAT = 'debezium-json');"
        "CREATE SINK k FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'db', TABLE = '{db}_{table}') "
        "MODE UPSERT WITH (ON ERROR = 'dead-letter');"
        # the same changes appended, a table per topic and table (Debezium's topic routing)
        "CREATE SINK raw FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'raw', TABLE = '{topic}__{table}') "
        "WITH (ON ERROR = 'skip');"
    )
    db = Db(7, 3, ("a", "b"))
    for _ in range(2):
        records = []
        for value in db.changes(50):
            payload = json.loads(value)["payload"]
            image = payload["after"] or payload["before"]
            key = {"schema": {"type": "struct", "fields": [{"type": "int32", "field": c} for c in ("a", "b")]},
                   "payload": {c: image[c] for c in ("a", "b")}}
            records.append((json.dumps(key).encode(), value.encode()))
        records.append((None, json.dumps({"op": "c", "after": {"a": 1}}).encode()))  # no schema block
        K.produce(noida.bootstrap, topic, records)
        twins.run(["k", "raw"])
    for name in sorted(db.tables):
        here, there = twins.states(f"db.db_{name}")
        assert len(here.rows) == db.rows(name), name
        assert_same_tables(here, there, files=False)
        table = twins["spark"].table(f"db.db_{name}")
        assert [table.schema().find_field(i).name for i in table.schema().identifier_field_ids] == ["a", "b"]
        appended, there = twins.states(f"raw.{topic}__{name}")
        assert len(appended.rows) == db.appended[name], name
        assert_same_tables(appended, there, files=False)
    letters = twins["in_process"].state("db.k_dead_letters", "reason, error")
    assert len(letters.rows) == 2 and all("no schema block" in r[1] for r in letters.rows)


def test_routed_topic_pattern_a_topic_per_table(
    spark: Any, noida: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A whole database: Debezium's topic per table, read by one ``TOPIC PATTERN`` source and
    routed by ``{table}``; a topic (and its table) created between runs is picked up, a topic the
    pattern does not match is not read, and each table equals its replay on both executors."""
    from tests.support import kafka as K

    def key_of(value: str) -> bytes:
        payload = json.loads(value)["payload"]
        image = payload["after"] or payload["before"]
        schema = {"type": "struct", "fields": [{"type": "int32", "field": "id"}]}
        return json.dumps({"schema": schema, "payload": {"id": image["id"]}}).encode()

    db = Db(11, 2, ("id",))
    for name in db.tables:
        K.create_topic(noida.bootstrap, f"inv.{name}", 2)
    K.create_topic(noida.bootstrap, "elsewhere", 1)
    twins = Twins.with_kafka(tmp_path, spark, caplog, noida.bootstrap)
    twins.execute(
        "CREATE SOURCE inv FROM KAFKA CONNECTION kb (TOPIC PATTERN = 'inv\\..*', FORMAT = 'debezium-json');"
        "CREATE SINK k FROM inv INTO ICEBERG CATALOG lake (NAMESPACE = 'inv', TABLE = '{table}') MODE UPSERT;"
    )
    for r in range(2):
        if r == 1:
            db.add_table("t2")
            K.create_topic(noida.bootstrap, "inv.t2", 1)
        by_topic: dict[str, list[tuple[bytes, bytes]]] = {}
        for value in db.changes(80):
            table = json.loads(value)["payload"]["source"]["table"]
            by_topic.setdefault(f"inv.{table}", []).append((key_of(value), value.encode()))
        for topic, records in by_topic.items():
            K.produce(noida.bootstrap, topic, records)
        K.produce(noida.bootstrap, "elsewhere", [(None, b'{"not": "read"}')])
        twins.run(["k"])
        for name in sorted(db.tables):
            here, there = twins.states(f"inv.{name}")
            assert len(here.rows) == db.rows(name), f"round {r} table {name}"
            assert_same_tables(here, there, files=False)
    # "elsewhere" was never read: its message has no schema block, and without ON ERROR it would
    # have failed the run (``Twins.run`` asserts every run stopped cleanly)


def test_routed_sink_maintains_each_busy_table(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The running sink maintains its tables per table on both executors: under eager MAINTENANCE
    options each table changed in every run gets compacted (its key index following: the rows stay
    equal to the replay), a table written only in the first run keeps its one snapshot; then
    ``Session.maintain`` runs over every table, one run per table."""
    data = tmp_path / "cdc"
    db = Db(29, 2, ("id",))
    twins = Twins.make(tmp_path, spark, caplog)
    twins.execute(
        f"CREATE SOURCE cdc FROM FILES '{data}' (FORMAT = 'debezium-json');"
        "CREATE SINK k FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'db', TABLE = '{table}') KEY (id) "
        "MODE UPSERT WITH (COMPACTION MINIMUM FILES = 2, MAXIMUM DELETE FILES = 1);"
    )
    db.add_table("quiet")
    quiet = db.tables.pop("quiet")  # written in the first run only
    for r in range(4):
        lines = db.changes(40)
        if r == 0:
            lines.append(event("db", "quiet", quiet, ["id"], "c", None, {c: None for c, _ in quiet} | {"id": 1}, 0)[1])
        _stamp(write_json_lines(data, f"{r}.json", lines), r)
        twins.run(["k"])
    for name in ("t0", "t1"):
        here, there = twins.states(f"db.{name}")
        assert len(here.rows) == db.rows(name), name
        assert_same_tables(here, there, files=False)
        for executor in twins.values():
            table = executor.table(f"db.{name}")
            reasons = [s.summary.get("icesql.commit-reason") for s in table.snapshots()]
            assert "compact" in reasons, (name, reasons)
    for executor in twins.values():
        assert len(executor.table("db.quiet").snapshots()) == 1
        with icesql.Session(home=executor.home) as s:
            assert [run.table for run in s.maintain(["k"])] == ["db.quiet", "db.t0", "db.t1"]
