"""Memory of an in-process ``icesql run append.sql --once`` over time (issue 54 item 3).

    .venv/bin/python benchmarks/probes/memory_in_process.py parquet|json ROWS none|day [DATA_DIR]

Runs the e2e section's script (``baselines.e2e_append_script``) on ``DATA_DIR/append-ROWS[-json]``
(made by ``datagen.generate_append`` / ``generate_append_json``; default /tmp/bench/data) inside
this process, sampling pyarrow's allocated bytes and the process's RSS every 0.5 s; prints the
timeline and the peaks. The run has no child processes (no Spark), so RSS is the process tree's.
"""

import shutil
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import pyarrow as pa  # noqa: E402

from benchmarks import baselines as B  # noqa: E402

fmt, rows, part = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "day"
data = sys.argv[4] if len(sys.argv) > 4 else "/tmp/bench/data"
wd = Path(f"/tmp/memprobe/w-{fmt}-{rows}-{part}")
shutil.rmtree(wd, ignore_errors=True)
(wd / "warehouse").mkdir(parents=True)
src = f"{data}/append-{rows}" + ("-json" if fmt == "json" else "")
script = B.e2e_append_script(wd / "append.sql", src, fmt, wd / "warehouse", part, "zstd")
samples = []


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


stop = False


def sampler():
    t0 = time.time()
    while not stop:
        samples.append((time.time() - t0, pa.total_allocated_bytes(), rss()))
        time.sleep(0.5)


threading.Thread(target=sampler, daemon=True).start()
from icesql.cli import main  # noqa: E402

try:
    main(["--home", str(wd / "home"), "run", str(script), "--once"])
except SystemExit:
    pass
stop = True
peak_a = max(s[1] for s in samples)
peak_r = max(s[2] for s in samples)
for t, a, r in samples[:: max(1, len(samples) // 25)]:
    print(f"{t:6.1f}s arrow {a / 2**20:8.1f} MB  rss {r / 2**20:8.1f} MB")
print(f"peak arrow {peak_a / 2**20:.0f} MB, peak rss {peak_r / 2**20:.0f} MB, {samples[-1][0]:.1f}s")
