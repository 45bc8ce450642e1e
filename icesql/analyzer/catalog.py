"""What the analyzer may ask about existing objects, and two implementations that record what
statements would create: ``MemoryCatalog`` (dictionaries: tests, embedders) and
``OverlayCatalog`` (a script's effects on top of another view: ``Session.check`` and scripts
validated whole before anything is applied).

"Catalog" here is icesql's own set of objects (secrets, connections, sources, views, sinks),
not an Iceberg catalog.

What a statement plan does to those objects is one table, ``EFFECTS``: one entry per plan
type (a test checks that every type has one), read by both recording views.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from icesql.plan import (
    AlterSinkPlan,
    AlterSourcePlan,
    CatalogConnectionPlan,
    Column,
    CreateObjectPlan,
    CreateSecretPlan,
    DescribePlan,
    DescribeTablePlan,
    DropPlan,
    ExplainPlan,
    ExplainSelectPlan,
    FlushSinkPlan,
    KafkaConnectionPlan,
    ObjectPlan,
    SchemaRegistryConnectionPlan,
    SelectPlan,
    ShowCreatePlan,
    ShowPlan,
    ShowSinkStatusPlan,
    ShowSnapshotsPlan,
    ShowTablesPlan,
    SourcePlan,
    StatementPlan,
    StorageConnectionPlan,
    ValidateConnectionPlan,
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


# Every kind of connection plan: the storage ones (AWS, GCS, AZURE), Kafka's, Iceberg catalogs'.
CONNECTION_PLANS: tuple[type[ObjectPlan], ...] = (
    *typing.get_args(StorageConnectionPlan),
    KafkaConnectionPlan,
    SchemaRegistryConnectionPlan,
    CatalogConnectionPlan,
)


def object_kind(plan: ObjectPlan) -> str:
    if isinstance(plan, CONNECTION_PLANS):
        return "connection"
    if isinstance(plan, SourcePlan):
        return "source"
    if isinstance(plan, ViewPlan):
        return "view"
    return "sink"


# --------------------------------------------------------------------------- effects

SECRET = True  # the value recorded for a secret that exists (its value is never kept here)
# (kind, name, what it becomes): an object's plan, SECRET, or None when dropped
Effect = tuple[str, str, "ObjectPlan | bool | None"]


def _create_object(plan: CreateObjectPlan) -> tuple[Effect, ...]:
    d = plan.definition
    return (*(("secret", name, SECRET) for name, _ in plan.inline_secrets), (object_kind(d), d.name, d))


EFFECTS: dict[type[Any], Callable[[Any], tuple[Effect, ...]]] = {
    CreateSecretPlan: lambda p: (("secret", p.name, SECRET),),
    CreateObjectPlan: _create_object,
    AlterSinkPlan: lambda p: (("sink", p.name, p.definition),),
    AlterSourcePlan: lambda p: (("source", p.name, p.definition),),
    DropPlan: lambda p: ((p.kind, p.name, None),),
    ShowPlan: lambda p: (),
    ShowCreatePlan: lambda p: (),
    ShowSinkStatusPlan: lambda p: (),
    DescribePlan: lambda p: (),
    ExplainPlan: lambda p: (),
    ExplainSelectPlan: lambda p: (),
    ValidateConnectionPlan: lambda p: (),
    FlushSinkPlan: lambda p: (),
    SelectPlan: lambda p: (),
    ShowTablesPlan: lambda p: (),
    DescribeTablePlan: lambda p: (),
    ShowSnapshotsPlan: lambda p: (),
}


def effects(plan: StatementPlan, view: CatalogView) -> tuple[Effect, ...]:
    """What applying ``plan`` changes among the objects ``view`` knows (CREATE ... IF NOT
    EXISTS of an existing object changes nothing)."""
    if isinstance(plan, CreateObjectPlan) and plan.if_not_exists:
        d = plan.definition
        if view.get(object_kind(d), d.name) is not None:
            return ()
    return EFFECTS[type(plan)](plan)


# --------------------------------------------------------------------------- views


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
        for kind, name, value in effects(plan, self):
            if kind == "secret":
                (self.secrets.add if value is not None else self.secrets.discard)(name)
            elif isinstance(value, bool) or value is None:
                self.objects.pop((kind, name), None)
            else:
                self.objects[(kind, name)] = value


class OverlayCatalog:
    """A catalog view that records a script's CREATEs and DROPs in memory on top of another
    view, so later statements are validated against earlier ones without storing anything."""

    def __init__(self, base: CatalogView) -> None:
        self._base = base
        self._objects: dict[tuple[str, str], ObjectPlan | bool | None] = {}

    def get(self, kind: str, name: str) -> ObjectPlan | None:
        key = (kind, name)
        if key in self._objects:
            found = self._objects[key]
            return found if found is not None and not isinstance(found, bool) else None
        return self._base.get(kind, name)

    def secret_exists(self, name: str) -> bool:
        key = ("secret", name)
        if key in self._objects:
            return self._objects[key] is not None
        return bool(self._base.secret_exists(name))

    def relation_columns(self, name: str) -> tuple[Column, ...] | None:
        rel = self.get("source", name) or self.get("view", name)
        if isinstance(rel, SourcePlan) and rel.columns:
            return rel.columns
        if ("source", name) in self._objects or ("view", name) in self._objects:
            return None
        return self._base.relation_columns(name)

    # No ``names()``: did-you-mean hints would list every object per statement (quadratic
    # over a long script); the analyzer does without.

    def apply(self, plan: StatementPlan) -> None:
        for kind, name, value in effects(plan, self):
            self._objects[(kind, name)] = value


__all__ = [
    "CONNECTION_PLANS",
    "EFFECTS",
    "KINDS",
    "CatalogView",
    "MemoryCatalog",
    "OverlayCatalog",
    "effects",
    "object_kind",
]
