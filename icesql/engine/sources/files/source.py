"""``icesql_files``: the Spark streaming data source of the Arrow path (a Python data source).

Spark keeps the query's offsets (``{"seq": N}``: the first N files of the source's file log) in
its checkpoint, asks for the latest offset once per trigger and plans each micro-batch as one
task per piece of work; icesql lists the files (``listing``), admits new ones to the durable file
log (``log``) before returning an offset that covers them, and plans the pieces (``pieces``).
The rows of the DataFrame describe pieces, never data: the sink's task reads them
(``task``) on the executors.

Options (all strings; Spark redacts the values of options named like ``secret``, ``token`` or
``access.key`` in plans and logs, and the FileIO properties are named so):

* ``path``, ``format`` (the source's), ``log`` (the file log's directory, in the checkpoint);
* ``io.<property>``: FileIO properties of the source's filesystem (``io.s3.endpoint``, ...);
* ``piece_bytes``, ``parallelism``: the largest piece, and the cores to keep busy (as Spark
  sizes file splits: ``min(piece_bytes, max(4 MiB, batch bytes / parallelism))``);
* ``max_files`` / ``max_bytes``: at most this much per trigger (the first file always fits);
* ``clean_source`` ('archive' with ``archive_directory``, or 'delete'): what becomes of the files
  of committed batches (``clean``): up to the offset each trigger starts from (Spark's committed
  offset, a restart's first trigger included).

Trigger.AvailableNow is supported (``once``): the files listed when the query starts are read,
in as many micro-batches as the limits make, then the query ends.

Spark runs the reader's offsets and planning in a Python process of its own, started with each
query (``pyspark.sql.streaming.python_streaming_source_runner``). There the reader tells pyarrow
that pandas is absent (``runner_without_pandas``): pyarrow imports pandas the first time it
converts Python objects or reads Parquet, only to recognise pandas objects it might be handed,
which the runner never does; that import was 0.15-0.5 s between a query's start and its first
batch.
"""

from __future__ import annotations

import importlib.abc
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructField, StructType

from icesql.engine.connections.stores.location import Location
from icesql.engine.sources.files.clean import Cleaner, clean_through
from icesql.engine.sources.files.log import FileLog
from icesql.engine.sources.files.pieces import (
    DEFAULT_PIECE_BYTES,
    SMALL_FILE_COST,
    FileEntry,
    Piece,
    Work,
    balance,
    group,
    split_parquet,
    split_text,
)

NAME = "icesql_files"
PIECE_SCHEMA = StructType(  # built here: a DDL string costs a parse by the JVM
    [
        StructField("seq", LongType()),
        StructField("path", StringType()),
        StructField("size", LongType()),
        StructField("mtime_ms", LongType()),
        StructField("start", LongType()),
        StructField("end", LongType()),
        StructField("row_groups", ArrayType(IntegerType())),
    ]
)
IO_PREFIX = "io."

log = logging.getLogger("icesql.sources")

RUNNER_MODULE = "pyspark.sql.streaming.python_streaming_source_runner"


class _NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas":
            raise ImportError("pandas is not used by the streaming source's runner")
        return None


def runner_without_pandas() -> bool:
    """In Spark's streaming source runner (the process ``python -m RUNNER_MODULE``) and before
    anything imported pandas: let pyarrow's one optional look for pandas find none, so that it
    never imports it in this process (see the module docstring). Whatever asks pyarrow for
    pandas outright (``to_pandas``) still gets it: pyarrow imports it then. True when done."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if getattr(spec, "name", None) != RUNNER_MODULE or "pandas" in sys.modules:
        return False
    import pyarrow as pa

    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])  # pyarrow's optional look for pandas: done once per process
    finally:
        sys.meta_path.remove(finder)
    return True


def io_options(io_properties: dict[str, str]) -> dict[str, str]:
    return {f"{IO_PREFIX}{k}": v for k, v in io_properties.items()}


def io_from_options(options: Any) -> dict[str, str]:
    return {k[len(IO_PREFIX) :]: v for k, v in dict(options).items() if k.startswith(IO_PREFIX)}


class WorkPartition(InputPartition):
    """One task's pieces (picklable)."""

    def __init__(self, work: Work) -> None:
        super().__init__(work)
        self.work = work


def plan_pieces(entries: Sequence[FileEntry], fmt: str, location: Location, piece_bytes: int) -> list[Piece]:
    """Split big files (Parquet by row groups, text by byte ranges; ORC files whole)."""
    out: list[Piece] = []
    for e in entries:
        if fmt == "parquet":
            if e.size > piece_bytes:
                import pyarrow.parquet as pq

                with location.open_input(e.path) as f:
                    md = pq.read_metadata(f)
                sizes = [md.row_group(i).total_byte_size for i in range(md.num_row_groups)]
                out.extend(split_parquet(e, sizes, piece_bytes))
            else:
                out.append(Piece(e.seq, e.path, e.size, e.mtime_ms))
        elif fmt == "orc":
            out.append(Piece(e.seq, e.path, e.size, e.mtime_ms))  # whole: an ORC file is read by stripes
        else:
            out.extend(split_text(e, piece_bytes))
    return out


class FilesStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        runner_without_pandas()
        self.options = options
        self.path = options["path"]
        self.format = options["format"]
        io = io_from_options(options)
        self.location = Location(self.path, io)
        self.log = FileLog(options["log"], io)  # opens nothing until used
        self.piece_bytes = int(options.get("piece_bytes") or DEFAULT_PIECE_BYTES)
        self.parallelism = int(options.get("parallelism") or 2)
        self.max_files = int(options["max_files"]) if options.get("max_files") else None
        self.max_bytes = int(options["max_bytes"]) if options.get("max_bytes") else None
        self.cleaner = Cleaner.from_options(options)
        self._cleaned: int | None = None  # how far CLEAN SOURCE got (read from the log once)
        self._target: int | None = None
        self._dir_mtime: int | None = None

    # Spark pickles the reader to run ``read`` on the executors: the log (a lock, a SQLite
    # connection) stays with the driver's copy.
    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    # ----------------------------------------------------------------- discovery

    def _discover(self) -> None:
        """Admit the files that appeared since the last listing."""
        if self._unchanged_local_directory():
            return
        listed = self.location.list()
        new = self.log.unseen(listed)
        if new:
            self.log.append(new)
            self.log.compact()

    def _unchanged_local_directory(self) -> bool:
        """A local directory whose mtime has not moved has no new entry: no listing needed."""
        if self.location.fs.type_name != "local" or self.location.pattern is not None:
            return False
        try:
            import os

            mtime = os.stat(self.location.fs_path(self.location.directory)).st_mtime_ns
        except OSError:
            return False
        # an mtime within the last 2 s may move again within the same clock tick: list anyway
        if self._dir_mtime == mtime and time.time_ns() - mtime > 2_000_000_000:
            return True
        self._dir_mtime = mtime
        return False

    # ----------------------------------------------------------------- offsets

    def initialOffset(self) -> dict[str, int]:
        return {"seq": self.log.seed()}

    def prepareForTriggerAvailableNow(self) -> None:
        self._discover()
        self._target = self.log.high()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_files:
            return ReadMaxFiles(self.max_files)
        if self.max_bytes:
            return ReadMaxBytes(self.max_bytes)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        if self._target is None:
            self._discover()
        high = self.log.high() if self._target is None else self._target
        begin = int(start["seq"])
        self._clean(begin)  # a trigger starts from committed offsets (a restart's first one too)
        if high <= begin:
            return {"seq": begin}
        if isinstance(limit, ReadMaxFiles):
            return {"seq": min(high, begin + max(1, limit.max_files))}
        if isinstance(limit, ReadMaxBytes):
            total, end = 0, begin
            for e in self.log.entries(begin, high):
                if end > begin and total + e.size > limit.max_bytes:
                    break
                total += e.size
                end = e.seq
            return {"seq": end}
        return {"seq": high}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        entries = self.log.entries(int(start["seq"]), int(end["seq"]))
        # Spark's own split size: no bigger than a piece, small enough that every core works
        total = sum(max(e.size, SMALL_FILE_COST) for e in entries)
        split = min(self.piece_bytes, max(SMALL_FILE_COST, total // max(1, self.parallelism)))
        pieces = plan_pieces(entries, self.format, self.location, split)
        return [WorkPartition(w) for w in balance(group(pieces, split), self.parallelism)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        work: Work = partition.work  # type: ignore[attr-defined]
        for p in work.pieces:
            rg = list(p.row_groups) if p.row_groups is not None else None
            yield (p.seq, p.path, p.size, p.mtime_ms, p.start, p.end, rg)

    def commit(self, end: dict[str, int]) -> None:
        # Spark calls this as it plans the batch after ``end``, having just asked ``latestOffset``
        # from ``end``: CLEAN SOURCE has taken those files there already.
        pass

    def _clean(self, through: int) -> None:
        if self.cleaner is None:
            return
        if self._cleaned is None:
            self._cleaned = self.log.cleaned_through()
        if through > self._cleaned:
            self._cleaned = clean_through(self.log, self.location, self.cleaner, through, self._cleaned)

    def stop(self) -> None:
        self.log.close()


class FilesDataSource(DataSource):
    """Registered as ``icesql_files`` (``register(spark)``)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return PIECE_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return FilesStreamReader(dict(self.options))


def register(spark: Any) -> None:
    """Register the data source with ``spark`` (once per session)."""
    from icesql.engine.backends.spark.session import register_data_source

    register_data_source(spark, FilesDataSource)


__all__ = ["NAME", "PIECE_SCHEMA", "FilesDataSource", "io_options", "plan_pieces", "register"]
