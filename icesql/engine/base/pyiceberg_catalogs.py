"""The private pyiceberg pieces a catalog object takes, in one place with ``pyiceberg_internals``
(``tests/engine/test_pyiceberg_internals.py`` exercises them):

* ``Catalog._load_file_io`` (replaced per catalog object): the driver's commits of a sink with
  ``USING AWS CONNECTION`` use that connection's storage access (``override_file_io``; see
  ``icesql.engine.connections.fileio``);
* ``Catalog._update_and_stage_table`` and ``_parse_metadata_version`` (replaced per catalog
  object): commits build the new metadata without pyiceberg's deep copy (``cheap_commits``,
  through ``pyiceberg_internals.staged_metadata``);
* the REST catalog's ``requests`` sessions: every request gets a timeout (``timed_sessions``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from icesql.engine.base.pyiceberg_internals import staged_metadata
from icesql.engine.base.pyiceberg_v3 import enable_v3


def override_file_io(catalog: Any, load: Callable[[Callable[..., Any], Any, str | None], Any]) -> Any:
    """Make ``catalog`` build its tables' FileIO with ``load(original, properties, location)``,
    where ``original`` is the catalog's own loader; returns ``catalog``."""
    original = catalog._load_file_io

    def _load_file_io(properties: Any = None, location: str | None = None) -> Any:
        return load(original, properties or {}, location)

    catalog._load_file_io = _load_file_io
    return catalog

def cheap_commits(catalog: Any) -> Any:
    """Make ``catalog``'s commits to an existing table build the new metadata with
    ``staged_metadata`` (no deep copy of the whole metadata); returns ``catalog``.

    ``Catalog._update_and_stage_table`` (replaced per catalog object, as pyiceberg 0.12 writes it
    but for the copy) is what the SQL, Hive, Glue and DynamoDB catalogs commit through; a REST
    catalog's server builds the metadata itself. Creating a table keeps pyiceberg's own path,
    which validates the new metadata.
    """
    enable_v3()
    original = getattr(catalog, "_update_and_stage_table", None)
    if original is None:  # a REST catalog
        return catalog

    def _update_and_stage_table(
        current_table: Any, table_identifier: Any, requirements: Any, updates: Any
    ) -> Any:
        if current_table is None:
            return original(current_table, table_identifier, requirements, updates)
        from pyiceberg.table import StagedTable
        from pyiceberg.table.locations import load_location_provider

        for requirement in requirements:
            requirement.validate(current_table.metadata)
        updated = staged_metadata(current_table.metadata, updates, current_table.metadata_location)
        version = catalog._parse_metadata_version(current_table.metadata_location) + 1
        location = load_location_provider(updated.location, updated.properties).new_table_metadata_file_location(
            version
        )
        return StagedTable(
            identifier=table_identifier,
            metadata=updated,
            metadata_location=location,
            io=catalog._load_file_io(properties=updated.properties, location=location),
            catalog=catalog,
        )

    catalog._update_and_stage_table = _update_and_stage_table
    return catalog


def timed_sessions(catalog_class: Any, seconds: float) -> Any:
    """``catalog_class``, or, for a REST catalog, a subclass whose every ``requests`` session gets
    a default timeout of ``seconds``: pyiceberg 0.12's ``RestCatalog`` sends its calls without one,
    so a catalog that stops answering (a blackholed network, a hung server) hangs the sink for
    ever. The subclass wraps each new session in ``_config_headers`` (the first thing pyiceberg does
    to it) and again when ``_create_session`` returns (for SigV4's adapter), so the constructor's
    own calls (the OAuth2 token, the config) have the timeout too, not only the ones after it."""
    if seconds <= 0 or not hasattr(catalog_class, "_create_session"):
        return catalog_class

    class Timed(catalog_class):  # type: ignore[misc]
        def _config_headers(self, session: Any) -> None:
            # the first thing done to a new session, before the OAuth2 token is fetched with it
            super()._config_headers(session)
            set_request_timeout(session, seconds)

        def _create_session(self) -> Any:
            session = super()._create_session()
            set_request_timeout(session, seconds)  # adapters mounted since (SigV4's)
            return session

    Timed.__name__ = Timed.__qualname__ = catalog_class.__name__
    return Timed


def set_request_timeout(session: Any, seconds: float) -> None:
    """Wrap the ``send`` of each adapter a ``requests`` session has mounted (the SigV4 adapter of
    S3 Tables included) to default ``timeout`` to ``seconds``."""
    for adapter in set(session.adapters.values()):
        if getattr(adapter, "_icesql_timeout", None) is not None:
            continue
        send = adapter.send

        def timed(request: Any, *args: Any, _send: Any = send, **kwargs: Any) -> Any:
            if kwargs.get("timeout") is None:
                kwargs["timeout"] = seconds
            return _send(request, *args, **kwargs)

        adapter.send = timed
        adapter._icesql_timeout = seconds


__all__ = ["cheap_commits", "override_file_io", "set_request_timeout", "timed_sessions"]
