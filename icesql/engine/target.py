"""A sink's target with its connections resolved once: the way from a plan to its table.

``resolve_target(plan, objects, secrets=..., home=...)`` looks up the sink's ICEBERG CATALOG
connection, that connection's AWS CONNECTION and the sink's ``USING AWS CONNECTION`` once, and
returns a ``SinkTarget`` that the runner carries:

* ``load_catalog()`` -> the live pyiceberg catalog (its tables' FileIO layered with the sink's
  AWS connection, ``fileio.use_sink_file_io``);
* ``io_properties(table)`` -> the FileIO properties executors write the table's files with;
* ``load_table()`` -> the existing table (``compact``), or a clear error when it is missing.

Secret values are not held: they are resolved through ``secrets`` at each call (credentials of
an assumed role stay fresh; a rotated secret applies at the next connection).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from icesql.errors import ExecutionError
from icesql.plan import (
    AwsConnectionPlan,
    CatalogConnectionPlan,
    KafkaConnectionPlan,
    SecretResolver,
    SinkPlan,
    SourcePlan,
    ViewPlan,
)


class ObjectResolver(Protocol):
    def connection(self, name: str) -> AwsConnectionPlan | CatalogConnectionPlan | KafkaConnectionPlan: ...

    def relation(self, name: str) -> SourcePlan | ViewPlan | None: ...


def catalog_connection(objects: ObjectResolver, name: str) -> CatalogConnectionPlan:
    conn = objects.connection(name)
    if not isinstance(conn, CatalogConnectionPlan):
        raise ExecutionError(f"connection '{name}' is not an ICEBERG CATALOG connection")
    return conn


def aws_connection(objects: ObjectResolver, name: str | None) -> AwsConnectionPlan | None:
    if not name:
        return None
    conn = objects.connection(name)
    if not isinstance(conn, AwsConnectionPlan):
        raise ExecutionError(f"connection '{name}' is not an AWS connection")
    return conn


def load_connection_catalog(
    conn: CatalogConnectionPlan,
    *,
    aws: AwsConnectionPlan | None,
    storage_aws: AwsConnectionPlan | None,
    secrets: SecretResolver,
    home: Path,
) -> Any:
    """The live catalog of ``conn``; its tables read and write files with ``storage_aws`` when
    given (the ``USING AWS CONNECTION`` of a sink writing there: a catalog that vends no
    credentials). A sink's target and SELECT's table reader both load catalogs here."""
    from icesql.engine.catalogs import load_catalog

    catalog = load_catalog(conn, aws=aws, secrets=secrets, home=home)
    if storage_aws is not None:
        from icesql.engine.fileio import use_sink_file_io

        use_sink_file_io(catalog, storage_aws, secrets=secrets)
    return catalog


@dataclass(frozen=True)
class SinkTarget:
    """Where one sink writes: the table, its catalog connection and the storage credentials."""

    plan: SinkPlan
    catalog: CatalogConnectionPlan
    catalog_aws: AwsConnectionPlan | None  # the catalog connection's AWS CONNECTION
    sink_aws: AwsConnectionPlan | None  # the sink's USING AWS CONNECTION
    secrets: SecretResolver
    home: Path

    @property
    def assumes_role(self) -> bool:
        """Whether the sink reaches the catalog or its storage with an assumed role's temporary
        credentials (they expire during a run)."""
        return any(a is not None and a.assume_role_arn for a in (self.catalog_aws, self.sink_aws))

    def load_catalog(self) -> Any:
        # the driver's commits (manifests, manifest lists) use the sink's storage access too
        return load_connection_catalog(
            self.catalog, aws=self.catalog_aws, storage_aws=self.sink_aws, secrets=self.secrets, home=self.home
        )

    def io_properties(self, table: Any) -> Any:
        from icesql.engine.fileio import io_properties

        return io_properties(
            table=table, sink_aws=self.sink_aws, catalog_aws=self.catalog_aws, secrets=self.secrets
        )

    def where(self, service: str) -> tuple[str, str | None]:
        """What a failure on ``service`` (``failures.service_of``: ``"catalog"`` or
        ``"storage"``) names: the connection the sink used there, and its address."""
        from icesql.engine.catalog_kinds import kind_of, label

        if service == "catalog":
            return label(self.catalog), kind_of(self.catalog).endpoint(self.catalog, self.catalog_aws)
        aws = self.sink_aws or self.catalog_aws
        if aws is None:  # the catalog vends the storage credentials
            return f"the storage of {label(self.catalog)}", None
        return f"AWS connection '{aws.name}'", aws.endpoint

    def load_table(self) -> Any:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self.load_catalog().load_table((*self.plan.namespace, self.plan.table))
        except NoSuchTableError:
            raise ExecutionError(
                f"sink '{self.plan.name}': table {self.plan.table_identifier} does not exist yet",
                hint="the sink creates it when it first runs",
            ) from None


def resolve_target(
    plan: SinkPlan, objects: ObjectResolver, *, secrets: SecretResolver, home: Path
) -> SinkTarget:
    """Look up the connections of ``plan`` once."""
    catalog = catalog_connection(objects, plan.catalog_connection)
    return SinkTarget(
        plan=plan,
        catalog=catalog,
        catalog_aws=aws_connection(objects, catalog.aws_connection),
        sink_aws=aws_connection(objects, plan.aws_connection),
        secrets=secrets,
        home=Path(home),
    )


__all__ = ["ObjectResolver", "SinkTarget", "load_connection_catalog", "resolve_target"]
