"""Probe: partition ranges read back to back by icesql's kept Kafka reader, per fetch wait.

A kept reader (``sources.kafka.topic._reader``) reads one partition range after another. librdkafka
keeps one fetch in flight per broker and sends the next, past a range's last record, as that record
arrives; a broker that honours ``fetch.wait.max.ms`` holds that fetch that long, and the next
range's first record waits for it. This starts a broker (tansu: honours the wait, as Apache Kafka
does; noida-db: answers at once), writes 20,000 JSON records to each of 6 partitions and reads the
6 ranges three times over with one kept reader, for each wait given (``default``: icesql's own,
``FETCH_WAIT_MS``); it prints each round's seconds and each range's.

    .venv/bin/python benchmarks/probes/kafka_range_reads.py tansu default,100,50
"""

from __future__ import annotations

import sys

if sys.path and sys.path[0] == __import__("os").path.dirname(__import__("os").path.abspath(__file__)):
    sys.path.pop(0)  # the probes directory would shadow the standard library's ``select``

import json
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.kafka import Broker, create_topic, free_port, log_end, produce  # noqa: E402

from icesql.engine.sources.kafka import topic as T  # noqa: E402

PARTITIONS = 6
RECORDS = 120_000


def main() -> None:
    kind = sys.argv[1] if len(sys.argv) > 1 else "tansu"
    waits = (sys.argv[2] if len(sys.argv) > 2 else "default,100").split(",")
    with Broker(kind, tempfile.mkdtemp(prefix="range-reads-"), port=free_port()).start() as b:
        create_topic(b.bootstrap, "t", partitions=PARTITIONS)
        produce(b.bootstrap, "t", [(None, json.dumps({"id": i, "v": "x" * 40}).encode(), None, i % PARTITIONS)
                                   for i in range(RECORDS)])
        ends = log_end(b.bootstrap, "t")
        conf = {"bootstrap.servers": b.bootstrap}
        print(f"{kind}: {PARTITIONS} partitions x {RECORDS // PARTITIONS:,} records, FETCH_WAIT_MS={T.FETCH_WAIT_MS}")
        made = T.new_consumer
        for w in waits:
            if w != "default":
                T.new_consumer = lambda conf, _w=int(w), **extra: made(conf, **{**extra, "fetch.wait.max.ms": _w})
            T._close_all([c for cs in T._IDLE_READERS.values() for c in cs])
            T._IDLE_READERS.clear()
            for rnd in range(3):
                began = time.monotonic()
                per = []
                for p, e in sorted(ends.items()):
                    s = time.monotonic()
                    rows = sum(x.num_rows for x in T.read_range(conf, "t", p, 0, e))
                    assert rows == e, (rows, e)
                    per.append(f"{time.monotonic() - s:.3f}")
                print(f"wait={w} ms round {rnd + 1}: {time.monotonic() - began:.3f} s  (ranges: {' '.join(per)})")
            T.new_consumer = made


if __name__ == "__main__":
    main()
