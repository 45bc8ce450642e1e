"""=== THE ICESQL HOOKS: wire these to the engine when it lands. ===

Each function runs in its own child process (project venv, via ``workers/entry.py``) so the
parent can sample the memory of the whole process tree (driver JVM + Python workers); it gets
plain paths and an empty ``home`` directory and returns a result dict. Until wired, each raises
``NotImplementedError("engine not yet available")`` and ``run.py`` reports "n/a".

What each must return (extra keys are kept and shown in the JSON):

* ``run_icesql_append``   -> ``finish_append(seconds, metadata_location, rows, arrow_bytes)``
  (``seconds`` = from the moment the sink starts running until its last commit, excluding the
  SparkSession start, which goes to ``session_seconds``, as for the Spark baselines).
* ``run_icesql_upsert``   -> ``{"seconds": <sum over the batches>, "batch_seconds": [...],
  "metadata": <location>, "changes": <n>}`` (the table is then read by DuckDB and Java).
* ``run_icesql_streaming`` -> ``{"metadata": <location>}`` (latencies come from the snapshot log).
* ``measure_commit_overhead`` -> ``{"p50_ms": ..., "p99_ms": ..., "n": ...}``.

Same Spark settings as the baselines: pass ``spark_conf`` (master ``local[*]``, driver memory 4g,
UI off, UTC) to the SparkSession given to ``icesql.Session(home=..., spark=...)``;
``workers.common.spark_session(app, conf=spark_conf)`` builds exactly that session, and
``workers.common.warm_up(spark, files, scratch_dir)`` (read one input file, write it as Parquet)
must run before the timed phase, as it does in every Spark baseline.
"""

from __future__ import annotations

from typing import Any

from benchmarks.workers.common import file_stats, throughput

ENGINE_MISSING = "engine not yet available"
# The shell prompt that ends "time to prompt" (pexpect regex); adjust to the real prompt.
ICESQL_PROMPT_RE = r"icesql[^\r\n]{0,40}> "  # icesql/repl/shell.py PROMPT = "icesql> "


def finish_append(seconds: float, metadata: str, rows: int, arrow_bytes: int, **extra: Any) -> dict[str, Any]:
    """Throughput + data-file statistics read back from the table (pyiceberg)."""
    from pyiceberg.table import StaticTable

    t = StaticTable.from_metadata(metadata)
    tasks = list(t.scan().plan_files())
    out = throughput(rows, arrow_bytes, seconds)
    out.update(file_stats(sizes=[x.file.file_size_in_bytes for x in tasks]))
    out.update({"rows_in_table": sum(x.file.record_count for x in tasks),
                "snapshots": len(t.metadata.snapshots), "metadata": metadata})
    out.update(extra)
    return out


def _session(home: str, spark_conf: dict[str, str] | None) -> tuple[Any, Any, float]:
    """An ``icesql.Session`` on ``home`` with a SparkSession built like the baselines' one."""
    import icesql  # noqa: F401 - fails clearly if the package is broken
    from benchmarks.workers.common import spark_session

    spark, session_s = spark_session("bench-icesql", conf=spark_conf)
    return icesql.Session(home=home, spark=spark), spark, session_s  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------ append
def run_icesql_append(source_dir: str, files: list[str], rows: int, arrow_bytes: int, home: str, *,
                      partitioned: bool = False, codec: str = "zstd",
                      spark_conf: dict[str, str] | None = None) -> dict[str, Any]:
    """Append ``source_dir`` (Parquet, SPARK_DDL schema) into ``bench.t`` on a local catalog.

    Intended wiring (~15 lines)::

        s, spark, session_s = _session(home, spark_conf)
        wh = Path(home) / "warehouse"
        s.execute(f"CREATE CONNECTION cat TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}')")
        s.execute(f"CREATE SOURCE src FROM FILES '{source_dir}' (FORMAT = 'parquet')")
        part = "PARTITION BY (day(ts))" if partitioned else ""
        s.execute(f"CREATE SINK k FROM src INTO ICEBERG CATALOG cat (NAMESPACE = 'bench', TABLE = 't') "
                  f"MODE APPEND {part} WITH (PROPERTIES = ('write.parquet.compression-codec' = '{codec}'))")
        t0 = time.perf_counter(); s.run(once=True); secs = time.perf_counter() - t0
        meta = <metadata location of bench.t from the local catalog>
        s.close(); spark.stop()
        return finish_append(secs, meta, rows, arrow_bytes, session_seconds=session_s,
                             engine="icesql", codec=codec, partitioned=partitioned)
    """
    raise NotImplementedError(ENGINE_MISSING)


# ------------------------------------------------------------------------------------------ upsert
def run_icesql_upsert(base_files: list[str], base_dir: str, change_files: list[str],
                      debezium_files: list[str], expected_rows: int, home: str, *,
                      spark_conf: dict[str, str] | None = None) -> dict[str, Any]:
    """Load the 1M-key base, then apply the change batches one at a time, timing each batch.

    Inputs: ``base_dir`` (Parquet), ``change_files`` (Parquet, columns op I/U/D, batch, pos + row),
    ``debezium_files`` (JSON lines, op c/u/d, before/after, source.batch/pos). Intended wiring:
    create the table by an APPEND sink over ``base_dir`` with KEY (id) (run once, ``load_seconds``),
    then ``CREATE SOURCE ch FROM FILES '<home>/inbox' (FORMAT = 'debezium-json', SCHEMA = SPARK_DDL)``
    and ``CREATE SINK u FROM ch ... KEY (id) MODE UPSERT``; for each file: copy it into
    ``<home>/inbox`` (outside the timing), ``t0``; ``s.run(once=True)``; record the batch time.
    Return ``{"seconds": sum, "batch_seconds": [...], "changes": n, "metadata": location,
    "rows_in_table": ..., "load_seconds": ..., "engine": "icesql MODE UPSERT"}``.
    """
    raise NotImplementedError(ENGINE_MISSING)


# ------------------------------------------------------------------------------------------ streaming
def run_icesql_streaming(source_dir: str, home: str, duration_s: float, *, max_period: str = "1s",
                         min_size: str | None = None, ready_file: str | None = None,
                         spark_conf: dict[str, str] | None = None) -> dict[str, Any]:
    """Run an APPEND sink over ``source_dir`` (Parquet files arriving while it runs).

    WITH (MAXIMUM PERIOD = max_period[, MINIMUM SIZE = min_size]). Touch ``ready_file`` once the
    sink is started (the parent starts producing files then); run ``duration_s`` seconds; stop
    (shutdown commit). Return ``{"metadata": location, "rows_in_table": n, "engine": "icesql"}``;
    the parent computes latency p50/p99 and snapshots/files per minute from the snapshot log.
    """
    raise NotImplementedError(ENGINE_MISSING)


# ------------------------------------------------------------------------------------------ commit
def measure_commit_overhead(home: str, *, catalog: str = "local", commits: int = 30,
                            rows_per_commit: int = 100, rest: dict[str, str] | None = None) -> dict[str, Any]:
    """Per-commit time of the engine's commit path (``icesql.executor.commit``) for tiny files.

    ``catalog``: ``local`` (SQLite + warehouse under ``home``) or ``rest`` (``rest`` has uri,
    warehouse, key, s3_endpoint; the secret is in ``$BENCH_REST_SECRET``). Time only the commit
    of already written data files (what the driver does per commit). Return
    ``{"p50_ms", "p99_ms", "mean_ms", "n"}``.
    """
    raise NotImplementedError(ENGINE_MISSING)
