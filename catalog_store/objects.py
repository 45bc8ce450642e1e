"""The ``objects`` and ``dependencies`` tables: SQL over one connection, inside the caller's
transaction.

Every function here takes an open ``sqlite3.Connection`` and leaves transactions to
``CatalogStore``, which validates its arguments with ``check_kind`` / ``check_name`` first.
Objects are found through the ``(namespace, name)`` unique index (sources and views share the
``relation`` namespace); a dependency is ``ON DELETE RESTRICT``, so nothing here can leave an
object depending on a dropped one.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from .errors import ObjectExistsError, ObjectNotFoundError, StoreError, describe
from .models import NAMESPACES, StoredObject

OBJECT_COLUMNS = "object_id, kind, name, sql, definition, hidden, created_at, updated_at"
_BARE_NAME = re.compile(r"[a-z_][a-z0-9_]*")

# (object_id, (kind, name)) of each dependency, in the order given
ResolvedDependencies = list[tuple[str, tuple[str, str]]]


def check_kind(kind: object) -> str:
    """The object kind as a string; ``StoreError`` for anything but a known kind."""
    # Accept the analyzer's enums (``ObjectKind.SINK``) as well as plain strings.
    value = getattr(kind, "value", kind)
    if not isinstance(value, str) or value not in NAMESPACES:
        raise StoreError(f"unknown object kind {value!r}; expected one of {', '.join(sorted(NAMESPACES))}")
    return value


def check_name(name: object) -> str:
    """The object name; ``StoreError`` unless a non-empty string."""
    if not isinstance(name, str) or not name:
        raise StoreError(f"an object name must be a non-empty string, not {type(name).__name__}")
    return name


def quote_name(name: str) -> str:
    """``name`` as SQL writes it: bare when it can be, else double-quoted."""
    return name if _BARE_NAME.fullmatch(name) else '"' + name.replace('"', '""') + '"'


def encode_definition(kind: str, name: str, definition: dict[str, Any]) -> str:
    """A plan dictionary as the JSON stored in ``objects.definition``."""
    if not isinstance(definition, dict):
        raise StoreError(f"the definition of {describe(kind, name)} must be a dict")
    try:
        return json.dumps(definition, allow_nan=False)
    except (TypeError, ValueError) as exc:
        # The message names the offending type only, never a value.
        raise StoreError(
            f"the definition of {describe(kind, name)} is not JSON-serialisable ({type(exc).__name__})"
        ) from None


def insert_object(
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
    """Insert an object; its new id, or None when the name was taken and ``if_not_exists``.

    A sink gets its ``sink_state`` row (version 0) in the same transaction."""
    if not isinstance(sql, str):
        raise StoreError(f"the SQL of {describe(kind, name)} must be a string")
    encoded = encode_definition(kind, name, definition)
    row = conn.execute(
        "SELECT kind FROM objects WHERE namespace = ? AND name = ?", (NAMESPACES[kind], name)
    ).fetchone()
    if row is not None:
        if if_not_exists:
            return None
        raise ObjectExistsError(str(row[0]), name)
    dep_ids = resolve_dependencies(conn, (kind, name), dependencies)
    object_id = str(uuid.uuid4())
    now = time.time()
    conn.execute(
        "INSERT INTO objects (object_id, kind, name, namespace, sql, definition, hidden, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (object_id, kind, name, NAMESPACES[kind], sql, encoded, int(hidden), now, now),
    )
    insert_dependencies(conn, object_id, dep_ids)
    if kind == "sink":
        conn.execute("INSERT INTO sink_state (object_id, updated_at) VALUES (?, ?)", (object_id, now))
    return object_id


def resolve_dependencies(
    conn: sqlite3.Connection, owner: tuple[str, str], dependencies: Iterable[tuple[str, str]]
) -> ResolvedDependencies:
    """The ids of ``(kind, name)`` dependencies, each once; a missing one raises
    ``ObjectNotFoundError`` naming ``owner`` as the object that needs it."""
    resolved: ResolvedDependencies = []
    seen: set[str] = set()
    for dependency in dependencies:
        try:
            dep_kind, dep_name = dependency
        except (TypeError, ValueError):
            raise StoreError(f"a dependency must be a (kind, name) pair, not {dependency!r}") from None
        dep = (check_kind(dep_kind), check_name(dep_name))
        dep_id = find_id(conn, *dep)
        if dep_id is None:
            raise ObjectNotFoundError(*dep, needed_by=owner)
        if dep == owner:
            raise StoreError(f"{describe(*owner)} cannot depend on itself")
        if dep_id not in seen:
            seen.add(dep_id)
            resolved.append((dep_id, dep))
    return resolved


def insert_dependencies(conn: sqlite3.Connection, object_id: str, dep_ids: ResolvedDependencies) -> None:
    conn.executemany(
        "INSERT INTO dependencies (object_id, depends_on, position) VALUES (?, ?, ?)",
        [(object_id, dep_id, position) for position, (dep_id, _) in enumerate(dep_ids)],
    )


def find_id(conn: sqlite3.Connection, kind: str, name: str) -> str | None:
    """The id of the object of that kind and name, or None."""
    row = conn.execute(
        "SELECT object_id FROM objects WHERE namespace = ? AND name = ? AND kind = ?",
        (NAMESPACES[kind], name, kind),
    ).fetchone()
    return None if row is None else str(row[0])


def require_id(conn: sqlite3.Connection, kind: str, name: str) -> str:
    """The id of the object of that kind and name; ``ObjectNotFoundError`` when missing."""
    object_id = find_id(conn, kind, name)
    if object_id is None:
        raise not_found(conn, kind, name)
    return object_id


def not_found(conn: sqlite3.Connection, kind: str, name: str) -> ObjectNotFoundError:
    """The error for a missing object, hinting at objects of other kinds with that name."""
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


def dependents(conn: sqlite3.Connection, object_id: str) -> list[tuple[str, str, str]]:
    """(kind, name, id) of the objects that depend directly on this one, sorted."""
    return [
        (str(k), str(n), str(i))
        for k, n, i in conn.execute(
            "SELECT o.kind, o.name, o.object_id FROM dependencies d JOIN objects o ON o.object_id = d.object_id "
            "WHERE d.depends_on = ? ORDER BY o.kind, o.name",
            (object_id,),
        )
    ]


def dependency_ids(conn: sqlite3.Connection, object_id: str) -> list[str]:
    """The ids this object depends on, in the order they were given."""
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT depends_on FROM dependencies WHERE object_id = ? ORDER BY position", (object_id,)
        )
    ]


def reaches(conn: sqlite3.Connection, start: str, target: str) -> bool:
    """Whether ``start`` depends on ``target``, directly or transitively (or is it)."""
    row = conn.execute(
        "WITH RECURSIVE up(id) AS (SELECT ? UNION SELECT d.depends_on FROM dependencies d "
        "JOIN up ON d.object_id = up.id) SELECT 1 FROM up WHERE id = ?",
        (start, target),
    ).fetchone()
    return row is not None


def collect_hidden(conn: sqlite3.Connection, candidates: Iterable[str]) -> list[tuple[str, str]]:
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


def read_object(conn: sqlite3.Connection, row: Sequence[Any]) -> StoredObject:
    """A row of ``OBJECT_COLUMNS`` as a ``StoredObject``, its dependencies read in order."""
    deps = [
        (str(k), str(n))
        for k, n in conn.execute(
            "SELECT o.kind, o.name FROM dependencies d JOIN objects o ON o.object_id = d.depends_on "
            "WHERE d.object_id = ? ORDER BY d.position",
            (row[0],),
        )
    ]
    return stored_object(row, deps)


def stored_object(row: Sequence[Any], deps: Iterable[tuple[str, str]]) -> StoredObject:
    """A row of ``OBJECT_COLUMNS`` and its dependencies as a ``StoredObject``."""
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
