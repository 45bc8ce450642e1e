"""Records to Arrow exactly as Spark's readers give them, for every source kind: JSON values, Debezium
change events and the changelog columns, the marker of a batch that brought new columns. Whatever
Arrow cannot read exactly as Spark would raises types.Fallback.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icesql.engine.base.changelog import BLK, FILE, LINE, OP, SEQ
from icesql.engine.sources.types import (
    Fallback,
    Unsupported,
    arrow_schema,
    check_csv_supported,
    check_json_supported,
    convert,
    json_read_type,
)


@dataclass(frozen=True)
class SourceFormat:
    """What the executors need to decode a FILES source (picklable, no secrets)."""

    format: str  # json | csv | parquet | orc | debezium-json
    row_schema_json: Mapping[str, Any]  # StructType.jsonValue() of the row
    header: bool = False
    delimiter: str = ","
    session_tz: str = "UTC"
    options: Mapping[str, str] = field(default_factory=dict)
    # Parquet, ORC: the schema was read from the files (no SCHEMA declared), so a file with more
    # columns brings new ones (NewColumnsError); with a declared SCHEMA, extra columns are not
    # part of the source and are left out, as Spark's reader does
    inferred: bool = False
    # debezium-json without SCHEMA: each event carries its schema (Kafka Connect JSON with
    # schemas.enable); its messages are kept whole (``MESSAGE_COLUMNS``) for a routed sink to
    # decode per table (``sources.connect``)
    messages: bool = False

    def row_schema(self) -> pa.Schema:
        return arrow_schema(self.row_schema_json)

    def check_supported(self) -> None:
        """Raises ``Unsupported`` when the Arrow path cannot read this source at all."""
        schema = self.row_schema()
        if self.format in ("json", "debezium-json"):
            check_json_supported(schema)
            if self.options:
                raise Unsupported(f"reader options {sorted(self.options)}")
        elif self.format == "csv":
            check_csv_supported(schema)
            if set(self.options) - {"sep", "delimiter", "header"}:
                raise Unsupported(
                    f"reader options {sorted(set(self.options) - {'sep', 'delimiter', 'header'})}"
                )
            if len(self.delimiter) != 1 or self.delimiter in '"\\\n\r':
                raise Unsupported(f"delimiter {self.delimiter!r}")
        elif self.format not in ("parquet", "orc"):
            raise Unsupported(f"format {self.format}")


def is_blank(data: bytes | pa.Buffer) -> bool:
    """Only whitespace (or nothing): ``isspace`` stops at the first other byte, ``strip`` copies.
    A buffer is ``one_per_line``'s lines, none of them blank."""
    if isinstance(data, pa.Buffer):
        return data.size == 0
    return not data or data.isspace()


def json_batch(data: bytes | pa.Buffer, source: SourceFormat) -> pa.RecordBatch:
    import pyarrow.json as pj

    schema = source.row_schema()
    read_schema = pa.schema([pa.field(f.name, json_read_type(f.type)) for f in schema])
    if is_blank(data):
        return pa.RecordBatch.from_pylist([], schema=schema)
    try:
        table = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, len(data) + 1)),
            parse_options=pj.ParseOptions(
                explicit_schema=read_schema, unexpected_field_behavior="ignore", newlines_in_values=False
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise Fallback(str(e)) from None
    return to_batch(table, schema, source.session_tz, text=False)


def to_batch(table: pa.Table, schema: pa.Schema, session_tz: str, *, text: bool) -> pa.RecordBatch:
    columns = []
    for f in schema:
        col = table.column(f.name).combine_chunks() if table.num_rows else pa.array([], f.type)
        columns.append(convert(col, f.type, session_tz=session_tz, text=text))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


NEW_COLUMNS_MARKER = "ICESQL-NEW-COLUMNS:"


class NewColumnsError(Exception):
    """A Parquet file has columns the source's (inferred) schema lacks: the batch stops before
    anything of it is committed, and the driver (``sink.errors.translate_new_columns``) restarts the
    sink to evolve the table, or stops it with SCHEMA EVOLUTION = 'off' - never drops them."""

    def __init__(self, path: str, columns: list[str], *, what: str | None = None) -> None:
        self.path, self.columns = path, columns
        where = what or f"file {path}"
        super().__init__(
            f"{NEW_COLUMNS_MARKER}{where} has column(s) {', '.join(columns)} that the source does not declare|END"
        )


# Kafka Connect's JSON converter with schemas on wraps each event: {"schema": ..., "payload": {...}}.
# A chunk with no such key anywhere is read without the wrapper's columns (about a tenth less decode).
# Only a miss matters, and it cannot drop anything: an event read without its wrapper has no op,
# which sends the file to Spark's path (below).
WRAPPED_PAYLOAD = re.compile(rb'"payload"\s*:\s*\{')


MESSAGE_COLUMNS = ("key", "value")  # the rows of a source whose events carry their schemas


def message_batch(
    keys: pa.Array | None,
    values: pa.Array,
    position: Mapping[str, pa.Array],
    extra: Mapping[str, pa.Array] | None = None,
) -> pa.RecordBatch:
    """Whole messages (their key and value as text), then ``extra`` columns (a Kafka source's
    INCLUDEd metadata), with the changelog columns, ``__op`` and ``__seq`` left null: the routed
    sink reads them from each event (``sources.connect``)."""
    n = len(values)
    extra = dict(extra or {})
    rows = pa.RecordBatch.from_arrays(
        [keys if keys is not None else pa.nulls(n, pa.string()), values, *extra.values()],
        names=[*MESSAGE_COLUMNS, *extra],
    )
    return changelog_batch(rows, pa.nulls(n, pa.string()), pa.nulls(n, pa.int64()), position)


def debezium_envelope(row: pa.DataType) -> pa.StructType:
    source = pa.struct([("lsn", pa.int64()), ("ts_ms", pa.int64())])
    return pa.struct(
        [("before", row), ("after", row), ("op", pa.string()), ("ts_ms", pa.int64()), ("source", source)]
    )


def changelog_batch(
    rows: pa.RecordBatch, op: pa.Array, seq: pa.Array, position: Mapping[str, pa.Array]
) -> pa.RecordBatch:
    """``rows`` with the changelog columns after them: ``__op``, ``__seq``, then the position
    (``__file``, ``__blk``, ``__line``)."""
    extra = [(OP, op), (SEQ, seq), *((name, position[name]) for name in (FILE, BLK, LINE))]
    schema = pa.schema([*rows.schema, *((name, a.type) for name, a in extra)])
    return pa.RecordBatch.from_arrays([*rows.columns, *(a for _, a in extra)], schema=schema)


def debezium_events(
    data: bytes | pa.Buffer, source: SourceFormat
) -> tuple[pa.RecordBatch, pa.Array, pa.Array]:
    """Debezium events (one JSON object per line, Kafka Connect's ``payload`` wrapper or not) ->
    (the row image each op leaves: ``before`` for a delete, ``after`` otherwise; the op; the
    database's order: ``source.lsn``, else ``source.ts_ms``, else ``ts_ms``), as Spark's path
    reads them. An event without a known op or its image raises ``Fallback`` (Spark's path
    names it as a bad record)."""
    import pyarrow.json as pj

    schema = source.row_schema()
    row_read = pa.struct([pa.field(f.name, json_read_type(f.type)) for f in schema])
    env = debezium_envelope(row_read)
    wrapped = WRAPPED_PAYLOAD.search(data) is not None
    read_schema = pa.schema(
        [*(pa.field(f.name, f.type) for f in env), *([pa.field("payload", env)] if wrapped else [])]
    )
    if is_blank(data):
        return (
            pa.RecordBatch.from_pylist([], schema=schema),
            pa.array([], pa.string()),
            pa.array([], pa.int64()),
        )
    try:
        t = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, len(data) + 1)),
            parse_options=pj.ParseOptions(
                explicit_schema=read_schema, unexpected_field_behavior="ignore", newlines_in_values=False
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise Fallback(str(e)) from None
    payload = t.column("payload").combine_chunks() if wrapped else None

    def ev(name: str) -> pa.Array:
        outer = t.column(name).combine_chunks()
        if payload is None:
            return outer
        return pc.if_else(pc.is_valid(payload), pc.struct_field(payload, name), outer)

    op = ev("op")
    before, after = ev("before"), ev("after")
    known = pc.fill_null(pc.is_in(op, value_set=pa.array(["c", "u", "d", "r"])), False)
    is_delete = pc.fill_null(pc.equal(op, "d"), False)
    missing = pc.if_else(is_delete, pc.is_null(before), pc.is_null(after))
    if not pc.all(pc.and_(known, pc.invert(missing)), min_count=0).as_py():
        raise Fallback("an event without a known op or its row image")  # Spark's path names it
    image = pc.if_else(is_delete, before, after)
    src = ev("source")
    seq = pc.coalesce(pc.struct_field(src, "lsn"), pc.struct_field(src, "ts_ms"), ev("ts_ms"))
    rows = to_batch(
        pa.Table.from_arrays(image.flatten(), names=schema.names), schema, source.session_tz, text=False
    )
    return rows, op, seq


# --------------------------------------------------------------------------- values as lines
# (a Kafka source's JSON values and keys, a registry's JSON Schema bodies)


def one_per_line(values: Any) -> bytes | pa.Buffer:
    """Non-null values as lines of one text, each ending in a line break (JSON allows a raw line
    break only between tokens, where a space means the same: one value, one line); a blank value
    raises ``Fallback``. The text is an Arrow buffer (``b""`` for no value), read without a copy
    (``json_batch``, ``debezium_events``).

    Without a Python object per value (a Kafka batch's values one at a time were a fifth of its
    decode): blank values found from the array's buffers with numpy, the lines joined by Arrow in
    one pass (a 57 MB batch of Debezium events: 0.12 s as a list joined and copied into bytes
    twice, 0.03 s so)."""
    if values.null_count:
        values = values.drop_null()
    n = len(values)
    if n == 0:
        return b""
    if values.type != pa.binary():
        values = values.cast(pa.binary())
    offsets = np.frombuffer(values.buffers()[1], np.int32)[values.offset : values.offset + n + 1]
    lo, hi = int(offsets[0]), int(offsets[-1])
    data = values.buffers()[2]
    body = np.frombuffer(data, np.uint8)[lo:hi] if data is not None else np.zeros(0, np.uint8)
    starts, ends = offsets[:-1] - lo, offsets[1:] - lo
    # blank: empty or only ASCII whitespace (``bytes.strip``'s). A value whose first byte is not
    # whitespace is not; the few others are looked at one by one
    first = np.full(n, _SPACE, np.uint8)
    filled = ends > starts
    first[filled] = body[starts[filled]]
    for i in np.nonzero(_WHITESPACE[first])[0]:
        if body[starts[i] : ends[i]].tobytes().isspace() or starts[i] == ends[i]:
            raise Fallback("a blank value")
    # a line break inside a value: looked for only when a control byte (below 14: tab, line
    # breaks) is there at all, one cheap pass over the bytes
    if _any_below(body, 14) and (np.count_nonzero(body == 10) or np.count_nonzero(body == 13)):
        for brk in (b"\n", b"\r"):
            values = pc.replace_substring(values, brk, b" ")
    return _lines(values)


def _any_below(body: np.ndarray, limit: int, step: int = 1 << 20) -> bool:
    """Whether a byte of ``body`` is below ``limit``, a megabyte at a time into one small array
    (one array as large as ``body`` cost more in fresh pages than the comparison itself)."""
    out = np.empty(min(len(body), step), np.bool_)
    for i in range(0, len(body), step):
        part = body[i : i + step]
        found = out[: len(part)]
        np.less(part, limit, out=found)
        if found.any():
            return True
    return False


def _lines(values: pa.Array) -> pa.Buffer:
    """Each value followed by a line break, as one buffer: Arrow's element-wise join (value, "")
    with a line break between writes exactly that into its output's data, which is sliced."""
    joined = pc.binary_join_element_wise(values, _EMPTY, _LINE_BREAK)
    offsets = np.frombuffer(joined.buffers()[1], np.int32)[joined.offset : joined.offset + len(joined) + 1]
    lo, hi = int(offsets[0]), int(offsets[-1])
    return joined.buffers()[2].slice(lo, hi - lo)


_EMPTY = pa.scalar(b"", pa.binary())
_LINE_BREAK = pa.scalar(b"\n", pa.binary())
_SPACE = 0x20
_WHITESPACE = np.zeros(256, np.bool_)
_WHITESPACE[list(b" \t\n\r\x0b\x0c")] = True


def json_rows(values: Any, fmt: Any, *, allow_null: bool) -> Any:
    """One row per value, by Spark's rules (``json_batch`` over the values as lines; a null value
    is a row of nulls where ``allow_null``)."""
    present = pc.is_valid(values)
    texts = values.filter(present) if values.null_count else values
    batch = json_batch(one_per_line(texts), fmt)
    if batch.num_rows != len(texts):
        raise Fallback("values that are not one JSON object each")
    if not values.null_count:
        return batch
    if not allow_null:
        raise Fallback("a null value")
    # put the rows back in place, with nulls where a value was null
    idx = pc.cumulative_sum(present.cast(pa.int64()))
    take = pc.if_else(present, pc.subtract(idx, 1), pa.scalar(None, pa.int64()))
    return pa.RecordBatch.from_arrays([c.take(take) for c in batch.columns], schema=batch.schema)
