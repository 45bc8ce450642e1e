"""Pieces of work: what one Spark task of the Arrow path reads.

A big file is split so that every core works and no task needs the whole file in memory:
Parquet by row groups, JSON and CSV by byte ranges whose lines are assigned as Hadoop's line
reader assigns them (a line belongs to the range in which it starts; a range reads on past its
end to finish its last line). Small files are grouped into one task up to the target size, so a
trigger with thousands of small files does not pay a task each.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_PIECE_BYTES = 128 * 1024 * 1024  # as Spark's spark.sql.files.maxPartitionBytes
SMALL_FILE_COST = 4 * 1024 * 1024  # as spark.sql.files.openCostInBytes: a file costs at least this


@dataclass(frozen=True)
class FileEntry:
    """A file the source discovered: its sequence number in the source's log, path, size, mtime."""

    seq: int
    path: str
    size: int
    mtime_ms: int

    def to_row(self) -> dict[str, Any]:
        return {"seq": self.seq, "path": self.path, "size": self.size, "mtime_ms": self.mtime_ms}


@dataclass(frozen=True)
class Piece:
    """A part of one file: a byte range (text formats) or a run of row groups (Parquet)."""

    seq: int  # the file's sequence number
    path: str
    size: int
    mtime_ms: int = 0
    start: int = 0  # text: first byte of the range
    end: int | None = None  # text: end of the range (a line starting at or before it is read)
    row_groups: tuple[int, ...] | None = None  # Parquet: these row groups (None: all)

    @property
    def whole(self) -> bool:
        return self.start == 0 and (self.end is None or self.end >= self.size) and self.row_groups is None


@dataclass(frozen=True)
class Work:
    """The pieces one task reads, in order."""

    pieces: tuple[Piece, ...]

    @property
    def bytes(self) -> int:
        return sum(((p.end if p.end is not None else p.size) - p.start) for p in self.pieces)


def split_text(entry: FileEntry, target: int) -> list[Piece]:
    if entry.size <= target:
        return [Piece(entry.seq, entry.path, entry.size, entry.mtime_ms)]
    out = []
    start = 0
    while start < entry.size:
        end = min(entry.size, start + target)
        out.append(Piece(entry.seq, entry.path, entry.size, entry.mtime_ms, start, end))
        start = end
    return out


def split_parquet(entry: FileEntry, row_group_bytes: Sequence[int], target: int) -> list[Piece]:
    """Runs of consecutive row groups of about ``target`` bytes (a row group is never split)."""
    if entry.size <= target or len(row_group_bytes) <= 1:
        return [Piece(entry.seq, entry.path, entry.size, entry.mtime_ms)]
    out: list[Piece] = []
    run: list[int] = []
    acc = 0
    for i, n in enumerate(row_group_bytes):
        if run and acc + n > target:
            out.append(Piece(entry.seq, entry.path, entry.size, entry.mtime_ms, row_groups=tuple(run)))
            run, acc = [], 0
        run.append(i)
        acc += n
    if run:
        out.append(Piece(entry.seq, entry.path, entry.size, entry.mtime_ms, row_groups=tuple(run)))
    return out


def group(pieces: Iterable[Piece], target: int) -> list[Work]:
    """Pieces into tasks: big pieces alone, small whole files together up to ``target`` bytes
    (each file costing at least ``SMALL_FILE_COST``, as Spark counts them), in file order."""
    works: list[Work] = []
    batch: list[Piece] = []
    acc = 0
    for p in pieces:
        cost = max(SMALL_FILE_COST, (p.end if p.end is not None else p.size) - p.start)
        if cost >= target:
            works.append(Work((p,)))
            continue
        if batch and acc + cost > target:
            works.append(Work(tuple(batch)))
            batch, acc = [], 0
        batch.append(p)
        acc += cost
    if batch:
        works.append(Work(tuple(batch)))
    return works


def _merge_to(works: list[Work], n: int) -> list[Work]:
    """``n`` tasks of about equal size, each a run of consecutive works (file order kept): a work
    goes to the task its midpoint falls in, so no task ends up with a work more than its share."""
    total = sum(w.bytes for w in works) or 1
    per = total / n
    out: list[list[Piece]] = [[] for _ in range(n)]
    before = 0
    for w in works:
        out[min(n - 1, int((before + w.bytes / 2) // per))].extend(w.pieces)
        before += w.bytes
    return [Work(tuple(ps)) for ps in out if ps]


def balance(works: list[Work], parallelism: int) -> list[Work]:
    """Fewer tasks when the last wave would leave cores idle: between one and two tasks per core
    (a few files of about the target size), one task per core, each about as big, so every core
    finishes at about the same time and no task waits for a free core (each costs a worker)."""
    if parallelism < len(works) < 2 * parallelism:
        return _merge_to(works, parallelism)
    return works


__all__ = [
    "DEFAULT_PIECE_BYTES",
    "FileEntry",
    "Piece",
    "Work",
    "balance",
    "group",
    "split_parquet",
    "split_text",
]


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
