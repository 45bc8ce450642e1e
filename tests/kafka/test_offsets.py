"""The pure parts of the Kafka source: offsets' JSON form and summary, how a trigger's budget is
shared among partitions, how a batch is split into ranges (no broker, no Spark)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icesql.engine.sources.kafka.offsets import (
    SUMMARY_KEY,
    dump,
    from_summary,
    merged,
    parse,
    records_between,
    summary_value,
)
from icesql.engine.sources.kafka.progress import batch_offsets
from icesql.engine.sources.kafka.source import plan_ranges, share

offsets = st.dictionaries(st.integers(0, 20), st.integers(0, 10_000), max_size=8)


@given(offsets)
def test_json_form_round_trips(o: dict[int, int]) -> None:
    assert parse(json.loads(json.dumps(dump(o)))) == o


def test_summary_is_per_topic() -> None:
    summary = {SUMMARY_KEY: summary_value("orders", {1: 5, 0: 3})}
    assert from_summary(summary, "orders") == {0: 3, 1: 5}
    assert from_summary(summary, "other") is None  # a source re-pointed at another topic starts anew
    assert from_summary({}, "orders") is None


def test_merged_takes_the_furthest_per_partition() -> None:
    assert merged([{0: 5, 1: 2}, None, {1: 7, 2: 1}, {0: 4}]) == {0: 5, 1: 7, 2: 1}


@given(offsets, st.data(), st.integers(1, 5_000))
def test_share_never_exceeds_the_budget_and_always_moves(start: dict[int, int], data: st.DataObject, budget: int) -> None:
    end = {p: o + data.draw(st.integers(0, 3_000)) for p, o in start.items()}
    out = share(start, end, budget)
    assert all(start[p] <= out[p] <= end[p] for p in end)
    lag = records_between(start, end)
    moved = records_between(start, out)
    assert moved <= budget
    if lag <= budget:
        assert out == end  # all of it fits
    elif lag:
        assert moved > 0


def test_plan_ranges_cover_the_batch_exactly_once() -> None:
    start, end = {0: 10, 1: 0, 2: 500}, {0: 200_010, 1: 5, 2: 500, 3: 7}
    ranges = plan_ranges("t", start, end, parallelism=4, piece_records=1_000_000)
    covered: dict[int, list[tuple[int, int]]] = {}
    for r in ranges:
        for p, s, e in r.ranges:
            covered.setdefault(p, []).append((s, e))
    for p, spans in covered.items():
        spans.sort()
        assert spans[0][0] == start.get(p, 0) and spans[-1][1] == end[p]
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert 2 not in covered  # nothing new there
    assert len(covered[0]) == 4  # a long partition is split so every core reads


def test_batch_offsets_read_sparks_offset_log(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "3").write_text('v1\n{"batchWatermarkMs":0}\n{"0":12,"1":7}\n')
    assert batch_offsets(str(tmp_path), 3) == {0: 12, 1: 7}
    assert batch_offsets(str(tmp_path), 4) is None


def test_kafka_failures_are_told_apart() -> None:
    """What a task or the planner raises reaches the driver as Spark's text of a Python error:
    the marked Kafka failures become one line, retried when the brokers did not answer, final
    when they refused the credentials."""
    from icesql.engine.connections.failures import rule_failure
    from icesql.engine.sources.kafka.topic import REFUSED, UNAVAILABLE

    down = RuntimeError(f"Job aborted ... PythonException: RuntimeError: {UNAVAILABLE}topic 'o' partition 1: Local: Broker transport failure|END\n  at ...")
    err = rule_failure(down, label="sink s", action="write or commit")
    assert err is not None and getattr(err, "transient", False)
    assert "the Kafka brokers did not answer (topic 'o' partition 1: Local: Broker transport failure)" in err.message
    refused = RuntimeError(f"{REFUSED}topic 'o' metadata: SASL authentication error: Authentication failed|END")
    err = rule_failure(refused, label="sink s", action="write or commit")
    assert err is not None and not getattr(err, "transient", False)
    assert "refused" in err.message and err.hint and "SASL PASSWORD" in err.hint


def test_plan_ranges_pack_a_small_trigger_into_few_tasks() -> None:
    """A trigger of a few thousand records over six partitions is read by as few tasks as the
    cores need (one Python worker and broker round trip per task is most of a small trigger's
    time), every offset once."""
    start = {p: 100 * p for p in range(6)}
    end = {p: 100 * p + 5_000 for p in range(6)}
    ranges = plan_ranges("t", start, end, parallelism=2, piece_records=1_000_000)
    assert len(ranges) <= 2
    got = sorted(r for task in ranges for r in task.ranges)
    assert got == [(p, 100 * p, 100 * p + 5_000) for p in range(6)]
    big = plan_ranges("t", {0: 0, 1: 0}, {0: 1_000_000, 1: 10}, parallelism=2, piece_records=300_000)
    assert all(sum(e - s for _, s, e in task.ranges) <= 300_000 for task in big)
    assert sum(e - s for task in big for _, s, e in task.ranges) == 1_000_010


def test_a_checkpoint_root_on_object_storage_is_refused_for_kafka(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed and Spark's offset log are read as local files: a checkpoint root icesql cannot
    read as one is refused before anything starts, with a hint (a stand-in runner: what is
    tested is the check)."""
    from types import SimpleNamespace

    from icesql.engine.sources.kafka.progress import KafkaProgress, local_path
    from icesql.errors import ExecutionError

    monkeypatch.setenv("ICESQL_CHECKPOINT_ROOT", "s3://bucket/checkpoints")
    runner = SimpleNamespace(name="s", local_checkpoint=False)
    with pytest.raises(ExecutionError) as e:
        KafkaProgress(runner).binding()
    assert "s3://bucket/checkpoints" in e.value.message and e.value.hint and "shared" in e.value.hint
    assert local_path("file:///ck/a%20b") == "/ck/a b" and local_path("/ck/x") == "/ck/x"
