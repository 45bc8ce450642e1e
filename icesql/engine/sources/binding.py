"""Relations bound to their connections: a source's storage connections turned into the FileIO
properties its files are listed and read with (checked once at the start, naming the connection),
a KAFKA source's librdkafka settings with its secrets resolved, and the relation a sink reads built
with them (``resolve.build_relation``), on Spark or in this process.
"""

from __future__ import annotations

from typing import Any

from icesql.errors import ExecutionError
from icesql.plan import SourcePlan


class SourceBinder:
    """The catalog store's objects and the secrets, for binding relations (one per engine)."""

    def __init__(self, objects: Any, secrets: Any) -> None:
        self.objects = objects
        self.secrets = secrets

    def relation(self, backend: Any, name: str, *, on_error: Any = None, arrow: Any = None) -> Any:
        """The ``Relation`` a sink reading ``name`` on ``backend`` (``backends.base.Backend``) would
        consume (a FILES source on the Arrow path when ``arrow``, a ``files.relation.ArrowBinding``,
        is given)."""
        from icesql.engine.sources.resolve import build_relation

        plan = self.objects.relation(name)
        if isinstance(plan, SourcePlan) and self.source_storage(plan):
            arrow = self.object_store_binding(plan, arrow)
        else:  # a view reads its sources with Spark's readers: none of them reaches an object store
            for source in self.view_sources(plan):
                if self.source_storage(source):
                    self.object_store_binding(source, None)  # the one-line error, with its hint
        return build_relation(
            backend,
            name,
            self.objects.relation,
            on_error=on_error,
            arrow=arrow,
            bind=self.kafka_binding,
        )

    def kafka_binding(self, plan: SourcePlan, binding: Any = None) -> Any:
        """A KAFKA source's binding with its connection's librdkafka settings (secrets resolved
        here, remembered for masking; never logged)."""
        import dataclasses

        from icesql.engine.base.secrets import SecretValues
        from icesql.engine.connections.kafka import SECRET_KEYS, client_config, executor_config
        from icesql.engine.sources.kafka.relation import KafkaBinding
        from icesql.plan import KafkaConnectionPlan

        assert plan.kafka is not None
        conn: Any = self.objects.connection(plan.kafka.connection)
        if not isinstance(conn, KafkaConnectionPlan):
            raise ExecutionError(
                f"source '{plan.name}': connection '{plan.kafka.connection}' is not a KAFKA connection",
                hint="CREATE CONNECTION ... TO KAFKA (BROKER = 'host:9092')",
            )
        secrets = SecretValues(self.secrets)
        conf = executor_config(client_config(conn, secrets))
        registry = self.registry_config(plan, secrets) if plan.kafka.registry else None
        return dataclasses.replace(binding or KafkaBinding(), conf=conf, secret_keys=SECRET_KEYS, registry=registry)

    def registry_config(self, plan: SourcePlan, secrets: Any) -> Any:
        """The schema registry a registry source reads its writer schemas from
        (``connections.registry.RegistryConfig``, its secrets resolved)."""
        from icesql.engine.connections.registry import RegistryConfig
        from icesql.plan import SchemaRegistryConnectionPlan

        assert plan.kafka is not None and plan.kafka.registry is not None
        conn: Any = self.objects.connection(plan.kafka.registry)
        if not isinstance(conn, SchemaRegistryConnectionPlan):
            raise ExecutionError(
                f"source '{plan.name}': connection '{plan.kafka.registry}' is not a CONFLUENT SCHEMA REGISTRY connection",
                hint="CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = 'https://registry:8081')",
            )
        return RegistryConfig.of(conn, secrets)

    def source_storage(self, plan: SourcePlan) -> list[Any]:
        """The storage connections (AWS, GCS, AZURE) a FILES source names."""
        from icesql.engine.connections.target import storage_of

        return [c for c in storage_of(self.objects, plan) if c is not None]

    def view_sources(self, plan: Any, seen: frozenset[str] = frozenset()) -> list[SourcePlan]:
        """The icesql sources a view reads, through the views it reads (none for a source, a
        Spark table, or a view that refers to itself: ``view_relation`` reports that)."""
        from icesql.plan import ViewPlan

        if not isinstance(plan, ViewPlan) or plan.name in seen:
            return []
        out: list[SourcePlan] = []
        for dep in plan.depends_on:
            found = self.objects.relation(dep)
            if isinstance(found, SourcePlan):
                out.append(found)
            else:
                out.extend(self.view_sources(found, seen | {plan.name}))
        return out

    def object_store_binding(self, plan: SourcePlan, arrow: Any) -> Any:
        """A FILES source on an object store (S3, GCS, Azure): listed and read by icesql with
        its connection's credentials (Spark's own connectors are not needed, nor installed)."""
        import dataclasses

        from icesql.engine.base.secrets import SecretValues, scrub
        from icesql.engine.connections import stores
        from icesql.engine.connections.stores.location import Location

        conn = self.source_storage(plan)[-1]
        store = stores.for_connection(conn)
        through = f"{store.keyword} CONNECTION {conn.name}"
        if arrow is None:
            raise ExecutionError(
                f"source '{plan.name}' reads {plan.path} through {through}, which only icesql's Arrow path can do",
                hint="leave ICESQL_ARROW_PATH unset (a sink reading the source directly takes the Arrow "
                "path; a view over it cannot)",
            )
        sec = SecretValues(self.secrets)
        io = self.source_io(plan)
        try:  # once at the start: wrong keys or a wrong endpoint say so here, naming the connection
            Location(plan.path or "", io).list()
        except OSError as e:
            detail = scrub(str(e).split("\n", 1)[0], sec.values)  # never a key in an error
            raise ExecutionError(
                f"source '{plan.name}' cannot list {plan.path} through {through}: {detail}",
                hint=store.check_hint.replace("the connection", f"connection {conn.name}"),
            ) from None
        return dataclasses.replace(arrow, io_properties=io)

    def source_io(self, plan: SourcePlan) -> dict[str, str]:
        """The FileIO properties a FILES source's files are listed and read with: its storage
        connection's credentials, region and endpoint (none for a local directory)."""
        from icesql.engine.base.secrets import SecretValues
        from icesql.engine.connections import stores

        sec = SecretValues(self.secrets)
        out: dict[str, str] = {}
        for conn in self.source_storage(plan):
            out = stores.layer(out, stores.connection_properties(conn, sec))
        return out
