"""The relation of a FILES source: on the Arrow path (``ArrowSource``: the sink's tasks read and
decode byte ranges of the files, ``files.task``) where the Arrow readers read the files exactly as
Spark would, else Spark's own file readers (``spark_files_dataframe``) with the record guard
(``sources.guard.RecordGuard``) applying ON ERROR. A Parquet source without a SCHEMA takes the schema of
the files already there, widened across them: on the Arrow path read from their footers
(``files.footers``, the schema Spark would infer), on Spark's path Spark's own.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icesql.engine.base.changelog import BLK, CORRUPT, FILE, LINE, OP, SEQ
from icesql.engine.base.wire import CONSUMED, clip_text, short_path
from icesql.engine.sources.guard import RecordGuard, letter_accumulators, on_error_policy, skip_counter
from icesql.engine.sources.relation import (
    Relation,
    declared_row_schema,
    first_line,
    message_schema,
    row_schema_on,
)
from icesql.errors import ExecutionError
from icesql.plan import CleanSource, OnError, SourceFormat, SourcePlan

log = logging.getLogger("icesql.sources")


def files_relation(
    backend: Any,
    plan: SourcePlan,
    *,
    on_error: OnError | None = None,
    arrow: ArrowBinding | None = None,
) -> Relation:
    """A FILES source: on the Arrow path when ``arrow`` binds it to a sink's checkpoint and the
    Arrow readers can read it exactly as Spark would (``files.decode``), else on Spark's path
    (``backend.spark_for``: in this process, the sink restarts on Spark)."""
    if not plan.path:
        raise ExecutionError(f"source '{plan.name}' has no path")
    policy = on_error_policy(plan, on_error)
    reason = f"source '{plan.name}' needs Spark's reader"
    if arrow is not None:
        from icesql.engine.sources.types import Unsupported

        try:
            return arrow_files_relation(backend, plan, policy, arrow)
        except Unsupported as e:
            reason = f"{reason} ({e})"
            backend.spark_for(reason)  # in this process: SparkNeeded, the sink restarts on Spark
            log.info(
                "source %s: read by Spark's %s reader (%s)",
                plan.name,
                (plan.format or SourceFormat.JSON).value,
                e,
            )
    spark = backend.spark_for(reason)
    acc = skip_counter(backend, policy)
    letters = letter_accumulators(backend, policy)
    df, changelog = spark_files_dataframe(
        spark, plan, policy, acc, streaming=True, letters=letters[0] if letters else None
    )
    return Relation(
        name=plan.name, df=df, changelog=changelog, skipped=acc, sources=(plan.name,), letters=letters
    )


def arrow_stream_options(plan: SourcePlan) -> dict[str, str]:
    """The ``icesql_files`` data source's options for a FILES source's limits per trigger and
    CLEAN SOURCE (``files.source``); ``_spark_stream_limits`` gives Spark's names for them."""
    opts: dict[str, str] = {}
    if plan.max_files_per_trigger:
        opts["max_files"] = str(plan.max_files_per_trigger)
    if plan.max_bytes_per_trigger:
        opts["max_bytes"] = str(plan.max_bytes_per_trigger)
    cleaner = source_cleaner(plan)
    if cleaner is not None:
        opts.update(cleaner.options())
    return opts


# Spark's file source names for the same options (the same meaning and archive layout).
_SPARK_STREAM_NAMES = {
    "max_files": "maxFilesPerTrigger",
    "max_bytes": "maxBytesPerTrigger",
    "clean_source": "cleanSource",
    "archive_directory": "sourceArchiveDir",
}


def _spark_stream_limits(plan: SourcePlan) -> dict[str, str]:
    return {_SPARK_STREAM_NAMES[k]: v for k, v in arrow_stream_options(plan).items()}


def source_cleaner(plan: SourcePlan) -> Any:
    """The source's CLEAN SOURCE as a ``files.clean.Cleaner`` (None: off)."""
    if plan.clean_source is CleanSource.OFF:
        return None
    from icesql.engine.sources.files.clean import Cleaner

    return Cleaner(plan.clean_source.value, plan.archive_directory)


def spark_files_dataframe(
    spark: Any,
    plan: SourcePlan,
    policy: OnError,
    acc: Any,
    *,
    streaming: bool,
    paths: list[str] | None = None,
    letters: Any = None,
) -> tuple[Any, bool]:
    """Spark's reader of a FILES source: a streaming DataFrame over its directory, or a batch one
    over ``paths`` (the files the Arrow path leaves to Spark). Returns (DataFrame, changelog)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    fmt = plan.format or SourceFormat.JSON
    row_schema = declared_row_schema(spark, plan)
    reader = spark.readStream if streaming else spark.read
    opts = dict(plan.options)
    if streaming:
        opts.update(_spark_stream_limits(plan))
    target: Any = plan.path if paths is None else paths

    if fmt is SourceFormat.PARQUET:
        if row_schema is None:
            row_schema = _infer_parquet_schema(spark, plan)
        return reader.format("parquet").schema(row_schema).options(**opts).load(target), False
    if fmt is SourceFormat.ORC:
        if row_schema is None:
            row_schema = _infer_orc_schema(spark, plan)
        return reader.format("orc").schema(row_schema).options(**opts).load(target), False

    if row_schema is None:
        raise ExecutionError(f"source '{plan.name}': FORMAT = '{fmt.value}' needs SCHEMA = '...'")

    if fmt is SourceFormat.DEBEZIUM_JSON:
        event = StructType(
            [
                StructField("before", row_schema),
                StructField("after", row_schema),
                StructField("op", StringType()),
                StructField("ts_ms", _long()),
                StructField(
                    "source", StructType([StructField("lsn", _long()), StructField("ts_ms", _long())])
                ),
            ]
        )
        read_schema = StructType(
            [*event.fields, StructField("payload", event), StructField(CORRUPT, StringType())]
        )
        spark_format = "json"
    else:
        read_schema = StructType([*row_schema.fields, StructField(CORRUPT, StringType())])
        spark_format = fmt.value
        if fmt is SourceFormat.CSV:
            opts.setdefault("header", "true" if plan.header else "false")

    df = (
        reader.format(spark_format)
        .schema(read_schema)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .options(**opts)
        .load(target)
    )
    # local files as plain paths (Spark says file:/a%20b), as the Arrow path names them: the
    # changelog order breaks ties by file, and a batch may mix files read by both
    file_path = F.col("_metadata.file_path")
    plain = F.url_decode(F.regexp_replace(file_path, "^file:(//)?", ""))
    df = df.select(
        "*",
        F.when(file_path.startswith("file:"), plain).otherwise(file_path).alias(FILE),
        F.col("_metadata.file_block_start").alias(BLK),
    )
    guard = RecordGuard(
        source=plan.name,
        fmt=fmt.value,
        columns=[f.name for f in row_schema.fields],
        header=(fmt is SourceFormat.CSV and opts.get("header") == "true"),
        skip=policy is OnError.SKIP,
        debezium=fmt is SourceFormat.DEBEZIUM_JSON,
        counter=acc,
        letters=letters if policy is OnError.DEAD_LETTER else None,
    )
    out_fields = [f for f in df.schema.fields if f.name != CORRUPT]
    if fmt is SourceFormat.DEBEZIUM_JSON:
        out_fields.append(StructField(LINE, _long()))
    df = df.mapInArrow(guard, StructType(out_fields))

    if fmt is not SourceFormat.DEBEZIUM_JSON:
        return df.drop(FILE, BLK), False

    def ev(field: str) -> Any:
        return F.coalesce(F.col(f"payload.{field}"), F.col(field))

    op = ev("op")
    row = F.when(op == F.lit("d"), ev("before")).otherwise(ev("after"))
    seq = F.coalesce(ev("source.lsn"), ev("source.ts_ms"), ev("ts_ms"))
    cols = [row.getField(f.name).alias(f.name) for f in row_schema.fields]
    return df.select(*cols, op.alias(OP), seq.alias(SEQ), F.col(FILE), F.col(BLK), F.col(LINE)), True


def _infer_parquet_schema(spark: Any, plan: SourcePlan) -> Any:
    """The columns of a Parquet source without a SCHEMA on Spark's path: every file's (Spark's
    ``mergeSchema``), widened where Spark will not (``_widened_parquet_schema``), and without the
    columns that hold no type yet (``_typed_columns``). The Arrow path works the same schema out
    of the files' footers (``footer_parquet_schema``)."""
    try:
        # every file's columns (mergeSchema): a column only newer files have is not left out
        inferred = spark.read.option("mergeSchema", "true").parquet(plan.path).schema
    except Exception as e:
        return _when_files_disagree(plan, spark_message(e), _parquet_footers(plan))
    from pyspark.sql.types import IntegerType

    if not any(isinstance(f.dataType, IntegerType) for f in inferred.fields):
        return inferred  # no column Spark could have read from a null-typed one
    return _typed_columns(plan, inferred, _parquet_footers(plan))


def _infer_orc_schema(spark: Any, plan: SourcePlan) -> Any:
    """The columns of an ORC source without a SCHEMA on Spark's path: every file's, merged
    (``mergeSchema``; Spark's ORC reader would otherwise take one file's, whichever its listing
    gives first), as ``footer_orc_schema`` works them out on the Arrow path."""
    try:
        return spark.read.option("mergeSchema", "true").orc(plan.path).schema
    except Exception as e:
        raise ExecutionError(
            f"source '{plan.name}': cannot infer the schema of the orc files in '{plan.path}' ({spark_message(e)})",
            hint="declare SCHEMA = '...' or put a file there first",
        ) from None


def footer_orc_schema(plan: SourcePlan, io_properties: Mapping[str, str]) -> Any:
    """The columns of an ORC source without a SCHEMA, from the files' footers
    (``files.footers.orc_footer``: Spark's ORC reader's types), merged in path order by Spark's
    ``mergeSchema`` rules. Raises ``types.Unsupported`` when a footer cannot be read here."""
    from pyspark.sql.types import StructType

    from icesql.engine.connections.stores.location import Location
    from icesql.engine.sources.files.footers import MergeError, merged_schema, orc_footer
    from icesql.engine.sources.types import Unsupported

    try:
        location = Location(plan.path or "", dict(io_properties))
        schemas = []
        for name in sorted(f.path for f in location.list()):
            with location.open_input(name) as f:
                schemas.append(orc_footer(f))
    except Unsupported:
        raise
    except Exception as e:  # noqa: BLE001 - Spark's reader says what is wrong
        raise Unsupported(f"the ORC files' footers cannot be read here ({first_line(e)})") from None
    try:
        merged = merged_schema(schemas)
    except MergeError as e:
        raise ExecutionError(
            f"source '{plan.name}': cannot infer the schema of the orc files in '{plan.path}' ({e})",
            hint="write the column with one type in every file, or declare SCHEMA = '...'",
        ) from None
    if merged is None:
        raise ExecutionError(
            f"source '{plan.name}': cannot infer the schema of the orc files in '{plan.path}' "
            "([UNABLE_TO_INFER_SCHEMA] Unable to infer schema for ORC. It must be specified manually. "
            "SQLSTATE: 42KD9)",
            hint="declare SCHEMA = '...' or put a file there first",
        )
    return StructType.fromJson(merged)


# Spark's words for a directory without a file to infer from
_NO_FILE = "[UNABLE_TO_INFER_SCHEMA] Unable to infer schema for Parquet. It must be specified manually. SQLSTATE: 42KD9"


def footer_parquet_schema(plan: SourcePlan, io_properties: Mapping[str, str]) -> Any:
    """The columns of a Parquet source without a SCHEMA, read from the files' footers alone
    (``files.footers``: the schema Spark's ``mergeSchema`` infers, proven equal over a corpus of
    files), then as on Spark's path: widened where Spark would refuse the files, the null-typed
    columns left out. Needs no Spark, so both executors take it (one schema, one table). Raises
    ``types.Unsupported`` when a footer cannot be read or holds a type the rules do not cover
    (Spark's reader then infers it)."""
    from pyspark.sql.types import StructType

    from icesql.engine.sources.files.footers import MergeError, parquet_directory_schema
    from icesql.engine.sources.types import Unsupported

    footers = _parquet_footers(plan, io_properties)
    if footers is None:
        raise Unsupported("the Parquet files' footers cannot be read here")
    try:
        merged = parquet_directory_schema(footers)
    except MergeError as e:
        return _when_files_disagree(plan, str(e), footers)
    if merged is None:
        return _when_files_disagree(plan, _NO_FILE, footers)
    return _typed_columns(plan, StructType.fromJson(merged), footers)


def _typed_columns(plan: SourcePlan, inferred: Any, footers: list[tuple[str, Any]] | None) -> Any:
    """``inferred`` without the columns of Arrow type ``null`` in every file (what pandas and
    pyarrow write for a column that is None in every row).

    Such a column carries no type: Spark reads it as ``int`` (Parquet's INT32 with the UNKNOWN
    logical type) and refuses to merge it with a file that types it. Its type comes from the files
    that do type it, the null-typed files' rows read as nulls (Spark's reader and the Arrow path's
    alike); while no file types it, it is left out (said once in the log) - the table keeps its
    own column of that name if it has one (those rows null), and the first file that types the
    column brings it in as a new column (schema evolution)."""
    from pyspark.sql.types import StructType

    untyped = _untyped_columns(_arrow_schemas(footers or []))
    if not untyped:
        return inferred
    _say_left_out(plan, untyped)
    left_out = {name.lower() for name in untyped}
    return StructType([f for f in inferred.fields if f.name.lower() not in left_out])


def _when_files_disagree(plan: SourcePlan, message: str, footers: list[tuple[str, Any]] | None) -> Any:
    """The schema when Spark refuses the files (``message``, Spark's words): the footers widened
    (``_widened_parquet_schema``), else the error naming the file and column, else Spark's."""
    widened = _widened_parquet_schema(plan, footers)
    if isinstance(widened, str):
        raise ExecutionError(
            f"source '{plan.name}': cannot infer the schema of the parquet files in '{plan.path}': "
            f"{widened} ({message})",
            hint="write the column with one type in every file, or declare SCHEMA = '...'",
        )
    if widened is not None:
        return widened
    raise ExecutionError(
        f"source '{plan.name}': cannot infer the schema of the parquet files in '{plan.path}' ({message})",
        hint="declare SCHEMA = '...' or put a file there first",
    )


def spark_message(exc: BaseException) -> str:
    """Spark's own message in an exception from a call into the JVM, on one line: py4j's
    ``Py4JJavaError`` says ``An error occurred while calling o53.parquet.`` first, then the Java
    exception (``org.apache.spark.SparkException: [CANNOT_MERGE_SCHEMAS] ...``) and its stack."""
    text = str(exc).strip() or type(exc).__name__
    lines = text.splitlines()
    if lines and lines[0].startswith("An error occurred while calling"):
        lines = lines[1:]
    kept: list[str] = []
    for line in lines:
        if line.startswith(("\tat ", "\t... ", "Caused by:")) or (kept and not line.strip()):
            break
        kept.append(line.strip())
    message = " ".join(part for part in kept if part).lstrip(": ").strip()
    for prefix in ("org.apache.spark.", "java."):  # the Java class name says nothing to a user
        if message.startswith(prefix) and ": " in message:
            message = message.split(": ", 1)[1]
    return clip_text(message or first_line(exc), 600)


_LEFT_OUT: set[tuple[str, str, tuple[str, ...]]] = set()  # (source, path, columns) said in the log


def _say_left_out(plan: SourcePlan, columns: list[str]) -> None:
    key = (plan.name, plan.path or "", tuple(columns))
    if key in _LEFT_OUT:
        return
    _LEFT_OUT.add(key)
    log.info(
        "source %s: column(s) %s of the parquet files in '%s' hold only nulls (Arrow type null) so far: "
        "left out until a file gives them a type",
        plan.name,
        ", ".join(columns),
        plan.path,
    )


def _parquet_footers(
    plan: SourcePlan, io_properties: Mapping[str, str] | None = None
) -> list[tuple[str, Any]] | None:
    """Each data file's path and footer (``pyarrow.parquet.FileMetaData``), in path order; None
    when they cannot be read (an object store without ``io_properties``, the storage's
    properties on the Arrow path; an unreadable file)."""
    import pyarrow.parquet as pq

    from icesql.engine.connections.stores.location import Location, is_remote

    if not plan.path or (io_properties is None and is_remote(plan.path)):
        return None
    try:
        location = Location(plan.path, dict(io_properties or {}))
        # in path order, Spark's: a listing's own order varies, and it decides the columns' order
        # and which file an error names
        names = sorted(f.path for f in location.list() if not Path(f.path).name.startswith(("_", ".")))

        def footer(name: str) -> tuple[str, Any]:
            with location.open_input(name) as f:
                return name, pq.read_metadata(f)

        if len(names) <= 4:
            return [footer(name) for name in names]
        from concurrent.futures import ThreadPoolExecutor

        # an object store answers each footer's reads in tens of milliseconds: many at once
        with ThreadPoolExecutor(max_workers=min(16, len(names))) as pool:
            return list(pool.map(footer, names))
    except Exception:  # noqa: BLE001 - Spark's own error says what is wrong
        log.debug("source %s: reading the parquet footers failed", plan.name, exc_info=True)
        return None


def _arrow_schemas(footers: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Each file's Arrow schema as pyarrow reads it (``pq.read_schema``) from its footer."""
    return [(name, footer.schema.to_arrow_schema()) for name, footer in footers]


def _typed(schema: Any) -> Any:
    """``schema`` without its columns of Arrow type ``null`` (they carry no type)."""
    import pyarrow as pa

    return pa.schema([f for f in schema if not pa.types.is_null(f.type)])


def _untyped_columns(footers: list[tuple[str, Any]]) -> list[str]:
    """The columns that are of type ``null`` in every file that has them (matched by name
    case-insensitively, as Spark matches them)."""
    import pyarrow as pa

    null: dict[str, str] = {}
    typed: set[str] = set()
    for _, schema in footers:
        for f in schema:
            if pa.types.is_null(f.type):
                null.setdefault(f.name.lower(), f.name)
            else:
                typed.add(f.name.lower())
    return [name for key, name in null.items() if key not in typed]


def _widened_parquet_schema(plan: SourcePlan, footers: list[tuple[str, Any]] | None) -> Any:
    """Spark's ``mergeSchema`` refuses files whose column was widened (``int`` in older files,
    ``bigint`` in newer ones) or is of type ``null`` in some: the footers unified here instead,
    when every file's columns could be written to a table of the unified schema
    (``schema.compatibility_problems``: int -> bigint, float -> double, a decimal's precision up,
    new fields of a struct; a null-typed column takes the other files' type, and is left out
    while no file types it). Returns the schema, or the first file and column that cannot be
    unified as text, or ``None`` when the footers cannot be read (the caller reports Spark's
    error)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    if not footers:
        return None
    try:
        schemas = _arrow_schemas(footers)
        typed = [(name, _typed(schema)) for name, schema in schemas]
        conflict = _conflict(typed)
        if conflict is not None:
            return conflict
        merged = pa.unify_schemas([schema for _, schema in typed], promote_options="permissive")
        table = _iceberg_of(merged)  # converted once, each file's schema checked against it
        if not all(_widens_to(schema, table) for _, schema in typed):
            return None
        untyped = _untyped_columns(schemas)
        if untyped:
            _say_left_out(plan, untyped)
        return from_arrow_schema(merged)
    except Exception:  # noqa: BLE001 - Spark's own error says what is wrong
        log.debug("source %s: unifying the parquet footers failed", plan.name, exc_info=True)
        return None


def _conflict(footers: list[tuple[str, Any]]) -> str | None:
    """The first file whose column cannot be unified with the same column of an earlier file
    (neither type widens to the other), named with both types; None when there is none."""
    first: dict[str, tuple[str, Any]] = {}  # column (lower case) -> the first file typing it, its type
    for name, schema in footers:
        for f in schema:
            seen = first.setdefault(f.name.lower(), (name, f.type))
            if (
                seen[0] == name
                or f.type == seen[1]
                or _widens_to(seen[1], f.type)
                or _widens_to(f.type, seen[1])
            ):
                continue
            return (
                f"file '{short_path(name)}' has column '{f.name}' as {f.type}, "
                f"where '{short_path(seen[0])}' has it as {seen[1]}"
            )
    return None


def _iceberg_of(arrow: Any) -> Any:
    """An Arrow type or schema as the Iceberg schema a sink would make of it (through Spark's)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    from icesql.engine.iceberg.schema import spark_schema_json, spark_to_iceberg_schema

    schema = arrow if isinstance(arrow, pa.Schema) else pa.schema([("v", arrow)])
    return spark_to_iceberg_schema(spark_schema_json(from_arrow_schema(schema)))


def _widens_to(old: Any, new: Any) -> bool:
    """Whether Arrow type (or schema) ``old`` reads as ``new`` (Arrow, or already an Iceberg
    schema) by a widening Iceberg allows: the rule the sink checks a source against its table
    by (``schema.compatibility_problems``)."""
    from pyiceberg.schema import Schema

    from icesql.engine.iceberg.schema import compatibility_problems

    try:
        table = new if isinstance(new, Schema) else _iceberg_of(new)
        return not compatibility_problems(table, _iceberg_of(old))
    except Exception:  # noqa: BLE001 - a type Spark or Iceberg has no name for (unsigned, ...)
        return False


# --------------------------------------------------------------------------- the Arrow path


@dataclass(frozen=True)
class ArrowBinding:
    """What binds a FILES source to one sink's run on the Arrow path."""

    log_dir: str  # the source's file log, in the sink's checkpoint
    parallelism: int = 2  # cores to keep busy
    io_properties: Mapping[str, str] = field(default_factory=dict, repr=False)  # the source's storage
    session_tz: str = "UTC"
    timestamp_type: str = "TIMESTAMP_LTZ"  # the session's spark.sql.timestampType


@dataclass(frozen=True)
class ArrowSource:
    """A FILES source read on the Arrow path (picklable: it travels to the executors)."""

    plan: SourcePlan
    format: Any  # files.decode.SourceFormat
    location: Any  # files.listing.Location (its FileIO properties may hold credentials)
    policy: OnError
    log_dir: str  # the source's file log (``files.log``)

    @property
    def changelog(self) -> bool:
        return self.format.format == "debezium-json"

    @property
    def row_schema_json(self) -> Any:
        return self.format.row_schema_json

    def batch_writer(self, inner: Any, *, skipped: Any = None, letters: Any = None) -> Any:
        """The writer of this source's batches on the pieces path."""
        from icesql.engine.sources.pieces import PiecesBatchWriter

        return PiecesBatchWriter(inner, self, skipped=skipped, letters=letters)

    # ------------------------------------------------------------------ sources.pieces.PieceSource

    def pieces(self, batches: Any) -> Any:
        from icesql.engine.sources.files.pieces import pieces_of

        return pieces_of(batches)

    def decode(self, piece: Any) -> Any:
        from icesql.engine.sources.files.decode import decode

        return decode(piece, self.format, self.location.fs, self.location.fs_path(piece.path))

    def piece_key(self, piece: Any) -> Any:
        return piece.path  # a file Arrow cannot read is read by Spark whole

    def consumed(self, piece: Any) -> dict[str, Any] | None:
        return {"content": CONSUMED, "file": piece.path, "rows": piece.seq, "bytes": piece.mtime_ms}

    def consumed_rows(self, pieces: Any, keys: Any = None) -> list[dict[str, Any]]:
        if keys is not None:
            from pyspark.sql import functions as F

            pieces = pieces.filter(F.col("path").isin(list(keys)))
        # a few piece rows per file: collected as they are and made distinct here, which spares
        # Spark the shuffle (a job of its own under adaptive execution) that distinct() costs
        files = {r.path: r for r in pieces.select("seq", "path", "mtime_ms").collect()}
        return [
            {"content": CONSUMED, "file": r.path, "rows": r.seq, "bytes": r.mtime_ms} for r in files.values()
        ]

    def without(self, pieces: Any, keys: Any) -> Any:
        from pyspark.sql import functions as F

        return pieces.filter(~F.col("path").isin(list(keys)))

    def read_by_spark(self, pieces: Any, keys: Any, skipped: Any, letters: Any) -> Any:
        """The files Arrow could not read, by Spark's own reader (bad records checked as on its path)."""
        from icesql.engine.connections.stores.location import is_remote

        remote = [p for p in keys if is_remote(p)]
        if remote:
            raise ExecutionError(
                f"source '{self.plan.name}': file '{remote[0]}' needs Spark's own reader (the Arrow "
                "reader cannot read it exactly as Spark would), which cannot read object storage here",
                hint="check the file for malformed records; see the debug log for what Arrow could not read",
            )
        df, _ = spark_files_dataframe(
            pieces.sparkSession,
            self.plan,
            self.policy,
            skipped,
            streaming=False,
            paths=list(keys),
            letters=letters,
        )
        return df

    def needs_spark(self, key: Any) -> str:
        return f"file '{short_path(str(key))}' needs Spark's reader"


def arrow_files_relation(backend: Any, plan: SourcePlan, policy: OnError, binding: ArrowBinding) -> Relation:
    """The Arrow path: a streaming DataFrame of pieces (``files.source``), plus what the sink's
    tasks need to read them (``ArrowSource``). Raises ``files.types.Unsupported`` when the
    source needs Spark's reader (a map or binary column, a reader option, ...). The stream is
    ``backend``'s: Spark's reader of the registered data source, or the same reader in this process."""
    from icesql.engine.connections.stores.location import Location, is_remote
    from icesql.engine.sources.decode import SourceFormat as ArrowFormat
    from icesql.engine.sources.files.source import NAME, PIECE_SCHEMA, FilesStreamReader, io_options, register
    from icesql.engine.sources.pieces import needs_spark_of

    fmt = plan.format or SourceFormat.JSON
    row_schema = row_schema_on(backend, plan)
    inferred = row_schema is None
    messages = row_schema is None and fmt is SourceFormat.DEBEZIUM_JSON
    if messages:
        row_schema = message_schema()  # each event carries its schema: a routed sink's source
        inferred = False
    elif row_schema is None:
        if fmt is SourceFormat.PARQUET:
            row_schema = footer_parquet_schema(plan, binding.io_properties)
        elif fmt is SourceFormat.ORC:
            row_schema = footer_orc_schema(plan, binding.io_properties)
        else:
            raise ExecutionError(f"source '{plan.name}': FORMAT = '{fmt.value}' needs SCHEMA = '...'")
    opts = dict(plan.options)
    header = plan.header if "header" not in opts else opts.pop("header").lower() == "true"
    delimiter = opts.pop("sep", None) or opts.pop("delimiter", None) or ","
    source_format = ArrowFormat(
        format=fmt.value,
        row_schema_json=row_schema.jsonValue(),
        header=header,
        delimiter=delimiter,
        session_tz=binding.session_tz,
        options=opts,
        inferred=inferred,
        messages=messages,
    )
    source_format.check_supported()
    location = Location(plan.path or "", dict(binding.io_properties))
    options = {
        "path": plan.path or "",
        "format": fmt.value,
        "log": binding.log_dir,
        "parallelism": str(binding.parallelism),
        **arrow_stream_options(plan),
        **io_options(dict(binding.io_properties)),
    }
    arrow = ArrowSource(
        plan=plan, format=source_format, location=location, policy=policy, log_dir=binding.log_dir
    )
    df = backend.stream(
        NAME,
        PIECE_SCHEMA,
        options,
        register=register,
        reader=lambda: FilesStreamReader(dict(options)),
        needs_spark=needs_spark_of(arrow),
        # a local directory is listed as often as an idle running sink likes; an object store's
        # listing is a billed request, made once a trigger as Spark does
        cheap_checks=not is_remote(plan.path or ""),
    )
    return Relation(
        name=plan.name,
        df=df,
        changelog=arrow.changelog,
        skipped=skip_counter(backend, policy),
        letters=letter_accumulators(backend, policy),
        sources=(plan.name,),
        arrow=arrow,
        row_schema=row_schema,
    )


def _long() -> Any:
    from pyspark.sql.types import LongType

    return LongType()
