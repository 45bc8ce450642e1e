"""Table maintenance: what keeps a table a sink writes every second fast to read and small to store.

Each operation is a function on a pyiceberg table that commits with icesql's own conflict
handling (reload and retry on ``CommitFailedException``), stamps ``icesql.commit-reason`` in the
snapshots it writes, and returns a frozen result saying what it did:

=======================  ==========================================  ==========================
operation                module                                      result
=======================  ==========================================  ==========================
compaction               ``icesql.engine.maintenance.compact.compact_table``     ``CompactResult``
snapshot expiration      ``expire.expire_snapshots``                 ``ExpireResult``
metadata-file cleanup    ``metadata.remove_old_metadata``            ``MetadataResult``
orphan-file cleanup      ``orphans.remove_orphan_files``             ``OrphanResult``
manifest rewrite         ``manifests.rewrite_manifests``             ``ManifestRewriteResult``
=======================  ==========================================  ==========================

``planner.plan_maintenance`` says which are due under a sink's ``plan.MaintenancePolicy`` (and
whether each can run between two commits of the sink), ``planner.run_task`` runs one and
``planner.maintain_table`` all of them (``icesql maintain``). ``files`` holds what they share:
cached manifest reading, path comparison, listing and deleting.

Compaction lives in ``icesql.engine.maintenance.compact`` (``icesql compact`` is its ``FULL`` mode); it is not
re-exported here, so that importing either package never needs the other first.
"""

from __future__ import annotations

from icesql.engine.maintenance.expire import ExpireResult, expire_snapshots, sink_snapshots
from icesql.engine.maintenance.manifests import ManifestRewriteResult, rewrite_manifests
from icesql.engine.maintenance.metadata import MetadataResult, remove_old_metadata
from icesql.engine.maintenance.orphans import OrphanResult, remove_orphan_files, staged_files
from icesql.engine.maintenance.planner import (
    MaintenanceRun,
    StepKind,
    Task,
    Weight,
    maintain_table,
    plan_maintenance,
    run_task,
    sink_policy,
)

__all__ = [
    "ExpireResult",
    "MaintenanceRun",
    "ManifestRewriteResult",
    "MetadataResult",
    "OrphanResult",
    "StepKind",
    "Task",
    "Weight",
    "expire_snapshots",
    "maintain_table",
    "plan_maintenance",
    "remove_old_metadata",
    "remove_orphan_files",
    "rewrite_manifests",
    "run_task",
    "sink_policy",
    "sink_snapshots",
    "staged_files",
]
