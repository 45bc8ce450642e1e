"""Column statistics of a data file taken from the Arrow rows written into it.

Parquet files carry their own statistics, which pyiceberg reads from the footer
(``data_file_statistics_from_parquet_metadata``). pyarrow exposes no ORC statistics and Avro has
none, so the ORC and Avro writers count as they write: per Iceberg field id the values, nulls and
NaNs, and the lower and upper bounds, following the table's metrics modes
(``write.metadata.metrics.*``, pyiceberg's ``compute_statistics_plan``: bounds for top-level
columns, counts for nested ones, strings and binaries truncated to 16 bytes by default). What
manifests then carry is what they carry for a Parquet file, so readers prune ORC and Avro files
alike (Iceberg Java's Avro writer records no column statistics at all).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io.fileformat import DataFileStatistics


class ArrowStats:
    """Statistics of the rows of one file, ``update``d with every table written."""

    def __init__(self, file_schema: Any, properties: Mapping[str, str]) -> None:
        from pyiceberg.io.pyarrow import MetricModeTypes, compute_statistics_plan

        self._plan = compute_statistics_plan(file_schema, dict(properties))
        self._none = MetricModeTypes.NONE
        self._counts = MetricModeTypes.COUNTS
        self._schema = file_schema
        self.records = 0
        self.value_counts: dict[int, int] = {}
        self.null_counts: dict[int, int] = {}
        self.nan_counts: dict[int, int] = {}
        self._aggs: dict[int, Any] = {}

    def update(self, table: pa.Table) -> None:
        self.records += table.num_rows
        for fld, column in zip(self._schema.fields, table.columns, strict=True):
            for chunk in column.chunks:
                self._visit(fld.field_id, fld.field_type, chunk)

    def _visit(self, field_id: int, field_type: Any, arr: pa.Array) -> None:
        from pyiceberg.types import ListType, MapType, StructType

        if isinstance(field_type, StructType):
            children = arr.flatten()  # parent nulls merged into the children
            for child, sub in zip(field_type.fields, children, strict=True):
                self._visit(child.field_id, child.field_type, sub)
        elif isinstance(field_type, ListType):
            self._visit(field_type.element_id, field_type.element_type, arr.flatten())
        elif isinstance(field_type, MapType):
            offsets = arr.offsets  # keys and items are the unsliced children
            lo = offsets[0].as_py() if len(offsets) else 0
            n = (offsets[-1].as_py() - lo) if len(offsets) else 0
            self._visit(field_type.key_id, field_type.key_type, arr.keys.slice(lo, n))
            self._visit(field_type.value_id, field_type.value_type, arr.items.slice(lo, n))
        else:
            self._leaf(field_id, field_type, arr)

    def _leaf(self, field_id: int, field_type: Any, arr: pa.Array) -> None:
        col = self._plan.get(field_id)
        if col is None or col.mode.type == self._none:
            return
        self.value_counts[field_id] = self.value_counts.get(field_id, 0) + len(arr)
        self.null_counts[field_id] = self.null_counts.get(field_id, 0) + arr.null_count
        values = arr
        if pa.types.is_floating(arr.type):
            nan = pc.is_nan(arr)
            n_nan = pc.sum(nan).as_py() or 0
            self.nan_counts[field_id] = self.nan_counts.get(field_id, 0) + n_nan
            if n_nan:
                values = arr.filter(pc.invert(pc.fill_null(nan, False)))
        if col.mode.type == self._counts or len(values) == values.null_count:
            return
        try:
            lo, hi = _min_max(values)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, TypeError):
            return  # a type Arrow cannot order: counts only, no bounds
        agg = self._aggs.get(field_id)
        if agg is None:
            from icesql.engine.base.pyiceberg_internals import stats_aggregator

            agg = self._aggs[field_id] = stats_aggregator(field_type, col.mode.length)
        agg.update_min(lo)
        agg.update_max(hi)

    def result(self, column_sizes: Mapping[int, int] | None = None) -> DataFileStatistics:
        return DataFileStatistics(
            record_count=self.records,
            column_sizes=dict(column_sizes or {}),
            value_counts=dict(self.value_counts),
            null_value_counts=dict(self.null_counts),
            nan_value_counts=dict(self.nan_counts),
            column_aggregates=dict(self._aggs),
            split_offsets=[],
        )


def _min_max(values: pa.Array) -> tuple[Any, Any]:
    """Python values of the smallest and largest non-null value, as Parquet statistics give them
    to pyiceberg (datetimes, dates, Decimals, str, bytes, UUIDs)."""
    t = values.type
    if isinstance(t, pa.BaseExtensionType):
        values = values.storage
        t = values.type
    if pa.types.is_fixed_size_binary(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        # Arrow orders binaries bytewise, as Iceberg compares them (unsigned)
        mm = pc.min_max(values.cast(pa.large_binary()))
    else:
        mm = pc.min_max(values)
    return mm["min"].as_py(), mm["max"].as_py()


__all__ = ["ArrowStats"]
