"""One sink, many tables (issue 53) against a sink per table, in icesql's own process.

``python -m benchmarks.routed --tables T --changes C`` makes T tables of a random schema (an ``id``
key and 2-6 columns of int, bigint, double, boolean and string) and C Debezium changes per table
(inserts, updates, deletes, key reuse), then runs, each in a child process watched by ``procmon``
(wall time, peak RSS of the process tree), on the same changes:

* ``routed``: one FILES source of all tables' events in Kafka Connect JSON with schemas, one sink
  ``TABLE = '{table}' KEY (id) MODE UPSERT``;
* ``separate``: a source (the same events, one directory per table, a declared SCHEMA) and an
  upsert sink per table, all run by one ``run --once``.

Both write the same tables (the worker checks every table's row count against the replay). The
issue's goal (100 tables x 20k changes on Kafka, against 100 sinks and Spark MERGE) is larger than
this machine's share; this is the same comparison at a size it can run.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

KINDS = {"int": "INT", "long": "BIGINT", "double": "DOUBLE", "bool": "BOOLEAN", "string": "STRING"}


def _tables(seed: int, n: int) -> dict[str, list[tuple[str, str]]]:
    rng = random.Random(seed)
    return {f"t{i:03d}": [("id", "long")] + [(f"c{j}", rng.choice(list(KINDS))) for j in range(rng.randint(2, 6))] for i in range(n)}


def _value(rng: random.Random, kind: str) -> Any:
    return {"int": lambda: rng.randint(-999, 999), "long": lambda: rng.randint(0, 10**12),
            "double": lambda: rng.random(), "bool": lambda: rng.random() < 0.5,
            "string": lambda: f"s{rng.randint(0, 99)}"}[kind]()


def generate(root: Path, tables: int, changes: int, seed: int = 53) -> dict[str, int]:
    """Write the events: ``root/all`` (every table, schemas in each event) and ``root/by/<t>``
    (one table each, the plain envelope); returns each table's expected row count."""
    from tests.support.connect_events import event

    rng = random.Random(seed)
    cols = _tables(seed, tables)
    state: dict[str, dict[int, dict[str, Any]]] = {t: {} for t in cols}
    routed: list[str] = []
    plain: dict[str, list[str]] = {t: [] for t in cols}
    lsn = 0
    for _ in range(changes * tables):
        t = rng.choice(sorted(cols))
        key = rng.randint(0, changes // 3)
        lsn += 1
        old = state[t].get(key)
        if old is not None and rng.random() < 0.2:
            op, before, after = "d", old, None
            del state[t][key]
        else:
            new = {"id": key, **{c: _value(rng, k) for c, k in cols[t][1:]}}
            op, before, after = ("u" if old else "c"), old, new
            state[t][key] = new
        _, value = event("bench", t, cols[t], ["id"], op, before, after, lsn)
        routed.append(value)
        plain[t].append(json.dumps(json.loads(value)["payload"]))
    (root / "all").mkdir(parents=True)
    (root / "all" / "0.json").write_text("\n".join(routed) + "\n")
    for t, lines in plain.items():
        (root / "by" / t).mkdir(parents=True)
        (root / "by" / t / "0.json").write_text("\n".join(lines) + "\n")
    (root / "schemas.json").write_text(json.dumps({t: ", ".join(f"{c} {KINDS[k]}" for c, k in v) for t, v in cols.items()}))
    return {t: len(s) for t, s in state.items()}


def worker(root: Path, mode: str, expected: dict[str, int]) -> None:
    import icesql

    home = root / f"home-{mode}"
    sql = [f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{root / ('wh-' + mode)}');"]
    if mode == "routed":
        sql.append(f"CREATE SOURCE cdc FROM FILES '{root / 'all'}' (FORMAT = 'debezium-json');")
        sql.append("CREATE SINK k FROM cdc INTO ICEBERG CATALOG lake (NAMESPACE = 'b', TABLE = '{table}') KEY (id) MODE UPSERT;")
    else:
        schemas = json.loads((root / "schemas.json").read_text())
        for t, ddl in schemas.items():
            sql.append(f"CREATE SOURCE s_{t} FROM FILES '{root / 'by' / t}' (FORMAT = 'debezium-json', SCHEMA = '{ddl}');")
            sql.append(f"CREATE SINK k_{t} FROM s_{t} INTO ICEBERG CATALOG lake (NAMESPACE = 'b', TABLE = '{t}') KEY (id) MODE UPSERT;")
    started = time.perf_counter()
    with icesql.Session(home=home) as s:
        s.execute("\n".join(sql))
        s.run(once=True)
        ran = time.perf_counter() - started
        for t, n in expected.items():
            (r,) = s.execute(f"SELECT count(*) FROM lake.b.{t}")
            assert r.rows[0][0] == n, (mode, t, r.rows, n)
    print("RESULT " + json.dumps({"status": "ok", "mode": mode, "run_seconds": round(ran, 2)}), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=20)
    ap.add_argument("--changes", type=int, default=1000)
    ap.add_argument("--root", type=Path, default=Path("/tmp/icesql-bench-routed"))
    ap.add_argument("--worker", choices=("routed", "separate"))
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.root, args.worker, json.loads((args.root / "expected.json").read_text()))
        return 0
    import shutil

    from benchmarks.procmon import run_monitored

    shutil.rmtree(args.root, ignore_errors=True)
    expected = generate(args.root, args.tables, args.changes)
    (args.root / "expected.json").write_text(json.dumps(expected))
    out = {}
    for mode in ("routed", "separate"):
        cmd = [sys.executable, "-m", "benchmarks.routed", "--root", str(args.root), "--worker", mode]
        out[mode] = run_monitored(cmd, log_path=args.root / f"{mode}.log", timeout=3600)
        print(mode, json.dumps(out[mode]), flush=True)
    r, s = out["routed"], out["separate"]
    print(f"tables={args.tables} changes/table={args.changes}: routed {r.get('wall_seconds')}s vs separate "
          f"{s.get('wall_seconds')}s ({r.get('wall_seconds', 0) / max(s.get('wall_seconds', 1), 1e-9):.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
