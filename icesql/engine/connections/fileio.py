"""FileIO properties: how the driver and Spark's executors reach a table's storage.

* ``connection_properties(plan, secrets=...)`` -> the FileIO properties of one storage
  connection (AWS, GCS, AZURE: ``icesql.engine.connections.stores``);
* ``io_properties(table=..., sink=..., catalog=..., secrets=...)`` -> what executors use to
  write a table's data files, layered (later wins): the catalog's storage connections, what the
  catalog configured and vends for the table, the sink's ``USING ... CONNECTION``;
* ``use_sink_file_io(catalog, sink, secrets=...)`` -> the driver's commits use the same.

``IoProperties`` is a plain picklable ``dict[str, str]`` whose repr hides credentials; only
FileIO keys survive the layering, so catalog credentials (an OAuth2 secret, a bearer token, a
basic-auth password) never reach executors.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from icesql.engine.base.secrets import MASK, SecretValues
from icesql.engine.connections import stores
from icesql.engine.connections.failures import guarded
from icesql.plan import SecretResolver, StorageConnectionPlan

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

# FileIO property keys worth shipping to executors (pyiceberg FileIO implementations read these).
_FILE_IO_PREFIXES = ("s3.", "client.", "gcs.", "adls.", "oss.", "hf.", "hdfs.", "pyarrow.")
_FILE_IO_KEYS = frozenset({"py-io-impl"})
_SENSITIVE_KEY = re.compile(r"secret|token|password|credential|sas|key$", re.IGNORECASE)
_NOT_SENSITIVE_KEYS = frozenset(
    {"s3.access-key-id", "client.access-key-id", "adls.account-name", "gcs.oauth2.token-expires-at"}
)

Storage = Sequence["StorageConnectionPlan | None"]


class IoProperties(dict[str, str]):
    """FileIO properties for executors: a plain picklable dict whose repr hides credentials."""

    def __repr__(self) -> str:
        shown = {k: (MASK if is_sensitive_key(k) else v) for k, v in self.items()}
        return f"IoProperties({shown!r})"

    __str__ = __repr__


def is_sensitive_key(key: str) -> bool:
    return key not in _NOT_SENSITIVE_KEYS and bool(_SENSITIVE_KEY.search(key))


def file_io_only(props: dict[str, Any]) -> dict[str, str]:
    return {
        k: v
        for k, v in props.items()
        if isinstance(v, str) and (k in _FILE_IO_KEYS or k.startswith(_FILE_IO_PREFIXES))
    }


layer = stores.layer


def _label(plans: Storage) -> tuple[str, str | None]:
    for plan in reversed(plans):
        if plan is not None:
            store = stores.for_connection(plan)
            return store.label(plan), store.endpoint(plan)
    return "table FileIO", None


def connection_properties(plan: StorageConnectionPlan, *, secrets: SecretResolver) -> IoProperties:
    """FileIO properties of one storage connection (an AWS connection assumes its role here)."""
    sec = SecretValues(secrets)
    label, endpoint = _label([plan])
    return IoProperties(guarded(lambda: stores.connection_properties(plan, sec), label, endpoint, sec, "connect"))


def io_properties(
    *,
    table: Table | None = None,
    sink: Storage = (),
    catalog: Storage = (),
    secrets: SecretResolver,
) -> IoProperties:
    """FileIO properties for writing a table's data files from Spark executors (see the module
    docstring for the layers); ``sink`` and ``catalog`` are storage connection plans (None
    entries are skipped)."""
    sec = SecretValues(secrets)

    def build() -> dict[str, str]:
        out: dict[str, str] = {}
        for plan in catalog:
            if plan is not None:
                out = layer(out, stores.connection_properties(plan, sec))
        if table is not None:
            out = layer(out, file_io_only(dict(table.io.properties)))
        for plan in sink:
            if plan is not None:
                out = layer(out, stores.connection_properties(plan, sec))
        return out

    label, endpoint = _label([*catalog, *sink])
    return IoProperties(guarded(build, label, endpoint, sec, "connect"))


def use_sink_file_io(catalog: Catalog, sink: Storage, *, secrets: SecretResolver) -> Catalog:
    """Make the tables ``catalog`` loads or creates use the sink's storage connections
    (``USING AWS | GCS | AZURE CONNECTION``) for their files, layered as ``io_properties``
    layers them for executors.

    The driver writes manifests and manifest lists with ``table.io``, and ``Table.refresh()``
    takes a new FileIO from the catalog on every commit: without this, a catalog that neither
    vends storage credentials nor has a storage connection of its own (a REST catalog with
    OAuth2) commits with a FileIO that has no endpoint and no keys, although the executors wrote
    the data files with the sink's.
    """
    from icesql.engine.base.pyiceberg_catalogs import override_file_io

    def load(original: Any, properties: Any, location: str | None) -> Any:
        # per load (every commit refreshes): assumed-role credentials and tokens stay fresh
        top: dict[str, str] = {}
        for plan in sink:
            if plan is not None:
                top = layer(top, dict(connection_properties(plan, secrets=secrets)))
        base = dict(original(properties, location).properties)
        return stores.load_file_io(layer(base, top), location)

    return override_file_io(catalog, load)


__all__ = [
    "IoProperties",
    "connection_properties",
    "file_io_only",
    "io_properties",
    "is_sensitive_key",
    "layer",
    "use_sink_file_io",
]
