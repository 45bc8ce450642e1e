"""Where a FILES source resumes when its file log does not exist yet.

The Arrow path keeps its checkpoint in a directory of its own (``checkpoint-files``) with the
source's file log inside. When a sink starts and that log is missing, one of three things is true:

* **a new sink** (or a table this sink never committed to): the log starts empty;
* **an upgrade**: the sink ran on Spark's file source before (the previous release), whose
  checkpoint lists the files each Spark batch read (``sources/0/`` of the old checkpoint); the
  files of the batches the table holds are consumed, the others are read again;
* **a lost checkpoint** (a pod without a persistent volume): every commit records the source's
  watermark in the snapshot summary (``icesql.source-watermark``: the newest file consumed, by
  modification time then path); files up to it are consumed, newer ones are read.

Either way the log is seeded with the consumed files (``FileLog.write_seed``) and the sink's
progress continues after the table's: Spark numbers the batches of a new checkpoint from 0 again,
so progress = ``progress_base`` + Spark batch id, with ``progress_base`` = committed + 1.

A lost checkpoint can only be exact up to the watermark: a file that arrives late with an older
modification time than the watermark while the checkpoint is gone is taken as consumed. The
warning says how many files were taken so. With ``CLEAN SOURCE`` (which moves files away once
committed) the directory holds little besides new files, and such a file is left in place, never
deleted: cleaning skips the files a log was seeded with (``files.clean``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote

from icesql.engine.connections.stores.location import Listed, Location
from icesql.engine.sources.files.log import FileLog

log = logging.getLogger("icesql.sink")

WATERMARK = "icesql.source-watermark"
SOURCE_SEQ = "icesql.source-seq"


def watermark_of(summary: Mapping[str, str] | None) -> tuple[int, str] | None:
    if not summary or WATERMARK not in summary:
        return None
    try:
        data = json.loads(summary[WATERMARK])
        return int(data["mtime_ms"]), str(data["path"])
    except (ValueError, KeyError, TypeError):
        return None


def watermark_json(mtime_ms: int, path: str) -> str:
    return json.dumps({"mtime_ms": mtime_ms, "path": path}, sort_keys=True)


def local_path(path: str) -> str:
    """A path as the source lists it: Spark's log holds URIs (``file:///a%20b``)."""
    if path.startswith("file://"):
        path = path[len("file://") :]
    elif path.startswith("file:"):
        path = path[len("file:") :]
    return unquote(path)


def spark_consumed(old_checkpoint: Path, through_batch: int) -> list[str] | None:
    """The files Spark's file source read in batches ``<= through_batch`` (None: no such log)."""
    directory = old_checkpoint / "sources" / "0"
    if not directory.is_dir():
        return None
    files: dict[int, list[str]] = {}
    names = sorted(
        os.listdir(directory), key=lambda n: int(n.split(".")[0]) if n.split(".")[0].isdigit() else -1
    )
    compacted = [n for n in names if n.endswith(".compact")]
    start = int(compacted[-1].split(".")[0]) if compacted else -1
    for name in names:
        stem = name.split(".")[0]
        if not stem.isdigit() or (int(stem) < start) or (name.endswith(".compact") and int(stem) != start):
            continue
        for line in (directory / name).read_text().splitlines()[1:]:  # first line: the version
            if not line.strip():
                continue
            entry = json.loads(line)
            files.setdefault(int(entry["batchId"]), []).append(local_path(entry["path"]))
    return [p for b in sorted(files) if b <= through_batch for p in files[b]]


def seed_log(
    file_log: FileLog,
    location: Location,
    *,
    name: str,
    committed: int,
    summary: Mapping[str, str] | None,
    old_checkpoint: Path | None,
) -> int:
    """Seed a new file log (see the module docstring); returns the progress base."""
    consumed: list[Listed] = []
    old = spark_consumed(old_checkpoint, committed) if old_checkpoint is not None else None
    if old is not None:
        listed = {x.path: x for x in location.list()}
        consumed = [listed.get(p) or Listed(p, 0, 0) for p in dict.fromkeys(old)]
        log.info(
            "sink %s: moving to the Arrow path; %d file(s) read by the previous checkpoint's committed "
            "batches are taken as consumed",
            name,
            len(consumed),
        )
    else:
        mark = watermark_of(summary)
        if mark is not None:
            consumed = [x for x in location.list() if (x.mtime_ms, x.path) <= mark]
            log.warning(
                "sink %s: its checkpoint is missing; %d file(s) up to the table's watermark (%s) are taken "
                "as consumed, newer ones are read",
                name,
                len(consumed),
                mark[1],
            )
        elif committed >= 0:
            from icesql.errors import ExecutionError

            raise ExecutionError(
                f"sink {name}: its checkpoint is missing and its table records no source watermark (the "
                "table was written by an older release), so which files were consumed is unknown",
                hint="restore the checkpoint directory, or recreate the sink into a new table",
            )
    base = committed + 1
    file_log.write_seed(consumed, progress_base=base)
    return base


__all__ = ["SOURCE_SEQ", "WATERMARK", "seed_log", "spark_consumed", "watermark_json", "watermark_of"]
