"""CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY: the schemas a registry holds, by id, GUID or
subject, fetched once and cached.

Any Confluent-compatible registry speaks this REST API (Confluent, Karapace, Redpanda, Apicurio's
ccompat API). The client here is the only code that talks to one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SchemaReference:
    """A schema another one imports (Protobuf imports, Avro named types, JSON Schema $refs)."""

    name: str  # how the referring schema names it (a .proto file name, an Avro full name, a $ref URL)
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    """One schema as the registry holds it.

    ``schema_type`` is the registry's own spelling: 'AVRO' (the registry's default when it names
    none), 'PROTOBUF' or 'JSON'. ``schema`` is the schema text exactly as registered.
    ``references`` are resolved by the client into ``referenced`` (name -> schema text), so a
    decoder never calls the registry itself.
    """

    schema_type: str
    schema: str
    id: int | None = None
    guid: str | None = None
    subject: str | None = None
    version: int | None = None
    references: tuple[SchemaReference, ...] = ()
    referenced: tuple[tuple[str, str], ...] = ()  # (reference name, schema text), transitively


__all__ = ["RegisteredSchema", "SchemaReference"]
