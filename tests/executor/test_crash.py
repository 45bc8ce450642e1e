"""Exactly once under SIGKILL: a sink in a child process is killed at every phase and restarted.

The child (``tests/support/crash_runner.py``) runs in its own process group; a kill takes the
driver, the JVM and the Python workers down at once, like a machine crash. Deterministic kill
points cover: during the executors' file writes, after staging, inside the catalog commit
(before and after the metadata swap), and after the commit but before Spark records the batch;
then kills at random moments. More input files arrive between runs. At the end every source row
is in the table exactly once.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.pipeline_helpers import icesql_summaries, load_table, write_json_lines

pytestmark = pytest.mark.spark

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
    tmp: Path, env_extra: dict[str, str], *, kill_after: float | None = None, timeout: float = 240
) -> tuple[int, str]:
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
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        log.close()
        try:  # leftovers of the group (a JVM that outlived its driver)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return rc, (tmp / "child.log").read_text(errors="replace")


def table_ids(tmp: Path) -> list[int]:
    try:
        table = load_table(tmp / "home", "ns.events", warehouse=tmp / "warehouse")
    except Exception:
        return []
    return [int(r["id"]) for r in table.scan(selected_fields=("id",)).to_arrow().to_pylist()]


def check_no_duplicates(tmp: Path) -> None:
    ids = table_ids(tmp)
    assert len(ids) == len(set(ids)), "duplicate rows in the table"


@pytest.mark.parametrize("random_kills", [1])
def test_sigkill_anywhere_exactly_once(tmp_path: Path, random_kills: int) -> None:
    crash_loop(tmp_path, random_kills)


@pytest.mark.slow
def test_sigkill_soak(tmp_path: Path) -> None:
    crash_loop(tmp_path, random_kills=8)


def crash_loop(tmp: Path, random_kills: int) -> None:
    data = tmp / "in"
    nxt = add_files(data, 0, 4)
    kills = [
        {"ICESQL_TEST_KILL_AT": "write"},  # inside an executor, mid-write
        {"ICESQL_TEST_KILL_AT": "staged"},  # staged durably, not committed
        {"ICESQL_TEST_KILL_COMMIT": "before:1"},  # manifests written, catalog not swapped
        {"ICESQL_TEST_KILL_COMMIT": "after:1"},  # committed, pipeline not told
        {"ICESQL_TEST_KILL_AT": "committed"},  # committed, Spark has not recorded the batch
    ]
    killed = 0
    for env in kills:
        rc, out = run_child(tmp, env)
        assert rc == -signal.SIGKILL, f"expected a kill for {env}, got rc={rc}\n{out[-4000:]}"
        killed += 1
        check_no_duplicates(tmp)
        nxt = add_files(data, nxt, 2)
    rng = random.Random(int(os.environ.get("ICESQL_CRASH_SEED", "7")))
    for _ in range(random_kills):
        rc, out = run_child(tmp, {"ICESQL_TEST_BATCH_DELAY": "0.3"}, kill_after=rng.uniform(1.0, 10.0))
        assert rc in (0, -signal.SIGKILL), out[-4000:]
        check_no_duplicates(tmp)
        nxt = add_files(data, nxt, 2)
    rc, out = run_child(tmp, {})
    assert rc == 0, out[-4000:]
    assert "already staged or committed, skipping" in out  # Spark replayed a committed batch
    ids = table_ids(tmp)
    expected = list(range(nxt * ROWS_PER_FILE))
    assert sorted(ids) == expected, f"missing {sorted(set(expected) - set(ids))[:20]}"
    table = load_table(tmp / "home", "ns.events", warehouse=tmp / "warehouse")
    summ = icesql_summaries(table)
    reasons = {s["icesql.commit-reason"] for s in summ}
    assert "recovery" in reasons, reasons
    progress = [int(s["icesql.progress"]) for s in summ]
    assert progress == sorted(progress) and len(set(progress)) == len(progress)
    versions = [int(s["icesql.sink-version"]) for s in summ]
    assert versions == sorted(versions)
    assert killed == len(kills)
