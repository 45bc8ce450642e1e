"""Many topics, one source (issue 53 item 1), on both executors: a TOPIC PATTERN or TOPICS source
with one declared SCHEMA (sharded topics) into one table, compared whole between a run in this
process and one on Spark (``support.conformance``), checkpoints included.

What is shown: every record of every matching topic lands once and keeps its topic (the ``topic``
column a source of many topics has), a topic created later is read from its start at the next
run, a topic the pattern does not match (or a Kafka internal one) is never read, and the offsets
are kept per topic: Spark's Kafka source's form in the checkpoint (``{"topic": {"0": n}}``) and in
the snapshot summaries (``{"topics": {...}}``), the same batches and offsets on both executors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.backends.checkpoint import CheckpointLog
from tests.support.conformance import Twins, assert_same_tables

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

SINK = "INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = '{table}')"


def _twins(tmp_path: Path, spark: Any, caplog: pytest.LogCaptureFixture, noida: Any) -> Twins:
    return Twins.with_kafka(tmp_path, spark, caplog, noida.bootstrap)


def _produce(noida: Any, topic: str, ids: range) -> None:
    from tests.support import kafka as K

    K.produce(
        noida.bootstrap,
        topic,
        [(str(i).encode(), json.dumps({"id": i, "v": f"{topic}-{i}"}).encode()) for i in ids],
    )


def _same_checkpoints(twins: Twins) -> list[dict[str, Any]]:
    """The two executors' checkpoints hold the same batches with the same offsets (returned)."""
    logs = [CheckpointLog(twins[e].checkpoint()) for e in ("in_process", "spark")]
    assert logs[0].planned() == logs[0].committed() == logs[1].planned() == logs[1].committed()
    offsets = []
    for b in logs[0].planned():
        assert logs[0].offset(b) == logs[1].offset(b), f"batch {b}"
        offsets.append(logs[0].offset(b))
    return offsets


def test_topic_pattern_sharded_topics_into_one_table(
    spark: Any, noida: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.support import kafka as K

    for topic, parts in (("shard.eu", 2), ("shard.us", 1), ("shardx", 1), ("other.eu", 1)):
        K.create_topic(noida.bootstrap, topic, parts)
    _produce(noida, "shard.eu", range(0, 60))
    _produce(noida, "shard.us", range(1000, 1025))
    _produce(noida, "shardx", range(5000, 5010))  # no dot: the pattern does not match it
    _produce(noida, "other.eu", range(9000, 9010))
    twins = _twins(tmp_path, spark, caplog, noida)
    twins.execute(
        r"CREATE SOURCE src FROM KAFKA CONNECTION kb (TOPIC PATTERN = 'shard\..*', FORMAT = 'json', "
        "SCHEMA = 'id BIGINT, v STRING', MAX RECORDS PER TRIGGER = 40) INCLUDE PARTITION AS part, OFFSET AS off;"
        f"CREATE SINK k FROM src {SINK.format(table='t')} PARTITION BY (topic);"
    )
    twins.run(["k"])
    here, there = twins.states("n.t", "id, v, topic, part, off")
    assert sorted(r[0] for r in here.rows) == [*range(0, 60), *range(1000, 1025)]
    assert all(r[1] == f"{r[2]}-{r[0]}" for r in here.rows)  # each row keeps its own topic
    assert_same_tables(here, there)

    # more records, and a topic created since: read from its start at the next run
    K.create_topic(noida.bootstrap, "shard.ap", 2)
    _produce(noida, "shard.ap", range(2000, 2030))
    _produce(noida, "shard.eu", range(60, 70))
    twins.run(["k"])
    here, there = twins.states("n.t", "id, v, topic, part, off")
    assert sorted(r[0] for r in here.rows) == [*range(0, 70), *range(1000, 1025), *range(2000, 2030)]
    assert len({(r[2], r[3], r[4]) for r in here.rows}) == len(here.rows)  # every record once
    assert_same_tables(here, there)
    offsets = _same_checkpoints(twins)
    assert len(offsets) >= 4  # at most 40 records a batch
    assert set(offsets[-1]) == {"shard.ap", "shard.eu", "shard.us"}  # Spark's form: {topic: {partition: n}}
    assert offsets[-1]["shard.ap"] == {str(p): o for p, o in K.log_end(noida.bootstrap, "shard.ap").items()}
    summary = json.loads(here.summaries[-1]["icesql.kafka-offsets"])
    assert summary == {"topics": offsets[-1]}


def test_topics_list_upsert(spark: Any, noida: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """TOPICS = (...) with ENVELOPE UPSERT: each topic's keys kept up to date in one upsert table
    (a tombstone deletes); a listed topic with no record yet is read once it has some."""
    from tests.support import kafka as K

    for topic, parts in (("ups.a", 2), ("ups.b", 1), ("ups.c", 1)):
        K.create_topic(noida.bootstrap, topic, parts)
    twins = _twins(tmp_path, spark, caplog, noida)
    twins.execute(
        "CREATE SOURCE ups FROM KAFKA CONNECTION kb (TOPICS = ('ups.a', 'ups.b', 'ups.c'), FORMAT = 'json', "
        "SCHEMA = 'qty INT', ENVELOPE = 'upsert', KEY FORMAT = 'json', KEY SCHEMA = 'id STRING');"
        f"CREATE SINK k FROM ups {SINK.format(table='ups')} KEY (id) MODE UPSERT;"
    )
    state: dict[str, tuple[Any, ...]] = {}
    for r in range(3):
        for topic in ("ups.a", "ups.b", "ups.c")[: 2 + (r == 2)]:
            records: list[tuple[bytes, bytes | None]] = []
            for i in range(r * 4, r * 4 + 12):
                key = f"{topic}-{i % 9}"
                if (i + r) % 5 == 0:
                    records.append((json.dumps({"id": key}).encode(), None))
                    state.pop(key, None)
                else:
                    records.append((json.dumps({"id": key}).encode(), json.dumps({"qty": i}).encode()))
                    state[key] = (key, i, topic)
            K.produce(noida.bootstrap, topic, records)
        twins.run(["k"])
        here, there = twins.states("n.ups", "id, qty, topic")
        assert here.rows == sorted(state.values(), key=repr), f"round {r}"
        assert_same_tables(here, there)
    _same_checkpoints(twins)
