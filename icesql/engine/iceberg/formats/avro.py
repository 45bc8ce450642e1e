"""Avro data files, as the Iceberg spec lays them out (its Appendix A).

The file's schema is pyiceberg's Avro form of the Iceberg schema (``AvroSchemaConversion``):
every field carries its ``field-id`` (lists ``element-id``, maps ``key-id``/``value-id``),
optional fields are unions with null, maps are arrays of key/value records, a decimal is a fixed
of its precision's size, a UUID fixed(16), timestamps ``timestamp-micros`` with
``adjust-to-utc``; names Avro does not allow are sanitized, the Iceberg name kept in
``iceberg-field-name``. Iceberg Java reads such files by field id. Rows are encoded a column at a
time (``avro_encode.AvroEncoder``); blocks are compressed with the table's
``write.avro.compression-codec`` (zstd by default, as icesql's Parquet; Iceberg Java's default is
gzip, Avro's ``deflate``) at ``write.avro.compression-level``. Column statistics come from the
rows (``formats.stats``). Reading goes through fastavro, a row at a time: Avro tables are read
back by compaction, SELECT and the key index, which is slower than Parquet or ORC.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import pyarrow as pa
from pyiceberg.io.fileformat import DataFileStatistics
from pyiceberg.manifest import FileFormat

from icesql.engine.iceberg.formats.base import FormatModel, FormatWriter
from icesql.engine.iceberg.formats.stats import ArrowStats

FIELD_ID = b"field-id"  # the attribute name in the Avro schema (not Arrow metadata)
# Iceberg's codec names (write.avro.compression-codec) and Avro's
_CODECS = {"gzip": "deflate", "deflate": "deflate", "zstd": "zstandard", "zstandard": "zstandard",
           "snappy": "snappy", "uncompressed": "null", "none": "null", "null": "null"}


def avro_schema(file_schema: Any) -> dict[str, Any]:
    """The Avro schema of a file of ``file_schema``, each named type named once."""
    from pyiceberg.utils.schema_conversion import AvroSchemaConversion

    schema = AvroSchemaConversion().iceberg_to_avro(file_schema, schema_name="iceberg_data")
    seen: set[str] = set()

    def rename(node: Any) -> None:
        if isinstance(node, list):
            for n in node:
                rename(n)
        elif isinstance(node, dict):
            if node.get("type") in ("record", "fixed", "enum") and "name" in node:
                name, i = node["name"], 1
                while node["name"] in seen:
                    i += 1
                    node["name"] = f"{name}_{i}"
                seen.add(node["name"])
            for key in ("type", "items", "values", "fields"):
                if key in node:
                    rename(node[key])

    rename(schema)
    _optional_items(file_schema.as_struct(), schema)
    return dict(schema)  # type: ignore[arg-type]


def _union_value(node: Any) -> Any:
    """The non-null branch of an optional field's union, or the type itself."""
    if isinstance(node, list):
        return next(n for n in node if n != "null")
    return node


def _optional_items(iceberg_type: Any, avro: Any) -> None:
    """Optional list elements and map values as unions with null: pyiceberg 0.12's conversion
    writes them as required (Iceberg Java writes ``["null", T]``, and a null element could not
    be written at all)."""
    from pyiceberg.types import ListType, MapType, StructType

    avro = _union_value(avro)
    if isinstance(iceberg_type, StructType) and isinstance(avro, dict) and avro.get("type") == "record":
        for fld, node in zip(iceberg_type.fields, avro["fields"], strict=True):
            _optional_items(fld.field_type, node["type"])
    elif isinstance(iceberg_type, ListType) and isinstance(avro, dict) and avro.get("type") == "array":
        if not iceberg_type.element_required and not isinstance(avro["items"], list):
            avro["items"] = ["null", avro["items"]]
        _optional_items(iceberg_type.element_type, avro["items"])
    elif isinstance(iceberg_type, MapType) and isinstance(avro, dict):
        if avro.get("type") == "array":  # an array of key/value records
            key, value = avro["items"]["fields"]
        else:  # an Avro map (string keys)
            key, value = {"type": "string"}, {"type": avro["values"]}
        if not iceberg_type.value_required and not isinstance(value["type"], list):
            value["type"] = ["null", value["type"]]
            value["default"] = None
        if avro.get("type") == "map":
            avro["values"] = value["type"]
        _optional_items(iceberg_type.key_type, key["type"])
        _optional_items(iceberg_type.value_type, value["type"])


def codec_of(properties: Mapping[str, str]) -> tuple[str, int | None]:
    codec = str(properties.get("write.avro.compression-codec", "zstd")).lower()
    if codec not in _CODECS:
        from icesql.errors import ExecutionError

        raise ExecutionError(
            f"unknown Avro compression codec '{codec}' (write.avro.compression-codec)",
            hint="use one of " + ", ".join(sorted({"gzip", "zstd", "snappy", "uncompressed"})),
        )
    level = properties.get("write.avro.compression-level")
    return _CODECS[codec], int(level) if level not in (None, "") else None


class AvroWriter(FormatWriter):
    def _open(self, file_schema: Any, arrow_schema: pa.Schema, props: Mapping[str, str], target: int | None) -> None:
        from icesql.engine.iceberg.formats.avro_encode import AvroEncoder

        codec, level = codec_of(props)
        self._encoder = AvroEncoder(self._stream, avro_schema(file_schema), codec=codec, level=level)
        self._stats = ArrowStats(file_schema, props)

    def write(self, table: pa.Table) -> None:
        self._stats.update(table)
        self._encoder.write(table)

    def size(self) -> int:
        return int(self._stream.tell())

    def close(self) -> DataFileStatistics:
        if self._result is not None:
            return self._result
        self._encoder.close()
        return self._done(self._stats.result())


def _arrow_of(writer_schema: Mapping[str, Any]) -> tuple[pa.Schema, list[str]]:
    """The Arrow schema of a file's rows and the Avro name of each top-level column."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow
    from pyiceberg.utils.schema_conversion import AvroSchemaConversion

    iceberg = AvroSchemaConversion().avro_to_iceberg(dict(writer_schema))
    arrow = schema_to_pyarrow(iceberg, include_field_ids=False)
    avro_names = [f["name"] for f in writer_schema["fields"]]
    names = [f.get("iceberg-field-name", f["name"]) for f in writer_schema["fields"]]
    return pa.schema([arrow.field(i).with_name(n) for i, n in enumerate(names)]), avro_names


def _storage(f: pa.Field) -> pa.Field | None:
    if isinstance(f.type, pa.BaseExtensionType):
        return f.with_type(f.type.storage_type)
    return None


def _python(value: Any, t: pa.DataType) -> Any:
    """A value fastavro read, in the form ``pa.array`` takes for ``t`` (maps: key/value records
    become pairs; structs keyed by Avro names are taken in order)."""
    if value is None:
        return None
    if pa.types.is_map(t):
        return [(_python(e["key"], t.key_type), _python(e["value"], t.item_type)) for e in value]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_python(v, t.value_type) for v in value]
    if pa.types.is_struct(t):
        vals = list(value.values())
        return {t.field(i).name: _python(vals[i], t.field(i).type) for i in range(t.num_fields)}
    return value


def _simple(t: pa.DataType) -> bool:
    return not (pa.types.is_map(t) or pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_large_list(t))


class AvroModel(FormatModel):
    name = "avro"
    file_format = FileFormat.AVRO
    field_id_key = b"PARQUET:field_id"  # Arrow-side ids are not Avro's: the schema carries them
    writer = AvroWriter

    def read(self, stream: Any, columns: Sequence[str] | None = None) -> pa.Table:
        import fastavro

        from icesql.engine.iceberg.formats.arrays import convert_schema

        reader = fastavro.reader(stream)
        schema, avro_names = _arrow_of(cast(dict[str, Any], reader.writer_schema))
        wanted = [i for i, f in enumerate(schema) if columns is None or f.name in set(columns)]
        records = cast(list[dict[str, Any]], list(reader))
        arrays = []
        storage = convert_schema(schema, _storage)
        for i in wanted:
            t = storage.field(i).type
            values = [r[avro_names[i]] for r in records]
            if not _simple(t):
                values = [_python(v, t) for v in values]
            arr = pa.array(values, type=t)
            target = schema.field(i).type
            arrays.append(arr if arr.type == target else arr.cast(target))
        out = pa.table(arrays, schema=pa.schema([schema.field(i) for i in wanted]))
        if columns is not None:
            out = out.select([c for c in columns if c in out.column_names])
        return out

    def columns(self, stream: Any) -> list[tuple[str, int | None]]:
        import fastavro

        fields = cast(dict[str, Any], fastavro.reader(stream).writer_schema)["fields"]
        return [(f.get("iceberg-field-name", f["name"]), f.get("field-id")) for f in fields]


__all__ = ["AvroModel", "avro_schema"]
