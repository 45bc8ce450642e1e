"""What a data file format is to icesql: one ``FileFormatModel`` in pyiceberg's sense, plus the
two things icesql's writer and readers need beyond it.

pyiceberg 0.12 chooses a table's writer by ``write.format.default`` from a registry
(``pyiceberg.io.fileformat.FileFormatFactory``) of ``FileFormatModel`` entries, each creating a
``FileFormatWriter`` whose ``close()`` returns the file's ``DataFileStatistics``. icesql's models
are such entries (the ORC and Avro ones are registered there, so pyiceberg's own writes use them
too), and add:

* ``open_writer(stream, ...)``: a writer on a stream icesql opened, whose ``size()`` says how
  large the file would be if closed now (what rollover at MAXIMUM FILE SIZE needs; Iceberg Java's
  ``FileAppender.length()``);
* ``read(stream, columns)`` and ``columns(stream)``: the reading side, for compaction, SELECT,
  the key index and position deletes, whichever format a table's files are in.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyiceberg.io.fileformat import DataFileStatistics, FileFormatWriter


class FormatWriter(FileFormatWriter):
    """One open data file of a format. ``write`` takes Arrow tables in the Arrow schema it was
    opened with (``engine.schema.arrow_schema`` of the file's schema, or a variant of the same
    columns); ``size`` is the file's size if it were closed now (an estimate while the format buffers
    rows); ``close`` ends the file and returns its statistics."""

    def __init__(
        self,
        stream: Any,
        file_schema: Any,
        arrow_schema: pa.Schema,
        properties: Mapping[str, str],
        close_stream: bool = False,
        target_size: int | None = None,
    ) -> None:
        self._stream = stream
        self._close_stream = close_stream
        self._open(file_schema, arrow_schema, dict(properties), target_size)

    @abstractmethod
    def _open(self, file_schema: Any, arrow_schema: pa.Schema, props: Mapping[str, str], target: int | None) -> None:
        """Start the file (``__init__``'s arguments; see ``FormatModel.open_writer``)."""

    @abstractmethod
    def size(self) -> int: ...

    def _done(self, stats: DataFileStatistics) -> DataFileStatistics:
        """End ``close``: close the stream when the writer owns it, keep the statistics."""
        if self._close_stream:
            self._stream.close()
        self._result = stats
        return stats


class FormatModel(ABC):
    """A data file format (see the module docstring). Stateless; one instance per format."""

    name: str  # 'parquet' | 'orc' | 'avro': the FORMAT option's value and write.format.default's
    file_format: Any  # pyiceberg.manifest.FileFormat

    @property
    def format(self) -> Any:  # pyiceberg's FileFormatModel protocol
        return self.file_format

    def file_extension(self) -> str:
        return self.name

    def add_field_metadata(self, field: Any, metadata: dict[bytes, bytes], include_field_ids: bool) -> None:
        if include_field_ids:
            metadata[self.field_id_key] = str(field.field_id).encode()

    field_id_key: bytes = b"PARQUET:field_id"

    def create_writer(self, output_file: Any, file_schema: Any, properties: Mapping[str, str]) -> FormatWriter:
        """pyiceberg's entry point: a writer on a new file at ``output_file``."""
        from icesql.engine.iceberg.schema import arrow_schema

        stream = output_file.create(overwrite=True)
        return self.open_writer(stream, file_schema, arrow_schema(file_schema), properties, close_stream=True)

    writer: type[FormatWriter]  # the format's writer class, made by ``open_writer``

    def open_writer(
        self,
        stream: Any,
        file_schema: Any,
        arrow_schema: pa.Schema,
        properties: Mapping[str, str],
        *,
        close_stream: bool = False,
        target_size: int | None = None,
    ) -> FormatWriter:
        """A writer of a file of ``file_schema`` (an Iceberg schema) on ``stream``, taking tables
        in ``arrow_schema`` (``engine.schema.arrow_schema`` of it, or a variant of the same
        columns), with the table ``properties`` (codecs, metrics modes). ``close_stream``:
        ``close`` closes the stream too. ``target_size``: the size at which the caller will roll
        to a new file (a format that buffers rows keeps its buffer well below it)."""
        return self.writer(stream, file_schema, arrow_schema, properties, close_stream, target_size)

    @abstractmethod
    def read(self, stream: Any, columns: Sequence[str] | None = None) -> pa.Table:
        """The file's rows (the top-level ``columns`` named, or all), named as the file names them."""

    @abstractmethod
    def columns(self, stream: Any) -> list[tuple[str, int | None]]:
        """The file's top-level columns: (name, Iceberg field id or None), from its own schema."""


def field_id(f: pa.Field, key: bytes) -> int | None:
    """The Iceberg field id an Arrow field's ``key`` metadata holds (None: it holds none)."""
    fid = (f.metadata or {}).get(key)
    return int(fid) if fid is not None else None


def empty_statistics(records: int = 0) -> DataFileStatistics:
    return DataFileStatistics(
        record_count=records,
        column_sizes={},
        value_counts={},
        null_value_counts={},
        nan_value_counts={},
        column_aggregates={},
        split_offsets=[],
    )


__all__ = ["FormatModel", "FormatWriter", "empty_statistics", "field_id"]
