"""A Kafka source's offsets: ``{(topic, partition): next offset to read}``, as Spark's checkpoint,
the snapshot summary and the seed of a new checkpoint keep them.

JSON forms (keys are strings in JSON; topics and partitions sorted):

* a source of one topic (TOPIC): ``{"0": 120, "1": 98}``, the form its checkpoints have always
  had - so a sink's checkpoint, staged batches and summaries stay as they were;
* a source of many topics (TOPICS, TOPIC PATTERN): Spark's Kafka source's own form,
  ``{"orders": {"0": 120, "1": 98}, "returns": {"0": 7}}``.

``parse`` reads both (the one-topic form as the source's topic's). The offsets of a batch are its
*end*: every record below them, in every topic-partition listed, is in that batch or an earlier
one. A topic-partition absent from a dict was not known when it was written (a partition or a
topic added later): it is read from its start. A topic deleted while the sink runs leaves the
dicts (``source.KafkaStreamReader``): created again, it is a new topic.

The snapshot summary of every commit holds the end offsets of the newest batch it covers
(``SUMMARY_KEY``: ``{"topic": t, "offsets": {...}}`` for one topic, ``{"topics": {t: {...}}}``
for many), so a sink whose checkpoint (or whole icesql home) was lost resumes from the table: it
neither reads a committed record again nor skips an uncommitted one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

PartitionKey = tuple[str, int]
Offsets = dict[PartitionKey, int]

SUMMARY_KEY = "icesql.kafka-offsets"  # {"topic": t, "offsets": {"0": n}} | {"topics": {t: {"0": n}}}


def parse(d: Mapping[str, Any] | None, topic: str | None) -> Offsets:
    """Offsets from either JSON form; ``topic``: the topic of a one-topic source, whose form has
    no topic (None: a source of many topics, whose offsets always name theirs)."""
    out: Offsets = {}
    for k, v in (d or {}).items():
        if isinstance(v, Mapping):
            out.update({(k, int(p)): int(o) for p, o in v.items()})
        elif topic is None:
            raise ValueError(f"offsets without a topic ({k!r}: {v!r}) for a source of many topics")
        else:
            out[(topic, int(k))] = int(v)
    return out


def dump(offsets: Mapping[PartitionKey, int], topic: str | None) -> dict[str, Any]:
    """The JSON form of a one-topic source (``topic``) or of a source of many (None)."""
    if topic is not None:
        return {str(p): int(o) for (_, p), o in sorted(offsets.items())}
    out: dict[str, dict[str, int]] = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    return out


def merged(dicts: Iterable[Mapping[PartitionKey, int] | None]) -> Offsets:
    """Per topic-partition, the furthest of ``dicts`` (offsets only move forward)."""
    out: Offsets = {}
    for d in dicts:
        for k, o in (d or {}).items():
            out[k] = max(o, out.get(k, o))
    return out


def summary_value(offsets: Mapping[PartitionKey, int], topic: str | None) -> str:
    if topic is not None:
        return json.dumps({"topic": topic, "offsets": dump(offsets, topic)}, sort_keys=True)
    return json.dumps({"topics": dump(offsets, None)}, sort_keys=True)


def from_summary(summary: Mapping[str, str] | None, reads: Callable[[str], bool]) -> Offsets | None:
    """The end offsets a snapshot summary records for the topics the source ``reads`` (None: none
    recorded, or only other topics' - a source re-pointed at new topics starts as a new source
    does)."""
    raw = (summary or {}).get(SUMMARY_KEY)
    if not raw:
        return None
    try:
        d = json.loads(raw)
    except ValueError:
        return None
    if isinstance(d.get("topics"), Mapping):
        found = parse(d["topics"], None)
    elif isinstance(d.get("topic"), str):
        found = parse(d.get("offsets"), d["topic"])
    else:
        return None
    found = {k: o for k, o in found.items() if reads(k[0])}
    return found or None


def records_between(start: Mapping[PartitionKey, int], end: Mapping[PartitionKey, int]) -> int:
    """Offsets between two positions (records, plus any transaction markers among them)."""
    return sum(max(0, o - start.get(k, 0)) for k, o in end.items())


def by_topic(offsets: Mapping[PartitionKey, int]) -> dict[str, dict[int, int]]:
    """``{topic: {partition: n}}`` (what status pages show)."""
    out: dict[str, dict[int, int]] = {}
    for (t, p), n in sorted(offsets.items()):
        out.setdefault(t, {})[p] = n
    return out


__all__ = [
    "SUMMARY_KEY",
    "Offsets",
    "PartitionKey",
    "by_topic",
    "dump",
    "from_summary",
    "merged",
    "parse",
    "records_between",
    "summary_value",
]
