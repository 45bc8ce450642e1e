"""Reading an Iceberg table of a connection on the driver, for SELECT, DESCRIBE and SHOW.

``open_table`` loads the table from a catalog loaded as a sink's is
(``target.load_connection_catalog``: the connection's auth and secrets; storage credentials
from an AWS connection when the catalog vends none), turning a missing table or an unreachable
catalog into one-line errors with no secret in them.
``read_rows`` reads one snapshot (the current one, a snapshot id, or the snapshot current at a
time) with every delete file applied: the snapshot's files come from its manifests and
``compact.LiveRows`` applies position and equality deletes, the code compaction rewrites files
with (pyiceberg's own scan cannot apply equality deletes). The rows come back as one Arrow table
that the caller hands to Spark.

Before Spark starts, a session asks two more questions here (``icesql.sessions.names``): which
relations a query's text names (``query_relations``, sqlglot's parse: only names in a table's
place, CTEs left out), and where a missing table's name goes wrong (``missing_part``: the
namespace or the table, with what exists there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icesql.engine.base.secrets import SecretValues
from icesql.engine.connections.catalog_kinds import kind_of, label
from icesql.engine.connections.failures import guarded
from icesql.errors import ExecutionError
from icesql.plan import AwsConnectionPlan, CatalogConnectionPlan, SecretResolver


class MissingTableError(ExecutionError):
    """A connection's catalog has no such table (the session adds what exists there)."""

    def __init__(self, message: str, *, connection: str, namespace: tuple[str, ...], table: str, hint: str) -> None:
        super().__init__(message, hint=hint)
        self.connection = connection
        self.namespace = namespace
        self.table = table


def in_catalog(conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None, secrets: SecretResolver, action: str, fn: Any) -> Any:
    """``fn()`` with a failure turned into one line naming the connection (no secret in it)."""
    return guarded(fn, label(conn), kind_of(conn).endpoint(conn, aws), SecretValues(secrets), action)


def open_table(catalog: Any, conn: CatalogConnectionPlan, aws: AwsConnectionPlan | None, secrets: SecretResolver,
               namespace: tuple[str, ...], table: str) -> Any:
    from pyiceberg.exceptions import NoSuchTableError

    name = ".".join((conn.name, *namespace, table))

    def load() -> Any:
        try:
            return catalog.load_table((*namespace, table))
        except NoSuchTableError:
            raise MissingTableError(
                f"table {name} does not exist",
                connection=conn.name,
                namespace=namespace,
                table=table,
                hint=f"SHOW TABLES IN {'.'.join((conn.name, *namespace))} lists the tables there",
            ) from None

    return in_catalog(conn, aws, secrets, f"load table {name}", load)


@dataclass(frozen=True)
class MissingPart:
    """Where a missing table's name goes wrong: the namespace level ``depth`` (0 the first) does
    not exist, or (``depth == len(namespace)``) the table; ``there`` lists what exists at that
    level, sorted."""

    depth: int
    there: tuple[str, ...]


def missing_part(catalog: Any, namespace: tuple[str, ...], table: str) -> MissingPart | None:
    """Why ``namespace.table`` is not in ``catalog``, from its listings; None when it is there
    after all. A catalog's failure is raised (the caller leaves the name to the engine then)."""
    for depth in range(len(namespace)):
        children = {tuple(ns) for ns in catalog.list_namespaces(namespace[:depth])}
        if namespace[: depth + 1] not in children:
            return MissingPart(depth, tuple(sorted({ns[-1] for ns in children if len(ns) == depth + 1})))
    tables = {tuple(t)[-1] for t in catalog.list_tables(namespace)}
    return None if table in tables else MissingPart(len(namespace), tuple(sorted(tables)))


@dataclass(frozen=True)
class QueryRelation:
    """A name in a table's place in a query: its parts (folded to lower case unless quoted, as
    Spark compares them) and each part's ``(start, end)`` offsets in the query text."""

    parts: tuple[str, ...]
    offsets: tuple[tuple[int, int], ...]


def query_relations(sql: str) -> tuple[QueryRelation, ...] | None:
    """The relations ``sql`` (Spark SQL) reads by name: the tables and views of its FROM and JOIN
    clauses and subqueries, without its common table expressions and table functions
    (``range(10)``); None when sqlglot cannot parse it (then nothing is known)."""
    import sqlglot
    from sqlglot import exp

    try:
        trees = [t for t in sqlglot.parse(sql, read="spark") if t is not None]
        found: list[QueryRelation] = []
        for tree in trees:
            ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
            for node in tree.find_all(exp.Table):
                if node.find_ancestor(exp.Hint) is not None:  # /*+ BROADCAST(alias) */ names an alias
                    continue
                idents = [p for p in node.parts if isinstance(p, exp.Identifier) and "start" in p.meta]
                if not idents or len(idents) != len(node.parts):  # a table function, IDENTIFIER(...)
                    continue
                parts = tuple(p.name if p.quoted else p.name.lower() for p in idents)
                offsets = tuple((p.meta["start"], p.meta["end"] + 1) for p in idents)
                if len(parts) == 1 and parts[0].lower() in ctes:
                    continue
                if _placed(sql, offsets, parts):  # else the place would be wrong: then not at all
                    found.append(QueryRelation(parts, offsets))
    except Exception:  # a parse error, or a sqlglot bug: the engine answers as before
        return None
    return tuple(found)


def _placed(sql: str, offsets: tuple[tuple[int, int], ...], parts: tuple[str, ...]) -> bool:
    """Whether each part is where its offsets say (character offsets, quotes included)."""
    texts = [sql[start:end] for start, end in offsets]
    return all(t.strip("`").replace("``", "`").lower() == p.lower() for t, p in zip(texts, parts, strict=True))


def snapshot_of(table: Any, name: str, snapshot_id: int | None, as_of_ms: int | None) -> Any:
    """The snapshot to read: by id, as of a time (milliseconds since the epoch), or the current one."""
    if snapshot_id is not None:
        snap = table.snapshot_by_id(snapshot_id)
        if snap is None:
            raise ExecutionError(
                f"table {name} has no snapshot {snapshot_id}", hint="SHOW SNAPSHOTS OF SINK ... lists a sink's"
            )
        return snap
    if as_of_ms is not None:
        snap = table.snapshot_as_of_timestamp(as_of_ms)
        if snap is None:
            raise ExecutionError(f"table {name} has no snapshot at or before that time")
        return snap
    return table.current_snapshot()


def read_rows(table: Any, snapshot: Any, *, travelled: bool = False) -> Any:
    """The rows of ``snapshot`` of ``table`` with every delete applied, as an Arrow table: in the
    table's current schema, or in the snapshot's when ``travelled`` (time travel), as the
    Iceberg spec reads them. Files written before a column was added read it as nulls."""
    import pyarrow as pa
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    from icesql.engine.iceberg.deletes import DeleteIndex, LiveRows
    from icesql.engine.iceberg.table_files import live_files

    schema = table.schema()
    if travelled and snapshot is not None and snapshot.schema_id is not None:
        schema = table.schemas().get(snapshot.schema_id, schema)
    target = schema_to_pyarrow(schema, include_field_ids=False)
    data, deletes = live_files(table, snapshot)
    live = LiveRows(table.io, schema, DeleteIndex(table, deletes))
    pieces = []
    for f in data:
        rows, _ = live.read(f)
        if rows.num_rows:
            pieces.append(rows.cast(target) if rows.schema != target else rows)
    if not pieces:
        return target.empty_table()
    return pa.concat_tables(pieces)


def arrow_schema(table: Any, snapshot: Any, *, travelled: bool = False) -> Any:
    """The Arrow schema ``read_rows`` gives the rows of ``snapshot`` (without reading them)."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    schema = table.schema()
    if travelled and snapshot is not None and snapshot.schema_id is not None:
        schema = table.schemas().get(snapshot.schema_id, schema)
    return schema_to_pyarrow(schema, include_field_ids=False)


class TableCache:
    """The tables a session's SELECTs read, kept between queries: catalogs (per connection and
    storage credentials), and the rows of the last few (table, snapshot) pairs read. A table is
    loaded again at each query (``begin``), once within it, so a new snapshot is seen at once
    and its rows read then; the rows of a snapshot never change, so they are kept."""

    def __init__(self, load_catalog: Any, secrets: Any, entries: int = 8) -> None:
        self._load_catalog = load_catalog  # (connection, sink storage names) -> (catalog, conn, aws)
        self._secrets = secrets
        self._entries = entries
        self._catalogs: dict[tuple[str, tuple[str | None, ...]], Any] = {}
        self._rows: dict[tuple[Any, ...], Any] = {}  # in use order, oldest first
        self._tables: dict[tuple[Any, ...], Any] = {}  # loaded in this query

    def begin(self) -> None:
        """A new query: tables are loaded again (their current snapshot may have moved)."""
        self._tables = {}

    def forget_catalogs(self) -> None:
        """A connection changed: catalogs are loaded again."""
        self._catalogs = {}

    def open(self, ref: Any, storage: tuple[str | None, ...]) -> tuple[Any, Any, bool]:
        """(table, snapshot, travelled) of a ``TableRef``, loaded once per query; ``storage``:
        the storage connections of a sink writing there (``Engine.connection_catalog``)."""
        storage = tuple(storage)
        key = (ref.connection, storage)
        if key not in self._catalogs:
            self._catalogs[key] = self._load_catalog(ref.connection, storage)
        catalog, conn, aws = self._catalogs[key]
        name = (ref.connection, storage, ref.namespace, ref.table)
        if name not in self._tables:
            self._tables[name] = open_table(catalog, conn, aws, self._secrets, ref.namespace, ref.table)
        table = self._tables[name]
        snapshot = snapshot_of(table, ref.identifier, ref.snapshot_id, ref.as_of_ms)
        travelled = ref.snapshot_id is not None or ref.as_of_ms is not None
        return table, snapshot, travelled

    def rows(self, table: Any, snapshot: Any, travelled: bool) -> Any:
        """``read_rows`` of a snapshot, from the cache when it was read before."""
        key = (
            table.metadata.table_uuid,
            table.metadata.location,
            snapshot.snapshot_id if snapshot is not None else None,
            snapshot.schema_id if travelled and snapshot is not None else table.schema().schema_id,
        )
        rows = self._rows.pop(key, None)
        if rows is None:
            rows = read_rows(table, snapshot, travelled=travelled)
        self._rows[key] = rows
        while len(self._rows) > self._entries:
            self._rows.pop(next(iter(self._rows)))
        return rows


__all__ = [
    "MissingPart",
    "MissingTableError",
    "QueryRelation",
    "TableCache",
    "arrow_schema",
    "in_catalog",
    "missing_part",
    "open_table",
    "query_relations",
    "read_rows",
    "snapshot_of",
]
