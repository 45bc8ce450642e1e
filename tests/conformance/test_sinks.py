"""Every sink behaviour on both executors (issue 50 item 3): the same scenario runs once in this
process (``engine.local_query``) and once on Spark, each in a home, warehouse and checkpoint of its
own over the same input, and the two tables are compared whole (``support.conformance``): rows
(DuckDB, checked against DataFusion), schema with field ids, partition spec, live data and
delete files (live, and added by each snapshot), and the ``icesql.*`` entries of every snapshot
summary but the sink id.

The input is shared by the two runs and only read (same file names, sizes and mtimes, which the
summaries' source position records). The suite found three differences, all mended since: a
changelog appended in process was written in as many files as cores, not one per piece partition
as on Spark; a checkpoint begun in process recorded icesql's shuffle partitions, not the
session's; and an upsert batch wrote one position-delete file per partition in process but one
per partition and key index shard task on Spark (both now write one per partition: the shard
tasks hand their positions back and the batch's writer writes them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.conformance import (
    Twins,
    assert_same_files,
    assert_same_tables,
    without,
)
from tests.support.pipeline_helpers import dbz, write_json_lines

pytestmark = pytest.mark.spark

SCHEMA = "id BIGINT, name STRING, price DECIMAL(10,2), ok BOOLEAN, day DATE, ts TIMESTAMP, tags ARRAY<STRING>"
SINK = "INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = '{table}')"


def _rows(start: int, n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "name": f"n{i}" if i % 7 else None,
            "price": f"{i * 1.25:.2f}",
            "ok": i % 2 == 0,
            "day": f"2026-11-{1 + i % 28:02d}",
            "ts": f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:15:00Z",
            "tags": [f"t{i % 3}"] if i % 5 else [],
        }
        for i in range(start, start + n)
    ]


def _stamp(path: Path, k: int) -> None:
    """File ``k``'s mtime in ``k`` order: both executors take a directory's files by mtime."""
    os.utime(path, (1_700_000_000 + k, 1_700_000_000 + k))


def _append(twins: Twins, source_sql: str, partition: str = "") -> None:
    twins.execute(source_sql + f"CREATE SINK k FROM src {SINK.format(table='t')} {partition};")
    twins.run(["k"])
    here, there = twins.states("n.t")
    assert len(here.rows) > 0
    assert_same_tables(here, there)


def test_json_lines_append(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "in"
    _stamp(write_json_lines(data, "1.json", _rows(0, 40)), 1)
    _stamp(write_json_lines(data, "2.json", _rows(40, 25)), 2)
    twins = Twins.make(tmp_path, spark, caplog)
    _append(
        twins,
        f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'json', SCHEMA = '{SCHEMA}');",
        "PARTITION BY (day(ts), bucket(4, id))",
    )
    assert len(twins["spark"].state("n.t").rows) == 65


def test_csv_append(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "in"
    data.mkdir()
    for k, start in ((1, 0), (2, 30)):
        lines = ["id,name,price,ok,day"] + [
            f"{r['id']},{r['name'] or ''},{r['price']},{str(r['ok']).lower()},{r['day']}"
            for r in _rows(start, 30)
        ]
        (data / f"{k}.csv").write_text("\n".join(lines) + "\n")
        _stamp(data / f"{k}.csv", k)
    twins = Twins.make(tmp_path, spark, caplog)
    _append(
        twins,
        f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'csv', HEADER = true, "
        "SCHEMA = 'id INT, name STRING, price DECIMAL(10,2), ok BOOLEAN, day DATE');",
        "PARTITION BY (month(day))",
    )


def test_parquet_append_with_a_schema(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "in"
    data.mkdir()
    for k, start in ((1, 0), (2, 50)):
        rows = _rows(start, 50)
        table = pa.table(
            {
                "id": pa.array([r["id"] for r in rows], pa.int64()),
                "name": [r["name"] for r in rows],
                "ok": [r["ok"] for r in rows],
                "tags": [r["tags"] for r in rows],
                "extra": [1] * len(rows),  # not in the SCHEMA: not read
            }
        )
        pq.write_table(table, data / f"{k}.parquet", row_group_size=20)
        _stamp(data / f"{k}.parquet", k)
    twins = Twins.make(tmp_path, spark, caplog)
    _append(
        twins,
        f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'parquet', "
        "SCHEMA = 'id BIGINT, name STRING, ok BOOLEAN, tags ARRAY<STRING>, missing DOUBLE');",
        "PARTITION BY (ok)",
    )


CDC_SCHEMA = "id BIGINT, v STRING, n INT"


def _changes(round_no: int) -> list[dict[str, Any]]:
    """Round ``round_no`` of a changelog over ids 0..19: inserts, then updates and deletes of
    rows earlier rounds wrote, one key changed twice in a file."""
    lsn = round_no * 100
    out: list[dict[str, Any]] = []
    if round_no == 0:
        out += [dbz("c", None, {"id": i, "v": f"a{i}", "n": i}, lsn + i) for i in range(20)]
        out.append(dbz("u", {"id": 3, "v": "a3", "n": 3}, {"id": 3, "v": "b3", "n": 30}, lsn + 50))
    else:
        out += [
            dbz("u", {"id": i, "v": f"a{i}", "n": i}, {"id": i, "v": f"r{round_no}", "n": -i}, lsn + i)
            for i in range(0, 20, 3)
        ]
        out += [dbz("d", {"id": i, "v": f"a{i}", "n": i}, None, lsn + 20 + i) for i in range(1, 20, 4)]
        out.append(dbz("c", None, {"id": 100 + round_no, "v": "new", "n": 0}, lsn + 60))
        out.append(
            dbz(
                "u",
                {"id": 100 + round_no, "v": "new", "n": 0},
                {"id": 100 + round_no, "v": "again", "n": 1},
                lsn + 61,
            )
        )
    return out


def _replay(rounds: int) -> list[tuple[Any, ...]]:
    state: dict[int, tuple[Any, ...]] = {}
    for r in range(rounds):
        for c in sorted(_changes(r), key=lambda c: c["source"]["lsn"]):
            if c["op"] == "d":
                state.pop(c["before"]["id"], None)
            else:
                state[c["after"]["id"]] = (c["after"]["id"], c["after"]["v"], c["after"]["n"])
    return sorted(state.values(), key=repr)


def test_debezium_changelog_in_mode_append(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "cdc"
    twins = Twins.make(tmp_path, spark, caplog)
    twins.execute(
        f"CREATE SOURCE cdc FROM FILES '{data}' (FORMAT = 'debezium-json', SCHEMA = '{CDC_SCHEMA}');"
        f"CREATE SINK k FROM cdc {SINK.format(table='log')} MODE APPEND;"
    )
    for r in range(2):
        _stamp(write_json_lines(data, f"{r}.json", _changes(r)), r)
        twins.run(["k"])
    here, there = twins.states("n.log")
    assert len(here.rows) == sum(1 for r in range(2) for c in _changes(r) if c["op"] != "d")
    assert_same_tables(here, there, files=False)
    assert_same_files(here, there, "data files of a changelog appended")


def test_upsert_with_the_key_index(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "cdc"
    twins = Twins.make(tmp_path, spark, caplog)
    twins.execute(
        f"CREATE SOURCE cdc FROM FILES '{data}' (FORMAT = 'debezium-json', SCHEMA = '{CDC_SCHEMA}');"
        f"CREATE SINK k FROM cdc {SINK.format(table='up')} KEY (id) MODE UPSERT PARTITION BY (bucket(2, id));"
    )
    for r in range(3):
        _stamp(write_json_lines(data, f"{r}.json", _changes(r)), r)
        twins.run(["k"])
        here, there = twins.states("n.up")
        assert here.rows == _replay(r + 1), f"round {r}"
        assert_same_tables(here, there, files=False)
    for x in (here, there):  # the key index's position deletes, never equality deletes
        assert sum(a.get("added-position-delete-files", 0) for a in x.added) > 0
        assert sum(a.get("added-equality-delete-files", 0) for a in x.added) == 0
    assert_same_files(here, there, "live files of the upsert")


def test_dead_letters(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Bad records are read only by Spark's reader: in process, the batch that holds them stops
    before staging and the sink restarts on Spark, which replays it (``local_query.SparkNeeded``).
    Both executors' targets and dead-letter tables must be equal (the dead letters' ``sink_id``
    and ``recorded_at`` differ by construction and are left out)."""
    data = tmp_path / "in"
    twins = Twins.make(tmp_path, spark, caplog)
    twins.execute(
        f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING', "
        "ON ERROR = 'dead-letter');"
        f"CREATE SINK k FROM src {SINK.format(table='t')};"
    )
    _stamp(write_json_lines(data, "1.json", [{"id": i, "v": f"v{i}"} for i in range(10)]), 1)
    twins.run(["k"])  # a clean batch: in process
    bad = [
        json.dumps({"id": 10, "v": "ten"}),
        '{"id": 11, "v": "eleven"',  # malformed: the brace never closes
        json.dumps({"id": "twelve", "v": "12"}),  # a type mismatch
        json.dumps({"id": 13, "v": "thirteen"}),
    ]
    _stamp(write_json_lines(data, "2.json", bad), 2)
    twins.run(["k"], moves_to_spark=True)
    here, there = twins.states("n.t")
    assert sorted(r[0] for r in here.rows) == [*range(11), 13]
    # the hand-over to Spark is a restart of the sink, which counts one version more
    versions = [[int(s["icesql.sink-version"]) for s in x.summaries] for x in (here, there)]
    assert versions == [[1, 3], [1, 2]]
    assert_same_tables(without(here, "icesql.sink-version"), without(there, "icesql.sink-version"))
    columns = "sink, batch_id, source, file, byte_offset, record, reason, error, raw"
    here, there = twins.states("n.t_dead_letters", columns)
    assert len(here.rows) == 2
    assert_same_tables(without(here, "icesql.sink-version"), without(there, "icesql.sink-version"))


def test_schema_evolution_adds_a_later_files_column(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A later file adds a column and the source's SCHEMA names it (ALTER SOURCE): the table
    gains it (SCHEMA EVOLUTION = 'auto'), older rows read as null. (A Parquet source without a
    SCHEMA evolves from the files themselves, but takes Spark's inferred schema, so it never
    runs in process: ``files.progress.runs_locally``.)"""
    data = tmp_path / "in"
    twins = Twins.make(tmp_path, spark, caplog)
    twins.execute(
        f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING');"
        f"CREATE SINK k FROM src {SINK.format(table='t')} WITH (SCHEMA EVOLUTION = 'auto');"
    )
    _stamp(write_json_lines(data, "1.json", [{"id": i, "v": f"v{i}"} for i in range(5)]), 1)
    twins.run(["k"])
    _stamp(
        write_json_lines(data, "2.json", [{"id": i, "v": f"v{i}", "w": {"x": i / 2}} for i in range(5, 9)]), 2
    )
    twins.execute("ALTER SOURCE src SET (SCHEMA = 'id BIGINT, v STRING, w STRUCT<x: DOUBLE>')")
    twins.run(["k"])
    here, there = twins.states("n.t")
    assert [name for _, name, _, _ in here.schema] == ["id", "v", "w", "w.x"]
    assert here.rows[0] == (0, "v0", None) and here.rows[-1] == (8, "v8", (4.0,))
    assert_same_tables(here, there)


def test_every_data_file_format(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "in"
    _stamp(write_json_lines(data, "1.json", _rows(0, 60)), 1)
    twins = Twins.make(tmp_path, spark, caplog)
    twins.execute(f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'json', SCHEMA = '{SCHEMA}');")
    for fmt in ("parquet", "orc", "avro"):
        twins.execute(
            f"CREATE SINK {fmt} FROM src {SINK.format(table=fmt)} PARTITION BY (bucket(2, id)) WITH (FORMAT = '{fmt}');"
        )
    twins.run(["parquet", "orc", "avro"])
    parquet = twins["spark"].state("n.parquet")
    for fmt in ("parquet", "orc", "avro"):
        here, there = twins.states(f"n.{fmt}")
        assert set(here.files) == {f"data:{fmt}"}
        assert here.rows == parquet.rows, f"{fmt}: the rows differ from the Parquet table's"
        assert_same_tables(here, there)


@pytest.mark.java
def test_every_data_file_format_read_by_iceberg_java(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """DuckDB and DataFusion read no ORC or Avro data files: Iceberg Java (the readers harness)
    reads each format's table of both executors, and every one equals the Parquet table."""
    from tests.support.readers import java_available, read_java

    if not java_available():
        pytest.skip("the Iceberg Java readers harness is not built (../shared/tools/iceberg-readers-setup)")
    data = tmp_path / "in"
    _stamp(write_json_lines(data, "1.json", _rows(0, 60)), 1)
    twins = Twins.make(tmp_path, spark, caplog)
    twins.execute(f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'json', SCHEMA = '{SCHEMA}');")
    formats = ("parquet", "orc", "avro")
    for fmt in formats:
        twins.execute(f"CREATE SINK {fmt} FROM src {SINK.format(table=fmt)} WITH (FORMAT = '{fmt}');")
    twins.run(list(formats))
    read = {(e, f): read_java(twins[e].table(f"n.{f}").metadata_location) for e in twins for f in formats}
    assert read["spark", "parquet"]["rows"] == 60
    for key, got in read.items():
        assert (got["rows"], got["digest"]) == (60, read["spark", "parquet"]["digest"]), key


@pytest.mark.kafka
def test_kafka_json_append(spark: Any, noida: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from tests.support import kafka as K

    topic = "conformance-append"
    K.create_topic(noida.bootstrap, topic, 2)
    twins = Twins.with_kafka(tmp_path, spark, caplog, noida.bootstrap)
    twins.execute(
        f"CREATE SOURCE src FROM KAFKA CONNECTION kb (TOPIC = '{topic}', FORMAT = 'json', SCHEMA = '{SCHEMA}', "
        "MAX RECORDS PER TRIGGER = 40) INCLUDE PARTITION AS part, OFFSET AS off;"
        f"CREATE SINK k FROM src {SINK.format(table='t')} PARTITION BY (part);"
    )
    for start, n in ((0, 70), (70, 30)):
        K.produce(
            noida.bootstrap, topic, [(str(r["id"]).encode(), json.dumps(r).encode()) for r in _rows(start, n)]
        )
        twins.run(["k"])
    here, there = twins.states("n.t")
    assert sorted(r[0] for r in here.rows) == list(range(100))
    assert len({(r[-2], r[-1]) for r in here.rows}) == 100  # every record once, by its position
    assert_same_tables(here, there)
    # the checkpoints: the same batches, each ending at the same offsets of each partition
    from icesql.engine.backends.checkpoint import CheckpointLog

    logs = [CheckpointLog(twins[e].checkpoint()) for e in ("in_process", "spark")]
    assert logs[0].planned() == logs[0].committed() == logs[1].planned() == logs[1].committed()
    assert len(logs[0].planned()) >= 3  # at most 40 records a batch
    for b in logs[0].planned():
        assert logs[0].offset(b) == logs[1].offset(b), f"batch {b}"
        assert (logs[0].root / "commits" / str(b)).read_text() == (
            logs[1].root / "commits" / str(b)
        ).read_text()


def _kafka_twins(
    tmp_path: Path, spark: Any, caplog: pytest.LogCaptureFixture, noida: Any, topic: str
) -> Twins:
    from tests.support import kafka as K

    K.create_topic(noida.bootstrap, topic, 2)
    return Twins.with_kafka(tmp_path, spark, caplog, noida.bootstrap)


@pytest.mark.kafka
@pytest.mark.parametrize("deletes", ["position", "equality"])
def test_kafka_debezium_upsert(
    spark: Any, noida: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, deletes: str
) -> None:
    """A Debezium changelog from a topic of two partitions (each key's changes in one, in order)
    into an upsert sink: with the key index's position deletes, and with equality deletes."""
    from tests.support import kafka as K

    topic = f"conformance-cdc-{deletes}"
    twins = _kafka_twins(tmp_path, spark, caplog, noida, topic)
    with_deletes = "WITH (DELETE MODE = 'equality')" if deletes == "equality" else ""
    twins.execute(
        f"CREATE SOURCE cdc FROM KAFKA CONNECTION kb (TOPIC = '{topic}', FORMAT = 'debezium-json', "
        f"SCHEMA = '{CDC_SCHEMA}');"
        f"CREATE SINK k FROM cdc {SINK.format(table='up')} KEY (id) MODE UPSERT "
        f"PARTITION BY (bucket(2, id)) {with_deletes};"
    )
    for r in range(3):
        changes = sorted(_changes(r), key=lambda c: c["source"]["lsn"])
        key = [(c["after"] or c["before"])["id"] for c in changes]
        K.produce(
            noida.bootstrap,
            topic,
            [(str(k).encode(), json.dumps(c).encode()) for k, c in zip(key, changes, strict=True)],
        )
        twins.run(["k"])
        here, there = twins.states("n.up")
        assert here.rows == _replay(r + 1), f"round {r}"
        assert_same_tables(here, there)
    kind = f"added-{deletes}-delete-files"
    for x in (here, there):
        assert sum(int(a.get(kind, 0)) for a in x.added) > 0, kind


@pytest.mark.kafka
def test_kafka_upsert_envelope(
    spark: Any, noida: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """ENVELOPE UPSERT: the record key (JSON) is the row's key, a later value replaces it and a
    tombstone (a null value) deletes it."""
    from tests.support import kafka as K

    topic = "conformance-upsert-envelope"
    twins = _kafka_twins(tmp_path, spark, caplog, noida, topic)
    twins.execute(
        f"CREATE SOURCE ups FROM KAFKA CONNECTION kb (TOPIC = '{topic}', FORMAT = 'json', "
        "SCHEMA = 'name STRING, qty INT', ENVELOPE = 'upsert', KEY FORMAT = 'json', KEY SCHEMA = 'id BIGINT');"
        f"CREATE SINK k FROM ups {SINK.format(table='ups')} KEY (id) MODE UPSERT;"
    )
    state: dict[int, tuple[Any, ...]] = {}
    for r in range(3):
        records: list[tuple[bytes, bytes | None]] = []
        for i in range(r * 5, r * 5 + 30):
            key = json.dumps({"id": i % 25}).encode()
            if (i + r) % 7 == 0:
                records.append((key, None))  # a tombstone
                state.pop(i % 25, None)
            else:
                records.append((key, json.dumps({"name": f"r{r}-{i}", "qty": i}).encode()))
                state[i % 25] = (i % 25, f"r{r}-{i}", i)
        K.produce(noida.bootstrap, topic, records)
        twins.run(["k"])
        here, there = twins.states("n.ups", "id, name, qty")
        assert here.rows == sorted(state.values(), key=repr), f"round {r}"
        assert_same_tables(here, there)


@pytest.mark.kafka
def test_kafka_dead_letters(spark: Any, noida: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Kafka records that do not parse are read only by Spark's parsers: in process, the batch
    that holds them moves to Spark (as a FILES source's does); both executors' tables and
    dead-letter tables equal."""
    from tests.support import kafka as K

    topic = "conformance-dead-letters"
    twins = _kafka_twins(tmp_path, spark, caplog, noida, topic)
    twins.execute(
        f"CREATE SOURCE src FROM KAFKA CONNECTION kb (TOPIC = '{topic}', FORMAT = 'json', "
        "SCHEMA = 'id BIGINT, v STRING', ON ERROR = 'dead-letter');"
        f"CREATE SINK k FROM src {SINK.format(table='t')};"
    )
    K.produce(
        noida.bootstrap, topic, [(b"k", json.dumps({"id": i, "v": f"v{i}"}).encode()) for i in range(10)]
    )
    twins.run(["k"])  # a clean batch: in process
    bad = [
        json.dumps({"id": 10, "v": "ten"}),
        '{"id": 11, "v": "eleven"',  # malformed: the brace never closes
        json.dumps({"id": "twelve", "v": "12"}),  # a type mismatch
        json.dumps({"id": 13, "v": "thirteen"}),
    ]
    K.produce(noida.bootstrap, topic, [(b"k", v.encode()) for v in bad])
    twins.run(["k"], moves_to_spark=True)
    here, there = twins.states("n.t")
    assert sorted(r[0] for r in here.rows) == [*range(11), 13]
    assert_same_tables(without(here, "icesql.sink-version"), without(there, "icesql.sink-version"))
    columns = "sink, batch_id, source, reason, error, raw"
    here, there = twins.states("n.t_dead_letters", columns)
    assert len(here.rows) == 2
    assert_same_tables(without(here, "icesql.sink-version"), without(there, "icesql.sink-version"))


def _typed_parquet(start: int, n: int, **extra: pa.Array) -> pa.Table:
    """Rows of many Parquet types whose Spark mapping is not Arrow's own: unsigned integers, decimals
    of several precisions, timestamps with and without a time zone, a dictionary, nested types."""
    import decimal

    ids = list(range(start, start + n))
    columns: dict[str, pa.Array] = {
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([f"n{i}" if i % 7 else None for i in ids]).dictionary_encode(),
        "small": pa.array([i % 200 for i in ids], pa.uint8()),
        "big": pa.array([2**63 + i for i in ids], pa.uint64()),
        "price": pa.array([decimal.Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
        "wide": pa.array([decimal.Decimal(i) * 1000 for i in ids], pa.decimal128(24, 4)),
        "at": pa.array([1_700_000_000_000_000 + i for i in ids], pa.timestamp("us", "Europe/Paris")),
        "local": pa.array([1_700_000_000_000 + i for i in ids], pa.timestamp("ms")),
        "day": pa.array([19_000 + i for i in ids], pa.date32()),
        "tags": pa.array([[f"t{i % 3}"] * (i % 3) for i in ids], pa.list_(pa.string())),
        "point": pa.array(
            [{"x": i / 2, "y": i % 5} for i in ids], pa.struct([("x", pa.float64()), ("y", pa.int16())])
        ),
        "nothing": pa.nulls(n),
        **extra,
    }
    return pa.table(columns)


def test_parquet_without_a_schema(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 54: a Parquet source without a SCHEMA runs in process (its schema read from the
    footers, ``files.footers``), and a later file's new column reaches the table by schema
    evolution on both executors alike."""
    data = tmp_path / "in"
    data.mkdir()
    for k, start in ((1, 0), (2, 40)):
        pq.write_table(_typed_parquet(start, 40), data / f"{k}.parquet", row_group_size=16)
        _stamp(data / f"{k}.parquet", k)
    twins = Twins.make(tmp_path, spark, caplog)
    _append(twins, f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'parquet');", "PARTITION BY (day(at))")
    here = twins["in_process"].state("n.t")
    assert [name for _, name, _, _ in here.schema if "." not in name] == [
        "id",
        "name",
        "small",
        "big",
        "price",
        "wide",
        "at",
        "local",
        "day",
        "tags",
        "point",
    ]  # "nothing" holds no type yet: left out
    types = {name: t for _, name, t, _ in here.schema}
    assert (types["small"], types["big"], types["wide"], types["at"], types["local"]) == (
        "int",
        "decimal(20, 0)",
        "decimal(24, 4)",
        "timestamptz",
        "timestamp",
    )

    later = _typed_parquet(80, 10, added=pa.array(range(10), pa.int32()))
    pq.write_table(later, data / "3.parquet")
    _stamp(data / "3.parquet", 3)
    twins.run(["k"])
    here, there = twins.states("n.t")
    assert here.schema[-1][1] == "added" and len(here.rows) == 90
    assert_same_tables(here, there)


def test_parquet_without_a_schema_int96(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """INT96 timestamps (what Spark and Hive once wrote) are Spark's timestamp with a time zone,
    read in process too."""
    data = tmp_path / "in"
    data.mkdir()
    table = pa.table(
        {
            "id": pa.array(range(20), pa.int64()),
            "at": pa.array([1_700_000_000_000_000 + i for i in range(20)], pa.timestamp("us")),
        }
    )
    pq.write_table(table, data / "1.parquet", use_deprecated_int96_timestamps=True)
    _stamp(data / "1.parquet", 1)
    twins = Twins.make(tmp_path, spark, caplog)
    _append(twins, f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'parquet');")
    assert [t for _, name, t, _ in twins["in_process"].state("n.t").schema] == ["long", "timestamptz"]


def test_orc_without_a_schema(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 54: an ORC source without a SCHEMA runs in process too (``files.footers.orc_footer``),
    over files pyarrow and Spark wrote (Spark's with a ``timestamp_ntz`` column, which ORC stores
    as a long), and a later file's new column evolves the table on both executors alike."""
    import decimal

    import pyarrow.orc as po

    data = tmp_path / "in"
    data.mkdir()
    for k, start in ((1, 0), (2, 30)):
        ids = list(range(start, start + 30))
        table = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "name": [f"n{i}" if i % 7 else None for i in ids],
                "small": pa.array([i % 100 for i in ids], pa.int8()),
                "price": pa.array([decimal.Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
                "at": pa.array([1_700_000_000_000_000 + i for i in ids], pa.timestamp("us")),
                "day": pa.array([19_000 + i for i in ids], pa.date32()),
                "tags": [[f"t{i % 3}"] * (i % 3) for i in ids],
                "point": [{"x": i / 2, "y": i % 5} for i in ids],
            }
        )
        po.write_table(table, data / f"{k}.orc", compression="zstd")
        _stamp(data / f"{k}.orc", k)
    twins = Twins.make(tmp_path, spark, caplog)
    _append(twins, f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'orc');")
    here = twins["in_process"].state("n.t")
    # Spark's types of ORC's (tinyint is Iceberg's int; ORC's timestamp is an instant to Spark)
    assert [(name, t) for _, name, t, _ in here.schema if "." not in name] == [
        ("id", "long"),
        ("name", "string"),
        ("small", "int"),
        ("price", "decimal(10, 2)"),
        ("at", "timestamptz"),
        ("day", "date"),
        ("tags", "list<string>"),
        ("point", "struct<10: x: optional double, 11: y: optional long>"),
    ]

    spark.sql(
        "SELECT CAST(id AS BIGINT) AS id, 'spark' AS name, CAST(1 AS TINYINT) AS small, "
        "CAST(1.25 AS DECIMAL(10,2)) AS price, TIMESTAMP'2026-01-02 03:04:05' AS at, DATE'2026-01-02' AS day, "
        "array('s') AS tags, named_struct('x', 0.5D, 'y', CAST(2 AS BIGINT)) AS point, "
        "TIMESTAMP_NTZ'2026-01-02 03:04:05' AS local FROM range(60, 70)"
    ).coalesce(1).write.orc(str(tmp_path / "spark-orc"))
    (written,) = (tmp_path / "spark-orc").glob("part-*.orc")
    written.rename(data / "3.orc")
    _stamp(data / "3.orc", 3)
    twins.run(["k"])
    here, there = twins.states("n.t")
    assert here.schema[-1][1:3] == ("local", "timestamp") and len(here.rows) == 70
    assert_same_tables(here, there)
