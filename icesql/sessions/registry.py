"""CREATE SOURCE through a Confluent Schema Registry: the subjects' latest schemas, fetched once when
the source is created and kept in its plan, give the source its columns.

Done after analysis and before anything is stored (or, in a script run as one, before the later
statements are analysed, so that a sink created next sees the columns). The schema a source keeps
is its reader schema for good: records written with later versions are resolved to it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from icesql import plan as P
from icesql.errors import ExecutionError
from icesql.syntax import ast as A


def capture_schemas(
    plan: P.StatementPlan, stmt: A.Statement, view: Any, secrets: P.SecretResolver
) -> P.StatementPlan:
    """``plan`` with a registry source's schemas and columns filled in (other plans as they are)."""
    if not isinstance(plan, P.CreateObjectPlan) or not isinstance(plan.definition, P.SourcePlan):
        return plan
    source = plan.definition
    spec = source.kafka
    if spec is None or spec.registry is None or spec.value_schema is not None or spec.key_schema_text is not None:
        return plan
    if spec.schema_per_topic:  # each record is read with its own writer schema (``registry.routed``)
        return plan
    from icesql.analyzer.registry import debezium_after
    from icesql.analyzer.sources import registry_columns
    from icesql.engine.connections.registry import (
        SUBJECT_NOT_FOUND,
        RegistryNotFoundError,
        registry_client,
    )
    from icesql.engine.sources.registry import kinds

    conn = view.get("connection", spec.registry)
    if not isinstance(conn, P.SchemaRegistryConnectionPlan):
        raise ExecutionError(f"connection {spec.registry!r} is not a CONFLUENT SCHEMA REGISTRY connection")
    client = registry_client(conn, secrets)
    at = _registry_span(stmt)
    fields: dict[str, Any] = {}
    rows: dict[str, dict[str, Any] | None] = {"value": None, "key": None}
    for half in ("value", "key"):
        schema_type = getattr(spec, f"{half}_schema_type")
        if schema_type is None:
            continue
        subject = getattr(spec, f"{half}_subject")
        try:
            found = client.latest(subject)
        except RegistryNotFoundError as err:
            if err.error_code not in (SUBJECT_NOT_FOUND, None) and "subject" not in err.message.lower():
                raise
            raise ExecutionError(
                f"subject '{subject}' does not exist in schema registry {spec.registry}",
                at,
                f"register the {half} schema first (a producer's serializer does on its first record), or name "
                f"the subject: {half.upper()} SUBJECT = '...'",
            ) from None
        if found.schema_type != schema_type:
            raise ExecutionError(
                f"subject '{subject}' of schema registry {spec.registry} holds a {found.schema_type} schema, "
                f"but the source reads {schema_type}",
                at,
                f"write {'KEY ' if half == 'key' else ''}FORMAT {_format_word(found.schema_type)} "
                "USING CONFLUENT SCHEMA REGISTRY CONNECTION ...",
            )
        try:
            row = kinds.columns(found)
        except kinds.Unresolvable as err:
            raise ExecutionError(f"subject '{subject}': {err}", at) from None
        if half == "value" and spec.envelope is P.KafkaEnvelope.DEBEZIUM:
            row = debezium_after(row, subject)
        rows[half] = row
        text_field = "value_schema" if half == "value" else "key_schema_text"
        fields.update(
            {
                f"{half}_schema_id": found.id,
                f"{half}_schema_version": found.version,
                text_field: found.schema,
                f"{half}_referenced": found.referenced,
            }
        )
    with_schemas = dataclasses.replace(source, kafka=dataclasses.replace(spec, **fields))
    definition = registry_columns(with_schemas, rows["value"], rows["key"])
    return dataclasses.replace(plan, definition=definition)


def _format_word(schema_type: str) -> str:
    return {"AVRO": "AVRO", "PROTOBUF": "PROTOBUF", "JSON": "JSON"}.get(schema_type, schema_type)


def _registry_span(stmt: A.Statement) -> Any:
    """Where the statement names its registry (the USING clause or the SCHEMA REGISTRY option)."""
    if isinstance(stmt, A.CreateSource):
        found = next((o for o in stmt.options if o.name in ("SCHEMA REGISTRY", "SCHEMA REGISTRY CONNECTION")), None)
        if found is not None:
            return found.span
    return None


__all__ = ["capture_schemas"]
