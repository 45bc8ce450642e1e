"""A Kafka source's offsets: ``{partition: next offset to read}``, as Spark's checkpoint, the
snapshot summary and the seed of a new checkpoint keep them.

JSON form: ``{"0": 120, "1": 98}`` (keys are strings in JSON; partitions sorted). The offsets of a
batch are its *end*: every record below them, in every partition listed, is in that batch or an
earlier one. A partition absent from a dict was not known when it was written (added later): it
is read from its start.

The snapshot summary of every commit holds the end offsets of the newest batch it covers
(``SUMMARY_KEY``, with the topic), so a sink whose checkpoint (or whole icesql home) was lost
resumes from the table: it neither reads a committed record again nor skips an uncommitted one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

Offsets = dict[int, int]

SUMMARY_KEY = "icesql.kafka-offsets"  # {"topic": t, "offsets": {"0": n, ...}}


def parse(d: Mapping[str, Any] | None) -> Offsets:
    return {int(k): int(v) for k, v in (d or {}).items()}


def dump(offsets: Mapping[int, int]) -> dict[str, int]:
    return {str(p): int(o) for p, o in sorted(offsets.items())}


def merged(dicts: Iterable[Mapping[int, int] | None]) -> Offsets:
    """Per partition, the furthest of ``dicts`` (offsets only move forward)."""
    out: Offsets = {}
    for d in dicts:
        for p, o in (d or {}).items():
            out[p] = max(o, out.get(p, o))
    return out


def summary_value(topic: str, offsets: Mapping[int, int]) -> str:
    return json.dumps({"topic": topic, "offsets": dump(offsets)}, sort_keys=True)


def from_summary(summary: Mapping[str, str] | None, topic: str) -> Offsets | None:
    """The end offsets a snapshot summary records for ``topic`` (None: none recorded, or another
    topic's - a source re-pointed at a new topic starts as a new source does)."""
    raw = (summary or {}).get(SUMMARY_KEY)
    if not raw:
        return None
    try:
        d = json.loads(raw)
    except ValueError:
        return None
    if d.get("topic") != topic:
        return None
    return parse(d.get("offsets"))


def records_between(start: Mapping[int, int], end: Mapping[int, int]) -> int:
    """Offsets between two positions (records, plus any transaction markers among them)."""
    return sum(max(0, o - start.get(p, 0)) for p, o in end.items())


__all__ = [
    "SUMMARY_KEY",
    "Offsets",
    "dump",
    "from_summary",
    "merged",
    "parse",
    "records_between",
    "summary_value",
]
