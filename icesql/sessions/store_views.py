"""What the analyzer and the engine see of a session's catalog store: ``StoreCatalogView`` (the
analyzer's ``CatalogView``), ``ObjectResolver`` (names -> plans for the engine) and
``StateCallback`` (a sink's runtime state, kept in the store)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from icesql import plan as P
from icesql.errors import ExecutionError

if TYPE_CHECKING:
    from catalog_store import CatalogStore

# Every kind of connection plan (what VALIDATE CONNECTION checks, too)
CONNECTIONS = (
    P.AwsConnectionPlan,
    P.GcsConnectionPlan,
    P.AzureConnectionPlan,
    P.CatalogConnectionPlan,
    P.KafkaConnectionPlan,
    P.SchemaRegistryConnectionPlan,
)


class StoreCatalogView:
    """The analyzer's view of the catalog store."""

    def __init__(self, store: CatalogStore) -> None:
        self._store = store

    def get(self, kind: str, name: str) -> P.ObjectPlan | None:
        obj = self._store.get_object(kind, name)
        if obj is None:
            return None
        plan: P.ObjectPlan = P.plan_from_dict(obj.definition)
        return plan

    def secret_exists(self, name: str) -> bool:
        return self._store.get_object("secret", name) is not None

    def relation_columns(self, name: str) -> tuple[P.Column, ...] | None:
        rel = self.get("source", name) or self.get("view", name)
        if isinstance(rel, P.SourcePlan) and rel.columns:
            return rel.columns
        return None

    def names(self, kind: str) -> list[str]:
        """Every object of a kind, for did-you-mean hints (an error's cost only)."""
        return [o.name for o in self._store.list_objects(kind)]


class ObjectResolver:
    """Names -> plans, for the engine (``icesql.engine.connections.target.ObjectResolver``)."""

    def __init__(self, view: StoreCatalogView) -> None:
        self._view = view

    def connection(
        self, name: str
    ) -> (
        P.StorageConnectionPlan | P.CatalogConnectionPlan | P.KafkaConnectionPlan | P.SchemaRegistryConnectionPlan
    ):
        plan = self._view.get("connection", name)
        if not isinstance(plan, CONNECTIONS):
            raise ExecutionError(f"connection {name!r} does not exist")
        return plan

    def relation(self, name: str) -> P.SourcePlan | P.ViewPlan | None:
        plan = self._view.get("source", name) or self._view.get("view", name)
        return plan if isinstance(plan, (P.SourcePlan, P.ViewPlan)) else None


class StateCallback:
    """A sink's runtime state in the store, for the engine (``icesql.engine.sink.runner.StateCallback``)."""

    def __init__(self, store: CatalogStore) -> None:
        self._store = store

    def sink_id(self, name: str) -> str:
        obj = self._store.get_object("sink", name)
        if obj is None:
            raise ExecutionError(f"sink {name!r} does not exist")
        return obj.object_id

    def bump_version(self, name: str) -> int:
        return self._store.bump_sink_version(name)

    def get(self, name: str) -> dict[str, Any] | None:
        """The stored runtime state, so a restarted runner carries its counters on."""
        st = self._store.get_sink_state(name)
        return dataclasses.asdict(st) if st is not None else None

    def update(self, name: str, **fields: Any) -> None:
        if self._store.get_object("sink", name) is not None:
            self._store.update_sink_state(name, **fields)

    def tables(self, name: str) -> list[dict[str, Any]]:
        """What a routed sink committed to each of its tables in earlier runs."""
        return [dataclasses.asdict(t) for t in self._store.sink_tables(name)]

    def update_table(self, name: str, table: str, **fields: Any) -> None:
        """Some of one table's state: of the fields a commit reports, those a table keeps
        (``CatalogStore.update_table_state``'s)."""
        from catalog_store.sink_state import TABLE_FIELDS

        if self._store.get_object("sink", name) is not None:
            self._store.update_table_state(name, table, **{k: v for k, v in fields.items() if k in TABLE_FIELDS})


__all__ = ["CONNECTIONS", "ObjectResolver", "StateCallback", "StoreCatalogView"]
