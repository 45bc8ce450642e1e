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

offsets = st.dictionaries(
    st.tuples(st.just("t"), st.integers(0, 20)), st.integers(0, 10_000), max_size=8
)
many = st.dictionaries(
    st.tuples(st.sampled_from(["a", "b.c", "d-e_f"]), st.integers(0, 20)), st.integers(0, 10_000), max_size=8
)


@given(offsets)
def test_json_form_round_trips(o: dict[tuple[str, int], int]) -> None:
    assert parse(json.loads(json.dumps(dump(o, "t"))), "t") == o


@given(many)
def test_json_form_of_many_topics_round_trips(o: dict[tuple[str, int], int]) -> None:
    assert parse(json.loads(json.dumps(dump(o, None))), None) == o


def test_the_json_forms() -> None:
    """One topic: the form its checkpoints always had; many: Spark's Kafka source's own form.
    A one-topic form read for a source of many topics (whose topic it cannot know) is refused."""
    assert dump({("t", 1): 7, ("t", 0): 12}, "t") == {"0": 12, "1": 7}
    assert dump({("b", 0): 3, ("a", 1): 7, ("a", 0): 12}, None) == {"a": {"0": 12, "1": 7}, "b": {"0": 3}}
    assert parse({"a": {"0": 12}, "b": {"1": 3}}, "ignored") == {("a", 0): 12, ("b", 1): 3}
    with pytest.raises(ValueError):
        parse({"0": 12}, None)


def test_summary_is_per_topic() -> None:
    summary = {SUMMARY_KEY: summary_value({("orders", 1): 5, ("orders", 0): 3}, "orders")}
    assert json.loads(summary[SUMMARY_KEY]) == {"topic": "orders", "offsets": {"0": 3, "1": 5}}  # as ever
    assert from_summary(summary, "orders".__eq__) == {("orders", 0): 3, ("orders", 1): 5}
    assert from_summary(summary, "other".__eq__) is None  # a source re-pointed at another topic starts anew
    assert from_summary({}, "orders".__eq__) is None
    # many topics: each topic's own, and only those the source reads
    summary = {SUMMARY_KEY: summary_value({("a", 0): 3, ("b", 0): 9, ("c", 2): 1}, None)}
    assert json.loads(summary[SUMMARY_KEY]) == {"topics": {"a": {"0": 3}, "b": {"0": 9}, "c": {"2": 1}}}
    assert from_summary(summary, lambda t: t in ("a", "c", "z")) == {("a", 0): 3, ("c", 2): 1}
    assert from_summary(summary, "z".__eq__) is None
    # a pattern source over a table a one-topic source wrote: that topic's offsets, if it reads it
    old = {SUMMARY_KEY: summary_value({("orders", 0): 3}, "orders")}
    assert from_summary(old, lambda t: t.startswith("ord")) == {("orders", 0): 3}


def test_merged_takes_the_furthest_per_partition() -> None:
    a, b, c = ("t", 0), ("t", 1), ("u", 0)
    assert merged([{a: 5, b: 2}, None, {b: 7, c: 1}, {a: 4}]) == {a: 5, b: 7, c: 1}


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
    start = {("t", 0): 10, ("t", 1): 0, ("t", 2): 500, ("u", 0): 4}
    end = {("t", 0): 200_010, ("t", 1): 5, ("t", 2): 500, ("t", 3): 7, ("u", 0): 9, ("v", 0): 3}
    ranges = plan_ranges(start, end, parallelism=4, piece_records=1_000_000)
    covered: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for r in ranges:
        for t, p, s, e in r.ranges:
            covered.setdefault((t, p), []).append((s, e))
    for k, spans in covered.items():
        spans.sort()
        assert spans[0][0] == start.get(k, 0) and spans[-1][1] == end[k]
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert ("t", 2) not in covered  # nothing new there
    assert covered[("v", 0)] == [(0, 3)]  # a new topic: from its start
    assert len(covered[("t", 0)]) == 4  # a long partition is split so every core reads


def test_batch_offsets_read_sparks_offset_log(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "3").write_text('v1\n{"batchWatermarkMs":0}\n{"0":12,"1":7}\n')
    assert batch_offsets(str(tmp_path), 3, "t") == {("t", 0): 12, ("t", 1): 7}
    assert batch_offsets(str(tmp_path), 4, "t") is None
    (tmp_path / "offsets" / "5").write_text('v1\n{"batchWatermarkMs":0}\n{"a":{"0":12},"b":{"1":7}}\n')
    assert batch_offsets(str(tmp_path), 5, None) == {("a", 0): 12, ("b", 1): 7}


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
    start = {(f"t{p % 3}", p): 100 * p for p in range(6)}  # six partitions of three topics
    end = {(f"t{p % 3}", p): 100 * p + 5_000 for p in range(6)}
    ranges = plan_ranges(start, end, parallelism=2, piece_records=1_000_000)
    assert len(ranges) <= 2
    got = sorted(r for task in ranges for r in task.ranges)
    assert got == sorted((f"t{p % 3}", p, 100 * p, 100 * p + 5_000) for p in range(6))
    big = plan_ranges(
        {("t", 0): 0, ("t", 1): 0}, {("t", 0): 1_000_000, ("t", 1): 10}, parallelism=2, piece_records=300_000
    )
    assert all(sum(e - s for _, _, s, e in task.ranges) <= 300_000 for task in big)
    assert sum(e - s for task in big for _, _, s, e in task.ranges) == 1_000_010


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
