"""Parquet data files: pyarrow's writer with the options of the table's ``write.parquet.*``
properties, one row group per ``write``, statistics from the footer (as pyiceberg reads them).
pyiceberg registers its own Parquet model; this one is icesql's, with ``size`` and the reader."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.fileformat import DataFileStatistics
from pyiceberg.manifest import FileFormat

from icesql.engine.iceberg.formats.base import FormatModel, FormatWriter, empty_statistics, field_id

FIELD_ID = b"PARQUET:field_id"


class ParquetWriter(FormatWriter):
    def _open(self, file_schema: Any, arrow_schema: pa.Schema, props: Mapping[str, str], target: int | None) -> None:
        from icesql.engine.base.pyiceberg_internals import parquet_writer_kwargs

        self._file_schema = file_schema
        self._properties = dict(props)
        self._writer = pq.ParquetWriter(
            self._stream, schema=arrow_schema, store_decimal_as_integer=True, **parquet_writer_kwargs(props)
        )
        self._rows = 0

    def write(self, table: pa.Table) -> None:
        self._writer.write_table(table, row_group_size=max(1, table.num_rows))
        self._rows += table.num_rows

    def size(self) -> int:
        return int(self._stream.tell())

    def close(self) -> DataFileStatistics:
        from pyiceberg.io.pyarrow import (
            compute_statistics_plan,
            data_file_statistics_from_parquet_metadata,
            parquet_path_to_id_mapping,
        )

        if self._result is not None:
            return self._result
        self._writer.close()
        if self._rows == 0:
            return self._done(empty_statistics())
        return self._done(
            data_file_statistics_from_parquet_metadata(
                parquet_metadata=self._writer.writer.metadata,
                stats_columns=compute_statistics_plan(self._file_schema, self._properties),
                parquet_column_mapping=parquet_path_to_id_mapping(self._file_schema),
            )
        )


class ParquetModel(FormatModel):
    name = "parquet"
    file_format = FileFormat.PARQUET
    field_id_key = FIELD_ID
    writer = ParquetWriter

    def read(self, stream: Any, columns: Sequence[str] | None = None) -> pa.Table:
        return pq.read_table(stream, columns=list(columns) if columns is not None else None)

    def columns(self, stream: Any) -> list[tuple[str, int | None]]:
        return [(f.name, field_id(f, FIELD_ID)) for f in pq.read_schema(stream)]


__all__ = ["ParquetModel"]
