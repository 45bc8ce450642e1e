"""The sink options of table maintenance (``MaintenancePolicy``), in CREATE SINK and ALTER SINK.

Decisions (README "Table maintenance" explains them to users):

* ``MAINTENANCE = 'auto' | 'off'`` turns the whole of it on or off (on by default: a sink that
  commits every second needs it); ``COMPACTION = 'auto' | 'off'`` compaction alone.
* The compaction target is the sink's ``MAXIMUM FILE SIZE``: one size for "a data file".
* ``COMPACTION MINIMUM FILES`` is at least 2 (merging one file gains nothing); ``KEEP SNAPSHOTS``
  at least 1; ``MAXIMUM MANIFESTS`` at least 1; ``MAXIMUM DELETE FILES`` may be 0 (rewrite as
  soon as anything is deleted).
* ``ORPHAN FILE AGE`` is at least 1 minute, and under 1 hour a warning says why it is risky: a
  file another writer is still writing, or a batch has written but not yet staged, is
  unreferenced until its commit. (Iceberg's own default is 3 days; icesql's 1 day.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from icesql.analyzer.diagnostics import Context
from icesql.analyzer.options import Collected
from icesql.plan import MaintenancePolicy
from icesql.syntax.options import MAINTENANCE

MAINTENANCE_OPTIONS = MAINTENANCE  # the specs live with the dialect's other option lists

# option -> (MaintenancePolicy field, smallest value allowed, hint)
_INTS = {
    "COMPACTION MINIMUM FILES": ("compaction_minimum_files", 2, "small files are merged this many at a time"),
    "MAXIMUM DELETE FILES": ("maximum_delete_files", 0, "0 rewrites whatever a delete applies to at once"),
    "MAXIMUM MANIFESTS": ("maximum_manifests", 1, "the default is 32"),
    "KEEP SNAPSHOTS": ("keep_snapshots", 1, "the current snapshot is always kept"),
}
_FIELDS = {
    "MAINTENANCE": "automatic",
    "COMPACTION": "compaction",
    "SNAPSHOT RETENTION": "snapshot_retention",
    "ORPHAN FILE AGE": "orphan_file_age",
    **{name: f for name, (f, _, _) in _INTS.items()},
}
MIN_ORPHAN_FILE_AGE = 60.0
SAFE_ORPHAN_FILE_AGE = 3600.0


def maintenance_policy(ctx: Context, opts: Collected, policy: MaintenancePolicy) -> MaintenancePolicy:
    """``policy`` with the maintenance options of ``opts`` applied (validated)."""
    changes: dict[str, object] = {}
    for name in ("MAINTENANCE", "COMPACTION"):
        if name in opts:
            changes[_FIELDS[name]] = opts.get_str(name) == "auto"
    for name, (field, low, hint) in _INTS.items():
        if name in opts:
            value = opts.get_int(name)
            assert value is not None
            if value < low:
                raise ctx.error(f"{name} must be at least {low}, found {value}", opts.node(name).value, hint)
            changes[field] = value
    if "SNAPSHOT RETENTION" in opts:
        changes["snapshot_retention"] = opts.get_float("SNAPSHOT RETENTION")
    if "ORPHAN FILE AGE" in opts:
        age = opts.get_float("ORPHAN FILE AGE")
        assert age is not None
        node = opts.node("ORPHAN FILE AGE").value
        if age < MIN_ORPHAN_FILE_AGE:
            raise ctx.error(
                "ORPHAN FILE AGE must be at least 1 minute",
                node,
                "a file being written is unreferenced until its commit; the default is 1d",
            )
        if age < SAFE_ORPHAN_FILE_AGE:
            ctx.warn(
                "ORPHAN FILE AGE under 1 hour may delete files another writer is still writing",
                node,
                "the sink protects its own in-flight files; other writers' need the safety age",
            )
        changes["orphan_file_age"] = age
    return dataclasses.replace(policy, **changes) if changes else policy  # type: ignore[arg-type]


def reset_maintenance(policy: MaintenancePolicy, names: Iterable[str]) -> MaintenancePolicy:
    """``policy`` with the options ``names`` (canonical) back at their defaults."""
    default = MaintenancePolicy()
    changes = {_FIELDS[n]: getattr(default, _FIELDS[n]) for n in names if n in _FIELDS}
    return dataclasses.replace(policy, **changes) if changes else policy


__all__ = ["MAINTENANCE_OPTIONS", "maintenance_policy", "reset_maintenance"]
