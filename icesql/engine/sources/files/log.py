"""The durable log of the files a FILES source admitted, and the index of the paths it has seen.

Spark keeps the source's offsets (``{"seq": N}``: the first N files of the log) in its checkpoint;
this log, beside them in the checkpoint directory, says which files those are, so that a batch
replayed after a crash reads exactly the files it read before::

    <checkpoint>/icesql-files/seg-<first seq>-<last seq>.parquet   (seq, path, size, mtime_ms)
    <checkpoint>/icesql-files/seed.json                           {"through": K}: files 1..K were
                                                                   consumed before this log began
    <checkpoint>/icesql-files/cleaned.json                        {"through": K}: CLEAN SOURCE has
                                                                   moved or deleted files 1..K

A segment is written whole (a temporary name then a rename on local disks; one PUT on object
stores) before the offset that admits its files is returned to Spark. Reading the files of a
batch reads only the segments whose range overlaps it, and ``compact`` merges the small segments
at the end of the log into one (never the big ones before them: a merge reads fewer than
``COMPACT_EVERY * SMALL_SEGMENT`` entries), so the cost of a trigger does not grow with the files
seen. ``seen(paths)`` answers from a SQLite index in a local cache directory, rebuilt from the
segments when missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
import threading
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from icesql.engine.connections.stores.location import Listed, Location
from icesql.engine.sources.files.pieces import FileEntry

DIRECTORY = "icesql-files"
_SEG = "seg-"
_SEED = "seed.json"
_CLEANED = "cleaned.json"
COMPACT_EVERY = 64  # small segments: beyond this many at the end of the log, they are merged
SMALL_SEGMENT = 4096  # entries: a segment holding fewer is small (a merge's result is not)


def _seg_name(first: int, last: int) -> str:
    return f"{_SEG}{first:020d}-{last:020d}.parquet"


def _seg_range(name: str) -> tuple[int, int] | None:
    if not (name.startswith(_SEG) and name.endswith(".parquet")):
        return None
    try:
        a, b = name[len(_SEG) : -len(".parquet")].split("-")
        return int(a), int(b)
    except ValueError:
        return None


class FileLog:
    """The file log of one source of one sink (see the module docstring)."""

    def __init__(
        self, directory: str, io_properties: dict[str, str] | None = None, cache_dir: Path | None = None
    ):
        self.directory = directory.rstrip("/")
        self.location = Location(self.directory, io_properties)
        self._segments: list[tuple[int, int, str]] | None = None
        self._lock = threading.Lock()
        self._cache_dir = cache_dir
        self._db: sqlite3.Connection | None = None
        self._seed: dict[str, int] | None = None  # seed.json once read (it never changes after)

    # ----------------------------------------------------------------- segments

    @property
    def _fs(self) -> Any:
        return self.location.fs

    def _path(self, name: str) -> str:
        return f"{self.location.fs_path(self.directory)}/{name}"

    def segments(self, refresh: bool = False) -> list[tuple[int, int, str]]:
        """``(first, last, name)`` of every segment, by range."""
        if self._segments is None or refresh:
            from pyarrow import fs as pafs

            selector = pafs.FileSelector(self.location.fs_path(self.directory), allow_not_found=True)
            segs = []
            for info in self._fs.get_file_info(selector):
                r = _seg_range(info.base_name)
                if r is not None:
                    segs.append((r[0], r[1], info.base_name))
            segs.sort()
            # after a crash inside ``compact`` a merged segment and its parts may both exist
            kept: list[tuple[int, int, str]] = []
            for seg in segs:
                if kept and seg[0] <= kept[-1][1]:
                    if seg[1] > kept[-1][1]:
                        kept[-1] = seg  # cannot happen with merges of whole runs; keep the wider
                    continue
                kept.append(seg)
            self._segments = kept
        return list(self._segments)

    def high(self) -> int:
        """The sequence number of the newest admitted file (the seed's when the log is empty)."""
        segs = self.segments()
        return max(segs[-1][1] if segs else 0, self.seed())

    def seed(self) -> int:
        """Files 1..seed were consumed before this log began (see ``write_seed``)."""
        info = self.seed_info()
        return int(info["through"]) if info else 0

    def seed_info(self) -> dict[str, int] | None:
        """``{"through": K, "progress_base": B}`` when the log was seeded, else None. Read once:
        a seed is written before any reader of the log starts and never changes after."""
        if self._seed is not None:
            return dict(self._seed)
        try:
            with self._fs.open_input_stream(self._path(_SEED)) as f:
                data = json.loads(f.read().decode())
            self._seed = {"through": int(data["through"]), "progress_base": int(data.get("progress_base", 0))}
        except (FileNotFoundError, OSError, KeyError, ValueError, TypeError):
            return None
        return dict(self._seed)

    def _write(self, name: str, data: bytes) -> None:
        self._fs.create_dir(self.location.fs_path(self.directory), recursive=True)
        final = self._path(name)
        if self.location.fs.type_name == "local":
            tmp = self._path(f".{name}.{uuid.uuid4().hex}.tmp")
            with self._fs.open_output_stream(tmp) as out:
                out.write(data)
            with open(tmp, "rb+") as fh:  # durable before it is named
                os.fsync(fh.fileno())
            self._fs.move(tmp, final)
        else:
            with self._fs.open_output_stream(final) as out:
                out.write(data)

    def write_seed(self, entries: Sequence[Listed], *, progress_base: int = 0) -> int:
        """Start an empty log with ``entries`` marked consumed (seq 1..K); returns K. The sink's
        progress of Spark batch b of this log's checkpoint is ``progress_base + b``."""
        if self.segments(refresh=True):
            raise RuntimeError(f"file log {self.directory} is not empty")
        kept = self._append_entries(entries, first=1) if entries else []
        through = len(kept)
        self._write(_SEED, json.dumps({"through": through, "progress_base": progress_base}).encode())
        self._seed = {"through": through, "progress_base": progress_base}
        return through

    def append(self, listed: Iterable[Listed]) -> list[FileEntry]:
        """Admit new files after the newest one (their order: modification time, then path)."""
        items = sorted(listed, key=lambda x: (x.mtime_ms, x.path))
        if not items:
            return []
        return self._append_entries(items, first=self.high() + 1)

    def _append_entries(self, items: Sequence[Listed], first: int) -> list[FileEntry]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        entries = [FileEntry(first + i, x.path, x.size, x.mtime_ms) for i, x in enumerate(items)]
        table = pa.Table.from_pylist([e.to_row() for e in entries], schema=_schema())
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        name = _seg_name(entries[0].seq, entries[-1].seq)
        self._write(name, sink.getvalue().to_pybytes())
        with self._lock:
            if self._segments is not None:
                self._segments.append((entries[0].seq, entries[-1].seq, name))
        self._index(entries)
        return entries

    def entries(self, after: int, through: int) -> list[FileEntry]:
        """The files with ``after < seq <= through``, in order."""
        out: list[FileEntry] = []
        if through <= after:
            return out
        segs = self.segments()
        if not segs or segs[-1][1] < through:
            segs = self.segments(refresh=True)  # the source's process appended since
        for first, last, name in segs:
            if last <= after or first > through:
                continue
            for row in self._read(name):
                if after < row["seq"] <= through:
                    out.append(FileEntry(row["seq"], row["path"], row["size"], row["mtime_ms"]))
        return out

    def _read(self, name: str) -> list[dict[str, Any]]:
        import pyarrow.parquet as pq

        with self._fs.open_input_file(self._path(name)) as f:
            return pq.read_table(f).to_pylist()

    def compact(self) -> None:
        """Merge the small segments at the end of the log when they pile up: a trigger reads the
        segments its batch overlaps, and a merge reads only small ones, so neither grows with the
        files seen."""
        segs = self.segments(refresh=True)
        tail: list[tuple[int, int, str]] = []
        for seg in reversed(segs):
            if seg[1] - seg[0] + 1 >= SMALL_SEGMENT:
                break
            tail.insert(0, seg)
        if len(tail) <= COMPACT_EVERY:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = [r for _, _, name in tail for r in self._read(name)]
        table = pa.Table.from_pylist(rows, schema=_schema())
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        merged = _seg_name(tail[0][0], tail[-1][1])
        self._write(merged, sink.getvalue().to_pybytes())
        for _, _, name in tail:
            if name != merged:
                self._fs.delete_file(self._path(name))
        self.segments(refresh=True)

    # ----------------------------------------------------------------- CLEAN SOURCE

    def cleaned_through(self) -> int:
        """Files 1..K of the log were moved or deleted by CLEAN SOURCE (0: none)."""
        try:
            with self._fs.open_input_stream(self._path(_CLEANED)) as f:
                return int(json.loads(f.read().decode())["through"])
        except (FileNotFoundError, OSError, KeyError, ValueError, TypeError):
            return 0

    def write_cleaned(self, through: int) -> None:
        self._write(_CLEANED, json.dumps({"through": through}).encode())

    # ----------------------------------------------------------------- the seen index

    def _cache(self) -> Path:
        if self._cache_dir is not None:
            return self._cache_dir
        if self.location.fs.type_name == "local":
            return Path(self.location.fs_path(self.directory))
        digest = hashlib.sha256(self.directory.encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / "icesql-seen" / digest

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            cache = self._cache()
            cache.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(cache / ".seen.sqlite"), check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("CREATE TABLE IF NOT EXISTS seen (path TEXT PRIMARY KEY) WITHOUT ROWID")
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER)")
            self._db = db
            self._catch_up()
        return self._db

    def _catch_up(self) -> None:
        """Load the segments the index has not seen (a fresh cache, or another writer's)."""
        db = self._db
        assert db is not None
        row = db.execute("SELECT value FROM meta WHERE key = 'through'").fetchone()
        through = int(row[0]) if row else 0
        high = self.segments(refresh=True)[-1][1] if self.segments() else 0
        if high < through:  # the log was replaced (a new checkpoint): start the index over
            db.execute("DELETE FROM seen")
            through = 0
        if high > through:
            for _first, last, name in self.segments():
                if last > through:
                    db.executemany(
                        "INSERT OR IGNORE INTO seen (path) VALUES (?)",
                        ((r["path"],) for r in self._read(name)),
                    )
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('through', ?)", (high,))
            db.commit()

    def _index(self, entries: Sequence[FileEntry]) -> None:
        db = self._conn()
        with self._lock:
            db.executemany("INSERT OR IGNORE INTO seen (path) VALUES (?)", ((e.path,) for e in entries))
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('through', ?)", (entries[-1].seq,))
            db.commit()

    def unseen(self, listed: Sequence[Listed]) -> list[Listed]:
        """The listed files that are not in the log."""
        if not listed:
            return []
        db = self._conn()
        with self._lock:
            db.execute("CREATE TEMP TABLE IF NOT EXISTS listed (path TEXT PRIMARY KEY) WITHOUT ROWID")
            db.execute("DELETE FROM listed")
            db.executemany("INSERT OR IGNORE INTO listed (path) VALUES (?)", ((x.path,) for x in listed))
            new = {
                r[0] for r in db.execute("SELECT path FROM listed WHERE path NOT IN (SELECT path FROM seen)")
            }
        return [x for x in listed if x.path in new]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [("seq", pa.int64()), ("path", pa.string()), ("size", pa.int64()), ("mtime_ms", pa.int64())]
    )


__all__ = ["DIRECTORY", "FileLog"]
