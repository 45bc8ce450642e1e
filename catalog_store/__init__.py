"""icesql's catalog store: SQLite persistence of the objects users declare in SQL.

A separate package from ``icesql`` (it imports nothing from it, and nothing outside the
standard library except ``cryptography``, lazily, for encrypting secrets at rest).

Schema (see ``migrations.py`` for the numbered steps; ``schema_migrations`` records them):

``objects``
    one row per secret, connection, source, view and sink: a stable uuid4 ``object_id``,
    ``kind``, ``name``, ``namespace`` (sources and views share ``relation``; names are unique
    per namespace), the canonical ``sql``, the plan ``definition`` as JSON, ``hidden`` (internal
    inline secrets) and timestamps.
``dependencies``
    (object, depends_on, position). ``depends_on`` is ``ON DELETE RESTRICT``, so even a bug
    cannot leave an object depending on a dropped one.
``secrets``
    the only place a secret's value lives: plain, or a Fernet token (``encoding``) when
    ``ICESQL_SECRET_KEY`` is set.
``sink_state``
    per sink: status, version (the fencing epoch), commit counters, last snapshot/progress/error,
    and the restart attempt and next attempt time of a sink retrying after a transient failure.
``meta``
    key/value: the encryption salt and key check.

Usage::

    from catalog_store import CatalogStore
    with CatalogStore(home / "catalog.db") as store:
        store.create_secret("pw", "hunter2")
        store.create_object("connection", "cat", "CREATE CONNECTION cat ...", {...}, [("secret", "pw")])
        epoch = store.bump_sink_version("orders_sink")
"""

from __future__ import annotations

from .errors import (
    DependentObjectsError,
    ObjectExistsError,
    ObjectNotFoundError,
    StaleVersionError,
    StoreError,
    StoreOpenError,
)
from .migrations import MIGRATIONS, Migration
from .models import KINDS, SINK_STATUSES, SinkState, SinkTableState, StoredObject
from .store import CatalogStore

__all__ = [
    "KINDS",
    "MIGRATIONS",
    "SINK_STATUSES",
    "CatalogStore",
    "DependentObjectsError",
    "Migration",
    "ObjectExistsError",
    "ObjectNotFoundError",
    "SinkState",
    "SinkTableState",
    "StaleVersionError",
    "StoreError",
    "StoreOpenError",
    "StoredObject",
]
