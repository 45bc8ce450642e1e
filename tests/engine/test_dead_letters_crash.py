"""Dead letters exactly once under SIGKILL: a sink with ON ERROR = 'dead-letter' in a child
process (``tests/support/crash_runner.py``) is killed between the dead-letter table's commit and
the target's, inside the dead-letter commit, after staging, ...; more files (each with a bad
record) arrive between runs. At the end every good record is in the target once and every bad
one in the dead-letter table once."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.support.crash import ROWS_PER_FILE, run_child, table_ids
from tests.support.pipeline_helpers import icesql_summaries, load_table, write_json_lines

pytestmark = pytest.mark.spark

# the window dead letters add: between the dead-letter table's commit and the target's
BETWEEN = [{"ICESQL_TEST_KILL_AT": "dead-letters"}]
MORE = [
    {"ICESQL_TEST_KILL_COMMIT": "after:1"},  # the dead-letter table swapped, pipeline not told
    {"ICESQL_TEST_KILL_COMMIT": "before:1"},  # dead-letter manifests written, not swapped
    {"ICESQL_TEST_KILL_AT": "staged"},  # staged with its dead letters, nothing committed
    {"ICESQL_TEST_KILL_COMMIT": "after:2"},  # both committed, pipeline not told
    {"ICESQL_TEST_KILL_AT": "committed"},  # committed, Spark has not recorded the batch
]


def add_files(data: Path, start: int, count: int) -> int:
    """JSON files of ``ROWS_PER_FILE`` good rows with one bad record (line 3) each."""
    for k in range(start, start + count):
        rows: list[str] = [
            json.dumps({"id": k * ROWS_PER_FILE + j, "ts": "2024-01-02T10:00:00Z", "v": f"f{k}-{j}"})
            for j in range(ROWS_PER_FILE)
        ]
        rows.insert(2, f'{{"id": "bad-{k}", "v": ')
        write_json_lines(data, f"part-{k:04d}.json", rows)
    return start + count


def letters(tmp: Path) -> list[tuple[str, int]]:
    try:
        table = load_table(tmp / "home", "ns.events_dead_letters", warehouse=tmp / "warehouse")
    except Exception:
        return []
    rows = table.scan(selected_fields=("file", "record")).to_arrow().to_pylist()
    return [(Path(r["file"]).name, int(r["record"])) for r in rows]


def check_once(tmp: Path) -> None:
    ids, dead = table_ids(tmp), letters(tmp)
    assert len(ids) == len(set(ids)), "duplicate rows in the target"
    assert len(dead) == len(set(dead)), f"duplicate dead letters: {sorted(dead)}"


# a run --once takes one of two paths: Spark's streaming query, or the same query in icesql's own
# process without Spark (engine.local_query). Dead letters have one: a bad record is a file the
# Arrow decoder leaves to Spark's reader (files.types.Fallback), so a sink started in process
# restarts on Spark at its first file ("needs Spark's reader"), as the local path's test shows.
PATHS = {"spark": {"ICESQL_LOCAL_RUN": "0"}, "local": {"ICESQL_LOCAL_RUN": "1"}}


def crash_loop(tmp: Path, kills: list[dict[str, str]], path: str) -> None:
    data = tmp / "in"
    nxt = add_files(data, 0, 4)
    for env in kills:
        rc, out = run_child(tmp, {**PATHS[path], **env}, on_error="dead-letter")
        assert rc == -signal.SIGKILL, f"expected a kill for {env}, got rc={rc}\n{out[-4000:]}"
        check_once(tmp)
        nxt = add_files(data, nxt, 2)
    rc, out = run_child(tmp, PATHS[path], on_error="dead-letter")
    assert rc == 0, out[-4000:]
    # each run took the path asked for; on the local one, Spark's reader took every bad record
    runs = (tmp / "child.log").read_text().split("==== run ")[1:]
    assert runs and all(("runs in this process" in r) == (path == "local") for r in runs)
    assert all(("needs Spark's reader: the sink restarts on Spark" in r) == (path == "local") for r in runs)
    assert sorted(table_ids(tmp)) == list(range(nxt * ROWS_PER_FILE))
    assert sorted(letters(tmp)) == [(f"part-{k:04d}.json", 3) for k in range(nxt)]
    dead = load_table(tmp / "home", "ns.events_dead_letters", warehouse=tmp / "warehouse")
    progress = [int(s["icesql.progress"]) for s in icesql_summaries(dead)]
    assert progress == sorted(progress) and len(set(progress)) == len(progress)


# the default run: the window dead letters add, on Spark's path (the one dead letters have; a
# sink started in process hands them to it: -m slow, 70-120 s); -m slow: every kill point
@pytest.mark.parametrize("path", ["spark", pytest.param("local", marks=pytest.mark.slow)])
def test_a_kill_between_the_two_commits_loses_and_repeats_no_dead_letter(tmp_path: Path, path: str) -> None:
    crash_loop(tmp_path, BETWEEN, path)


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(PATHS))
def test_dead_letters_exactly_once_at_every_kill_point(tmp_path: Path, path: str) -> None:
    crash_loop(tmp_path, BETWEEN + MORE, path)
