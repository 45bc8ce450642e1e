"""``CatalogStore``: the catalog of secrets, connections, sources, views and sinks of an icesql
home, kept in one SQLite file.

The store is a facade over four modules, one table (or file) each: ``database`` (the file, its
connection and transactions: WAL, ``BEGIN IMMEDIATE`` for every write, owner-only files, a
read-only fallback; its docstring says why), ``objects`` (objects and their dependencies),
``secret_codec`` (secret values in clear or encrypted) and ``sink_state`` (a sink's runtime
state and fencing). Every public method validates its arguments and runs in one transaction.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import crypto, objects, sink_state
from .database import MEMORY, Database
from .errors import DependentObjectsError, StoreError, describe
from .migrations import MIGRATIONS, applied_versions
from .models import KINDS, NAMESPACES, SinkState, SinkTableState, StoredObject
from .secret_codec import SecretCodec, check_value

DEFAULT_TIMEOUT = 10.0


class CatalogStore:
    """Persistent catalog of secrets, connections, sources, views and sinks.

    ``path`` is the SQLite file (created owner-only, with its directory, when missing; the
    string ``":memory:"`` gives a throwaway store). ``secret_key`` (default: the
    ``ICESQL_SECRET_KEY`` environment variable) turns on encryption of secret values at rest.
    Opening a store written by an older release upgrades its schema. ``read_only`` (default:
    only when the file cannot be written) opens it for reading only.

    Every method is atomic; group several in ``with store.transaction():`` to make them atomic
    together. Instances are safe to share between threads; each process opens its own.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        secret_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        read_only: bool | None = None,
    ) -> None:
        if secret_key is None:
            secret_key = os.environ.get("ICESQL_SECRET_KEY") or None
        self._secrets = SecretCodec(secret_key)
        self._db = Database(path, timeout=timeout, read_only=read_only)

    # ------------------------------------------------------------------ lifecycle

    @property
    def path(self) -> Path:
        """The database file."""
        return self._db.path

    @property
    def read_only(self) -> bool:
        """True when the store was opened for reading only (every write raises StoreError)."""
        return self._db.read_only

    @property
    def encrypted(self) -> bool:
        """True when a secret key is set, so new secret values are encrypted at rest."""
        return self._secrets.encrypted

    @property
    def schema_version(self) -> int:
        """The newest migration applied to this store."""
        with self._db.reading() as conn:
            return max(applied_versions(conn), default=0)

    def close(self) -> None:
        """Close the connection; further calls raise ``StoreError``. Idempotent."""
        self._db.close()

    def __enter__(self) -> CatalogStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CatalogStore({str(self.path)!r}, encrypted={self.encrypted})"

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def transaction(self) -> Iterator[CatalogStore]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (rolled back on any exception).

        Takes the write lock up front (waiting up to the busy timeout for another process), so
        what is read inside is still true at commit. Nested use becomes a savepoint.
        """
        with self._db.transaction():
            yield self

    def _connection(self) -> sqlite3.Connection:
        # white-box tests read the tables through it
        return self._db.connection()


    # ------------------------------------------------------------------ objects

    def create_object(
        self,
        kind: str,
        name: str,
        sql: str,
        definition: dict[str, Any],
        dependencies: Iterable[tuple[str, str]] = (),
        *,
        if_not_exists: bool = False,
    ) -> bool:
        """Store a new connection, source, view or sink.

        Returns False (and changes nothing) when the name is taken and ``if_not_exists`` is
        set; otherwise raises ``ObjectExistsError`` naming the kind that holds the name (sources
        and views share one namespace). Raises ``ObjectNotFoundError`` when a dependency
        (``(kind, name)`` pairs) is missing. A sink gets a fresh runtime state (version 0).
        Secrets are created with ``create_secret``.
        """
        kind, name = objects.check_kind(kind), objects.check_name(name)
        if kind == "secret":
            raise StoreError("secrets are created with create_secret(), which stores the value")
        with self._db.transaction() as conn:
            return objects.insert_object(conn, kind, name, sql, definition, dependencies, if_not_exists) is not None

    def replace_object(
        self,
        kind: str,
        name: str,
        sql: str,
        definition: dict[str, Any],
        dependencies: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Replace an object's SQL, definition and dependencies (ALTER).

        The object keeps its ``object_id``, ``created_at``, its dependents and, for a sink, its
        runtime state. Raises ``ObjectNotFoundError`` for a missing object or dependency and
        ``StoreError`` when the new dependencies would form a cycle. Hidden inline secrets the
        object no longer uses (and nothing else uses) are dropped.
        """
        kind, name = objects.check_kind(kind), objects.check_name(name)
        if kind == "secret":
            raise StoreError("a secret's value is changed with alter_secret()")
        encoded = objects.encode_definition(kind, name, definition)
        with self._db.transaction() as conn:
            object_id = objects.require_id(conn, kind, name)
            dep_ids = objects.resolve_dependencies(conn, (kind, name), dependencies)
            for dep_id, dep in dep_ids:
                if objects.reaches(conn, dep_id, object_id):
                    raise StoreError(
                        f"{describe(kind, name)} cannot depend on {describe(*dep)}: "
                        f"{describe(*dep)} already depends on {describe(kind, name)}"
                    )
            previous = objects.dependency_ids(conn, object_id)
            conn.execute(
                "UPDATE objects SET sql = ?, definition = ?, updated_at = ? WHERE object_id = ?",
                (sql, encoded, time.time(), object_id),
            )
            conn.execute("DELETE FROM dependencies WHERE object_id = ?", (object_id,))
            objects.insert_dependencies(conn, object_id, dep_ids)
            objects.collect_hidden(conn, previous)

    def get_object(self, kind: str, name: str) -> StoredObject | None:
        """The object of that kind and name (hidden ones included), or None."""
        kind, name = objects.check_kind(kind), objects.check_name(name)
        with self._db.reading() as conn:
            # through the (namespace, name) unique index: a lookup, not a scan of every object
            row = conn.execute(
                f"SELECT {objects.OBJECT_COLUMNS} FROM objects WHERE namespace = ? AND name = ? AND kind = ?",
                (NAMESPACES[kind], name, kind),
            ).fetchone()
            return None if row is None else objects.read_object(conn, row)

    def find_object(
        self, name: str, kinds: Sequence[str] | None = None, *, include_hidden: bool = False
    ) -> StoredObject | None:
        """The object called ``name`` of any kind (for DESCRIBE), or None.

        With several matches (a sink and a source may share a name) the first kind in
        ``kinds`` wins; the default order is source, view, sink, connection, secret.
        """
        name = objects.check_name(name)
        order = [objects.check_kind(k) for k in kinds] if kinds is not None else list(KINDS)
        with self._db.reading() as conn:
            namespaces = sorted(set(NAMESPACES.values()))
            marks = ", ".join("?" for _ in namespaces)
            rows = conn.execute(
                f"SELECT {objects.OBJECT_COLUMNS} FROM objects WHERE namespace IN ({marks}) AND name = ? "
                "AND (hidden = 0 OR ?)",
                (*namespaces, name, include_hidden),
            ).fetchall()
            by_kind = {row[1]: row for row in rows}
            for kind in order:
                if kind in by_kind:
                    return objects.read_object(conn, by_kind[kind])
        return None

    def list_objects(self, kind: str | None = None, *, include_hidden: bool = False) -> list[StoredObject]:
        """Every object (of one kind, if given), sorted by kind then name.

        Hidden inline secrets are left out unless ``include_hidden``.
        """
        where = "WHERE (hidden = 0 OR ?)"
        params: list[object] = [int(include_hidden)]
        if kind is not None:
            where += " AND kind = ?"
            params.append(objects.check_kind(kind))
        with self._db.reading() as conn:
            rows = conn.execute(
                f"SELECT {objects.OBJECT_COLUMNS} FROM objects {where} ORDER BY kind, name", params
            ).fetchall()
            deps: dict[str, list[tuple[str, str]]] = {}
            for object_id, dep_kind, dep_name in conn.execute(
                "SELECT d.object_id, o.kind, o.name FROM dependencies d "
                "JOIN objects o ON o.object_id = d.depends_on ORDER BY d.object_id, d.position"
            ):
                deps.setdefault(object_id, []).append((dep_kind, dep_name))
            return [objects.stored_object(row, deps.get(row[0], ())) for row in rows]

    def dependents(self, kind: str, name: str) -> list[tuple[str, str]]:
        """The objects that depend directly on this one, sorted; ``ObjectNotFoundError`` if missing."""
        kind, name = objects.check_kind(kind), objects.check_name(name)
        with self._db.reading() as conn:
            object_id = objects.require_id(conn, kind, name)
            return [(k, n) for k, n, _ in objects.dependents(conn, object_id)]

    def drop_object(
        self, kind: str, name: str, *, if_exists: bool = False, cascade: bool = False
    ) -> list[tuple[str, str]]:
        """Drop an object of any kind (secrets too) and return every (kind, name) dropped.

        While other objects depend on it, raises ``DependentObjectsError`` listing them, unless
        ``cascade``: then the dependents are dropped transitively, in one transaction, and
        listed first (deepest first, the target last). A sink's runtime state and a secret's
        value go with them; hidden inline secrets that no remaining object uses are dropped
        too, without being listed (they are internal). A missing object raises
        ``ObjectNotFoundError`` or, with ``if_exists``, returns ``[]``.
        """
        kind, name = objects.check_kind(kind), objects.check_name(name)
        with self._db.transaction() as conn:
            object_id = objects.find_id(conn, kind, name)
            if object_id is None:
                if if_exists:
                    return []
                raise objects.not_found(conn, kind, name)
            direct = objects.dependents(conn, object_id)
            if direct and not cascade:
                raise DependentObjectsError(kind, name, [(k, n) for k, n, _ in direct])
            order: list[tuple[str, str, str]] = []
            seen: set[str] = set()

            def visit(node: tuple[str, str, str]) -> None:
                # Post-order: an object is listed only after everything that depends on it.
                if node[2] in seen:
                    return
                seen.add(node[2])
                for child in objects.dependents(conn, node[2]):
                    visit(child)
                order.append(node)

            visit((kind, name, object_id))
            used: list[str] = []
            for _, _, oid in order:
                used.extend(objects.dependency_ids(conn, oid))
            for _, _, oid in order:
                conn.execute("DELETE FROM objects WHERE object_id = ?", (oid,))
            objects.collect_hidden(conn, [u for u in used if u not in seen])
            return [(k, n) for k, n, _ in order]

    # ------------------------------------------------------------------ secrets

    def create_secret(
        self, name: str, value: str, *, if_not_exists: bool = False, hidden: bool = False
    ) -> bool:
        """Store a secret (an object of kind 'secret') and its value.

        The value lives only in the secrets table, encrypted when a secret key is set; the
        object's SQL shows it as ``'********'``. ``hidden`` marks an internal inline secret that
        ``list_objects`` and ``find_object`` skip by default. Returns False when it existed
        and ``if_not_exists``; otherwise an existing name raises ``ObjectExistsError``.
        """
        name = objects.check_name(name)
        check_value(name, value)
        sql = f"CREATE SECRET {objects.quote_name(name)} AS '********'"
        with self._db.transaction() as conn:
            object_id = objects.insert_object(conn, "secret", name, sql, {}, (), if_not_exists, hidden=hidden)
            if object_id is None:
                return False
            stored, encoding = self._secrets.encode(conn, value)
            conn.execute(
                "INSERT INTO secrets (object_id, value, encoding) VALUES (?, ?, ?)",
                (object_id, stored, encoding),
            )
            return True

    def alter_secret(self, name: str, value: str) -> None:
        """Replace a secret's value (``ObjectNotFoundError`` if there is no such secret)."""
        name = objects.check_name(name)
        check_value(name, value)
        with self._db.transaction() as conn:
            object_id = objects.require_id(conn, "secret", name)
            stored, encoding = self._secrets.encode(conn, value)
            conn.execute(
                "INSERT INTO secrets (object_id, value, encoding) VALUES (?, ?, ?) "
                "ON CONFLICT (object_id) DO UPDATE SET value = excluded.value, encoding = excluded.encoding",
                (object_id, stored, encoding),
            )
            conn.execute("UPDATE objects SET updated_at = ? WHERE object_id = ?", (time.time(), object_id))

    def get_secret(self, name: str) -> str:
        """A secret's value.

        Raises ``ObjectNotFoundError`` for a missing secret, and ``StoreError`` when the value is
        encrypted and no secret key (or another key) is set.
        """
        name = objects.check_name(name)
        with self._db.reading() as conn:
            object_id = objects.require_id(conn, "secret", name)
            row = conn.execute(
                "SELECT value, encoding FROM secrets WHERE object_id = ?", (object_id,)
            ).fetchone()
            if row is None:
                raise StoreError(f"{describe('secret', name)} has no stored value")
            return self._secrets.decode(conn, name, str(row[0]), str(row[1]))

    def encrypt_plain_secrets(self) -> int:
        """Encrypt, with the current secret key, values stored before a key was set; returns how many."""
        if not self._secrets.encrypted:
            raise StoreError("no secret key is set; set ICESQL_SECRET_KEY to encrypt secrets at rest")
        with self._db.transaction() as conn:
            rows = conn.execute(
                "SELECT object_id, value FROM secrets WHERE encoding = ?", (crypto.PLAIN,)
            ).fetchall()
            for object_id, value in rows:
                stored, encoding = self._secrets.encode(conn, str(value))
                conn.execute(
                    "UPDATE secrets SET value = ?, encoding = ? WHERE object_id = ?",
                    (stored, encoding, object_id),
                )
            return len(rows)

    # ------------------------------------------------------------------ sink runtime state

    def get_sink_state(self, name: str) -> SinkState | None:
        """The sink's runtime state, or None when there is no such sink."""
        name = objects.check_name(name)
        with self._db.reading() as conn:
            return sink_state.read_sink_state(conn, name)

    def list_sink_states(self) -> list[SinkState]:
        """The runtime state of every sink, sorted by name (for SHOW SINK STATUS)."""
        with self._db.reading() as conn:
            names = [
                str(r[0]) for r in conn.execute("SELECT name FROM objects WHERE kind = 'sink' ORDER BY name")
            ]
            states = [sink_state.read_sink_state(conn, name) for name in names]
            return [state for state in states if state is not None]

    def update_sink_state(
        self, name: str, *, expected_version: int | None = None, **fields: Any
    ) -> SinkState:
        """Set some of the state fields and return the new state.

        Fields: status (one of ``SINK_STATUSES``), rows_committed, bytes_committed,
        files_committed, commits, skipped_records, retry_attempt, dead_letters, last_commit_at,
        next_attempt_at, last_snapshot_id, last_progress, last_error. With ``expected_version``, raises
        ``StaleVersionError`` if the sink's version has moved on (the caller was fenced).
        """
        name = objects.check_name(name)
        updates = sink_state.check_state_fields(fields)
        with self._db.transaction() as conn:
            object_id = sink_state.fence(conn, name, expected_version)
            assignments = "".join(f"{column} = ?, " for column in updates)
            conn.execute(
                f"UPDATE sink_state SET {assignments}updated_at = ? WHERE object_id = ?",
                (*updates.values(), time.time(), object_id),
            )
            state = sink_state.read_sink_state(conn, name)
            assert state is not None
            return state

    def record_sink_commit(
        self,
        name: str,
        *,
        rows: int,
        nbytes: int,
        files: int,
        snapshot_id: int | None,
        progress: int | None,
        committed_at: float | None = None,
        expected_version: int | None = None,
    ) -> SinkState:
        """Add one Iceberg commit to the sink's counters atomically and return the new state.

        Increments happen in SQL, so concurrent writers never lose one another's counts.
        ``expected_version`` fences a stale runner as in ``update_sink_state``.
        """
        name = objects.check_name(name)
        for label, count in (("rows", rows), ("nbytes", nbytes), ("files", files)):
            if not sink_state.is_count(count) or count < 0:
                raise StoreError(f"{label} must be a non-negative integer")
        with self._db.transaction() as conn:
            object_id = sink_state.fence(conn, name, expected_version)
            now = time.time()
            conn.execute(
                "UPDATE sink_state SET rows_committed = rows_committed + ?, "
                "bytes_committed = bytes_committed + ?, files_committed = files_committed + ?, "
                "commits = commits + 1, last_commit_at = ?, last_snapshot_id = ?, last_progress = ?, "
                "updated_at = ? WHERE object_id = ?",
                (
                    rows,
                    nbytes,
                    files,
                    committed_at if committed_at is not None else now,
                    snapshot_id,
                    progress,
                    now,
                    object_id,
                ),
            )
            state = sink_state.read_sink_state(conn, name)
            assert state is not None
            return state

    def update_table_state(
        self, name: str, table: str, *, expected_version: int | None = None, **fields: Any
    ) -> None:
        """Set some of the state of one table of a routed sink (TABLE a template), the row made
        on first use. Fields: rows_committed, bytes_committed, files_committed, commits,
        last_commit_at, last_snapshot_id, last_progress, last_error (the sink's fields that are a
        table's). ``expected_version`` fences a stale runner as in ``update_sink_state``."""
        name = objects.check_name(name)
        updates = sink_state.check_state_fields(fields)
        wrong = sorted(set(updates) - set(sink_state.TABLE_FIELDS))
        if wrong:
            raise StoreError(f"a sink's table has no state field(s) {', '.join(wrong)}")
        if not isinstance(table, str) or not table:
            raise StoreError("a table's state needs the table's name")
        with self._db.transaction() as conn:
            object_id = sink_state.fence(conn, name, expected_version)
            now = time.time()
            conn.execute(
                "INSERT OR IGNORE INTO sink_table_state (object_id, table_name, updated_at) VALUES (?, ?, ?)",
                (object_id, table, now),
            )
            assignments = "".join(f"{column} = ?, " for column in updates)
            conn.execute(
                f"UPDATE sink_table_state SET {assignments}updated_at = ? WHERE object_id = ? AND table_name = ?",
                (*updates.values(), now, object_id, table),
            )

    def sink_tables(self, name: str) -> list[SinkTableState]:
        """What a routed sink committed to each of its tables, by table name ([] for other sinks)."""
        name = objects.check_name(name)
        with self._db.reading() as conn:
            rows = conn.execute(
                "SELECT t.table_name, t.rows_committed, t.bytes_committed, t.files_committed, t.commits, "
                "t.last_commit_at, t.last_snapshot_id, t.last_progress, t.last_error, t.updated_at "
                "FROM sink_table_state t JOIN objects o ON o.object_id = t.object_id "
                "WHERE o.kind = 'sink' AND o.name = ? ORDER BY t.table_name",
                (name,),
            ).fetchall()
        return [SinkTableState(name, *row) for row in rows]

    def bump_sink_version(self, name: str) -> int:
        """Atomically increment the sink's version (epoch) and return the new one.

        Each runner start takes a new version; a runner holding an older one is fenced.
        """
        name = objects.check_name(name)
        with self._db.transaction() as conn:
            object_id = objects.require_id(conn, "sink", name)
            sink_state.ensure_state(conn, object_id)
            conn.execute(
                "UPDATE sink_state SET version = version + 1, updated_at = ? WHERE object_id = ?",
                (time.time(), object_id),
            )
            row = conn.execute("SELECT version FROM sink_state WHERE object_id = ?", (object_id,)).fetchone()
            return int(row[0])


__all__ = ["DEFAULT_TIMEOUT", "MEMORY", "MIGRATIONS", "CatalogStore"]
