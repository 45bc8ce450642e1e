"""Data file formats: one registry entry per format, as pyiceberg keeps one ``FileFormatModel``
per ``FileFormat`` (``pyiceberg.io.fileformat.FileFormatFactory``).

A sink writes the format it names (``FORMAT = 'parquet' | 'orc' | 'avro'``), or else the
table's ``write.format.default``; compaction writes the table's. Whatever format a file is in,
``read_file`` / ``read_by_id`` read it by its manifest entry's format (or, for a bare path, its
extension), so tables that mix formats read whole. ``register`` adds a format; the ORC and Avro
entries are also registered with pyiceberg, so its own writes (``Table.append``) follow
``write.format.default`` as well.

Which readers read which format (the README says the same): Iceberg Java and Spark read all
three; pyiceberg reads Parquet and ORC; DuckDB's iceberg extension and iceberg-rust (DataFusion)
read Parquet only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from icesql.engine.iceberg.formats.avro import AvroModel
from icesql.engine.iceberg.formats.base import FormatModel, FormatWriter
from icesql.engine.iceberg.formats.orc import OrcModel
from icesql.engine.iceberg.formats.parquet import ParquetModel
from icesql.plan import WRITE_FORMAT_DEFAULT as WRITE_FORMAT  # the table property (Iceberg's name)

DEFAULT = "parquet"

_REGISTRY: dict[str, FormatModel] = {}


def register(model: FormatModel) -> None:
    """Add a format (its ``name`` is the FORMAT value); also pyiceberg's, unless it has one."""
    import pyiceberg.io.pyarrow  # noqa: F401 - registers pyiceberg's Parquet model first
    from pyiceberg.io.fileformat import FileFormatFactory

    _REGISTRY[model.name] = model
    if model.file_format not in FileFormatFactory.available_formats():
        FileFormatFactory.register(model)


for _entry in (ParquetModel(), OrcModel(), AvroModel()):
    register(_entry)


def names() -> list[str]:
    """The FORMAT values icesql writes."""
    return sorted(_REGISTRY)


def get(name: str | None) -> FormatModel:
    """The format named ``name`` ('parquet', 'ORC', pyiceberg's ``FileFormat``; None: Parquet)."""
    key = str(getattr(name, "value", name) or DEFAULT).lower()
    model = _REGISTRY.get(key)
    if model is None:
        from icesql.errors import ExecutionError

        raise ExecutionError(f"unknown data file format '{name}'", hint=f"icesql writes {', '.join(names())}")
    return model


def table_format(properties: Any) -> str:
    """The format a table's ``write.format.default`` names (Parquet when it names none)."""
    return get(dict(properties or {}).get(WRITE_FORMAT)).name


def of_path(path: str) -> FormatModel:
    """The format of a file by its name's extension (Parquet when it has none of theirs)."""
    lower = path.lower()
    for model in _REGISTRY.values():
        if lower.endswith("." + model.file_extension()):
            return model
    return _REGISTRY[DEFAULT]


def _model(path: str, file_format: Any) -> FormatModel:
    return get(file_format) if file_format is not None else of_path(path)


def read_file(io: Any, path: str, columns: Sequence[str] | None = None, file_format: Any = None) -> pa.Table:
    """The rows of one data or delete file (the top-level ``columns`` named, or all), in the
    format its manifest entry names (``file_format``) or its extension says."""
    model = _model(path, file_format)
    with io.new_input(path).open() as f:
        return model.read(f, columns)


def read_by_id(io: Any, path: str, schema: Any, file_format: Any = None) -> pa.Table:
    """The columns of ``schema`` (an Iceberg schema) from a data file, matched by field id: a
    file written before a column was added (schema evolution) gets that column as nulls, a
    renamed column its new name. A file without ids is matched by name."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    model = _model(path, file_format)
    names = [f.name for f in schema.fields]
    with io.new_input(path).open() as f:
        file_columns = model.columns(f)
        f.seek(0)
        by_id = {fid: name for name, fid in file_columns if fid is not None}
        if by_id:
            found = [by_id.get(c.field_id) for c in schema.fields]
        else:
            present = {name for name, _ in file_columns}
            found = [c.name if c.name in present else None for c in schema.fields]
        if found == names:
            return model.read(f, names)
        table = model.read(f, [n for n in found if n is not None])
    target = schema_to_pyarrow(schema)
    columns = [
        table.column(n) if n is not None else pa.nulls(table.num_rows, target.field(i).type)
        for i, n in enumerate(found)
    ]
    return pa.table(columns, names=names)


__all__ = [
    "DEFAULT",
    "WRITE_FORMAT",
    "FormatModel",
    "FormatWriter",
    "get",
    "names",
    "of_path",
    "read_by_id",
    "read_file",
    "register",
    "table_format",
]
