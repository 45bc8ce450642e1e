"""Which backend holds a batch's decoded changes: Spark's DataFrame or this process's Arrow rows."""

from __future__ import annotations

from typing import Any

from icesql.engine.base.hooks import mark


def write_batch(writer: Any, changes: Any, batch_id: int) -> list[dict[str, Any]]:
    """``writer``'s rows for one batch of ``changes``: a Spark DataFrame, or the rows a batch run
    without Spark decoded (``backends.local.query.LocalRows``), written from Arrow in this process."""
    from icesql.engine.backends.local.query import LocalRows

    if isinstance(changes, LocalRows):
        table = changes.arrow()
        mark("changes decoded")
        return writer.write_arrow(table, batch_id, changes.parallelism)
    return writer(changes, batch_id)
