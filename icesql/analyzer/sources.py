"""CREATE SOURCE ... FROM FILES | GENERATOR, and CREATE VIEW."""

from __future__ import annotations

import dataclasses
import re

from icesql.analyzer.catalog import CatalogView
from icesql.analyzer.connections import PathError, _check_aws_connection, _names_hint, resolve_path
from icesql.analyzer.diagnostics import Context
from icesql.analyzer.options import Collected, OptionTable, check_applies, collect
from icesql.analyzer.schema import SchemaError, parse_schema
from icesql.plan import CleanSource, Column, OnError, SourceFormat, SourceKind, SourcePlan, ViewPlan
from icesql.syntax.ast import AlterSource, CreateSource, CreateView
from icesql.syntax.ast import SourceKind as AstSourceKind
from icesql.syntax.options import FILE_FORMATS, GENERATOR, READER, SOURCE_FORMATS

FORMATS = SOURCE_FORMATS

_FILES = FILE_FORMATS
_GEN = GENERATOR

# The Spark reader's name for each option a FILES source hands to it.
_SPARK_NAME = {
    "DELIMITER": "sep",
    "QUOTE": "quote",
    "ESCAPE": "escape",
    "NULL VALUE": "nullValue",
    "MULTILINE": "multiLine",
    "ENCODING": "encoding",
    "TIMESTAMP FORMAT": "timestampFormat",
    "DATE FORMAT": "dateFormat",
    "RECURSIVE": "recursiveFileLookup",
    "PATH GLOB FILTER": "pathGlobFilter",
}
assert set(_SPARK_NAME) == {spec.name for spec in READER}

SOURCE_OPTIONS = OptionTable("SOURCE", "source")
ALTER_SOURCE_OPTIONS = OptionTable("ALTER SOURCE", "alter_source")
_OBJECT_STORE = re.compile(r"^(s3|s3a|s3n)://", re.IGNORECASE)


def analyze_source(ctx: Context, stmt: CreateSource, catalog: CatalogView | None = None) -> SourcePlan:
    opts = collect(ctx, stmt.options, SOURCE_OPTIONS)
    if stmt.source_kind is AstSourceKind.GENERATOR:
        return _generator(ctx, stmt, opts)
    for g in opts.given.values():
        if g.spec.applies == _GEN:
            raise ctx.error(
                f"option {g.option.name} applies only to GENERATOR sources",
                g.option,
                "FILES sources read what they find",
            )
    fmt = opts.get_str("FORMAT")
    if fmt is None:
        raise ctx.error(
            "FILES source needs FORMAT",
            stmt.path or stmt.name,
            "add FORMAT = 'json' | 'csv' | 'parquet' | 'debezium-json'",
        )
    check_applies(ctx, opts, "format", fmt, "formats")
    columns, schema = _schema(ctx, opts)
    if schema is None and fmt != "parquet":
        raise ctx.error(
            f"a '{fmt}' source needs SCHEMA (only parquet files carry their own)",
            opts.node("FORMAT").value,
            "add SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING'",
        )
    assert stmt.path is not None, "the parser gives FILES a path"
    path = stmt.path.value
    if not path.strip():
        raise ctx.error("FILES path must not be empty", stmt.path, "write FROM FILES 'data/events/'")
    max_files = opts.get_int("MAX FILES PER TRIGGER")
    if max_files is not None and max_files <= 0:
        raise ctx.error(
            "MAX FILES PER TRIGGER must be a positive integer", opts.node("MAX FILES PER TRIGGER").value
        )
    max_bytes = opts.get_int("MAX BYTES PER TRIGGER")
    if max_files is not None and max_bytes is not None:
        raise ctx.error(
            "MAX FILES PER TRIGGER and MAX BYTES PER TRIGGER cannot both be set",
            opts.node("MAX BYTES PER TRIGGER"),
            "keep one: a trigger takes up to N files, or files up to a size",
        )
    reader: list[tuple[str, str]] = []
    for name in opts.names():
        if name in _SPARK_NAME:
            value = opts.get(name)
            reader.append((_SPARK_NAME[name], str(value).lower() if isinstance(value, bool) else str(value)))
    reader.extend(opts.pairs("OPTIONS"))
    aws = opts.get_str("AWS CONNECTION")
    remote = _OBJECT_STORE.match(path) is not None
    if aws is not None:
        if catalog is not None:
            _check_aws_connection(ctx, opts.node("AWS CONNECTION"), aws, catalog)
        if not remote:
            raise ctx.error(
                "AWS CONNECTION reads files on S3: the path must be an s3:// URL",
                stmt.path,
                "write FROM FILES 's3://bucket/prefix/' (or leave AWS CONNECTION out for local files)",
            )
    try:
        resolved = resolve_path(ctx.base_dir, path)  # a URL is left as it is
    except PathError as exc:
        raise ctx.error(f"invalid FILES path: {exc}", stmt.path, "write FROM FILES 'data/events/'") from None
    clean, archive = _clean_source(ctx, opts, resolved)
    return SourcePlan(
        name=stmt.name.name,
        source_kind=SourceKind.FILES,
        path=resolved,
        format=SourceFormat(fmt),
        schema=schema,
        columns=columns,
        header=opts.get_bool("HEADER", False),
        max_files_per_trigger=max_files,
        on_error=OnError(opts.get_str("ON ERROR") or "fail"),
        options=tuple(reader),
        aws_connection=aws,
        max_bytes_per_trigger=max_bytes,
        clean_source=clean,
        archive_directory=archive,
    )


def _clean_source(ctx: Context, opts: Collected, source: str) -> tuple[CleanSource, str | None]:
    """CLEAN SOURCE and ARCHIVE DIRECTORY: the archive on the source's filesystem, outside the
    directory the source lists."""
    clean = CleanSource(opts.get_str("CLEAN SOURCE") or "off")
    archive = opts.get_str("ARCHIVE DIRECTORY")
    if clean is not CleanSource.ARCHIVE:
        if archive is not None:
            raise ctx.error(
                "ARCHIVE DIRECTORY applies only with CLEAN SOURCE = 'archive'",
                opts.node("ARCHIVE DIRECTORY"),
                "add CLEAN SOURCE = 'archive', or leave ARCHIVE DIRECTORY out",
            )
        return clean, None
    if archive is None or not archive.strip():
        raise ctx.error(
            "CLEAN SOURCE = 'archive' needs ARCHIVE DIRECTORY",
            opts.node("CLEAN SOURCE"),
            "add ARCHIVE DIRECTORY = 'data/archive/' (or use CLEAN SOURCE = 'delete')",
        )
    node = opts.node("ARCHIVE DIRECTORY").value
    try:
        resolved = resolve_path(ctx.base_dir, archive).rstrip("/")
    except PathError as exc:
        raise ctx.error(
            f"invalid ARCHIVE DIRECTORY: {exc}", node, "write ARCHIVE DIRECTORY = 'data/archive/'"
        ) from None
    on_s3 = _OBJECT_STORE.match(source) is not None
    if on_s3 != (_OBJECT_STORE.match(resolved) is not None) or (not on_s3 and "://" in resolved):
        where = "on S3 (an s3:// URL)" if on_s3 else "a local directory"
        raise ctx.error(
            f"ARCHIVE DIRECTORY must be on the source's storage: {where}",
            node,
            "files are moved, not copied across storages",
        )
    directory = source.rstrip("/")
    if any(c in directory.rpartition("/")[2] for c in "*?["):
        directory = directory.rpartition("/")[0]
    inside = resolved.startswith(directory + "/") and opts.get_bool("RECURSIVE", False)
    if resolved == directory or inside:
        raise ctx.error(
            "ARCHIVE DIRECTORY must not be "
            + ("inside the directory a RECURSIVE source reads" if inside else "the source's directory"),
            node,
            "archive elsewhere, e.g. next to it: 'data/archive/'",
        )
    return clean, resolved


def _generator(ctx: Context, stmt: CreateSource, opts: Collected) -> SourcePlan:
    for g in opts.given.values():
        if g.spec.applies is not None and "generator" not in g.spec.applies:
            raise ctx.error(
                f"option {g.option.name} does not apply to GENERATOR sources",
                g.option,
                "a GENERATOR source takes ROWS PER SECOND, TOTAL ROWS and SCHEMA",
            )
    rps = opts.get_int("ROWS PER SECOND")
    if rps is None:
        raise ctx.error("GENERATOR source needs ROWS PER SECOND", stmt.name, "add ROWS PER SECOND = 1000")
    if rps <= 0:
        raise ctx.error(
            f"ROWS PER SECOND must be a positive integer, found {rps}",
            opts.node("ROWS PER SECOND").value,
        )
    total = opts.get_int("TOTAL ROWS")
    if total is not None and total <= 0:
        raise ctx.error(
            f"TOTAL ROWS must be a positive integer, found {total}", opts.node("TOTAL ROWS").value
        )
    columns, schema = _schema(ctx, opts)
    if schema is None:
        raise ctx.error(
            "GENERATOR source needs SCHEMA", stmt.name, "add SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING'"
        )
    return SourcePlan(
        name=stmt.name.name,
        source_kind=SourceKind.GENERATOR,
        schema=schema,
        columns=columns,
        rows_per_second=rps,
        total_rows=total,
    )


def _schema(ctx: Context, opts: Collected) -> tuple[tuple[Column, ...], str | None]:
    schema = opts.get_str("SCHEMA")
    if schema is None:
        return (), None
    node = opts.node("SCHEMA").value
    assert node is not None
    try:
        return parse_schema(schema), schema
    except SchemaError as e:
        raise ctx.error(f"invalid SCHEMA: {e.message}", ctx.sub_span(node, e.start, e.end), e.hint) from None


def analyze_alter_source(ctx: Context, stmt: AlterSource, catalog: CatalogView) -> SourcePlan:
    """ALTER SOURCE name SET (SCHEMA = '...'): a FILES source's declared schema, replaced. The
    sinks reading it add the new columns to their tables when they next start (and refuse a
    changed type there, naming both types)."""
    old = catalog.get("source", stmt.name.name)
    if old is None:
        raise ctx.error(f"unknown source {stmt.name.name}", stmt.name, _names_hint(catalog, "source", stmt.name.name))
    assert isinstance(old, SourcePlan)
    opts = collect(ctx, stmt.set_options, ALTER_SOURCE_OPTIONS)
    if "SCHEMA" not in opts:
        raise ctx.error("ALTER SOURCE SET needs SCHEMA", stmt.name, "write ALTER SOURCE s SET (SCHEMA = '...')")
    if old.source_kind is not SourceKind.FILES:
        raise ctx.error(
            f"source {old.name} is a {old.source_kind.value.upper()} source: ALTER SOURCE changes the "
            "SCHEMA of FILES sources",
            stmt.name,
            "DROP and CREATE the source with the new schema",
        )
    columns, schema = _schema(ctx, opts)
    return dataclasses.replace(old, schema=schema, columns=columns)


# --------------------------------------------------------------------------- views

_QUERY_TOKENS = re.compile(
    r"--[^\n]*|/\*.*?\*/|'(?:[^'\\]|\\.|'')*'|\"(?:[^\"]|\"\")*\"|`(?:[^`]|``)*`|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*",
    re.DOTALL,
)


def analyze_view(
    ctx: Context, stmt: CreateView, catalog: CatalogView
) -> tuple[ViewPlan, list[tuple[str, str]]]:
    """A view's query goes to Spark verbatim; its icesql dependencies come from an identifier scan.

    The scan skips comments and string literals; a name that is both a column and a source
    only adds a harmless extra dependency.
    """
    depends: list[str] = []
    deps: list[tuple[str, str]] = []
    for m in _QUERY_TOKENS.finditer(stmt.query):
        tok = m.group(0)
        if tok.startswith(("--", "/*", "'")) or tok.startswith('"'):
            continue
        name = tok[1:-1].replace("``", "`") if tok.startswith("`") else tok.lower()
        if name == stmt.name.name or name in depends:
            continue
        for kind in ("source", "view"):
            if catalog.get(kind, name) is not None:
                depends.append(name)
                deps.append((kind, name))
                break
    return ViewPlan(name=stmt.name.name, query=stmt.query, depends_on=tuple(depends)), deps
