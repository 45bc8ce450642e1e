"""What kind of connection a name stands for, and the one way a statement that names a connection
checks it: it must exist (else a did-you-mean or how to create it) and be of the kind the clause
reads through (else which kind it is). The connection, source and sink analyzers all ask here.
"""

from __future__ import annotations

from typing import Any

from icesql.analyzer.catalog import CatalogView
from icesql.analyzer.diagnostics import Context, did_you_mean
from icesql.plan import (
    AwsConnectionPlan,
    AzureConnectionPlan,
    CatalogConnectionPlan,
    GcsConnectionPlan,
    KafkaConnectionPlan,
    ObjectPlan,
    SchemaRegistryConnectionPlan,
)
from icesql.syntax.ast import ConnectionKind

# the kind of connection each connection plan is
PLAN_KINDS: dict[type[Any], ConnectionKind] = {
    AwsConnectionPlan: ConnectionKind.AWS,
    GcsConnectionPlan: ConnectionKind.GCS,
    AzureConnectionPlan: ConnectionKind.AZURE,
    KafkaConnectionPlan: ConnectionKind.KAFKA,
    SchemaRegistryConnectionPlan: ConnectionKind.CONFLUENT_SCHEMA_REGISTRY,
    CatalogConnectionPlan: ConnectionKind.ICEBERG_CATALOG,
}


def connection_kind_name(plan: ObjectPlan | None) -> str:
    """How a statement names the kind of a connection: AWS, GCS, AZURE, ICEBERG CATALOG, KAFKA,
    CONFLUENT SCHEMA REGISTRY."""
    kind = PLAN_KINDS.get(type(plan)) if plan is not None else None
    return (kind or ConnectionKind.ICEBERG_CATALOG).value


def article(word: str) -> str:
    """``an AWS``, ``an ICEBERG CATALOG``, ``a KAFKA``, ``a GCS``: as the keyword is read aloud."""
    return "an" if word[:1].upper() in ("A", "E", "I", "O") else "a"


def names_hint(catalog: CatalogView, kind: str, name: str) -> str | None:
    """A did-you-mean among the objects of ``kind``, when the catalog view lists them."""
    names = getattr(catalog, "names", None)
    if names is None:
        return None
    return did_you_mean(name, list(names(kind)))


def expect_connection(
    ctx: Context,
    catalog: CatalogView,
    name: str,
    at: Any,
    plan_type: type[Any],
    *,
    create: str,
    why: str,
) -> Any:
    """The connection ``name``, of ``plan_type``; else an error at ``at``: an unknown name (a
    did-you-mean, or ``create``: the statement that would make it), or a connection of another
    kind (``why``: what the clause reads through)."""
    found = catalog.get("connection", name)
    if found is None:
        raise ctx.error(
            f"unknown connection {name}",
            at,
            names_hint(catalog, "connection", name) or f"create it first: {create}",
        )
    if not isinstance(found, plan_type):
        what, wanted = connection_kind_name(found), PLAN_KINDS[plan_type].value
        raise ctx.error(
            f"connection {name} is {article(what)} {what} connection, expected {article(wanted)} {wanted} connection",
            at,
            why,
        )
    return found


__all__ = ["PLAN_KINDS", "article", "connection_kind_name", "expect_connection", "names_hint"]
