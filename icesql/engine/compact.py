"""Compaction: rewrite a sink's table so that it holds no delete files and few data files.

An upsert sink adds an equality-delete file per staged batch. Readers apply every such file to
every older data file of its partition, and some apply them slowly: DuckDB needs minutes for a
table of 1M rows and 10 delete files that it reads in seconds without them (duckdb-iceberg#626,
iceberg-rust#2950). ``compact_table`` reads the current snapshot, applies the equality deletes
itself (a delete applies to the data files of its partition with a smaller data sequence number,
as the Iceberg spec says), writes the surviving rows as new data files (``DataFileWriter``:
field ids, statistics, partitioning, rollover at the target size) and commits one ``replace``
snapshot that removes every old data and delete file of the partitions it rewrote. Only the
partitions holding a delete file or several data files are rewritten; the files of the others
are carried over as they are. No Spark is involved.

The commit asserts that the table's current snapshot is still the one that was read, so a sink
committing meanwhile makes it fail; it is then redone on the new state (``retries`` times). A
sink's exactly-once bookkeeping is untouched: its progress stays in the ancestors' summaries,
which ``last_committed`` walks. Position deletes (icesql never writes them) are refused.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from icesql.errors import ExecutionError

log = logging.getLogger("icesql.compact")

COMPACT_REASON = "compact"


@dataclass(frozen=True)
class CompactResult:
    """What ``compact_table`` did (``icesql.repl.format.format_compaction`` prints it)."""

    table: str
    snapshot_id: int | None  # the replace snapshot (None when there was nothing to do)
    rows: int  # rows in the rewritten table
    deleted_rows: int  # rows the equality deletes removed
    data_files_before: int
    delete_files_before: int
    data_files_after: int
    bytes_before: int
    bytes_after: int
    duration: float
    attempts: int = 1
    data_files_kept: int = 0  # files of partitions that needed nothing, carried over as they were

    @property
    def skipped(self) -> bool:
        return self.snapshot_id is None


def _ident(table: Any) -> str:
    name = table.name()
    return ".".join(name) if isinstance(name, (tuple, list)) else str(name)


@dataclass(frozen=True)
class _Entry:
    data_file: Any
    sequence_number: int
    file_sequence_number: int | None
    snapshot_id: int | None  # the snapshot that added the file


def _live_entries(table: Any, snapshot: Any) -> tuple[list[_Entry], list[_Entry]]:
    """(data entries, equality-delete entries) of ``snapshot``; refuses position deletes."""
    from pyiceberg.manifest import DataFileContent

    data: list[_Entry] = []
    deletes: list[_Entry] = []
    for manifest in snapshot.manifests(table.io):
        for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            entry = _Entry(e.data_file, int(e.sequence_number or 0), e.file_sequence_number, e.snapshot_id)
            content = e.data_file.content
            if content == DataFileContent.DATA:
                data.append(entry)
            elif content == DataFileContent.EQUALITY_DELETES:
                deletes.append(entry)
            else:
                raise ExecutionError(
                    f"table {_ident(table)} has position delete files, which icesql does not compact",
                    hint="compact it with the engine that wrote them (e.g. Spark's rewrite_data_files)",
                )
    return data, deletes


def _read(io: Any, path: str, columns: list[str] | None = None) -> Any:
    import pyarrow.parquet as pq

    with io.new_input(path).open() as f:
        return pq.read_table(f, columns=columns)


def _surviving(table: Any, key_sets: list[tuple[list[str], Any]]) -> tuple[Any, int]:
    """``table`` without the rows whose key is in one of ``key_sets`` ((columns, keys table))."""
    import pyarrow as pa

    if not key_sets or table.num_rows == 0:
        return table, 0
    keep = pa.array(range(table.num_rows), pa.int64())
    for columns, keys in key_sets:
        probe = table.select(columns).take(keep).append_column("__row", keep)
        keys = keys.select(columns).group_by(columns).aggregate([])  # distinct keys
        survivors = probe.join(keys, keys=columns, join_type="left anti")
        keep = survivors.column("__row").combine_chunks()
        keep = keep.take(keep.to_numpy().argsort()) if len(keep) else keep  # file order
    out = table.take(keep)
    return out, table.num_rows - out.num_rows


def _split(data: list[_Entry], deletes: list[_Entry]) -> tuple[list[_Entry], list[_Entry]]:
    """(data files to rewrite, data files to keep): a partition is rewritten when it holds a delete
    file or several data files (an equality delete applies within its partition only)."""
    per_partition = Counter(repr(e.data_file.partition) for e in data)
    dirty = {repr(d.data_file.partition) for d in deletes} | {k for k, n in per_partition.items() if n > 1}
    rewrite = [e for e in data if repr(e.data_file.partition) in dirty]
    keep = [e for e in data if repr(e.data_file.partition) not in dirty]
    return rewrite, keep


def _rewrite(table: Any, data: list[_Entry], deletes: list[_Entry], write: Any) -> tuple[list[Any], int, int]:
    """Write the rows of ``data`` that ``deletes`` leave alive; (written files, rows, rows dropped)."""
    import pyarrow as pa

    from icesql.engine.writer import DataFileWriter

    spec = table.spec()
    schema = table.schema()
    delete_keys = []
    for d in deletes:
        columns = [schema.find_column_name(i) for i in d.data_file.equality_ids or []]
        if not columns or any(c is None for c in columns):
            raise ExecutionError(f"equality delete file {d.data_file.file_path} has unknown equality ids")
        delete_keys.append((d, [str(c) for c in columns], _read(table.io, d.data_file.file_path, columns)))
    names = [f.name for f in schema.fields]
    writer = DataFileWriter(write, "data")
    rows = dropped = 0
    try:
        for e in data:
            applicable: dict[tuple[str, ...], list[Any]] = {}
            for d, columns, keys in delete_keys:
                if d.sequence_number > e.sequence_number and (
                    spec.is_unpartitioned() or d.data_file.partition == e.data_file.partition
                ):
                    applicable.setdefault(tuple(columns), []).append(keys)
            key_sets = [(list(cols), pa.concat_tables(ts)) for cols, ts in applicable.items()]
            survivors, n = _surviving(_read(table.io, e.data_file.file_path, names), key_sets)
            dropped += n
            rows += survivors.num_rows
            if survivors.num_rows:
                writer.write(survivors)
        return writer.close(), rows, dropped
    except BaseException:
        writer.abort()
        raise


def compact_table(
    table: Any,
    *,
    io_properties: Mapping[str, str] | None = None,
    max_file_size: int | None = None,
    retries: int = 3,
    before_commit: Callable[[], None] | None = None,
) -> CompactResult:
    """Rewrite ``table`` (a pyiceberg Table) without delete files; see the module docstring.

    ``before_commit`` is a test hook, called after the new files are written."""
    from pyiceberg.exceptions import CommitFailedException

    from icesql.engine import pyiceberg_internals as internals
    from icesql.engine.commit import COMMIT_REASON, as_data_file
    from icesql.engine.writer import WriteSpec

    start = time.monotonic()
    ident = _ident(table)
    attempt = 0
    while True:
        attempt += 1
        table.refresh()
        snapshot = table.current_snapshot()
        data, deletes = _live_entries(table, snapshot) if snapshot is not None else ([], [])
        bytes_before = sum(int(e.data_file.file_size_in_bytes) for e in (*data, *deletes))
        rewrite, keep = _split(data, deletes)
        if not rewrite and not deletes:
            return CompactResult(
                table=ident,
                snapshot_id=None,
                rows=sum(int(e.data_file.record_count) for e in data),
                deleted_rows=0,
                data_files_before=len(data),
                delete_files_before=0,
                data_files_after=len(data),
                bytes_before=bytes_before,
                bytes_after=bytes_before,
                duration=time.monotonic() - start,
                attempts=attempt,
            )
        spec_id = table.spec().spec_id
        if any(e.data_file.spec_id != spec_id for e in (*rewrite, *deletes)):
            raise ExecutionError(
                f"table {ident} has files of an older partition spec",
                hint="icesql compacts tables with a single partition spec",
            )
        write = WriteSpec.from_table(table, max_file_size=max_file_size, io_properties=io_properties)
        written, rows, dropped = _rewrite(table, rewrite, deletes, write)
        fv = int(table.metadata.format_version)
        new_files = [as_data_file(f, fv) for f in written]
        if before_commit is not None:
            before_commit()
        tx = internals.transaction(table)
        producer = internals.replace_producer()(
            transaction=tx,
            io=table.io,
            removed=[*rewrite, *deletes],
            kept=keep,
            snapshot_properties={COMMIT_REASON: COMPACT_REASON},
        )
        for f in new_files:
            producer.append_data_file(f)
        try:
            internals.apply_producer(tx, producer)
            tx.commit_transaction()
        except CommitFailedException as exc:
            internals.discard_written([producer], table.io)
            for f in written:
                try:
                    table.io.delete(f.file_path)
                except Exception:  # pragma: no cover - best effort
                    log.debug("could not delete %s", f.file_path)
            if attempt > retries:
                raise ExecutionError(
                    f"compaction of {ident} failed after {attempt} attempts: {exc}",
                    hint="a sink keeps committing to the table; stop it, or run compact again",
                ) from exc
            log.warning("table %s changed while compacting; compacting again", ident)
            continue
        kept_files = [e.data_file for e in keep]
        return CompactResult(
            table=ident,
            snapshot_id=producer.snapshot_id,
            rows=rows + sum(int(f.record_count) for f in kept_files),
            deleted_rows=dropped,
            data_files_before=len(data),
            delete_files_before=len(deletes),
            data_files_after=len(new_files) + len(kept_files),
            bytes_before=bytes_before,
            bytes_after=sum(int(f.file_size_in_bytes) for f in [*new_files, *kept_files]),
            duration=time.monotonic() - start,
            attempts=attempt,
            data_files_kept=len(kept_files),
        )
