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

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icesql.engine.backends.checkpoint import checkpoint_root, is_local, last_batch, local_path, source_offset

log = logging.getLogger("icesql.engine")


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
    from icesql.engine.commit.staging import Staging
    from icesql.engine.sources.kinds import SOURCE_KINDS
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
    checkpoint = local_path(checkpoint_root(engine.home, sink_id, kind.checkpoint_suffix))
    if checkpoint is None:
        return None
    found = last_batch(checkpoint)
    if found is None:
        return None
    # a checkpoint of another path, newer than this one (the source took Spark's own reader since)
    other = Path(checkpoint_root(engine.home, sink_id, "")) / "commits"
    if other.is_dir() and other.stat().st_mtime > (checkpoint / "commits").stat().st_mtime:
        return None
    return kind.nothing_new(Probe(plan.name, relation, checkpoint, found[1], engine))


__all__ = ["Probe", "checkpoint_root", "is_local", "last_batch", "nothing_new", "source_offset"]
