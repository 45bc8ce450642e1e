"""Kafka upserts and changelogs without Spark (issue 39): a sink over a Debezium topic or an
``ENVELOPE UPSERT`` topic runs in icesql's own process (``engine.local_query``) with the same
batch path as a FILES upsert - the Arrow decode (``kafka.arrow``; Debezium events by the FILES
source's reader, ``files.decode.debezium_events``), the reduction per KEY, the key index - and must
leave what Spark's run leaves.

* the differential: the random changelog of ``tests/support/cdc_changelog.py`` (a composite KEY,
  hot keys, deletes of absent keys, LSN order differing from offset order, Kafka Connect's
  ``payload`` wrapper) as a Debezium topic with tombstones after deletes, and the same changes as
  an upsert topic (JSON keys, tombstones), through sinks run without Spark and on Spark, round
  after round: every table equals the replay and its twin, read by DuckDB and DataFusion; a third
  sink takes turns between the paths on one key index;
* a record the Arrow path cannot decode exactly moves the run to Spark, which skips it under
  ``ON ERROR = 'skip'``.

The rows' schema a run without Spark builds is checked against Spark's in ``test_kafka_local_run``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import icesql
from tests.engine.test_local_upsert import _run
from tests.support import kafka as K
from tests.support.cdc_changelog import SCHEMA, Change, Changelog, as_tuples, expected_state
from tests.support.pipeline_helpers import load_table, spark_for_tests
from tests.support.readers import read_datafusion, read_duckdb

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(900)]

TARGET = "INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = '{name}') KEY (region, id) MODE UPSERT"


@pytest.fixture(scope="module")
def spark() -> Any:
    return spark_for_tests()


def _key(c: Change) -> bytes:
    region, i = c.key
    return json.dumps({"region": region, "id": i}).encode()


def _debezium_records(changes: list[Change]) -> list[tuple[bytes, bytes | None]]:
    """Each change keyed by its row's key (one partition per key), and Debezium's tombstone after
    each delete."""
    out: list[tuple[bytes, bytes | None]] = []
    for c in changes:
        out.append((_key(c), json.dumps(c.event(), ensure_ascii=False).encode()))
        if c.op == "d":
            out.append((_key(c), None))
    return out


def _upsert_records(changes: list[Change]) -> list[tuple[bytes, bytes | None]]:
    """The same changes as an upsert topic in LSN order: the value without the key columns, a
    tombstone for a delete."""
    out: list[tuple[bytes, bytes | None]] = []
    for c in sorted(changes, key=lambda c: c.lsn):
        if c.op == "d":
            out.append((_key(c), None))
        else:
            assert c.after is not None
            value = {k: v for k, v in c.after.items() if k not in ("region", "id")}
            out.append((_key(c), json.dumps(value, ensure_ascii=False).encode()))
    return out


def _connections(bootstrap: str, wh: Path) -> str:
    return (
        f"CREATE CONNECTION k TO KAFKA (BROKER = '{bootstrap}');"
        f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');"
    )


def _setup(home: Path, wh: Path, bootstrap: str, sinks: dict[str, str]) -> None:
    with icesql.Session(home=home) as s:
        s.execute(
            _connections(bootstrap, wh)
            + f"CREATE SOURCE cdc FROM KAFKA CONNECTION k (TOPIC = 'l-cdc', FORMAT = 'debezium-json', SCHEMA = '{SCHEMA}');"
            "CREATE SOURCE ups FROM KAFKA CONNECTION k (TOPIC = 'l-ups', FORMAT = 'json', "
            "SCHEMA = 'name STRING, qty INT, ts TIMESTAMP', ENVELOPE = 'upsert', KEY FORMAT = 'json', "
            "KEY SCHEMA = 'region STRING, id BIGINT')"
        )
        for name, source in sinks.items():
            s.execute(f"CREATE SINK {name} FROM {source} {TARGET.format(name=name)}")


def _rows(home: Path, wh: Path, name: str) -> list[tuple[Any, ...]]:
    table = load_table(home, f"n.{name}", warehouse=wh, catalog_name="lake")
    got = read_duckdb(table.metadata_location)
    assert read_datafusion(table.metadata_location) == got
    # the upsert topic's table has the key columns first, as its rows do: order as the replay's
    cols = [f.name for f in table.schema().fields]
    at = [cols.index(c) for c in ("region", "id", "name", "qty", "ts")]
    return sorted((tuple(r[i] for i in at) for r in got), key=repr)


def test_kafka_changes_without_spark_write_what_spark_writes(spark: Any, noida: Any, tmp_path: Path) -> None:
    b = noida.bootstrap
    K.create_topic(b, "l-cdc", 3)
    K.create_topic(b, "l-ups", 3)
    home, wh = tmp_path / "home", tmp_path / "wh"
    sinks = {f"{src}_{path}": src for src in ("cdc", "ups") for path in ("here", "spark", "turns")}
    _setup(home, wh, b, sinks)
    gen = Changelog(17, keys_per_region=40)
    for round_no in range(4):
        rnd = gen.next_round(160, max_files=3)
        K.produce(b, "l-cdc", _debezium_records(rnd.changes))
        K.produce(b, "l-ups", _upsert_records(rnd.changes))
        turn = spark if round_no % 2 else None
        _run(home, None, [n for n in sinks if n.endswith(("_here",) if turn is not None else ("_here", "_turns"))])
        _run(home, spark, [n for n in sinks if n.endswith(("_spark", "_turns") if turn is not None else ("_spark",))])
        want = as_tuples(expected_state(gen.changes))
        for name in sinks:
            got = _rows(home, wh, name)
            keys = [(r[0], r[1]) for r in got]
            assert len(keys) == len(set(keys)), f"{name}: two rows of a key after round {round_no}"
            assert got == want, f"{name} after round {round_no}"
    assert gen.stats["wrapped"] and gen.stats["absent_deletes"] and gen.stats["shuffled_files"]


def test_a_kafka_record_arrow_cannot_decode_moves_the_run_to_spark(
    noida: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    b = noida.bootstrap
    K.create_topic(b, "l-bad", 2)
    home, wh = tmp_path / "home", tmp_path / "wh"
    with icesql.Session(home=home) as s:
        s.execute(
            _connections(b, wh)
            + "CREATE SOURCE cdc FROM KAFKA CONNECTION k (TOPIC = 'l-bad', FORMAT = 'debezium-json', "
            "SCHEMA = 'id BIGINT, v STRING', ON ERROR = 'skip');"
            "CREATE SINK k FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'k') KEY (id) MODE UPSERT"
        )

    def change(i: int, v: str, lsn: int) -> tuple[bytes, bytes]:
        return str(i).encode(), json.dumps({"op": "c", "after": {"id": i, "v": v}, "source": {"lsn": lsn}}).encode()

    K.produce(b, "l-bad", [change(i, "a", i) for i in range(6)])
    caplog.set_level("INFO", logger="icesql")
    with icesql.Session(home=home) as s:
        s.run(once=True, sinks=["k"])
        assert s.engine._spark is None
    K.produce(b, "l-bad", [change(1, "b", 10), (b"9", b'{"op": "c", "after": '), change(7, "b", 11)])
    caplog.clear()
    with icesql.Session(home=home) as s:
        s.run(once=True, sinks=["k"])
        assert s.engine._spark is not None, "the batch Arrow cannot decode runs on Spark"
        assert s.engine.runner("k").status_row()["skipped_records"] == 1
    assert "need Spark's parsers" in caplog.text
    rows = {r["id"]: r["v"] for r in load_table(home, "n.k", warehouse=wh, catalog_name="lake").scan().to_arrow().to_pylist()}
    assert rows == {0: "a", 1: "b", 2: "a", 3: "a", 4: "a", 5: "a", 7: "b"}


def test_a_kafka_upsert_sink_without_spark_killed_anywhere_applies_every_change_once(noida: Any, tmp_path: Path) -> None:
    """The child runs without Spark (``tests.support.cdc_runner``, ``ICESQL_CDC_CHILD_SPARK=0``) and
    is SIGKILLed, process group and all, while writing, with a batch staged, inside the catalog
    commit before and after the pointer swap, and after a commit; changes keep arriving between
    the kills. The table then equals the replay: nothing lost, nothing applied twice, the key
    index consistent with the table."""
    from tests.support.cdc_runner import kill_everywhere

    b = noida.bootstrap
    K.create_topic(b, "l-kill", 3)
    home, wh = tmp_path / "home", tmp_path / "wh"
    with icesql.Session(home=home) as s:
        s.execute(
            _connections(b, wh)
            + f"CREATE SOURCE cdc FROM KAFKA CONNECTION k (TOPIC = 'l-kill', FORMAT = 'debezium-json', "
            f"SCHEMA = '{SCHEMA}', MAX RECORDS PER TRIGGER = 60);"
            f"CREATE SINK kk FROM cdc {TARGET.format(name='kk')}"
        )
    gen = Changelog(29, keys_per_region=25)

    def produce_round() -> None:
        # in LSN order: a run here takes several batches, and a later batch's change wins
        K.produce(b, "l-kill", _debezium_records(sorted(gen.next_round(90).changes, key=lambda c: c.lsn)))

    produce_round()
    kill_everywhere(home, "kk", tmp_path / "child.log", spark=False, between=produce_round)
    got = _rows(home, wh, "kk")
    assert got == as_tuples(expected_state(gen.changes))
