"""How fast the front end answers: ``icesql --help``, the shell's first prompt, and the light
commands (``parse``, ``check``, ``exec``) that must never wait for Spark.

    .venv/bin/python benchmarks/frontend.py [--runs 10] [--write benchmarks/RESULTS_frontend.md]

Each figure is the wall time of a fresh process, from spawn to the answer (for the shell: to
the moment ``icesql>`` is on the pseudo-terminal). Goals: ``--help`` < 0.3 s, prompt < 1 s.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.workers.common import machine  # noqa: E402

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


# name (stable key used by run.py), label, command shown, goal; the callables are built in cases()
CASES: list[tuple[str, str, str, str]] = [
    ("python_startup_floor", "bare `python -c pass` (floor)", "python -c pass", ""),
    ("import_icesql", "`python -c 'import icesql'`", "python -c 'import icesql'", ""),
    ("icesql_help", "`icesql --help`", "icesql --help", "< 0.3 s"),
    ("icesql_run_help", "`icesql run --help`", "icesql run --help", "< 0.3 s"),
    ("shell_time_to_prompt", "shell: first prompt (existing home)", "icesql --home H", "< 1 s"),
    ("shell_time_to_prompt_new_home", "shell: first prompt (new home)", "icesql --home NEW", "< 1 s"),
    ("parse_quickstart", "`icesql parse quickstart.sql --json`", "icesql parse examples/quickstart.sql --json", ""),
    ("check_quickstart", "`icesql check quickstart.sql`", "icesql check examples/quickstart.sql", ""),
    ("exec_show_sinks", '`icesql exec "SHOW SINKS"`', 'icesql exec "SHOW SINKS"', ""),
]


def cases(work: Path, env: dict[str, str]) -> dict[str, Callable[[], float]]:
    home = work / "home"
    return {
        "python_startup_floor": lambda: timed([sys.executable, "-c", "pass"], env),
        "import_icesql": lambda: timed([sys.executable, "-c", "import icesql"], env),
        "icesql_help": lambda: timed([*ICESQL, "--help"], env),
        "icesql_run_help": lambda: timed([*ICESQL, "run", "--help"], env),
        "shell_time_to_prompt": lambda: first_prompt(home, env),
        "shell_time_to_prompt_new_home": lambda: first_prompt(Path(tempfile.mkdtemp(dir=work)) / "h", env),
        "parse_quickstart": lambda: timed([*ICESQL, "parse", str(SCRIPT), "--json"], env),
        "check_quickstart": lambda: timed([*ICESQL, "--home", str(home), "check", str(SCRIPT)], env),
        "exec_show_sinks": lambda: timed([*ICESQL, "--home", str(home), "exec", "SHOW SINKS"], env),
    }


def measure(runs: int = 10, names: list[str] | None = None, *, echo: bool = True) -> list[dict[str, Any]]:
    """Run the cases (all, or ``names``) ``runs`` times each in fresh processes; one dict per case:
    ``name, label, command, goal, samples`` (seconds), ``p50_ms, min_ms, max_ms, n, status``.
    ``benchmarks/run.py --only frontend`` calls this too."""
    work = Path(tempfile.mkdtemp(prefix="icesql-bench-"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm")
    env.pop("ICESQL_HOME", None)
    out: list[dict[str, Any]] = []
    try:
        # warm the OS file cache and the parser's grammar cache once, as any second use would
        timed([*ICESQL, "--home", str(work / "home"), "check", str(SCRIPT)], env)
        fns = cases(work, env)
        for name, label, command, goal in CASES:
            if names is not None and name not in names:
                continue
            row: dict[str, Any] = {"name": name, "label": label, "command": command, "goal": goal}
            try:
                samples = [fns[name]() for _ in range(runs)]
            except Exception as e:  # noqa: BLE001 - one broken case must not lose the others
                row.update(status="error", reason=f"{type(e).__name__}: {e}"[:300])
                out.append(row)
                continue
            med, lo, hi = summarize(samples)
            row.update(status="ok", samples=samples, n=runs, p50_ms=round(med * 1000, 1),
                       min_ms=round(lo * 1000, 1), max_ms=round(hi * 1000, 1))
            out.append(row)
            if echo:
                print(f"{label:45s} median {med * 1000:7.1f} ms  min {lo * 1000:7.1f}  max {hi * 1000:7.1f}  {goal}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--write", type=Path, help="write the results as Markdown to this file")
    args = ap.parse_args()

    rows = [r for r in measure(args.runs) if r["status"] == "ok"]

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
            f"Machine: {machine()}; "
            f"{args.runs} runs each; load average {os.getloadavg()[0]:.1f} at the end (other jobs share",
            "the machine, so these are upper bounds).",
            "",
            "| what | median | min | max | goal |",
            "|---|---:|---:|---:|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['label']} | {r['p50_ms']:.0f} ms | {r['min_ms']:.0f} ms | {r['max_ms']:.0f} ms | {r['goal']} |"
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
