"""Probe: where a ``run --once`` of a registry Avro Kafka source spends its time (issue 52).

Starts noida-db and the stand-in registry, produces N records of the append dataset with
confluent's AvroSerializer (``benchmarks/kafka_avro.produce_avro``), then runs the kafka_avro
section's script in this process (``icesql.Session.run(once=True)``: the same in-process path as
``icesql run --once``) under cProfile: the main thread and every task thread (``map_in_threads``
wrapped so each task runs under a profiler of its own; the profiles are merged). Prints the wall
time, the process CPU time, the ``ICESQL_TEST_TIMELINE`` steps and the top functions by own time
and by cumulative time; ``--out FILE`` also writes the pstats dump and the text.

Usage: ``python benchmarks/probes/registry_avro_profile.py [--records 1000000] [--out prof]``
"""

from __future__ import annotations

import sys

if sys.path and sys.path[0] == __import__("os").path.dirname(__import__("os").path.abspath(__file__)):
    sys.path.pop(0)  # probes/select.py would hide the standard library's select

import argparse  # noqa: E402
import cProfile  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pstats  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--out", default=None, help="write FILE.pstats and FILE.txt")
    ap.add_argument("--top", type=int, default=35)
    ap.add_argument("--broker-dir", default=None,
                    help="reuse this noida-db data directory (e.g. the kafka_avro section's work/kafka_avro/broker) "
                         "and its TOPIC instead of producing; the schema is registered again (same id: 1)")
    ap.add_argument("--topic", default=None, help="with --broker-dir: the topic to read (default events_avro)")
    ap.add_argument("--raw-consume", default=None, metavar="RECORDS,...",
                    help="with --broker-dir: instead of the profile, the peak RSS of one plain confluent-kafka "
                         "consumer (kafka.raw_consume, a fresh process, values counted not decoded) reading "
                         "events_avro_<RECORDS> for each RECORDS (the memory the broker's Fetch answers cost)")
    ap.add_argument("--icesql-pair", type=int, default=None, metavar="RECORDS",
                    help="with --broker-dir: instead of the profile, the section's three runs again (fresh "
                         "processes) on its topics (events_json, events_avro: RECORDS each) in the opposite order: "
                         "icesql JSON, the AvroDeserializer baseline, icesql Avro")
    a = ap.parse_args()

    from benchmarks import kafka as KF
    from benchmarks import kafka_avro as KA
    from tests.support import kafka as K
    from tests.support.registry import RegistryServer

    work = Path(tempfile.mkdtemp(prefix="icesql-avro-prof-"))
    timeline = work / "timeline.txt"
    os.environ["ICESQL_TEST_TIMELINE"] = str(timeline)
    # a data directory of gigabytes takes noida-db more than the default 30 s to open
    broker = K.Broker("noida", Path(a.broker_dir) if a.broker_dir else work / "broker").start(timeout=600)
    registry = RegistryServer().start()
    topic = (a.topic or KA.TOPIC) if a.broker_dir else KA.TOPIC
    try:
        if a.raw_consume and a.broker_dir:
            from benchmarks import baselines as B

            for n in (int(x) for x in a.raw_consume.split(",")):
                load0 = os.getloadavg()[0]
                r = B.run_worker("raw_consume", B.PROJECT_PY, "benchmarks.kafka:raw_consume",
                                 {"bootstrap": broker.bootstrap, "topic": f"{KA.TOPIC}_{n}", "records": n},
                                 work / f"raw-{n}")
                print(f"raw_consume {n:,}: {r.get('status')} {r.get('records')} records, {r.get('seconds')} s, "
                      f"{r.get('mb')} MB of values, peak RSS {r.get('peak_rss_mb')} MB; "
                      f"load {load0:.2f} -> {os.getloadavg()[0]:.2f}", flush=True)
            return
        registry.register(f"{topic}-value", json.dumps(KA.SCHEMA))
        if a.icesql_pair and a.broker_dir:
            times = {}
            from benchmarks import baselines as B

            for name, t, url in (("icesql_json", KA.JSON_TOPIC, None), ("avro_baseline", KA.TOPIC, registry.url),
                                 ("icesql_avro", KA.TOPIC, registry.url)):
                load0 = os.getloadavg()[0]
                if name == "avro_baseline":
                    r = B.run_worker(name, B.PROJECT_PY, "benchmarks.kafka_avro:avro_baseline",
                                     {"bootstrap": broker.bootstrap, "topic": t, "records": a.icesql_pair,
                                      "workdir": str(work / name), "registry_url": url}, work / name)
                    r["rows_in_table"] = r.get("rows_in_files")
                else:
                    r = KA.icesql_once(broker.bootstrap, t, a.icesql_pair, work / name, None, name, url)
                times[name] = r.get("seconds")
                print(f"{name}: {r.get('status')} {r.get('seconds')} s, {r.get('rows_per_s')} records/s, peak RSS "
                      f"{r.get('peak_rss_mb')} MB, rows {r.get('rows_in_table')}; load {load0:.2f} -> "
                      f"{os.getloadavg()[0]:.2f} {r.get('error') or ''}", flush=True)
            if all(times.values()):
                print(f"icesql Avro vs the baseline (speed): {times['avro_baseline'] / times['icesql_avro']:.2f}x; "
                      f"icesql Avro vs icesql JSON: {times['icesql_json'] / times['icesql_avro']:.2f}x")
            return
        if not a.broker_dir:
            K.create_topic(broker.bootstrap, topic, KF.PARTITIONS)
            print("produce:", KA.produce_avro(broker.bootstrap, topic, a.records, registry.url), flush=True)
        script = KA.pipeline_sql(work / "pipeline.sql", broker.bootstrap, topic, work / "wh", registry.url)

        import icesql
        from icesql.engine.backends.local import threads

        profiles: list[cProfile.Profile] = []
        lock = threading.Lock()
        plain = threads.map_in_threads

        def profiled(task, inputs, n):  # type: ignore[no-untyped-def]
            def run(batches):  # type: ignore[no-untyped-def]
                prof = cProfile.Profile()
                prof.enable()
                try:
                    return list(task(batches))
                finally:
                    prof.disable()
                    with lock:
                        profiles.append(prof)

            return plain(run, inputs, n)

        threads.map_in_threads = profiled
        import icesql.engine.backends.local.frames as frames

        frames.map_in_threads = profiled
        load0 = os.getloadavg()[0]
        with icesql.Session(home=work / "home") as s:
            s.execute(script.read_text())
            main_prof = cProfile.Profile()
            t0, c0 = time.perf_counter(), time.process_time()
            main_prof.enable()
            s.run(once=True)
            main_prof.disable()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        load1 = os.getloadavg()[0]
        head = (f"topic {topic}: run(once=True) {wall:.2f} s wall, {cpu:.2f} s CPU of this process; "
                f"{len(profiles)} task profiles; load {load0:.2f} -> {load1:.2f}")
        steps = timeline.read_text() if timeline.exists() else ""
        stats = pstats.Stats(main_prof)
        for p in profiles:
            stats.add(p)
        buf = io.StringIO()
        stats.stream = buf  # type: ignore[attr-defined]
        stats.sort_stats("tottime").print_stats(a.top)
        stats.sort_stats("cumulative").print_stats(a.top)
        text = f"{head}\n\ntimeline:\n{steps}\n{buf.getvalue()}"
        print(text)
        if a.out:
            stats.dump_stats(f"{a.out}.pstats")
            Path(f"{a.out}.txt").write_text(text)
    finally:
        registry.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
