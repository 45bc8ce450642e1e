"""Restart signals: failures that are not failures, the sink restarts at once and resumes from what it
committed and staged.
"""

from __future__ import annotations

from icesql.errors import ExecutionError


class RestartAtOnce(ExecutionError):
    """Not a failure: the sink restarts at once (in a ``once`` run, without a backoff and without
    counting as a failure; ``supervisor``), resuming from what it committed and staged."""

    transient = True  # restarted (by ``Engine.run`` or the supervisor), never a failure
    running_too = False  # a running sink (not ``once``) restarts at once too, not after a backoff


class SchemaChangedError(RestartAtOnce):
    """A batch brought columns the table lacks: the sink restarts at once (nothing of the batch
    was committed), evolves the table's schema as it starts, and reads the batch again."""
