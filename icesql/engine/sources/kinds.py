"""The registry of source kinds: what a sink's runner asks of the source it reads.

A sink's runner keeps the lifecycle (start, batches, staging, commits, stop); what depends on
the kind of source - how it binds to the sink's checkpoint, what of its position goes into each
snapshot's summary, how a lost checkpoint resumes from the table, what a batch consumed, what is
cleaned up after a run - is a ``SourceProgress`` of that kind, found in ``SOURCE_KINDS`` the way
pyiceberg finds a catalog: by name, loaded lazily, so a missing optional package (confluent-kafka)
is reported only when a source of that kind is used.

Adding a source kind (docs/ARCHITECTURE.md, "Adding a source kind"): a ``SourceKind`` in
``plan.py``, its syntax and analysis, a relation in ``sources.source_relation``'s table, and a
``SourceProgress`` here when it keeps a position of its own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from icesql.plan import SourceKind, SourcePlan


class SourceProgress:
    """A sink's position in its source, for the runner (the default: Spark's checkpoint alone
    keeps it, as for views, generators and Spark tables)."""

    checkpoint_suffix = ""  # the checkpoint's directory: ``checkpoint<suffix>``
    resumes_from_table = False  # a lost checkpoint resumes from the table (no warning needed)

    def __init__(self, runner: Any, plan: SourcePlan | None = None) -> None:
        self.runner = runner
        self.plan = plan

    @classmethod
    def nothing_new(cls, probe: Any) -> str | None:
        """Without Spark, before a bounded run: why the source certainly holds nothing past the
        end offset of the sink's last committed batch (``precheck.Probe``), or None when it may
        (the run then starts Spark and finds out)."""
        return None

    @classmethod
    def runs_locally(cls, source: SourcePlan, sink: Any, session: Any) -> str | None:
        """Why ``sink`` reading ``source`` (a bounded run or a running one) needs Spark, or None when it can run in
        icesql's own process (``local_query``; ``session``: a ``local_query.LocalSession``)."""
        return f"a {source.source_kind.value.upper()} source is read by Spark"

    def binding(self) -> Any:
        """What the relation needs from the sink (None: nothing)."""
        return None

    def bound(self, relation: Any) -> SourceProgress:
        """The relation built: the progress that applies to it (a FILES source Spark's reader
        takes, rather than the Arrow path, keeps only Spark's checkpoint)."""
        return self

    def resume(self, summary: dict[str, str] | None) -> int | None:
        """Before the query starts, given the summary of the table's last snapshot of this sink:
        prepare the source's start and return the progress base of the checkpoint (progress =
        base + Spark's batch id), or None to keep 0."""
        return None

    def staged(self, rows: Sequence[dict[str, Any]], spark_batch_id: int) -> dict[str, Any]:
        """``StagedBatch`` fields recording what the batch consumed (``rows``: the batch writer's)."""
        return {}

    def summary(self, entries: Sequence[Any]) -> dict[str, str]:
        """Snapshot summary entries for a commit of ``entries`` (staged batches)."""
        return {}

    def after_commit(self) -> None:
        """A commit of the entries ``summary`` described is in the table."""

    def after_run(self) -> None:
        """A bounded run (``--once``) ended with everything committed."""

    def status(self) -> dict[str, Any]:
        """Fields of the sink's status row: ``source_lag`` (records the table is behind the
        source) and ``source_lag_partitions`` ({topic: {partition: records}}) where known."""
        return {}

    def close(self) -> None:
        """The sink stopped: release what ``status`` keeps open."""


def _lazy(module: str, attr: str) -> Callable[[], type[SourceProgress]]:
    def load() -> type[SourceProgress]:
        cls: type[SourceProgress] = getattr(importlib.import_module(module), attr)
        return cls

    return load


SOURCE_KINDS: dict[SourceKind, Callable[[], type[SourceProgress]]] = {
    SourceKind.FILES: _lazy("icesql.engine.sources.files.progress", "FilesProgress"),
    SourceKind.KAFKA: _lazy("icesql.engine.sources.kafka.progress", "KafkaProgress"),
    SourceKind.GENERATOR: lambda: SourceProgress,
}


def progress_for(runner: Any, plan: Any) -> SourceProgress:
    """The ``SourceProgress`` of a sink reading ``plan`` (a source plan; anything else - a view, a
    Spark table - keeps Spark's checkpoint alone)."""
    if isinstance(plan, SourcePlan):
        return SOURCE_KINDS[plan.source_kind]()(runner, plan)
    return SourceProgress(runner)


__all__ = ["SOURCE_KINDS", "SourceProgress", "progress_for"]
