"""Parser throughput and start-up time.

    .venv/bin/python benchmarks/parse.py [--seconds 3]

Prints statements per second over the golden corpus (goal >= 10,000 stmt/s), the cold start
of ``python -c "import icesql"`` (goal < 0.3 s), the first parse in a fresh process (grammar
loaded from the cache), and ``icesql --help`` when the console script exists.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def corpus() -> list[str]:
    from icesql.syntax.parser import parse, split_statements
    from tests.syntax.golden import all_cases

    statements: list[str] = []
    for case in all_cases("parse"):
        for start, end in split_statements(case.sql):
            text = case.sql[start:end]
            parse(text)  # only valid statements
            statements.append(text)
    return statements


def throughput(statements: list[str], seconds: float) -> tuple[float, int]:
    from icesql.syntax.parser import parse

    parse(statements[0])  # load the grammar first
    n = 0
    start = time.perf_counter()
    cpu_start = time.process_time()
    while time.perf_counter() - start < seconds:
        for s in statements:
            parse(s)
        n += len(statements)
    global LAST_CPU_RATE
    # CPU time: what parsing costs this process, whatever else the machine is running.
    LAST_CPU_RATE = n / max(time.process_time() - cpu_start, 1e-9)
    return n / (time.perf_counter() - start), n


LAST_CPU_RATE = 0.0


def script_throughput(statements: list[str], rounds: int = 20) -> float:
    from icesql.syntax.parser import parse

    script = ";\n".join(statements) + ";"
    start = time.perf_counter()
    for _ in range(rounds):
        parse(script)
    return rounds * len(statements) / (time.perf_counter() - start)


def timed(cmd: list[str], runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()

    statements = corpus()
    rate, n = throughput(statements, args.seconds)
    print(f"corpus: {len(statements)} statements from tests/golden/parse")
    print(f"parse(): {rate:,.0f} statements/s, one statement per call ({n} parsed)")
    print(f"parse(): {LAST_CPU_RATE:,.0f} statements per CPU-second, same run (load-independent)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print(f"parse(): {script_throughput(statements):,.0f} statements/s, whole corpus as one script")

    py = sys.executable
    print(f"python -c pass: {timed([py, '-c', 'pass']):.3f} s (interpreter floor)")
    print(f"python -c 'import icesql': {timed([py, '-c', 'import icesql']):.3f} s")
    first = "import icesql; icesql.parse('SHOW SINKS')"
    print(f"python -c 'import icesql; icesql.parse(...)': {timed([py, '-c', first]):.3f} s (grammar from cache)")
    exe = shutil.which("icesql", path=str(Path(py).parent)) or shutil.which("icesql")
    if exe:
        print(f"icesql --help: {timed([exe, '--help']):.3f} s")
    else:
        print("icesql --help: console script not installed")


if __name__ == "__main__":
    main()
