"""The Spark backend's frames (``backends.base.Frame``): a batch's rows as a Spark DataFrame, classic
or Connect; each operation is one of Spark's, so the work runs on the executors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from icesql.engine.base.changelog import OP, POSITION, quote_column


class SparkFrame:
    """A Spark DataFrame as a ``Frame`` (picklable as far as the DataFrame is: it is not; it stays
    on the driver, and only the tasks travel)."""

    in_process = False

    def __init__(self, df: Any) -> None:
        self.df = df

    @property
    def columns(self) -> list[str]:
        return list(self.df.columns)

    def select(self, names: Sequence[str]) -> SparkFrame:
        from pyspark.sql import functions as F

        return SparkFrame(self.df.select(*[F.col(quote_column(c)) for c in names]))

    def without_deletes(self) -> SparkFrame:
        from pyspark.sql import functions as F

        return SparkFrame(self.df.filter(F.col(OP).isNull() | (F.col(OP) != F.lit("d"))))

    def last_per_key(self, key: Sequence[str]) -> SparkFrame:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        cols = set(self.df.columns)
        order = [F.col(c).desc_nulls_last() for c in POSITION if c in cols] or [F.lit(1)]
        w = Window.partitionBy(*[F.col(quote_column(k)) for k in key]).orderBy(*order)
        null_key = F.lit(False)
        for k in key:
            null_key = null_key | F.col(quote_column(k)).isNull()
        return SparkFrame(
            self.df.withColumn("__rn", F.row_number().over(w))
            .filter((F.col("__rn") == 1) | null_key)
            .drop("__rn")
        )

    def by_shard(self, key: Sequence[str], shards: int, table_schema: Any) -> SparkFrame:
        from icesql.engine.backends.hashing import key_spark_types, shard_expression
        from icesql.engine.base.wire import SHARD

        df = self.df.withColumn(SHARD, shard_expression(key, key_spark_types(table_schema, key), shards))
        return SparkFrame(df.repartition(shards, SHARD))

    def map(self, task: Callable[[Any], Any], schema: Any) -> SparkFrame:
        return SparkFrame(self.df.mapInArrow(task, schema))

    def rows(self) -> list[dict[str, Any]]:
        return [r.asDict() for r in self.df.collect()]

    def arrow(self) -> Any:
        return self.df.toArrow()


class SparkBackend:
    """A sink's batches on a Spark session (classic, or Spark Connect)."""

    def __init__(self, spark: Any) -> None:
        from icesql.engine.backends.spark.session import is_connect

        self.spark = spark
        self.name = "connect" if is_connect(spark) else "spark"

    @property
    def parallelism(self) -> int:
        from icesql.engine.backends.spark.session import parallelism

        return int(parallelism(self.spark))

    @property
    def time_zone(self) -> str:
        from icesql.engine.backends.spark.session import session_time_zone

        return str(session_time_zone(self.spark))

    @property
    def timestamp_type(self) -> str:
        return str(self.spark.conf.get("spark.sql.timestampType", "TIMESTAMP_LTZ"))

    def spark_for(self, reason: str) -> Any:
        return self.spark

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
        from icesql.engine.backends.spark.planned import PlannedStream, plans_batches

        def streaming() -> Any:
            register(self.spark)
            return self.spark.readStream.format(name).schema(schema).options(**options).load()

        if not plans_batches(self.spark):
            return streaming()

        return PlannedStream(
            self.spark,
            streaming,
            reader,
            schema,
            needs_spark,
            parallelism=self.parallelism,
            cheap_checks=cheap_checks,
        )

    def accumulator(self, initial: Any, param: Any = None) -> Any:
        try:
            return self.spark.sparkContext.accumulator(initial, param)
        except Exception:  # Spark Connect has no accumulators
            return None

    def frame(self, columns: Mapping[str, Sequence[Any]], partitions: int) -> SparkFrame:
        names = list(columns)
        rows = list(zip(*[columns[n] for n in names], strict=True))
        ddl = ", ".join(f"{quote_column(n)} string" for n in names)
        df = self.spark.createDataFrame(rows, ddl)
        return SparkFrame(df.repartition(max(1, partitions)))

    def start_query(
        self,
        stream: Any,
        foreach_batch: Callable[[Any, int], None],
        *,
        checkpoint: str,
        name: str,
        interval: float | None,
    ) -> Any:
        from icesql.engine.backends.checkpoint import local_path
        from icesql.engine.backends.spark.planned import PlannedStream

        if isinstance(stream, PlannedStream):
            if local_path(checkpoint) is not None:  # the batches planned here, run on Spark
                from icesql.engine.backends.local.query import LocalQuery

                shuffle = str(self.spark.conf.get("spark.sql.shuffle.partitions"))
                first_conf = {"spark.sql.shuffle.partitions": shuffle}
                return LocalQuery(stream, foreach_batch, checkpoint, name, interval, first_conf).start()
            stream = stream.streaming_frame()
        writer = stream.writeStream.foreachBatch(foreach_batch).option("checkpointLocation", checkpoint)
        writer = writer.queryName(name)
        if interval is None:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{int(interval * 1000)} milliseconds")
        return writer.start()


__all__ = ["SparkBackend", "SparkFrame"]
