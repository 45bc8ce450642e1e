"""The SQLite file under a catalog store: opened, migrated, and written in transactions.

``Database`` owns the one connection a ``CatalogStore`` has and knows nothing of objects,
secrets or sinks. Its rules, and why:

* WAL journal, a busy timeout and ``BEGIN IMMEDIATE`` for every write: readers never block the
  writer, and two processes (a shell and ``icesql serve``) queue for the write lock instead of
  failing or losing a write. Every read-modify-write (counters, version bumps) happens inside
  one immediate transaction.
* ``synchronous = FULL``: sink versions fence older runners, so a bump must survive a power
  cut, not only a process crash.
* ``secure_delete = ON``: a dropped or altered secret is overwritten on disk, not left in a
  free page.
* The file (and any directory it creates) is owner-only. SQLite gives the ``-wal`` and
  ``-shm`` files the permissions of the database file, so creating the database ``0600``
  covers them; they are also tightened after opening. No process-wide ``umask`` change:
  other threads may be creating files at the same time.
* One connection, shared by threads under a re-entrant lock (Spark runs ``foreachBatch`` on
  driver threads). A forked child must open its own.
* A file that may be read but not written (a file or directory of another user, a read-only
  mount) is opened read-only: everything that reads works, a write raises a ``StoreError``
  saying the store is read-only. SQLite cannot read a WAL database read-only without its
  ``-shm`` file unless told the file is immutable, which is the fallback.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .errors import StoreError, StoreOpenError
from .migrations import MIGRATIONS, migrate

log = logging.getLogger(__name__)

MEMORY = ":memory:"


class _Closed:
    """Stands in for the connection after ``close()``."""

    def __getattr__(self, item: str) -> Any:
        raise StoreError("the catalog store is closed")


class Database:
    """The connection to one SQLite file (``":memory:"``: a throwaway database), migrated to
    the newest schema on opening (unless ``read_only``; ``None``: only when the file cannot be
    written). Safe to share between threads; each process opens its own."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float, read_only: bool | None) -> None:
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

    @property
    def path(self) -> Path:
        """The database file (``Path(":memory:")`` for a throwaway one)."""
        return self._path

    @property
    def read_only(self) -> bool:
        """True when the file was opened for reading only."""
        return self._read_only

    def close(self) -> None:
        """Close the connection; further use raises ``StoreError``. Idempotent."""
        with self._lock:
            conn = self._conn
            if isinstance(conn, sqlite3.Connection):
                self._conn = _Closed()
                conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (rolled back on any exception).

        Takes the write lock up front (waiting up to the busy timeout for another process), so
        what is read inside is still true at commit. Nested use becomes a savepoint.
        """
        with self._lock:
            conn = self.connection()
            if self._depth == 0:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                except sqlite3.Error as exc:
                    raise self.error(exc) from exc
                self._depth = 1
                try:
                    yield conn
                    conn.execute("COMMIT")
                except sqlite3.Error as exc:
                    _rollback(conn)
                    raise self.error(exc) from exc
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
                    yield conn
                except BaseException as exc:
                    conn.execute(f"ROLLBACK TO {savepoint}")
                    conn.execute(f"RELEASE {savepoint}")
                    if isinstance(exc, sqlite3.Error):
                        raise self.error(exc) from exc
                    raise
                else:
                    conn.execute(f"RELEASE {savepoint}")
                finally:
                    self._depth -= 1

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for multi-query reads (joins the open transaction, if any)."""
        with self._lock:
            conn = self.connection()
            if self._depth:
                try:
                    yield conn
                except sqlite3.Error as exc:
                    raise self.error(exc) from exc
                return
            try:
                conn.execute("BEGIN")
            except sqlite3.Error as exc:
                raise self.error(exc) from exc
            self._depth = 1
            try:
                yield conn
            except sqlite3.Error as exc:
                raise self.error(exc) from exc
            finally:
                self._depth = 0
                _rollback(conn)

    def connection(self) -> sqlite3.Connection:
        """The open connection, refused after ``close()`` and in a forked child."""
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

    def error(self, exc: sqlite3.Error) -> StoreError:
        """SQLite's error as the ``StoreError`` a user reads (read-only, locked, or as is)."""
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
