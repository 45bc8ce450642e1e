"""Lark callbacks that build the ast dataclasses, with spans in the whole input text.

The transformer runs inside the LALR parser (``Lark(..., transformer=AstBuilder())``), so no
parse tree is ever built. Every terminal of the grammar is named, hence kept: each callback
sees all tokens of its rule and a node's span runs from its first token to its last.

Callbacks may raise :class:`ParseError` for things the grammar accepts but that cannot mean
anything (a clause written twice, an empty quoted identifier); the parser reports those only
when the text is otherwise syntactically valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from lark import Token, Transformer

from icesql.errors import ParseError, Span, span_within
from icesql.syntax import ast
from icesql.syntax.lexer import query_end

# How deeply ``PROPERTIES = ((...))`` lists may nest: deep enough for any real use, shallow
# enough that the printer and ``to_dict`` (both recursive) can never hit the recursion limit.
MAX_OPTION_NESTING = 16


@dataclass(frozen=True)
class _Part:
    """An intermediate result (a clause, a flag, a list) that is not an ast node."""

    kind: str
    value: Any
    span: Span


Item = Union[Token, ast.Node, _Part]


def _start(item: Any) -> tuple[int, int, int] | None:
    if isinstance(item, Token):
        if item.start_pos is None:
            return None
        return item.start_pos, item.line or 1, item.column or 1
    span = getattr(item, "span", None)
    if span is None:
        return None
    return span.start, span.line, span.column


def _end(item: Any) -> tuple[int, int, int] | None:
    if isinstance(item, Token):
        if item.end_pos is None:
            return None
        return item.end_pos, item.end_line or 1, item.end_column or 1
    span = getattr(item, "span", None)
    if span is None:
        return None
    return span.end, span.end_line, span.end_column


def span_of(items: list[Any] | tuple[Any, ...]) -> Span | None:
    """The span from the first located item to the last one."""
    first = None
    for item in items:
        first = _start(item)
        if first is not None:
            break
    last = None
    for item in reversed(items):
        last = _end(item)
        if last is not None:
            break
    if first is None or last is None:
        return None
    return Span(first[0], last[0], first[1], first[2], last[1], last[2])


def token_span(tok: Token) -> Span:
    span = span_of([tok])
    assert span is not None
    return span


def _error(message: str, at: Any, hint: str | None = None) -> ParseError:
    span = at if isinstance(at, Span) else span_of([at])
    return ParseError(message, span=span, hint=hint)


def ident_from_token(tok: Token) -> ast.Ident:
    text = str(tok)
    if tok.type == "QIDENT":
        name = text[1:-1].replace('""', '"')
        if not name:
            raise _error(
                "empty quoted identifier",
                tok,
                hint='a quoted identifier needs at least one character: "name"',
            )
        return ast.Ident(name, quoted=True, span=token_span(tok))
    return ast.Ident(text.lower(), span=token_span(tok))


def string_from_token(tok: Token) -> ast.StringLit:
    value = tok[1:-1]  # a slice is a plain str: no copy of the token first (a literal may be 50 MB)
    if "''" in value:
        value = value.replace("''", "'")
    return ast.StringLit(value, span=token_span(tok))


def _depth(options: tuple[ast.Option, ...]) -> int:
    # Inner lists were checked when they were built, so this recursion stays shallow.
    inner = [_depth(o.value.options) for o in options if isinstance(o.value, ast.OptionList)]
    return 1 + max(inner, default=0)


def _kind(tok: Token) -> ast.ObjectKind:
    return ast.ObjectKind[tok.type]


_CLAUSE_NAMES = {
    "namespace": "NAMESPACE",
    "table": "TABLE",
    "key": "KEY",
    "mode": "MODE",
    "partition": "PARTITION BY",
    "format": "FORMAT",
    "with": "WITH",
    "catalog_options": "catalog option list",
}


class AstBuilder(Transformer[Token, list[ast.Statement]]):
    """Builds ast nodes from the rules of ``grammar/icesql.lark`` (one method per rule)."""

    # ------------------------------------------------------------ script

    def start(self, children: list[Any]) -> list[ast.Statement]:
        return [c for c in children if isinstance(c, ast.Statement)]

    # ------------------------------------------------------------ literals and names

    def ident(self, children: list[Token]) -> ast.Ident:
        return ident_from_token(children[0])

    ident_noconn = ident

    def string(self, children: list[Token]) -> ast.StringLit:
        return string_from_token(children[0])

    def number(self, children: list[Token]) -> ast.NumberLit:
        tok = children[0]
        return ast.NumberLit(str(tok), span=token_span(tok))

    def qualified_name(self, children: list[Item]) -> ast.QualifiedName:
        parts = tuple(c for c in children if isinstance(c, ast.Ident))
        return ast.QualifiedName(parts, span=span_of(children))

    def ident_list(self, children: list[Item]) -> _Part:
        idents = tuple(c for c in children if isinstance(c, ast.Ident))
        return _Part("idents", idents, span_of(children) or idents[0].span)  # type: ignore[arg-type]

    def object_name(self, children: list[Any]) -> ast.Ident | ast.StringLit:
        value: ast.Ident | ast.StringLit = children[0]
        return value

    # ------------------------------------------------------------ options

    def option_name(self, children: list[Token]) -> _Part:
        name = " ".join(str(t).upper() for t in children)
        return _Part("option_name", name, span_of(children))  # type: ignore[arg-type]

    loose_name = option_name

    def option(self, children: list[Any]) -> ast.Option:
        head = children[0]
        value = self._value(children[2]) if len(children) == 3 else None
        if isinstance(head, ast.StringLit):
            return ast.Option(head.value, value, key_is_string=True, span=span_of(children))
        return ast.Option(head.value, value, span=span_of(children))

    @staticmethod
    def _value(value: Any) -> ast.Value:
        if isinstance(value, _Part):  # a nested option block
            options: tuple[ast.Option, ...] = value.value
            return ast.OptionList(options, span=value.span)
        if isinstance(value, ast.Ident) and not value.quoted and value.name in ("true", "false"):
            return ast.BoolLit(value.name == "true", span=value.span)
        result: ast.Value = value
        return result

    def option_noeq(self, children: list[Any]) -> ast.Option:
        """``BROKER 'h:9092'``: Materialize's option without ``=``, the same option."""
        head = children[0]
        return ast.Option(head.value, self._value(children[1]), span=span_of(children))

    def string_list(self, children: list[Any]) -> ast.StringList:
        items = tuple(c for c in children if isinstance(c, ast.StringLit))
        return ast.StringList(items, span=span_of(children))

    def secret_ref(self, children: list[Any]) -> ast.SecretRef:
        return ast.SecretRef(children[1], span=span_of(children))

    def option_block(self, children: list[Any]) -> _Part:
        options = tuple(c for c in children if isinstance(c, ast.Option))
        span = span_of(children)
        if _depth(options) > MAX_OPTION_NESTING:
            raise _error(f"option lists nest more than {MAX_OPTION_NESTING} levels deep", span)
        return _Part("options", options, span)  # type: ignore[arg-type]

    loose_option_block = option_block

    def with_options(self, children: list[Any]) -> _Part:
        return _Part("with", children[1].value, span_of(children))  # type: ignore[arg-type]

    # ------------------------------------------------------------ flags

    def if_not_exists(self, children: list[Token]) -> _Part:
        return _Part("if_not_exists", True, span_of(children))  # type: ignore[arg-type]

    def or_replace(self, children: list[Token]) -> _Part:
        return _Part("or_replace", True, span_of(children))  # type: ignore[arg-type]

    def if_exists(self, children: list[Token]) -> _Part:
        return _Part("if_exists", True, span_of(children))  # type: ignore[arg-type]

    @staticmethod
    def _flag(children: list[Any], kind: str) -> bool:
        return any(isinstance(c, _Part) and c.kind == kind for c in children)

    # ------------------------------------------------------------ secrets

    def create_secret(self, children: list[Any]) -> ast.CreateSecret:
        name = next(c for c in children if isinstance(c, ast.Ident))
        return ast.CreateSecret(
            name,
            children[-1],
            if_not_exists=self._flag(children, "if_not_exists"),
            span=span_of(children),
        )

    def alter_secret(self, children: list[Any]) -> ast.AlterSecret:
        return ast.AlterSecret(children[2], children[4], span=span_of(children))

    # ------------------------------------------------------------ connections

    def connection_kind(self, children: list[Token]) -> _Part:
        # AWS | GCS | AZURE: the member of that name; ICEBERG CATALOG, CONFLUENT SCHEMA REGISTRY: more tokens
        first = children[0].type
        if first == "ICEBERG":
            kind = ast.ConnectionKind.ICEBERG_CATALOG
        elif first == "CONFLUENT":
            kind = ast.ConnectionKind.CONFLUENT_SCHEMA_REGISTRY
        else:
            kind = ast.ConnectionKind[first]
        return _Part("connection_kind", kind, span_of(children))  # type: ignore[arg-type]

    def storage_kind(self, children: list[Token]) -> _Part:
        return _Part("storage_kind", ast.ConnectionKind[children[0].type], token_span(children[0]))

    def create_connection(self, children: list[Any]) -> ast.CreateConnection:
        name = next(c for c in children if isinstance(c, ast.Ident))
        kind = next(
            (c.value for c in children if isinstance(c, _Part) and c.kind == "connection_kind"),
            ast.ConnectionKind.KAFKA,  # TO KAFKA is a token of its own (its option list takes more)
        )
        options: tuple[ast.Option, ...] = ()
        with_options: tuple[ast.Option, ...] = ()
        for c in children:
            if isinstance(c, _Part) and c.kind == "options":
                options = c.value
            elif isinstance(c, _Part) and c.kind == "with":
                with_options = c.value
        return ast.CreateConnection(
            name,
            kind,
            options,
            with_options,
            if_not_exists=self._flag(children, "if_not_exists"),
            span=span_of(children),
        )

    # ------------------------------------------------------------ sources and views

    def create_source(self, children: list[Any]) -> ast.CreateSource:
        idents = [c for c in children if isinstance(c, ast.Ident)]
        name = idents[0]
        kind = ast.SourceKind.FILES
        path: ast.StringLit | None = None
        connection: ast.Ident | None = None
        options: tuple[ast.Option, ...] = ()
        clauses: list[ast.Option] = []
        include: tuple[ast.IncludeItem, ...] = ()
        for c in children:
            if isinstance(c, Token) and c.type == "GENERATOR":
                kind = ast.SourceKind.GENERATOR
            elif isinstance(c, Token) and c.type == "KAFKA":
                kind = ast.SourceKind.KAFKA
                connection = idents[1]
            elif isinstance(c, ast.StringLit):
                path = c
            elif isinstance(c, _Part) and c.kind == "options":
                options = c.value
            elif isinstance(c, _Part) and c.kind == "clause":
                self._add_clause(clauses, c)
            elif isinstance(c, _Part) and c.kind == "include":
                if include:
                    raise _error("INCLUDE is given twice", c.span, hint="list every item in one INCLUDE clause")
                include = c.value
        return ast.CreateSource(
            name,
            kind,
            path,
            options + tuple(clauses),
            if_not_exists=self._flag(children, "if_not_exists"),
            connection=connection,
            include=include,
            span=span_of(children),
        )

    @staticmethod
    def _add_clause(clauses: list[ast.Option], part: _Part) -> None:
        """A clause's options; the key's and the value's ``USING CONFLUENT SCHEMA REGISTRY
        CONNECTION`` give one SCHEMA REGISTRY option (a source reads through one registry)."""
        for option in part.value:
            if option.name == "SCHEMA REGISTRY":
                prior = next((o for o in clauses if o.name == "SCHEMA REGISTRY"), None)
                if prior is not None:
                    if prior.value != option.value:
                        raise _error(
                            "the key and the value name different schema registries",
                            option.span,
                            "a source reads its key's and its value's schemas through one "
                            "CONFLUENT SCHEMA REGISTRY connection",
                        )
                    continue
            clauses.append(option)

    def registry_using(self, children: list[Any]) -> _Part:
        """``USING CONFLUENT SCHEMA REGISTRY CONNECTION csr``: the option SCHEMA REGISTRY = csr."""
        return _Part("using_registry", children[-1], span_of(children))  # type: ignore[arg-type]

    def include_item(self, children: list[Any]) -> ast.IncludeItem:
        idents = [c for c in children if isinstance(c, ast.Ident)]
        alias = idents[1] if len(idents) > 1 else None
        return ast.IncludeItem(idents[0], alias, span=span_of(children))

    def include_clause(self, children: list[Any]) -> _Part:
        items = tuple(c for c in children if isinstance(c, ast.IncludeItem))
        return _Part("include", items, span_of(children))  # type: ignore[arg-type]

    def format_clause(self, children: list[Any]) -> _Part:
        """``FORMAT JSON`` / ``VALUE FORMAT JSON`` / ``KEY FORMAT TEXT``: the option they mean."""
        name = "KEY FORMAT" if isinstance(children[0], Token) and children[0].type == "KEY" else "FORMAT"
        using = children[-1] if isinstance(children[-1], _Part) and children[-1].kind == "using_registry" else None
        if using is None:
            return self._clause(name, children)
        clause = self._clause(name, children[:-1])
        registry = ast.Option("SCHEMA REGISTRY", using.value, span=using.span)
        return _Part("clause", (*clause.value, registry), span_of(children))  # type: ignore[arg-type]

    def envelope_clause(self, children: list[Any]) -> _Part:
        return self._clause("ENVELOPE", children)

    @staticmethod
    def _clause(name: str, children: list[Any]) -> _Part:
        word = children[-1]
        text = word.value if isinstance(word, ast.StringLit) else word.name.lower()
        option = ast.Option(name, ast.StringLit(text, span=word.span), span=span_of(children))
        return _Part("clause", (option,), span_of(children))  # type: ignore[arg-type]

    def create_view(self, children: list[Any]) -> ast.CreateView:
        name = next(c for c in children if isinstance(c, ast.Ident))
        query, qspan = _query(children[-1])
        stmt_span = span_of([children[0], qspan_holder(qspan)])
        return ast.CreateView(
            name,
            query,
            if_not_exists=self._flag(children, "if_not_exists"),
            or_replace=self._flag(children, "or_replace"),
            span=stmt_span,
            query_span=qspan,
        )

    # ------------------------------------------------------------ sinks

    def in_cluster(self, children: list[Any]) -> _Part:
        raise _error(
            "IN CLUSTER is not supported",
            span_of(children),
            hint="icesql runs every sink on its Spark session; remove IN CLUSTER ...",
        )

    def target_to(self, children: list[Any]) -> _Part:
        return self._target(children)

    def target_into(self, children: list[Any]) -> _Part:
        return self._target(children)

    @staticmethod
    def _target(children: list[Any]) -> _Part:
        catalog = next(c for c in children if isinstance(c, ast.Ident))
        options = next((c.value for c in children if isinstance(c, _Part)), None)
        return _Part("target", (catalog, options), span_of(children))  # type: ignore[arg-type]

    def using_clause(self, children: list[Any]) -> _Part:
        """``USING AWS | GCS | AZURE CONNECTION name``: (kind, name)."""
        return _Part("using", (children[1].value, children[3]), span_of(children))  # type: ignore[arg-type]

    def namespace_clause(self, children: list[Any]) -> _Part:
        return _Part("namespace", children[1], span_of(children))  # type: ignore[arg-type]

    def table_clause(self, children: list[Any]) -> _Part:
        return _Part("table", children[1], span_of(children))  # type: ignore[arg-type]

    def key_clause(self, children: list[Any]) -> _Part:
        idents = children[2].value
        not_enforced = self._flag(children, "not_enforced")
        return _Part("key", (idents, not_enforced), span_of(children))  # type: ignore[arg-type]

    def not_enforced(self, children: list[Token]) -> _Part:
        return _Part("not_enforced", True, span_of(children))  # type: ignore[arg-type]

    def mode_clause(self, children: list[Token]) -> _Part:
        return _Part("mode", ast.SinkMode[children[1].type], span_of(children))  # type: ignore[arg-type]

    def partition_clause(self, children: list[Any]) -> _Part:
        return _Part("partition", children[2].value, span_of(children))  # type: ignore[arg-type]

    def partition_spec(self, children: list[Any]) -> _Part:
        fields_ = tuple(c for c in children if isinstance(c, ast.PartitionField))
        return _Part("partition_spec", fields_, span_of(children))  # type: ignore[arg-type]

    def partition_field(self, children: list[Any]) -> ast.PartitionField:
        span = span_of(children)
        if len(children) == 1:
            return ast.PartitionField(None, (ast.PartitionArg(column=children[0], span=children[0].span),), span=span)
        args = tuple(c for c in children if isinstance(c, ast.PartitionArg))
        return ast.PartitionField(children[0], args, span=span)

    def partition_arg(self, children: list[Any]) -> ast.PartitionArg:
        item = children[0]
        if isinstance(item, Token):
            return ast.PartitionArg(number=ast.NumberLit(str(item), span=token_span(item)), span=token_span(item))
        return ast.PartitionArg(column=item, span=item.span)

    def sink_format_clause(self, children: list[Any]) -> _Part:
        """``FORMAT ORC`` / ``FORMAT 'avro'`` after the target: the WITH option FORMAT it means."""
        clause = self._clause("FORMAT", children)
        return _Part("format", clause.value[0], clause.span)

    def with_clause(self, children: list[Any]) -> _Part:
        return _Part("with", children[1].value, span_of(children))  # type: ignore[arg-type]

    def create_sink(self, children: list[Any]) -> ast.CreateSink:
        name = next(c for c in children if isinstance(c, ast.Ident))
        relation = next(c for c in children if isinstance(c, ast.QualifiedName))
        seen: dict[str, _Part] = {}
        values: dict[str, Any] = {}
        for c in children:
            if not isinstance(c, _Part) or c.kind == "if_not_exists":
                continue
            if c.kind == "target":
                catalog, catalog_options = c.value
                values["catalog"] = catalog
                if catalog_options is not None:
                    values["catalog_options"] = catalog_options
                continue
            if c.kind == "using" and "using" in seen:
                raise self._using_twice(seen["using"], c)
            if c.kind in seen:
                raise _error(
                    f"{_CLAUSE_NAMES.get(c.kind, c.kind)} is given twice",
                    c.span,
                    hint="each clause of CREATE SINK may appear once",
                )
            seen[c.kind] = c
            if c.kind == "using":
                kind, connection = c.value
                if kind is ast.ConnectionKind.AWS:
                    values["aws_connection"] = connection
                else:
                    values["storage_connection"] = ast.ConnectionRef(kind, connection, span=c.span)
            elif c.kind == "namespace":
                values["namespace"] = c.value
            elif c.kind == "table":
                values["table"] = c.value
            elif c.kind == "key":
                values["key"], values["key_not_enforced"] = c.value
            elif c.kind == "mode":
                values["mode"] = c.value
            elif c.kind == "partition":
                values["partition_by"] = c.value
            elif c.kind == "with":
                values["with_options"] = c.value
        if "format" in seen:
            values["with_options"] = self._sink_format(seen["format"], values.get("with_options", ()))
        return ast.CreateSink(
            name,
            relation,
            if_not_exists=self._flag(children, "if_not_exists"),
            span=span_of(children),
            **values,
        )

    @staticmethod
    def _using_twice(first: _Part, second: _Part) -> ParseError:
        """A second ``USING ... CONNECTION`` clause: a sink writes through one storage."""
        was, now = first.value[0].value, second.value[0].value
        if was == now:
            return _error(
                f"USING {now} CONNECTION is given twice",
                second.span,
                hint="each clause of CREATE SINK may appear once",
            )
        return _error(
            f"USING {now} CONNECTION cannot be combined with USING {was} CONNECTION",
            second.span,
            hint="a sink writes its table's files through one storage connection: keep one USING clause",
        )

    @staticmethod
    def _sink_format(clause: _Part, with_options: tuple[ast.Option, ...]) -> tuple[ast.Option, ...]:
        """The FORMAT clause as the WITH option FORMAT (printed as such); a WITH list that says
        FORMAT too gives it twice, which is refused where the second one is written."""
        option: ast.Option = clause.value
        prior = next((o for o in with_options if o.name == "FORMAT" and not o.key_is_string), None)
        if prior is not None:
            at = clause.span if prior.span is None or clause.span.start > prior.span.start else prior.span
            raise _error(
                "FORMAT is given twice: as a FORMAT clause and in WITH (...)",
                at,
                hint="give it once: FORMAT ORC after the target, or WITH (FORMAT = 'orc')",
            )
        return (*with_options, option)

    def set_options(self, children: list[Any]) -> _Part:
        return _Part("set", children[1].value, span_of(children))  # type: ignore[arg-type]

    def reset_options(self, children: list[Any]) -> _Part:
        names = tuple(c.value for c in children if isinstance(c, _Part))
        return _Part("reset", names, span_of(children))  # type: ignore[arg-type]

    def alter_source(self, children: list[Any]) -> ast.AlterSource:
        options = next(c.value for c in children if isinstance(c, _Part) and c.kind == "set")
        return ast.AlterSource(children[2], options, span=span_of(children))

    def alter_sink(self, children: list[Any]) -> ast.AlterSink:
        set_options: tuple[ast.Option, ...] = ()
        reset_options: tuple[str, ...] = ()
        for c in children:
            if isinstance(c, _Part) and c.kind == "set":
                set_options = c.value
            elif isinstance(c, _Part) and c.kind == "reset":
                reset_options = c.value
        return ast.AlterSink(children[2], set_options, reset_options, span=span_of(children))

    # ------------------------------------------------------------ everything else

    def object_kind(self, children: list[Token]) -> _Part:
        return _Part("object_kind", _kind(children[0]), span_of(children))  # type: ignore[arg-type]

    def drop_behavior(self, children: list[Token]) -> _Part:
        return _Part("behavior", ast.DropBehavior[children[0].type], span_of(children))  # type: ignore[arg-type]

    def drop(self, children: list[Any]) -> ast.Drop:
        name = next(c for c in children if isinstance(c, ast.Ident))
        behavior = next((c.value for c in children if isinstance(c, _Part) and c.kind == "behavior"), None)
        return ast.Drop(
            children[1].value,
            name,
            if_exists=self._flag(children, "if_exists"),
            behavior=behavior,
            span=span_of(children),
        )

    def show(self, children: list[Token]) -> ast.Show:
        kind = ast.ObjectKind[children[1].type[:-1]]
        return ast.Show(kind, span=span_of(children))

    def show_create(self, children: list[Any]) -> ast.ShowCreate:
        return ast.ShowCreate(children[2].value, children[3], span=span_of(children))

    def show_sink_status(self, children: list[Any]) -> ast.ShowSinkStatus:
        name = children[3] if len(children) > 3 else None
        return ast.ShowSinkStatus(name, span=span_of(children))

    def describe(self, children: list[Any]) -> ast.Describe:
        return ast.Describe(children[1], span=span_of(children))

    def select(self, children: list[Any]) -> ast.Select:
        head: Token = children[0]
        query, qspan = _query(children[-1])
        return ast.Select(
            str(head).upper(), query, span=span_of([head, qspan_holder(qspan)]), query_span=qspan
        )

    def describe_table(self, children: list[Any]) -> ast.DescribeTable:
        parts = tuple(c for c in children if isinstance(c, ast.Ident))
        return ast.DescribeTable(ast.QualifiedName(parts, span=span_of(list(parts))), span=span_of(children))

    def show_tables(self, children: list[Any]) -> ast.ShowTables:
        parts = tuple(c for c in children if isinstance(c, ast.Ident))
        return ast.ShowTables(parts[0], parts[1:], span=span_of(children))

    def show_snapshots(self, children: list[Any]) -> ast.ShowSnapshots:
        return ast.ShowSnapshots(children[-1], span=span_of(children))

    def explain(self, children: list[Any]) -> ast.Explain:
        return ast.Explain(children[1], span=span_of(children))

    def validate_connection(self, children: list[Any]) -> ast.ValidateConnection:
        return ast.ValidateConnection(children[2], span=span_of(children))

    def flush_sink(self, children: list[Any]) -> ast.FlushSink:
        name = children[2] if len(children) > 2 else None
        return ast.FlushSink(name, span=span_of(children))


def _query(tok: Token) -> tuple[str, Span]:
    """The verbatim query of a QUERY token (up to the statement's end) and its span."""
    raw = str(tok)
    query = raw[: query_end(raw, 0, len(raw))]
    assert tok.start_pos is not None and tok.line is not None and tok.column is not None
    origin = Span(tok.start_pos, tok.start_pos, tok.line, tok.column, tok.line, tok.column)
    return query, span_within(origin, query, 0, len(query))


@dataclass(frozen=True)
class qspan_holder:  # noqa: N801 - a tiny adapter so span_of can take a bare Span
    span: Span
