"""The registry of object stores, keyed by URL scheme, the way pyiceberg picks a FileIO by
scheme (``pyiceberg.io.SCHEMA_TO_FILE_IO``).

======  ==========================  ==============  ===========================================
store   schemes                     connection      credentials -> FileIO properties
======  ==========================  ==============  ===========================================
s3      s3, s3a, s3n                AWS             ``s3.*`` (keys, role, default chain)
gcs     gs, gcs                     GCS             ``gcs.*`` (an OAuth2 token from the key file,
                                                    anonymous on an emulator, default chain)
azure   abfs, abfss, wasb, wasbs    AZURE           ``adls.*`` (account key, SAS, default chain)
file    file, a plain path          -               -
hdfs    hdfs, viewfs                -               Hadoop's own
======  ==========================  ==============  ===========================================

Everything that reaches storage goes through here:

* ``connection_properties(plan, sec)`` -> a storage connection's FileIO properties;
* ``layer(base, top)`` -> ``top`` over ``base``, each store's credentials replaced as a unit;
* ``filesystem(io, location)`` -> the one pyarrow filesystem adapter (listing a FILES source,
  orphan cleanup, the Spark Connect drop box);
* ``load_file_io(properties, location)`` -> a FileIO that can open ``location`` (Azure's needs
  icesql's pyarrow FileIO, not pyiceberg's fsspec choice);
* ``failing_store(text)`` -> the store whose client a failure's text names;
* ``validate(plan, secrets)`` -> ``VALIDATE CONNECTION`` of a storage connection.

Adding a store is one module with an ``ObjectStore`` and one ``register`` call below.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from icesql.engine.base.secrets import SecretValues
from icesql.engine.connections.stores.azure import AZURE
from icesql.engine.connections.stores.base import (
    FileIoProperties,
    Filesystem,
    Listed,
    ObjectStore,
    split_location,
)
from icesql.engine.connections.stores.gcs import GCS
from icesql.engine.connections.stores.s3 import S3

LOCAL = ObjectStore(name="file", schemes=("file",), check_hint="check the path")
# HDFS through pyarrow's HadoopFileSystem (credentials are Hadoop's own: no connection); the
# filesystem's paths leave out the namenode, which the URI keeps
HDFS = ObjectStore(
    name="hdfs",
    schemes=("hdfs", "viewfs"),
    split=lambda netloc, path: path,
    join=lambda fs_path, scheme, netloc: f"{scheme}://{netloc}{fs_path}",
)

_BY_NAME: dict[str, ObjectStore] = {}
_BY_SCHEME: dict[str, ObjectStore] = {}
_BY_KIND: dict[str, ObjectStore] = {}


def register(store: ObjectStore) -> None:
    """Add a store: its schemes and its connection kind map to it."""
    _BY_NAME[store.name] = store
    for scheme in store.schemes:
        _BY_SCHEME[scheme] = store
    if store.connection_kind:
        _BY_KIND[store.connection_kind] = store


for _store in (S3, GCS, AZURE, LOCAL, HDFS):
    register(_store)


def stores() -> list[ObjectStore]:
    return list(_BY_NAME.values())


def scheme_of(location: str) -> str:
    """The URL scheme of ``location``, lower case ('file' for a plain path)."""
    return split_location(location)[0] or "file"


def for_scheme(scheme: str) -> ObjectStore | None:
    return _BY_SCHEME.get(scheme.lower())


def for_location(location: str) -> ObjectStore | None:
    """The store serving ``location``; None for a scheme no store serves (hdfs://)."""
    return for_scheme(scheme_of(location))


def for_connection(plan: Any) -> ObjectStore:
    """The store a storage connection plan (AWS, GCS, AZURE) holds credentials for."""
    store = _BY_KIND.get(getattr(plan, "kind", ""))
    if store is None:
        raise TypeError(f"{type(plan).__name__} is not a storage connection")
    return store


def is_storage_connection(plan: Any) -> bool:
    return getattr(plan, "kind", None) in _BY_KIND


def connection_properties(plan: Any, sec: SecretValues) -> FileIoProperties:
    """The FileIO properties of one storage connection (secrets resolved through ``sec``)."""
    return dict(for_connection(plan).file_io(plan, sec))


def credential_keys() -> tuple[str, ...]:
    """Every store's credential properties."""
    return tuple(k for s in _BY_NAME.values() for k in s.credential_keys)


def layer(base: Mapping[str, str], top: Mapping[str, str]) -> dict[str, str]:
    """``top`` over ``base``. For each store, a layer that carries any of its credential
    properties replaces all of them below it (no vended session token next to another key)."""
    out = dict(base)
    for store in _BY_NAME.values():
        if any(k in top for k in store.credential_keys):
            for k in store.credential_keys:
                out.pop(k, None)
    out.update(top)
    return out


def with_file_io_impl(properties: Mapping[str, Any], location: str | None) -> dict[str, Any]:
    """``properties`` naming the FileIO ``location``'s store needs, unless they name one."""
    props = dict(properties)
    store = for_location(location) if location else None
    if store is not None and store.file_io_impl and "py-io-impl" not in props:
        props["py-io-impl"] = store.file_io_impl
    return props


def load_file_io(properties: Mapping[str, str], location: str | None) -> Any:
    """pyiceberg's ``load_file_io`` with the FileIO a store needs for ``location``."""
    from pyiceberg.io import load_file_io as pyiceberg_load

    return pyiceberg_load(with_file_io_impl(properties, location), location)


def filesystem(io: Any, location: str) -> Filesystem:
    """The pyarrow filesystem of ``location`` through ``io`` (a FileIO, or FileIO properties).

    A FileIO that is not pyarrow's (pyiceberg's fsspec FileIO, which a catalog may pick for
    ``abfs://``) lends its properties to one that is."""
    store = for_location(location) or LOCAL
    if isinstance(io, Mapping):
        if store is LOCAL:  # no pyiceberg to list a local directory
            from pyarrow import fs as pafs

            return Filesystem(pafs.LocalFileSystem(), LOCAL, location)
        io = load_file_io(io, location)
    if getattr(io, "fs_by_scheme", None) is None or getattr(io, "parse_location", None) is None:
        io = load_file_io({**dict(io.properties), "py-io-impl": _pyarrow_io(location)}, location)
    scheme, netloc, _ = io.parse_location(location)
    return Filesystem(io.fs_by_scheme(scheme, netloc), store, location, io)


def _pyarrow_io(location: str) -> str:
    store = for_location(location)
    return (store.file_io_impl if store else None) or "pyiceberg.io.pyarrow.PyArrowFileIO"


def canonical_netloc(scheme: str, netloc: str) -> str:
    """``netloc`` as the store's filesystem names it (Azure: the container alone)."""
    store = for_scheme(scheme)
    return netloc if store is None else store.netloc_key(netloc)


def failing_store(text: str) -> ObjectStore | None:
    """The store whose client's words ``text`` holds (the text of a failure's chain)."""
    for store in _BY_NAME.values():
        if store.failure is not None and store.failure.search(text):
            return store
    return None


__all__ = [
    "FileIoProperties",
    "Filesystem",
    "Listed",
    "ObjectStore",
    "canonical_netloc",
    "connection_properties",
    "credential_keys",
    "failing_store",
    "filesystem",
    "for_connection",
    "for_location",
    "for_scheme",
    "is_storage_connection",
    "layer",
    "load_file_io",
    "register",
    "scheme_of",
    "stores",
    "with_file_io_impl",
]
