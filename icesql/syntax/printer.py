"""Canonical SQL for ast nodes: ``parse(to_sql(stmt)) == [stmt]`` for every parsed statement.

Keywords upper case, one line per statement, options ``NAME = value`` separated by ``, ``.
Identifiers are quoted when they were quoted in the source (``Ident.quoted`` takes part in
equality, and the analyzer reads ``REGION = "eu-west-1"`` differently from a bare word), and
otherwise only when needed: not a simple lower-case word, or ``true``/``false`` as a value.
Sinks print in the design-document spelling (``TO ICEBERG CATALOG cat``) with their clauses
in a fixed order.

``to_sql(node, redact=True)`` replaces secret material (CREATE/ALTER SECRET values, and values
given to options the dialect's one rule, ``icesql.syntax.options.secrecy``, calls secret, such
as a plain string for ``SECRET ACCESS KEY``) with ``'<redacted>'``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from icesql.syntax import ast
from icesql.syntax.options import STORAGE_KINDS, Secrecy, secrecy

# The option list (a key of ``icesql.syntax.options.LISTS``) of each kind of connection and source.
CONNECTION_LISTS = {
    **{ast.ConnectionKind[s.keyword]: s.list_kind for s in STORAGE_KINDS},  # AWS, GCS, AZURE
    ast.ConnectionKind.ICEBERG_CATALOG: "iceberg_catalog",
    ast.ConnectionKind.KAFKA: "kafka",
    ast.ConnectionKind.CONFLUENT_SCHEMA_REGISTRY: "schema_registry",
}


def source_list(kind: ast.SourceKind) -> str:
    return "kafka_source" if kind is ast.SourceKind.KAFKA else "source"

_SIMPLE = re.compile(r"[a-z_][a-z0-9_]*\Z")
# Words that an unquoted identifier cannot spell where a value is expected.
_VALUE_WORDS = frozenset({"true", "false"})
REDACTED = "'<redacted>'"


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def ident_sql(ident: ast.Ident) -> str:
    if ident.quoted or not _SIMPLE.match(ident.name):
        return quote_ident(ident.name)
    return ident.name


def string_sql(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class _Printer:
    def __init__(self, redact: bool) -> None:
        self.redact = redact

    # ------------------------------------------------------------ values and options

    def value(self, value: ast.Value, level: Secrecy = Secrecy.NONE) -> str:
        if self.redact and level is not Secrecy.NONE and not isinstance(value, ast.SecretRef | ast.OptionList):
            hidden = level is Secrecy.VALUE or isinstance(value, ast.StringLit | ast.NumberLit | ast.StringList) or (
                isinstance(value, ast.Ident) and value.quoted
            )
            if hidden:
                return REDACTED
        if isinstance(value, ast.StringLit):
            return string_sql(value.value)
        if isinstance(value, ast.NumberLit):
            return value.text
        if isinstance(value, ast.BoolLit):
            return "TRUE" if value.value else "FALSE"
        if isinstance(value, ast.Ident):
            if not value.quoted and value.name in _VALUE_WORDS:
                return quote_ident(value.name)
            return ident_sql(value)
        if isinstance(value, ast.SecretRef):
            return "SECRET " + ident_sql(value.name)
        if isinstance(value, ast.OptionList):
            return self.options(value.options, None, inherit=level)
        if isinstance(value, ast.StringList):
            return "(" + ", ".join(string_sql(item.value) for item in value.items) + ")"
        raise TypeError(f"not an option value: {value!r}")

    def option(self, option: ast.Option, list_kind: str | None = None, inherit: Secrecy | None = None) -> str:
        name = string_sql(option.name) if option.key_is_string else option.name.upper()
        if option.value is None:
            return name
        if inherit is Secrecy.VALUE:
            level = Secrecy.VALUE
        elif inherit is not None:  # inside a nested list: keys that say secret
            level = secrecy(None, option.name, key_is_string=True)
        else:
            level = secrecy(list_kind, option.name, key_is_string=option.key_is_string)
        return f"{name} = {self.value(option.value, level)}"

    def options(
        self, options: Iterable[ast.Option], list_kind: str | None, *, inherit: Secrecy | None = None
    ) -> str:
        """A parenthesised option list; ``list_kind`` names it in ``icesql.syntax.options.LISTS``."""
        return "(" + ", ".join(self.option(o, list_kind, inherit) for o in options) + ")"

    # ------------------------------------------------------------ statements

    def statement(self, node: ast.Node) -> str:
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            raise TypeError(f"cannot print {type(node).__name__}")
        out: str = method(node)
        return out

    @staticmethod
    def _ine(flag: bool) -> str:
        return "IF NOT EXISTS " if flag else ""

    def _CreateSecret(self, s: ast.CreateSecret) -> str:
        value = REDACTED if self.redact else string_sql(s.value.value)
        return f"CREATE SECRET {self._ine(s.if_not_exists)}{ident_sql(s.name)} AS {value}"

    def _AlterSecret(self, s: ast.AlterSecret) -> str:
        value = REDACTED if self.redact else string_sql(s.value.value)
        return f"ALTER SECRET {ident_sql(s.name)} AS {value}"

    def _CreateConnection(self, s: ast.CreateConnection) -> str:
        out = f"CREATE CONNECTION {self._ine(s.if_not_exists)}{ident_sql(s.name)} TO {s.connection_kind.value}"
        kind = CONNECTION_LISTS[s.connection_kind]
        if s.options:
            out += " " + self.options(s.options, kind)
        if s.with_options:
            out += " WITH " + self.options(s.with_options, "connection_with")
        return out

    def _CreateSource(self, s: ast.CreateSource) -> str:
        out = f"CREATE SOURCE {self._ine(s.if_not_exists)}{ident_sql(s.name)} FROM {s.source_kind.value}"
        if s.source_kind is ast.SourceKind.FILES:
            out += " " + string_sql(s.path.value if s.path is not None else "")
        if s.source_kind is ast.SourceKind.KAFKA:
            out += " CONNECTION " + (ident_sql(s.connection) if s.connection is not None else '""')
        if s.options:
            out += " " + self.options(s.options, source_list(s.source_kind))
        if s.include:
            out += " INCLUDE " + ", ".join(self._IncludeItem(item) for item in s.include)
        return out

    def _IncludeItem(self, n: ast.IncludeItem) -> str:
        what = n.what.name.upper() if not n.what.quoted and _SIMPLE.match(n.what.name) else ident_sql(n.what)
        return what + (" AS " + ident_sql(n.alias) if n.alias is not None else "")

    def _CreateView(self, s: ast.CreateView) -> str:
        replace = "OR REPLACE " if s.or_replace else ""
        return f"CREATE {replace}VIEW {self._ine(s.if_not_exists)}{ident_sql(s.name)} AS {s.query}"

    def _AlterSource(self, s: ast.AlterSource) -> str:
        return f"ALTER SOURCE {ident_sql(s.name)} SET " + self.options(s.set_options, "alter_source")

    def _object_name(self, name: ast.Ident | ast.StringLit) -> str:
        return string_sql(name.value) if isinstance(name, ast.StringLit) else ident_sql(name)

    def _partition_field(self, f: ast.PartitionField) -> str:
        args = ", ".join(
            a.number.text if a.number is not None else ident_sql(a.column) if a.column is not None else "NULL"
            for a in f.args
        )
        if f.transform is None:
            return args
        return f"{ident_sql(f.transform)}({args})"

    def _CreateSink(self, s: ast.CreateSink) -> str:
        parts = [
            f"CREATE SINK {self._ine(s.if_not_exists)}{ident_sql(s.name)}",
            "FROM " + ".".join(ident_sql(p) for p in s.relation.parts),
            "TO ICEBERG CATALOG " + ident_sql(s.catalog),
        ]
        if s.catalog_options:
            parts.append(self.options(s.catalog_options, "sink_target"))
        if s.aws_connection is not None:
            parts.append("USING AWS CONNECTION " + ident_sql(s.aws_connection))
        if s.storage_connection is not None:
            parts.append(self._ConnectionRef(s.storage_connection))
        if s.namespace is not None:
            parts.append("NAMESPACE " + self._object_name(s.namespace))
        if s.table is not None:
            parts.append("TABLE " + self._object_name(s.table))
        if s.key:
            key = "KEY (" + ", ".join(ident_sql(k) for k in s.key) + ")"
            parts.append(key + (" NOT ENFORCED" if s.key_not_enforced else ""))
        if s.mode is not None:
            parts.append("MODE " + s.mode.value)
        if s.partition_by:
            parts.append("PARTITION BY (" + ", ".join(self._partition_field(f) for f in s.partition_by) + ")")
        if s.with_options:
            parts.append("WITH " + self.options(s.with_options, "sink"))
        return " ".join(parts)

    def _AlterSink(self, s: ast.AlterSink) -> str:
        out = f"ALTER SINK {ident_sql(s.name)}"
        if s.set_options or not s.reset_options:
            out += " SET " + self.options(s.set_options, "alter_sink")
        if s.reset_options:
            out += " RESET (" + ", ".join(n.upper() for n in s.reset_options) + ")"
        return out

    def _Drop(self, s: ast.Drop) -> str:
        out = f"DROP {s.object_kind.value} "
        if s.if_exists:
            out += "IF EXISTS "
        out += ident_sql(s.name)
        if s.behavior is not None:
            out += " " + s.behavior.value
        return out

    def _Show(self, s: ast.Show) -> str:
        return "SHOW " + s.object_kind.plural

    def _ShowCreate(self, s: ast.ShowCreate) -> str:
        return f"SHOW CREATE {s.object_kind.value} {ident_sql(s.name)}"

    def _ShowSinkStatus(self, s: ast.ShowSinkStatus) -> str:
        return "SHOW SINK STATUS" + (" " + ident_sql(s.name) if s.name is not None else "")

    def _Describe(self, s: ast.Describe) -> str:
        return "DESCRIBE " + ident_sql(s.name)

    def _Select(self, s: ast.Select) -> str:
        return f"{s.keyword} {s.query}"

    def _DescribeTable(self, s: ast.DescribeTable) -> str:
        return "DESCRIBE " + self._QualifiedName(s.name)

    def _ShowTables(self, s: ast.ShowTables) -> str:
        return "SHOW TABLES IN " + ".".join(ident_sql(p) for p in (s.connection, *s.namespace))

    def _ShowSnapshots(self, s: ast.ShowSnapshots) -> str:
        return "SHOW SNAPSHOTS OF SINK " + ident_sql(s.sink)

    def _Explain(self, s: ast.Explain) -> str:
        if isinstance(s.statement, ast.Select):
            return "EXPLAIN " + self._Select(s.statement)
        return "EXPLAIN " + self._CreateSink(s.statement)

    def _ValidateConnection(self, s: ast.ValidateConnection) -> str:
        return "VALIDATE CONNECTION " + ident_sql(s.name)

    def _FlushSink(self, s: ast.FlushSink) -> str:
        return "FLUSH SINKS" if s.name is None else "FLUSH SINK " + ident_sql(s.name)

    # ------------------------------------------------------------ leaves printed alone

    def _Ident(self, n: ast.Ident) -> str:
        return ident_sql(n)

    def _ConnectionRef(self, n: ast.ConnectionRef) -> str:
        return f"USING {n.kind.value} CONNECTION {ident_sql(n.name)}"

    def _QualifiedName(self, n: ast.QualifiedName) -> str:
        return ".".join(ident_sql(p) for p in n.parts)

    def _StringLit(self, n: ast.StringLit) -> str:
        return self.value(n)

    def _NumberLit(self, n: ast.NumberLit) -> str:
        return self.value(n)

    def _BoolLit(self, n: ast.BoolLit) -> str:
        return self.value(n)

    def _SecretRef(self, n: ast.SecretRef) -> str:
        return self.value(n)

    def _StringList(self, n: ast.StringList) -> str:
        return self.value(n)

    def _OptionList(self, n: ast.OptionList) -> str:
        return self.value(n)

    def _Option(self, n: ast.Option) -> str:
        return self.option(n)

    def _PartitionField(self, n: ast.PartitionField) -> str:
        return self._partition_field(n)

    def _PartitionArg(self, n: ast.PartitionArg) -> str:
        return self._partition_field(ast.PartitionField(None, (n,)))


def to_sql(node: ast.Node, redact: bool = False) -> str:
    """Canonical SQL for one node (a statement, or any smaller node), without ``;``."""
    return _Printer(redact).statement(node)


def format_script(statements: Iterable[ast.Statement], redact: bool = False) -> str:
    """Statements as a script: one per line, each ending with ``;``."""
    printer = _Printer(redact)
    return "".join(printer.statement(s) + ";\n" for s in statements)


__all__ = ["CONNECTION_LISTS", "REDACTED", "source_list", "format_script", "ident_sql", "quote_ident", "string_sql", "to_sql"]
