"""Spark's streaming checkpoint, read and written without Spark.

A sink's query keeps its progress where Spark keeps any query's (``<home>/sinks/<id>/checkpoint``
plus the source kind's suffix): ``metadata`` (the query's id), ``offsets/N`` (batch N planned:
``v1``, the batch's metadata, one line per source with its end offset) and ``commits/N`` (batch N
done: ``v1`` and the next watermark). Two things read it without a JVM - the check before a
bounded run (``precheck``) and a bounded run in this process (``local_query``) - and the latter
writes it too, in Spark's own format, so that a later run on Spark takes up exactly where it
stopped (and the other way round): Spark replays a batch whose offsets it finds without a commit,
and so does ``local_query``.

Writes are atomic (a temporary file renamed into place), as Spark's own checkpoint file manager
makes them; a batch's files are never overwritten. The batch metadata's ``conf`` (the SQL settings
a restarted query must keep) is copied from the newest earlier batch; a checkpoint that has none
gets ``FIRST_CONF``: what Spark 4 writes for a stateless query (a foreachBatch sink holds no
state, so no other value changes what Spark does on a restart; a key missing there is read with
the default Spark gives old checkpoints). Like Spark (``spark.sql.streaming.minBatchesToRetain``),
the logs keep the newest ``RETAIN`` batches.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

RETAIN = 100  # Spark's minBatchesToRetain default

FIRST_CONF: dict[str, str] = {  # pyspark 4.3's, for a stateless query
    "spark.sql.streaming.stateStore.providerClass": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "spark.sql.dropDuplicates.deterministicKeyOrder.enabled": "true",
    "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion": "2",
    "spark.sql.streaming.stateStore.rocksdb.formatVersion": "5",
    "spark.sql.streaming.queryEvolution.enableSourceEvolution": "false",
    "spark.sql.streaming.stateStore.encodingFormat": "unsaferow",
    "spark.sql.streaming.statefulOperator.useStrictDistribution": "true",
    "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion": "2",
    "spark.sql.streaming.multipleWatermarkPolicy": "min",
    "spark.sql.streaming.stateStore.rowChecksum.enabled": "false",
    "spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled": "true",
    "spark.sql.streaming.aggregation.stateFormatVersion": "2",
    "spark.sql.function.protobufExtensions.enabled": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.streaming.join.stateFormatVersion": "2",
    "spark.sql.streaming.stateStore.compression.codec": "lz4",
    "spark.sql.optimizer.pruneFiltersCanPruneStreamingSubplan": "false",
}


def checkpoint_root(home: Path, sink_id: str, suffix: str) -> str:
    """Where Spark keeps a sink's checkpoint: ``<home>/sinks/<id>/checkpoint<suffix>``, or
    ``$ICESQL_CHECKPOINT_ROOT/<id><suffix>`` when set."""
    from icesql import settings

    root = settings.CHECKPOINT_ROOT.get()
    if root:
        return f"{root.rstrip('/')}/{sink_id}{suffix}"
    return f"{Path(home) / 'sinks' / sink_id / 'checkpoint'}{suffix}"


def is_local(location: str) -> bool:
    """Whether a checkpoint location is on this machine's disk (a path or a ``file:`` URI)."""
    return "://" not in location or location.startswith("file:")


def local_path(location: str) -> Path | None:
    """A checkpoint location on this machine's disk as a path (``file:/x`` and ``file:///x`` are
    ``/x``); None for any other URI (a checkpoint only Spark reaches)."""
    if location.startswith("file:"):
        from urllib.parse import unquote, urlparse

        return Path(unquote(urlparse(location).path))
    return Path(location) if is_local(location) else None


def _lines(checkpoint: Path, batch_id: int) -> list[str] | None:
    try:
        return (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    except OSError:
        return None


def source_offset(checkpoint: Path, batch_id: int) -> dict[str, Any] | None:
    """The end offset Spark's offset log holds for batch ``batch_id`` of a query reading one
    source (None: no such batch, or no offset for it)."""
    lines = _lines(checkpoint, batch_id)
    # v1 / the batch's metadata / one line per source
    for line in (lines or [])[2:]:
        line = line.strip()
        if line and line != "-":
            offset = json.loads(line)
            return offset if isinstance(offset, dict) else None
    return None


def batch_ids(directory: Path) -> list[int]:
    """The batches a log directory (``offsets``, ``commits``) holds, in order."""
    try:
        return sorted(int(n) for n in (p.name for p in directory.iterdir()) if n.isdigit())
    except OSError:
        return []


def last_batch(checkpoint: Path) -> tuple[int, dict[str, Any]] | None:
    """Spark's last planned batch in a local checkpoint and its source's end offset (the query
    reads one source), when that batch is committed too; None otherwise (no batch yet, or one
    planned and not committed)."""
    planned = batch_ids(checkpoint / "offsets")
    if not planned or planned[-1] not in batch_ids(checkpoint / "commits"):
        return None
    offset = source_offset(checkpoint, planned[-1])
    return (planned[-1], offset) if offset is not None else None


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        raise FileExistsError(f"{path} exists: another run wrote this batch")
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class CheckpointLog:
    """The offset and commit logs of a local checkpoint of a query reading one source."""

    def __init__(self, checkpoint: Path, first_conf: dict[str, str] | None = None) -> None:
        self.root = Path(checkpoint)
        # the settings a new checkpoint records: FIRST_CONF, with the session's own values over it
        # (its shuffle partitions: Spark records the session's, and a restart keeps the checkpoint's)
        self.first_conf = {**FIRST_CONF, **(first_conf or {})}

    def planned(self) -> list[int]:
        return batch_ids(self.root / "offsets")

    def committed(self) -> list[int]:
        return batch_ids(self.root / "commits")

    def offset(self, batch_id: int) -> dict[str, Any] | None:
        return source_offset(self.root, batch_id)

    def ensure_metadata(self) -> None:
        """The query's id, as Spark writes it when it creates a checkpoint."""
        path = self.root / "metadata"
        if not path.exists():
            _write(path, json.dumps({"id": str(uuid.uuid4())}, separators=(",", ":")))

    def _conf(self, before: int) -> dict[str, Any]:
        for batch_id in reversed([b for b in self.planned() if b < before]):
            lines = _lines(self.root, batch_id)
            if lines and len(lines) > 1:
                try:
                    conf = json.loads(lines[1]).get("conf")
                except ValueError:
                    continue
                if isinstance(conf, dict):
                    return conf
        return dict(self.first_conf)

    def write_offsets(self, batch_id: int, offset: dict[str, Any]) -> None:
        """Batch ``batch_id`` is planned to end at ``offset`` (before it runs, as Spark does)."""
        meta = {
            "batchWatermarkMs": 0,
            "batchTimestampMs": int(time.time() * 1000),
            "conf": self._conf(batch_id),
        }
        text = "v1\n" + json.dumps(meta, separators=(",", ":")) + "\n" + json.dumps(offset)
        _write(self.root / "offsets" / str(batch_id), text)

    def write_commit(self, batch_id: int) -> None:
        """Batch ``batch_id`` is done (after its sink staged it, as Spark does)."""
        _write(self.root / "commits" / str(batch_id), 'v1\n{"nextBatchWatermarkMs":0}')
        self._purge(batch_id)

    def _purge(self, newest: int) -> None:
        below = newest - RETAIN + 1
        if below <= 0:
            return
        for log in ("offsets", "commits"):
            for batch_id in batch_ids(self.root / log):
                if batch_id >= below:
                    break
                for name in (str(batch_id), f".{batch_id}.crc"):
                    try:
                        (self.root / log / name).unlink()
                    except FileNotFoundError:
                        pass


__all__ = [
    "FIRST_CONF",
    "RETAIN",
    "CheckpointLog",
    "batch_ids",
    "checkpoint_root",
    "is_local",
    "last_batch",
    "source_offset",
]
