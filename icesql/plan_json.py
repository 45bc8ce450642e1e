"""The JSON form of plans: ``to_dict`` and ``plan_from_dict``, how the catalog store keeps them.

Dataclasses become ``{"$type": class name, field: value, ...}`` and enums
``{"$enum": class name, "value": ...}``, so a stored definition rebuilds exactly; tuples become
lists and back. A field marked ``OMIT_AT_DEFAULT`` is left out at its default. A ``Redacted``
secret value is refused: it never reaches the store through a plan. ``plan_from_dict`` rebuilds
the object plans and their parts (what the store keeps), each class registered here by name.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from icesql.plan_objects import (
    AwsConnectionPlan,
    AzureConnectionPlan,
    CatalogConnectionPlan,
    Column,
    CommitPolicy,
    GcsConnectionPlan,
    KafkaConnectionPlan,
    KafkaInclude,
    KafkaSourceSpec,
    MaintenancePolicy,
    PartitionFieldPlan,
    SchemaRegistryConnectionPlan,
    SinkPlan,
    SourcePlan,
    ViewPlan,
)
from icesql.plan_vocabulary import (
    CatalogType,
    CleanSource,
    DeleteMode,
    KafkaEnvelope,
    KafkaMetadata,
    OnError,
    Redacted,
    RestAuth,
    SecretName,
    SinkMode,
    SourceFormat,
    SourceKind,
    Transform,
)

_PLAN_TYPES: dict[str, type[Any]] = {
    t.__name__: t
    for t in (
        AwsConnectionPlan,
        GcsConnectionPlan,
        AzureConnectionPlan,
        KafkaConnectionPlan,
        SchemaRegistryConnectionPlan,
        KafkaInclude,
        KafkaSourceSpec,
        CatalogConnectionPlan,
        SourcePlan,
        ViewPlan,
        SinkPlan,
        PartitionFieldPlan,
        CommitPolicy,
        MaintenancePolicy,
        Column,
        SecretName,
    )
}
_ENUMS: dict[str, type[enum.Enum]] = {
    t.__name__: t
    for t in (
        CatalogType,
        RestAuth,
        SourceFormat,
        SourceKind,
        SinkMode,
        OnError,
        CleanSource,
        KafkaEnvelope,
        KafkaMetadata,
        Transform,
        DeleteMode,
    )
}


def to_dict(obj: Any) -> Any:
    """JSON-ready form of a plan; tagged so ``plan_from_dict`` can rebuild it exactly."""
    if isinstance(obj, Redacted):
        raise TypeError("a secret value is never serialised with a plan")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {"$type": type(obj).__name__}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.metadata.get("omit_at_default") and value == _default(f):
                continue
            out[f.name] = to_dict(value)
        return out
    if isinstance(obj, enum.Enum):
        return {"$enum": type(obj).__name__, "value": obj.value}
    if isinstance(obj, tuple):
        return [to_dict(x) for x in obj]
    return obj


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def plan_from_dict(data: Any) -> Any:
    """Inverse of ``to_dict``."""
    if isinstance(data, dict):
        if "$enum" in data:
            return _ENUMS[data["$enum"]](data["value"])
        if "$type" in data:
            cls = _PLAN_TYPES[data["$type"]]
            kwargs = {k: plan_from_dict(v) for k, v in data.items() if k != "$type"}
            return cls(**kwargs)
        return {k: plan_from_dict(v) for k, v in data.items()}
    if isinstance(data, list):
        return tuple(plan_from_dict(x) for x in data)
    return data
