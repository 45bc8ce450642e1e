"""Catalog connection plans -> live pyiceberg catalogs, and connection checks.

Public API:

* ``load_catalog(conn, *, aws, secrets, home)`` -> a pyiceberg ``Catalog`` for every catalog type
  (the registry in ``catalog_kinds``: ``local``, ``sql``, ``rest``, ``s3tables``, ``glue``,
  ``hive``) and every REST auth path (OAuth2 client credentials, HTTP basic, bearer token, SigV4).
* ``catalog_properties(conn, *, aws, secrets, home)`` -> the pyiceberg properties ``load_catalog``
  passes (holds secret values: never log or print it).
* ``validate_connection(conn, *, aws, secrets, home)`` -> connects once (lists namespaces, or for
  an AWS connection makes one cheap call) and turns every failure into a one-line
  ``ExecutionError`` naming the connection and the cause (``failures``).

Secrets are resolved through ``secrets(name)`` at call time and never appear in an error
message, a hint, an exception chain or a log record (``secrets``, ``failures.guarded``). FileIO
properties for executors live in ``fileio``, AWS credentials in ``aws``.

pyiceberg, boto3, requests and sqlalchemy are imported lazily, inside functions: importing this
module stays cheap.

What cannot be tested on this machine (no AWS access): AWS's own Glue, the real S3 Tables
endpoint, AWS's STS and the default AWS credential chain beyond environment variables. The
``rest`` and ``s3tables`` paths are tested against SeaweedFS ``weed mini``, ``glue`` against
moto's server, ``hive`` against a Hive metastore (2.3, from the pyspark wheel).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icesql.engine.base.secrets import SecretValues
from icesql.engine.connections import aws as aws_credentials
from icesql.engine.connections import stores
from icesql.engine.connections.catalog_kinds import build_properties, kind_of, label
from icesql.engine.connections.failures import guarded
from icesql.plan import AwsConnectionPlan, CatalogConnectionPlan, SecretResolver, StorageConnectionPlan

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog


Storage = Sequence["StorageConnectionPlan | None"]


def catalog_properties(
    conn: CatalogConnectionPlan,
    *,
    aws: AwsConnectionPlan | None,
    storage: Storage = (),
    secrets: SecretResolver,
    home: Path,
) -> dict[str, Any]:
    """The pyiceberg properties ``load_catalog`` uses. Holds secret values: never print it."""
    sec = SecretValues(secrets)
    return guarded(
        lambda: build_properties(conn, aws, sec, home, storage=storage), label(conn), conn.uri, sec, "connect"
    )


def load_catalog(
    conn: CatalogConnectionPlan,
    *,
    aws: AwsConnectionPlan | None,
    storage: Storage = (),
    secrets: SecretResolver,
    home: Path,
) -> Catalog:
    """A live pyiceberg catalog for ``conn``; ``aws`` is its AWS CONNECTION and ``storage`` its
    GCS or AZURE CONNECTION, resolved by the caller.

    REST catalogs talk to the server here (config, OAuth2 token); failures become
    ``ExecutionError`` naming the connection, with no secret value anywhere in them. The
    catalog's tables open their files through the FileIO their location's store needs
    (``stores.load_file_io``).
    """
    sec = SecretValues(secrets)
    kind = kind_of(conn)

    def build() -> Catalog:
        from icesql import settings
        from icesql.engine.base.pyiceberg_catalogs import cheap_commits, override_file_io

        catalog = kind.construct(
            conn.name,
            build_properties(conn, aws, sec, home, storage=storage),
            timeout=settings.CATALOG_TIMEOUT.get_float() or 0.0,
        )
        override_file_io(
            catalog, lambda original, props, location: original(stores.with_file_io_impl(props, location), location)
        )
        return cheap_commits(catalog)

    return guarded(build, label(conn), kind.endpoint(conn, aws), sec, "connect")


def validate_connection(
    conn: CatalogConnectionPlan | StorageConnectionPlan,
    *,
    aws: AwsConnectionPlan | None = None,
    storage: Storage = (),
    secrets: SecretResolver,
    home: Path,
) -> list[tuple[str, ...]]:
    """Connect once. Catalogs: list namespaces (returned). A storage connection (AWS, GCS,
    AZURE): one cheap authenticated call (``validate_storage_connection``)."""
    if not isinstance(conn, CatalogConnectionPlan):
        validate_storage_connection(conn, secrets=secrets)
        return []
    catalog = load_catalog(conn, aws=aws, storage=storage, secrets=secrets, home=home)
    sec = SecretValues(secrets)
    return guarded(
        lambda: [tuple(ns) for ns in catalog.list_namespaces()],
        label(conn),
        kind_of(conn).endpoint(conn, aws),
        sec,
        "list namespaces",
    )


def validate_aws_connection(aws: AwsConnectionPlan, *, secrets: SecretResolver) -> None:
    """``check_connection`` with its failure as one line naming the connection."""
    sec = SecretValues(secrets)
    guarded(lambda: aws_credentials.check_connection(aws, sec), aws_credentials.label(aws), aws.endpoint, sec, "validate")


def validate_storage_connection(plan: Any, *, secrets: SecretResolver) -> None:
    """One cheap authenticated call with a storage connection (its store's own); a failure is one
    line naming it."""
    store = stores.for_connection(plan)
    sec = SecretValues(secrets)
    guarded(lambda: store.validate(plan, sec), store.label(plan), store.endpoint(plan), sec, "validate")


__all__ = [
    "catalog_properties",
    "load_catalog",
    "validate_aws_connection",
    "validate_connection",
    "validate_storage_connection",
]
