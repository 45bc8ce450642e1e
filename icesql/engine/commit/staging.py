"""Durable staging of written-but-uncommitted files, one directory per sink.

After the executors have written the data (and equality-delete) files of Spark batch N, the
driver records them here *before* ``foreachBatch`` returns, so that Spark may mark the batch
done even when the commit policy holds the files back for a later, larger commit::

    <home>/sinks/<sink_id>/staging/<batch id, 20 digits>.json
    <home>/sinks/<sink_id>/staging/cursor    (Spark Connect: the last batch taken that staged nothing)
    <home>/sinks/<sink_id>/staging/rewrite-due    (a rewrite a ``run --once`` handed to the next run)

Each entry is written atomically: a temporary file in the same directory, ``fsync``, rename,
``fsync`` of the directory. A torn write leaves only a ``.tmp`` file, which ``pending`` ignores
and removes. Each entry carries a SHA-256 of its own content (``checksum``): an entry damaged on
disk afterwards (truncated, emptied, overwritten) is refused with ``StagingDamaged``, naming the
file, rather than committed or taken for something else; an entry of a release without the
checksum is read as it is. Entries are discarded once a commit whose progress covers them is in the table
(``discard_through``). The files an entry names are never deleted here: the files of a batch
that crashed before staging are orphans that Iceberg maintenance (delete orphan files) cleans
up, as the design document says.

File descriptions are opaque: the strings the writer handed back (base64 of its serialised
``DataFile``), so this module needs neither pyiceberg nor pyarrow.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from icesql.errors import ExecutionError

_SUFFIX = ".json"
_CURSOR = "cursor"
_REWRITE_DUE = "rewrite-due"  # a run --once handed a due rewrite to the next run (no .json: no entry)
_CHECKSUM = "checksum"


class StagingDamaged(ExecutionError):
    """A staging entry that cannot be read back as it was written (see ``Staging.pending``)."""


def _digest(d: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class StagedBatch:
    batch_id: int
    data_files: tuple[str, ...] = ()
    delete_files: tuple[str, ...] = ()
    rows: int = 0  # rows written to data files
    deletes: int = 0  # keys written to equality-delete files
    bytes: int = 0  # bytes of all files
    skipped: int = 0  # bad records skipped (ON ERROR = 'skip')
    created_at: float = field(default_factory=time.time)
    # the Arrow path: the newest source file the batch read (its log seq, mtime and path)
    source_seq: int | None = None
    source_mtime_ms: int | None = None
    source_path: str | None = None
    # a KAFKA source: the end offsets of the batch ({"partition": next offset}, ``kafka.offsets``)
    source_offsets: dict[str, int] | None = None
    # ON ERROR = 'dead-letter': the data files of the dead-letter table holding the batch's bad
    # records, how many records, and how many per reason (``deadletter``)
    dead_letter_files: tuple[str, ...] = ()
    dead_letters: int = 0
    dead_letter_reasons: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of_files(cls, batch_id: int, rows: Sequence[Mapping[str, Any]], **fields: Any) -> StagedBatch:
        """The entry of batch ``batch_id`` whose written files are ``rows`` (the writers' file rows:
        content 0 a data file, else a delete file), with ``fields`` besides."""
        return cls(
            batch_id=batch_id,
            data_files=tuple(r["file"] for r in rows if r["content"] == 0),
            delete_files=tuple(r["file"] for r in rows if r["content"] != 0),
            rows=sum(r["rows"] for r in rows if r["content"] == 0),
            deletes=sum(r["rows"] for r in rows if r["content"] != 0),
            bytes=sum(r["bytes"] for r in rows),
            **fields,
        )

    @property
    def files(self) -> int:
        return len(self.data_files) + len(self.delete_files)

    @property
    def empty(self) -> bool:
        return not self.data_files and not self.delete_files

    def to_json(self) -> str:
        d: dict[str, Any] = asdict(self)
        d["data_files"] = list(self.data_files)
        d["delete_files"] = list(self.delete_files)
        d["dead_letter_files"] = list(self.dead_letter_files)
        d[_CHECKSUM] = _digest(d)
        return json.dumps(d, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> StagedBatch:
        """The entry ``to_json`` wrote; ``ValueError`` (or ``TypeError``) when ``text`` is not one,
        or its checksum does not match its content."""
        d = json.loads(text)
        if not isinstance(d, dict):
            raise ValueError(f"a JSON {type(d).__name__}, not an object")
        checksum = d.pop(_CHECKSUM, None)
        if checksum is not None and checksum != _digest(d):
            raise ValueError("its checksum does not match its content")
        d["data_files"] = tuple(d.get("data_files", ()))
        d["delete_files"] = tuple(d.get("delete_files", ()))
        d["dead_letter_files"] = tuple(d.get("dead_letter_files", ()))
        return StagedBatch(**d)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _read_entry(path: Path) -> StagedBatch:
    """The entry in ``path``; ``StagingDamaged`` naming the file when it is not one intact."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as e:
        cause = e.strerror or str(e)
    else:
        try:
            entry = StagedBatch.from_json(data.decode("utf-8"))
        except (ValueError, TypeError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            cause = "it is empty" if not data.strip() else _cause(e)
        else:
            if f"{entry.batch_id:020d}{_SUFFIX}" == path.name:
                return entry
            cause = f"it names batch {entry.batch_id}"
    batch = path.name[: -len(_SUFFIX)].lstrip("0") or "0"
    raise StagingDamaged(
        f"staging entry {path} is damaged ({cause}): batch {batch}, written but not yet committed, "
        "cannot be committed",
        hint="restore the file from a backup and start the sink again; deleting it drops the "
        "batch's rows (Spark's checkpoint has already moved past them)",
    )


def _cause(e: Exception) -> str:
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 text at byte {e.start}"
    if isinstance(e, json.JSONDecodeError):
        return f"not valid JSON at character {e.pos}: {e.msg}"
    return str(e)


class Staging:
    """The staging directory of one sink."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def for_sink(home: Path, sink_id: str) -> Staging:
        return Staging(Path(home) / "sinks" / sink_id / "staging")

    def _path(self, batch_id: int) -> Path:
        return self.directory / f"{batch_id:020d}{_SUFFIX}"

    def add(self, entry: StagedBatch) -> Path:
        """Record ``entry`` durably; returns once it is on disk (fsync'd, renamed, dir fsync'd)."""
        final = self._path(entry.batch_id)
        self._write_atomic(final, entry.to_json().encode())
        return final

    def _write_atomic(self, final: Path, data: bytes) -> None:
        tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        _fsync_dir(self.directory)

    def set_cursor(self, batch_id: int) -> None:
        """Remember that batch ``batch_id`` was taken although it staged nothing (Spark Connect:
        the next record to pick up is the one after it)."""
        self._write_atomic(self.directory / _CURSOR, str(int(batch_id)).encode())

    def cursor(self) -> int:
        """The last batch id passed to ``set_cursor``; -1 when none."""
        try:
            return int((self.directory / _CURSOR).read_text().strip())
        except (FileNotFoundError, ValueError):
            return -1

    def set_rewrite_due(self, note: dict[str, Any]) -> None:
        """Remember that the table owes a rewrite this sink's last run left undone (a ``run
        --once`` hands it to the next run, which starts it beside its batches): ``note`` says why
        and at which snapshot. A hint, not the truth: the next run plans it again on the table."""
        self._write_atomic(self.directory / _REWRITE_DUE, json.dumps(note, sort_keys=True).encode())

    def rewrite_due(self) -> dict[str, Any] | None:
        """The note ``set_rewrite_due`` left (None: none, or one a torn write left unreadable)."""
        try:
            note = json.loads((self.directory / _REWRITE_DUE).read_text())
        except (FileNotFoundError, ValueError):
            return None
        return note if isinstance(note, dict) else None

    def clear_rewrite_due(self) -> None:
        """The rewrite was done (or is due no more)."""
        path = self.directory / _REWRITE_DUE
        if path.exists():
            path.unlink(missing_ok=True)
            _fsync_dir(self.directory)

    def pending(self) -> list[StagedBatch]:
        """Staged entries not yet discarded, in batch order (temporary files are ignored);
        ``StagingDamaged`` when one of them cannot be read back intact."""
        out: list[StagedBatch] = []
        for p in sorted(self.directory.iterdir()):
            name = p.name
            if name.startswith(".") or not name.endswith(_SUFFIX):
                continue
            try:
                out.append(_read_entry(p))
            except FileNotFoundError:  # discarded concurrently
                continue
        out.sort(key=lambda e: e.batch_id)
        return out

    def remove_temporaries(self) -> int:
        """Delete the temporary files of writes a crash interrupted (call before the sink runs)."""
        n = 0
        for p in self.directory.glob(".*.tmp"):
            p.unlink(missing_ok=True)
            n += 1
        return n

    def last_batch_id(self) -> int | None:
        ids = [int(p.name[: -len(_SUFFIX)]) for p in self.directory.glob(f"*{_SUFFIX}") if p.name[0] != "."]
        return max(ids) if ids else None

    def discard_through(self, progress: int | None) -> int:
        """Remove entries with batch id ≤ ``progress``; returns how many were removed."""
        if progress is None:
            return 0
        n = 0
        for p in self.directory.glob(f"*{_SUFFIX}"):
            if p.name.startswith("."):
                continue
            try:
                bid = int(p.name[: -len(_SUFFIX)])
            except ValueError:
                continue
            if bid <= progress:
                p.unlink(missing_ok=True)
                n += 1
        if n:
            _fsync_dir(self.directory)
        return n

    def totals(self) -> tuple[int, int, int]:
        """(rows, bytes, files) of everything pending."""
        rows = size = files = 0
        for e in self.pending():
            rows += e.rows
            size += e.bytes
            files += e.files
        return rows, size, files
