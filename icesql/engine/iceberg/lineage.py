"""Row lineage kept through a rewrite (format v3): the spec's reserved ``_row_id`` and
``_last_updated_sequence_number`` columns.

A v3 row's id is its data file's inherited ``first_row_id`` plus its position in the file, unless
the file holds the id itself (a ``_row_id`` column, non-null); likewise its last-updated sequence
number is the file's data sequence number unless the file holds one. A rewrite that moves rows to
new files (compaction) must keep both (spec, "Row Lineage"): it writes them into the new files as
those two columns, so the rows keep their ids where Iceberg Java and Spark read ``_row_id``.

An upsert that replaces a row keeps the old row's id too (what Iceberg Java's merge-on-read
``UPDATE`` does): the key index knows where the old row is (file and position), ``row_id_bases``
gives each live data file's ``first_row_id`` (and whether it stores ids), and ``replaced_row_ids``
turns the replaced rows into their ids; the new row is written with that ``_row_id`` and a null
``_last_updated_sequence_number`` (it takes the commit's). A row replaced before its own file was
committed (two batches of one commit) has no id yet: its new version gets a new one.
"""

from __future__ import annotations

from typing import Any

ROW_ID_FIELD_ID = 2147483540
ROW_ID = "_row_id"
LAST_UPDATED_FIELD_ID = 2147483539
LAST_UPDATED = "_last_updated_sequence_number"


def lineage_schema() -> Any:
    """The two reserved columns as an Iceberg schema (optional longs)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    return Schema(
        NestedField(ROW_ID_FIELD_ID, ROW_ID, LongType(), required=False),
        NestedField(LAST_UPDATED_FIELD_ID, LAST_UPDATED, LongType(), required=False),
    )


def with_lineage(schema: Any) -> Any:
    """``schema`` (a table's) plus the two reserved columns: what a rewrite's files hold."""
    from pyiceberg.schema import Schema

    return Schema(*schema.fields, *lineage_schema().fields, schema_id=schema.schema_id)


def lineage_columns(io: Any, f: Any, kept: Any) -> dict[str, Any] | None:
    """The ``_row_id`` and ``_last_updated_sequence_number`` of the rows of data file ``f`` (a
    ``LiveFile``) at positions ``kept`` (a sorted int64 numpy array), as Arrow arrays; None when
    ``f`` has no row ids (a file of a v2 table no v3 snapshot has listed yet)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from icesql.engine.base.pyiceberg_v3 import first_row_id
    from icesql.engine.iceberg import formats

    first = first_row_id(f.data_file)
    if first is None:
        return None
    stored = formats.read_by_id(io, f.path, lineage_schema(), f.file_format).take(pa.array(kept, pa.int64()))
    inherited_ids = pa.array(np.asarray(kept, dtype=np.int64) + int(first), pa.int64())
    inherited_seq = pa.scalar(int(f.sequence_number), pa.int64())
    return {
        ROW_ID: pc.coalesce(stored.column(ROW_ID).combine_chunks(), inherited_ids),
        LAST_UPDATED: pc.coalesce(stored.column(LAST_UPDATED).combine_chunks(), inherited_seq),
    }


def row_id_bases(table: Any) -> dict[str, tuple[int, bool]]:
    """``data file path -> (first_row_id, whether the file stores _row_id)`` of the live data
    files of ``table``'s current snapshot that have row ids (the second from the file's column
    metrics: a file icesql or Iceberg Java wrote with the column counts its values)."""
    from icesql.engine.base.pyiceberg_v3 import first_row_id
    from icesql.engine.iceberg.table_files import live_files

    data, _ = live_files(table, table.current_snapshot())
    out: dict[str, tuple[int, bool]] = {}
    for f in data:
        first = first_row_id(f.data_file)
        if first is not None:
            out[f.path] = (int(first), ROW_ID_FIELD_ID in (f.data_file.value_counts or {}))
    return out


def replaced_row_ids(io: Any, found: Any, bases: dict[str, tuple[int, bool]], key: list[str], path: str, pos: str) -> Any:
    """``found`` (the key index's entries of the rows a batch replaces: KEY columns, file
    ``path`` and position ``pos`` as plain columns) as ``KEY..., _row_id`` - one row per KEY (the
    smallest id when a KEY not enforced has several rows), without the rows whose file has no id
    yet."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    paths = found.column(path).to_pylist()
    positions = found.column(pos).to_numpy(zero_copy_only=False).astype(np.int64)
    ids = np.full(len(paths), -1, dtype=np.int64)
    by_file: dict[str, list[int]] = {}
    for i, p in enumerate(paths):
        by_file.setdefault(p, []).append(i)
    for p, rows in by_file.items():
        base = bases.get(p)
        if base is None:
            continue
        idx = np.asarray(rows, dtype=np.int64)
        ids[idx] = positions[idx] + base[0]
        if base[1]:  # the file stores ids: a stored one wins
            from icesql.engine.iceberg import formats

            stored = formats.read_by_id(io, p, lineage_schema()).column(ROW_ID).combine_chunks()
            taken = stored.take(pa.array(positions[idx], pa.int64()))
            ids[idx] = pc.coalesce(taken, pa.array(ids[idx], pa.int64())).to_numpy(zero_copy_only=False)
    keep = ids >= 0
    table = found.select(key).filter(pa.array(keep)).append_column(ROW_ID, pa.array(ids[keep], pa.int64()))
    return table.group_by(key, use_threads=False).aggregate([(ROW_ID, "min")]).rename_columns([*key, ROW_ID])


__all__ = [
    "LAST_UPDATED",
    "ROW_ID",
    "lineage_columns",
    "lineage_schema",
    "replaced_row_ids",
    "row_id_bases",
    "with_lineage",
]
