"""A sink in a child process, for crash tests: ``python -m tests.support.crash_runner ...``.

Runs one APPEND sink (JSON files → ``ns.events`` partitioned by ``day(ts)`` on a local
catalog) through ``Engine.run(once=True)`` (or until killed with ``--continuous``), on
``local[2]`` or on the Spark Connect server given with ``--spark-master sc://...``. Its state
(sink id and version) lives in ``<home>/state.json`` so restarts see it.

Kill points (the test sets them; the process group is SIGKILLed, JVM included):

* ``ICESQL_TEST_KILL_AT`` — the pipeline's points (``write``, ``staged``, ``committed``);
* ``ICESQL_TEST_KILL_COMMIT`` = ``before:N`` / ``after:N`` — inside the N-th catalog commit of
  this process: after the manifests are written but before the catalog swaps the metadata
  pointer, or right after the swap (before ``commit`` returns to the pipeline).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path


def _kill() -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _patch_commit(spec: str) -> None:
    from pyiceberg.table import Transaction

    when, _, n = spec.partition(":")
    target = int(n or "1")
    original = Transaction.commit_transaction
    count = {"n": 0}

    def commit_transaction(self):  # type: ignore[no-untyped-def]
        count["n"] += 1
        if count["n"] == target and when == "before":
            _kill()
        out = original(self)
        if count["n"] == target and when == "after":
            _kill()
        return out

    Transaction.commit_transaction = commit_transaction  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--warehouse", type=Path, required=True)
    ap.add_argument("--min-size", type=int, default=None)
    ap.add_argument("--continuous", action="store_true")
    ap.add_argument("--files-per-trigger", type=int, default=1)
    ap.add_argument("--on-error", default="fail", help="the sink's ON ERROR (fail, skip, dead-letter)")
    ap.add_argument("--spark-master", default=None, help="e.g. sc://127.0.0.1:PORT (default local[2])")
    ap.add_argument("--kafka", default=None, help="BOOTSTRAP:TOPIC - read a KAFKA topic instead of --data")
    ap.add_argument("--records-per-trigger", type=int, default=None, help="KAFKA: MAX RECORDS PER TRIGGER")
    ap.add_argument(
        "--topic-pattern", default=None, help="KAFKA: read the topics matching this (--kafka BOOTSTRAP: only)"
    )
    args = ap.parse_args(argv)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    os.environ["ICESQL_TEST_KILL_PGID"] = str(os.getpgrp())  # inherited by the JVM and Python workers
    if os.environ.get("ICESQL_TEST_KILL_COMMIT"):
        _patch_commit(os.environ["ICESQL_TEST_KILL_COMMIT"])

    from icesql.engine.engine import Engine
    from icesql.plan import (
        CommitPolicy,
        KafkaConnectionPlan,
        KafkaInclude,
        KafkaMetadata,
        KafkaSourceSpec,
        OnError,
        PartitionFieldPlan,
        SinkPlan,
        SourceFormat,
        SourceKind,
        SourcePlan,
        Transform,
    )
    from tests.support.pipeline_helpers import SPARK_TEST_CONF, Objects, State, local_catalog, spark_for_tests

    connections: dict[str, object] = {"cat": local_catalog(warehouse=args.warehouse)}
    if args.kafka:
        bootstrap, _, topic = args.kafka.rpartition(":")
        connections["k"] = KafkaConnectionPlan("k", (bootstrap,))
        # a source of many topics: what the analyzer makes of TOPIC PATTERN (its topic column too)
        many = {
            "topic_pattern": args.topic_pattern,
            "include": (KafkaInclude(KafkaMetadata.TOPIC, "topic"),),
        }
        source = SourcePlan(
            name="events",
            source_kind=SourceKind.KAFKA,
            format=SourceFormat.JSON,
            schema="id BIGINT, ts TIMESTAMP, v STRING",
            kafka=KafkaSourceSpec(
                connection="k",
                topic=topic,
                max_records_per_trigger=args.records_per_trigger,
                **(many if args.topic_pattern else {}),  # type: ignore[arg-type]
            ),
        )
    else:
        source = SourcePlan(
            name="events",
            source_kind=SourceKind.FILES,
            path=str(args.data),
            format=SourceFormat.JSON,
            schema="id BIGINT, ts TIMESTAMP, v STRING",
            max_files_per_trigger=args.files_per_trigger,
        )
    plan = SinkPlan(
        name="crashy",
        relation="events",
        catalog_connection="cat",
        namespace=("ns",),
        table="events",
        partition_by=(PartitionFieldPlan("ts", Transform.DAY, name="ts_day"),),
        commit=CommitPolicy(minimum_size=args.min_size),
        on_error=OnError(args.on_error),
    )
    local = not args.continuous and os.environ.get("ICESQL_LOCAL_RUN", "1") != "0"
    engine = Engine(
        args.home,
        objects=Objects(connections, {"events": source}),  # type: ignore[arg-type]
        secrets=lambda name: "unused",
        state=State(args.home / "state.json"),
        # a run --once without Spark (ICESQL_LOCAL_RUN, the default) starts none; a batch needing
        # Spark there starts it on local[2] with the tests' settings, as spark_for_tests does
        spark=spark_for_tests() if args.spark_master is None and not local else None,
        spark_master=args.spark_master or "local[2]",
        spark_conf=SPARK_TEST_CONF,
        trigger_interval=0.1,
    )
    print("crash_runner: started", flush=True)
    engine.run([plan], once=not args.continuous)
    print("crash_runner: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
