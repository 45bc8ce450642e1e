"""How fast the front end answers: ``icesql --help``, the shell's first prompt, and the light
commands (``parse``, ``check``, ``exec``) that must never wait for Spark.

    .venv/bin/python benchmarks/frontend.py [--runs 10] [--write benchmarks/RESULTS_frontend.md]

Each figure is the wall time of a fresh process, from spawn to the answer (for the shell: to
the moment ``icesql>`` is on the pseudo-terminal). Goals: ``--help`` < 0.3 s, prompt < 1 s.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ICESQL = [sys.executable, "-m", "icesql"]
SCRIPT = ROOT / "examples" / "quickstart.sql"


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return elapsed


def first_prompt(home: Path, env: dict[str, str]) -> float:
    import pexpect

    start = time.perf_counter()
    child = pexpect.spawn(
        ICESQL[0], [*ICESQL[1:], "--home", str(home)], env=env, dimensions=(40, 120), timeout=30
    )
    seen = b""
    try:
        while b"icesql>" not in seen:
            chunk = child.read_nonblocking(65536, timeout=30)
            seen += chunk
            for _ in range(chunk.count(b"\x1b[6n")):  # answer cursor-position requests
                child.send(b"\x1b[1;1R")
        elapsed = time.perf_counter() - start
        child.sendeof()
        child.expect(pexpect.EOF, timeout=30)
    finally:
        child.close(force=True)
    return elapsed


def summarize(samples: list[float]) -> tuple[float, float, float]:
    return statistics.median(samples), min(samples), max(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--write", type=Path, help="write the results as Markdown to this file")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="icesql-bench-"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm")
    env.pop("ICESQL_HOME", None)
    rows: list[tuple[str, str, list[float], str]] = []
    try:
        home = work / "home"
        # warm the OS file cache and the parser's grammar cache once, as any second use would
        timed([*ICESQL, "--home", str(home), "check", str(SCRIPT)], env)

        cases: list[tuple[str, str, object, str]] = [
            ("`icesql --help`", "icesql --help", lambda: timed([*ICESQL, "--help"], env), "< 0.3 s"),
            (
                "`icesql run --help`",
                "icesql run --help",
                lambda: timed([*ICESQL, "run", "--help"], env),
                "< 0.3 s",
            ),
            (
                "shell: first prompt (existing home)",
                "icesql --home H",
                lambda: first_prompt(home, env),
                "< 1 s",
            ),
            (
                "shell: first prompt (new home)",
                "icesql --home NEW",
                lambda: first_prompt(Path(tempfile.mkdtemp(dir=work)) / "h", env),
                "< 1 s",
            ),
            (
                "`icesql parse quickstart.sql --json`",
                "icesql parse examples/quickstart.sql --json",
                lambda: timed([*ICESQL, "parse", str(SCRIPT), "--json"], env),
                "",
            ),
            (
                "`icesql check quickstart.sql`",
                "icesql check examples/quickstart.sql",
                lambda: timed([*ICESQL, "--home", str(home), "check", str(SCRIPT)], env),
                "",
            ),
            (
                '`icesql exec "SHOW SINKS"`',
                'icesql exec "SHOW SINKS"',
                lambda: timed([*ICESQL, "--home", str(home), "exec", "SHOW SINKS"], env),
                "",
            ),
        ]
        for label, command, fn, goal in cases:
            samples = [fn() for _ in range(args.runs)]  # type: ignore[operator]
            rows.append((label, command, samples, goal))
            med, lo, hi = summarize(samples)
            print(
                f"{label:45s} median {med * 1000:7.1f} ms  min {lo * 1000:7.1f}  max {hi * 1000:7.1f}  {goal}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)

    if args.write:
        lines = [
            "# Front-end latency",
            "",
            "Wall time of a fresh process, from spawn to the answer (for the shell: until `icesql>`",
            "is on the pseudo-terminal). Reproduce with:",
            "",
            "```bash",
            f".venv/bin/python benchmarks/frontend.py --runs {args.runs} --write benchmarks/RESULTS_frontend.md",
            "```",
            "",
            f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
            f"{args.runs} runs each; load average {os.getloadavg()[0]:.1f} at the end (other jobs share",
            "the machine, so these are upper bounds).",
            "",
            "| what | median | min | max | goal |",
            "|---|---:|---:|---:|---|",
        ]
        for label, _, samples, goal in rows:
            med, lo, hi = summarize(samples)
            lines.append(
                f"| {label} | {med * 1000:.0f} ms | {lo * 1000:.0f} ms | {hi * 1000:.0f} ms | {goal} |"
            )
        lines += [
            "",
            "Notes: `python -m icesql` is measured (the `icesql` console script adds its own few ms of",
            "entry-point resolution). The parser's analysed grammar is cached in the user cache",
            "directory on first use; the figures are for a warm cache (the first parse on a machine",
            "builds it once). No figure includes Spark: none of these commands starts it.",
        ]
        args.write.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
