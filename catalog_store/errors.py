"""The catalog store's exception tree.

Messages name objects as ``kind "name"`` and never carry a secret's value: the store never
formats a value into anything, so there is nothing to redact later.
"""

from __future__ import annotations

from collections.abc import Sequence


def describe(kind: str, name: str) -> str:
    """``source "events"`` — how every message names an object."""
    return f'{kind} "{name}"'


class StoreError(Exception):
    """Base of every error the catalog store raises; ``message`` is the full text."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class StoreOpenError(StoreError):
    """The store's file cannot be created or opened where it was asked for (a path under a
    file, a directory nobody may write, a file nobody may read): a problem with the place, not
    with the store."""


class ObjectExistsError(StoreError):
    """An object of that name already exists (``kind`` is the kind that holds the name)."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f"{describe(kind, name)} already exists")
        self.kind = kind
        self.name = name


class ObjectNotFoundError(StoreError):
    """The named object (or a dependency being recorded) does not exist."""

    def __init__(self, kind: str, name: str, *, needed_by: tuple[str, str] | None = None) -> None:
        message = f"{describe(kind, name)} does not exist"
        if needed_by is not None:
            message += f" (needed by {describe(*needed_by)})"
        super().__init__(message)
        self.kind = kind
        self.name = name


class DependentObjectsError(StoreError):
    """A drop was refused because other objects depend on the target (use CASCADE)."""

    def __init__(self, kind: str, name: str, dependents: Sequence[tuple[str, str]]) -> None:
        listed = ", ".join(describe(k, n) for k, n in dependents)
        verb = "depends" if len(dependents) == 1 else "depend"
        super().__init__(
            f"cannot drop {describe(kind, name)}: {listed} {verb} on it",
            hint="drop the dependents first, or use CASCADE to drop them too",
        )
        self.kind = kind
        self.name = name
        self.dependents: list[tuple[str, str]] = list(dependents)


class StaleVersionError(StoreError):
    """A sink runner wrote with a version (epoch) older than the sink's current one: it is fenced."""

    def __init__(self, name: str, expected: int, actual: int) -> None:
        super().__init__(
            f'sink "{name}" was fenced: this runner holds version {expected}, '
            f"the store is at version {actual}",
            hint="a newer runner of the same sink has started; this one must stop",
        )
        self.name = name
        self.expected = expected
        self.actual = actual
