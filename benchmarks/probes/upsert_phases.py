"""Probe: where each batch of the upsert benchmark's writer goes, phase by phase, and what its
Kafka broker takes from the same cores (issue 54).

Runs the benchmark's writer itself (``icesql_hooks.run_icesql_upsert``: the 1M-key base, then the
10 Debezium batches, one ``run(once=True)`` per batch, or ``--running``), with a timer around the
steps of a batch: the range reads and their decode, the shards' tasks and their lookups, the
commit, the maintenance after it (a small compaction in the gap, the key index's follow) and the
rewrite a run hands to the next. Per batch it prints each step's threads, count, total seconds and
first start / last end (seconds from the batch's start), and the CPU seconds the writer's process
and the broker's used meanwhile (``/proc/<pid>/stat``). ``--files``: the changes from files (no
broker); ``--log``: the sink's and the index's log lines (the follow's split into reading and
updating the shards).

The data is the benchmark's (``run.py --only upsert --data-dir DIR`` makes it):
``.venv/bin/python benchmarks/probes/upsert_phases.py --data /tmp/bench/data/upsert-1000000-10x100000
[--running] [--files] [--log] [--work /tmp/upsert-phases]``
"""

from __future__ import annotations

import sys

if sys.path and sys.path[0] == __import__("os").path.dirname(__import__("os").path.abspath(__file__)):
    sys.path.pop(0)  # the probes directory would shadow the standard library's ``select``

import argparse
import functools
import importlib
import inspect
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # ``benchmarks`` and ``tests.support``

from benchmarks.procmon import cpu_seconds  # noqa: E402

EVENTS: list[tuple[str, str, float, float]] = []  # (step, thread, start, end)

STEPS = [
    ("icesql.engine.engine", "Engine.run"),
    ("icesql.engine.sink.key_index", "SinkKeyIndex.open"),
    ("icesql.engine.sink.key_index", "SinkKeyIndex.follow"),
    ("icesql.engine.backends.local.query", "LocalQuery._batch"),
    ("icesql.engine.sources.kafka.topic", "read_range"),
    ("icesql.engine.sources.decode", "debezium_events"),
    ("icesql.engine.index.task", "ShardTask.__call__"),
    ("icesql.engine.index.shard", "lookup"),
    ("icesql.engine.iceberg.writer", "DataFileWriter.close"),
    ("icesql.engine.sink.committer", "Committing.commit"),
    ("icesql.engine.sink.maintainer", "Maintainer.after_commit"),
    ("icesql.engine.sink.maintainer", "Maintainer._run"),
    ("icesql.engine.sink.maintainer", "Maintainer._run_large"),
    ("icesql.engine.sink.maintainer", "Maintainer.at_end"),
]


def timed(module: str, qualname: str) -> None:
    """Wrap ``module.qualname`` (a function or a generator) so each call is recorded in EVENTS."""
    owner: Any = importlib.import_module(module)
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    fn = getattr(owner, name)

    def record(started: float) -> None:
        EVENTS.append((qualname, threading.current_thread().name, started, time.perf_counter()))

    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def wrapper(*a: Any, **k: Any) -> Any:
            started = time.perf_counter()
            try:
                yield from fn(*a, **k)
            finally:
                record(started)
    else:

        @functools.wraps(fn)
        def wrapper(*a: Any, **k: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                record(started)

    setattr(owner, name, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="the upsert dataset's directory")
    ap.add_argument("--work", default="/tmp/upsert-phases")
    ap.add_argument("--running", action="store_true")
    ap.add_argument("--files", action="store_true", help="changes from files, no broker")
    ap.add_argument("--log", action="store_true")
    args = ap.parse_args()
    if args.log:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(relativeCreated)9.0f %(threadName)s %(message)s"))
        for name in ("icesql.sink", "icesql.maintenance", "icesql.index"):
            logging.getLogger(name).setLevel(logging.DEBUG)
            logging.getLogger(name).addHandler(handler)
    for module, qualname in STEPS:
        timed(module, qualname)

    import icesql
    from benchmarks import icesql_hooks
    from tests.support import kafka as K

    data = Path(args.data)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    broker = None if args.files else K.Broker("noida", work / "broker").start()
    broker_pid = broker.pid if broker is not None else None
    cpu: list[tuple[float, float, float]] = []  # per run(): wall, this process's CPU, the broker's
    run = icesql.Session.run

    def measured_run(self: Any, *a: Any, **k: Any) -> Any:
        c0, b0, t0 = cpu_seconds(os.getpid()), cpu_seconds(broker_pid), time.perf_counter()
        try:
            return run(self, *a, **k)
        finally:
            cpu.append((time.perf_counter() - t0, cpu_seconds(os.getpid()) - c0, cpu_seconds(broker_pid) - b0))

    icesql.Session.run = measured_run  # type: ignore[method-assign]
    try:
        base = sorted(str(p) for p in (data / "base").glob("*.parquet"))
        changes = sorted(str(p) for p in (data / "debezium").glob("*.json"))
        result = icesql_hooks.run_icesql_upsert(
            base, str(data / "base"), [], changes, 0, str(work / "home"),
            kafka=str(broker.bootstrap) if broker is not None else None, running=args.running,
            broker_pid=broker_pid,
        )
    finally:
        if broker is not None:
            broker.stop()
    print(f"batches: {result['seconds']} s {result['batch_seconds']}")
    if broker_pid:
        print(f"broker CPU during the batches: {result.get('broker_cpu_s')} s")
    if not args.running:
        for wall, mine, theirs in cpu[-len(changes):]:
            print(f"  wall {wall:.2f} s, this process's CPU {mine:.2f} s, the broker's {theirs:.2f} s")
    unit = "LocalQuery._batch" if args.running else "Engine.run"
    batches = sorted((e for e in EVENTS if e[0] == unit), key=lambda e: e[2])[-len(changes):]
    for i, (_, _, start, end) in enumerate(batches):
        print(f"=== batch {i}: {end - start:.3f} s")
        steps: dict[tuple[str, str], list[float]] = {}
        for step, thread, s, e in EVENTS:
            if start - 0.001 <= s <= end:
                key = (step, thread.split("_")[0] if thread.startswith("icesql-task") else thread)
                x = steps.setdefault(key, [0, 0.0, s - start, 0.0])
                x[0] += 1
                x[1] += e - s
                x[3] = max(x[3], e - start)
        for (step, thread), (n, total, first, last) in sorted(steps.items(), key=lambda kv: kv[1][2]):
            print(f"  {step:28s} {thread[:28]:28s} n={n:3.0f} sum={total:6.3f} from {first:6.3f} to {last:6.3f}")


if __name__ == "__main__":
    main()
