"""Row lineage kept through a rewrite (format v3): the spec's reserved ``_row_id`` and
``_last_updated_sequence_number`` columns.

A v3 row's id is its data file's inherited ``first_row_id`` plus its position in the file, unless
the file holds the id itself (a ``_row_id`` column, non-null); likewise its last-updated sequence
number is the file's data sequence number unless the file holds one. A rewrite that moves rows to
new files (compaction) must keep both (spec, "Row Lineage"): it writes them into the new files as
those two columns, so the rows keep their ids where Iceberg Java and Spark read ``_row_id``.
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


__all__ = ["LAST_UPDATED", "ROW_ID", "lineage_columns", "lineage_schema", "with_lineage"]
