"""Probe: the CPU a test broker uses after a produced transaction and after a read, while nothing
else asks it anything (issue 54: the Kafka upsert writers share two cores with their broker).

Produces the upsert benchmark's Debezium change files to a 6-partition topic, one transaction per
file (``kafka.FileProducer``, as the benchmark does), then samples the broker's CPU seconds
(``/proc/<pid>/stat``) every 0.5 s for ``--idle`` seconds; then reads the file's records back with
icesql's range reader (``topic.read_range``, each partition's new range) and samples again.
noida-db saves its whole data about once a second after a change: a core for 1-3.5 s per
file here, longer as the topic grows; tansu (memory storage) uses none.

``.venv/bin/python benchmarks/probes/broker_idle.py --data /tmp/bench/data/upsert-1000000-10x100000
[--broker noida|tansu] [--files 4] [--idle 4]``
"""

from __future__ import annotations

import sys

if sys.path and sys.path[0] == __import__("os").path.dirname(__import__("os").path.abspath(__file__)):
    sys.path.pop(0)  # the probes directory would shadow the standard library's ``select``

import argparse
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.procmon import cpu_seconds  # noqa: E402


def sample(pid: int, seconds: float, what: str) -> None:
    last = cpu_seconds(pid)
    steps = []
    for _ in range(int(seconds / 0.5)):
        time.sleep(0.5)
        now = cpu_seconds(pid)
        steps.append(f"{now - last:.2f}")
        last = now
    print(f"  {what}: the broker's CPU per 0.5 s: {' '.join(steps)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="the upsert dataset's directory")
    ap.add_argument("--broker", default="noida", choices=("noida", "tansu"))
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--idle", type=float, default=4.0)
    args = ap.parse_args()

    from benchmarks.kafka import FileProducer
    from icesql.engine.sources.kafka.topic import read_range
    from tests.support import kafka as K

    work = Path(tempfile.mkdtemp(prefix="broker-idle-"))
    broker = K.Broker(args.broker, work / "broker").start()
    try:
        pid = broker.pid
        assert pid is not None
        producer = FileProducer(str(broker.bootstrap), "changes")
        conf = {"bootstrap.servers": str(broker.bootstrap)}
        start: dict[int, int] = {}
        for path in sorted((Path(args.data) / "debezium").glob("*.json"))[: args.files]:
            before, t0 = cpu_seconds(pid), time.perf_counter()
            ends = producer.send(str(path))
            print(f"{path.name}: produced in {time.perf_counter() - t0:.2f} s, the broker's CPU {cpu_seconds(pid) - before:.2f} s")
            sample(pid, args.idle, "then idle")
            before, t0, rows = cpu_seconds(pid), time.perf_counter(), 0
            for p, end in ends.items():
                for batch in read_range(conf, "changes", p, start.get(p, 0), end, columns={"value", "topic", "partition", "offset"}):
                    rows += batch.num_rows
                start[p] = end
            print(f"  read {rows} records in {time.perf_counter() - t0:.2f} s, the broker's CPU {cpu_seconds(pid) - before:.2f} s")
            sample(pid, args.idle, "after the read")
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
