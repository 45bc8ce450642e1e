"""Run one benchmark worker as a child process and sample the memory of its whole process tree.

Neither venv has psutil, so this reads ``/proc`` directly (Linux only): every ``interval``
seconds it walks the descendants of the child and sums ``VmRSS`` per kind of process:

* ``jvm``            -- java processes (the Spark driver JVM; executors live in it in local mode),
* ``python_workers`` -- python processes below a JVM (``pyspark.daemon`` and its forked workers),
* ``driver_python``  -- the other python processes (the worker script itself: the PySpark driver
  or the whole pyarrow / pyiceberg run),
* ``other``          -- anything else (e.g. ``weed``).

A ``java`` process below a JVM is not counted: it is the JVM's child between fork and exec (its
pages and command line are the JVM's), and counting it added the JVM's RSS a second time to
about four runs in ten until 25 Nov 2026 (see benchmarks/README.md, "twelfth look").

Reported: the peak of the total and the peak of each kind (peaks of different kinds may occur
at different moments, so they need not add up to the total). RSS counts shared pages once per
process, so a tree of many Python processes (each mapping pyarrow's libraries, forked workers
sharing their daemon's pages) is over-counted; the proportional set size (``Pss`` of
``/proc/<pid>/smaps_rollup``: a shared page divided among the processes mapping it) is reported
beside it (``peak_pss_mb``) when asked for (``PSS_EVERY``, ``run.py --pss SECONDS``): reading
``smaps_rollup`` walks a process's page tables under its memory lock (13 ms for a JVM with 1 GB
touched), so sampled every 0.1 s it took a noticeable share of a core from the measured run
(a 10M-row ``icesql run --once`` 1.7-2.7 s slower); off by default. The goals are judged on RSS,
PSS is context. The sampling misses spikes shorter than the interval.

The child reports its own measurements by printing one line ``RESULT {json}`` on stdout.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
RESULT_PREFIX = "RESULT "


def cpu_seconds(pid: int | None) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (0 without one, or gone)."""
    if not pid:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may contain spaces and parentheses
        rest = stat[stat.rfind(b")") + 2:].split()
        kids.setdefault(int(rest[1]), []).append(int(entry.name))
    return kids


def _pss(pid: int) -> int:
    """Proportional set size (bytes): each shared page divided among the processes mapping it."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def _rss_and_exe(pid: int) -> tuple[int, str]:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            rss = int(f.read().split()[1]) * PAGE
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0", 1)[0].decode(errors="replace")
    except (OSError, IndexError, ValueError):
        return 0, ""
    return rss, os.path.basename(argv0)


KINDS = ("jvm", "python_workers", "driver_python", "other")
PSS_EVERY: float | None = None  # seconds between PSS samples (None: RSS only; see the module docstring)


def sample_tree(root: int, pss: bool = False) -> tuple[dict[str, int], dict[str, int]]:
    """Current RSS and (``pss``) PSS in bytes of ``root`` and its descendants, by kind."""
    kids = _children_map()
    rss_by = dict.fromkeys(KINDS, 0)
    pss_by = dict.fromkeys(KINDS, 0)
    stack: list[tuple[int, bool]] = [(root, False)]
    seen: set[int] = set()
    while stack:
        pid, under_jvm = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        rss, exe = _rss_and_exe(pid)
        if exe == "java" and under_jvm:
            # a JVM's child between its fork and its exec (a Python worker, a shell command being
            # started): it still maps the JVM's pages and names the JVM's command line, so its
            # RSS is the JVM's own counted a second time (25 Nov 2026: a sampler at 10 ms saw
            # such children, ~800 MB each, in every upsert run). A JVM never starts another JVM
            # in these runs, so a java below a java is always that.
            continue
        if exe == "java":
            kind = "jvm"
        elif exe.startswith("python"):
            kind = "python_workers" if under_jvm else "driver_python"
        else:
            kind = "other"
        rss_by[kind] += rss
        if pss:
            pss_by[kind] += _pss(pid)
        for c in kids.get(pid, ()):
            stack.append((c, under_jvm or exe == "java"))
    return rss_by, pss_by


class TreeSampler:
    def __init__(self, pid: int, interval: float = 0.1, pss_every: float | None = None) -> None:
        self.pid = pid
        self.interval = interval
        self.pss_every = PSS_EVERY if pss_every is None else pss_every
        self._pss_at = 0.0
        self.peak_total = 0
        self.peak = dict.fromkeys(KINDS, 0)
        self.peak_pss_total = 0
        self.peak_pss = dict.fromkeys(KINDS, 0)
        self.samples = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            pss = self.pss_every is not None and now - self._pss_at >= self.pss_every
            if pss:
                self._pss_at = now
            try:
                rss_by, pss_by = sample_tree(self.pid, pss)
            except Exception:  # noqa: BLE001 - a vanished process mid-walk
                rss_by, pss_by = {}, {}
            if rss_by:
                self.samples += 1
                self.peak_total = max(self.peak_total, sum(rss_by.values()))
                self.peak_pss_total = max(self.peak_pss_total, sum(pss_by.values()))
                for k in KINDS:
                    self.peak[k] = max(self.peak[k], rss_by[k])
                    self.peak_pss[k] = max(self.peak_pss[k], pss_by[k])
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeSampler:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join(timeout=5)

    def report(self) -> dict[str, Any]:
        mb = 2**20
        out: dict[str, Any] = {
            "peak_rss_mb": round(self.peak_total / mb, 1),
            "peak_rss_mb_by_kind": {k: round(v / mb, 1) for k, v in self.peak.items() if v},
            "rss_method": f"/proc VmRSS of the process tree, sampled every {self.interval:g}s",
        }
        if self.peak_pss_total:
            out["peak_pss_mb"] = round(self.peak_pss_total / mb, 1)
            out["peak_pss_mb_by_kind"] = {k: round(v / mb, 1) for k, v in self.peak_pss.items() if v}
        return out


def run_monitored(cmd: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                  timeout: float | None = None, log_path: str | Path | None = None,
                  interval: float = 0.1, result_line: bool = True) -> dict[str, Any]:
    """Run ``cmd``; return its ``RESULT`` dict merged with wall time, exit code and memory peaks.

    ``result_line=False``: a program that prints no ``RESULT`` line (``icesql run`` as a user
    runs it) is ``ok`` when it exits 0; its standard output goes to the log with its errors."""
    log = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE if result_line else log, stderr=log, env=env,
                                cwd=cwd, stdin=subprocess.DEVNULL, start_new_session=True)
        with TreeSampler(proc.pid, interval) as sampler:
            try:
                out, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                out, _ = proc.communicate()
                return {"status": "error", "error": f"timeout after {timeout}s", "log": str(log_path),
                        "wall_seconds": round(time.perf_counter() - t0, 2), **sampler.report()}
    finally:
        if log_path:
            log.close()  # type: ignore[union-attr]
    wall = time.perf_counter() - t0
    result: dict[str, Any] | None = None
    if not result_line and proc.returncode == 0:
        result = {}
    for line in (out or b"").decode(errors="replace").splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX):])
    if result is None:
        tail = ""
        if log_path:
            try:
                tail = Path(log_path).read_text(errors="replace")[-1500:]
            except OSError:
                pass
        what = "without a RESULT line" if result_line else ""
        result = {"status": "error", "error": f"worker exited {proc.returncode} {what}".strip(),
                  "stderr_tail": tail}
    result.setdefault("status", "ok")
    result["exit_code"] = proc.returncode
    result["wall_seconds"] = round(wall, 2)
    if log_path:
        result["log"] = str(log_path)
    result.update(sampler.report())
    return result
