"""A sink on Spark plans its batches in icesql's process (``backends.spark.planned``): Spark gets
each batch's pieces as rows of its own plan, one partition per group of pieces, and runs the
sink's tasks on them; Spark's Structured Streaming query runs the source only where the loop
cannot (``ICESQL_PLANNED_BATCHES=0`` here). The two write the same table from the same changes."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.test_sinks import CDC_SCHEMA, SINK, _changes, _replay, _stamp
from tests.support.conformance import Pipeline, assert_same_tables
from tests.support.pipeline_helpers import write_json_lines

pytestmark = pytest.mark.spark


def test_pieces_frame_keeps_each_group_in_one_partition_and_every_value(spark: Any) -> None:
    from icesql.engine.backends.spark.planned import pieces_frame
    from icesql.engine.sources.files.source import PIECE_SCHEMA

    groups = [
        [(1, "/in/ä b,\"c\".json", 10, 5, 0, 10, None)],
        [(2, "s3://b/k", 2**62, 5, 0, 2**62, [0, 3])],
        [(3, "/c", 1, 1, 0, 1, None), (4, "/d", 1, 1, 0, 1, [])],
    ]
    df = pieces_frame(spark, PIECE_SCHEMA, groups)
    got = df.rdd.glom().map(lambda rows: [tuple(r) for r in rows]).collect()
    assert got == [[tuple(r) for r in g] for g in groups]
    assert df.schema == PIECE_SCHEMA
    empty = pieces_frame(spark, PIECE_SCHEMA, [])
    assert empty.rdd.getNumPartitions() == 1 and empty.count() == 0


def test_a_sink_on_spark_writes_what_sparks_streaming_query_writes(
    spark: Any, tmp_path: Path, caplog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three rounds of Debezium changes into an upsert sink, each round one ``run --once``: the
    batches planned here and run on Spark, and Spark's own streaming query of the source, leave
    the same rows, files and snapshots (read by DuckDB and DataFusion)."""
    data = tmp_path / "cdc"
    pipes = {}
    for planned in ("1", "0"):
        root = tmp_path / f"planned-{planned}"
        p = Pipeline("spark", root / "home", root / "wh", spark, caplog)
        p.execute(
            f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{p.warehouse}');"
            f"CREATE SOURCE cdc FROM FILES '{data}' (FORMAT = 'debezium-json', SCHEMA = '{CDC_SCHEMA}');"
            f"CREATE SINK k FROM cdc {SINK.format(table='up')} KEY (id) MODE UPSERT;"
        )
        pipes[planned] = p
    for round_no in range(3):
        _stamp(write_json_lines(data, f"{round_no}.json", _changes(round_no)), round_no)
        for planned, p in pipes.items():
            monkeypatch.setenv("ICESQL_PLANNED_BATCHES", planned)
            p.run(["k"])
            assert getattr(p.last_query, "executor", None) == ("spark" if planned == "1" else None)
        here, there = pipes["1"].state("n.up"), pipes["0"].state("n.up")
        assert here.rows == _replay(round_no + 1), f"round {round_no}: wrong rows"
        assert_same_tables(here, there)


def test_stop_cancels_the_batchs_spark_jobs(spark: Any) -> None:
    """``LocalQuery.stop`` cancels the Spark jobs of the batch running (as Spark's ``stop``
    interrupts its batch), and the batch's failure reads as that interruption."""
    from pyspark.sql.types import LongType, StructField, StructType

    from icesql.engine.backends.spark.planned import PlannedStream

    schema = StructType([StructField("n", LongType())])
    stream = PlannedStream(spark, lambda: None, lambda: None, schema, lambda e: None)

    class Reader:
        def read(self, partition: Any) -> Any:
            yield (partition,)

    failed: list[BaseException] = []

    def slow(batches: Any) -> Any:
        import time as t

        t.sleep(120)
        yield from batches

    def batch() -> None:
        df = stream.batch(Reader(), [1, 2], "q-cancel")
        try:
            df.mapInArrow(slow, schema).collect()
        except BaseException as e:  # noqa: BLE001 - the test looks at it
            failed.append(e)

    t = threading.Thread(target=batch)
    t.start()
    time.sleep(3)  # the job's tasks are sleeping
    started = time.monotonic()
    stream.cancel("q-cancel")
    t.join(60)
    assert not t.is_alive() and time.monotonic() - started < 30, "the batch's jobs were not cancelled"
    assert failed and stream.interrupted(failed[0]), failed


def test_a_running_sink_on_spark_starts_its_batches_once_the_trigger_interval(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ICESQL_TRIGGER_INTERVAL`` is the interval of a running sink on Spark too: a file dropped
    as soon as the first batch committed waits for the next interval (6 s here, the default is
    1 s) before its batch starts (the batches' start times from ``ICESQL_TEST_TIMELINE``)."""
    import icesql
    from icesql.engine.backends.local.query import LocalQuery
    from tests.support.pipeline_helpers import wait_for

    timeline = tmp_path / "timeline"
    monkeypatch.setenv("ICESQL_TRIGGER_INTERVAL", "6")
    monkeypatch.setenv("ICESQL_TEST_TIMELINE", str(timeline))
    data, wh = tmp_path / "data", tmp_path / "wh"
    data.mkdir()
    rows = [{"id": i, "v": f"v{i}"} for i in range(5)]
    with icesql.Session(home=tmp_path / "home", spark=spark) as s:
        s.execute(
            f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');"
            f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING');"
            "CREATE SINK k FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'k');"
        )
        s.start(["k"])
        runner = s.engine.runner("k")
        assert isinstance(runner.query, LocalQuery) and runner.query.executor == "spark"
        assert runner.query.interval == 6.0
        write_json_lines(data, "a.json", rows)
        wait_for(lambda: runner.totals["commits"] >= 1, 120, "the first batch")
        write_json_lines(data, "b.json", rows)
        wait_for(lambda: runner.totals["commits"] >= 2, 120, "the second batch")
        s.stop()
    started = sorted(
        float(at)
        for at, step in (line.split(" ", 1) for line in timeline.read_text().splitlines())
        if step.startswith("batch ") and step.endswith(" started")
    )
    assert len(started) == 2, started  # a batch per file, none while the source was idle
    first, second = started
    # (each start is marked once the batch is planned: the marks move by a planning time)
    assert second - first >= 5.5, f"two batches {second - first:.1f} s apart: less than the 6 s interval"
