"""One plan per statement kind: what ``analyze`` returns and the session applies.

A statement plan wraps an object plan (``CreateObjectPlan``, ``AlterSinkPlan``, ...) or names
what to show, drop or query; ``StatementPlan`` is their union. ``to_dict`` writes them (the
golden plan files hold that form), but only the object plans inside are stored and read back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from icesql.plan_objects import ObjectPlan, SinkPlan, SourcePlan
from icesql.plan_vocabulary import OMIT_AT_DEFAULT, Redacted


@dataclass(frozen=True)
class CreateSecretPlan:
    name: str
    value: Redacted
    if_not_exists: bool = False
    replace: bool = False  # ALTER SECRET


@dataclass(frozen=True)
class CreateObjectPlan:
    """CREATE CONNECTION/SOURCE/VIEW/SINK: the definition plus what it depends on."""

    definition: ObjectPlan
    sql: str  # canonical CREATE statement (secret values never appear in it)
    dependencies: tuple[tuple[str, str], ...] = ()  # (kind, name): 'secret'/'connection'/...
    if_not_exists: bool = False
    # A secret written as a plain string where a SECRET is expected (the design doc's
    # SECRET ACCESS KEY = '...'): the session stores it as a hidden secret under this name,
    # the definition refers to it by SecretName, and ``sql`` shows it as '********'.
    inline_secrets: tuple[tuple[str, Redacted], ...] = ()
    # CREATE OR REPLACE VIEW: an existing view of that name is replaced (its sinks restart)
    replace: bool = field(default=False, metadata=OMIT_AT_DEFAULT)


@dataclass(frozen=True)
class AlterSourcePlan:
    """ALTER SOURCE name SET (SCHEMA = '...')."""

    name: str
    definition: SourcePlan  # the source's definition after the change


@dataclass(frozen=True)
class AlterSinkPlan:
    name: str
    definition: SinkPlan  # the sink's definition after the change
    sql: str


@dataclass(frozen=True)
class DropPlan:
    kind: str  # 'secret' | 'connection' | 'source' | 'view' | 'sink'
    name: str
    if_exists: bool = False
    cascade: bool = False


@dataclass(frozen=True)
class ShowPlan:
    kind: str  # plural listing: 'secrets', 'connections', ...


@dataclass(frozen=True)
class ShowCreatePlan:
    kind: str
    name: str


@dataclass(frozen=True)
class ShowSinkStatusPlan:
    name: str | None = None


@dataclass(frozen=True)
class DescribePlan:
    name: str


@dataclass(frozen=True)
class ExplainPlan:
    sink: SinkPlan


@dataclass(frozen=True)
class ValidateConnectionPlan:
    name: str


@dataclass(frozen=True)
class FlushSinkPlan:
    name: str | None = None


@dataclass(frozen=True)
class TableRef:
    """An Iceberg table a SELECT reads (``connection.namespace.table`` in its text), at the
    current snapshot or travelled to ``snapshot_id`` / ``as_of`` (an ISO timestamp)."""

    alias: str  # the temporary view the query reads it through
    connection: str
    namespace: tuple[str, ...]
    table: str
    snapshot_id: int | None = None
    as_of: str | None = None  # as written
    as_of_ms: int | None = None  # the same, milliseconds since the epoch
    start: int = 0  # the name (and its time travel clause) in the source text
    end: int = 0

    @property
    def identifier(self) -> str:
        return ".".join((self.connection, *self.namespace, self.table))


@dataclass(frozen=True)
class SelectPlan:
    """A bounded query: ``sql`` is the Spark SQL to run, each table reference replaced by the
    alias its rows are registered under; ``edits`` map it back to the source text
    ((sql start, sql end, source start, source end), in order) so that Spark's errors point at
    the statement; ``base`` is the source offset of ``sql``'s character ``head``."""

    sql: str
    relations: tuple[str, ...] = ()  # icesql sources and views read
    tables: tuple[TableRef, ...] = ()
    limit: int | None = None  # the LIMIT added when the query has none
    head: int = 0
    base: int = 0
    edits: tuple[tuple[int, int, int, int], ...] = ()

    def source_offset(self, pos: int) -> int:
        """The source offset of ``sql[pos]``."""
        shift = self.base - self.head
        for s0, s1, o0, o1 in self.edits:
            if pos < s0:
                break
            if pos < s1:
                return o0
            shift = o1 - s1
        return max(self.base, pos + shift)


@dataclass(frozen=True)
class ExplainSelectPlan:
    """``EXPLAIN SELECT``: the query analysed as a SELECT is; the engine says which path
    would answer it and why, without running it."""

    select: SelectPlan


@dataclass(frozen=True)
class ShowTablesPlan:
    connection: str
    namespace: tuple[str, ...] = ()


@dataclass(frozen=True)
class DescribeTablePlan:
    connection: str
    namespace: tuple[str, ...]
    table: str


@dataclass(frozen=True)
class ShowSnapshotsPlan:
    sink: str


StatementPlan = (
    CreateSecretPlan
    | CreateObjectPlan
    | AlterSourcePlan
    | AlterSinkPlan
    | DropPlan
    | ShowPlan
    | ShowCreatePlan
    | ShowSinkStatusPlan
    | DescribePlan
    | ExplainPlan
    | ExplainSelectPlan
    | ValidateConnectionPlan
    | FlushSinkPlan
    | SelectPlan
    | ShowTablesPlan
    | DescribeTablePlan
    | ShowSnapshotsPlan
)
