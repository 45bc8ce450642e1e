"""CLEAN SOURCE: a FILES source's files moved away or deleted once the batches that read them are
committed, so that a directory fed for months stays as small as its backlog.

When is a file done with? Every trigger asks the source for new offsets starting from the end of
the last batch, and Spark asks only once that batch has its entry in the checkpoint's commit log
(a restart's first trigger too; ``DataSourceStreamReader.commit`` comes later still, as Spark
plans the next batch, so the source does not wait for it). Files up to there are in the table (or in the sink's durable
staging, committed later) and no replay of a batch reads them again. So a running sink cleans a
batch's files at the next trigger. A ``run --once`` ends without one, so the sink cleans the files
of its last committed batch itself when the query has ended (``committed_seq`` reads the
checkpoint's commit log).

``clean_through`` handles the files of the source's file log in order and records how far it got
(``FileLog.write_cleaned``), so a restart neither repeats a file nor misses one. A file that
cannot be moved or deleted (permissions, an archive name taken by a different file) is logged and
left where it is: never lost, and already in the file log, so never read twice. An archive name
taken by a file of the same size is a move a crash cut short (on S3 a move is a copy, then a
delete): the source's copy is deleted.

``'archive'`` moves a file to ARCHIVE DIRECTORY followed by its path without scheme and bucket
(``data/in/f.json`` -> ``<archive>/<abs>/data/in/f.json``, ``s3://b/in/f.json`` ->
``s3://b/archive/in/f.json``), as Spark's own file source does with ``cleanSource`` and
``sourceArchiveDir``, so a source read on either path leaves the same tree.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from icesql.engine.connections.stores.location import Location, is_remote
from icesql.engine.sources.files.log import FileLog
from icesql.engine.sources.files.resume import local_path

log = logging.getLogger("icesql.sources")

ARCHIVE = "archive"
DELETE = "delete"


@dataclass(frozen=True)
class Cleaner:
    """What CLEAN SOURCE does with a consumed file (``mode``: 'archive' | 'delete')."""

    mode: str
    archive_directory: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Cleaner | None:
        """From the data source's options (``clean_source``, ``archive_directory``); None: off."""
        mode = options.get("clean_source") or "off"
        if mode == "off":
            return None
        if mode not in (ARCHIVE, DELETE) or (mode == ARCHIVE and not options.get("archive_directory")):
            raise ValueError(f"clean_source={mode!r} needs 'archive' (with archive_directory) or 'delete'")
        return cls(mode, options.get("archive_directory"))

    def options(self) -> dict[str, str]:
        out = {"clean_source": self.mode}
        if self.archive_directory:
            out["archive_directory"] = self.archive_directory
        return out

    def archive_target(self, location: Location, path: str) -> str:
        """Where ``path`` is archived, as the filesystem names it."""
        assert self.archive_directory is not None
        base = location.fs_path(self.archive_directory).rstrip("/")
        tail = location.fs_path(path)
        if is_remote(path):
            tail = tail.split("/", 1)[1] if "/" in tail else tail  # without the bucket
        return f"{base}/{tail.lstrip('/')}"

    def clean(self, location: Location, path: str) -> bool:
        """Move or delete one file; False when it had to be left where it is (logged)."""
        from pyarrow import fs as pafs

        fs = location.fs
        src = location.fs_path(path)
        try:
            info = fs.get_file_info(src)
            if info.type == pafs.FileType.NotFound:
                return True  # cleaned before a crash let it record so
            if self.mode == DELETE:
                location.filesystem.delete(src)
                return True
            dest = self.archive_target(location, path)
            there = fs.get_file_info(dest)
            if there.type != pafs.FileType.NotFound:
                if there.type == pafs.FileType.File and there.size == info.size:
                    location.filesystem.delete(
                        src
                    )  # a move (a copy, then a delete, on S3) cut short by a crash
                    return True
                log.warning("CLEAN SOURCE: %s left in place: %s already exists in the archive", path, dest)
                return False
            fs.create_dir(dest.rsplit("/", 1)[0], recursive=True)
            location.filesystem.move(src, dest)
            return True
        except OSError as e:
            log.warning("CLEAN SOURCE: %s left in place: %s", path, e)
            return False


def clean_through(file_log: FileLog, location: Location, cleaner: Cleaner, through: int, done: int) -> int:
    """Clean the files of ``file_log`` with ``done < seq <= through`` (``done``: how far an
    earlier call got, ``FileLog.cleaned_through``); returns the new mark (recorded in the log).
    Files the log was seeded with (``FileLog.write_seed``: taken as consumed before the log
    began, after an upgrade or a lost checkpoint) are never cleaned: after a lost checkpoint they
    are the files up to the table's watermark, which may include a late file that was never
    read, and deleting it would lose it."""
    begin = max(done, file_log.seed())  # seeded files are left alone (see below)
    if through <= begin:
        return max(done, begin)
    kept = 0
    for entry in file_log.entries(begin, through):
        if not cleaner.clean(location, entry.path):
            kept += 1
    file_log.write_cleaned(through)
    log.debug("CLEAN SOURCE: %s files %d..%d (%d left in place)", cleaner.mode, begin + 1, through, kept)
    return through


def committed_seq(checkpoint: str | Path) -> int | None:
    """The source offset (``{"seq": N}``) of the newest batch in a local checkpoint's commit log,
    None when no batch was committed (or the checkpoint is not a local directory)."""
    text = str(checkpoint)
    root = Path(local_path(text) if text.startswith("file:") else text)
    try:
        batches = [int(n) for n in os.listdir(root / "commits") if n.isdigit()]
    except OSError:
        return None
    if not batches:
        return None
    try:
        lines = (root / "offsets" / str(max(batches))).read_text().splitlines()
        return int(json.loads(lines[2])["seq"])  # "v1", the batch's metadata, then the source's offset
    except (OSError, IndexError, KeyError, TypeError, ValueError):
        return None


def clean_committed(log_dir: str, location: Location, cleaner: Cleaner, checkpoint: str) -> None:
    """After a query has ended: clean the files of every batch its checkpoint has committed."""
    through = committed_seq(checkpoint)
    if through is None:
        return
    file_log = FileLog(log_dir, location.io_properties)
    try:
        clean_through(file_log, location, cleaner, through, file_log.cleaned_through())
    finally:
        file_log.close()


__all__ = ["ARCHIVE", "DELETE", "Cleaner", "clean_committed", "clean_through", "committed_seq"]
