"""The same append sink on classic Spark and on a Spark Connect server, side by side.

    .venv/bin/python benchmarks/connect.py [--rows 1000000] [--runs 2] [--write benchmarks/RESULTS_connect.md]

Both sides run ``icesql run sink.sql --once`` in a fresh process over the same Parquet files
(``benchmarks/datagen.py``) into a fresh local table: classic with ``--spark-master local[2]``
(the JVM starts inside the run), Connect with ``--spark-master sc://...`` against a server
started once beforehand with ``local[2]`` (its start-up is reported apart). The wall time is
the whole command, Spark start included; rows are checked in the table after each run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import datagen  # noqa: E402
from benchmarks.workers.common import machine  # noqa: E402
from tests.support.spark_cluster import ConnectServer  # noqa: E402

SQL = """\
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');
CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'parquet');
CREATE SINK bench FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'bench', TABLE = 't');
"""


def run_once(master: str, data: Path, work: Path) -> tuple[float, int]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "sink.sql").write_text(SQL.format(wh=work / "wh", data=data))
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    cmd = [sys.executable, "-m", "icesql", "--home", str(work / "home"), "--spark-master", master]
    cmd += ["--conf", "spark.sql.shuffle.partitions=2", "run", "sink.sql", "--once"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{master}: exit {out.returncode}\n{out.stderr[-3000:]}")
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(
        "lake",
        uri=f"sqlite:///{work / 'wh' / 'catalog.db'}",
        warehouse=f"file://{work / 'wh'}",
    )
    rows = catalog.load_table("bench.t").scan().count()
    return wall, rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--write", type=Path, default=None)
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="icesql-connect-bench-"))
    try:
        ds = datagen.generate_append(tmp / "data", a.rows)
        data = Path(ds.files[0]).parent
        t0 = time.perf_counter()
        server = ConnectServer.start(tmp / "server", cores=2)
        server_start = time.perf_counter() - t0
        results: dict[str, list[float]] = {"local[2]": [], "Spark Connect (local[2] server)": []}
        with server:
            for _ in range(a.runs):
                for label, master in (
                    ("local[2]", "local[2]"),
                    ("Spark Connect (local[2] server)", server.url),
                ):
                    wall, rows = run_once(master, data, tmp / "work")
                    assert rows == a.rows, f"{label}: {rows} rows in the table, expected {a.rows}"
                    results[label].append(wall)
                    print(f"{label}: {wall:.1f} s ({a.rows / wall:,.0f} rows/s)", flush=True)
        load = os.getloadavg()[0]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lines = [
        "# Classic Spark vs Spark Connect",
        "",
        "`icesql run sink.sql --once`, one append sink over Parquet files into a new local table,",
        "wall time of the whole command (Spark start included for classic; the Connect server",
        "was already running). Reproduce with:",
        "",
        "```bash",
        f".venv/bin/python benchmarks/connect.py --rows {a.rows} --runs {a.runs} --write benchmarks/RESULTS_connect.md",
        "```",
        "",
        f"Machine: {machine()}; "
        f"load average {load:.1f} at the end. Connect server start-up: {server_start:.1f} s.",
        "",
        "| engine | rows | median wall | rows/s | runs |",
        "|---|---:|---:|---:|---|",
    ]
    for label, walls in results.items():
        med = statistics.median(walls)
        runs = ", ".join(f"{w:.1f} s" for w in walls)
        lines.append(f"| {label} | {a.rows:,} | {med:.1f} s | {a.rows / med:,.0f} | {runs} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.write:
        a.write.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
