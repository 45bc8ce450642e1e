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
from pathlib import Path

import pytest

from tests.support.crash import ROWS_PER_FILE, add_files, check_no_duplicates, run_child, table_ids
from tests.support.pipeline_helpers import icesql_summaries, load_table

pytestmark = pytest.mark.spark


# a run --once takes one of two paths: Spark's streaming query, or the same query in icesql's own
# process without Spark (engine.local_query; the default for this FILES append sink)
# (both in the default run: each kill point on each path; the soak below only adds random kills)
PATHS = {"spark": {"ICESQL_LOCAL_RUN": "0"}, "local": {"ICESQL_LOCAL_RUN": "1"}}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_sigkill_anywhere_exactly_once(tmp_path: Path, path: str) -> None:
    crash_loop(tmp_path, random_kills=1, path=PATHS[path])


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(PATHS))
def test_sigkill_soak(tmp_path: Path, path: str) -> None:
    crash_loop(tmp_path, random_kills=8, path=PATHS[path])


def crash_loop(tmp: Path, random_kills: int, path: dict[str, str]) -> None:
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
        rc, out = run_child(tmp, {**path, **env})
        assert rc == -signal.SIGKILL, f"expected a kill for {env}, got rc={rc}\n{out[-4000:]}"
        killed += 1
        check_no_duplicates(tmp)
        nxt = add_files(data, nxt, 2)
    rng = random.Random(int(os.environ.get("ICESQL_CRASH_SEED", "7")))
    for _ in range(random_kills):
        rc, out = run_child(tmp, {**path, "ICESQL_TEST_BATCH_DELAY": "0.3"}, kill_after=rng.uniform(1.0, 10.0))
        assert rc in (0, -signal.SIGKILL), out[-4000:]
        check_no_duplicates(tmp)
        nxt = add_files(data, nxt, 2)
    rc, out = run_child(tmp, path)
    assert rc == 0, out[-4000:]
    assert "already staged or committed, skipping" in out  # the query replayed a committed batch
    # each run took the path asked for (the local one starts no Spark)
    runs = (tmp / "child.log").read_text().split("==== run ")[1:]
    local = path["ICESQL_LOCAL_RUN"] == "1"
    assert runs and all(("runs in this process" in r) == local for r in runs)
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
