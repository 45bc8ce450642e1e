"""The in-process backend's frames (``backends.base.Frame``): a batch's rows as Arrow, in groups, each
group a task's input; tasks run as threads, at most as many at a time as the session has cores."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from icesql.engine.backends.local.threads import map_in_threads
from icesql.engine.base.changelog import OP, last_per_key

# spark.sql.adaptive.coalescePartitions.minPartitionSize: the smallest partition Spark's adaptive
# execution leaves after a shuffle
COALESCED_MIN_BYTES = 1 << 20


class LocalFrame:
    """Arrow batches in groups (one group per task, as Spark's partitions are)."""

    in_process = True

    def __init__(self, groups: Sequence[Sequence[Any]], parallelism: int, schema: Any = None) -> None:
        self.groups = [list(g) for g in groups]
        self.parallelism = max(1, parallelism)
        self._schema = schema  # the Arrow schema when the frame may hold no batch at all

    @staticmethod
    def of_table(table: Any, parallelism: int, groups: int | None = None) -> LocalFrame:
        """``table`` cut into ``groups`` contiguous slices (as many as there are cores by default)."""
        step = max(1, -(-table.num_rows // max(1, groups or parallelism)))
        slices = [table.slice(i, step).to_batches() for i in range(0, table.num_rows, step)]
        return LocalFrame(slices, parallelism, table.schema)

    @staticmethod
    def of_rows(rows: Any) -> LocalFrame:
        """The decoded changes of a batch's pieces (``local.query.LocalRows``), one group per piece
        partition as Spark's mapped DataFrame has them (so a batch that is written as it was read
        writes the files Spark would)."""
        from icesql.engine.base.hooks import mark

        groups = rows.groups()
        mark("changes decoded")
        return LocalFrame(groups, rows.parallelism, arrow_schema_of(rows.schema))

    def table(self) -> Any:
        import pyarrow as pa

        batches = [b for g in self.groups for b in g]
        if not batches:
            return pa.schema([]).empty_table() if self._schema is None else self._schema.empty_table()
        # the batches' own schemas (the tasks' exact types), promoted where tasks differ (a column
        # all null in one task's rows)
        return pa.concat_tables([pa.Table.from_batches([b]) for b in batches], promote_options="default")

    def _of(self, table: Any) -> LocalFrame:
        return LocalFrame.of_table(table, self.parallelism)

    @property
    def columns(self) -> list[str]:
        first = next((b for g in self.groups for b in g), None)
        if first is not None:
            return list(first.schema.names)
        return [] if self._schema is None else list(self._schema.names)

    def _each(self, change: Callable[[Any], Any], schema: Any = None) -> LocalFrame:
        """The frame with ``change`` applied to every batch, its groups kept."""
        return LocalFrame([[change(b) for b in g] for g in self.groups], self.parallelism, schema)

    def select(self, names: Sequence[str]) -> LocalFrame:
        schema = None if self._schema is None else pa_select(self._schema, names)
        return self._each(lambda b: b.select(list(names)), schema)

    def without_deletes(self) -> LocalFrame:
        import pyarrow.compute as pc

        if OP not in self.columns:
            return self
        return self._each(
            lambda b: b.filter(pc.fill_null(pc.not_equal(b.column(OP), "d"), True)), self._schema
        )

    def last_per_key(self, key: Sequence[str]) -> LocalFrame:
        import pyarrow as pa
        import pyarrow.compute as pc

        t = self.table()
        if not t.num_rows:
            return self
        null_key = pc.is_null(t.column(key[0]))
        for k in key[1:]:
            null_key = pc.or_(null_key, pc.is_null(t.column(k)))
        last = last_per_key(t.filter(pc.invert(null_key)), key)
        out = pa.concat_tables([last, t.filter(null_key).cast(last.schema)])
        # Spark shuffles the rows by KEY, and its adaptive execution coalesces the shuffle's
        # partitions (parallelism first: as many as the cores, none under 1 MiB): as many groups
        # here, so the files written from them are as many as Spark's
        groups = max(1, min(self.parallelism, -(-out.nbytes // COALESCED_MIN_BYTES)))
        return LocalFrame.of_table(out, self.parallelism, groups)

    def by_shard(self, key: Sequence[str], shards: int, table_schema: Any) -> LocalFrame:
        from icesql.engine.backends.hashing import by_shard, key_arrow_fields, shards_of
        from icesql.engine.base.wire import SHARD

        t = self.table()
        types = {f.name: f.type for f in key_arrow_fields(table_schema, key)}
        shard = shards_of([t.column(k).cast(types[k]) for k in key], shards)
        return LocalFrame(by_shard(t.append_column(SHARD, shard), shard), self.parallelism)

    def map(self, task: Callable[[Any], Any], schema: Any) -> LocalFrame:
        outputs = map_in_threads(task, self.groups, min(len(self.groups), self.parallelism))
        return LocalFrame(outputs, self.parallelism, arrow_schema_of(schema))

    def rows(self) -> list[dict[str, Any]]:
        return [r for g in self.groups for b in g for r in b.to_pylist()]

    def arrow(self) -> Any:
        return self.table()


def arrow_schema_of(schema: Any) -> Any:
    """The Arrow schema of a Spark ``StructType``, for a frame no task wrote a batch to (None for a
    DDL string, which would need Spark's parser). Timestamps are UTC, as Spark's Arrow batches are."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if not hasattr(schema, "fields"):
        return None
    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # a pyspark whose to_arrow_schema takes no time zone
        return to_arrow_schema(schema)


def pa_select(schema: Any, names: Sequence[str]) -> Any:
    """``schema`` with only ``names``, in that order."""
    import pyarrow as pa

    return pa.schema([schema.field(n) for n in names])


class LocalBackend:
    """A sink's batches in this process (``local.query.LocalSession``: its cores and time zone)."""

    name = "local"

    def __init__(self, session: Any) -> None:
        self.session = session

    @property
    def parallelism(self) -> int:
        return int(self.session.parallelism)

    @property
    def time_zone(self) -> str:
        return str(self.session.time_zone)

    @property
    def timestamp_type(self) -> str:
        return str(self.session.timestamp_type)

    def spark_for(self, reason: str) -> Any:
        from icesql.engine.backends.local.query import SparkNeeded

        raise SparkNeeded(reason)

    def stream(
        self,
        name: str,
        schema: Any,
        options: Mapping[str, str],
        *,
        register: Callable[[Any], None],
        reader: Callable[[], Any],
        needs_spark: Callable[[BaseException], str | None],
        cheap_checks: bool = True,
    ) -> Any:
        from icesql.engine.backends.local.query import LocalStreamFrame

        return LocalStreamFrame(
            reader, schema, needs_spark, parallelism=self.parallelism, cheap_checks=cheap_checks
        )

    def accumulator(self, initial: Any, param: Any = None) -> Any:
        """An accumulator the tasks of this process (threads) add to: a number, or a list
        (``param``: Spark's ``AccumulatorParam``, whose ``addInPlace`` joins two values)."""
        return LocalCounter(initial, param)


    def frame(self, columns: Mapping[str, Sequence[Any]], partitions: int) -> LocalFrame:
        import pyarrow as pa

        batch = pa.RecordBatch.from_pydict({n: pa.array(list(v), pa.string()) for n, v in columns.items()})
        n = batch.num_rows
        step = max(1, -(-n // max(1, partitions)))
        return LocalFrame([[batch.slice(i, step)] for i in range(0, n, step)], self.parallelism, batch.schema)

    def start_query(
        self,
        stream: Any,
        foreach_batch: Callable[[Any, int], None],
        *,
        checkpoint: str,
        name: str,
        interval: float | None,
    ) -> Any:
        """Spark's micro-batch loop in this process (``local.query.LocalQuery``) over the source's
        reader (``stream``: a ``local.query.LocalStreamFrame``) and the same checkpoint."""
        from icesql.engine.backends.local.query import LocalQuery

        first_conf = {"spark.sql.shuffle.partitions": str(self.session.shuffle_partitions)}
        return LocalQuery(stream, foreach_batch, checkpoint, name, interval, first_conf).start()


class LocalCounter:
    """Spark's accumulator for tasks that are threads of this process: ``add``, ``value``."""

    def __init__(self, initial: Any, param: Any = None) -> None:
        import threading

        self._value = initial
        self._param = param
        self._lock = threading.Lock()

    def add(self, amount: Any) -> None:
        with self._lock:
            if self._param is None:
                self._value += amount
            else:
                self._value = self._param.addInPlace(self._value, amount)

    @property
    def value(self) -> Any:
        return self._value

    @value.setter
    def value(self, value: Any) -> None:  # the driver empties it between batches, as Spark's
        with self._lock:
            self._value = value


__all__ = ["LocalBackend", "LocalCounter", "LocalFrame"]
