"""ORC data files: pyarrow's ORC writer, with Iceberg's ORC type attributes.

Iceberg keeps a column's field id in the ORC type attribute ``iceberg.id`` and whether it is
required in ``iceberg.required`` (pyarrow writes Arrow field metadata as ORC type attributes and
reads them back). Types ORC lacks are stored as Iceberg Java stores them: a UUID or a fixed as
BINARY with ``iceberg.binary-type`` (``UUID`` / ``FIXED``, and ``iceberg.length``), a time of day
as LONG microseconds with ``iceberg.long-type = TIME``; a timestamp with zone is ORC's
TIMESTAMP_INSTANT, one without TIMESTAMP. Compression is the table's
``write.orc.compression-codec`` (zstd by default, as icesql's Parquet; Iceberg Java's default is
zlib), stripes ``write.orc.stripe-size-bytes`` (64 MiB). pyarrow keeps a stripe in memory until
it is full, so ``size`` adds the unwritten rows at the ratio the written ones took (as Iceberg
Java's ORC appender estimates its open stripe). Column statistics come from the rows
(``formats.stats``): pyarrow exposes none of ORC's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.orc as orc
from pyiceberg.io.fileformat import DataFileStatistics
from pyiceberg.manifest import FileFormat

from icesql.engine.iceberg.formats.arrays import any_leaf, convert_schema, convert_table
from icesql.engine.iceberg.formats.base import FormatModel, FormatWriter, field_id
from icesql.engine.iceberg.formats.stats import ArrowStats

FIELD_ID = b"iceberg.id"
REQUIRED = b"iceberg.required"
BINARY_TYPE = b"iceberg.binary-type"
LONG_TYPE = b"iceberg.long-type"
LENGTH = b"iceberg.length"
STRIPE_BYTES = 64 * 1024 * 1024
_CODECS = {"none": "uncompressed", "uncompressed": "uncompressed", "gzip": "zlib"}


def _physical(f: pa.Field) -> pa.Field | None:
    """The ORC-side field of an Iceberg Arrow field: ORC's attributes, ORC's types."""
    meta = dict(f.metadata or {})
    fid = meta.pop(b"PARQUET:field_id", None) or meta.get(FIELD_ID)
    if fid is not None:
        meta[FIELD_ID] = fid
        meta[REQUIRED] = b"false" if f.nullable else b"true"
    t = f.type
    if isinstance(t, pa.BaseExtensionType) and t.storage_type == pa.binary(16):  # uuid
        meta[BINARY_TYPE] = b"UUID"
        t = pa.binary()
    elif pa.types.is_fixed_size_binary(t):
        meta[BINARY_TYPE] = b"FIXED"
        meta[LENGTH] = str(t.byte_width).encode()
        t = pa.binary()
    elif pa.types.is_time64(t):
        meta[LONG_TYPE] = b"TIME"
        t = pa.int64()
    return f.with_type(t).with_metadata(meta)


def _to_orc_leaf(arr: pa.Array) -> pa.Array | None:
    t = arr.type
    if isinstance(t, pa.BaseExtensionType):
        return arr.storage.cast(pa.binary())
    if pa.types.is_fixed_size_binary(t):
        return arr.cast(pa.binary())
    if pa.types.is_time64(t):
        return arr.cast(pa.int64())
    return None


def _needs_leaf_change(t: pa.DataType) -> bool:
    return isinstance(t, pa.BaseExtensionType) or pa.types.is_fixed_size_binary(t) or pa.types.is_time64(t)


def _logical(f: pa.Field) -> pa.Field | None:
    """Iceberg's Arrow field of an ORC field (the attributes say which), timestamps in micros."""
    meta = f.metadata or {}
    t = f.type
    if meta.get(BINARY_TYPE) == b"UUID":  # its storage: readers cast it to the table's UUID type
        return f.with_type(pa.binary(16))
    if meta.get(BINARY_TYPE) == b"FIXED" and LENGTH in meta:
        return f.with_type(pa.binary(int(meta[LENGTH])))
    if meta.get(LONG_TYPE) == b"TIME":
        return f.with_type(pa.time64("us"))
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return f.with_type(pa.timestamp("us", tz=t.tz))
    return None


class OrcWriter(FormatWriter):
    def _open(self, file_schema: Any, arrow_schema: pa.Schema, props: Mapping[str, str], target: int | None) -> None:
        codec = str(props.get("write.orc.compression-codec", "zstd")).lower()
        stripe = int(props.get("write.orc.stripe-size-bytes", STRIPE_BYTES))
        if target:  # a stripe an eighth of the file at most: the estimate learns early
            stripe = max(64 * 1024, min(stripe, target // 8))
        self._schema = convert_schema(arrow_schema, _physical)
        self._convert = any_leaf(arrow_schema, _needs_leaf_change)
        self._writer = orc.ORCWriter(
            self._stream,
            compression=_CODECS.get(codec, codec),
            stripe_size=stripe,
            file_version="0.12",
        )
        self._stats = ArrowStats(file_schema, props)
        self._written = 0  # bytes on the stream at the last look
        self._flushed_arrow = 0  # Arrow bytes of the rows in stripes on the stream
        self._arrow = 0  # Arrow bytes of every row written
        self._ratio = 1.0  # stream bytes per Arrow byte until a stripe says (no file too big)

    def write(self, table: pa.Table) -> None:
        self._stats.update(table)
        if self._convert:
            table = convert_table(table, self._schema, _to_orc_leaf)
        else:
            table = pa.Table.from_arrays(table.columns, schema=self._schema)
        self._writer.write(table)
        self._arrow += table.nbytes

    def size(self) -> int:
        on_disk = int(self._stream.tell())
        if on_disk > self._written + 64:  # a stripe went out (not the header): all but the open one
            self._written = on_disk
            self._flushed_arrow = self._arrow
            self._ratio = max(0.01, on_disk / max(1, self._arrow))
        return on_disk + int((self._arrow - self._flushed_arrow) * self._ratio)

    def close(self) -> DataFileStatistics:
        if self._result is not None:
            return self._result
        self._writer.close()
        return self._done(self._stats.result())


class OrcModel(FormatModel):
    name = "orc"
    file_format = FileFormat.ORC
    field_id_key = FIELD_ID
    writer = OrcWriter

    def read(self, stream: Any, columns: Sequence[str] | None = None) -> pa.Table:
        table = orc.ORCFile(stream).read(columns=list(columns) if columns is not None else None)
        target = convert_schema(table.schema, _logical)
        if target.equals(table.schema, check_metadata=False):
            return table
        return table.cast(target)

    def columns(self, stream: Any) -> list[tuple[str, int | None]]:
        return [(f.name, field_id(f, FIELD_ID)) for f in orc.ORCFile(stream).schema]


__all__ = ["OrcModel"]
