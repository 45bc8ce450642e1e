"""Probe: how long a SELECT over a connection table takes without Spark (issue 36, part 1).

Builds a 1M-row table in a local catalog (``lake.analytics.events``: id, region, amount
DECIMAL(12,2), price DOUBLE, ts TIMESTAMP WITH ZONE, note STRING; pyiceberg's writer, one
append), then measures

* (a) a fresh ``icesql exec "<query>"`` process end to end (the installed ``icesql`` script
  beside this interpreter; wall clock from the parent, output to a pipe), ``--runs`` times per
  query, median;
* (b) the second query in one session (what the shell does: one ``icesql.Session`` whose engine
  keeps the DuckDB connection, catalogs and the rows of unchanged snapshots): the first query
  once, then each query ``--runs`` times, median.

Goals: (a) under 2 s on a quiet machine, (b) under 0.5 s. Prints the figures, the load average
before and after, and whether each goal is met.

Usage: ``.venv/bin/python benchmarks/probes/select.py [--rows 1000000] [--runs 5] [--keep DIR]``
"""

from __future__ import annotations

import sys

# run as a script, this file's directory comes first on sys.path, where this module's name
# hides the standard library's ``select`` (which subprocess imports)
if sys.path and sys.path[0] == __import__("os").path.dirname(__import__("os").path.abspath(__file__)):
    sys.path.pop(0)

import argparse  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
QUERIES = {
    "order by id (default LIMIT)": "SELECT * FROM lake.analytics.events ORDER BY id",
    "group by region": "SELECT region, count(*) AS n, sum(amount) AS total, avg(price) AS price FROM lake.analytics.events GROUP BY region ORDER BY region",
    "filter + limit": "SELECT id, note, ts FROM lake.analytics.events WHERE region = 'eu' AND amount > 900 ORDER BY ts DESC LIMIT 20",
}
FRESH_GOAL = 2.0
SECOND_GOAL = 0.5


def build(home: Path, warehouse: Path, rows: int) -> None:
    import datetime as dt
    import decimal

    import pyarrow as pa

    import icesql

    with icesql.Session(home=home) as s:
        s.execute(f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{warehouse}')")
        catalog, _, _ = s.engine.connection_catalog("lake")
        catalog.create_namespace("analytics")
        ids = pa.array(range(rows), pa.int64())
        start = int(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc).timestamp() * 1_000_000)
        regions = ["eu", "us", "apac", "latam"]
        table = pa.table(
            {
                "id": ids,
                "region": pa.array([regions[i % 4] for i in range(rows)]),
                "amount": pa.array([decimal.Decimal(i * 7919 % 100_000).scaleb(-2) for i in range(rows)], pa.decimal128(12, 2)),
                "price": pa.array([(i % 1000) * 0.5 for i in range(rows)], pa.float64()),
                "ts": pa.array([start + i * 1_000_000 for i in range(rows)], pa.timestamp("us", tz="UTC")),
                "note": pa.array([f"note {i}" for i in range(rows)]),
            }
        )
        events = catalog.create_table(("analytics", "events"), schema=table.schema)
        events.append(table)


def fresh_exec(home: Path, sql: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child: user + system, which a busy machine inflates
    less than the wall clock)."""
    import resource

    icesql_bin = Path(sys.executable).with_name("icesql")
    command = [str(icesql_bin)] if icesql_bin.exists() else [sys.executable, "-m", "icesql"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    p = subprocess.run([*command, "exec", "--home", str(home), sql], capture_output=True, text=True, env=env, timeout=600)
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"icesql exec failed ({p.returncode}): {p.stderr}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def in_session(home: Path, runs: int) -> tuple[float, dict[str, list[float]]]:
    import icesql

    times: dict[str, list[float]] = {}
    with icesql.Session(home=home) as s:
        first_sql = next(iter(QUERIES.values()))
        started = time.perf_counter()
        s.execute(first_sql)
        first = time.perf_counter() - started
        for label, sql in QUERIES.items():
            for _ in range(runs):
                started = time.perf_counter()
                s.execute(sql)
                times.setdefault(label, []).append(time.perf_counter() - started)
        assert s._engine is not None and s._engine._spark is None, "Spark started"
    return first, times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="build the table here (reused when it exists)")
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="icesql-select-probe-"))
    home, warehouse = base / "home", base / "wh"
    try:
        if not (home / "catalog.db").exists():
            t0 = time.perf_counter()
            build(home, warehouse, args.rows)
            print(f"built {args.rows:,} rows in {time.perf_counter() - t0:.1f} s at {base}")
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
        fresh: dict[str, list[float]] = {}
        cpu: dict[str, list[float]] = {}
        for _ in range(args.runs):  # taking turns, so a busy moment spreads over every query
            for label, sql in QUERIES.items():
                wall, used = fresh_exec(home, sql)
                fresh.setdefault(label, []).append(wall)
                cpu.setdefault(label, []).append(used)
        first, second = in_session(home, args.runs)
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"\n(a) fresh `icesql exec` process, wall clock, {args.runs} runs (goal < {FRESH_GOAL} s)")
        print("| query | runs (s) | median (s) | CPU median (s) | goal |")
        print("|---|---|---|---|---|")
        for label, ts in fresh.items():
            med = statistics.median(ts)
            print(
                f"| {label} | {', '.join(f'{t:.2f}' for t in ts)} | {med:.2f} | {statistics.median(cpu[label]):.2f} "
                f"| {'met' if med < FRESH_GOAL else 'missed'} |"
            )
        print(f"\n(b) in one session: first query {first:.2f} s; then, {args.runs} runs each (goal < {SECOND_GOAL} s)")
        print("| query | runs (s) | median (s) | goal |")
        print("|---|---|---|---|")
        for label, ts in second.items():
            med = statistics.median(ts)
            print(f"| {label} | {', '.join(f'{t:.3f}' for t in ts)} | {med:.3f} | {'met' if med < SECOND_GOAL else 'missed'} |")
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
