"""A KAFKA sink SIGKILLed anywhere (writing, staged, committed, inside the catalog commit before
and after the pointer swap), then restarted: the table holds every record of the topic exactly
once. The child is ``tests.support.crash_runner --kafka`` (local Spark, a local catalog); the
broker keeps running, as a broker does when a consumer dies: noida-db in the default run, and
tansu (memory storage; its ListOffsets under-reports the log end) with ``-m slow``."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.support import kafka as K
from tests.support.crash import run_child, table_ids
from tests.support.require import missing

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(1500)]

TOPIC = "crashy"
N = 3000


@pytest.fixture(
    params=["noida", pytest.param("tansu", marks=pytest.mark.slow)],  # tansu: -m slow (CI's time)
)
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    reason = K.missing_reason(request.param)
    if reason:
        missing(reason)
    with K.broker(request.param, tmp_path / "broker") as b:
        yield b


def _records(start: int, end: int) -> list[tuple[bytes, bytes]]:
    return [
        (str(i).encode(), json.dumps({"id": i, "ts": f"2024-01-0{1 + i % 3}T10:00:00Z", "v": f"r{i}"}).encode())
        for i in range(start, end)
    ]


# a run --once takes one of two paths: Spark's streaming query, or the same query in icesql's own
# process without Spark (engine.local_query; the default for this append of JSON values)
# (both in the default run: each kill point on each path)
PATHS = {"spark": {"ICESQL_LOCAL_RUN": "0"}, "local": {"ICESQL_LOCAL_RUN": "1"}}


# one SIGKILL at each point of a batch: writing, staged, inside the catalog commit, after it
KILLS = [
    {"ICESQL_TEST_KILL_AT": "write:1"},
    {"ICESQL_TEST_KILL_AT": "staged:2"},
    {"ICESQL_TEST_KILL_COMMIT": "before:1"},
    {"ICESQL_TEST_KILL_COMMIT": "after:1"},
    {"ICESQL_TEST_KILL_AT": "committed"},
]


@pytest.mark.parametrize("path", sorted(PATHS))
def test_sigkill_anywhere_exactly_once(tmp_path: Path, broker: Any, path: str) -> None:
    env_path = PATHS[path]
    K.create_topic(broker.bootstrap, TOPIC, 3)
    K.produce(broker.bootstrap, TOPIC, _records(0, N), linger_ms=20)
    args = ("--kafka", f"{broker.bootstrap}:{TOPIC}", "--records-per-trigger", "700")
    kills = KILLS
    produced = N
    for env in kills:
        rc, log = run_child(tmp_path, {**env_path, **env}, extra_args=args)
        # killed by the kill point named (the only SIGKILL there is), not failed some other way
        assert rc == -signal.SIGKILL, f"expected a kill for {env}, got rc={rc}\n{log[-3000:]}"
        ids = table_ids(tmp_path)
        assert len(ids) == len(set(ids)), f"duplicates after {env}"
        # new records keep arriving between the crashes
        K.produce(broker.bootstrap, TOPIC, _records(produced, produced + 200), linger_ms=20)
        produced += 200
    rc, log = run_child(tmp_path, env_path, extra_args=args)
    assert rc == 0, log[-3000:]
    ids = table_ids(tmp_path)
    assert sorted(ids) == list(range(produced))
    runs = (tmp_path / "child.log").read_text().split("==== run ")[1:]
    assert runs and all(("runs in this process" in r) == (path == "local") for r in runs)


def _table_topics(tmp_path: Path) -> dict[int, str]:
    from tests.support.pipeline_helpers import load_table

    table = load_table(tmp_path / "home", "ns.events", warehouse=tmp_path / "warehouse")
    rows = table.scan(selected_fields=("id", "topic")).to_arrow().to_pylist()
    return {int(r["id"]): r["topic"] for r in rows}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_sigkill_anywhere_exactly_once_over_many_topics(tmp_path: Path, broker: Any, path: str) -> None:
    """A TOPIC PATTERN source of three topics (and a fourth created between two kills, read from
    its start): SIGKILLed at each kill point while records keep arriving in every topic, then run
    to the end, the table holds every record of every matching topic once - and none of a topic
    the pattern does not match. Each topic's ids are a range of their own."""
    base = {"crashy.a": 0, "crashy.b": 100_000, "crashy.c": 200_000, "crashy.late": 300_000, "other": 900_000}
    made = {t: 0 for t in base}

    def produce(topic: str, n: int) -> None:
        K.produce(broker.bootstrap, topic, _records(base[topic] + made[topic], base[topic] + made[topic] + n))
        made[topic] += n

    for topic, parts in (("crashy.a", 3), ("crashy.b", 1), ("crashy.c", 2), ("other", 1)):
        K.create_topic(broker.bootstrap, topic, parts)
        produce(topic, {"crashy.a": 1500, "crashy.b": 600, "crashy.c": 900, "other": 50}[topic])
    args = (
        "--kafka", f"{broker.bootstrap}:", "--topic-pattern", r"crashy\..*", "--records-per-trigger", "700",
    )  # fmt: skip
    kills = KILLS
    for n, env in enumerate(kills):
        rc, log = run_child(tmp_path, {**PATHS[path], **env}, extra_args=args)
        assert rc == -signal.SIGKILL, f"expected a kill for {env}, got rc={rc}\n{log[-3000:]}"
        ids = table_ids(tmp_path)
        assert len(ids) == len(set(ids)), f"duplicates after {env}"
        for topic in ("crashy.a", "crashy.b", "other"):
            produce(topic, 150)
        if n == 1:  # a new topic the pattern matches, between two kills
            K.create_topic(broker.bootstrap, "crashy.late", 2)
        if n >= 1:
            produce("crashy.late", 120)
    rc, log = run_child(tmp_path, PATHS[path], extra_args=args)
    assert rc == 0, log[-3000:]
    ids = table_ids(tmp_path)
    assert len(ids) == len(set(ids)), "duplicates"
    expected = {t: set(range(base[t], base[t] + made[t])) for t in base if t != "other"}
    assert sorted(ids) == sorted(i for s in expected.values() for i in s)
    topics = _table_topics(tmp_path)
    for topic, want in expected.items():
        assert {i for i, t in topics.items() if t == topic} == want, topic
    runs = (tmp_path / "child.log").read_text().split("==== run ")[1:]
    assert runs and all(("runs in this process" in r) == (path == "local") for r in runs)
    # the checkpoint keeps the offsets per topic, in Spark's Kafka source's form
    from icesql.engine.backends.checkpoint import CheckpointLog

    (checkpoint,) = [p for p in (tmp_path / "home" / "sinks").glob("*/checkpoint*") if p.is_dir()]
    last = CheckpointLog(checkpoint)
    offset = last.offset(last.planned()[-1])
    assert offset is not None and set(offset) == {"crashy.a", "crashy.b", "crashy.c", "crashy.late"}
    assert all(isinstance(v, dict) for v in offset.values())
