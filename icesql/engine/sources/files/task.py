"""The executor side of the Arrow path: pieces in, data files (or decoded changes) out.

``WriteTask`` is the ``mapInArrow`` body of an append sink reading a FILES source: for each
piece row it decodes the piece (``decode``), and ``DataFileWriter`` casts the rows to the table
schema, splits them by the partition spec and writes the data files (rolled over at MAXIMUM
FILE SIZE). It returns the batch writer's usual rows (one per written file) plus one
``CONSUMED`` row per source file it read, so the driver learns which files a batch consumed
without another job.

``DecodeTask`` is the body for changelog (Debezium) sources: it yields the decoded changes, which
the upsert reduction and writer (``batch.BatchWriter``) then take as on Spark's path.

A piece Arrow cannot read exactly as Spark would raises a marked error naming its file
(``FALLBACK_MARKER``); the driver then reads that file with Spark (``fallback``) and runs the
batch again without it. Both classes are picklable and hold no secrets beyond the FileIO
properties of the source and the table (which never reach a log).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from icesql.engine.base.hooks import kill_point
from icesql.engine.base.wire import CONSUMED, file_row, files_batch, releases_task_memory
from icesql.engine.connections.stores.location import Location
from icesql.engine.sources.files.decode import SourceFormat, decode
from icesql.engine.sources.files.pieces import Piece
from icesql.engine.sources.files.types import Fallback

FALLBACK_MARKER = "ICESQL-FALLBACK:"


def pieces_of(batches: Iterator[Any]) -> Iterator[Piece]:
    for b in batches:
        for r in b.to_pylist():
            rg = r.get("row_groups")
            yield Piece(
                int(r["seq"]),
                r["path"],
                int(r["size"]),
                int(r.get("mtime_ms") or 0),
                int(r["start"] or 0),
                None if r.get("end") is None else int(r["end"]),
                tuple(rg) if rg is not None else None,
            )


def _fallback(piece: Piece, why: str) -> ValueError:
    return ValueError(f"{FALLBACK_MARKER}{json.dumps({'path': piece.path, 'why': why[:300]})}|END")


def fallback_of(exc: BaseException) -> str | None:
    """The file a failed Arrow task could not read (None: another failure)."""
    from icesql.engine.base.wire import marked_message

    body = marked_message(exc, FALLBACK_MARKER)
    if body is None:
        return None
    try:
        return str(json.loads(body)["path"])
    except (ValueError, KeyError):
        return None


class DecodeTask:
    """``mapInArrow`` body: piece rows in, decoded rows out (picklable)."""

    def __init__(self, source: SourceFormat, location: Location) -> None:
        self.source = source
        self.location = location

    @releases_task_memory
    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        for piece in pieces_of(batches):
            try:
                yield from decode(piece, self.source, self.location.fs, self.location.fs_path(piece.path))
            except Fallback as e:
                raise _fallback(piece, str(e)) from None


class WriteTask:
    """``mapInArrow`` body: piece rows in, one row per written file (and per file read) out."""

    def __init__(self, source: SourceFormat, location: Location, spec: Any, batch_id: int) -> None:
        self.source = source
        self.location = location
        self.spec = spec
        self.batch_id = batch_id

    @releases_task_memory
    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        from icesql.engine.iceberg.writer import DataFileWriter

        writer = DataFileWriter(self.spec, "data")
        consumed: dict[str, tuple[int, int]] = {}  # path -> (seq, mtime_ms)
        first = True
        try:
            for piece in pieces_of(batches):
                try:
                    for b in decode(piece, self.source, self.location.fs, self.location.fs_path(piece.path)):
                        if b.num_rows:
                            writer.write(b)
                            if first:
                                first = False
                                kill_point("write", self.batch_id)
                except Fallback as e:
                    raise _fallback(piece, str(e)) from None
                consumed[piece.path] = (piece.seq, piece.mtime_ms)
            files = writer.close()
        except BaseException:
            writer.abort()
            raise
        rows = [file_row(f) for f in files]
        rows += [{"content": CONSUMED, "file": p, "rows": s, "bytes": m} for p, (s, m) in consumed.items()]
        if rows:
            yield files_batch(rows)


__all__ = ["CONSUMED", "FALLBACK_MARKER", "DecodeTask", "WriteTask", "fallback_of", "pieces_of"]
