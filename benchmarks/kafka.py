"""The Kafka benchmark (issue 35): ``benchmarks/run.py --only kafka``.

N JSON records of about 100 bytes (``{"id": n, "ts": "...", "user": "u123", "amount": 12.34,
"country": "DE"}``) in a 6-partition topic of noida-db 0.2.3 on loopback (a free port, a temp data
dir), pre-produced by one confluent-kafka Producer (linger.ms=50, no compression, each record to
partition ``n % 6``; timed, not counted), then read by three fresh processes one after the other,
each with the memory of its whole process tree sampled from /proc (``procmon``):

* ``raw_consume`` (a): one confluent-kafka consumer reads the whole topic (values touched, no
  decoding): the broker's raw consume rate from one Python process;
* ``pyarrow_parquet`` (b): one process consumes the topic with confluent-kafka, decodes the values
  with ``pyarrow.json`` (100k records at a time, the values joined by newlines, the schema given)
  and writes zstd Parquet with pyarrow, a new file at 128 MiB (no Iceberg);
* ``icesql_cli``: ``icesql --home <fresh> run pipeline.sql --once`` as a user runs it (CREATE
  CONNECTION ... TO KAFKA, CREATE SOURCE ... FROM KAFKA CONNECTION, an APPEND sink into a local
  Iceberg catalog); ``seconds`` = the whole process from start to exit, ``to_last_commit_s`` = from
  start to the newest snapshot's ``timestamp-ms``; the table's row count (the manifests' record
  counts) must equal N, and its ``ts``/``amount`` columns hold no null (a value Spark failed to
  parse would be one).

The latency run: ``icesql run pipeline.sql`` (no --once) with ``MAXIMUM PERIOD = '1s'`` on the sink,
a producer at 5,000 records/s for 60 s whose records carry their produce time in ``ts``; once
everything is committed the sink is stopped, and each record's latency is the ``timestamp-ms`` of
the snapshot that added its data file minus its produce time.

Workers (``produce``, ``raw_consume``, ``pyarrow_parquet``, ``latency_producer``) run through
``workers/entry.py`` (``benchmarks.kafka:<fn>``) and print one ``RESULT`` line.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import signal
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

TOPIC = "events"
PARTITIONS = 6
BROKERS = {"noida": "noida-db 0.2.3", "tansu": "tansu 0.6.0 (memory://)"}  # the test brokers, as reports name them
SCHEMA_DDL = "id BIGINT, ts TIMESTAMP, user STRING, amount DOUBLE, country STRING"
COUNTRIES = ("DE", "FR", "US", "GB", "IN", "BR", "JP", "ES")
BASE_US = int(dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc).timestamp() * 1e6)
DECODE_CHUNK = 100_000
FILE_BYTES = 128 * 2**20
PRODUCER_CONF = {"linger.ms": 50, "compression.type": "none", "batch.size": 1_000_000,
                 "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
                 "acks": "all", "enable.idempotence": False}


def _iso(us: int) -> str:
    return dt.datetime.fromtimestamp(us / 1e6, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def value(n: int, ts_us: int | None = None) -> bytes:
    """Record ``n`` (about 100 bytes)."""
    if ts_us is None and n < 86_400_000:  # BASE + n ms, formatted without datetime (the produce loop's cost)
        h, rest = divmod(n, 3_600_000)
        m, rest = divmod(rest, 60_000)
        ts = f"2026-11-01T{h:02d}:{m:02d}:{rest // 1000:02d}.{rest % 1000:03d}000Z"
    else:
        ts = _iso(BASE_US + n * 1000 if ts_us is None else ts_us)
    return (f'{{"id": {n}, "ts": "{ts}", "user": "u{n % 100_000}", "amount": {(n % 100_000) / 100:.2f}, '
            f'"country": "{COUNTRIES[n % len(COUNTRIES)]}"}}').encode()


def _consumer(bootstrap: str, **extra: Any) -> Any:
    from confluent_kafka import Consumer

    conf = {"bootstrap.servers": bootstrap, "group.id": f"bench-{os.getpid()}-{time.time_ns()}",
            "enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "error",
            "isolation.level": "read_committed", "fetch.max.bytes": 64 * 2**20,
            "max.partition.fetch.bytes": 16 * 2**20, "queued.max.messages.kbytes": 262_144,
            # noida answers a Fetch with a partition's whole remainder whatever the fetch limits
            # (/tmp/kafka-facts.md (j)); above this a consumer reconnects forever and reads nothing
            "receive.message.max.bytes": 2147483647}
    conf.update(extra)
    return Consumer(conf)


def _ends(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import TopicPartition

    c = _consumer(bootstrap)
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=15, cached=False)[1]
                for p in range(PARTITIONS)}
    finally:
        c.close()


def _consume_all(bootstrap: str, topic: str, on_batch: Any) -> tuple[int, int]:
    """Read every partition from 0 to its end (the _PARTITION_EOF event at or past it), calling
    ``on_batch(values)`` per ``consume()`` answer; returns (records, value bytes)."""
    from confluent_kafka import KafkaError, TopicPartition

    ends = _ends(bootstrap, topic)
    c = _consumer(bootstrap)
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    todo = {p for p, e in ends.items() if e > 0}
    n = nbytes = 0
    idle = time.monotonic()
    try:
        while todo:
            msgs = c.consume(num_messages=10_000, timeout=1.0)
            if not msgs and time.monotonic() - idle > 60:
                raise RuntimeError(f"no record for 60 s, partitions {sorted(todo)} unfinished")
            vals = []
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= ends[m.partition()]:
                            todo.discard(m.partition())
                        continue
                    raise RuntimeError(str(err))
                vals.append(m.value())
            if vals:
                idle = time.monotonic()
                n += len(vals)
                nbytes += sum(map(len, vals))
                on_batch(vals)
    finally:
        c.close()
    return n, nbytes


class FileProducer:
    """A change file's lines to a topic as one transaction (issue 39's Kafka upserts): a sink reads
    with ``read_committed``, so the batch appears at once, as a file renamed into a FILES source's
    directory does. ``send`` returns, per partition, the offset after the last record it wrote:
    the sink holds the batch once its table's offsets reach those. (Not the log end: that is past
    the transaction's commit marker, which a running sink may read in a batch of its own, holding
    no record and so committing nothing: tansu lets a reader see the records before the marker.)"""

    def __init__(self, bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
        from confluent_kafka import Producer

        from tests.support import kafka as K

        K.create_topic(bootstrap, topic, partitions)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONF, "enable.idempotence": True,
                                  "transactional.id": f"icesql-bench-{topic}-{os.getpid()}"})
        self.producer.init_transactions(60)

    def send(self, path: str) -> dict[int, int]:
        p = self.producer
        ends: dict[int, int] = {}
        failed: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                failed.append(str(err))
            else:
                ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

        p.begin_transaction()
        with open(path, "rb") as fh:
            for n, line in enumerate(fh):
                while True:
                    try:
                        p.produce(self.topic, line.rstrip(b"\n"), partition=n % self.partitions,
                                  on_delivery=delivered)
                        break
                    except BufferError:
                        p.poll(0.05)
        p.commit_transaction(120)  # serves every delivery report first
        if failed:
            raise RuntimeError(f"{len(failed)} records of {path} not delivered: {failed[0]}")
        return ends


# --------------------------------------------------------------------------------- workers
def produce(bootstrap: str, topic: str, records: int) -> dict[str, Any]:
    """Pre-produce ``records`` values (timed: produce() calls to the last delivery report)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONF})
    failed: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None and len(failed) < 5:
            failed.append(str(err))

    t0 = time.perf_counter()
    nbytes = 0
    for n in range(records):
        v = value(n)
        nbytes += len(v)
        while True:
            try:
                p.produce(topic, v, partition=n % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        if n % 10_000 == 0:
            p.poll(0)
    left = p.flush(600)
    secs = time.perf_counter() - t0
    if left or failed:
        raise RuntimeError(f"{left} undelivered, errors: {failed}")
    return {"records": records, "seconds": round(secs, 2), "records_per_s": round(records / secs),
            "value_bytes_avg": round(nbytes / records, 1), "mb": round(nbytes / 2**20, 1)}


def raw_consume(bootstrap: str, topic: str, records: int) -> dict[str, Any]:
    """(a) The whole topic through one confluent-kafka consumer, values only counted."""
    t0 = time.perf_counter()
    n, nbytes = _consume_all(bootstrap, topic, lambda _v: None)
    secs = time.perf_counter() - t0
    return {"records": n, "seconds": round(secs, 2), "rows_per_s": round(n / secs), "mb": round(nbytes / 2**20, 1),
            "mb_per_s": round(nbytes / 2**20 / secs, 1), "matches_expected": n == records,
            **({} if n == records else {"status": "error", "error": f"read {n} records, {records} expected"})}


def pyarrow_parquet(bootstrap: str, topic: str, records: int, workdir: str) -> dict[str, Any]:
    """(b) Consume with confluent-kafka, decode with pyarrow.json, write zstd Parquet (128 MiB files)."""
    import io

    import pyarrow as pa
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("user", pa.string()),
                        ("amount", pa.float64()), ("country", pa.string())])
    parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    out = Path(workdir) / "parquet"
    out.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {"buf": [], "writer": None, "path": None, "files": [], "rows": 0, "decode_s": 0.0,
                             "write_s": 0.0}

    def flush() -> None:
        buf = state["buf"]
        if not buf:
            return
        t = time.perf_counter()
        table = pj.read_json(io.BytesIO(b"\n".join(buf)), parse_options=parse)
        state["buf"] = []
        t2 = time.perf_counter()
        state["decode_s"] += t2 - t
        if state["writer"] is None:
            state["path"] = out / f"part-{len(state['files']):05d}.parquet"
            state["writer"] = pq.ParquetWriter(state["path"], schema, compression="zstd")
        state["writer"].write_table(table)
        state["rows"] += table.num_rows
        if state["path"].stat().st_size >= FILE_BYTES:
            state["writer"].close()
            state["files"].append(state["path"].stat().st_size)
            state["writer"] = None
        state["write_s"] += time.perf_counter() - t2

    def on_batch(vals: list[bytes]) -> None:
        state["buf"].extend(vals)
        if len(state["buf"]) >= DECODE_CHUNK:
            flush()

    t0 = time.perf_counter()
    n, _ = _consume_all(bootstrap, topic, on_batch)
    flush()
    if state["writer"] is not None:
        state["writer"].close()
        state["files"].append(state["path"].stat().st_size)
    secs = time.perf_counter() - t0
    rows = sum(pq.read_metadata(f).num_rows for f in out.glob("*.parquet"))
    sizes = sorted(state["files"])
    res = {"records": n, "seconds": round(secs, 2), "rows_per_s": round(n / secs), "rows_in_files": rows,
           "decode_seconds": round(state["decode_s"], 2), "write_seconds": round(state["write_s"], 2),
           "files": len(sizes), "file_mb_min": round(sizes[0] / 2**20, 1) if sizes else None,
           "file_mb_median": round(statistics.median(sizes) / 2**20, 1) if sizes else None,
           "file_mb_max": round(sizes[-1] / 2**20, 1) if sizes else None, "matches_expected": rows == records}
    if rows != records:
        res.update(status="error", error=f"wrote {rows} rows, {records} expected")
    return res


def latency_producer(bootstrap: str, topic: str, rate: int, seconds: float, first_id: int) -> dict[str, Any]:
    """``rate`` records/s for ``seconds`` (every 10 ms a slice), each record's ``ts`` = its produce time."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONF, "linger.ms": 5})
    t0 = time.time()
    n = 0
    total = int(rate * seconds)
    while n < total:
        due = min(total, int((time.time() - t0) * rate))
        while n < due:
            now_us = time.time_ns() // 1000
            p.produce(topic, value(first_id + n, now_us), partition=n % PARTITIONS)
            n += 1
        p.poll(0)
        time.sleep(0.01)
    left = p.flush(60)
    return {"records": n, "seconds": round(time.time() - t0, 2), "undelivered": left,
            "first_id": first_id, "rate": rate}


# --------------------------------------------------------------------------------- parent side
def pipeline_sql(path: Path, bootstrap: str, topic: str, warehouse: Path, sink_with: str = "") -> Path:
    path.write_text(
        f"CREATE CONNECTION k TO KAFKA (BROKER = '{bootstrap}') WITH (VALIDATE = false);\n"
        f"CREATE SOURCE events FROM KAFKA CONNECTION k (TOPIC = '{topic}', FORMAT = 'json', "
        f"SCHEMA = '{SCHEMA_DDL}');\n"
        f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{warehouse}');\n"
        f"CREATE SINK s FROM events INTO ICEBERG CATALOG lake (NAMESPACE = 'bench', TABLE = 'events')"
        f"{' ' + sink_with if sink_with else ''};\n")
    return path


def _snapshots(metadata: str) -> list[dict[str, Any]]:
    from pyiceberg.table import StaticTable

    t = StaticTable.from_metadata(metadata)
    out = []
    for s in t.metadata.snapshots:
        props = s.summary.additional_properties if s.summary else {}
        out.append({"id": s.snapshot_id, "ms": s.timestamp_ms, "op": str(s.summary.operation.value) if s.summary else "?",
                    "added": int(props.get("added-records", 0)), "total": int(props.get("total-records", 0))})
    return out


def _log_facts(log: Path) -> dict[str, Any]:
    """Lines of the icesql log worth keeping (a traceback's last line, warnings)."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return {}
    out: dict[str, Any] = {}
    errs = [ln for ln in text.splitlines() if re.search(r"Error|Exception|Traceback", ln)]
    if errs:
        out["log_errors"] = errs[-3:]
    return out


def icesql_once(bootstrap: str, topic: str, records: int, workdir: Path, conf: dict[str, str] | None,
                name: str = "icesql_cli") -> dict[str, Any]:
    from benchmarks import baselines as B

    home, wh = workdir / "home", workdir / "warehouse"
    wh.mkdir(parents=True, exist_ok=True)
    script = pipeline_sql(workdir / "pipeline.sql", bootstrap, topic, wh)
    start_ms = time.time() * 1000
    r = B.run_icesql_cli(name, home, ["run", str(script), "--once", *B._conf_args(conf)], workdir)
    r["rows"] = records
    r = B._e2e_facts(r, wh / "bench" / "events", records)
    if r.get("metadata"):
        r.update(B.table_facts(r["metadata"], ("id", "ts", "user", "amount", "country")))  # seconds = wall, rows_per_s, row-count check
    r["name"] = name
    meta = B.newest_metadata(wh / "bench" / "events")
    if meta:
        snaps = _snapshots(meta)
        r["snapshots"] = len(snaps)
        appends = [s for s in snaps if s["op"] == "append"]
        if appends:  # the last commit of the sink's records (maintenance's rewrites come after it)
            r["to_last_commit_s"] = round((max(s["ms"] for s in appends) - start_ms) / 1000, 2)
        if snaps:
            r["total_records_summary"] = snaps[-1]["total"]
            r["snapshot_ops"] = [f"{s['op']}:{s['added']}" for s in snaps][:50]
    if r.get("status") != "ok":
        r.update(_log_facts(workdir / f"{name}.log"))
    return r


def trigger_summary(evdir: Path) -> dict[str, Any]:
    """The streaming query's triggers from Spark's event log (uncompressed): how many, the p50 of
    each phase of ``durationMs`` over the triggers that read records, and their task times."""
    import json

    triggers: list[dict[str, Any]] = []
    tasks: list[tuple[float, float]] = []
    for f in evdir.glob("**/events_*"):
        for line in f.open(errors="replace"):
            if "QueryProgressEvent" not in line and "SparkListenerTaskEnd" not in line:
                continue
            e = json.loads(line)
            if "QueryProgressEvent" in e.get("Event", ""):
                p = e["progress"]
                rows = sum(int(src.get("numInputRows") or 0) for src in p.get("sources") or [])
                triggers.append({"rows": rows, **p.get("durationMs", {})})
            elif e.get("Event") == "SparkListenerTaskEnd":
                i, m = e["Task Info"], e.get("Task Metrics") or {}
                tasks.append(((i["Finish Time"] - i["Launch Time"]) / 1000, (m.get("Executor CPU Time") or 0) / 1e9))
    busy = [t for t in triggers if t["rows"] > 0]
    out: dict[str, Any] = {"triggers": len(triggers), "triggers_with_records": len(busy)}
    for k in ("triggerExecution", "addBatch", "queryPlanning", "walCommit", "commitOffsets", "latestOffset",
              "getBatch"):
        vals = [t[k] for t in busy if k in t]
        if vals:
            out[f"{k}_p50_ms"] = round(statistics.median(vals))
    if tasks:
        out["task_seconds_p50"] = round(statistics.median(t for t, _ in tasks), 2)
        out["task_jvm_cpu_seconds_p50"] = round(statistics.median(c for _, c in tasks), 3)
        out["tasks"] = len(tasks)
    return out


def latency_run(bootstrap: str, topic: str, workdir: Path, conf: dict[str, str] | None, rate: int,
                seconds: float) -> dict[str, Any]:
    """``icesql run`` (MAXIMUM PERIOD = '1s') while ``rate`` records/s arrive for ``seconds``."""
    import pyarrow.parquet as pq
    from pyiceberg.table import StaticTable

    from benchmarks import baselines as B
    from benchmarks.procmon import TreeSampler

    home, wh = workdir / "home", workdir / "warehouse"
    wh.mkdir(parents=True, exist_ok=True)
    table_dir = wh / "bench" / "events"
    script = pipeline_sql(workdir / "pipeline.sql", bootstrap, topic, wh, "MODE APPEND WITH (MAXIMUM PERIOD = '1s')")
    log = open(workdir / "icesql_latency.log", "wb")  # noqa: SIM115
    evdir = workdir / "eventlog"  # Spark's event log: where each trigger's time went (summarised below)
    evdir.mkdir(parents=True, exist_ok=True)
    ev_conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(evdir), "spark.eventLog.compress": "false"}
    cmd = [B.PROJECT_PY, "-m", "icesql", "--home", str(home), "run", str(script),
           *B._conf_args({**(conf or {}), **ev_conf})]
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=str(workdir),
                            env=B._child_env(B.PROJECT_PY), start_new_session=True)
    out: dict[str, Any] = {"name": "icesql_latency", "rate": rate, "seconds_produced": seconds,
                           "sink": "MODE APPEND WITH (MAXIMUM PERIOD = '1s')"}

    def committed() -> int:
        meta = B.newest_metadata(table_dir)
        if not meta:
            return 0
        with contextlib.suppress(Exception):
            snaps = _snapshots(meta)
            return snaps[-1]["total"] if snaps else 0
        return 0

    try:
        with TreeSampler(proc.pid) as sampler:
            # warm-up: 6 records (one per partition) until a snapshot holds them (the query runs)
            from tests.support import kafka as K

            K.produce(bootstrap, topic, [(None, value(10**12 + i)) for i in range(PARTITIONS)])
            t0 = time.time()
            while committed() < PARTITIONS:
                if proc.poll() is not None or time.time() - t0 > 300:
                    return {**out, "status": "error", "error": f"no warm-up snapshot (exit {proc.poll()})",
                            **_log_facts(workdir / "icesql_latency.log")}
                time.sleep(0.2)
            out["warmup_seconds"] = round(time.time() - t0, 1)
            pr = B.run_worker("latency_producer", B.PROJECT_PY, "benchmarks.kafka:latency_producer",
                              {"bootstrap": bootstrap, "topic": topic, "rate": rate, "seconds": seconds,
                               "first_id": 0}, workdir)
            out["producer"] = {k: pr.get(k) for k in ("status", "records", "seconds", "undelivered", "error")}
            want = PARTITIONS + (pr.get("records") or 0)
            t1 = time.time()
            while committed() < want and time.time() - t1 < 120 and proc.poll() is None:
                time.sleep(0.2)
            out["drained"] = committed() >= want
        out.update(sampler.report())
    finally:
        # SIGTERM to icesql alone (as a user's Ctrl-C / service stop reaches it): it makes its final
        # commit and stops its JVM; a SIGTERM to the whole group would kill the JVM under it first
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                out["stop_error"] = "icesql did not exit within 90 s of SIGTERM (killed)"
        out["exit_code"] = proc.poll()
        with contextlib.suppress(ProcessLookupError):  # whatever is left of its tree
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()
    with contextlib.suppress(Exception):
        out["triggers"] = trigger_summary(evdir)
    meta = B.newest_metadata(table_dir)
    if not meta:
        return {**out, "status": "error", "error": "no table"}
    t = StaticTable.from_metadata(meta)
    lat: list[float] = []
    per_snap: list[float] = []
    for s in t.metadata.snapshots:
        if s.summary is None or s.summary.operation.value != "append":
            continue  # a compaction's rewrite re-adds committed records: not their first snapshot
        for m in s.manifests(t.io):
            if m.added_snapshot_id != s.snapshot_id:
                continue
            for e in m.fetch_manifest_entry(t.io, discard_deleted=True):
                if e.snapshot_id != s.snapshot_id or int(e.status) != 1:  # 1 = ADDED
                    continue
                path = e.data_file.file_path.removeprefix("file://")
                tab = pq.read_table(path, columns=["id", "ts"])
                ids = tab.column("id").to_numpy()
                ts = tab.column("ts").cast("int64").to_numpy()  # µs since the epoch
                keep = ids < 10**12
                d = (s.timestamp_ms * 1000 - ts[keep]) / 1e6
                lat.extend(d.tolist())
                if keep.any():
                    per_snap.append(float(d.max()))
    out["snapshots"] = len(t.metadata.snapshots)
    out["records_measured"] = len(lat)
    if not lat:
        return {**out, "status": "error", "error": "no measured record committed"}
    lat.sort()

    def q(p: float) -> float:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))], 3)

    dur = max(1e-9, (max(s.timestamp_ms for s in t.metadata.snapshots) - min(
        s.timestamp_ms for s in t.metadata.snapshots)) / 1000)
    out.update(status="ok", latency_p50_s=q(0.50), latency_p99_s=q(0.99), latency_max_s=round(lat[-1], 3),
               snapshots_per_min=round(len(t.metadata.snapshots) / dur * 60, 1),
               seconds=out.get("seconds_produced"))
    if out["producer"].get("records") and len(lat) != out["producer"]["records"]:
        out["warning"] = f"{len(lat)} of {out['producer']['records']} produced records committed"
    return out


def measure(records: int, work: Path, conf: dict[str, str] | None, *, flat_sizes: tuple[int, ...] = (),
            latency: tuple[int, float] | None = (10_000, 60.0), skip: frozenset[str] = frozenset(),
            say: Any = print, keep: bool = False, broker_kind: str = "noida") -> dict[str, Any]:
    """The whole section: broker, topics, the three runs, the memory check at ``flat_sizes``, latency.
    ``broker_kind``: noida-db (the default) or tansu (``memory://``), which sizes its Fetch answers
    by the fetch limits (noida answers with a partition's whole remainder)."""
    import shutil

    from benchmarks import baselines as B
    from tests.support import kafka as K

    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    reason = K.missing_reason(broker_kind)
    if reason:
        return {"status": "n/a", "reason": reason}
    bdir = work / "broker"
    shutil.rmtree(bdir, ignore_errors=True)
    broker = K.Broker(broker_kind, bdir).start()
    try:
        bs = broker.bootstrap
        sizes = sorted({records, *flat_sizes})
        out["dataset"] = {"records": records, "partitions": PARTITIONS, "broker": BROKERS.get(broker_kind, broker_kind),
                          "producer": PRODUCER_CONF, "sample": value(records - 1).decode(),
                          "flat_sizes": [n for n in sizes if n != records]}
        for n in sizes:
            topic = TOPIC if n == records else f"{TOPIC}_{n}"
            K.create_topic(bs, topic, PARTITIONS)
            wd = work / f"produce-{n}"
            shutil.rmtree(wd, ignore_errors=True)
            say(f"kafka: producing {n:,} records to {topic}")
            pr = B.run_worker("produce", B.PROJECT_PY, "benchmarks.kafka:produce",
                              {"bootstrap": bs, "topic": topic, "records": n}, wd, timeout=3600)
            out[f"produce_{n}"] = pr
            say(f"kafka: produced {n:,} in {pr.get('seconds')} s ({pr.get('records_per_s')}/s) {pr.get('error') or ''}")
            if pr.get("status") != "ok":
                out["status"] = "error"
                out["error"] = f"produce: {pr.get('error')}"
                return out
        runs = [("raw_consume", lambda wd: B.run_worker(
                    "raw_consume", B.PROJECT_PY, "benchmarks.kafka:raw_consume",
                    {"bootstrap": bs, "topic": TOPIC, "records": records}, wd)),
                ("pyarrow_parquet", lambda wd: B.run_worker(
                    "pyarrow_parquet", B.PROJECT_PY, "benchmarks.kafka:pyarrow_parquet",
                    {"bootstrap": bs, "topic": TOPIC, "records": records, "workdir": str(wd)}, wd)),
                ("icesql_cli", lambda wd: icesql_once(bs, TOPIC, records, wd, conf))]
        for n in sizes:
            if n != records:
                runs.append((f"icesql_cli_{n}", lambda wd, n=n: icesql_once(bs, f"{TOPIC}_{n}", n, wd, conf,
                                                                             f"icesql_cli_{n}")))
        for name, fn in runs:
            if name in skip:
                continue
            wd = work / name
            shutil.rmtree(wd, ignore_errors=True)
            r = fn(wd)
            r["name"] = name
            r.setdefault("records", r.get("rows") or records)  # a flat-memory run: its own size
            out[name] = r
            say(f"kafka {name}: {r.get('status')} {r.get('seconds')} s, {r.get('rows_per_s')} records/s, "
                f"peak {r.get('peak_rss_mb')} MB {r.get('error') or ''}")
            if not keep:
                shutil.rmtree(wd / "parquet", ignore_errors=True)
        if latency and "latency" not in skip:
            rate, secs = latency
            topic = f"{TOPIC}_latency"
            K.create_topic(bs, topic, PARTITIONS)
            wd = work / "latency"
            shutil.rmtree(wd, ignore_errors=True)
            say(f"kafka latency: {rate}/s for {secs:g} s, MAXIMUM PERIOD = '1s'")
            r = latency_run(bs, topic, wd, conf, rate, secs)
            out["icesql_latency"] = r
            say(f"kafka latency: {r.get('status')} p50={r.get('latency_p50_s')} p99={r.get('latency_p99_s')} "
                f"{r.get('error') or r.get('warning') or ''}")
    finally:
        broker.stop()
        out["broker_log_tail"] = broker.log_text()[-500:]
    return out
