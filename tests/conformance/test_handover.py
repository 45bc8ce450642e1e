"""A ``run --once`` hands a due rewrite to the sink's next run (issue 54 item 5), on both executors.

A scheduled ``run --once`` of an upsert sink returns as soon as its input is committed: a rewrite
its table is due when the run ends (here: a data file with more than 30 % of its rows deleted by
the run's position deletes, committed as the run ends: ``MINIMUM SIZE`` holds the batch until
then, so no gap follows the commit) is not done in its foreground but noted in the sink's staging
directory; the next run starts it beside its first batch, and it commits after that run's
commit. The table is read exactly by DuckDB, DataFusion (``TableState``) and Iceberg Java after
every run, and the two executors' tables hold the same rows. (A rewrite too large for a gap, put
off to a next batch a one-batch run does not have, takes the same way:
``tests/engine/test_maintainer.py::test_a_table_fed_only_by_run_once_is_compacted_one_run_later``.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conformance.test_sinks import CDC_SCHEMA, SINK, _changes, _replay, _stamp
from tests.support.conformance import EXECUTORS, Twins
from tests.support.pipeline_helpers import write_json_lines

pytestmark = [pytest.mark.spark, pytest.mark.java]

HANDED = "compaction due, handed to the sink's next run"
STARTED = "the rewrite the last run handed over starts beside the sink"


def _compactions(state: Any) -> int:
    return sum(1 for s in state.summaries if s.get("icesql.commit-reason") == "compact")


def _note(home: Path) -> Path:
    (staging,) = (home / "sinks").glob("*/staging")
    return staging / "rewrite-due"


def test_a_run_once_hands_a_due_rewrite_to_the_next_run(spark: Any, tmp_path: Path, caplog: Any) -> None:
    from tests.support.readers import canonical_digest, java_available, read_java

    if not java_available():
        pytest.fail("the Java reader harness is missing: bash ../shared/tools/iceberg-readers-setup")
    data = tmp_path / "cdc"
    twins = Twins.make(tmp_path, spark, caplog)
    twins.execute(
        f"CREATE SOURCE cdc FROM FILES '{data}' (FORMAT = 'debezium-json', SCHEMA = '{CDC_SCHEMA}');"
        f"CREATE SINK k FROM cdc {SINK.format(table='up')} KEY (id) MODE UPSERT WITH (MINIMUM SIZE = '1GiB');"
    )

    def run(round_no: int) -> dict[str, Any]:
        _stamp(write_json_lines(data, f"{round_no}.json", _changes(round_no)), round_no)
        twins.run(["k"])
        states = {e: twins[e].state("n.up") for e in EXECUTORS}
        want = _replay(round_no + 1)
        digest = canonical_digest([{"id": i, "v": v, "n": n} for i, v, n in want])
        for e, state in states.items():
            assert state.rows == want, f"{e}, round {round_no}: DuckDB and DataFusion read wrong rows"
            java = read_java(twins[e].table("n.up").metadata_location)
            assert (java["rows"], java["digest"]) == (digest["rows"], digest["digest"]), f"{e}: Java"
        return states

    run(0)  # inserts only: nothing to rewrite
    states = run(1)  # updates and deletes: most of the first file's rows are deleted
    for e in EXECUTORS:
        log = twins[e].log[-1]
        assert HANDED in log, f"{e}: {log}"
        assert "step=compact" not in log, f"{e}: the run rewrote its table: {log}"
        assert _compactions(states[e]) == 0 and states[e].files.get("position-deletes:parquet", 0) > 0
        assert _note(twins[e].home).exists(), e

    states = run(2)  # the next run: the rewrite beside its batch, committed in a gap
    for e in EXECUTORS:
        log = twins[e].log[-1]
        assert STARTED in log and "step=compact beside" in log, f"{e}: {log}"
        assert _compactions(states[e]) == 1, (e, states[e].summaries)
        assert not _note(twins[e].home).exists(), e  # done: nothing owed
    assert states["in_process"].rows == states["spark"].rows
