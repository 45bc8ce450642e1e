"""The parent side of the crash tests: input files, a ``crash_runner`` child, the table's ids."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.pipeline_helpers import load_table, write_json_lines

ROOT = Path(__file__).resolve().parents[2]
ROWS_PER_FILE = 15


def add_files(data: Path, start: int, count: int) -> int:
    for k in range(start, start + count):
        rows = [
            {"id": k * ROWS_PER_FILE + j, "ts": f"2024-01-0{1 + (k + j) % 3}T10:00:00Z", "v": f"f{k}-{j}"}
            for j in range(ROWS_PER_FILE)
        ]
        write_json_lines(data, f"part-{k:04d}.json", rows)
    return start + count


def run_child(
    tmp: Path,
    env_extra: dict[str, str],
    *,
    kill_after: float | None = None,
    timeout: float = 240,
    spark_master: str | None = None,
    on_error: str = "fail",
    extra_args: tuple[str, ...] = (),
) -> tuple[int, str]:
    """Run ``crash_runner`` over ``tmp`` (home, in/, warehouse/); SIGKILL its process group after
    ``kill_after`` seconds of running sink. Returns (exit code, the whole child log)."""
    env = dict(os.environ)
    env.pop("ICESQL_TEST_KILL_AT", None)
    env.pop("ICESQL_TEST_KILL_COMMIT", None)
    env.update(env_extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    log = open(tmp / "child.log", "ab")
    log.write(f"\n==== run {env_extra} kill_after={kill_after}\n".encode())
    log.flush()
    start_offset = log.tell()
    cmd = [
        sys.executable,
        "-m",
        "tests.support.crash_runner",
        "--home",
        str(tmp / "home"),
        "--data",
        str(tmp / "in"),
        "--warehouse",
        str(tmp / "warehouse"),
        "--min-size",
        "7000",  # about two batches: commits mix 'size', 'recovery' and 'shutdown'
        *(["--spark-master", spark_master] if spark_master else []),
        "--on-error",
        on_error,
        *extra_args,
    ]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        if kill_after is not None:
            # count from the moment the sink starts (after the JVM is up), not from the fork
            deadline = time.monotonic() + timeout
            while proc.poll() is None and time.monotonic() < deadline:
                with open(tmp / "child.log", "rb") as fh:
                    fh.seek(start_offset)
                    if b"crash_runner: started" in fh.read():
                        break
                time.sleep(0.1)
            try:
                proc.wait(timeout=kill_after)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        rc = reap_group(proc, timeout)
    finally:
        log.close()
    return rc, (tmp / "child.log").read_text(errors="replace")


def reap_group(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """Wait for a child started with ``start_new_session=True``; past ``timeout`` SIGKILL its
    process group and re-raise. Leftovers of the group (a JVM that outlived its driver) are
    killed either way. Returns the exit code."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def table_ids(tmp: Path) -> list[int]:
    try:
        table = load_table(tmp / "home", "ns.events", warehouse=tmp / "warehouse")
    except Exception:
        return []
    return [int(r["id"]) for r in table.scan(selected_fields=("id",)).to_arrow().to_pylist()]


def check_no_duplicates(tmp: Path) -> None:
    ids = table_ids(tmp)
    assert len(ids) == len(set(ids)), "duplicate rows in the table"
