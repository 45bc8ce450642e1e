"""Executor-side data file writing: data files and delete files for one Iceberg table, in the
table's format (Parquet, ORC or Avro: ``engine.formats``).

Runs inside Spark executors (``mapInArrow``), so what crosses the wire is small and picklable:

* ``WriteSpec`` — a frozen description of the target (schema and partition spec as JSON, the
  table location, FileIO properties, table properties, the file format, the rollover size and a
  write id). Its
  ``io_properties`` may hold credentials: they are excluded from ``repr`` and never logged.
* ``WrittenFile`` — a plain, picklable / JSON-able record of one written file, turned back into
  a pyiceberg ``DataFile`` on the driver with ``to_data_file()``.

``DataFileWriter`` streams Arrow batches: each batch is conformed to the table's Arrow schema,
split by the partition spec, buffered per partition up to a row group's worth of bytes, and
handed to the format's writer (a Parquet row group, ORC rows toward a stripe, Avro blocks); a file
is closed and a new one started when the format writer's size reaches ``max_file_size``. Memory is bounded by (open files × row-group buffer);
at most ``max_open_files`` files are open at once (the least recently used one is finished).
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from decimal import Decimal
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from icesql.engine.base.arrays import repeated, row_numbers
from icesql.errors import ExecutionError
from icesql.plan import DEFAULT_MAXIMUM_FILE_SIZE

Content = Literal["data", "equality_deletes", "position_deletes"]

# Iceberg's reserved field ids of a position-delete file's columns (the spec's file_path, pos)
POSITION_FILE_PATH_ID = 2147483546
POSITION_POS_ID = 2147483545
FILE_PATH = "file_path"
POS = "pos"

ROW_GROUP_BYTES = 128 * 1024 * 1024  # of Arrow data buffered for one row group
BUFFER_BYTES = 256 * 1024 * 1024  # of Arrow data buffered by one writer across its open files
_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH_TS = _dt.datetime(1970, 1, 1)
_EPOCH_TSTZ = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


@dataclass(frozen=True)
class WriteSpec:
    """Everything an executor needs to write files for one table (picklable, credential-safe)."""

    schema_json: str
    partition_spec_json: str
    format_version: int
    location: str  # the table location
    io_properties: Mapping[str, str] = field(default_factory=dict, repr=False)  # may hold credentials
    table_properties: Mapping[str, str] = field(default_factory=dict, repr=False)
    max_file_size: int = DEFAULT_MAXIMUM_FILE_SIZE
    write_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    spec_id: int = 0
    schema_id: int = 0
    file_format: str = "parquet"  # 'parquet' | 'orc' | 'avro' (engine.formats)

    @classmethod
    def from_table(
        cls,
        table: Any,
        *,
        max_file_size: int | None = None,
        io_properties: Mapping[str, str] | None = None,
        write_id: str | None = None,
        file_format: str | None = None,
    ) -> WriteSpec:
        """Describe a pyiceberg ``Table`` (driver side). FileIO properties default to the table's
        own (catalog properties plus vended credentials); ``io_properties`` entries override them.
        ``file_format`` (a sink's FORMAT) defaults to the table's ``write.format.default``."""
        from pyiceberg.table import TableProperties

        from icesql.engine.iceberg import formats

        meta = table.metadata
        props = dict(meta.properties)
        if max_file_size is None:
            max_file_size = int(
                props.get(
                    TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
                    TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT,
                )
            )
        io_props = {k: str(v) for k, v in dict(getattr(table.io, "properties", {}) or {}).items()}
        io_props.update(io_properties or {})
        spec = meta.spec()
        return cls(
            schema_json=meta.schema().model_dump_json(),
            partition_spec_json=spec.model_dump_json(),
            format_version=int(meta.format_version),
            location=meta.location,
            io_properties=io_props,
            table_properties=props,
            max_file_size=int(max_file_size),
            write_id=write_id or uuid.uuid4().hex,
            spec_id=spec.spec_id,
            schema_id=meta.current_schema_id,
            file_format=formats.get(file_format).name if file_format else formats.table_format(props),
        )

    def with_io(self, io_properties: Mapping[str, str] | None) -> WriteSpec:
        """The same spec writing with ``io_properties`` (fresh credentials); itself when they are
        the same."""
        io = dict(io_properties or {})
        return self if io == dict(self.io_properties) else replace(self, io_properties=io)

    def __reduce__(self) -> Any:  # plain dicts in the pickle, whatever Mapping was given
        return (
            _rebuild_spec,
            (
                self.schema_json,
                self.partition_spec_json,
                self.format_version,
                self.location,
                dict(self.io_properties),
                dict(self.table_properties),
                self.max_file_size,
                self.write_id,
                self.spec_id,
                self.schema_id,
                self.file_format,
            ),
        )

    def schema(self) -> Any:
        from pyiceberg.schema import Schema

        return Schema.model_validate_json(self.schema_json)

    def partition_spec(self) -> Any:
        from pyiceberg.partitioning import PartitionSpec

        return PartitionSpec.model_validate_json(self.partition_spec_json)


def _rebuild_spec(*args: Any) -> WriteSpec:
    return WriteSpec(*args)


# --------------------------------------------------------------------------- written files


def _enc(v: Any) -> Any:
    if isinstance(v, bytes):
        return {"$b": base64.b64encode(v).decode()}
    if isinstance(v, Decimal):
        return {"$d": str(v)}
    if isinstance(v, uuid.UUID):
        return {"$u": str(v)}
    return v


def _dec(v: Any) -> Any:
    if isinstance(v, dict):
        if "$b" in v:
            return base64.b64decode(v["$b"])
        if "$d" in v:
            return Decimal(v["$d"])
        if "$u" in v:
            return uuid.UUID(v["$u"])
    return v


@dataclass(frozen=True)
class WrittenFile:
    """One file written for a table: a picklable, JSON-able stand-in for a ``DataFile``."""

    content: int  # 0 data, 1 position deletes, 2 equality deletes (pyiceberg DataFileContent)
    file_path: str
    record_count: int
    file_size_in_bytes: int
    partition: tuple[Any, ...] = ()  # partition values, Iceberg internal representation
    spec_id: int = 0
    column_sizes: dict[int, int] = field(default_factory=dict)
    value_counts: dict[int, int] = field(default_factory=dict)
    null_value_counts: dict[int, int] = field(default_factory=dict)
    nan_value_counts: dict[int, int] = field(default_factory=dict)
    lower_bounds: dict[int, bytes] = field(default_factory=dict)
    upper_bounds: dict[int, bytes] = field(default_factory=dict)
    split_offsets: tuple[int, ...] | None = None
    equality_ids: tuple[int, ...] | None = None
    file_format: str = "PARQUET"

    @property
    def is_delete(self) -> bool:
        return self.content != 0

    def to_data_file(self, format_version: int = 2) -> Any:
        """The pyiceberg ``DataFile`` (driver side)."""
        from pyiceberg.manifest import DataFileContent, FileFormat
        from pyiceberg.typedef import Record

        from icesql.engine.base.pyiceberg_internals import new_data_file

        df = new_data_file(
            format_version,
            content=DataFileContent(self.content),
            file_path=self.file_path,
            file_format=FileFormat(self.file_format),
            partition=Record(*self.partition),
            record_count=self.record_count,
            file_size_in_bytes=self.file_size_in_bytes,
            column_sizes=dict(self.column_sizes),
            value_counts=dict(self.value_counts),
            null_value_counts=dict(self.null_value_counts),
            nan_value_counts=dict(self.nan_value_counts),
            lower_bounds=dict(self.lower_bounds),
            upper_bounds=dict(self.upper_bounds),
            split_offsets=list(self.split_offsets) if self.split_offsets is not None else None,
            equality_ids=list(self.equality_ids) if self.equality_ids is not None else None,
            key_metadata=None,
            sort_order_id=None,
        )
        df.spec_id = self.spec_id
        return df

    @classmethod
    def from_data_file(cls, df: Any) -> WrittenFile:
        from icesql.engine.base.pyiceberg_internals import partition_values

        return cls(
            content=int(df.content),
            file_path=df.file_path,
            record_count=df.record_count,
            file_size_in_bytes=df.file_size_in_bytes,
            partition=partition_values(df),
            spec_id=getattr(df, "spec_id", 0),
            column_sizes=dict(df.column_sizes or {}),
            value_counts=dict(df.value_counts or {}),
            null_value_counts=dict(df.null_value_counts or {}),
            nan_value_counts=dict(df.nan_value_counts or {}),
            lower_bounds=dict(df.lower_bounds or {}),
            upper_bounds=dict(df.upper_bounds or {}),
            split_offsets=tuple(df.split_offsets) if df.split_offsets is not None else None,
            equality_ids=tuple(df.equality_ids) if df.equality_ids is not None else None,
            file_format=str(df.file_format.value if hasattr(df.file_format, "value") else df.file_format),
        )

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for k in (
            "column_sizes",
            "value_counts",
            "null_value_counts",
            "nan_value_counts",
            "lower_bounds",
            "upper_bounds",
        ):
            d[k] = {str(i): _enc(v) for i, v in d[k].items()}
        d["partition"] = [_enc(v) for v in self.partition]
        d["split_offsets"] = list(self.split_offsets) if self.split_offsets is not None else None
        d["equality_ids"] = list(self.equality_ids) if self.equality_ids is not None else None
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> WrittenFile:
        kw = dict(d)
        for k in (
            "column_sizes",
            "value_counts",
            "null_value_counts",
            "nan_value_counts",
            "lower_bounds",
            "upper_bounds",
        ):
            kw[k] = {int(i): _dec(v) for i, v in (kw.get(k) or {}).items()}
        kw["partition"] = tuple(_dec(v) for v in kw.get("partition") or ())
        if kw.get("split_offsets") is not None:
            kw["split_offsets"] = tuple(kw["split_offsets"])
        if kw.get("equality_ids") is not None:
            kw["equality_ids"] = tuple(kw["equality_ids"])
        return cls(**kw)

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def loads(cls, text: str) -> WrittenFile:
        return cls.from_json(json.loads(text))


# --------------------------------------------------------------------------- partition values


def _internal(value: Any) -> Any:
    """A partition value (from ``as_py()``) in Iceberg's internal representation."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            delta = value - _EPOCH_TSTZ
        else:
            delta = value - _EPOCH_TS
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, _dt.date):
        return (value - _EPOCH_DATE).days
    if isinstance(value, _dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    return value


class _PartitionPath:
    """Duck-typed ``PartitionKey`` for pyiceberg's location providers."""

    def __init__(self, path: str) -> None:
        self._path = path

    def to_path(self) -> str:
        return self._path


# --------------------------------------------------------------------------- the writer


class _OpenFile:
    def __init__(self, path: str, stream: Any, writer: Any, partition: tuple[Any, ...]) -> None:
        self.path = path
        self.stream = stream
        self.writer = writer
        self.partition = partition
        self.rows = 0
        self.arrow_bytes = 0
        self.start = self.tell()
        self.pending: list[pa.Table] = []
        self.pending_bytes = 0

    def tell(self) -> int:
        """The file's size if it were closed now (the format writer's estimate)."""
        try:
            return int(self.writer.size())
        except Exception:  # pragma: no cover - streams without tell
            return self.arrow_bytes

    def ratio(self) -> float:
        """Bytes on disk per Arrow byte so far (1.0 before the first row group)."""
        if self.arrow_bytes == 0:
            return 1.0
        return max(0.01, (self.tell() - self.start) / self.arrow_bytes)


class DataFileWriter:
    """Stream Arrow batches into data files (or delete files) of one table, in ``spec``'s format.

    ``content='equality_deletes'`` writes only the ``equality_ids`` columns (the KEY), taken by
    name from the batches (extra columns are ignored); each delete file carries the partition of
    the keys it deletes, so every partition source column must be among the equality columns.

    ``content='position_deletes'`` writes ``file_path`` and ``pos`` (Iceberg's reserved columns);
    the batches also carry the partition source columns of the rows they delete (taken by name, as
    the table schema names them), which give each delete file the partition of its data files.
    Rows must come sorted by (file_path, pos), as the spec asks of a position-delete file.

    ``track`` (data files): record, for every row written, these columns with the file and the
    position the row got (``positions()``): what the upsert key index needs.

    ``lineage`` (a v3 rewrite's data files): they also hold the given ``iceberg.lineage`` columns.
    """

    def __init__(
        self,
        spec: WriteSpec,
        content: Content = "data",
        equality_ids: Sequence[int] | None = None,
        *,
        max_open_files: int = 16,
        row_group_bytes: int | None = None,
        buffer_bytes: int = BUFFER_BYTES,
        track: Sequence[str] | None = None,
        lineage: bool = False,
    ) -> None:
        from pyiceberg.schema import Schema
        from pyiceberg.table import TableProperties
        from pyiceberg.table.locations import load_location_provider

        from icesql.engine.connections import stores
        from icesql.engine.iceberg import formats
        from icesql.engine.iceberg.schema import arrow_schema

        if content not in ("data", "equality_deletes", "position_deletes"):
            raise ValueError(f"unknown content {content!r}")
        self.spec = spec
        self.content = content
        self._table_schema = spec.schema()
        self._partition_spec = spec.partition_spec()
        if content == "equality_deletes":
            if not equality_ids:
                raise ExecutionError("an equality-delete writer needs the equality (KEY) field ids")
            self.equality_ids: tuple[int, ...] | None = tuple(int(i) for i in equality_ids)
            fields = [self._table_schema.find_field(i) for i in self.equality_ids]
            self._file_schema = Schema(*fields, schema_id=self._table_schema.schema_id)
            for pf in self._partition_spec.fields:
                if pf.source_id not in self.equality_ids:
                    col = self._table_schema.find_column_name(pf.source_id)
                    raise ExecutionError(
                        f"partition column '{col}' must be part of the KEY to write equality deletes",
                    )
        elif content == "position_deletes":
            from pyiceberg.types import LongType, NestedField, StringType

            self.equality_ids = None
            self._file_schema = Schema(
                NestedField(POSITION_FILE_PATH_ID, FILE_PATH, StringType(), required=True),
                NestedField(POSITION_POS_ID, POS, LongType(), required=True),
            )
        else:
            self.equality_ids = None
            self._file_schema = self._table_schema
            if lineage:
                from icesql.engine.iceberg.lineage import with_lineage

                self._file_schema = with_lineage(self._table_schema)
        # the schema the partition source columns are found in (the rows', not always the file's)
        self._source_schema = self._table_schema if content == "position_deletes" else self._file_schema
        self._arrow_schema = arrow_schema(self._file_schema)
        if content == "position_deletes":
            # readers of position deletes (iceberg-rust) want file_path as a plain string column
            path = self._arrow_schema.field(FILE_PATH)
            self._arrow_schema = self._arrow_schema.set(0, path.with_type(pa.string()))
        self._track = list(track or ())
        self._positions: list[pa.Table] = []
        self._io = stores.load_file_io(dict(spec.io_properties), spec.location)
        self._locations = load_location_provider(spec.location, dict(spec.table_properties))
        props = dict(spec.table_properties)
        self._format = formats.get(spec.file_format)
        self._row_group_rows = int(
            props.get(
                TableProperties.PARQUET_ROW_GROUP_LIMIT, TableProperties.PARQUET_ROW_GROUP_LIMIT_DEFAULT
            )
        )
        self.max_file_size = max(1024, int(spec.max_file_size))
        if row_group_bytes is None:
            # big row groups write fast (a 16 MiB group of Arrow wrote 4M rows 1.6x slower than a
            # 128 MiB one); Iceberg Java's default is 128 MiB (``write.parquet.row-group-size-bytes``)
            row_group_bytes = min(ROW_GROUP_BYTES, max(64 * 1024, self.max_file_size // 4))
        # what all open files may hold unwritten together: many partitions flush smaller groups
        self._buffer_budget = max(1, buffer_bytes)
        self._row_group_bytes = min(row_group_bytes, self._buffer_budget)
        self._max_open = max(1, max_open_files)
        self._open: OrderedDict[tuple[Any, ...], _OpenFile] = OrderedDict()
        self._done: list[WrittenFile] = []
        self._counter = 0
        self._tag = uuid.uuid4().hex[:12]  # distinct per writer: Spark task retries never collide
        self._closed = False
        self._partition_columns = self._partition_functions()

    # ----------------------------------------------------------------- partitioning

    def _partition_functions(self) -> list[tuple[str, Any]]:
        out = []
        for pf in self._partition_spec.fields:
            source = self._source_schema.find_field(pf.source_id)
            out.append((source.name, pf.transform.pyarrow_transform(source.field_type)))
        return out

    def _split(self, table: pa.Table) -> list[tuple[tuple[Any, ...], pa.Table]]:
        if not self._partition_columns:
            return [((), table)]
        names = [f"_p{i}" for i in range(len(self._partition_columns))]
        arrays = []
        for name, fn in self._partition_columns:
            arrays.append(fn(table.column(name)))
        keys = pa.table(dict(zip(names, arrays, strict=True)))
        if keys.num_rows == 0:
            return []
        keys = keys.append_column("_row", row_numbers(table.num_rows))
        grouped = keys.group_by(names, use_threads=False).aggregate([("_row", "list")])
        out = []
        key_lists = [grouped.column(n).to_pylist() for n in names]
        rows = grouped.column("_row_list")
        for g in range(grouped.num_rows):
            key = tuple(_internal(k[g]) for k in key_lists)
            out.append((key, table.take(rows[g].values)))
        return out

    # ----------------------------------------------------------------- files

    def _new_file(self, key: tuple[Any, ...]) -> _OpenFile:
        from pyiceberg.typedef import Record

        self._counter += 1
        suffix = {"equality_deletes": "-deletes", "position_deletes": "-pos-deletes"}.get(self.content, "")
        name = f"{self.spec.write_id}-{self._tag}-{self._counter:05d}{suffix}.{self._format.file_extension()}"
        pkey = None
        if self._partition_columns:
            pkey = _PartitionPath(self._partition_spec.partition_to_path(Record(*key), self._file_schema))
        path = self._locations.new_data_location(data_file_name=name, partition_key=pkey)  # type: ignore[arg-type]
        stream = self._io.new_output(path).create(overwrite=True)
        try:
            writer = self._format.open_writer(
                stream,
                self._file_schema,
                self._arrow_schema,
                dict(self.spec.table_properties),
                target_size=self.max_file_size,
            )
        except Exception:
            stream.close()
            raise
        return _OpenFile(path, stream, writer, key)

    def _file_for(self, key: tuple[Any, ...]) -> _OpenFile:
        f = self._open.get(key)
        if f is not None:
            self._open.move_to_end(key)
            return f
        while len(self._open) >= self._max_open:
            _, old = self._open.popitem(last=False)
            self._finish(old)
        f = self._new_file(key)
        self._open[key] = f
        return f

    def _flush(self, key: tuple[Any, ...], f: _OpenFile) -> None:
        """Write the buffered rows of ``f``, rolling to new files at ``max_file_size``."""
        if not f.pending:
            return
        data = pa.concat_tables(f.pending) if len(f.pending) > 1 else f.pending[0]
        f.pending, f.pending_bytes = [], 0
        offset, n = 0, data.num_rows
        while offset < n:
            written = f.tell()
            budget = self.max_file_size - written
            if f.rows > 0 and budget <= self.max_file_size // 50:
                self._roll(key, f)
                f = self._open[key]
                continue
            rest = data.slice(offset)
            per_row = max(1e-3, rest.nbytes / rest.num_rows * f.ratio())
            rows = int(budget / per_row) if budget > 0 else 1
            rows = max(1, min(rows, n - offset, self._row_group_rows))
            chunk = data.slice(offset, rows)
            f.writer.write(chunk)
            if self._track:
                self._positions.append(
                    pa.table(
                        {
                            **{c: chunk.column(c) for c in self._track},
                            "__path": repeated(f.path, rows, pa.string()),
                            "__pos": row_numbers(rows, f.rows),
                        }
                    )
                )
            f.rows += rows
            f.arrow_bytes += chunk.nbytes
            offset += rows
            if f.tell() >= self.max_file_size - self.max_file_size // 50:
                self._roll(key, f)
                f = self._open[key]

    def _roll(self, key: tuple[Any, ...], f: _OpenFile) -> None:
        self._open.pop(key, None)
        self._finish(f)
        self._open[key] = self._new_file(key)

    def _finish(self, f: _OpenFile) -> None:
        if f.pending:
            key = f.partition
            self._open[key] = f
            self._flush(key, f)
            f = self._open.pop(key)
        stats = f.writer.close()
        size = int(f.stream.tell())
        f.stream.close()
        if f.rows == 0:
            try:
                self._io.delete(f.path)
            except Exception:
                pass
            return
        s = stats.to_serialized_dict()
        self._done.append(
            WrittenFile(
                content={"data": 0, "position_deletes": 1, "equality_deletes": 2}[self.content],
                file_path=f.path,
                record_count=int(s.get("record_count", f.rows)),
                file_size_in_bytes=int(size),
                partition=f.partition,
                spec_id=self.spec.spec_id,
                column_sizes=dict(s.get("column_sizes") or {}),
                value_counts=dict(s.get("value_counts") or {}),
                null_value_counts=dict(s.get("null_value_counts") or {}),
                nan_value_counts=dict(s.get("nan_value_counts") or {}),
                lower_bounds=dict(s.get("lower_bounds") or {}),
                upper_bounds=dict(s.get("upper_bounds") or {}),
                split_offsets=tuple(s["split_offsets"]) if s.get("split_offsets") else None,
                equality_ids=self.equality_ids,
                file_format=self._format.file_format.value,
            )
        )

    # ----------------------------------------------------------------- public

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Add rows (any column order; columns matched by name to the table's)."""
        from icesql.engine.iceberg.schema import to_table_batch

        if self._closed:
            raise ExecutionError("write after close")
        if batch.num_rows == 0:
            return
        raw = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        if self.content == "position_deletes":
            # the partition comes from the deleted rows' columns, which the file does not keep
            parts = [(key, to_table_batch(part, self._arrow_schema)) for key, part in self._split(raw)]
        else:
            parts = self._split(to_table_batch(raw, self._arrow_schema))
        for key, part in parts:
            f = self._file_for(key)
            f.pending.append(part)
            f.pending_bytes += part.nbytes
            if f.pending_bytes >= self._row_group_bytes:
                self._flush(key, f)
        while sum(f.pending_bytes for f in self._open.values()) > self._buffer_budget:
            key, f = max(self._open.items(), key=lambda kv: kv[1].pending_bytes)  # the fullest first
            self._flush(key, f)

    def close(self) -> list[WrittenFile]:
        """Finish every open file and return all files written (empty files are not kept)."""
        if not self._closed:
            self._closed = True
            while self._open:
                _, f = self._open.popitem(last=False)
                self._finish(f)
        return list(self._done)

    def abort(self) -> None:
        """Stop writing and delete what this writer wrote."""
        self._closed = True
        paths = [d.file_path for d in self._done]
        for f in self._open.values():
            try:
                f.writer.close()
                f.stream.close()
            except Exception:
                pass
            paths.append(f.path)
        self._open.clear()
        self._done.clear()
        self._positions.clear()
        for p in paths:
            try:
                self._io.delete(p)
            except Exception:
                pass

    def positions(self) -> pa.Table:
        """The tracked columns of every row written, with ``__path`` and ``__pos`` (after
        ``close``; see ``track``)."""
        if not self._positions:
            fields = [self._arrow_schema.field(c) for c in self._track]
            return pa.schema([*fields, ("__path", pa.string()), ("__pos", pa.int64())]).empty_table()
        return pa.concat_tables(self._positions)

    def __enter__(self) -> DataFileWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_batches(
    spec: WriteSpec,
    batches: Any,
    content: Content = "data",
    equality_ids: Sequence[int] | None = None,
) -> list[WrittenFile]:
    """Convenience: write an iterable of batches and return the files."""
    w = DataFileWriter(spec, content, equality_ids)
    try:
        for b in batches:
            w.write(b)
    except BaseException:
        w.abort()
        raise
    return w.close()


def dedupe_last(table: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """Keep the last row per key (input order), e.g. to apply "last change wins" in one batch."""
    if table.num_rows == 0:
        return table
    t = table.select(list(key_columns)).append_column("__i", row_numbers(table.num_rows))
    last = t.group_by(list(key_columns), use_threads=False).aggregate([("__i", "max")]).column("__i_max")
    return table.take(last.take(pc.sort_indices(last)))  # kept rows in input order


__all__ = ["Content", "DataFileWriter", "WriteSpec", "WrittenFile", "dedupe_last", "write_batches"]
