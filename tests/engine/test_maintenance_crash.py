"""Orphan-file cleanup after a sink was killed, with a safety age of zero: it deletes what the
killed batches left unreferenced and nothing that recovery needs.

A real sink (``tests/support/crash_runner.py`` in a child process group, on Spark's path and in
icesql's own process) is
SIGKILLed inside an executor mid-write, then again right after a batch was staged durably but
before its commit. The table location then holds files nothing references: those of the batch
killed mid-write (true orphans) and those of the staged batch (which the next start commits).
Cleanup with ``older_than`` in the future (every unreferenced file qualifies by age) must spare
the staged ones; the restarted sink then commits every row exactly once.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from icesql.engine.iceberg.table_files import path_key
from icesql.engine.maintenance import remove_orphan_files, staged_files
from tests.support.crash import ROWS_PER_FILE, add_files, run_child, table_ids
from tests.support.pipeline_helpers import load_table

pytestmark = pytest.mark.spark


# a run --once takes one of two paths: Spark's streaming query, or the same query in icesql's own
# process without Spark (engine.local_query)
PATHS = {"spark": {"ICESQL_LOCAL_RUN": "0"}, "local": {"ICESQL_LOCAL_RUN": "1"}}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_orphan_cleanup_between_kills_spares_the_staged_batch(tmp_path: Path, path: str) -> None:
    data = tmp_path / "in"
    nxt = add_files(data, 0, 4)
    rc, out = run_child(tmp_path, {**PATHS[path], "ICESQL_TEST_KILL_AT": "write"})  # the table exists by then
    assert rc == -signal.SIGKILL, out[-4000:]
    nxt = add_files(data, nxt, 2)
    rc, out = run_child(tmp_path, {**PATHS[path], "ICESQL_TEST_KILL_AT": "staged"})
    assert rc == -signal.SIGKILL, out[-4000:]

    home = tmp_path / "home"
    staged = staged_files(home)
    assert staged, "the killed run staged a batch"
    table = load_table(home, "ns.events", warehouse=tmp_path / "warehouse")
    result = remove_orphan_files(table, time.time() + 60, protected_paths=lambda: staged_files(home))
    assert result.kept_protected == len(staged)
    assert not {path_key(p) for p in result.deleted} & {path_key(p) for p in staged}
    for file in staged:
        assert Path(file.removeprefix("file://")).exists()

    rc, out = run_child(tmp_path, PATHS[path])
    assert rc == 0, out[-4000:]
    assert sorted(table_ids(tmp_path)) == list(range(nxt * ROWS_PER_FILE))
    runs = (tmp_path / "child.log").read_text().split("==== run ")[1:]
    assert runs and all(("runs in this process" in r) == (path == "local") for r in runs)
