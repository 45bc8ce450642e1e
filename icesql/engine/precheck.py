"""Before a bounded run (``run --once``) starts Spark: is there anything to read?

A scheduler (cron, Airflow) calls ``icesql run --once`` on a timetable, and most calls find
nothing new; starting Spark to learn that costs 10-20 s. ``nothing_new(engine, plan)`` answers
from what the sink keeps on this machine and from the source itself, without a JVM:

* the sink's staging directory holds no batch waiting for its commit;
* Spark's checkpoint of the sink's source (``<home>/sinks/<id>/checkpoint<suffix>``) has a
  commit for its last planned batch (a batch planned and not committed is replayed by a run);
* the source kind (``source_kinds.SourceProgress.nothing_new``) finds nothing past that batch's
  end offset: no file the FILES source's log has not admitted, no Kafka record past the offsets.

Anything else - a first run, a view or a Spark table, a Spark Connect server (its half keeps
records of its own), a checkpoint that is not local, a source that cannot be asked, a check that
fails - is "maybe": the run starts Spark as it always did, and finds out there.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("icesql.engine")


def checkpoint_root(home: Path, sink_id: str, suffix: str) -> str:
    """Where Spark keeps a sink's checkpoint: ``<home>/sinks/<id>/checkpoint<suffix>``, or
    ``$ICESQL_CHECKPOINT_ROOT/<id><suffix>`` when set."""
    from icesql import settings

    root = settings.CHECKPOINT_ROOT.get()
    if root:
        return f"{root.rstrip('/')}/{sink_id}{suffix}"
    return f"{Path(home) / 'sinks' / sink_id / 'checkpoint'}{suffix}"


def is_local(location: str) -> bool:
    """Whether a checkpoint location is on this machine's disk (a path or a ``file:`` URI)."""
    return "://" not in location or location.startswith("file:")


def source_offset(checkpoint: Path, batch_id: int) -> dict[str, Any] | None:
    """The end offset Spark's offset log holds for batch ``batch_id`` of a query reading one
    source (None: no such batch, or no offset for it)."""
    try:
        lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    except OSError:
        return None
    # v1 / the batch's metadata / one line per source
    for line in lines[2:]:
        line = line.strip()
        if line and line != "-":
            offset = json.loads(line)
            return offset if isinstance(offset, dict) else None
    return None


def _batch_ids(directory: Path) -> list[int]:
    try:
        return sorted(int(n) for n in (p.name for p in directory.iterdir()) if n.isdigit())
    except OSError:
        return []


def last_batch(checkpoint: Path) -> tuple[int, dict[str, Any]] | None:
    """Spark's last planned batch in a local checkpoint and its source's end offset (the query
    reads one source), when that batch is committed too; None otherwise (no batch yet, or one
    planned and not committed)."""
    planned = _batch_ids(checkpoint / "offsets")
    if not planned or planned[-1] not in _batch_ids(checkpoint / "commits"):
        return None
    offset = source_offset(checkpoint, planned[-1])
    return (planned[-1], offset) if offset is not None else None


@dataclass(frozen=True)
class Probe:
    """What a source kind's ``nothing_new`` is given."""

    sink: str  # the sink's name
    source: Any  # its ``plan.SourcePlan``
    checkpoint: Path  # Spark's checkpoint of the source kind (local)
    offset: dict[str, Any]  # the end offset of the last batch, as Spark's offset log holds it
    engine: Any  # ``engine.Engine``: the source's connection and credentials


def nothing_new(engine: Any, plan: Any) -> str | None:
    """Why a bounded run of sink ``plan`` would certainly find nothing to read (one phrase for
    the log), or None when it may find something or that cannot be told without Spark."""
    try:
        return _nothing_new(engine, plan)
    except Exception as e:  # noqa: BLE001 - a check that fails means "maybe": the run finds out
        log.debug("sink %s: could not tell without Spark whether anything is new: %r", plan.name, e)
        return None


def _nothing_new(engine: Any, plan: Any) -> str | None:
    from icesql.engine.source_kinds import SOURCE_KINDS
    from icesql.engine.staging import Staging
    from icesql.plan import SourcePlan

    if engine.remote:
        return None
    relation = engine.objects.relation(plan.relation)
    if not isinstance(relation, SourcePlan):
        return None
    kind = SOURCE_KINDS[relation.source_kind]()
    if not kind.checkpoint_suffix:
        return None
    sink_id = engine.state.sink_id(plan.name)
    staging = Path(engine.home) / "sinks" / sink_id / "staging"
    if staging.is_dir() and Staging(staging).pending():
        return None
    location = checkpoint_root(engine.home, sink_id, kind.checkpoint_suffix)
    if not is_local(location) or location.startswith("file:"):  # (a file: URI: not a path to read here)
        return None
    checkpoint = Path(location)
    found = last_batch(checkpoint)
    if found is None:
        return None
    # a checkpoint of another path, newer than this one (the source took Spark's own reader since)
    other = Path(checkpoint_root(engine.home, sink_id, "")) / "commits"
    if other.is_dir() and other.stat().st_mtime > (checkpoint / "commits").stat().st_mtime:
        return None
    return kind.nothing_new(Probe(plan.name, relation, checkpoint, found[1], engine))


__all__ = ["Probe", "checkpoint_root", "is_local", "last_batch", "nothing_new", "source_offset"]
