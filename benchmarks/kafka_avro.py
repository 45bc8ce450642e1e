"""Kafka Avro from a Schema Registry (issue 52): ``benchmarks/run.py --only kafka_avro``.

Beside the Kafka section (``benchmarks/kafka.py``: same broker, partitions, producer settings and
consumer), but on the append dataset (``datagen.gen_rows``: id long, ts timestamp-micros, category
and payload strings, amount ``["null","double"]`` (1 % null), qty int, event_date date, active
boolean, price decimal(12,2), user_id long), record n to partition ``n % 6``:

* the registry: ``tests/support/registry.py`` ``RegistryServer`` in the parent process (no
  Confluent registry installs here: the Java one needs Maven, Karapace is not on PyPI); the
  subject ``<topic>-value`` holds ``SCHEMA``;
* ``produce_avro``: the rows framed by confluent-kafka's own ``AvroSerializer``
  (``SchemaRegistryClient``, one ``serializer(row, ctx)`` call per record: magic byte, schema id,
  fastavro body); ``produce_json``: the same rows as JSON objects, the encodings of the append
  dataset's JSON lines (``datagen._json_select``: ts ISO-8601 UTC, event_date ``YYYY-MM-DD``,
  price a number, amount null where null). Both timed, not counted;
* ``icesql_avro``: ``icesql --home <fresh> run pipeline.sql --once`` with ``CREATE SOURCE ...
  FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY CONNECTION csr`` (columns from the subject's latest
  schema); ``icesql_json``: the same on the JSON topic, ``FORMAT = 'json', SCHEMA =
  datagen.SPARK_DDL``; both checked as the Kafka section checks them (row count, no null in ts,
  event_date, price);
* ``avro_baseline``: one process, the JSON baseline's structure (``kafka.pyarrow_parquet``) with
  confluent's ``AvroDeserializer`` called per record in place of ``pyarrow.json``: 100k decoded
  records at a time to ``pa.Table.from_pylist`` (the append dataset's schema), written by
  ``pyarrow.parquet.ParquetWriter`` (zstd, a new file at 128 MiB);
* flat memory: ``icesql_avro`` again on topics of other sizes (``flat_sizes``).

Workers run through ``workers/entry.py`` (``benchmarks.kafka_avro:<fn>``) and print one ``RESULT``
line; every run is a fresh process with its whole tree's memory sampled (``procmon``).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks import kafka as KF
from benchmarks.datagen import AVRO_SCHEMA as SCHEMA

TOPIC = "events_avro"
JSON_TOPIC = "events_json"
GEN_CHUNK = 100_000


def _chunks(records: int) -> Any:
    """The append dataset of ``records`` rows, GEN_CHUNK rows at a time (an Arrow table each)."""
    from benchmarks.datagen import arange, gen_rows

    for start in range(0, records, GEN_CHUNK):
        yield start, gen_rows(arange(min(GEN_CHUNK, records - start), start), total_rows=records)


def _produce(bootstrap: str, topic: str, records: int, values: Any) -> dict[str, Any]:
    """Produce ``values(start, table) -> list[bytes]`` for every chunk (timed, generation included)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, **KF.PRODUCER_CONF})
    failed: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None and len(failed) < 5:
            failed.append(str(err))

    t0 = time.perf_counter()
    nbytes = n = 0
    for start, table in _chunks(records):
        for i, v in enumerate(values(table), start):
            nbytes += len(v)
            while True:
                try:
                    p.produce(topic, v, partition=i % KF.PARTITIONS, on_delivery=on_delivery)
                    break
                except BufferError:
                    p.poll(0.05)
            n += 1
        p.poll(0)
    left = p.flush(600)
    secs = time.perf_counter() - t0
    if left or failed or n != records:
        raise RuntimeError(f"{left} undelivered, {n} produced, errors: {failed}")
    return {"records": records, "seconds": round(secs, 2), "records_per_s": round(records / secs),
            "value_bytes_avg": round(nbytes / records, 1), "mb": round(nbytes / 2**20, 1)}


def digest(paths: Any) -> dict[str, str]:
    """A digest of the rows in Parquet files ``paths``, read one at a time: per column a sum (ts and
    event_date as integers, strings by their UTF-8 lengths, amount with its null count, active as its
    trues): equal digests on every side say they all wrote the same records, whatever the order."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    acc: dict[str, Any] = {}

    def add(k: str, v: Any) -> None:
        acc[k] = acc.get(k, 0) + (v or 0)

    for path in paths:
        t = pq.read_table(str(path).removeprefix("file://"))
        add("rows", t.num_rows)
        for c in ("id", "qty", "user_id"):
            add(c, pc.sum(t.column(c).cast(pa.int64())).as_py())
        ts = t.column("ts").cast(pa.timestamp("us")).cast(pa.int64())
        secs = pc.divide(ts, 1_000_000)  # seconds and microseconds apart: a sum of µs overflows int64
        add("ts_s", pc.sum(secs).as_py())
        add("ts_us", pc.sum(pc.subtract(ts, pc.multiply(secs, 1_000_000))).as_py())
        add("event_date", pc.sum(t.column("event_date").cast(pa.int32()).cast(pa.int64())).as_py())
        for c in ("category", "payload"):
            add(c, pc.sum(pc.utf8_length(t.column(c)).cast(pa.int64())).as_py())
        add("amount_nulls", t.column("amount").null_count)
        add("amount", round(pc.sum(t.column("amount")).as_py() or 0.0, 2))
        add("active", pc.sum(t.column("active").cast(pa.int64())).as_py())
        add("price", pc.sum(t.column("price")).as_py())
    return {k: str(round(v, 2) if isinstance(v, float) else v) for k, v in sorted(acc.items())}


def table_digest(metadata: str) -> dict[str, str]:
    from pyiceberg.table import StaticTable

    return digest(task.file.file_path for task in StaticTable.from_metadata(metadata).scan().plan_files())


# --------------------------------------------------------------------------------- workers
def produce_avro(bootstrap: str, topic: str, records: int, registry_url: str) -> dict[str, Any]:
    """The rows through confluent-kafka's AvroSerializer, one call per record (the subject
    ``<topic>-value`` is registered beforehand; the serializer looks its id up once)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    ser = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(SCHEMA),
                         conf={"auto.register.schemas": False, "use.latest.version": True})
    ctx = SerializationContext(topic, MessageField.VALUE)
    return _produce(bootstrap, topic, records, lambda table: [ser(row, ctx) for row in table.to_pylist()])


def produce_json(bootstrap: str, topic: str, records: int) -> dict[str, Any]:
    """The same rows as JSON objects (the append dataset's JSON-lines encodings, by DuckDB)."""
    import duckdb

    from benchmarks.datagen import _json_select

    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    con.execute("SET threads=1")  # one thread keeps the rows in order

    def values(table: Any) -> list[bytes]:
        con.register("chunk", table)
        rows = con.execute(f"SELECT to_json(t)::VARCHAR FROM ({_json_select('chunk')}) t").fetchall()
        con.unregister("chunk")
        return [r[0].encode() for r in rows]

    return _produce(bootstrap, topic, records, values)


def avro_baseline(bootstrap: str, topic: str, records: int, workdir: str, registry_url: str) -> dict[str, Any]:
    """(c) Consume with confluent-kafka, decode each record with confluent's AvroDeserializer, 100k
    records at a time into a pyarrow table, written as zstd Parquet (128 MiB files)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from benchmarks.datagen import SCHEMA as ARROW_SCHEMA

    de = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
    ctx = SerializationContext(topic, MessageField.VALUE)
    out = Path(workdir) / "parquet"
    out.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {"buf": [], "writer": None, "path": None, "files": [], "decode_s": 0.0,
                             "table_s": 0.0, "write_s": 0.0}

    def flush() -> None:
        rows = state["buf"]
        if not rows:
            return
        t = time.perf_counter()
        table = pa.Table.from_pylist(rows, schema=ARROW_SCHEMA)
        state["buf"] = []
        t2 = time.perf_counter()
        state["table_s"] += t2 - t
        if state["writer"] is None:
            state["path"] = out / f"part-{len(state['files']):05d}.parquet"
            state["writer"] = pq.ParquetWriter(state["path"], ARROW_SCHEMA, compression="zstd")
        state["writer"].write_table(table)
        if state["path"].stat().st_size >= KF.FILE_BYTES:
            state["writer"].close()
            state["files"].append(state["path"].stat().st_size)
            state["writer"] = None
        state["write_s"] += time.perf_counter() - t2

    def on_batch(vals: list[bytes]) -> None:
        t = time.perf_counter()
        state["buf"].extend([de(v, ctx) for v in vals])
        state["decode_s"] += time.perf_counter() - t
        if len(state["buf"]) >= KF.DECODE_CHUNK:
            flush()

    t0 = time.perf_counter()
    n, nbytes = KF._consume_all(bootstrap, topic, on_batch)
    flush()
    if state["writer"] is not None:
        state["writer"].close()
        state["files"].append(state["path"].stat().st_size)
    secs = time.perf_counter() - t0
    rows = sum(pq.read_metadata(f).num_rows for f in out.glob("*.parquet"))
    dig = digest(sorted(out.glob("*.parquet")))  # after the clock: a check, not part of the work
    sizes = sorted(state["files"])
    res = {"records": n, "seconds": round(secs, 2), "rows_per_s": round(n / secs), "rows_in_files": rows,
           "mb": round(nbytes / 2**20, 1), "decode_seconds": round(state["decode_s"], 2),
           "table_seconds": round(state["table_s"], 2), "write_seconds": round(state["write_s"], 2),
           "files": len(sizes), "file_mb_median": round(statistics.median(sizes) / 2**20, 1) if sizes else None,
           "matches_expected": rows == records, "digest": dig}
    if rows != records:
        res.update(status="error", error=f"wrote {rows} rows, {records} expected")
    return res


# --------------------------------------------------------------------------------- parent side
def pipeline_sql(path: Path, bootstrap: str, topic: str, warehouse: Path, registry_url: str | None) -> Path:
    """The user's script: the Avro topic through the registry (``registry_url``), else the JSON topic."""
    from benchmarks.datagen import SPARK_DDL

    if registry_url:
        conn = f"CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = '{registry_url}');\n"
        source = (f"CREATE SOURCE events FROM KAFKA CONNECTION k (TOPIC = '{topic}') "
                  "FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY CONNECTION csr;\n")
    else:
        conn = ""
        source = (f"CREATE SOURCE events FROM KAFKA CONNECTION k (TOPIC = '{topic}', FORMAT = 'json', "
                  f"SCHEMA = '{SPARK_DDL}');\n")
    path.write_text(
        f"CREATE CONNECTION k TO KAFKA (BROKER = '{bootstrap}') WITH (VALIDATE = false);\n{conn}{source}"
        f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{warehouse}');\n"
        "CREATE SINK s FROM events INTO ICEBERG CATALOG lake (NAMESPACE = 'bench', TABLE = 'events');\n")
    return path


def icesql_once(bootstrap: str, topic: str, records: int, workdir: Path, conf: dict[str, str] | None,
                name: str, registry_url: str | None) -> dict[str, Any]:
    from benchmarks import baselines as B

    home, wh = workdir / "home", workdir / "warehouse"
    wh.mkdir(parents=True, exist_ok=True)
    script = pipeline_sql(workdir / "pipeline.sql", bootstrap, topic, wh, registry_url)
    start_ms = time.time() * 1000
    r = B.run_icesql_cli(name, home, ["run", str(script), "--once", *B._conf_args(conf)], workdir)
    r["rows"] = records
    r = B._e2e_facts(r, wh / "bench" / "events", records)  # seconds = wall; row count, nulls of ts/event_date/price
    r["name"] = name
    meta = B.newest_metadata(wh / "bench" / "events")
    if meta:
        snaps = KF._snapshots(meta)
        appends = [s for s in snaps if s["op"] == "append"]
        if appends:
            r["to_last_commit_s"] = round((max(s["ms"] for s in appends) - start_ms) / 1000, 2)
        r["snapshot_ops"] = [f"{s['op']}:{s['added']}" for s in snaps][:50]
        if r.get("status") == "ok":
            r["digest"] = table_digest(meta)
    if r.get("status") != "ok":
        r.update(KF._log_facts(workdir / f"{name}.log"))
    return r


def measure(records: int, work: Path, conf: dict[str, str] | None, *, flat_sizes: tuple[int, ...] = (),
            skip: frozenset[str] = frozenset(), say: Any = print, keep: bool = False,
            broker_kind: str = "noida") -> dict[str, Any]:
    """The whole section: broker, registry, topics, the three runs at ``records``, icesql Avro at
    ``flat_sizes``, and a plain consumer of each Avro topic (``raw_consume_<n>``: what the broker's
    Fetch answers cost a consumer that keeps nothing, the control for the flat-memory goal).
    ``broker_kind``: noida (the Kafka section's) or tansu (``memory://``), which may size its Fetch
    answers differently."""
    import shutil

    from benchmarks import baselines as B
    from tests.support import kafka as K
    from tests.support.registry import RegistryServer

    work.mkdir(parents=True, exist_ok=True)
    reason = K.missing_reason(broker_kind)
    if reason:
        return {"status": "n/a", "reason": reason}
    out: dict[str, Any] = {}
    bdir = work / "broker"
    shutil.rmtree(bdir, ignore_errors=True)
    broker = K.Broker(broker_kind, bdir).start()
    registry = RegistryServer().start()
    try:
        bs, url = broker.bootstrap, registry.url
        sizes = sorted({records, *flat_sizes})
        out["dataset"] = {"records": records, "partitions": KF.PARTITIONS, "broker": {"noida": "noida-db 0.2.3", "tansu": "tansu 0.6.0 (memory://)"}.get(broker_kind, broker_kind),
                          "registry": "tests/support/registry.py RegistryServer (stand-in)",
                          "producer": KF.PRODUCER_CONF, "avro_schema": SCHEMA,
                          "flat_sizes": [n for n in sizes if n != records]}

        def topic_of(n: int) -> str:
            return TOPIC if n == records else f"{TOPIC}_{n}"

        producers = [(n, topic_of(n), "avro") for n in sizes]
        if "icesql_json" not in skip:
            producers.insert(1 if sizes[0] != records else 0, (records, JSON_TOPIC, "json"))
        for n, topic, kind in producers:
            K.create_topic(bs, topic, KF.PARTITIONS)
            args: dict[str, Any] = {"bootstrap": bs, "topic": topic, "records": n}
            if kind == "avro":
                out.setdefault("schema_ids", {})[topic] = registry.register(f"{topic}-value", json.dumps(SCHEMA))["id"]
                args["registry_url"] = url
            say(f"kafka_avro: producing {n:,} {kind} records to {topic}")
            pr = B.run_worker(f"produce_{kind}_{n}", B.PROJECT_PY, f"benchmarks.kafka_avro:produce_{kind}", args,
                              work / f"produce-{kind}-{n}", timeout=7200)
            out[f"produce_{kind}_{n}"] = pr
            say(f"kafka_avro: produced {n:,} {kind} in {pr.get('seconds')} s ({pr.get('records_per_s')}/s, "
                f"{pr.get('value_bytes_avg')} bytes each) {pr.get('error') or ''}")
            if pr.get("status") != "ok":
                return {**out, "status": "error", "error": f"produce {kind} {n}: {pr.get('error')}"}
        runs = [("icesql_avro", lambda wd: icesql_once(bs, TOPIC, records, wd, conf, "icesql_avro", url)),
                ("icesql_json", lambda wd: icesql_once(bs, JSON_TOPIC, records, wd, conf, "icesql_json", None)),
                ("avro_baseline", lambda wd: B.run_worker(
                    "avro_baseline", B.PROJECT_PY, "benchmarks.kafka_avro:avro_baseline",
                    {"bootstrap": bs, "topic": TOPIC, "records": records, "workdir": str(wd), "registry_url": url},
                    wd))]
        for n in sizes:
            runs.append((f"raw_consume_{n}", lambda wd, n=n: B.run_worker(
                f"raw_consume_{n}", B.PROJECT_PY, "benchmarks.kafka:raw_consume",
                {"bootstrap": bs, "topic": topic_of(n), "records": n}, wd)))
            if n != records:
                runs.append((f"icesql_avro_{n}", lambda wd, n=n: icesql_once(
                    bs, topic_of(n), n, wd, conf, f"icesql_avro_{n}", url)))
        for name, fn in runs:
            if name in skip:
                continue
            wd = work / name
            shutil.rmtree(wd, ignore_errors=True)
            load = _load()
            r = fn(wd)
            r["name"] = name
            r.setdefault("records", r.get("rows") or records)
            r["load_before"], r["load_after"] = load, _load()
            out[name] = r
            say(f"kafka_avro {name}: {r.get('status')} {r.get('seconds')} s, {r.get('rows_per_s')} records/s, "
                f"peak {r.get('peak_rss_mb')} MB, load {r['load_before']} -> {r['load_after']} {r.get('error') or ''}")
            if not keep:
                shutil.rmtree(wd / "parquet", ignore_errors=True)
                shutil.rmtree(wd / "warehouse", ignore_errors=True)
        ref = (out.get("avro_baseline") or {}).get("digest")
        for name in ("icesql_avro", "icesql_json"):
            r = out.get(name) or {}
            if ref and r.get("digest"):  # the same records as the baseline decoded, on every side
                r["same_rows_as_baseline"] = r["digest"] == ref
                if not r["same_rows_as_baseline"]:
                    r["warning"] = f"rows differ from the baseline's: {r['digest']} vs {ref}"
    finally:
        registry.stop()
        broker.stop()
        out["broker_log_tail"] = broker.log_text()[-500:]
    return out


def _load() -> float:
    import os

    return round(os.getloadavg()[0], 2)
