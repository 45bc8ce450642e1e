"""Deletion vectors (format v3): a batch's position deletes become one vector per data file.

A v3 table takes no new position delete files (spec, "Delete Formats"): the key index's
positions - written by the batch as a position delete file, which staging keeps for recovery -
become, when the batch commits, one deletion vector per data file they name, merged with what
already deletes rows of that file (its live vector, or on a table upgraded from v2 the position
delete files that apply to it), all the batch's vectors in one Puffin file. The vectors they
replace leave the table in the same snapshot, so a data file never has two live vectors (spec).

This runs inside the commit, against the snapshot the batch commits on top of (the transaction's
metadata, earlier batches of the same commit included), so a retried commit merges again with
what is live then. The position delete file stays with the staged batch until the batch is
committed; then nothing references it and orphan cleanup removes it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("icesql.commit")


@dataclass
class VectorChange:
    """What one batch's commit does to a v3 table's deletion vectors."""

    added: list[Any] = field(default_factory=list)  # pyiceberg DataFiles of the new vectors
    removed: list[Any] = field(default_factory=list)  # LiveFiles of the vectors they replace
    puffin_path: str | None = None
    rows: int = 0  # positions newly deleted


def is_position_file(data_file: Any) -> bool:
    """A position delete file, not a deletion vector."""
    from icesql.engine.iceberg.deletes import is_deletion_vector

    return int(data_file.content) == 1 and not is_deletion_vector(data_file)


def to_deletion_vectors(table: Any, metadata: Any, position_files: Sequence[Any]) -> VectorChange:
    """The deletion vectors that replace ``position_files`` (pyiceberg DataFiles of the batch's
    position delete files) on the snapshot ``metadata`` makes current; their Puffin file is
    written, nothing is committed."""
    import numpy as np

    from icesql.engine.iceberg.deletes import DeleteIndex, file_positions
    from icesql.engine.iceberg.table_files import live_files
    from icesql.errors import ExecutionError

    change = VectorChange()
    wanted: dict[str, list[Any]] = {}
    for f in position_files:
        for path, positions in file_positions(table.io, f).items():
            wanted.setdefault(path, []).append(positions)
    if not wanted:
        return change
    snapshot = metadata.current_snapshot()
    data, deletes = live_files(table, snapshot)
    by_path = {f.path: f for f in data}
    index = DeleteIndex(table, deletes)
    vectors: dict[str, Any] = {}
    targets: dict[str, Any] = {}
    for path, parts in wanted.items():
        target = by_path.get(path)
        if target is None:
            raise ExecutionError(
                f"the batch deletes rows of {path}, which is not a live data file of table "
                f"{'.'.join(table.name()) if isinstance(table.name(), tuple) else table.name()}",
                hint="another writer removed it: the sink restarts, its key index catching up with the table",
            )
        new = np.unique(np.concatenate(parts).astype(np.int64))
        old = index.positions(target)
        merged = np.union1d(new, np.concatenate(old)) if old else new
        if len(merged) and int(merged[-1]) >= target.rows:
            raise ExecutionError(
                f"a deletion vector for {path} would delete position {int(merged[-1])}, "
                f"past its {target.rows} rows",
                hint="the key index does not match the table: drop the sink's key index to rebuild it",
            )
        change.rows += len(merged) - sum(len(o) for o in old) if old else len(merged)
        vectors[path] = merged
        targets[path] = target
        dv = index.deletion_vector(target)
        if dv is not None:
            change.removed.append(dv)
    change.added, change.puffin_path = _write(table, vectors, {p: (t.data_file.partition, t.spec_id) for p, t in targets.items()})
    return change


def new_files_vectors(table: Any, position_files: Sequence[Any], new_files: Sequence[Any]) -> tuple[list[Any], str | None]:
    """The deletion vectors of ``position_files`` (deletes a compaction carries over onto the
    data files it writes, ``new_files``, which have none yet): (their DataFiles, the Puffin path)."""
    import numpy as np

    from icesql.engine.iceberg.deletes import file_positions

    targets = {str(f.file_path): (f.partition, int(f.spec_id)) for f in new_files}
    wanted: dict[str, list[Any]] = {}
    for f in position_files:
        for path, positions in file_positions(table.io, f).items():
            wanted.setdefault(path, []).append(positions)
    vectors = {p: np.unique(np.concatenate(parts).astype(np.int64)) for p, parts in wanted.items()}
    return _write(table, vectors, targets)


def _write(table: Any, vectors: dict[str, Any], targets: dict[str, tuple[Any, int]]) -> tuple[list[Any], str | None]:
    """One Puffin file holding ``vectors`` (data path -> positions); the DataFiles of its vectors,
    each in its data file's partition (``targets``: path -> (partition, spec id))."""
    from icesql.engine.base.pyiceberg_v3 import new_deletion_vector_file
    from icesql.engine.iceberg.puffin import write_puffin

    if not vectors:
        return [], None
    location = table.location_provider().new_data_location(f"{uuid.uuid4()}-deletes.puffin")
    size, written = write_puffin(table.io.new_output(location), vectors)
    out = []
    for v in written:
        partition, spec_id = targets[v.referenced_data_file]
        out.append(
            new_deletion_vector_file(
                puffin_path=location,
                puffin_size=size,
                referenced=v.referenced_data_file,
                cardinality=v.cardinality,
                content_offset=v.content_offset,
                content_size=v.content_size_in_bytes,
                partition=partition,
                spec_id=spec_id,
            )
        )
    return out, location


__all__ = ["VectorChange", "is_position_file", "new_files_vectors", "to_deletion_vectors"]
