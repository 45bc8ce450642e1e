"""Manifest rewrite: merge the small manifests a sink's commits pile up.

Every commit adds a manifest (two for a row delta) and keeps the previous ones, so a reader of a
table that took 3,600 commits opens 3,600 manifests before it reads a row. ``rewrite_manifests``
merges the current snapshot's small manifests (below ``small_ratio`` of the target size,
``commit.manifest.target-size-bytes``, 8 MiB by default) into one run per content (data or
deletes) and partition spec, each closed at the target size, and leaves the large ones alone. The
``replace`` snapshot it commits carries every live entry with its snapshot id and sequence
numbers unchanged: the table's rows and files are the same, only fewer manifests list them. A
commit in between makes it start over (``retries`` times): the work is all metadata.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

from icesql.engine.iceberg.table_files import entries_reader, ident, snapshot_manifests
from icesql.errors import ExecutionError

log = logging.getLogger("icesql.maintenance")

REWRITE_MANIFESTS_REASON = "rewrite-manifests"
DEFAULT_TARGET_SIZE = 8 * 1024 * 1024  # Iceberg's commit.manifest.target-size-bytes default


@dataclass(frozen=True)
class ManifestRewriteResult:
    table: str
    snapshot_id: int | None  # the replace snapshot (None when there was nothing to do)
    manifests_before: int
    manifests_after: int
    manifests_rewritten: int  # the small manifests merged
    entries: int  # live entries carried into the new manifests
    bytes_before: int  # of the manifests rewritten
    bytes_after: int  # of the manifests written
    duration: float
    attempts: int = 1
    dry_run: bool = False
    kind: ClassVar[str] = REWRITE_MANIFESTS_REASON

    @property
    def skipped(self) -> bool:
        return self.snapshot_id is None


def _target_size(table: Any, target_size: int | None) -> int:
    if target_size is not None:
        return int(target_size)
    return int(table.metadata.properties.get("commit.manifest.target-size-bytes", DEFAULT_TARGET_SIZE))


def small_manifests(
    table: Any, target_size: int | None = None, small_ratio: float = 0.75
) -> tuple[list[Any], int]:
    """(the current snapshot's manifests worth merging, how many it lists): the small ones, in the
    (content, spec) groups that hold at least two of them."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return [], 0
    manifests = snapshot_manifests(table.io, snapshot)
    limit = small_ratio * _target_size(table, target_size)
    small = [m for m in manifests if int(m.manifest_length) < limit]
    groups = Counter((int(m.content), int(m.partition_spec_id)) for m in small)
    return [m for m in small if groups[(int(m.content), int(m.partition_spec_id))] > 1], len(manifests)


def rewrite_manifests(
    table: Any,
    *,
    max_manifests: int = 0,
    target_size: int | None = None,
    small_ratio: float = 0.75,
    retries: int = 5,
    dry_run: bool = False,
) -> ManifestRewriteResult:
    """Merge the small manifests of ``table``'s current snapshot when it lists more than
    ``max_manifests``; see the module docstring."""
    from pyiceberg.exceptions import CommitFailedException

    from icesql.engine.base import pyiceberg_internals as internals
    from icesql.engine.commit.snapshot import COMMIT_REASON, carried_progress

    start = time.monotonic()
    name = ident(table)
    target = _target_size(table, target_size)
    attempt = 0
    while True:
        attempt += 1
        table.refresh()
        rewrite, before = small_manifests(table, target, small_ratio)
        size_before = sum(int(m.manifest_length) for m in rewrite)
        if before <= max_manifests or not rewrite or dry_run:
            return ManifestRewriteResult(
                table=name,
                snapshot_id=None,
                manifests_before=before,
                manifests_after=before,
                manifests_rewritten=len(rewrite) if dry_run and before > max_manifests else 0,
                entries=0,
                bytes_before=size_before if dry_run else 0,
                bytes_after=0,
                duration=time.monotonic() - start,
                attempts=attempt,
                dry_run=dry_run,
            )
        tx = internals.transaction(table)
        producer = internals.manifest_rewrite_producer()(
            transaction=tx,
            io=table.io,
            rewrite=rewrite,
            entries_of=entries_reader(table.io),
            target_size=target,
            snapshot_properties={**carried_progress(table.metadata), COMMIT_REASON: REWRITE_MANIFESTS_REASON},
        )
        try:
            internals.apply_producer(tx, producer)
            tx.commit_transaction()
        except (CommitFailedException, internals.RewriteConflictError) as exc:
            internals.discard_written([producer], table.io)
            if attempt > retries:
                raise ExecutionError(
                    f"rewriting the manifests of {name} failed after {attempt} attempts: {exc}",
                    hint="another writer keeps committing to the table; run it again later",
                ) from exc
            log.info("table %s changed while rewriting manifests; starting over", name)
            continue
        after = snapshot_manifests(table.io, table.current_snapshot())
        written = set(producer.created_paths)
        return ManifestRewriteResult(
            table=name,
            snapshot_id=producer.snapshot_id,
            manifests_before=before,
            manifests_after=len(after),
            manifests_rewritten=producer.replaced,
            entries=producer.entries,
            bytes_before=size_before,
            bytes_after=sum(int(m.manifest_length) for m in after if m.manifest_path in written),
            duration=time.monotonic() - start,
            attempts=attempt,
        )


__all__ = ["REWRITE_MANIFESTS_REASON", "ManifestRewriteResult", "rewrite_manifests", "small_manifests"]
