"""The pieces path: how every source kind that plans its batches as pieces of work is read and written.

A source kind on this path hands the sink a frame with one row per piece (FILES: byte ranges and
row-group runs of files, ``files.source``; KAFKA: offset ranges of partitions, ``kafka.source``) and
a ``PieceSource``: what the tasks need to read its pieces (picklable; it travels to the executors).
The rest is here, once for every kind:

* ``WriteTask`` - the ``mapInArrow`` body of an append: pieces in, decoded and written by
  ``writer.DataFileWriter`` in the same task, one row per written file out (plus the ``CONSUMED``
  rows of a kind that tracks the files it read);
* ``DecodeTask`` - the body for changelogs and upserts: pieces in, decoded rows out, which the
  sink's batch writer then reduces per KEY across the batch and writes, as on Spark's path;
* ``PiecesBatchWriter`` - one micro-batch of pieces -> files: appends write in the tasks that
  read, changelogs decode there and go through the sink's writer (``inner``);
* one fallback protocol: a piece Arrow cannot read exactly as Spark would fails its task with a
  marked error naming the piece (``FALLBACK_MARKER``); the batch then runs again with that piece
  read by Spark's own reader of the kind (``PieceSource.read_by_spark``), and a ``FALLBACK`` row
  counts them. In this process (no Spark) such a piece restarts the sink on Spark instead
  (``PieceSource.needs_spark``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from icesql.engine.base.changelog import BLK, FILE, LINE, OP, SEQ
from icesql.engine.base.hooks import kill_point
from icesql.engine.base.wire import (
    FALLBACK,
    file_row,
    files_batch,
    files_spark_schema,
    marked_message,
    releases_task_memory,
)
from icesql.engine.sources.types import Fallback

FALLBACK_MARKER = "ICESQL-FALLBACK:"


class PieceSource(Protocol):
    """What a source kind on the pieces path gives its tasks and its batch writer."""

    @property
    def changelog(self) -> bool: ...  # its rows carry the changelog columns

    @property
    def row_schema_json(self) -> Any: ...  # the relation's data columns, as Spark's schema JSON

    def pieces(self, batches: Iterator[Any]) -> Iterator[Any]:
        """The pieces in a task's input (Arrow batches of piece rows)."""
        ...

    def decode(self, piece: Any) -> Iterator[Any]:
        """A piece's rows as Arrow batches; raises ``types.Fallback`` where Arrow is not sure."""
        ...

    def piece_key(self, piece: Any) -> Any:
        """What names a piece in a fallback (JSON-able; lists come back as tuples)."""
        ...

    def consumed(self, piece: Any) -> dict[str, Any] | None:
        """The ``CONSUMED`` row of a piece's file, for a kind that tracks the files it read."""
        ...

    def consumed_rows(self, pieces: Any, keys: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        """The ``CONSUMED`` rows of a frame of pieces, or of those ``keys`` name (none for a kind
        that tracks no files)."""
        ...

    def without(self, pieces: Any, keys: Sequence[Any]) -> Any:
        """The frame of pieces less the pieces ``keys`` name."""
        ...

    def read_by_spark(self, pieces: Any, keys: Sequence[Any], skipped: Any, letters: Any) -> Any:
        """The pieces ``keys`` name, read by Spark's own reader of the kind (ON ERROR applies)."""
        ...

    def needs_spark(self, key: Any) -> str:
        """Why a batch that meets this piece in this process restarts on Spark (one line)."""
        ...


def fallback_error(key: Any, why: str) -> ValueError:
    """The marked error a task raises for a piece Arrow cannot read exactly as Spark would."""
    return ValueError(f"{FALLBACK_MARKER}{json.dumps({'piece': key, 'why': why[:300]})}|END")


def fallback_of(exc: BaseException) -> Any:
    """The key of the piece a failed task could not read (None: another failure)."""
    body = marked_message(exc, FALLBACK_MARKER)
    if body is None:
        return None
    try:
        key = json.loads(body)["piece"]
    except (ValueError, KeyError, TypeError):
        return None
    return tuple(key) if isinstance(key, list) else key


def needs_spark_of(source: PieceSource) -> Callable[[BaseException], str | None]:
    """For a frame of pieces in this process: why a task's failure needs Spark (None: it does not)."""

    def needs_spark(exc: BaseException) -> str | None:
        key = fallback_of(exc)
        return None if key is None else source.needs_spark(key)

    return needs_spark


def _decoded(source: PieceSource, piece: Any) -> Iterator[Any]:
    try:
        yield from source.decode(piece)
    except Fallback as e:
        raise fallback_error(source.piece_key(piece), str(e)) from None


class DecodeTask:
    """``mapInArrow`` body: pieces in, the relation's rows (and changelog columns) out (picklable)."""

    def __init__(self, source: PieceSource) -> None:
        self.source = source

    @releases_task_memory
    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        for piece in self.source.pieces(batches):
            yield from _decoded(self.source, piece)


class WriteTask:
    """``mapInArrow`` body: pieces in, one row per written file (and per file read) out."""

    def __init__(self, source: PieceSource, spec: Any, batch_id: int) -> None:
        self.source = source
        self.spec = spec
        self.batch_id = batch_id

    @releases_task_memory
    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        from icesql.engine.iceberg.writer import DataFileWriter

        writer = DataFileWriter(self.spec, "data")
        consumed: dict[str, dict[str, Any]] = {}
        first = True
        try:
            for piece in self.source.pieces(batches):
                for b in _decoded(self.source, piece):
                    if b.num_rows:
                        writer.write(b)
                        if first:
                            first = False
                            kill_point("write", self.batch_id)
                row = self.source.consumed(piece)
                if row is not None:
                    consumed[row["file"]] = row
            files = writer.close()
        except BaseException:
            writer.abort()
            raise
        rows = [file_row(f) for f in files] + list(consumed.values())
        if rows:
            yield files_batch(rows)


def with_fallbacks(
    attempt: Callable[[list[Any]], list[dict[str, Any]]], fallback_of: Callable[[BaseException], Any]
) -> tuple[list[dict[str, Any]], list[Any]]:
    """Run ``attempt(fallback)`` until it succeeds: each failure that names a piece of work the
    Arrow path cannot read exactly (``fallback_of``) adds that piece to ``fallback`` for Spark's
    readers and runs the batch again; any other failure, or a piece named twice, is raised.
    Returns (rows, fallback)."""
    fallback: list[Any] = []
    while True:
        try:
            return attempt(fallback), fallback
        except Exception as e:
            piece = fallback_of(e)
            if piece is None or piece in fallback:
                raise
            fallback.append(piece)


def changes_schema(source: PieceSource) -> Any:
    """The Spark schema of the rows ``DecodeTask`` yields: the relation's, plus the changelog's."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    row = StructType.fromJson(dict(source.row_schema_json))
    if not source.changelog:
        return row
    extra = [
        (OP, StringType()),
        (SEQ, LongType()),
        (FILE, StringType()),
        (BLK, LongType()),
        (LINE, LongType()),
    ]
    return StructType([*row.fields, *(StructField(n, t) for n, t in extra)])


class PiecesBatchWriter:
    """One micro-batch of pieces -> files; returns the rows of ``inner`` (the sink's batch writer,
    ``sink.batch.BatchWriter``), the ``CONSUMED`` rows of a kind that tracks its files and a
    ``FALLBACK`` row counting the pieces Spark's reader had to take. Picklable (Spark Connect runs
    it on the server)."""

    def __init__(self, inner: Any, source: PieceSource, *, skipped: Any = None, letters: Any = None) -> None:
        self.inner = inner  # the upsert reduction and writer, and the writer of fallback pieces
        self.arrow = source
        self.skipped = skipped  # the accumulator of skipped bad records (Spark's reader only)
        self.letters = letters  # the accumulator of dead letters (Spark's reader only)

    def use_io(self, io_properties: Any) -> None:
        self.inner.use_io(io_properties)

    def __call__(self, batch_df: Any, batch_id: int) -> list[dict[str, Any]]:
        source = self.arrow

        def attempt(fallback: list[Any]) -> list[dict[str, Any]]:
            pieces = batch_df if not fallback else source.without(batch_df, fallback)
            if source.changelog or self.inner.upsert:
                # an upsert reduces per KEY across the batch: the sink's writer takes the decoded rows
                changes = pieces.mapInArrow(DecodeTask(source), changes_schema(source))
                if fallback:
                    changes = changes.unionByName(self._by_spark(batch_df, fallback))
                return self.inner(changes, batch_id) + source.consumed_rows(pieces)
            task = WriteTask(source, self.inner.spec, batch_id)
            rows = [r.asDict() for r in pieces.mapInArrow(task, files_spark_schema()).collect()]
            if fallback:
                rows += self.inner(self._by_spark(batch_df, fallback), batch_id)
            return rows

        rows, fallback = with_fallbacks(attempt, fallback_of)
        if fallback:
            rows += source.consumed_rows(batch_df, fallback)
            rows.append({"content": FALLBACK, "file": "", "rows": len(fallback), "bytes": 0})
        return rows

    def _by_spark(self, batch_df: Any, fallback: list[Any]) -> Any:
        return self.arrow.read_by_spark(batch_df, fallback, self.skipped, self.letters)


__all__ = [
    "FALLBACK_MARKER",
    "DecodeTask",
    "PieceSource",
    "PiecesBatchWriter",
    "WriteTask",
    "changes_schema",
    "fallback_error",
    "fallback_of",
    "needs_spark_of",
    "with_fallbacks",
]
