"""Where a sink stands when it (re)starts: the exactly-once bookkeeping between the table, the
durable staging area and Spark's checkpoint.

A crash (or SIGKILL) at any point leaves one of these states, and a restart resolves each:

* files being written, nothing staged -> Spark replays the batch; the files are orphans;
* staged, not committed -> recovery commits them (reason ``recovery``), the replay is skipped;
* committed, staging not yet cleared -> recovery discards the staged entries, replay skipped;
* committed, Spark has not recorded the batch -> the replay is at or below the committed
  progress, skipped.

``Progress`` holds the two marks the runner keeps: ``committed`` (the newest Spark batch id the
table holds for this sink, from its snapshot summaries) and ``staged_high`` (the newest batch
staged or committed: a batch at or below it is never written again). ``recover`` computes them
on start, fencing out this runner when a newer version of the sink has committed;
``catch_up`` does it again when another runner of the same home has moved on meanwhile.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icesql.engine.commit.snapshot import FencedError, last_committed
from icesql.engine.commit.staging import Staging

log = logging.getLogger("icesql.sink")


@dataclass
class Progress:
    """How far a sink got: committed to its table, and staged durably (Spark batch ids)."""

    committed: int = -1
    staged_high: int = -1


def fenced_error(name: str, version: int | None, newer: int, table: str) -> FencedError:
    return FencedError(
        f"sink {name} version {version} is fenced out: version {newer} already committed to {table}",
        hint="another runner of this sink took over",
    )


def committed_progress(table: Any, sink_id: str, version: int, *, name: str, table_name: str) -> int:
    """The progress ``table`` holds for ``sink_id`` (-1: none); raises ``FencedError`` when a newer
    version of the sink committed it."""
    last = last_committed(table, sink_id)
    if last is None:
        return -1
    newer, progress = last
    if newer > version:
        raise fenced_error(name, version, newer, table_name)
    return progress


def recover(staging: Staging, committed: int) -> Progress:
    """Clear what a crash left in ``staging`` (torn writes, entries the table already holds) and
    say how far the sink got."""
    staging.remove_temporaries()
    staging.discard_through(committed)
    high = max([committed, staging.cursor(), *(e.batch_id for e in staging.pending())])
    return Progress(committed=committed, staged_high=high)


def warn_if_checkpoint_lost(name: str, checkpoint: Path, committed: int) -> None:
    """The table holds progress but Spark's checkpoint is gone: Spark starts over at batch 0, and
    batches up to the committed progress are taken for committed ones."""
    if committed >= 0 and not (checkpoint / "offsets").exists():
        log.warning(
            "sink %s: the table holds progress %d but the checkpoint %s is missing; batches "
            "up to %d will be skipped as already committed",
            name,
            committed,
            checkpoint,
            committed,
        )


def catch_up(
    table: Any,
    sink_id: str,
    version: int,
    staging: Staging,
    progress: Progress,
    *,
    name: str,
    table_name: str,
) -> int:
    """The newest batch another runner of this sink on the same home staged (the staging
    directory is shared) or committed; moves ``progress.committed`` on and clears staging when
    the table holds more. Raises ``FencedError`` when a newer version committed."""
    high = max([progress.staged_high, staging.cursor(), *(e.batch_id for e in staging.pending())])
    if table is not None:
        table.refresh()
        committed = committed_progress(table, sink_id, version, name=name, table_name=table_name)
        if committed > progress.committed:
            progress.committed = committed
            staging.discard_through(committed)
        high = max(high, committed)
    return high


__all__ = ["Progress", "catch_up", "committed_progress", "fenced_error", "recover", "warn_if_checkpoint_lost"]
