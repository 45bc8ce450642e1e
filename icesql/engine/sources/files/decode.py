"""Read a piece of a file with Arrow: rows exactly as Spark's reader of that format gives them.

``decode(piece, source, fs)`` yields Arrow record batches with the source's row columns (in the
row schema's Arrow types) and, for Debezium sources, the changelog columns (``__op``, ``__seq``,
``__file``, ``__blk``, ``__line``). Memory stays bounded: Parquet is read a row group at a time,
text formats in chunks of ``CHUNK_BYTES`` cut at line ends.

Whatever Arrow cannot read exactly as Spark would raises ``types.Fallback``; the caller lets
Spark's own reader take that file. Nothing is ever dropped or guessed here.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from icesql.engine.base.arrays import repeated, row_numbers
from icesql.engine.base.changelog import BLK, FILE, LINE
from icesql.engine.sources.decode import (
    NewColumnsError,
    SourceFormat,
    changelog_batch,
    debezium_events,
    is_blank,
    json_batch,
    message_batch,
    to_batch,
)
from icesql.engine.sources.files.pieces import Piece
from icesql.engine.sources.types import (
    Fallback,
    Unsupported,
)

CHUNK_BYTES = 16 * 1024 * 1024



def _picks(file_names: list[str], wanted: list[str]) -> tuple[list[str | None], list[str]]:
    """The file column each ``wanted`` column reads (matched by name as Spark does,
    case-insensitively, the first spelling kept; None: missing, read as null), and the file
    columns to read."""
    lower = {n.lower(): n for n in reversed(file_names)}
    picks = [n if n in file_names else lower.get(n.lower()) for n in wanted]
    return picks, sorted({p for p in picks if p is not None})

def decode(piece: Piece, source: SourceFormat, fs: Any, path_in_fs: str) -> Iterator[pa.RecordBatch]:
    if source.format == "parquet":
        yield from _parquet(piece, source, fs, path_in_fs)
    elif source.format == "orc":
        yield from _orc(piece, source, fs, path_in_fs)
    elif source.format == "json":
        for chunk in _lines(piece, fs, path_in_fs):
            yield json_batch(chunk.data, source)
    elif source.format == "csv":
        yield from _csv(piece, source, fs, path_in_fs)
    elif source.format == "debezium-json" and source.messages:
        line = 0
        for chunk in _lines(piece, fs, path_in_fs):
            batch = _messages(chunk.data, piece, line)
            line += batch.num_rows
            yield batch
    elif source.format == "debezium-json":
        line = 0
        for chunk in _lines(piece, fs, path_in_fs):
            batch = _debezium(chunk.data, source, piece, line)
            line += batch.num_rows
            yield batch
    else:  # pragma: no cover - check_supported refuses it
        raise Unsupported(f"format {source.format}")


# --------------------------------------------------------------------------- text ranges


@dataclass(frozen=True)
class _Chunk:
    data: bytes  # whole lines
    first_line_at: int  # byte offset of its first line in the file


def _lines(piece: Piece, fs: Any, path: str) -> Iterator[_Chunk]:
    """The lines of ``piece`` in chunks of whole lines.

    As Hadoop's line reader: a range that does not start the file skips the line it starts in
    (the previous range reads it), and the lines that start at or before the range's end belong
    to it (so a range reads on past its end to finish its last line).
    """
    end = piece.size if piece.end is None else min(piece.end, piece.size)
    with fs.open_input_file(path) as f:
        pos = piece.start
        if pos > 0:
            f.seek(pos)
            skipped = _skip_line(f)
            if skipped is None:
                return
            pos += skipped
        if pos > end:
            return
        f.seek(pos)
        buffer, at = b"", pos
        while True:
            data = f.read(CHUNK_BYTES)
            eof = not data
            buffer += data
            region = buffer if eof else buffer[: buffer.rfind(b"\n") + 1]
            rel_end = end - at
            i = region.find(b"\n", rel_end) if 0 <= rel_end < len(region) else -1
            if i >= 0:  # the line ending at i is the last one that starts at or before `end`
                yield _Chunk(region[: i + 1], at)
                return
            if region:
                yield _Chunk(region, at)
            if eof:
                return
            buffer, at = buffer[len(region) :], at + len(region)


def _skip_line(f: Any) -> int | None:
    """Bytes up to and including the next newline (None: the file ends first)."""
    n = 0
    while True:
        data = f.read(64 * 1024)
        if not data:
            return None
        i = data.find(b"\n")
        if i >= 0:
            return n + i + 1
        n += len(data)


# --------------------------------------------------------------------------- json


# --------------------------------------------------------------------------- csv

_DOUBLED_QUOTE = re.compile(rb'(?<![,\n\r])""|""(?![,\r\n])')


def _csv(piece: Piece, source: SourceFormat, fs: Any, path: str) -> Iterator[pa.RecordBatch]:
    import pyarrow.csv as pcsv

    schema = source.row_schema()
    sep = source.delimiter.encode()
    first = True
    for chunk in _lines(piece, fs, path):
        data = chunk.data
        if first and piece.start == 0 and source.header:
            nl = data.find(b"\n")
            data = b"" if nl < 0 else data[nl + 1 :]
        first = False
        if is_blank(data):
            continue
        # Spark's CSV reader escapes with a backslash and reads "" inside a field literally;
        # Arrow's follows RFC 4180: where they could differ, Spark reads the file
        if b"\\" in data or (sep != b"," and b'""' in data) or _DOUBLED_QUOTE.search(data):
            raise Fallback("backslashes or doubled quotes")
        try:
            table = pcsv.read_csv(
                io.BytesIO(data),
                read_options=pcsv.ReadOptions(
                    column_names=schema.names, use_threads=False, block_size=max(1 << 20, len(data) + 1)
                ),
                parse_options=pcsv.ParseOptions(
                    delimiter=source.delimiter, quote_char='"', double_quote=False, escape_char=False
                ),
                convert_options=pcsv.ConvertOptions(
                    column_types={n: pa.string() for n in schema.names},
                    null_values=[""],
                    strings_can_be_null=True,
                    quoted_strings_can_be_null=True,
                ),
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise Fallback(str(e)) from None
        yield to_batch(table, schema, source.session_tz, text=True)


# --------------------------------------------------------------------------- parquet


def _parquet(piece: Piece, source: SourceFormat, fs: Any, path: str) -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq

    schema = source.row_schema()
    with fs.open_input_file(path) as f:
        # INT96 (Spark's and Hive's old timestamps) in microseconds, as Spark reads them: no
        # overflow for years far from 1970
        pf = pq.ParquetFile(f, coerce_int96_timestamp_unit="us")
        names = pf.schema_arrow.names
        int96 = {
            column.path
            for column in (pf.schema.column(i) for i in range(len(pf.schema)))
            if column.physical_type == "INT96"
        }
        declared = {n.lower() for n in schema.names}
        # a column of type null (all None) carries no type: not new until a file types it
        # (files.relation._infer_parquet_schema leaves it out meanwhile)
        new = (
            [
                f.name
                for f in pf.schema_arrow
                if f.name.lower() not in declared and not pa.types.is_null(f.type)
            ]
            if source.inferred
            else []
        )
        if new:
            raise NewColumnsError(piece.path, new)
        picks, columns = _picks(names, schema.names)
        groups = list(piece.row_groups) if piece.row_groups is not None else list(range(pf.num_row_groups))
        if not groups:
            return
        for batch in pf.iter_batches(row_groups=groups, columns=columns, use_threads=False, batch_size=65536):
            arrays = []
            for target, pick in zip(schema, picks, strict=True):
                if pick is None:
                    arrays.append(pa.nulls(batch.num_rows, target.type))
                    continue
                col = batch.column(batch.schema.get_field_index(pick))
                if pick in int96 and pa.types.is_timestamp(col.type) and col.type.tz is None:
                    # an instant, which Spark reads as its timestamp (with time zone)
                    col = col.cast(pa.timestamp(col.type.unit, "UTC"))
                arrays.append(_parquet_cast(col, target, pick))
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _parquet_cast(col: pa.Array, target: pa.Field, name: str) -> pa.Array:
    if col.type == target.type:
        return col
    t, s = target.type, col.type
    if pa.types.is_null(s):  # all None in this file: the type comes from the other files (or the table)
        return pa.nulls(len(col), t)
    if pa.types.is_dictionary(s):  # pyarrow's own schema in the file says so; Spark reads the values
        return _parquet_cast(col.dictionary_decode(), target, name)
    if isinstance(s, pa.BaseExtensionType):  # arrow.json and the like: Spark reads what they are stored as
        return _parquet_cast(col.storage, target, name)
    same_family = (
        (pa.types.is_string(t) and (pa.types.is_large_string(s) or pa.types.is_string_view(s)))
        or (
            pa.types.is_binary(t)
            and (
                pa.types.is_large_binary(s) or pa.types.is_binary_view(s) or pa.types.is_fixed_size_binary(s)
            )
        )
        or (pa.types.is_timestamp(t) and pa.types.is_timestamp(s) and (t.tz is None) == (s.tz is None))
        or (pa.types.is_integer(t) and pa.types.is_integer(s) and t.bit_width >= s.bit_width)
        # pyarrow's duration: its INT64 count, Spark's long
        or (pa.types.is_int64(t) and pa.types.is_duration(s))
        # Spark's UINT64: decimal(20,0)
        or (pa.types.is_decimal(t) and pa.types.is_unsigned_integer(s) and t.precision - t.scale >= 20)
        or (pa.types.is_floating(t) and pa.types.is_floating(s) and t.bit_width >= s.bit_width)
        or (pa.types.is_nested(t) and type(t) is type(s))
        # pyarrow's other lists are Parquet's one list
        or (
            pa.types.is_list(t)
            and (
                pa.types.is_large_list(s)
                or pa.types.is_fixed_size_list(s)
                or pa.types.is_list_view(s)
                or pa.types.is_large_list_view(s)
            )
        )
    )
    if not same_family:
        raise Fallback(f"column '{name}' is {s} in the file where {t} is declared")
    try:
        return col.cast(t, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise Fallback(f"column '{name}': {e}") from None


# --------------------------------------------------------------------------- orc


def _orc(piece: Piece, source: SourceFormat, fs: Any, path: str) -> Iterator[pa.RecordBatch]:
    """An ORC file, a stripe at a time, its columns matched by name as for Parquet."""
    import pyarrow.orc as po

    schema = source.row_schema()
    with fs.open_input_file(path) as f:
        orc = po.ORCFile(f)
        names = orc.schema.names
        declared = {n.lower() for n in schema.names}
        new = [n for n in names if n.lower() not in declared] if source.inferred else []
        if new:
            raise NewColumnsError(piece.path, new)
        picks, columns = _picks(names, schema.names)
        for stripe in range(orc.nstripes):
            batch = orc.read_stripe(stripe, columns=columns)
            arrays = []
            for target, pick in zip(schema, picks, strict=True):
                if pick is None:
                    arrays.append(pa.nulls(batch.num_rows, target.type))
                    continue
                col = batch.column(batch.schema.get_field_index(pick))
                t = target.type
                if pa.types.is_timestamp(t) and pa.types.is_int64(col.type) and t.tz is None:
                    col = col.cast(pa.timestamp("us"))  # Spark's timestamp_ntz, stored as microseconds
                elif (
                    pa.types.is_timestamp(t)
                    and pa.types.is_timestamp(col.type)
                    and col.type.tz is None
                    and t.tz
                ):
                    col = col.cast(pa.timestamp(col.type.unit, "UTC"))  # ORC's timestamp, an instant to Spark
                arrays.append(_parquet_cast(col, target, pick))
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)


# --------------------------------------------------------------------------- debezium


def _debezium(data: bytes, source: SourceFormat, piece: Piece, first_line: int) -> pa.RecordBatch:
    """Debezium events, one per line, as the rows their op leaves and the changelog columns; an
    event's position is (file, piece, line)."""
    rows, op, seq = debezium_events(data, source)
    n = rows.num_rows
    position = {
        FILE: repeated(piece.path, n, pa.string()),
        BLK: repeated(piece.start, n, pa.int64()),
        LINE: row_numbers(n, first_line),
    }
    return changelog_batch(rows, op, seq, position)


def _messages(data: bytes, piece: Piece, first_line: int) -> pa.RecordBatch:
    """The events of ``data`` whole, one per non-blank line (as the JSON reader counts lines)."""
    lines = [ln for ln in data.split(b"\n") if not is_blank(ln)]
    n = len(lines)
    position = {
        FILE: repeated(piece.path, n, pa.string()),
        BLK: repeated(piece.start, n, pa.int64()),
        LINE: row_numbers(n, first_line),
    }
    values = pa.array([ln.decode("utf-8", "replace").strip() for ln in lines], pa.string())
    return message_batch(None, values, position)


__all__ = ["decode"]
