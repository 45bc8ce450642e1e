"""What ``icesql compact`` buys readers of an upserted table.

    .venv/bin/python benchmarks/compact.py [--keys 200000] [--batches 10] [--timeout 600]
                                           [--write benchmarks/RESULTS_compact.md]

Builds the upsert benchmark's table (``benchmarks/datagen.py``: ``--keys`` rows, then
``--batches`` Debezium batches of keys/10 changes — updates, inserts, deletes — each one icesql
upsert commit with an equality-delete file, through ``benchmarks/icesql_hooks.py``), then times a
full read by DuckDB's iceberg extension and by DataFusion (iceberg-rust) before and after
``Session.compact``, each read in a child process capped at ``--timeout`` seconds, and checks
every read against the expected final state.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.workers.common import machine  # noqa: E402

READ = """
import json, sys, time
sys.path.insert(0, {root!r})
import pyarrow.parquet as pq
from tests.support.readers import read_datafusion, read_duckdb
meta, reader, expected = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
rows = (read_duckdb if reader == "duckdb" else read_datafusion)(meta, "id, qty")
secs = time.perf_counter() - t0
exp = pq.read_table(expected, columns=["id", "qty"]).to_pylist()
want = sorted(((r["id"], r["qty"]) for r in exp), key=repr)
ok = sorted(rows, key=repr) == want
print(json.dumps({{"seconds": secs, "rows": len(rows), "correct": ok}}))
"""


def timed_read(meta: str, reader: str, expected: str, timeout: float) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        out = subprocess.run(
            [sys.executable, "-c", READ.format(root=str(ROOT)), meta, reader, expected],
            capture_output=True, text=True, timeout=timeout, env=env,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"seconds": None, "note": f"> {timeout:.0f} s (stopped)"}
    if out.returncode != 0:
        return {"seconds": None, "note": f"failed: {out.stderr.strip().splitlines()[-1][:200]}"}
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--write", type=Path, default=None)
    a = ap.parse_args(argv)

    from benchmarks import datagen
    from benchmarks.icesql_hooks import run_icesql_upsert

    tmp = Path(tempfile.mkdtemp(prefix="icesql-compact-bench-"))
    try:
        u = datagen.generate_upsert(
            tmp / "data", keys=a.keys, batches=a.batches, batch_size=max(10, a.keys // 10)
        )
        home = tmp / "home"
        up = run_icesql_upsert(
            u.base.files, str(Path(u.base.files[0]).parent), u.change_files, u.debezium_files,
            u.expected_rows, str(home),
        )  # fmt: skip
        before = {r: timed_read(up["metadata"], r, u.expected, a.timeout) for r in ("duckdb", "datafusion")}
        import icesql
        from icesql.repl.format import format_compaction

        t0 = time.perf_counter()
        with icesql.Session(home=home) as s:
            (result,) = s.compact(["u"])
        compact_s = time.perf_counter() - t0
        from pyiceberg.catalog.sql import SqlCatalog

        wh = home / "warehouse"
        table = SqlCatalog("cat", uri=f"sqlite:///{wh / 'catalog.db'}", warehouse=wh.as_uri()).load_table(
            "bench.u"
        )
        after = {
            r: timed_read(table.metadata_location, r, u.expected, a.timeout) for r in ("duckdb", "datafusion")
        }
        load = os.getloadavg()[0]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def cell(r: dict[str, Any]) -> str:
        if r.get("seconds") is None:
            return r.get("note", "n/a")
        return f"{r['seconds']:.1f} s" + ("" if r.get("correct") else " (WRONG ROWS)")

    lines = [
        "# Reading an upserted table before and after `icesql compact`",
        "",
        f"{a.keys:,} keys, then {a.batches} Debezium batches of {max(10, a.keys // 10):,} changes, each one "
        "icesql upsert commit (data + equality-delete files); full read of `id, qty`, checked "
        "against the expected final state. Reproduce with:",
        "",
        "```bash",
        f".venv/bin/python benchmarks/compact.py --keys {a.keys} --batches {a.batches} --timeout {a.timeout:.0f} "
        "--write benchmarks/RESULTS_compact.md",
        "```",
        "",
        f"Machine: {machine()}; load average {load:.1f} at the end.",
        "",
        f"Compaction: {format_compaction(result)} (wall {compact_s:.1f} s, no Spark).",
        "",
        "| reader | before compact | after compact |",
        "|---|---:|---:|",
        f"| DuckDB iceberg extension | {cell(before['duckdb'])} | {cell(after['duckdb'])} |",
        f"| DataFusion (iceberg-rust) | {cell(before['datafusion'])} | {cell(after['datafusion'])} |",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.write:
        a.write.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
