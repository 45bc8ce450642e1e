"""Spark warmed for running sinks, in the background: Spark's Python workers started and their
imports done, and where Spark's streaming query runs the source, the Arrow path's data source
registered and (on request) one throwaway streaming query of it, so a sink's first batch does not
pay for them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("icesql.engine")


class Warmer:
    """The warm-up of one engine's Spark session (``Engine.warm_up``): done once, joined on demand."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers = False
        self._query = False
        self._thread: threading.Thread | None = None

    def warm_up(self, spark_of: Callable[[], Any], *, query: bool = False) -> None:
        """Prepare Spark for running sinks, in the background, once per engine: start Spark's
        Python workers, and where Spark's own streaming query will run a sink's source (Spark
        Connect, ``ICESQL_PLANNED_BATCHES=0``: ``backends.spark.planned``) register the Arrow
        path's data source, and with ``query`` run one throwaway streaming query of it over a
        one-line file.

        All of it costs Python processes and JVM code that Spark starts or loads on demand:
        registering a Python data source makes Spark look up installed ones in a fresh Python
        (about 1 s); a session's first query of a Python streaming source spends about 2 s more
        before its first batch than the next query does; and a fresh worker spends 1-3 s importing
        pyarrow and pyiceberg's writer path before it writes its first row. ``start_sink`` calls
        this (without ``query``: the sink's own query is about to pay that cost, and another at
        the same time would only compete with it) while the driver prepares the sink (catalog,
        table, recovery, query start); ``icesql.Session.warm_up`` (with ``query``) lets a
        program call it earlier. A tiny job of an Arrow stage per core warms a worker for each
        task (two chained stages where a task of the data source's stream also holds a worker
        that reads its piece rows), and Spark reuses
        those workers for the sink's tasks (``spark.python.worker.reuse``, on by default). Best
        effort: any failure is ignored. ``ICESQL_WARM_WORKERS=0`` turns it off.
        """
        with self._lock:
            if self._workers and not (query and not self._query):
                return
            workers = not self._workers
            self._workers = True
            self._query = self._query or query
        from icesql import settings

        if not settings.WARM_WORKERS.enabled():
            return
        spark = spark_of()
        previous = self._thread

        def run() -> None:
            from icesql.engine.backends.spark.planned import plans_batches
            from icesql.engine.sources.files.source import register

            if previous is not None:
                previous.join()
            planned = plans_batches(spark)
            try:
                if not planned:  # Spark's streaming query of the data source: registered, warmed
                    register(spark)  # a sink registering it meanwhile waits for this one (a lock)
                    if query:
                        warm_query(spark)
            except Exception:  # noqa: BLE001 - the sink registers it again and reports the error
                log.debug("warming the files data source failed", exc_info=True)
            if not workers:
                return
            try:
                n = int(spark.sparkContext.defaultParallelism)
            except Exception:  # Spark Connect has no SparkContext
                n = 2
            n = max(1, min(n, 64))
            try:
                schema = warm_schema()
                job = spark.range(0, n, 1, n).mapInArrow(warm_worker, schema)
                if not planned:  # a task of the data source's stream holds a reading worker too
                    job = job.mapInArrow(warm_worker, schema)
                job.collect()
            except Exception:  # noqa: BLE001 - an optimisation only (e.g. the session is stopping)
                log.debug("warming the Python workers failed", exc_info=True)

        self._thread = threading.Thread(target=run, name="icesql-warm-up", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for ``warm_up`` to finish (a no-op when it was never started)."""
        if self._thread is not None:
            self._thread.join(timeout)


def warm_schema() -> Any:  # built here: a DDL string costs a parse by the JVM
    from pyspark.sql.types import IntegerType, StructField, StructType

    return StructType([StructField("ok", IntegerType())])


def warm_query(spark: Any) -> None:
    """Run a streaming query of the files data source over one one-line file, to the end."""
    import shutil
    import tempfile
    import time

    from icesql.engine.sources.files.source import NAME, PIECE_SCHEMA

    scratch = Path(tempfile.mkdtemp(prefix="icesql-warm-"))
    try:
        (scratch / "in").mkdir()
        (scratch / "in" / "one.json").write_text('{"a": 1}\n')
        df = (
            spark.readStream.format(NAME)
            .schema(PIECE_SCHEMA)
            .options(path=str(scratch / "in"), format="json", log=str(scratch / "log"))
            .load()
        )
        writer = df.writeStream.foreachBatch(collect_batch).queryName(f"icesql_warm_up_{scratch.name}")
        started = time.monotonic()
        q = (
            writer.option("checkpointLocation", str(scratch / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        if not q.awaitTermination(120):
            q.stop()
        log.debug("warm-up: a query of the files data source ran in %.1fs", time.monotonic() - started)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def collect_batch(batch_df: Any, batch_id: int) -> None:
    batch_df.collect()


def warm_worker(batches: Any) -> Any:
    """``mapInArrow`` body of the warm-up job: import what the sink's tasks need (``FileWriterTask``,
    the Arrow path's piece reader and writer), emit one row per task for the next stage."""
    import pyarrow as pa
    import pyiceberg.io.pyarrow  # noqa: F401 - FileIO, statistics, writer properties
    import pyiceberg.table.locations  # noqa: F401

    import icesql.engine.iceberg.writer  # noqa: F401
    import icesql.engine.sink.batch  # noqa: F401
    import icesql.engine.sources.files.source  # noqa: F401 - the piece reader (a Python data source)
    import icesql.engine.sources.pieces  # noqa: F401 - the Arrow path's tasks

    for _ in batches:
        pass
    return iter([pa.RecordBatch.from_pydict({"ok": pa.array([1], pa.int32())})])
