"""What the analyzer may ask about existing objects, and an in-memory implementation of it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from icesql.plan import (
    AlterSinkPlan,
    AwsConnectionPlan,
    CatalogConnectionPlan,
    Column,
    CreateObjectPlan,
    CreateSecretPlan,
    DropPlan,
    ObjectPlan,
    SourcePlan,
    StatementPlan,
    ViewPlan,
)

KINDS = ("connection", "source", "view", "sink")


@runtime_checkable
class CatalogView(Protocol):
    """Implemented by the session over the catalog store.

    ``kind`` is 'connection' | 'source' | 'view' | 'sink'. ``relation_columns`` gives the schema
    of a relation when known (a source's declared SCHEMA, a view's schema when the executor
    supplied it, a Spark table's), None when unknown.

    An implementation may also offer ``names(kind) -> Iterable[str]`` (optional: used only for
    did-you-mean hints, looked up with ``getattr``).
    """

    def get(self, kind: str, name: str) -> ObjectPlan | None: ...

    def secret_exists(self, name: str) -> bool: ...

    def relation_columns(self, name: str) -> tuple[Column, ...] | None: ...


def object_kind(plan: ObjectPlan) -> str:
    if isinstance(plan, AwsConnectionPlan | CatalogConnectionPlan):
        return "connection"
    if isinstance(plan, SourcePlan):
        return "source"
    if isinstance(plan, ViewPlan):
        return "view"
    return "sink"


class MemoryCatalog:
    """A ``CatalogView`` held in dictionaries: for tests and for ``icesql check`` without a store.

    ``apply(plan)`` records what a statement plan would store, so a script can be checked
    statement by statement; ``spark_tables`` stands for tables the Spark session knows.
    """

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], ObjectPlan] = {}
        self.secrets: set[str] = set()
        self.spark_tables: dict[str, tuple[Column, ...] | None] = {}
        self.view_columns: dict[str, tuple[Column, ...]] = {}

    # CatalogView
    def get(self, kind: str, name: str) -> ObjectPlan | None:
        return self.objects.get((kind, name))

    def secret_exists(self, name: str) -> bool:
        return name in self.secrets

    def relation_columns(self, name: str) -> tuple[Column, ...] | None:
        source = self.objects.get(("source", name))
        if isinstance(source, SourcePlan):
            return source.columns or None
        if ("view", name) in self.objects:
            return self.view_columns.get(name)
        return self.spark_tables.get(name)

    def names(self, kind: str) -> Iterable[str]:
        if kind == "secret":
            return sorted(s for s in self.secrets if not s.startswith("__inline__."))
        return sorted(n for (k, n) in self.objects if k == kind)

    # building one up
    def add(self, plan: ObjectPlan) -> None:
        self.objects[(object_kind(plan), plan.name)] = plan

    def add_secret(self, name: str) -> None:
        self.secrets.add(name)

    def apply(self, plan: StatementPlan) -> None:
        """Record the effect of an analyzed statement (what the session would store)."""
        if isinstance(plan, CreateSecretPlan):
            self.secrets.add(plan.name)
        elif isinstance(plan, CreateObjectPlan):
            key = (object_kind(plan.definition), plan.definition.name)
            if plan.if_not_exists and key in self.objects:
                return
            for name, _ in plan.inline_secrets:
                self.secrets.add(name)
            self.objects[key] = plan.definition
        elif isinstance(plan, AlterSinkPlan):
            self.objects[("sink", plan.name)] = plan.definition
        elif isinstance(plan, DropPlan):
            if plan.kind == "secret":
                self.secrets.discard(plan.name)
            else:
                self.objects.pop((plan.kind, plan.name), None)


__all__ = ["KINDS", "CatalogView", "MemoryCatalog", "object_kind"]
