"""Streaming (or batch) DataFrames for the relations a sink reads.

``build_relation(spark, name, resolve)`` resolves ``name`` in the order the spec gives: an
icesql view or source (``resolve(name)`` returns its plan), then a table or temporary view of
the Spark session (so an embedding program can register its own DataFrame, streaming or
batch, and sink it).

Sources (the FILES relation itself is ``files.relation``; KAFKA's is ``kafka.relation``; what
they share - the record guard, the changelog columns, ON ERROR - is here)
-------
FILES json / csv
    ``spark.readStream`` with the declared schema plus a ``_corrupt_record`` column
    (``mode=PERMISSIVE``, ``columnNameOfCorruptRecord``), ``maxFilesPerTrigger`` when set.
    A Python stage on the executors (``mapInArrow``, no shuffle) checks every record: with
    ``ON ERROR = 'fail'`` a bad one fails the sink with ``BadRecordError`` naming the source,
    the file, the record ordinal and the field; with ``'skip'`` (on the source or on the sink)
    it is dropped, logged and counted (``Relation.skipped``, a Spark accumulator); with
    ``'dead-letter'`` it is described (raw text, file, position, error) and handed to the
    driver (``Relation.letters``, accumulators) for the sink's dead-letter table (``deadletter``).
FILES parquet
    Schema as declared, else inferred from the files already in the directory.
FILES debezium-json
    Debezium change events, one JSON object per line, ``{"before", "after", "op", "ts_ms",
    "source": {...}}`` optionally wrapped in ``{"payload": ...}`` (the Kafka Connect JSON
    converter with schemas enabled). The declared SCHEMA is the row's. Each event becomes one
    row with the columns of ``after`` (of ``before`` for ``op = 'd'``) plus the changelog
    columns:

    * ``__op``   — ``c`` (create), ``u`` (update), ``d`` (delete) or ``r`` (snapshot read);
    * ``__seq``  — ``coalesce(source.lsn, source.ts_ms, ts_ms)``: the database's own order;
    * ``__file`` — the file the event came from (``_metadata.file_path``);
    * ``__blk``  — the byte offset of the file split that held it (``_metadata.file_block_start``);
    * ``__line`` — the record's ordinal inside that split.

    **Position** (the deterministic changelog order): ``(__seq, __file, __blk, __line)``
    ascending, nulls first. Within one micro-batch the last change per key in that order wins;
    across micro-batches the later batch wins. Spark replays a batch with the same files, and a
    split is always read by one task from its start, so the position of an event never changes.
GENERATOR
    Synthetic rows shaped to the declared SCHEMA with values derived from a sequence number
    ``n`` (0, 1, 2, ...): the same ``n`` always gives the same row (``bigint`` → ``n``,
    ``string`` → ``'<column>-<n>'``, ``timestamp`` → 2024-01-01 + n seconds, ...). Unbounded:
    Spark's ``rate`` source at ``ROWS PER SECOND``; bounded (``total_rows`` set): a batch
    DataFrame over ``range(total_rows)`` that a sink runs as one job.
Views
    The view's sources and views are registered as temporary views under their names, then
    the view's Spark SQL runs.
"""

from __future__ import annotations

import csv
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from icesql.errors import ExecutionError
from icesql.plan import Column, OnError, SourceKind, SourcePlan, ViewPlan

log = logging.getLogger("icesql.sources")

CORRUPT = "_corrupt_record"
OP = "__op"
SEQ = "__seq"
FILE = "__file"
BLK = "__blk"
LINE = "__line"
POSITION = (SEQ, FILE, BLK, LINE)
CHANGELOG_COLUMNS = (OP, *POSITION)
INTERNAL_COLUMNS = frozenset((CORRUPT, *CHANGELOG_COLUMNS))
BAD_RECORD_MARKER = "ICESQL-BAD-RECORD:"

Resolver = Callable[[str], "SourcePlan | ViewPlan | None"]
Binder = Callable[["SourcePlan", Any], Any]


class BadRecordError(ExecutionError):
    """A record that cannot be parsed or converted (``ON ERROR = 'fail'``)."""


@dataclass
class Relation:
    """What a sink reads: a DataFrame and how to interpret its columns."""

    name: str
    df: Any  # pyspark DataFrame
    changelog: bool = False  # carries __op and the position columns
    skipped: Any = None  # Spark accumulator of skipped bad records, when any
    letters: tuple[Any, ...] = ()  # accumulators of dead letters (ON ERROR = 'dead-letter')
    sources: tuple[str, ...] = ()  # icesql sources it reads (for messages)
    # the Arrow path (``ArrowSource``, ``kafka.arrow.KafkaArrowSource``): ``df`` holds pieces of work
    # (files' byte ranges, topics' offset ranges), not rows; its ``batch_writer`` writes a batch
    arrow: Any = None
    row_schema: Any = None  # the rows' schema when ``df`` does not hold rows (the Arrow path)
    binding: Any = None  # what the source was bound with (KAFKA: its connection's settings)

    @property
    def streaming(self) -> bool:
        return bool(self.df.isStreaming)

    @property
    def data_columns(self) -> list[str]:
        return [f.name for f in self.data_schema().fields]

    def data_schema(self) -> Any:
        from pyspark.sql.types import StructType

        if self.row_schema is not None:
            return self.row_schema
        return StructType([f for f in self.df.schema.fields if f.name not in INTERNAL_COLUMNS])

    def skipped_count(self) -> int:
        if self.skipped is None:
            return 0
        try:
            return int(self.skipped.value)
        except Exception:  # pragma: no cover - accumulators are driver-side only
            return 0


# --------------------------------------------------------------------------- resolution


def build_relation(
    spark: Any,
    name: str,
    resolve: Resolver,
    *,
    on_error: OnError | None = None,
    arrow: Any = None,
    bind: Binder | None = None,
) -> Relation:
    """The DataFrame a sink reading ``name`` consumes; a FILES source read directly by the sink
    takes the Arrow path when ``arrow`` binds it (views and Spark tables keep Spark's).
    ``bind(plan, binding)`` completes the binding of a source that needs its connection's
    credentials (KAFKA), for the source read directly and for those of a view."""
    plan = resolve(name)
    if isinstance(plan, SourcePlan):
        return source_relation(spark, plan, on_error=on_error, arrow=arrow, bind=bind)
    if isinstance(plan, ViewPlan):
        return view_relation(spark, plan, resolve, on_error=on_error, bind=bind)
    return spark_relation(spark, name)


def spark_relation(spark: Any, name: str) -> Relation:
    """A table or (temporary) view of the Spark session, streaming or batch."""
    try:
        df = spark.table(name)
    except Exception as e:
        raise ExecutionError(
            f"relation '{name}' is neither an icesql source or view nor a table or view of the Spark session",
            hint="CREATE SOURCE or CREATE VIEW it, or register it with DataFrame.createOrReplaceTempView",
        ) from e
    cols = {f.name for f in df.schema.fields}
    return Relation(name=name, df=df, changelog=OP in cols)


def view_relation(
    spark: Any,
    plan: ViewPlan,
    resolve: Resolver,
    *,
    on_error: OnError | None = None,
    bind: Binder | None = None,
    _seen: frozenset[str] = frozenset(),
) -> Relation:
    if plan.name in _seen:
        raise ExecutionError(f"view '{plan.name}' refers to itself")
    accs: list[Any] = []
    letters: list[Any] = []
    sources: list[str] = []
    for dep in plan.depends_on:
        dep_plan = resolve(dep)
        if isinstance(dep_plan, SourcePlan):
            rel = source_relation(spark, dep_plan, on_error=on_error, bind=bind)
        elif isinstance(dep_plan, ViewPlan):
            rel = view_relation(spark, dep_plan, resolve, on_error=on_error, bind=bind, _seen=_seen | {plan.name})
        else:
            continue  # a Spark table/view: the query resolves it itself
        rel.df.createOrReplaceTempView(_quote(dep))
        if rel.skipped is not None:
            accs.append(rel.skipped)
        letters.extend(rel.letters)
        sources.extend(rel.sources)
    try:
        df = spark.sql(plan.query)
    except Exception as e:
        raise ExecutionError(f"view '{plan.name}' cannot be planned by Spark: {_first_line(e)}") from e
    cols = {f.name for f in df.schema.fields}
    skipped = accs[0] if len(accs) == 1 else (_SumAcc(accs) if accs else None)
    return Relation(
        name=plan.name,
        df=df,
        changelog=OP in cols,
        skipped=skipped,
        sources=tuple(sources),
        letters=tuple(letters),
    )


class _SumAcc:
    def __init__(self, accs: list[Any]) -> None:
        self.accs = accs

    @property
    def value(self) -> int:
        return sum(int(a.value) for a in self.accs)


def _quote(name: str) -> str:
    return name if name.replace("_", "").isalnum() else "`" + name.replace("`", "``") + "`"


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


# --------------------------------------------------------------------------- sources


def source_relation(
    spark: Any,
    plan: SourcePlan,
    *,
    on_error: OnError | None = None,
    arrow: Any = None,
    bind: Binder | None = None,
) -> Relation:
    """The relation of a source, by its kind (``RELATIONS``)."""
    make = RELATIONS.get(plan.source_kind)
    if make is None:  # pragma: no cover - the analyzer makes only the kinds listed
        raise ExecutionError(f"source '{plan.name}': unsupported kind {plan.source_kind}")
    return make(spark, plan, on_error, arrow, bind)


def _files_relation(spark: Any, plan: SourcePlan, on_error: OnError | None, arrow: Any) -> Relation:
    from icesql.engine.sources.files.relation import files_relation

    return files_relation(spark, plan, on_error=on_error, arrow=arrow)


def _kafka_relation(
    spark: Any, plan: SourcePlan, on_error: OnError | None, binding: Any, bind: Binder | None
) -> Relation:
    from icesql.engine.sources.kafka.relation import kafka_relation

    if bind is None:
        raise ExecutionError(f"source '{plan.name}': a KAFKA source needs its connection's settings")
    return kafka_relation(spark, plan, _policy(plan, on_error), bind(plan, binding))


# the relation of each source kind: (spark, plan, on_error, binding from the sink, binder)
RELATIONS: dict[SourceKind, Callable[..., Relation]] = {
    SourceKind.GENERATOR: lambda spark, plan, on_error, arrow, bind: Relation(
        name=plan.name, df=generator_dataframe(spark, plan), sources=(plan.name,)
    ),
    SourceKind.FILES: lambda spark, plan, on_error, arrow, bind: _files_relation(spark, plan, on_error, arrow),
    SourceKind.KAFKA: _kafka_relation,
}


def _row_schema(spark: Any, plan: SourcePlan, timestamp_type: str | None = None) -> Any:
    """The rows' schema a source's SCHEMA declares (None: none declared). Without ``spark`` (a
    run without it) only what is built in Python, with the session's ``timestamp_type``."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    from icesql.engine.sources.ddl import struct_from_ddl

    if plan.schema:
        # built in Python where Spark's answer is certain (a JVM parse costs ~0.2 s of a sink's start)
        if spark is not None:
            timestamp_type = spark.conf.get("spark.sql.timestampType", "TIMESTAMP_LTZ")
        built = struct_from_ddl(plan.schema, timestamp_type or "TIMESTAMP_LTZ")
        if built is not None:
            return built
        if spark is None:
            from icesql.engine.sources.files.types import Unsupported

            raise Unsupported("its SCHEMA needs Spark's parser")
        try:
            st = _parse_datatype_string(plan.schema)
        except Exception as e:
            raise ExecutionError(f"source '{plan.name}': bad SCHEMA: {_first_line(e)}") from e
        if not isinstance(st, StructType):
            raise ExecutionError(f"source '{plan.name}': SCHEMA must be a list of columns")
        return st
    return None


def _policy(plan: SourcePlan, on_error: OnError | None) -> OnError:
    # dead-letter, else skip, when either the source or the sink says so (both default to
    # fail): keeping a bad record beats dropping it, dropping it beats stopping the sink
    for policy in (OnError.DEAD_LETTER, OnError.SKIP):
        if policy in (on_error, plan.on_error):
            return policy
    return OnError.FAIL


def _letters(spark: Any, policy: OnError) -> tuple[Any, ...]:
    if policy is not OnError.DEAD_LETTER:
        return ()
    from icesql.engine.sink.deadletter import letter_accumulator

    return (letter_accumulator(spark),)


def _skip_counter(spark: Any, policy: OnError) -> Any:
    if policy is not OnError.SKIP:
        return None
    try:
        return spark.sparkContext.accumulator(0)
    except Exception:  # Spark Connect: no accumulators; skipped records are only logged
        return None


# --------------------------------------------------------------------------- bad records


class _RecordGuard:
    """Executor-side check of parsed records (picklable; runs inside ``mapInArrow``)."""

    def __init__(
        self,
        *,
        source: str,
        fmt: str,
        columns: list[str],
        header: bool,
        skip: bool,
        debezium: bool,
        counter: Any,
        letters: Any = None,
    ) -> None:
        self.source = source
        self.fmt = fmt
        self.columns = columns
        self.header = header
        self.skip = skip
        self.debezium = debezium
        self.counter = counter
        self.letters = letters  # dead letters go here instead of failing the task

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        ordinals: dict[tuple[str, int], int] = {}
        letters: list[dict[str, Any]] = []
        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            names = batch.schema.names
            files = batch.column(names.index(FILE)).to_pylist()
            blks = batch.column(names.index(BLK)).to_pylist()
            lines = []
            for f, b in zip(files, blks, strict=True):
                k = (f, b)
                i = ordinals.get(k, 0)
                ordinals[k] = i + 1
                lines.append(i)
            corrupt = batch.column(names.index(CORRUPT))
            bad = pc.is_valid(corrupt)
            if self.debezium:
                bad = pc.or_(bad, self._bad_events(batch))
            keep_idx = names.index(CORRUPT)
            out = batch.remove_column(keep_idx)
            if self.debezium:
                out = out.append_column(LINE, pa.array(lines, pa.int64()))
            if pc.any(bad).as_py():
                rows = batch.to_pylist()
                out = self.drop_bad(  # the lambdas run inside this call, on this batch's lists
                    out,
                    bad,
                    letters,
                    lambda i: self.letter(rows[i], files[i], blks[i], lines[i]),  # noqa: B023
                    lambda i: self.describe(rows[i], files[i], blks[i], lines[i]),  # noqa: B023
                )
            if out.num_rows:
                yield out
        if letters:
            self.letters.add(letters)  # once the task is through: a failed task adds nothing

    def drop_bad(
        self,
        out: Any,
        bad: Any,
        letters: list[dict[str, Any]],
        letter_of: Callable[[int], dict[str, Any]],
        describe_of: Callable[[int], str],
    ) -> Any:
        """``out`` without the rows ``bad`` marks, each one dealt with as ON ERROR says: kept as
        a dead letter (``letters``), skipped (logged and counted), or the task fails naming it."""
        import pyarrow.compute as pc

        bad_list = bad.to_pylist()
        for i, is_bad in enumerate(bad_list):
            if not is_bad:
                continue
            if self.letters is not None:
                letters.append(letter_of(i))
                continue
            msg = describe_of(i)
            if not self.skip:
                raise ValueError(BAD_RECORD_MARKER + msg + "|END")
            logging.getLogger("icesql.sources").warning("skipping bad record: %s", msg)
        if self.skip and self.counter is not None:
            self.counter.add(sum(1 for b in bad_list if b))
        return out.filter(pc.invert(bad))

    def _bad_events(self, batch: Any) -> Any:
        """Per row: is this Debezium event unusable? (``op`` not c/u/d/r, a delete without
        ``before``, another op without ``after``; the enveloped ``payload`` when it is there).

        Vectorised with Arrow compute: converting the ``before``/``after``/``payload`` structs to
        Python dicts was most of a change batch's time (measured: ~2/3 of the Python workers'
        time of a 100k-change upsert batch)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        names = batch.schema.names
        n = batch.num_rows

        def top(name: str) -> Any:
            return batch.column(names.index(name)) if name in names else pa.nulls(n)

        payload = batch.column(names.index("payload")) if "payload" in names else None
        has_payload = pc.is_valid(payload) if payload is not None else pa.array([False] * n, pa.bool_())

        def ev(name: str) -> Any:
            outer = top(name)
            if payload is None or payload.type.get_field_index(name) < 0:
                return outer, pc.is_valid(outer)
            inner = pc.struct_field(payload, name)
            valid = pc.if_else(has_payload, pc.is_valid(inner), pc.is_valid(outer))
            if name != "op":
                return None, valid
            if outer.type != inner.type:
                outer = outer.cast(inner.type)
            return pc.if_else(has_payload, inner, outer), valid

        op, _ = ev("op")
        _, before_ok = ev("before")
        _, after_ok = ev("after")
        known = pc.fill_null(pc.is_in(op, value_set=pa.array(["c", "u", "d", "r"])), False)
        is_delete = pc.fill_null(pc.equal(op, "d"), False)
        missing = pc.if_else(is_delete, pc.invert(before_ok), pc.invert(after_ok))
        return pc.or_(pc.invert(known), missing)

    def describe(self, row: dict[str, Any], file: str, blk: int, line: int) -> str:
        where = f"source '{self.source}', file '{short_path(file)}'"
        if blk == 0:
            where += f", record {line + 1}"
        else:
            where += f", record {line + 1} of the split at byte {blk}"
        raw = row.get(CORRUPT)
        field, why, _ = self._diagnose(row, raw)
        snippet = "" if raw is None else f": {_clip(raw)}"
        return f"{where}, field '{field}': {why}{snippet}" if field else f"{where}: {why}{snippet}"

    def letter(self, row: dict[str, Any], file: str, blk: int, line: int) -> dict[str, Any]:
        """A bad record as the dead-letter table keeps it (``deadletter.COLUMNS``)."""
        raw = row.get(CORRUPT)
        field, why, reason = self._diagnose(row, raw)
        if raw is None:  # it parsed (a Debezium event without a known op): its JSON
            parsed = {k: v for k, v in row.items() if k not in INTERNAL_COLUMNS and v is not None}
            raw = json.dumps(parsed, default=str, sort_keys=True)
        return {
            "source": self.source,
            "file": short_path(file),
            "byte_offset": int(blk or 0),
            # its line when the split starts the file (a CSV header counted), as editors number
            "record": line + 1 + (1 if self.header and not blk else 0),
            "reason": reason,
            "error": f"field '{field}': {why}" if field else why,
            "raw": raw,
        }

    def _diagnose(self, row: dict[str, Any], raw: str | None) -> tuple[str | None, str, str]:
        """(field, what is wrong, reason: a short label for metrics and the dead-letter table)."""
        if self.fmt == "csv":
            if raw is None:
                return None, "cannot parse the record", "unparsable"
            try:
                values = next(csv.reader([raw]))
            except Exception:
                return None, "malformed CSV record", "malformed-csv"
            if '"' in raw:
                try:  # Spark's reader takes stray quotes as text, and the fields then shift
                    next(csv.reader([raw], strict=True))
                except csv.Error as e:
                    return None, f"malformed CSV record: broken quoting ({e})", "malformed-csv"
            if len(values) != len(self.columns):
                return None, f"expected {len(self.columns)} fields, found {len(values)}", "field-count"
            for name, value in zip(self.columns, values, strict=True):
                if value != "" and row.get(name) is None:
                    return name, f"cannot convert {value!r} to the declared type", "type-mismatch"
            return None, "cannot parse the record", "unparsable"
        parsed: Any = None
        if raw is not None:
            try:
                parsed = json.loads(raw)
            except Exception:
                return None, "malformed JSON", "malformed-json"
            if not isinstance(parsed, dict):
                return None, "a JSON record must be an object", "malformed-json"
        if self.debezium:
            env_raw = parsed.get("payload", parsed) if isinstance(parsed, dict) else None
            env_row = row.get("payload") or row
            if env_raw is None:
                env_raw = env_row
            op = env_raw.get("op")
            if op not in ("c", "u", "d", "r"):
                return "op", f"unknown Debezium operation {op!r} (expected c, u, d or r)", "debezium-op"
            image = "before" if op == "d" else "after"
            if env_raw.get(image) is None:
                return image, f"op '{op}' needs a '{image}' row image", "debezium-image"
            path = _mismatch(env_raw, env_row, "")
            if path:
                return path, "value does not match the declared type", "type-mismatch"
            return None, "cannot parse the record", "unparsable"
        if isinstance(parsed, dict):
            path = _mismatch(parsed, row, "")
            if path:
                return path, "value does not match the declared type", "type-mismatch"
        return None, "cannot parse the record", "unparsable"


def _mismatch(raw: Any, parsed: Any, prefix: str) -> str | None:
    """The first field present in ``raw`` whose parsed value is missing (dotted path)."""
    if not isinstance(raw, dict):
        return None
    parsed = parsed if isinstance(parsed, dict) else {}
    for k, v in raw.items():
        if v is None:
            continue
        path = f"{prefix}{k}"
        if k not in parsed:
            # match case-insensitively, as Spark does
            match = next((pk for pk in parsed if pk.lower() == k.lower()), None)
            if match is None:
                continue
            pv = parsed[match]
        else:
            pv = parsed[k]
        if pv is None:
            return path
        if isinstance(v, dict):
            deeper = _mismatch(v, pv, path + ".")
            if deeper:
                return deeper
    return None


def short_path(path: str) -> str:
    return (
        path[len("file://") :]
        if path.startswith("file://")
        else (path[5:] if path.startswith("file:") else path)
    )


def _clip(text: str, n: int = 200) -> str:
    text = text.strip()
    return text if len(text) <= n else text[: n - 3] + "..."


def marked_message(exc: BaseException, marker: str) -> str | None:
    """The message a Python worker raised as ``<marker>message|END``, found anywhere in the
    chain of ``exc`` (Spark wraps it in JVM traces, classic or Connect); None when absent."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = str(e)
        i = text.find(marker)
        if i >= 0:
            body = text[i + len(marker) :]
            j = body.find("|END")
            return body[:j] if j >= 0 else body.splitlines()[0]
        e = e.__cause__ or e.__context__
    return None


def translate_bad_record(exc: BaseException) -> BadRecordError | None:
    """Turn a Spark failure caused by ``_RecordGuard`` into a ``BadRecordError``."""
    body = marked_message(exc, BAD_RECORD_MARKER)
    if body is None:
        return None
    return BadRecordError(
        f"bad record in {body}",
        hint="fix the input, or skip bad records with WITH (ON ERROR = 'skip')",
    )


# --------------------------------------------------------------------------- generator


def _generator_expr(col: Column, seq: str = "value") -> str:
    t = col.type.strip().lower()
    q = "`" + col.name.replace("`", "``") + "`"
    n = f"CAST({seq} AS BIGINT)"
    lit_name = col.name.replace("'", "''")
    if t in ("bigint", "long"):
        e = n
    elif t in ("int", "integer"):
        e = f"CAST({n} % 2147483647 AS INT)"
    elif t in ("smallint", "short"):
        e = f"CAST({n} % 32767 AS SMALLINT)"
    elif t in ("tinyint", "byte"):
        e = f"CAST({n} % 127 AS TINYINT)"
    elif t == "boolean":
        e = f"({n} % 2 = 0)"
    elif t in ("double", "float", "real"):
        e = f"CAST({n} * 0.5 AS {t.upper()})"
    elif t.startswith("decimal"):
        e = f"CAST({n} % 1000 AS {t.upper()})"
    elif t == "string" or t.startswith("varchar") or t.startswith("char"):
        e = f"concat('{lit_name}-', CAST({n} AS STRING))"
    elif t == "binary":
        e = f"CAST(concat('{lit_name}-', CAST({n} AS STRING)) AS BINARY)"
    elif t == "date":
        e = f"date_add(DATE'2024-01-01', CAST({n} % 3650 AS INT))"
    elif t == "timestamp":
        e = f"timestamp_seconds(1704067200 + {n})"
    elif t == "timestamp_ntz":
        e = f"CAST(timestamp_seconds(1704067200 + {n}) AS TIMESTAMP_NTZ)"
    else:
        e = f"CAST(NULL AS {col.type})"
    return f"{e} AS {q}"


def generator_dataframe(spark: Any, plan: SourcePlan) -> Any:
    columns = plan.columns
    if not columns and plan.schema:
        st = _row_schema(spark, plan)
        columns = tuple(Column(f.name, f.dataType.simpleString(), f.nullable) for f in st.fields)
    if not columns:
        columns = (Column("value", "bigint"),)
    exprs = [_generator_expr(c, "id" if plan.total_rows is not None else "value") for c in columns]
    if plan.total_rows is not None:
        base = spark.range(int(plan.total_rows))
    else:
        base = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", str(plan.rows_per_second or 1))
            .options(**dict(plan.options))
            .load()
        )
    return base.selectExpr(*exprs)


def columns_of(df: Any) -> tuple[Column, ...]:
    """The data columns of a DataFrame as plan ``Column``s (internal columns left out)."""
    return tuple(
        Column(f.name, f.dataType.simpleString(), bool(f.nullable))
        for f in df.schema.fields
        if f.name not in INTERNAL_COLUMNS
    )
