"""=== THE ICESQL HOOKS: wire these to the engine when it lands. ===

Each function runs in its own child process (project venv, via ``workers/entry.py``) so the
parent can sample the memory of the whole process tree (driver JVM + Python workers); it gets
plain paths and an empty ``home`` directory and returns a result dict. They use the public path
(SQL through ``icesql.Session`` on the baselines' SparkSession, FILES sources, ``run(once=True)``);
the commit figure calls ``icesql.engine.commit.snapshot.commit`` directly on pre-written files.
``ICESQL_BENCH_PROFILE=<file>`` writes a pyinstrument profile of the timed phase (driver side).
``smoke(...)`` runs append, upsert and commit at tiny sizes in one process (tests/bench).

What each must return (extra keys are kept and shown in the JSON):

* ``run_icesql_append``   -> ``finish_append(seconds, metadata_location, rows, arrow_bytes)``
  (``seconds`` = from the moment the sink starts running until its last commit, excluding the
  SparkSession start, which goes to ``session_seconds``, as for the Spark baselines).
* ``run_icesql_upsert``   -> ``{"seconds": <sum over the batches>, "batch_seconds": [...],
  "metadata": <location>, "changes": <n>}`` (the table is then read by DuckDB and Java).
* ``run_icesql_streaming`` -> ``{"metadata": <location>}`` (latencies come from the snapshot log).
* ``measure_commit_overhead`` -> ``{"p50_ms": ..., "p99_ms": ..., "n": ...}``.

Same Spark settings as the baselines: pass ``spark_conf`` (master ``local[*]``, driver memory 4g,
UI off, UTC) to the SparkSession given to ``icesql.Session(home=..., spark=...)``, plus the Python
workers launcher ``icesql``'s own session builder uses for a local master (``_icesql_conf``);
``workers.common.spark_session(app, conf=spark_conf)`` builds exactly that session, and
``workers.common.warm_up(spark, files, scratch_dir)`` (read one input file, write it as Parquet)
must run before the timed phase, as it does in every Spark baseline; icesql's hooks add its own
warm-up there (``icesql.Session.warm_up``: what ``icesql run`` starts with its first sink).
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.procmon import cpu_seconds
from benchmarks.workers.common import file_stats, throughput


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


def _icesql_conf(spark_conf: dict[str, str] | None) -> dict[str, str]:
    """The baselines' settings plus what ``icesql``'s own session builder sets for a local
    master: Python workers through ``worker_python``'s launcher (pyspark from its package), and
    the driver JVM's collector (``DRIVER_GC``; Spark's logging is left as the baselines have it)."""
    from icesql.engine.backends.spark.session import DRIVER_GC, worker_python

    python = worker_python()
    os.environ["PYSPARK_PYTHON"] = python
    return {"spark.pyspark.python": python, "spark.driver.extraJavaOptions": DRIVER_GC, **(spark_conf or {})}


def _session(home: str, spark_conf: dict[str, str] | None) -> tuple[Any, Any, float]:
    """An ``icesql.Session`` on ``home`` with a SparkSession built like the baselines' one."""
    import icesql
    from benchmarks.workers.common import spark_session

    spark, session_s = spark_session("bench-icesql", conf=_icesql_conf(spark_conf))
    return icesql.Session(home=home, spark=spark), spark, session_s


def _warm_up(s: Any, spark: Any, files: list[str], scratch: Path) -> float:
    """The baselines' warm-up (read one input file, write it as Parquet) plus icesql's own
    (``Session.warm_up``: its data source registered, its Python workers started), which
    ``icesql run`` starts with its first sink; both outside the timed phase."""
    from benchmarks.workers.common import warm_up

    t0 = time.perf_counter()
    s.warm_up()
    warm_up(spark, files, scratch)
    s.engine.wait_warm()
    return round(time.perf_counter() - t0, 3)


def _connect(s: Any, home: str) -> Path:
    wh = Path(home) / "warehouse"
    s.execute(f"CREATE CONNECTION cat TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}')")
    return wh


def _metadata(s: Any, sink: str) -> str:
    """Current metadata location of the table ``sink`` writes (reloaded from the catalog)."""
    table = s.engine.runner(sink).table
    table.refresh()
    return str(table.metadata_location)


def _sink_totals(s: Any, sink: str) -> dict[str, Any]:
    """The runner's totals and, when it ran as a streaming query, Spark's per-trigger phase times
    (``durationMs`` of the last progress: addBatch = our foreachBatch, i.e. write + stage + commit)."""
    r = s.engine.runner(sink)
    out: dict[str, Any] = {f"sink_{k}": v for k, v in r.totals.items()}
    try:  # which data plane read the source: 'arrow' (FILES on the Arrow path) or 'spark'
        row = r.status_row()
        out["path"] = row.get("path")
        out["fallback_files"] = row.get("fallback_files")
    except Exception:  # noqa: BLE001 - diagnostics only (older engines have no path)
        pass
    try:
        prog = [p for p in (r.query.recentProgress if r.query is not None else []) if p.get("numInputRows")]
        if prog:
            out["spark_duration_ms"] = prog[-1].get("durationMs")
    except Exception:  # noqa: BLE001 - diagnostics only
        pass
    return out


def _profile_start() -> Any:
    """``ICESQL_BENCH_PROFILE=<file>``: profile the driver during the timed phase (pyinstrument)."""
    out = os.environ.get("ICESQL_BENCH_PROFILE")
    if not out:
        return None
    try:
        from pyinstrument import Profiler
    except ImportError:
        return None
    prof = Profiler(interval=0.005)
    prof.start()
    return prof


def _profile_stop(prof: Any) -> None:
    if prof is None:
        return
    prof.stop()
    Path(os.environ["ICESQL_BENCH_PROFILE"]).write_text(prof.output_text(unicode=False, color=False))


# ------------------------------------------------------------------------------------------ append
def run_icesql_append(source_dir: str, files: list[str], rows: int, arrow_bytes: int, home: str, *,
                      partitioned: bool = False, codec: str = "zstd",
                      spark_conf: dict[str, str] | None = None, smoke: bool = False,
                      fmt: str | None = None, local: bool = False) -> dict[str, Any]:
    """Append ``source_dir`` (Parquet, SPARK_DDL schema) into ``bench.t`` on a local catalog.

    ``CREATE SOURCE src FROM FILES '<source_dir>' (FORMAT = 'parquet', SCHEMA = SPARK_DDL)`` and
    ``CREATE SINK k FROM src INTO ICEBERG CATALOG cat (NAMESPACE = 'bench', TABLE = 't') MODE APPEND
    [PARTITION BY (day(ts))] WITH (PROPERTIES = ('write.parquet.compression-codec' = codec))``, then
    ``Session.run(once=True)`` (one availableNow micro-batch; on the Arrow path the executors read
    the pieces of the files with pyarrow and write the data files, with ``ICESQL_ARROW_PATH=0``
    Spark's reader hands rows to the ``mapInArrow`` writer; the driver commits). The result says
    which path ran (``path``, from the runner's ``status_row()``) and ``fallback_files``. Timed: ``run(once=True)`` from the sink's start
    (table creation included, ~0.1 s) to its last commit.

    ``fmt`` ('parquet' | 'orc' | 'avro', the formats section of issue 38): the sink says
    ``FORMAT = '<fmt>'`` and the codec goes to ``write.<fmt>.compression-codec``.

    ``local``: no SparkSession; ``run(once=True)`` runs the sink in this process without Spark, as
    ``icesql run --once`` does for a FILES append (``engine.local_query``). Nothing to warm up.
    """
    import icesql
    from benchmarks.datagen import SPARK_DDL

    if local:
        s, spark, session_s, warm_s = icesql.Session(home=home), None, 0.0, 0.0
    else:
        s, spark, session_s = _session(home, spark_conf)
        warm_s = 0.0 if smoke else _warm_up(s, spark, files, Path(home) / "warmup")
    _connect(s, home)
    s.execute(f"CREATE SOURCE src FROM FILES '{source_dir}' (FORMAT = 'parquet', SCHEMA = '{SPARK_DDL}')")
    part = "PARTITION BY (day(ts))" if partitioned else ""
    with_fmt = f"FORMAT = '{fmt}', " if fmt else ""
    s.execute(f"CREATE SINK k FROM src INTO ICEBERG CATALOG cat (NAMESPACE = 'bench', TABLE = 't') "
              f"MODE APPEND {part} WITH ({with_fmt}PROPERTIES = "
              f"('write.{fmt or 'parquet'}.compression-codec' = '{codec}'))")
    prof = _profile_start()
    t0 = time.perf_counter()
    s.run(once=True)
    secs = time.perf_counter() - t0
    _profile_stop(prof)
    meta = _metadata(s, "k")
    totals = _sink_totals(s, "k")
    spark_started = s.engine._spark is not None
    s.close()
    if spark is not None and not smoke:
        spark.stop()
    import pyspark

    path = totals.get("path") or "?"
    how = "Arrow path: pyarrow reads and writes in the tasks" if path == "arrow" else "Spark's reader, mapInArrow writer"
    if local:
        how = "in process, without Spark" if not spark_started else "asked to run without Spark, but started Spark"
    return finish_append(secs, meta, rows, arrow_bytes, session_seconds=round(session_s, 2), spark_started=spark_started,
                         warmup_seconds=warm_s, engine=f"icesql (Spark {pyspark.__version__}, {how})",
                         arrow_path_setting=os.environ.get("ICESQL_ARROW_PATH", "1"),
                         codec=codec, partitioned=partitioned, file_format=fmt or "parquet", **totals)


# ------------------------------------------------------------------------------------------ upsert
def run_icesql_upsert(base_files: list[str], base_dir: str, change_files: list[str],
                      debezium_files: list[str], expected_rows: int, home: str, *,
                      spark_conf: dict[str, str] | None = None, smoke: bool = False,
                      running: bool = False, on_spark: bool = False, kafka: str | None = None,
                      format_version: int = 2, broker_pid: int | None = None,
                      sink_options: str = "") -> dict[str, Any]:
    """Load the 1M-key base, then apply the change batches one at a time, timing each batch.

    ``CREATE SOURCE ch FROM FILES '<home>/inbox' (FORMAT = 'debezium-json', SCHEMA = SPARK_DDL)``
    and ``CREATE SINK u FROM ch ... KEY (id) MODE UPSERT`` run once on the empty inbox (creates the
    table, KEY as identifier field); the base is then loaded by an APPEND sink over ``base_dir``
    into that table (``load_seconds``); then for each Debezium file, copy it into
    the inbox (untimed), then time ``s.run(once=True)`` (start the sink, one micro-batch: last change
    per key, position deletes through the key index + data files, one row-delta commit).

    ``running``: the sink runs as a user leaves it running (``Session.start``, icesql's default 1 s
    trigger, a commit per micro-batch, its maintenance beside it); each batch is timed from the
    file's arrival in the inbox to the commit that holds it (the wait for the next trigger
    included), and the sink is stopped after the last batch. ``processing_s``: the part of it
    from the batch's start to that commit (a file lands just after the last batch's commit, and
    batches start at most once a trigger interval: a batch shorter than 1 s is timed at about 1 s).

    ``on_spark``: the session is given a SparkSession (built like the baselines'), so the sink runs
    as Spark's streaming query; without it (the default path of ``icesql.Session(home)``) the sink
    runs in this process without Spark (``engine.local_query``).

    ``format_version`` 3: the sink creates an Iceberg v3 table (``WITH (FORMAT VERSION = 3)``), whose
    upserts write deletion vectors instead of position delete files (issue 55).

    ``kafka`` (a bootstrap address): the changes come from a Debezium topic instead of the inbox
    (``CREATE SOURCE ch FROM KAFKA CONNECTION k (TOPIC = 'changes', FORMAT = 'debezium-json', ...)``,
    ``changes_running`` for a running sink);
    each batch's lines are produced as one transaction (``kafka.FileProducer``, untimed: the sink
    reads committed records only, so the batch arrives at once, as a renamed file does), and a
    running sink's batch is timed from the commit of that transaction to the table's commit that
    holds the topic's log end. ``broker_pid``: the broker's process; its CPU seconds during the
    timed batches are reported (``broker_cpu_s``: a broker on the same cores takes them from the
    sink; noida-db saves its whole data after a change, about a second of a core per batch).
    ``sink_options``: more WITH options of the upsert sink (``MAXIMUM DELETE FILES = 2``).
    """
    import icesql
    from benchmarks.datagen import SPARK_DDL

    if on_spark:
        s, spark, session_s = _session(home, spark_conf)
        warm_s = 0.0 if smoke else _warm_up(s, spark, base_files, Path(home) / "warmup")
    else:
        s, spark, session_s, warm_s = icesql.Session(home=home), None, 0.0, 0.0
    _connect(s, home)
    inbox = Path(home) / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    producer = None
    if kafka:
        from benchmarks.kafka import FileProducer

        topic = "changes_running" if running else "changes"  # one broker serves both writers
        producer = FileProducer(kafka, topic)
        s.execute(f"CREATE CONNECTION k TO KAFKA (BROKER = '{kafka}')")
        s.execute(f"CREATE SOURCE ch FROM KAFKA CONNECTION k (TOPIC = '{topic}', FORMAT = 'debezium-json', "
                  f"SCHEMA = '{SPARK_DDL}')")
    else:
        s.execute(f"CREATE SOURCE ch FROM FILES '{inbox}' (FORMAT = 'debezium-json', SCHEMA = '{SPARK_DDL}')")
    options = ", ".join(o for o in ("FORMAT VERSION = 3" if format_version == 3 else "", sink_options) if o)
    load_s = create_upsert_table(s, base_dir, options)
    batch_s: list[float] = []
    changes = 0
    runner = None
    if running:
        s.start(["u"])
        runner = s.engine.runner("u")
        _wait_first_trigger(runner)
    prof = _profile_start()
    broker_cpu = 0.0
    processing_s: list[float] = []
    for f in debezium_files:
        with open(f, "rb") as fh:
            changes += sum(1 for _ in fh)
        tmp = inbox / ("." + Path(f).name + ".tmp")
        if producer is None:
            shutil.copyfile(f, tmp)
        if runner is None:
            if producer is not None:
                producer.send(f)
            else:
                os.replace(tmp, inbox / Path(f).name)
            t0 = time.perf_counter()
            c0 = cpu_seconds(broker_pid)
            s.run(once=True, sinks=["u"])
            broker_cpu += cpu_seconds(broker_pid) - c0
        else:
            commits = runner.totals["commits"]
            if producer is not None:
                ends = producer.send(f)
                t0 = time.perf_counter()
                c0 = cpu_seconds(broker_pid)
                done = lambda ends=ends: all(runner.source.committed.get((topic, p), 0) >= e for p, e in ends.items())  # noqa: E731
            else:
                os.replace(tmp, inbox / Path(f).name)
                t0 = time.perf_counter()
                done = lambda commits=commits: runner.totals["commits"] > commits  # noqa: E731
            begun = None  # when the batch holding the file began (epoch s; the runner's batch_started)
            while not done():
                if begun is None and runner.batch_started is not None:
                    begun = runner.batch_started
                if not runner.active:
                    raise RuntimeError(f"the running sink stopped: {runner.status_row().get('last_error')}")
                if time.perf_counter() - t0 > 600:  # a wait that never ends is a bug, not a figure
                    raise RuntimeError(f"the running sink did not commit the batch in 600 s: {runner.status_row()}")
                time.sleep(0.01)
            if producer is not None:
                broker_cpu += cpu_seconds(broker_pid) - c0
            # from the batch's start to its commit: the rest of the batch's time is the wait for
            # the sink's next 1 s trigger (batches start at most once an interval, as Spark's do)
            processing_s.append(time.time() - begun if begun is not None else float("nan"))
        batch_s.append(time.perf_counter() - t0)
    _profile_stop(prof)
    if runner is not None:
        s.stop()
    meta = _metadata(s, "u")
    totals = _sink_totals(s, "u")
    spark_started = s.engine._spark is not None
    s.close()
    if not smoke and spark is not None:
        spark.stop()
    from pyiceberg.table import StaticTable

    t = StaticTable.from_metadata(meta)
    live = [e.data_file for m in t.current_snapshot().manifests(t.io)  # type: ignore[union-attr]
            for e in m.fetch_manifest_entry(t.io, discard_deleted=True)]
    data = [f.file_size_in_bytes for f in live if int(f.content) == 0]
    deletes = {f.file_path: f.file_size_in_bytes for f in live if int(f.content) != 0}
    secs = sum(batch_s)
    out: dict[str, Any] = {
        "seconds": round(secs, 3), "batch_seconds": [round(x, 3) for x in batch_s],
        "batch_p50_s": round(statistics.median(batch_s), 3) if batch_s else None,
        "changes": changes, "changes_per_s": round(changes / secs) if secs else None,
        "metadata": meta, "load_seconds": round(load_s, 2), "session_seconds": round(session_s, 2),
        "warmup_seconds": warm_s, "snapshots": len(t.metadata.snapshots),
        "engine": "icesql MODE UPSERT ("
                  + ("deletion vectors, Iceberg v3" if format_version == 3 else "position deletes")
                  + " from the key index)"
                  + (", running sink (Session.start)" if running else ", run(once=True) per batch")
                  + (", on Spark" if on_spark else ", without Spark")
                  + (", from a Debezium Kafka topic" if kafka else ", from Debezium files"),
        "spark_started": spark_started,
        "expected_rows": expected_rows, **totals,
    }
    if broker_pid:
        out["broker_cpu_s"] = round(broker_cpu, 2)
    if processing_s:
        out["processing_s"] = round(sum(processing_s), 3)
        out["batch_processing_s"] = [round(x, 3) for x in processing_s]
    out.update(file_stats(sizes=data))
    out.update(file_stats(sizes=list(deletes.values()), prefix="delete_"))
    return out


UPSERT_TARGET = "INTO ICEBERG CATALOG cat (NAMESPACE = 'bench', TABLE = 'u')"


def create_upsert_table(s: Any, base_dir: str, options: str = "") -> float:
    """The upsert sink ``u`` over the source ``ch`` (``options``: its WITH options), run once on
    nothing, which creates the table with KEY (id) as its identifier field; then the base rows
    appended by the sink ``load``. Returns the load's seconds."""
    from benchmarks.datagen import SPARK_DDL

    s.execute(f"CREATE SINK u FROM ch {UPSERT_TARGET} KEY (id) MODE UPSERT" + (f" WITH ({options})" if options else ""))
    s.run(once=True, sinks=["u"])
    s.execute(f"CREATE SOURCE base FROM FILES '{base_dir}' (FORMAT = 'parquet', SCHEMA = '{SPARK_DDL}')")
    s.execute(f"CREATE SINK load FROM base {UPSERT_TARGET} MODE APPEND")
    t0 = time.perf_counter()
    s.run(once=True, sinks=["load"])
    return time.perf_counter() - t0


def _wait_first_trigger(runner: Any, timeout: float = 300) -> float:
    """Seconds until a started sink's query has run its first trigger (at most ``timeout``)."""
    deadline = time.time() + timeout
    t_start = time.time()
    while time.time() < deadline and runner.active:
        q = runner.query
        try:
            if q is not None and q.recentProgress:
                break
        except Exception:  # noqa: BLE001 - the query is still starting
            pass
        time.sleep(0.1)
    return round(time.time() - t_start, 2)


# ------------------------------------------------------------------------------------------ streaming
def run_icesql_streaming(source_dir: str, home: str, duration_s: float, *, max_period: str = "1s",
                         min_size: str | None = None, ready_file: str | None = None,
                         spark_conf: dict[str, str] | None = None) -> dict[str, Any]:
    """Run an APPEND sink over ``source_dir`` (Parquet files arriving while it runs).

    WITH (MAXIMUM PERIOD = max_period[, MINIMUM SIZE = min_size]); ``Session.start`` (the sink runs
    in the background with icesql's default 1 s trigger); once its query ran its first trigger
    (what the Spark peer waits for too), touch ``ready_file``; run ``duration_s`` seconds; wait until
    every row of the produced files is committed (at most 180 s; the peer's ``processAllAvailable``),
    then ``Session.stop``.
    """
    import pyarrow.parquet as pq

    from benchmarks.datagen import SPARK_DDL, arange, gen_rows

    s, spark, session_s = _session(home, spark_conf)
    scratch = Path(home) / "warm-in"
    scratch.mkdir(parents=True, exist_ok=True)
    pq.write_table(gen_rows(arange(2000, 10**9), 1), scratch / "w.parquet")
    warm_s = _warm_up(s, spark, [str(scratch / "w.parquet")], Path(home) / "warmup")
    _connect(s, home)
    Path(source_dir).mkdir(parents=True, exist_ok=True)
    s.execute(f"CREATE SOURCE src FROM FILES '{source_dir}' (FORMAT = 'parquet', SCHEMA = '{SPARK_DDL}')")
    opts = f"MAXIMUM PERIOD = '{max_period}'" + (f", MINIMUM SIZE = '{min_size}'" if min_size else "")
    s.execute(f"CREATE SINK k FROM src INTO ICEBERG CATALOG cat (NAMESPACE = 'bench', TABLE = 's') "
              f"MODE APPEND WITH ({opts})")
    s.start(["k"])
    runner = s.engine.runner("k")
    # ready = the query ran its first (empty) trigger, as the Spark + Iceberg Java peer signals it
    ready_s = _wait_first_trigger(runner)
    if ready_file:
        Path(ready_file).touch()
    time.sleep(duration_s)
    # then every produced row committed before stopping (the peer's processAllAvailable): a stop
    # in the middle of a micro-batch interrupts it, and its rows would never reach a snapshot
    produced = sum(pq.read_metadata(f).num_rows for f in Path(source_dir).glob("*.parquet"))
    drain_deadline = time.time() + 180
    while time.time() < drain_deadline and runner.active and runner.status_row().get("rows_committed", 0) < produced:
        time.sleep(0.2)
    drained = runner.status_row().get("rows_committed", 0) >= produced
    s.stop()
    meta = _metadata(s, "k")
    totals = _sink_totals(s, "k")
    s.close()
    spark.stop()
    from pyiceberg.table import StaticTable

    t = StaticTable.from_metadata(meta)
    snap = t.current_snapshot()
    n = int(snap.summary.additional_properties.get("total-records", 0)) if snap and snap.summary else 0
    return {"metadata": meta, "rows_in_table": n, "engine": "icesql", "session_seconds": round(session_s, 2),
            "warmup_seconds": warm_s, "first_trigger_seconds": ready_s, "rows_produced_seen": produced,
            "drained_before_stop": drained, "max_period": max_period, "min_size": min_size, **totals}


# ------------------------------------------------------------------------------------------ commit
def _commit_catalog(home: str, catalog: str, rest: dict[str, str] | None) -> Any:
    """The pyiceberg catalog icesql builds for a ``local`` connection (SQLite + warehouse), or a
    REST catalog on ``weed mini`` (S3 FileIO), with the same properties as the pyiceberg peer."""
    if catalog == "local":
        from pyiceberg.catalog.sql import SqlCatalog

        wh = Path(home) / "warehouse"
        wh.mkdir(parents=True, exist_ok=True)
        return SqlCatalog("cat", uri=f"sqlite:///{wh / 'catalog.db'}", warehouse=wh.as_uri())
    from pyiceberg.catalog.rest import RestCatalog

    assert rest is not None
    secret = os.environ.get("BENCH_REST_SECRET", "")
    return RestCatalog("rest", **{
        "uri": rest["uri"], "warehouse": rest["warehouse"], "credential": f"{rest['key']}:{secret}",
        "s3.endpoint": rest["s3_endpoint"], "s3.access-key-id": rest["key"],
        "s3.secret-access-key": secret, "s3.region": "us-east-1",
    })


def measure_commit_overhead(home: str, *, catalog: str = "local", commits: int = 30,
                            rows_per_commit: int = 100, rest: dict[str, str] | None = None) -> dict[str, Any]:
    """Per-commit time of the engine's commit path (``icesql.engine.commit.snapshot.commit``) for tiny files.

    A table is created with icesql's schema mapping; ``commits`` data files of ``rows_per_commit``
    rows are written first by icesql's executor-side writer (``DataFileWriter``, untimed); then
    each is committed alone with its progress (as the driver does per commit: reload the table,
    fencing / progress check, manifest, manifest list, metadata JSON, catalog update). Returns
    ``{"p50_ms", "p99_ms", "mean_ms", "n"}`` (``first_ms`` is the first commit, on an empty table).
    """
    import uuid

    import pyiceberg

    from benchmarks.datagen import arange, gen_rows
    from icesql.engine.commit.snapshot import CommitRequest, commit
    from icesql.engine.iceberg.writer import DataFileWriter, WriteSpec

    cat = _commit_catalog(home, catalog, rest)
    try:
        cat.create_namespace("bench")
    except Exception:  # noqa: BLE001 - already there
        pass
    batch = gen_rows(arange(rows_per_commit), 1)
    table = cat.create_table(f"bench.i{int(time.time() * 1000)}", schema=batch.schema,
                             properties={"format-version": "2"})
    spec = WriteSpec.from_table(table)
    files = []
    for i in range(commits):
        w = DataFileWriter(spec, "data")
        w.write(gen_rows(arange(rows_per_commit, i * rows_per_commit), 1))
        files.extend(w.close())
    sink_id = str(uuid.uuid4())
    times: list[float] = []
    prof = _profile_start()
    for i, f in enumerate(files):
        t0 = time.perf_counter()
        commit(table, CommitRequest(data_files=(f,), delete_files=(), sink_id=sink_id, sink_version=1,
                                    progress=i, reason="batch"))
        times.append(time.perf_counter() - t0)
    _profile_stop(prof)
    xs = sorted(x * 1000 for x in times)
    return {
        "engine": f"icesql.engine.commit.snapshot.commit (pyiceberg {pyiceberg.__version__}, {catalog} catalog)",
        "catalog": catalog, "n": len(xs), "p50_ms": round(statistics.median(xs), 1),
        "p99_ms": round(xs[min(len(xs) - 1, int(len(xs) * 0.99))], 1),
        "mean_ms": round(statistics.fmean(xs), 1), "max_ms": round(xs[-1], 1), "first_ms": round(times[0] * 1000, 1),
        "last10_p50_ms": round(statistics.median(sorted(x * 1000 for x in times[-10:])), 1),
        "seconds": round(sum(times), 3), "snapshots": len(table.metadata.snapshots),
    }


# ------------------------------------------------------------------------------------------ key index
INDEX_NA = "n/a until the key index lands"


def _index_api() -> tuple[Any, Any]:
    """The key index builder and store of the engine, or ``NotImplementedError`` (entry.py reports
    the run as ``n/a`` with the reason) while the product has none."""
    try:
        from icesql.engine.index.build import build_index
        from icesql.engine.index.store import IndexStore
    except ImportError as e:
        raise NotImplementedError(f"{INDEX_NA} (icesql.engine.index.build.build_index: {e})") from None
    return build_index, IndexStore


def prepare_index_table(files: list[str], rows: int, home: str, codec: str = "zstd") -> dict[str, Any]:
    """Untimed set-up of the index build: a table of ``rows`` keys (the append dataset, ``id`` as
    its identifier field) on a local catalog, written by pyiceberg (one data file per input file)."""
    import pyarrow.parquet as pq

    from benchmarks.datagen import SPARK_DDL
    from icesql.engine.iceberg.schema import arrow_schema, spark_to_iceberg_schema, to_table_batch

    cat = _commit_catalog(home, "local", None)
    cat.create_namespace("bench")
    schema = spark_to_iceberg_schema(_ddl_json(SPARK_DDL), key=["id"])
    t0 = time.perf_counter()
    table = cat.create_table("bench.k", schema=schema,
                             properties={"format-version": "2", "write.parquet.compression-codec": codec})
    target = arrow_schema(schema)
    with table.transaction() as tx:
        for f in files:
            tx.append(to_table_batch(pq.read_table(f), target))
    table = cat.load_table("bench.k")
    return {"seconds": round(time.perf_counter() - t0, 2), "metadata": str(table.metadata_location),
            "rows": rows, "data_files": len(list(table.scan().plan_files()))}


def _ddl_json(ddl: str) -> dict[str, Any]:
    """The benchmark schema (``datagen.SCHEMA``, whose DDL is ``ddl``) as ``StructType.jsonValue()``,
    without a SparkSession."""
    import pyarrow as pa

    from benchmarks.datagen import SCHEMA, SPARK_DDL

    assert ddl == SPARK_DDL, "only the benchmark schema"

    def name(t: pa.DataType) -> str:
        if pa.types.is_decimal(t):
            return f"decimal({t.precision},{t.scale})"
        return {pa.int64(): "long", pa.int32(): "integer", pa.string(): "string", pa.float64(): "double",
                pa.date32(): "date", pa.bool_(): "boolean"}.get(t, "timestamp")

    return {"type": "struct", "fields": [{"name": f.name, "type": name(f.type), "nullable": f.name != "id",
                                          "metadata": {}} for f in SCHEMA]}


def measure_index_build(home: str, keys: int, *, spark_conf: dict[str, str] | None = None) -> dict[str, Any]:
    """Time the engine's key index rebuild (``build_index``) of a table of ``keys`` keys.

    What the first upsert batch after a foreign write pays: every live data file's KEY column read
    on the executors, hashed into shards, one base file per shard. The table comes from
    ``prepare_index_table`` (another process); this process starts the SparkSession (untimed,
    ``session_seconds``) and times ``build_index``; the parent reports the process tree's peak RSS.
    ``n/a until the key index lands`` while the engine has no builder (or its signature changed).
    """
    import inspect

    build_index, IndexStore = _index_api()
    from icesql.engine.backends.spark.frames import SparkBackend

    cat = _commit_catalog(home, "local", None)
    table = cat.load_table("bench.k")
    from benchmarks.workers.common import spark_session

    spark, session_s = spark_session("bench-icesql-index", conf=_icesql_conf(spark_conf))
    store = IndexStore(table.location(), "bench-index", {})
    kwargs = {"key": ["id"], "progress": 0, "version": 1, "io_properties": {}}
    try:
        inspect.signature(build_index).bind(SparkBackend(spark), table, store, **kwargs)
    except TypeError as e:
        spark.stop()
        raise NotImplementedError(f"{INDEX_NA}: build_index{inspect.signature(build_index)} ({e})") from None
    prof = _profile_start()
    t0 = time.perf_counter()
    manifest = build_index(SparkBackend(spark), table, store, **kwargs)
    secs = time.perf_counter() - t0
    _profile_stop(prof)
    spark.stop()
    index_bytes = 0
    root = Path(str(store.root).removeprefix("file://"))
    if root.exists():
        index_bytes = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return {"seconds": round(secs, 3), "keys": keys, "keys_per_s": round(keys / secs) if secs else None,
            "index_keys": getattr(manifest, "keys", None), "shards": getattr(manifest, "shards", None),
            "index_mb": round(index_bytes / 2**20, 2), "session_seconds": round(session_s, 2),
            "engine": "icesql.engine.index.build.build_index"}


# ------------------------------------------------------------------------------------------ smoke
def smoke(append: dict[str, Any], upsert: dict[str, Any], home: str,
          views: dict[str, Any] | None = None) -> dict[str, Any]:
    """The hooks at tiny sizes in ONE process and SparkSession, no warm-up (tests/bench, < 90 s):
    ``append`` / ``upsert`` are the keyword arguments of ``run_icesql_append`` / ``run_icesql_upsert``
    without ``home``; ``views`` those of ``workers.views_writer.write`` without ``workdir`` and
    ``method`` (both methods run); the commit path runs 5 commits on the local catalog."""
    out: dict[str, Any] = {}
    try:
        out["append"] = run_icesql_append(**append, home=str(Path(home) / "append"), smoke=True)
        out["upsert"] = run_icesql_upsert(**upsert, home=str(Path(home) / "upsert"), smoke=True)
        out["upsert_running"] = run_icesql_upsert(**upsert, home=str(Path(home) / "upsert-running"),
                                                  smoke=True, running=True)
        if views is not None:
            from benchmarks.workers.views_writer import write

            t0 = time.perf_counter()
            out["views"] = {m: write(**views, workdir=str(Path(home) / f"views-{m}"), method=m, smoke=True)
                            for m in ("mapinarrow", "spark_writer")}
            out["views_seconds"] = round(time.perf_counter() - t0, 2)
    finally:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
    out["commit"] = measure_commit_overhead(str(Path(home) / "commit"), commits=5)
    return out
