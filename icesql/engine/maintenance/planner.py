"""Which maintenance steps a table needs now, and running them.

``plan_maintenance(table, policy, now)`` reads the table's metadata (manifests through a cache, so
between two commits of a sink it reads only what is new; no data files) and returns the steps
that are due, in the order they should run:

1. ``compact`` when ``plan_compaction`` in ``AUTO`` mode finds something (small files to merge,
   files with many deleted rows, more delete files than ``maximum_delete_files``);
2. ``rewrite-manifests`` when the current snapshot lists more than ``maximum_manifests``;
3. ``expire`` when snapshots are older than ``snapshot_retention`` beyond the ``keep_snapshots``
   newest (at most ``expire_batch`` per step), and the last expiration is ``expire_every`` ago;
4. ``remove-metadata`` when metadata files have dropped out of the table's metadata log (its
   oldest entry is not the table's first version) and, for a running sink (``metadata_checked``),
   the metadata has moved ``metadata_check_versions`` versions on since the last run;
5. ``remove-orphans`` every ``orphan_check_every``, one task per slice of the table location
   (``metadata``, then ``data``), since only listing tells whether there is anything; each slice
   is due on its own (``Task.run_key``): a running sink runs one step per gap between its
   commits, and two slices sharing one time left each due only every other interval.

Each task says its weight: ``SMALL`` steps (expiration, manifest rewrite, an orphan slice, a
compaction that reads at most ``large_rewrite_bytes``, a metadata cleanup) take about as long as
a commit and can run between two commits of the sink; a ``LARGE`` compaction should run beside
the sink (its commit rebases on the sink's commits, see ``compact``). ``run_task`` runs one;
``maintain_table`` plans and runs them all (``icesql maintain``).
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from icesql.engine.iceberg.table_files import ident
from icesql.engine.maintenance.expire import choose, epoch_ms, expire_snapshots
from icesql.engine.maintenance.manifests import rewrite_manifests, small_manifests
from icesql.engine.maintenance.metadata import metadata_version, oldest_kept_version, remove_old_metadata
from icesql.engine.maintenance.orphans import remove_orphan_files
from icesql.plan import MaintenancePolicy, SinkPlan

ORPHAN_SLICES = ("metadata", "data")


class StepKind(enum.Enum):
    COMPACT = "compact"
    REWRITE_MANIFESTS = "rewrite-manifests"
    EXPIRE = "expire"
    REMOVE_METADATA = "remove-metadata"
    REMOVE_ORPHANS = "remove-orphans"


class Weight(enum.Enum):
    SMALL = "small"  # about a commit's time: between two commits of the sink
    LARGE = "large"  # a rewrite: beside the sink, committing when it is done


@dataclass(frozen=True)
class Task:
    kind: StepKind
    weight: Weight
    reason: str  # what makes it due, for the log and a dry run
    read_bytes: int = 0  # compaction: the bytes it reads
    applies_deletes: bool = False  # compaction: it applies (or removes) delete files
    under: str | None = None  # orphan cleanup: the slice of the table location to list

    @property
    def run_key(self) -> Any:
        """What ``last_run`` (when each step last ran) keeps this task's time under: its kind,
        and an orphan slice its own (each slice is due every ``orphan_check_every``, not each
        every other interval)."""
        return (self.kind, self.under) if self.under else self.kind

    def describe(self) -> str:
        where = f" under {self.under}/" if self.under else ""
        return f"{self.kind.value}{where} ({self.weight.value}): {self.reason}"


def sink_policy(plan: SinkPlan) -> MaintenancePolicy:
    """The policy a sink's table is maintained under: its options, compaction writing files of
    the sink's ``MAXIMUM FILE SIZE`` unless the policy names another size."""
    policy = plan.maintenance
    if policy.target_file_size is None:
        policy = dataclasses.replace(policy, target_file_size=plan.maximum_file_size)
    return policy


def _duration(seconds: float) -> str:
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= n and seconds % n == 0:
            return f"{seconds / n:g}{unit}"
    return f"{seconds:g}s"


def _due(key: Any, every: float, now: float, last_run: Mapping[Any, float] | None) -> bool:
    last = (last_run or {}).get(key)
    return last is None or now - last >= every


def _metadata_due(table: Any, policy: MaintenancePolicy, checked: int | None) -> str | None:
    """Why the metadata cleanup is due (None: it is not): versions have dropped out of the
    metadata log, and the log moved ``metadata_check_versions`` on since the version ``checked``
    at the last run."""
    oldest = oldest_kept_version(table.metadata, table.metadata_location)
    current = metadata_version(table.metadata_location or "")
    if oldest is None or current is None or oldest == 0:
        return None  # no version has dropped out of the log (or none can be told apart)
    if checked is not None and current - checked < policy.metadata_check_versions:
        return None
    return f"metadata files older than the metadata log (its oldest: version {oldest})"


def plan_maintenance(
    table: Any,
    policy: MaintenancePolicy,
    now: float | None = None,
    *,
    last_run: Mapping[Any, float] | None = None,
    metadata_checked: int | None = None,
) -> list[Task]:
    """The steps due on ``table`` (refresh it first) under ``policy`` at ``now`` (seconds since
    the epoch); ``last_run``: when each kind of step last ran (a running sink keeps that; without
    it every interval counts as elapsed); ``metadata_checked``: the table's metadata version when
    the metadata cleanup last ran (None: as if never). See the module docstring."""
    from icesql.engine.maintenance.compact import CompactMode, plan_compaction

    now = time.time() if now is None else now
    tasks: list[Task] = []
    if policy.compaction:
        plan = plan_compaction(table, mode=CompactMode.AUTO, policy=policy)
        if not plan.empty:
            weight = Weight.LARGE if plan.read_bytes > policy.large_rewrite_bytes else Weight.SMALL
            tasks.append(
                Task(
                    StepKind.COMPACT,
                    weight,
                    "; ".join(plan.reasons),
                    plan.read_bytes,
                    applies_deletes=plan.applies_deletes,
                )
            )
    small, count = small_manifests(table)
    if count > policy.maximum_manifests and small:
        tasks.append(
            Task(
                StepKind.REWRITE_MANIFESTS,
                Weight.SMALL,
                f"{count} manifests > MAXIMUM MANIFESTS {policy.maximum_manifests} ({len(small)} small)",
            )
        )
    if _due(StepKind.EXPIRE, policy.expire_every, now, last_run):
        cutoff = epoch_ms(now - policy.snapshot_retention)
        expire, _ = choose(table.metadata, cutoff, policy.keep_snapshots, limit=policy.expire_batch)
        if expire:
            tasks.append(
                Task(
                    StepKind.EXPIRE,
                    Weight.SMALL,
                    f"{len(expire)} snapshot(s) older than {_duration(policy.snapshot_retention)} "
                    f"beyond the newest {policy.keep_snapshots}",
                )
            )
    why = _metadata_due(table, policy, metadata_checked)
    if why is not None:
        tasks.append(Task(StepKind.REMOVE_METADATA, Weight.SMALL, why))
    for part in ORPHAN_SLICES:
        task = Task(
            StepKind.REMOVE_ORPHANS,
            Weight.SMALL,
            f"unreferenced files older than {_duration(policy.orphan_file_age)}",
            under=part,
        )
        if _due(task.run_key, policy.orphan_check_every, now, last_run):
            tasks.append(task)
    return tasks


def run_task(
    table: Any,
    task: Task,
    policy: MaintenancePolicy,
    *,
    now: float | None = None,
    protected_paths: Iterable[str] | Callable[[], Iterable[str]] = (),
    io_properties: Mapping[str, str] | None = None,
    dry_run: bool = False,
    track: Sequence[str] | None = None,
) -> Any:
    """Run one task; its result (``CompactResult``, ``ManifestRewriteResult``, ``ExpireResult``,
    ``MetadataResult``, ``OrphanResult``). A dry run changes nothing: a compaction returns
    ``task`` itself, the other steps what they would do. ``track``: a compaction's result says
    where the rows of these columns went (``compact_table``)."""
    from icesql.engine.maintenance.compact import CompactMode, compact_table

    now = time.time() if now is None else now
    if task.kind is StepKind.COMPACT:
        if dry_run:
            return task
        return compact_table(
            table,
            mode=CompactMode.AUTO,
            policy=policy,
            io_properties=io_properties,
            max_file_size=policy.target_file_size,
            track=track,
        )
    if task.kind is StepKind.REWRITE_MANIFESTS:
        return rewrite_manifests(table, max_manifests=policy.maximum_manifests, dry_run=dry_run)
    if task.kind is StepKind.EXPIRE:
        return expire_snapshots(
            table,
            now - policy.snapshot_retention,
            policy.keep_snapshots,
            limit=policy.expire_batch,
            dry_run=dry_run,
        )
    if task.kind is StepKind.REMOVE_METADATA:
        return remove_old_metadata(table, dry_run=dry_run)
    if task.kind is StepKind.REMOVE_ORPHANS:
        return remove_orphan_files(
            table,
            now - policy.orphan_file_age,
            protected_paths=protected_paths,
            under=task.under,
            dry_run=dry_run,
        )
    raise AssertionError(task.kind)  # pragma: no cover


@dataclass(frozen=True)
class MaintenanceRun:
    """One table's maintenance: the steps that were due and what each did."""

    sink: str
    table: str
    tasks: tuple[Task, ...] = ()
    results: tuple[Any, ...] = ()  # one per task, in order
    dry_run: bool = False
    off: bool = False  # the sink's MAINTENANCE = 'off': nothing was looked at
    duration: float = 0.0


def maintain_table(
    table: Any,
    policy: MaintenancePolicy,
    *,
    sink: str = "",
    now: float | None = None,
    protected_paths: Iterable[str] | Callable[[], Iterable[str]] = (),
    io_properties: Mapping[str, str] | None = None,
    dry_run: bool = False,
    steps: Sequence[StepKind] | None = None,
) -> MaintenanceRun:
    """Plan ``table``'s maintenance and run every due step (``steps``: only those kinds)."""
    start = time.monotonic()
    table.refresh()
    tasks = [t for t in plan_maintenance(table, policy, now) if steps is None or t.kind in steps]
    results = []
    for task in tasks:
        results.append(
            run_task(
                table,
                task,
                policy,
                now=now,
                protected_paths=protected_paths,
                io_properties=io_properties,
                dry_run=dry_run,
            )
        )
    return MaintenanceRun(
        sink=sink,
        table=ident(table),
        tasks=tuple(tasks),
        results=tuple(results),
        dry_run=dry_run,
        duration=time.monotonic() - start,
    )


__all__ = [
    "ORPHAN_SLICES",
    "MaintenanceRun",
    "StepKind",
    "Task",
    "Weight",
    "maintain_table",
    "plan_maintenance",
    "run_task",
    "sink_policy",
]
