"""The icesql syntax tree: frozen dataclasses, tuples not lists, spans outside equality.

The tree records what the user wrote (both the design-document and the Materialize spellings
keep their shape: options stay generic ``Option(name, value)`` pairs); the analyzer decides
what the options mean. ``to_sql()`` prints canonical SQL such that ``parse(x.to_sql()) == x``;
``to_dict()`` gives stable, JSON-ready dictionaries.

Identifiers are folded to lower case unless quoted; ``Ident.quoted`` remembers the quotes so
the printer can keep them (and so the analyzer can accept ``REGION = "eu-west-1"``, a
double-quoted value as the design document writes it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Union

from icesql.errors import Span


def _span() -> Any:
    return field(default=None, compare=False, repr=False, kw_only=True)


# field metadata: ``to_dict`` leaves the field out at its default (fields added after the
# golden corpus was written, so the dictionaries of statements without them read as before)
OMIT_AT_DEFAULT = {"omit_at_default": True}


class ObjectKind(enum.Enum):
    SECRET = "SECRET"
    CONNECTION = "CONNECTION"
    SOURCE = "SOURCE"
    VIEW = "VIEW"
    SINK = "SINK"

    @property
    def plural(self) -> str:
        return self.value + "S"


class ConnectionKind(enum.Enum):
    """What ``CREATE CONNECTION name TO <kind>`` makes. AWS, GCS and AZURE hold object-store
    credentials (``icesql.syntax.options.STORAGE``, keyed by the member name)."""

    AWS = "AWS"
    GCS = "GCS"
    AZURE = "AZURE"
    ICEBERG_CATALOG = "ICEBERG CATALOG"
    KAFKA = "KAFKA"
    CONFLUENT_SCHEMA_REGISTRY = "CONFLUENT SCHEMA REGISTRY"


class SourceKind(enum.Enum):
    FILES = "FILES"
    GENERATOR = "GENERATOR"
    KAFKA = "KAFKA"


class SinkMode(enum.Enum):
    APPEND = "APPEND"
    UPSERT = "UPSERT"


class DropBehavior(enum.Enum):
    CASCADE = "CASCADE"
    RESTRICT = "RESTRICT"


# --------------------------------------------------------------------------- leaves


@dataclass(frozen=True)
class Node:
    """Base of every node; ``span`` never takes part in equality."""

    # field() written out (not through _span()) so that mypy sees kw_only and spans stay
    # keyword-only for type checkers too.
    span: Span | None = field(default=None, compare=False, repr=False, kw_only=True)

    def to_sql(self) -> str:
        from icesql.syntax.printer import to_sql

        return to_sql(self)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = node_to_dict(self)
        return out


@dataclass(frozen=True)
class Ident(Node):
    """An identifier: ``name`` is folded to lower case unless it was double-quoted."""

    name: str
    quoted: bool = False


@dataclass(frozen=True)
class QualifiedName(Node):
    """A dotted name such as ``db.orders`` (a Spark table) or just ``orders``."""

    parts: tuple[Ident, ...]

    @property
    def dotted(self) -> str:
        return ".".join(p.name for p in self.parts)


@dataclass(frozen=True)
class StringLit(Node):
    """A single-quoted string; ``value`` has ``''`` already unescaped."""

    value: str


@dataclass(frozen=True)
class NumberLit(Node):
    """A number as written (``16``, ``1.5``, ``-3``); ``value`` is int or float."""

    text: str

    @property
    def value(self) -> int | float:
        try:
            return int(self.text)
        except ValueError:
            return float(self.text)


@dataclass(frozen=True)
class BoolLit(Node):
    value: bool


@dataclass(frozen=True)
class SecretRef(Node):
    """``SECRET name`` used as an option value."""

    name: Ident


@dataclass(frozen=True)
class StringList(Node):
    """A parenthesised list of strings used as a value: ``BROKERS = ('h1:9092', 'h2:9092')``."""

    items: tuple[StringLit, ...]


@dataclass(frozen=True)
class OptionList(Node):
    """A parenthesised option list used as a value: ``PROPERTIES = ('k' = 'v', ...)``."""

    options: tuple[Option, ...]


# An option value. A bare or double-quoted identifier is an ``Ident`` (the analyzer accepts a
# quoted identifier where a string is expected, as in the design document's examples).
Value = Union[StringLit, NumberLit, BoolLit, Ident, SecretRef, OptionList, StringList]


@dataclass(frozen=True)
class Option(Node):
    """``NAME WORDS = value`` or a bare ``NAME`` (value None).

    ``name`` is the upper-cased words joined by single spaces (``"SECRET ACCESS KEY"``), or,
    for a property key written as a string (``'write.format.default' = 'parquet'``), the
    string itself with ``key_is_string`` set.
    """

    name: str
    value: Value | None = None
    key_is_string: bool = False


# --------------------------------------------------------------------------- statements


@dataclass(frozen=True)
class Statement(Node):
    kind_name: ClassVar[str] = "statement"


@dataclass(frozen=True)
class CreateSecret(Statement):
    name: Ident
    value: StringLit
    if_not_exists: bool = False


@dataclass(frozen=True)
class AlterSecret(Statement):
    name: Ident
    value: StringLit


@dataclass(frozen=True)
class CreateConnection(Statement):
    """``CREATE CONNECTION name TO AWS | GCS | AZURE | ICEBERG CATALOG | KAFKA (options) [WITH (options)]``."""

    name: Ident
    connection_kind: ConnectionKind
    options: tuple[Option, ...] = ()
    with_options: tuple[Option, ...] = ()
    if_not_exists: bool = False


@dataclass(frozen=True)
class IncludeItem(Node):
    """One item of a Kafka source's ``INCLUDE`` clause: ``KEY``, ``PARTITION AS p``, ...
    (``what`` as written; the analyzer checks it)."""

    what: Ident
    alias: Ident | None = None


@dataclass(frozen=True)
class CreateSource(Statement):
    """``CREATE SOURCE name FROM FILES 'path' (options)``, ``FROM GENERATOR (options)`` or
    ``FROM KAFKA CONNECTION k (options) [INCLUDE ...]``.

    Materialize's trailing ``FORMAT JSON``, ``KEY FORMAT TEXT``, ``ENVELOPE UPSERT`` and
    ``FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY CONNECTION csr`` are kept as the options
    ``FORMAT``, ``KEY FORMAT``, ``ENVELOPE`` and ``SCHEMA REGISTRY`` they mean.
    """

    name: Ident
    source_kind: SourceKind
    path: StringLit | None = None
    options: tuple[Option, ...] = ()
    if_not_exists: bool = False
    connection: Ident | None = field(default=None, metadata=OMIT_AT_DEFAULT)  # KAFKA
    include: tuple[IncludeItem, ...] = field(default=(), metadata=OMIT_AT_DEFAULT)  # KAFKA


@dataclass(frozen=True)
class CreateView(Statement):
    """``CREATE VIEW name AS <select>``; the query text is kept verbatim for Spark."""

    name: Ident
    query: str
    if_not_exists: bool = False
    or_replace: bool = False  # CREATE OR REPLACE VIEW: a view of that name is replaced
    query_span: Span | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class PartitionArg(Node):
    """One argument of a partition transform: a column or an integer literal."""

    column: Ident | None = None
    number: NumberLit | None = None


@dataclass(frozen=True)
class PartitionField(Node):
    """``col`` (transform None) or ``name(arg, ...)`` exactly as written; the analyzer
    resolves spelling (``days``/``day``) and argument order (``bucket(c, 16)``)."""

    transform: Ident | None
    args: tuple[PartitionArg, ...]


@dataclass(frozen=True)
class ConnectionRef(Node):
    """A connection named with its kind: a sink's ``USING GCS CONNECTION g``."""

    kind: ConnectionKind
    name: Ident


@dataclass(frozen=True)
class CreateSink(Statement):
    """Both spellings of CREATE SINK.

    Design document::

        CREATE SINK s FROM rel TO ICEBERG CATALOG cat USING AWS CONNECTION aws
        NAMESPACE "ns" TABLE "t" WITH (...)

    Materialize::

        CREATE SINK s FROM rel INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE = 'ns', TABLE = 't')
        USING AWS CONNECTION aws KEY (id) NOT ENFORCED MODE UPSERT WITH (COMMIT INTERVAL = '60s')

    ``catalog_options`` holds the parenthesised options after the catalog name;
    ``namespace``/``table`` hold the design-document clause. Materialize's ``FORMAT ORC`` clause
    is kept as the ``with_options`` entry ``FORMAT`` it means (as a Kafka source's ``FORMAT JSON``).
    ``USING AWS CONNECTION aws`` is ``aws_connection``; ``USING GCS CONNECTION g`` and ``USING
    AZURE CONNECTION a`` are ``storage_connection`` (a sink has one USING clause).
    """

    name: Ident
    relation: QualifiedName
    catalog: Ident
    catalog_options: tuple[Option, ...] = ()
    aws_connection: Ident | None = None
    namespace: Ident | StringLit | None = None
    table: Ident | StringLit | None = None
    key: tuple[Ident, ...] = ()
    key_not_enforced: bool = False
    mode: SinkMode | None = None
    partition_by: tuple[PartitionField, ...] = ()
    with_options: tuple[Option, ...] = ()
    if_not_exists: bool = False
    storage_connection: ConnectionRef | None = field(default=None, metadata=OMIT_AT_DEFAULT)  # GCS, AZURE


@dataclass(frozen=True)
class AlterSource(Statement):
    """``ALTER SOURCE name SET (SCHEMA = '...')``: a FILES source's declared schema changes."""

    name: Ident
    set_options: tuple[Option, ...] = ()


@dataclass(frozen=True)
class AlterSink(Statement):
    """``ALTER SINK name SET (options)`` (``RESET (names)`` resets options to defaults)."""

    name: Ident
    set_options: tuple[Option, ...] = ()
    reset_options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Drop(Statement):
    object_kind: ObjectKind
    name: Ident
    if_exists: bool = False
    behavior: DropBehavior | None = None


@dataclass(frozen=True)
class Show(Statement):
    """``SHOW SECRETS | CONNECTIONS | SOURCES | VIEWS | SINKS``."""

    object_kind: ObjectKind


@dataclass(frozen=True)
class ShowCreate(Statement):
    object_kind: ObjectKind
    name: Ident


@dataclass(frozen=True)
class ShowSinkStatus(Statement):
    name: Ident | None = None


@dataclass(frozen=True)
class Describe(Statement):
    name: Ident


@dataclass(frozen=True)
class Select(Statement):
    """``SELECT ...`` (or ``WITH ... SELECT ...``): Spark SQL over sources, views and the Iceberg
    tables of connections. ``query`` is the text after the first word (``SELECT`` or ``WITH``),
    kept verbatim for Spark; ``query_span`` is where it stands in the source."""

    keyword: str  # SELECT or WITH
    query: str
    query_span: Span | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class DescribeTable(Statement):
    """``DESCRIBE connection.namespace.table``: an Iceberg table of a catalog connection."""

    name: QualifiedName


@dataclass(frozen=True)
class ShowTables(Statement):
    """``SHOW TABLES IN connection[.namespace]``."""

    connection: Ident
    namespace: tuple[Ident, ...] = ()


@dataclass(frozen=True)
class ShowSnapshots(Statement):
    """``SHOW SNAPSHOTS OF SINK name``: the snapshots of a sink's table."""

    sink: Ident


@dataclass(frozen=True)
class Explain(Statement):
    """``EXPLAIN CREATE SINK ...`` (the sink's plan) or ``EXPLAIN SELECT ...`` (which engine
    answers the query, and why)."""

    statement: CreateSink | Select


@dataclass(frozen=True)
class ValidateConnection(Statement):
    name: Ident


@dataclass(frozen=True)
class FlushSink(Statement):
    """``FLUSH SINK name`` (or ``FLUSH SINKS``): commit what is staged now."""

    name: Ident | None = None

# --------------------------------------------------------------------------- dict form


def node_to_dict(node: Any) -> Any:
    """Stable JSON-ready form: ``{"type": ClassName, field: value, ...}``, spans left out."""
    if isinstance(node, Node):
        out: dict[str, Any] = {"type": type(node).__name__}
        for f in fields(node):
            if f.name in ("span", "query_span"):
                continue
            value = getattr(node, f.name)
            if f.metadata.get("omit_at_default") and value == f.default:
                continue
            out[f.name] = node_to_dict(value)
        return out
    if isinstance(node, enum.Enum):
        return node.value
    if isinstance(node, tuple):
        return [node_to_dict(x) for x in node]
    return node


__all__ = [
    "AlterSecret",
    "AlterSink",
    "AlterSource",
    "BoolLit",
    "ConnectionKind",
    "ConnectionRef",
    "CreateConnection",
    "CreateSecret",
    "CreateSink",
    "CreateSource",
    "CreateView",
    "Describe",
    "DescribeTable",
    "Drop",
    "DropBehavior",
    "Explain",
    "FlushSink",
    "Ident",
    "IncludeItem",
    "Node",
    "NumberLit",
    "ObjectKind",
    "Option",
    "OptionList",
    "PartitionArg",
    "PartitionField",
    "QualifiedName",
    "SecretRef",
    "Show",
    "ShowCreate",
    "Select",
    "ShowSinkStatus",
    "ShowSnapshots",
    "ShowTables",
    "SinkMode",
    "SourceKind",
    "Statement",
    "StringList",
    "StringLit",
    "ValidateConnection",
    "Value",
    "node_to_dict",
]
