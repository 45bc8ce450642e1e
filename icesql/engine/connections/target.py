"""A sink's target with its connections resolved once: the way from a plan to its table.

``resolve_target(plan, objects, secrets=..., home=...)`` looks up the sink's ICEBERG CATALOG
connection, that connection's AWS CONNECTION and GCS or AZURE CONNECTION and the sink's
``USING AWS | GCS | AZURE CONNECTION`` once, and returns a ``SinkTarget`` that the runner carries:

* ``load_catalog()`` -> the live pyiceberg catalog (its tables' FileIO layered with the sink's
  storage connection, ``fileio.use_sink_file_io``);
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
    SecretResolver,
    SinkPlan,
    SourcePlan,
    StorageConnectionPlan,
    ViewPlan,
)


class ObjectResolver(Protocol):
    def connection(self, name: str) -> Any: ...

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


def storage_connection(objects: ObjectResolver, name: str | None) -> StorageConnectionPlan | None:
    """The storage connection (AWS, GCS or AZURE) named ``name``; None for no name."""
    if not name:
        return None
    from icesql.engine.connections import stores

    conn = objects.connection(name)
    if not stores.is_storage_connection(conn):
        raise ExecutionError(f"connection '{name}' is not an AWS, GCS or AZURE connection")
    return conn


Storage = tuple["StorageConnectionPlan | None", ...]


def storage_of(objects: ObjectResolver, plan: Any) -> Storage:
    """The storage connections a catalog connection, sink or source names (its AWS CONNECTION,
    then its GCS or AZURE CONNECTION), resolved."""
    return (
        storage_connection(objects, getattr(plan, "aws_connection", None)),
        storage_connection(objects, getattr(plan, "storage_connection", None)),
    )


def load_connection_catalog(
    conn: CatalogConnectionPlan,
    *,
    aws: AwsConnectionPlan | None,
    storage: Storage = (),
    sink_storage: Storage = (),
    secrets: SecretResolver,
    home: Path,
) -> Any:
    """The live catalog of ``conn`` (``aws``: its AWS CONNECTION; ``storage``: its GCS or AZURE
    CONNECTION); its tables read and write files with ``sink_storage`` layered on top when
    given (the ``USING ... CONNECTION`` of a sink writing there: a catalog that vends no
    credentials). A sink's target and SELECT's table reader both load catalogs here."""
    from icesql.engine.connections.catalogs import load_catalog

    catalog = load_catalog(conn, aws=aws, storage=storage, secrets=secrets, home=home)
    if any(s is not None for s in sink_storage):
        from icesql.engine.connections.fileio import use_sink_file_io

        use_sink_file_io(catalog, sink_storage, secrets=secrets)
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
    catalog_storage: StorageConnectionPlan | None = None  # the catalog's GCS or AZURE CONNECTION
    sink_storage: StorageConnectionPlan | None = None  # the sink's USING GCS or AZURE CONNECTION

    @property
    def catalog_stores(self) -> Storage:
        return (self.catalog_aws, self.catalog_storage)

    @property
    def sink_stores(self) -> Storage:
        return (self.sink_aws, self.sink_storage)

    @property
    def assumes_role(self) -> bool:
        """Whether the sink reaches the catalog or its storage with an assumed role's temporary
        credentials (they expire during a run)."""
        return any(a is not None and a.assume_role_arn for a in (self.catalog_aws, self.sink_aws))

    def load_catalog(self) -> Any:
        # the driver's commits (manifests, manifest lists) use the sink's storage access too
        return load_connection_catalog(
            self.catalog,
            aws=self.catalog_aws,
            storage=(self.catalog_storage,),
            sink_storage=self.sink_stores,
            secrets=self.secrets,
            home=self.home,
        )

    def io_properties(self, table: Any) -> Any:
        from icesql.engine.connections.fileio import io_properties

        return io_properties(table=table, sink=self.sink_stores, catalog=self.catalog_stores, secrets=self.secrets)

    def where(self, service: str) -> tuple[str, str | None]:
        """What a failure on ``service`` (``failures.service_of``: ``"catalog"`` or
        ``"storage"``) names: the connection the sink used there, and its address."""
        from icesql.engine.connections import stores
        from icesql.engine.connections.catalog_kinds import kind_of, label

        if service == "catalog":
            return label(self.catalog), kind_of(self.catalog).endpoint(self.catalog, self.catalog_aws)
        used = [c for c in (*self.sink_stores, *self.catalog_stores) if c is not None]
        if not used:  # the catalog vends the storage credentials
            return f"the storage of {label(self.catalog)}", None
        store = stores.for_connection(used[0])
        return store.label(used[0]), store.endpoint(used[0])

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
        catalog_storage=storage_connection(objects, catalog.storage_connection),
        sink_storage=storage_connection(objects, plan.storage_connection),
    )


__all__ = [
    "ObjectResolver",
    "SinkTarget",
    "load_connection_catalog",
    "resolve_target",
    "storage_connection",
    "storage_of",
]
