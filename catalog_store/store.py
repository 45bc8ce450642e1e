"""``CatalogStore``: the SQLite file behind an icesql home.

Storage rules, and why:

* WAL journal, a busy timeout and ``BEGIN IMMEDIATE`` for every write: readers never block the
  writer, and two processes (a shell and ``icesql serve``) queue for the write lock instead of
  failing or losing a write. Every read-modify-write (counters, version bumps) happens inside
  one immediate transaction.
* ``synchronous = FULL``: sink versions fence older runners, so a bump must survive a power
  cut, not only a process crash.
* ``secure_delete = ON``: a dropped or altered secret is overwritten on disk, not left in a
  free page.
* The file (and any directory the store creates) is owner-only. SQLite gives the ``-wal`` and
  ``-shm`` files the permissions of the database file, so creating the database ``0600``
  covers them; they are also tightened after opening. No process-wide ``umask`` change:
  other threads may be creating files at the same time.
* One connection per store object, shared by threads under a re-entrant lock (Spark runs
  ``foreachBatch`` on driver threads). A forked child must open its own store.
* A store that may be read but not written (a file or directory of another user, a
  read-only mount) is opened read-only: everything that reads works, a write raises a
  ``StoreError`` saying the store is read-only. SQLite cannot read a WAL database read-only
  without its ``-shm`` file unless told the file is immutable, which is the fallback.
* Once a secret key has been used (``ICESQL_SECRET_KEY``), a secret written without one is
  refused rather than stored in clear next to encrypted ones.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import crypto
from .errors import (
    DependentObjectsError,
    ObjectExistsError,
    ObjectNotFoundError,
    StaleVersionError,
    StoreError,
    StoreOpenError,
    describe,
)
from .migrations import MIGRATIONS, applied_versions, migrate
from .models import KINDS, NAMESPACES, SINK_STATUSES, SinkState, StoredObject

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
MEMORY = ":memory:"

_COUNTERS = (
    "rows_committed",
    "bytes_committed",
    "files_committed",
    "commits",
    "skipped_records",
    "retry_attempt",
    "dead_letters",
)
_OPTIONAL_INTS = ("last_snapshot_id", "last_progress")
_TIMESTAMPS = ("last_commit_at", "next_attempt_at")
_STATE_FIELDS = ("status", *_COUNTERS, *_TIMESTAMPS, *_OPTIONAL_INTS, "last_error")
_STATE_COLUMNS = (
    "o.name, o.object_id, s.status, s.version, s.rows_committed, s.bytes_committed, "
    "s.files_committed, s.commits, s.last_commit_at, s.last_snapshot_id, s.last_progress, "
    "s.last_error, s.updated_at, s.skipped_records, s.retry_attempt, s.next_attempt_at, s.dead_letters"
)
_OBJECT_COLUMNS = "object_id, kind, name, sql, definition, hidden, created_at, updated_at"
_BARE_NAME = re.compile(r"[a-z_][a-z0-9_]*")


def _kind(kind: object) -> str:
    # Accept the analyzer's enums (``ObjectKind.SINK``) as well as plain strings.
    value = getattr(kind, "value", kind)
    if not isinstance(value, str) or value not in NAMESPACES:
        raise StoreError(f"unknown object kind {value!r}; expected one of {', '.join(sorted(NAMESPACES))}")
    return value


def _name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise StoreError(f"an object name must be a non-empty string, not {type(name).__name__}")
    return name


def _quote(name: str) -> str:
    return name if _BARE_NAME.fullmatch(name) else '"' + name.replace('"', '""') + '"'


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Closed:
    """Stands in for the connection after ``close()``."""

    def __getattr__(self, item: str) -> Any:
        raise StoreError("the catalog store is closed")


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
        self._passphrase = crypto.Passphrase(secret_key) if secret_key else None
        self._cipher: crypto.SecretCipher | None = None
        self._key_checked = False
        self._lock = threading.RLock()
        self._depth = 0
        self._pid = os.getpid()
        self._memory = os.fspath(path) == MEMORY
        try:
            self._path = Path(MEMORY) if self._memory else Path(os.fspath(path)).expanduser().absolute()
        except (RuntimeError, ValueError) as exc:
            raise StoreOpenError(f"cannot open the catalog store {os.fspath(path)!r}: {exc}") from None
        self._read_only = bool(read_only)
        if not self._memory and not read_only:
            self._read_only = not _prepare_file(self._path)
        if self._read_only:
            conn = self._open_read_only(timeout)
        else:
            try:
                conn = sqlite3.connect(
                    MEMORY if self._memory else str(self._path),
                    timeout=timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
            except sqlite3.Error as exc:
                raise StoreOpenError(f"cannot open the catalog store {self._path}: {exc}") from exc
            try:
                _configure(conn, timeout)
                migrate(conn)
            except sqlite3.Error as exc:
                conn.close()
                raise StoreError(f"cannot open the catalog store {self._path}: {exc}") from exc
            except BaseException:
                conn.close()
                raise
        self._conn: sqlite3.Connection | _Closed = conn
        if not self._memory and not self._read_only:
            _tighten(self._path)

    def _open_read_only(self, timeout: float) -> sqlite3.Connection:
        from urllib.parse import quote

        if not self._path.is_file():
            raise StoreOpenError(f"cannot open the catalog store {self._path} read-only: no such file")
        uri = f"file:{quote(str(self._path))}?mode=ro"
        last: sqlite3.Error | None = None
        # without a -shm file beside it (and no right to create one) SQLite can read a WAL
        # database only as an immutable file
        for suffix in ("", "&immutable=1"):
            try:
                conn = sqlite3.connect(uri + suffix, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)
            except sqlite3.Error as exc:
                last = exc
                continue
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
                done = {int(r[0]) for r in conn.execute("SELECT version FROM schema_migrations")}
            except sqlite3.Error as exc:
                conn.close()
                last = exc
                continue
            known = {m.version for m in MIGRATIONS}
            if not known <= done:
                conn.close()
                raise StoreOpenError(
                    f"the catalog store {self._path} is read-only and needs a schema upgrade",
                    hint="open it once with write access (a newer icesql upgrades it)",
                )
            return conn
        raise StoreOpenError(f"cannot open the catalog store {self._path} read-only: {last}")

    # ------------------------------------------------------------------ lifecycle

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def read_only(self) -> bool:
        """True when the store was opened for reading only (every write raises StoreError)."""
        return self._read_only

    @property
    def encrypted(self) -> bool:
        """True when a secret key is set, so new secret values are encrypted at rest."""
        return self._passphrase is not None

    @property
    def schema_version(self) -> int:
        """The newest migration applied to this store."""
        with self._reading() as conn:
            return max(applied_versions(conn), default=0)

    def close(self) -> None:
        """Close the connection; further calls raise ``StoreError``. Idempotent."""
        with self._lock:
            conn = self._conn
            if isinstance(conn, sqlite3.Connection):
                self._conn = _Closed()
                conn.close()

    def __enter__(self) -> CatalogStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CatalogStore({str(self._path)!r}, encrypted={self.encrypted})"

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def transaction(self) -> Iterator[CatalogStore]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (rolled back on any exception).

        Takes the write lock up front (waiting up to the busy timeout for another process), so
        what is read inside is still true at commit. Nested use becomes a savepoint.
        """
        with self._lock:
            conn = self._connection()
            if self._depth == 0:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                except sqlite3.Error as exc:
                    raise self._wrap(exc) from exc
                self._depth = 1
                try:
                    yield self
                    conn.execute("COMMIT")
                except sqlite3.Error as exc:
                    _rollback(conn)
                    raise self._wrap(exc) from exc
                except BaseException:
                    _rollback(conn)
                    raise
                finally:
                    self._depth = 0
            else:
                savepoint = f"sp_{self._depth}"
                conn.execute(f"SAVEPOINT {savepoint}")
                self._depth += 1
                try:
                    yield self
                except BaseException as exc:
                    conn.execute(f"ROLLBACK TO {savepoint}")
                    conn.execute(f"RELEASE {savepoint}")
                    if isinstance(exc, sqlite3.Error):
                        raise self._wrap(exc) from exc
                    raise
                else:
                    conn.execute(f"RELEASE {savepoint}")
                finally:
                    self._depth -= 1

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for multi-query reads (joins the open transaction, if any)."""
        with self._lock:
            conn = self._connection()
            if self._depth:
                try:
                    yield conn
                except sqlite3.Error as exc:
                    raise self._wrap(exc) from exc
                return
            try:
                conn.execute("BEGIN")
            except sqlite3.Error as exc:
                raise self._wrap(exc) from exc
            self._depth = 1
            try:
                yield conn
            except sqlite3.Error as exc:
                raise self._wrap(exc) from exc
            finally:
                self._depth = 0
                _rollback(conn)

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        with self.transaction():
            yield self._connection()

    def _connection(self) -> sqlite3.Connection:
        conn = self._conn
        if not isinstance(conn, sqlite3.Connection):
            raise StoreError("the catalog store is closed")
        if os.getpid() != self._pid:
            # SQLite connections must not cross fork(): two processes sharing one connection's
            # locks is how databases get corrupted.
            raise StoreError(
                "this catalog store was opened in another process (before a fork)",
                hint="open a new CatalogStore in each process",
            )
        return conn

    def _wrap(self, exc: sqlite3.Error) -> StoreError:
        text = str(exc)
        if "readonly" in text or "read-only" in text:
            return StoreError(
                f"the catalog store {self._path} is read-only",
                hint="this home can be read but not written; use a home you may write to change it",
            )
        if "locked" in text or "busy" in text:
            return StoreError(
                f"the catalog store {self._path} is locked by another process ({text})",
                hint="another icesql process is writing; retry, or raise the timeout",
            )
        return StoreError(f"catalog store {self._path}: {text}")

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
        kind, name = _kind(kind), _name(name)
        if kind == "secret":
            raise StoreError("secrets are created with create_secret(), which stores the value")
        with self._writing() as conn:
            return self._insert(conn, kind, name, sql, definition, dependencies, if_not_exists) is not None

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
        kind, name = _kind(kind), _name(name)
        if kind == "secret":
            raise StoreError("a secret's value is changed with alter_secret()")
        encoded = _encode_definition(kind, name, definition)
        with self._writing() as conn:
            object_id = self._require_id(conn, kind, name)
            dep_ids = self._resolve_dependencies(conn, (kind, name), dependencies)
            for dep_id, dep in dep_ids:
                if self._reaches(conn, dep_id, object_id):
                    raise StoreError(
                        f"{describe(kind, name)} cannot depend on {describe(*dep)}: "
                        f"{describe(*dep)} already depends on {describe(kind, name)}"
                    )
            previous = self._dependency_ids(conn, object_id)
            conn.execute(
                "UPDATE objects SET sql = ?, definition = ?, updated_at = ? WHERE object_id = ?",
                (sql, encoded, time.time(), object_id),
            )
            conn.execute("DELETE FROM dependencies WHERE object_id = ?", (object_id,))
            self._insert_dependencies(conn, object_id, dep_ids)
            self._collect_hidden(conn, previous)

    def get_object(self, kind: str, name: str) -> StoredObject | None:
        """The object of that kind and name (hidden ones included), or None."""
        kind, name = _kind(kind), _name(name)
        with self._reading() as conn:
            # through the (namespace, name) unique index: a lookup, not a scan of every object
            row = conn.execute(
                f"SELECT {_OBJECT_COLUMNS} FROM objects WHERE namespace = ? AND name = ? AND kind = ?",
                (NAMESPACES[kind], name, kind),
            ).fetchone()
            return None if row is None else self._object(conn, row)

    def find_object(
        self, name: str, kinds: Sequence[str] | None = None, *, include_hidden: bool = False
    ) -> StoredObject | None:
        """The object called ``name`` of any kind (for DESCRIBE), or None.

        With several matches (a sink and a source may share a name) the first kind in
        ``kinds`` wins; the default order is source, view, sink, connection, secret.
        """
        name = _name(name)
        order = [_kind(k) for k in kinds] if kinds is not None else list(KINDS)
        with self._reading() as conn:
            namespaces = sorted(set(NAMESPACES.values()))
            marks = ", ".join("?" for _ in namespaces)
            rows = conn.execute(
                f"SELECT {_OBJECT_COLUMNS} FROM objects WHERE namespace IN ({marks}) AND name = ? "
                "AND (hidden = 0 OR ?)",
                (*namespaces, name, include_hidden),
            ).fetchall()
            by_kind = {row[1]: row for row in rows}
            for kind in order:
                if kind in by_kind:
                    return self._object(conn, by_kind[kind])
        return None

    def list_objects(self, kind: str | None = None, *, include_hidden: bool = False) -> list[StoredObject]:
        """Every object (of one kind, if given), sorted by kind then name.

        Hidden inline secrets are left out unless ``include_hidden``.
        """
        where = "WHERE (hidden = 0 OR ?)"
        params: list[object] = [int(include_hidden)]
        if kind is not None:
            where += " AND kind = ?"
            params.append(_kind(kind))
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT {_OBJECT_COLUMNS} FROM objects {where} ORDER BY kind, name", params
            ).fetchall()
            deps: dict[str, list[tuple[str, str]]] = {}
            for object_id, dep_kind, dep_name in conn.execute(
                "SELECT d.object_id, o.kind, o.name FROM dependencies d "
                "JOIN objects o ON o.object_id = d.depends_on ORDER BY d.object_id, d.position"
            ):
                deps.setdefault(object_id, []).append((dep_kind, dep_name))
            return [_stored(row, deps.get(row[0], ())) for row in rows]

    def dependents(self, kind: str, name: str) -> list[tuple[str, str]]:
        """The objects that depend directly on this one, sorted; ``ObjectNotFoundError`` if missing."""
        kind, name = _kind(kind), _name(name)
        with self._reading() as conn:
            object_id = self._require_id(conn, kind, name)
            return [(k, n) for k, n, _ in self._dependents(conn, object_id)]

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
        kind, name = _kind(kind), _name(name)
        with self._writing() as conn:
            object_id = self._find_id(conn, kind, name)
            if object_id is None:
                if if_exists:
                    return []
                raise self._not_found(conn, kind, name)
            direct = self._dependents(conn, object_id)
            if direct and not cascade:
                raise DependentObjectsError(kind, name, [(k, n) for k, n, _ in direct])
            order: list[tuple[str, str, str]] = []
            seen: set[str] = set()

            def visit(node: tuple[str, str, str]) -> None:
                # Post-order: an object is listed only after everything that depends on it.
                if node[2] in seen:
                    return
                seen.add(node[2])
                for child in self._dependents(conn, node[2]):
                    visit(child)
                order.append(node)

            visit((kind, name, object_id))
            used: list[str] = []
            for _, _, oid in order:
                used.extend(self._dependency_ids(conn, oid))
            for _, _, oid in order:
                conn.execute("DELETE FROM objects WHERE object_id = ?", (oid,))
            self._collect_hidden(conn, [u for u in used if u not in seen])
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
        name = _name(name)
        _check_value(name, value)
        sql = f"CREATE SECRET {_quote(name)} AS '********'"
        with self._writing() as conn:
            object_id = self._insert(conn, "secret", name, sql, {}, (), if_not_exists, hidden=hidden)
            if object_id is None:
                return False
            stored, encoding = self._encode_secret(conn, value)
            conn.execute(
                "INSERT INTO secrets (object_id, value, encoding) VALUES (?, ?, ?)",
                (object_id, stored, encoding),
            )
            return True

    def alter_secret(self, name: str, value: str) -> None:
        """Replace a secret's value (``ObjectNotFoundError`` if there is no such secret)."""
        name = _name(name)
        _check_value(name, value)
        with self._writing() as conn:
            object_id = self._require_id(conn, "secret", name)
            stored, encoding = self._encode_secret(conn, value)
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
        name = _name(name)
        with self._reading() as conn:
            object_id = self._require_id(conn, "secret", name)
            row = conn.execute(
                "SELECT value, encoding FROM secrets WHERE object_id = ?", (object_id,)
            ).fetchone()
            if row is None:
                raise StoreError(f"{describe('secret', name)} has no stored value")
            stored, encoding = str(row[0]), str(row[1])
            if encoding == crypto.PLAIN:
                return stored
            if encoding != crypto.ENCODING:
                raise StoreError(f"{describe('secret', name)} uses an unknown encoding {encoding!r}")
            if self._passphrase is None:
                raise StoreError(
                    f"{describe('secret', name)} is encrypted; set ICESQL_SECRET_KEY",
                    hint="export ICESQL_SECRET_KEY with the passphrase the store was written with",
                )
            plain = self._secret_cipher(conn).decrypt(stored)
            if plain is None:
                raise StoreError(
                    f"{describe('secret', name)} cannot be decrypted: ICESQL_SECRET_KEY is not the key "
                    "it was encrypted with"
                )
            return plain

    def encrypt_plain_secrets(self) -> int:
        """Encrypt, with the current secret key, values stored before a key was set; returns how many."""
        if self._passphrase is None:
            raise StoreError("no secret key is set; set ICESQL_SECRET_KEY to encrypt secrets at rest")
        with self._writing() as conn:
            rows = conn.execute(
                "SELECT object_id, value FROM secrets WHERE encoding = ?", (crypto.PLAIN,)
            ).fetchall()
            for object_id, value in rows:
                stored, encoding = self._encode_secret(conn, str(value))
                conn.execute(
                    "UPDATE secrets SET value = ?, encoding = ? WHERE object_id = ?",
                    (stored, encoding, object_id),
                )
            return len(rows)

    def _secret_cipher(self, conn: sqlite3.Connection) -> crypto.SecretCipher:
        assert self._passphrase is not None
        if self._cipher is None:
            row = conn.execute("SELECT value FROM meta WHERE key = 'secret_salt'").fetchone()
            if row is None:
                raise StoreError("the catalog store has no encryption salt; it was not fully migrated")
            self._cipher = crypto.SecretCipher(self._passphrase, bytes.fromhex(str(row[0])))
        return self._cipher

    def _encode_secret(self, conn: sqlite3.Connection, value: str) -> tuple[str, str]:
        if self._passphrase is None:
            # the key check is written with the first encrypted value (same transaction)
            encrypted = conn.execute("SELECT 1 FROM meta WHERE key = 'secret_key_check'").fetchone()
            if encrypted is not None:
                # once a key was used, a value stored in clear beside encrypted ones would be
                # the one an attacker reads
                raise StoreError(
                    "this catalog store encrypts secret values; set ICESQL_SECRET_KEY to store one",
                    hint="export ICESQL_SECRET_KEY with the passphrase the store was written with",
                )
            return value, crypto.PLAIN
        cipher = self._secret_cipher(conn)
        if not self._key_checked:
            # A known token, so values are never encrypted under two different keys.
            row = conn.execute("SELECT value FROM meta WHERE key = 'secret_key_check'").fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('secret_key_check', ?)",
                    (cipher.encrypt("icesql-catalog-store"),),
                )  # verified next time: this transaction may still roll back
            elif cipher.decrypt(str(row[0])) is None:
                raise StoreError(
                    "ICESQL_SECRET_KEY is not the key this store's secrets are encrypted with",
                    hint="use the original passphrase",
                )
            else:
                self._key_checked = True
        return cipher.encrypt(value), crypto.ENCODING

    # ------------------------------------------------------------------ sink runtime state

    def get_sink_state(self, name: str) -> SinkState | None:
        """The sink's runtime state, or None when there is no such sink."""
        name = _name(name)
        with self._reading() as conn:
            return self._sink_state(conn, name)

    def list_sink_states(self) -> list[SinkState]:
        """The runtime state of every sink, sorted by name (for SHOW SINK STATUS)."""
        with self._reading() as conn:
            names = [
                str(r[0]) for r in conn.execute("SELECT name FROM objects WHERE kind = 'sink' ORDER BY name")
            ]
            states = [self._sink_state(conn, name) for name in names]
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
        name = _name(name)
        updates = _check_state_fields(fields)
        with self._writing() as conn:
            object_id = self._fence(conn, name, expected_version)
            assignments = "".join(f"{column} = ?, " for column in updates)
            conn.execute(
                f"UPDATE sink_state SET {assignments}updated_at = ? WHERE object_id = ?",
                (*updates.values(), time.time(), object_id),
            )
            state = self._sink_state(conn, name)
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
        name = _name(name)
        for label, count in (("rows", rows), ("nbytes", nbytes), ("files", files)):
            if not _is_int(count) or count < 0:
                raise StoreError(f"{label} must be a non-negative integer")
        with self._writing() as conn:
            object_id = self._fence(conn, name, expected_version)
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
            state = self._sink_state(conn, name)
            assert state is not None
            return state

    def bump_sink_version(self, name: str) -> int:
        """Atomically increment the sink's version (epoch) and return the new one.

        Each runner start takes a new version; a runner holding an older one is fenced.
        """
        name = _name(name)
        with self._writing() as conn:
            object_id = self._require_id(conn, "sink", name)
            self._ensure_state(conn, object_id)
            conn.execute(
                "UPDATE sink_state SET version = version + 1, updated_at = ? WHERE object_id = ?",
                (time.time(), object_id),
            )
            row = conn.execute("SELECT version FROM sink_state WHERE object_id = ?", (object_id,)).fetchone()
            return int(row[0])

    def _fence(self, conn: sqlite3.Connection, name: str, expected_version: int | None) -> str:
        object_id = self._require_id(conn, "sink", name)
        self._ensure_state(conn, object_id)
        if expected_version is not None:
            row = conn.execute("SELECT version FROM sink_state WHERE object_id = ?", (object_id,)).fetchone()
            if int(row[0]) != expected_version:
                raise StaleVersionError(name, expected_version, int(row[0]))
        return object_id

    @staticmethod
    def _ensure_state(conn: sqlite3.Connection, object_id: str) -> None:
        conn.execute(
            "INSERT OR IGNORE INTO sink_state (object_id, updated_at) VALUES (?, ?)", (object_id, time.time())
        )

    @staticmethod
    def _sink_state(conn: sqlite3.Connection, name: str) -> SinkState | None:
        row = conn.execute(
            f"SELECT {_STATE_COLUMNS} FROM objects o LEFT JOIN sink_state s ON s.object_id = o.object_id "
            "WHERE o.kind = 'sink' AND o.name = ?",
            (name,),
        ).fetchone()
        if row is None:
            return None
        (
            name,
            object_id,
            status,
            version,
            rows,
            nbytes,
            files,
            commits,
            last_at,
            snapshot,
            progress,
            error,
            updated,
            skipped,
            attempt,
            next_at,
            dead_letters,
        ) = row
        if status is None:  # no state row yet: the defaults
            return SinkState(
                name, "created", 0, 0, 0, 0, 0, None, None, None, None, 0.0, object_id=object_id
            )
        return SinkState(
            name=name,
            status=status,
            version=version,
            rows_committed=rows,
            bytes_committed=nbytes,
            files_committed=files,
            commits=commits,
            last_commit_at=last_at,
            last_snapshot_id=snapshot,
            last_progress=progress,
            last_error=error,
            updated_at=updated,
            skipped_records=skipped,
            retry_attempt=attempt,
            next_attempt_at=next_at,
            dead_letters=dead_letters,
            object_id=object_id,
        )

    # ------------------------------------------------------------------ internals

    def _insert(
        self,
        conn: sqlite3.Connection,
        kind: str,
        name: str,
        sql: str,
        definition: dict[str, Any],
        dependencies: Iterable[tuple[str, str]],
        if_not_exists: bool,
        *,
        hidden: bool = False,
    ) -> str | None:
        """Insert an object; its new id, or None when the name was taken and ``if_not_exists``."""
        if not isinstance(sql, str):
            raise StoreError(f"the SQL of {describe(kind, name)} must be a string")
        encoded = _encode_definition(kind, name, definition)
        row = conn.execute(
            "SELECT kind FROM objects WHERE namespace = ? AND name = ?", (NAMESPACES[kind], name)
        ).fetchone()
        if row is not None:
            if if_not_exists:
                return None
            raise ObjectExistsError(str(row[0]), name)
        dep_ids = self._resolve_dependencies(conn, (kind, name), dependencies)
        object_id = str(uuid.uuid4())
        now = time.time()
        conn.execute(
            "INSERT INTO objects (object_id, kind, name, namespace, sql, definition, hidden, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (object_id, kind, name, NAMESPACES[kind], sql, encoded, int(hidden), now, now),
        )
        self._insert_dependencies(conn, object_id, dep_ids)
        if kind == "sink":
            conn.execute("INSERT INTO sink_state (object_id, updated_at) VALUES (?, ?)", (object_id, now))
        return object_id

    def _resolve_dependencies(
        self, conn: sqlite3.Connection, owner: tuple[str, str], dependencies: Iterable[tuple[str, str]]
    ) -> list[tuple[str, tuple[str, str]]]:
        resolved: list[tuple[str, tuple[str, str]]] = []
        seen: set[str] = set()
        for dependency in dependencies:
            try:
                dep_kind, dep_name = dependency
            except (TypeError, ValueError):
                raise StoreError(f"a dependency must be a (kind, name) pair, not {dependency!r}") from None
            dep = (_kind(dep_kind), _name(dep_name))
            dep_id = self._find_id(conn, *dep)
            if dep_id is None:
                raise ObjectNotFoundError(*dep, needed_by=owner)
            if dep == owner:
                raise StoreError(f"{describe(*owner)} cannot depend on itself")
            if dep_id not in seen:
                seen.add(dep_id)
                resolved.append((dep_id, dep))
        return resolved

    @staticmethod
    def _insert_dependencies(
        conn: sqlite3.Connection, object_id: str, dep_ids: list[tuple[str, tuple[str, str]]]
    ) -> None:
        conn.executemany(
            "INSERT INTO dependencies (object_id, depends_on, position) VALUES (?, ?, ?)",
            [(object_id, dep_id, position) for position, (dep_id, _) in enumerate(dep_ids)],
        )

    @staticmethod
    def _find_id(conn: sqlite3.Connection, kind: str, name: str) -> str | None:
        row = conn.execute(
            "SELECT object_id FROM objects WHERE namespace = ? AND name = ? AND kind = ?",
            (NAMESPACES[kind], name, kind),
        ).fetchone()
        return None if row is None else str(row[0])

    def _require_id(self, conn: sqlite3.Connection, kind: str, name: str) -> str:
        object_id = self._find_id(conn, kind, name)
        if object_id is None:
            raise self._not_found(conn, kind, name)
        return object_id

    @staticmethod
    def _not_found(conn: sqlite3.Connection, kind: str, name: str) -> ObjectNotFoundError:
        error = ObjectNotFoundError(kind, name)
        others = [
            str(r[0])
            for r in conn.execute(
                "SELECT kind FROM objects WHERE namespace IN ('secret', 'connection', 'relation', 'sink') "
                "AND name = ? AND hidden = 0 ORDER BY kind",
                (name,),
            )
        ]
        if others:
            error.hint = f'"{name}" is a {" and a ".join(others)}'
        return error

    @staticmethod
    def _dependents(conn: sqlite3.Connection, object_id: str) -> list[tuple[str, str, str]]:
        return [
            (str(k), str(n), str(i))
            for k, n, i in conn.execute(
                "SELECT o.kind, o.name, o.object_id FROM dependencies d JOIN objects o ON o.object_id = d.object_id "
                "WHERE d.depends_on = ? ORDER BY o.kind, o.name",
                (object_id,),
            )
        ]

    @staticmethod
    def _dependency_ids(conn: sqlite3.Connection, object_id: str) -> list[str]:
        return [
            str(r[0])
            for r in conn.execute(
                "SELECT depends_on FROM dependencies WHERE object_id = ? ORDER BY position", (object_id,)
            )
        ]

    @staticmethod
    def _reaches(conn: sqlite3.Connection, start: str, target: str) -> bool:
        """Whether ``start`` depends on ``target``, directly or transitively (or is it)."""
        row = conn.execute(
            "WITH RECURSIVE up(id) AS (SELECT ? UNION SELECT d.depends_on FROM dependencies d "
            "JOIN up ON d.object_id = up.id) SELECT 1 FROM up WHERE id = ?",
            (start, target),
        ).fetchone()
        return row is not None

    @staticmethod
    def _collect_hidden(conn: sqlite3.Connection, candidates: Iterable[str]) -> list[tuple[str, str]]:
        """Drop the hidden objects among ``candidates`` that nothing depends on any more."""
        dropped: list[tuple[str, str]] = []
        for object_id in dict.fromkeys(candidates):
            row = conn.execute(
                "SELECT kind, name FROM objects o WHERE object_id = ? AND hidden = 1 "
                "AND NOT EXISTS (SELECT 1 FROM dependencies d WHERE d.depends_on = o.object_id)",
                (object_id,),
            ).fetchone()
            if row is not None:
                conn.execute("DELETE FROM objects WHERE object_id = ?", (object_id,))
                dropped.append((str(row[0]), str(row[1])))
        return dropped

    def _object(self, conn: sqlite3.Connection, row: Sequence[Any]) -> StoredObject:
        deps = [
            (str(k), str(n))
            for k, n in conn.execute(
                "SELECT o.kind, o.name FROM dependencies d JOIN objects o ON o.object_id = d.depends_on "
                "WHERE d.object_id = ? ORDER BY d.position",
                (row[0],),
            )
        ]
        return _stored(row, deps)


# ---------------------------------------------------------------------- helpers


def _stored(row: Sequence[Any], deps: Iterable[tuple[str, str]]) -> StoredObject:
    object_id, kind, name, sql, definition, hidden, created_at, updated_at = row
    return StoredObject(
        kind=kind,
        name=name,
        sql=sql,
        definition=json.loads(definition),
        dependencies=tuple(deps),
        created_at=created_at,
        updated_at=updated_at,
        object_id=object_id,
        hidden=bool(hidden),
    )


def _encode_definition(kind: str, name: str, definition: dict[str, Any]) -> str:
    if not isinstance(definition, dict):
        raise StoreError(f"the definition of {describe(kind, name)} must be a dict")
    try:
        return json.dumps(definition, allow_nan=False)
    except (TypeError, ValueError) as exc:
        # The message names the offending type only, never a value.
        raise StoreError(
            f"the definition of {describe(kind, name)} is not JSON-serialisable ({type(exc).__name__})"
        ) from None


def _check_value(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise StoreError(
            f"the value of {describe('secret', name)} must be a string, not {type(value).__name__}"
        )


def _check_state_fields(fields: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(fields) - set(_STATE_FIELDS))
    if unknown:
        raise StoreError(
            f"unknown sink state field(s) {', '.join(unknown)}; expected some of {', '.join(_STATE_FIELDS)}"
        )
    for key, value in fields.items():
        if key == "status":
            if value not in SINK_STATUSES:
                raise StoreError(f"unknown sink status {value!r}; expected one of {', '.join(SINK_STATUSES)}")
        elif key in _COUNTERS:
            if not _is_int(value) or value < 0:
                raise StoreError(f"{key} must be a non-negative integer")
        elif key in _OPTIONAL_INTS:
            if value is not None and not _is_int(value):
                raise StoreError(f"{key} must be an integer or None")
        elif key in _TIMESTAMPS:
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise StoreError(f"{key} must be a timestamp (seconds) or None")
        elif key == "last_error" and value is not None and not isinstance(value, str):
            raise StoreError("last_error must be a string or None")
    return dict(fields)


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:  # pragma: no cover - the connection is already unusable
            log.exception("rollback failed")


def _configure(conn: sqlite3.Connection, timeout: float) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA secure_delete = ON")
    # Switching to WAL needs a moment of exclusive access; another process opening the same
    # new store at once can make it report "locked" without going through the busy handler.
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    conn.execute("PRAGMA synchronous = FULL")
    # 16 MiB of page cache (SQLite's default is 2 MiB): lookups stay in memory for stores of
    # tens of thousands of objects, so long scripts do not slow down as the store grows
    conn.execute("PRAGMA cache_size = -16384")


def _prepare_file(path: Path) -> bool:
    """Create the directory (0700) and the file (0600) if missing; tighten an existing file.

    Returns False when the file exists and may be read but not written (or its directory may
    not be written, where SQLite keeps its journal): the store is then opened read-only."""
    _make_private_dirs(path.parent)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except (PermissionError, OSError) as exc:
        if isinstance(exc, IsADirectoryError):
            raise StoreOpenError(f"cannot create the catalog store {path}: it is a directory") from None
        if path.is_file() and os.access(path, os.R_OK):
            return False
        raise StoreOpenError(f"cannot create the catalog store {path}: {exc.strerror or exc}") from None
    os.close(fd)
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return False
    _tighten(path)
    return True


def _make_private_dirs(directory: Path) -> None:
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for new in reversed(missing):
        try:
            os.mkdir(new, 0o700)
        except FileExistsError:
            if new.is_dir():
                continue  # another process made it first; its mode is not ours to change
            raise StoreOpenError(f"cannot create the directory {new}: a file is in the way") from None
        except OSError as exc:
            raise StoreOpenError(f"cannot create the directory {new}: {exc.strerror or exc}") from None
        os.chmod(new, 0o700)  # the umask may have removed bits from 0700


def _tighten(path: Path) -> None:
    for candidate in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        try:
            if candidate.stat().st_mode & 0o077:
                os.chmod(candidate, 0o600)
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("cannot make %s owner-only: %s", candidate, exc.strerror)


__all__ = ["CatalogStore", "MIGRATIONS"]
