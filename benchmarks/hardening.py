"""How the front end scales with the size of its input (issue 18): the time of ``parse``,
``check``, ``exec`` and ``run`` for scripts of 1,000 to 8,000 statements, and the memory a
50 MB string literal costs to parse and to check.

    .venv/bin/python benchmarks/hardening.py [--sizes 1000,2000,4000,8000] [--literal-mb 50]
        [--write benchmarks/RESULTS_hardening.md]

Times are CPU seconds of this process (``time.process_time``: other processes on a shared
machine disturb them less than wall time), the best of ``--runs``; the catalog store lives on
``/dev/shm`` when there is one, so that disk syncs (one per statement for ``exec``) do not
hide the front end's own cost. ``run`` is what ``icesql run`` does with a script: check it
whole, then apply it in one transaction. Memory is the peak resident set of a fresh process
above what it held before the call (``/proc/self/clear_refs`` resets the peak), with the
literal already in memory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def script(n: int) -> str:
    """``n`` statements of every kind a pipeline has, valid as one script."""
    out = ["CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '/tmp/wh') WITH (VALIDATE = false);"]
    i = 0
    while len(out) < n:
        out += [
            f"CREATE SECRET s{i} AS 'value-{i}';",
            f"CREATE SOURCE src{i} FROM GENERATOR (ROWS PER SECOND = 10, SCHEMA = 'id BIGINT, ts TIMESTAMP');",
            f"CREATE VIEW v{i} AS SELECT * FROM src{i} WHERE id > 0;",
            f"CREATE SINK k{i} FROM src{i} INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't{i}') "
            "PARTITION BY (day(ts)) WITH (MAXIMUM PERIOD = '10s');",
            f"SHOW CREATE SINK k{i};",
        ]
        i += 1
    return "\n".join(out[:n]) + "\n"


def _scratch() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def timings(n: int, runs: int = 1, only: tuple[str, ...] = ("parse", "check", "exec", "run")) -> dict[str, float]:
    """Best CPU seconds of parse, check, exec and run (or ``only`` some of them) for a script
    of ``n`` statements."""
    import icesql
    from icesql.syntax.parser import parse

    text = script(n)
    best: dict[str, float] = {}

    def keep(name: str, seconds: float) -> None:
        best[name] = min(seconds, best.get(name, seconds))

    for _ in range(runs):
        if "parse" in only:
            t = time.process_time()
            parse(text)
            keep("parse", time.process_time() - t)
        with tempfile.TemporaryDirectory(dir=_scratch()) as d:
            with icesql.Session(home=Path(d) / "a", validate=False) as s:
                if "check" in only:
                    t = time.process_time()
                    errors = s.check(text)
                    keep("check", time.process_time() - t)
                    assert not errors, errors[0].render()
                if "exec" in only:
                    t = time.process_time()
                    s.execute(text)
                    keep("exec", time.process_time() - t)
            if "run" in only:
                with icesql.Session(home=Path(d) / "b", validate=False) as s:
                    t = time.process_time()
                    s.check(text)
                    s.execute(text, atomic=True)
                    keep("run", time.process_time() - t)
    return best


_MEMORY_PROBE = """
import json, os, sys, tempfile
sys.path.insert(0, {root!r})
import icesql
from icesql.syntax.parser import parse

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
    return 0

parse("SHOW SINKS")  # the grammar, loaded
size = {size}
buf = bytearray(b"CREATE SECRET s AS '") + bytearray(b"x") * size + bytearray(b"';")
text = buf.decode("ascii")
del buf
home = tempfile.mkdtemp()
session = icesql.Session(home=home, validate=False) if {what!r} == "check" else None
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak so far is forgotten: measure from here
    reset = True
except OSError:
    reset = False
before = status("VmRSS:")
if {what!r} == "parse":
    parse(text)
else:
    errors = session.check(text)
    assert not errors, errors
peak = status("VmHWM:")
print(json.dumps({{"extra": peak - before, "peak": peak, "reset": reset}}))
"""


def memory(what: str, megabytes: int) -> dict[str, int | bool]:
    """Peak memory above the baseline of a fresh process that parses or checks one string
    literal of ``megabytes`` MB (in ``CREATE SECRET s AS '...'``)."""
    code = _MEMORY_PROBE.format(root=str(ROOT), size=megabytes * 1_000_000, what=what)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    result: dict[str, int | bool] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,2000,4000,8000")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--literal-mb", type=int, default=50)
    ap.add_argument("--write", type=Path, help="write the results as markdown to this file")
    args = ap.parse_args()
    from benchmarks.workers.common import machine
    from icesql.syntax.parser import parse

    parse(script(20))  # the grammar, loaded once before anything is timed
    sizes = [int(x) for x in args.sizes.split(",")]
    rows = []
    for n in sizes:
        t = timings(n, args.runs)
        rows.append((n, t))
        print(f"{n:>6} statements: " + "  ".join(f"{k} {v:6.2f}s" for k, v in t.items()), flush=True)
    base = rows[0]
    ratios = {k: rows[-1][1][k] / base[1][k] for k in base[1]}
    print(f"ratio {rows[-1][0]} / {base[0]}: " + "  ".join(f"{k} {v:.1f}x" for k, v in ratios.items()))
    mem = {what: memory(what, args.literal_mb) for what in ("parse", "check")}
    for what, m in mem.items():
        print(f"{args.literal_mb} MB literal, {what}: {int(m['extra']) / 2**20:.0f} MiB above the baseline "
              f"(process peak {int(m['peak']) / 2**20:.0f} MiB)")
    if args.write:
        lines = [
            "# Front-end scaling (issue 18)",
            "",
            f"Command: `.venv/bin/python benchmarks/hardening.py --sizes {args.sizes} --runs {args.runs} "
            f"--literal-mb {args.literal_mb} --write {args.write}`",
            "",
            f"Machine: {machine()}",
            "",
            "CPU seconds (best of the runs) for a script of N statements (secrets, sources, views, sinks,",
            "SHOW CREATE); `run` = check the whole script, then apply it in one transaction:",
            "",
            "| statements | parse | check | exec | run |",
            "|---:|---:|---:|---:|---:|",
        ]
        for n, t in rows:
            lines.append(f"| {n} | {t['parse']:.2f} | {t['check']:.2f} | {t['exec']:.2f} | {t['run']:.2f} |")
        lines.append(
            f"| ratio {rows[-1][0]}/{base[0]} | "
            + " | ".join(f"{ratios[k]:.1f}x" for k in ("parse", "check", "exec", "run"))
            + " |"
        )
        lines += [
            "",
            f"Memory for one {args.literal_mb} MB string literal (`CREATE SECRET s AS '...'`), peak resident set",
            "above the process's baseline (the literal already held):",
            "",
            "| | extra | process peak |",
            "|---|---:|---:|",
        ]
        for what, m in mem.items():
            lines.append(f"| {what} | {int(m['extra']) / 2**20:.0f} MiB | {int(m['peak']) / 2**20:.0f} MiB |")
        args.write.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
