"""The checkpoint on both executors (issue 50 item 3).

* For the same input, the checkpoint the in-process run writes (``backends.checkpoint``,
  ``CheckpointLog``) is Spark's, file by file, batch 0 included: ``metadata``, ``offsets/N``,
  ``commits/N`` and the FILES source's own log (``icesql-files/``). What may differ is named in
  ``test_the_checkpoint_in_process_is_sparks``.
* Either executor continues the other's checkpoint at every batch boundary: batches run in
  process, on Spark, in process again, with new files arriving between the runs, and the table
  and checkpoint equal one straight run's; nothing is read twice or lost.

On Spark a sink's batches are planned in icesql's process by the same loop as in process
(``backends.spark.planned``), which writes the checkpoint with the same code; so the Spark runs
here are Spark's own Structured Streaming query (``ICESQL_PLANNED_BATCHES=0``), whose checkpoint
the loop's must be - but for the last turn of ``test_either_executor_continues_the_others_checkpoint``,
which takes up Spark's streaming query's checkpoint with batches planned here and run on Spark.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from icesql.engine.backends.checkpoint import FIRST_CONF, CheckpointLog
from icesql.engine.backends.spark.session import DEFAULT_CONF
from tests.support.conformance import Pipeline, Twins
from tests.support.pipeline_helpers import icesql_summaries, write_json_lines

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def _sparks_streaming_query(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICESQL_PLANNED_BATCHES", "0")

SCHEMA = "id BIGINT, v STRING"
SINK = "CREATE SINK k FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't')"


def _file(data: Path, k: int, n: int = 10) -> None:
    path = write_json_lines(data, f"{k}.json", [{"id": i, "v": f"v{i}"} for i in range(k * 100, k * 100 + n)])
    os.utime(path, (1_700_000_000 + k, 1_700_000_000 + k))  # both executors take files by mtime


SEEN = ".seen.sqlite"  # the FILES source's index of the paths it has seen (``files.log``)


def _files(root: Path) -> dict[str, Any]:
    """Every file of a checkpoint by its path (the seen index by its rows), but Hadoop's
    checksums (``.N.crc``: Spark's checkpoint file manager writes one beside each file it writes;
    nothing reads them back but Hadoop) and SQLite's ``-wal``/``-shm`` beside the seen index (the
    journal of a connection still open: the Spark run's source reader lives on in Spark's
    Python process, the in-process one was closed)."""
    out: dict[str, Any] = {}
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.name.endswith((".crc", f"{SEEN}-wal", f"{SEEN}-shm")):
            continue
        out[str(p.relative_to(root))] = _seen_rows(p) if p.name == SEEN else p.read_bytes()
    return out


def _seen_rows(path: Path) -> dict[str, list[Any]]:
    import sqlite3

    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {t: sorted(db.execute(f"SELECT * FROM {t}").fetchall()) for t in ("seen", "meta")}
    finally:
        db.close()


def _offsets(text: bytes) -> tuple[str, dict[str, Any], list[Any]]:
    version, meta, *sources = text.decode().splitlines()
    return version, json.loads(meta), [json.loads(s) for s in sources]


def test_the_checkpoint_in_process_is_sparks(spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Equal: the files each writes, ``v1`` and every source's offset of ``offsets/N``, the batch
    metadata's ``batchWatermarkMs`` and ``conf``, ``commits/N`` whole, the source's own log whole.
    Differs by construction: ``metadata``'s query id (a UUID each new query draws) and
    ``batchTimestampMs`` (when the batch was planned). ``conf``'s ``spark.sql.shuffle.partitions``
    is the session's: the tests' Spark session sets 2, the in-process run stands for icesql's
    default session (``DEFAULT_CONF``: 8), so each is checked against its own session."""
    data = tmp_path / "in"
    _file(data, 1)
    twins = Twins.make(tmp_path, spark, caplog)
    twins.execute(f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'json', SCHEMA = '{SCHEMA}');{SINK};")
    twins.run(["k"])  # batch 0
    _file(data, 2)
    _file(data, 3)
    twins.run(["k"])  # batch 1
    here_root, there_root = twins["in_process"].checkpoint(), twins["spark"].checkpoint()
    here, there = _files(here_root), _files(there_root)
    assert sorted(here) == sorted(there), "the checkpoints hold different files"
    assert {"metadata", "offsets/0", "offsets/1", "commits/0", "commits/1"} <= set(here)

    ids = [json.loads(x["metadata"]) for x in (here, there)]
    assert [sorted(m) for m in ids] == [["id"], ["id"]] and ids[0]["id"] != ids[1]["id"]

    partitions = {"in_process": DEFAULT_CONF["spark.sql.shuffle.partitions"], "spark": spark.conf.get("spark.sql.shuffle.partitions")}
    for batch in (0, 1):
        (v1, m1, s1), (v2, m2, s2) = _offsets(here[f"offsets/{batch}"]), _offsets(there[f"offsets/{batch}"])
        assert v1 == v2 == "v1"
        assert s1 == s2, f"batch {batch}: the source's offsets differ"
        assert sorted(m1) == sorted(m2) == ["batchTimestampMs", "batchWatermarkMs", "conf"]
        assert m1["batchWatermarkMs"] == m2["batchWatermarkMs"]
        for conf, executor in ((m1["conf"], "in_process"), (m2["conf"], "spark")):
            assert conf.pop("spark.sql.shuffle.partitions") == partitions[executor], f"{executor}, batch {batch}"
        assert m1["conf"] == m2["conf"], f"batch {batch}: the conf the query must keep differs"
        assert here[f"commits/{batch}"] == there[f"commits/{batch}"]
    # the first batch's settings hard-coded for a checkpoint without Spark's, key by key
    sparks = _offsets(there["offsets/0"])[1]["conf"]
    sparks.pop("spark.sql.shuffle.partitions")
    first = {k: v for k, v in FIRST_CONF.items() if k != "spark.sql.shuffle.partitions"}
    assert sorted(first) == sorted(sparks), "FIRST_CONF names other settings than Spark writes"
    for key, value in first.items():
        assert sparks[key] == value, f"{key}: FIRST_CONF has {value}, Spark writes {sparks[key]}"
    assert FIRST_CONF["spark.sql.shuffle.partitions"] == DEFAULT_CONF["spark.sql.shuffle.partitions"]

    rest = sorted(set(here) - {"metadata"} - {f"offsets/{b}" for b in (0, 1)} - {f"commits/{b}" for b in (0, 1)})
    assert rest and all(name.startswith("icesql-files/") for name in rest), rest
    for name in rest:
        assert here[name] == there[name], f"{name} differs"


def test_the_first_batch_in_process_records_the_sessions_shuffle_partitions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Spark writes the session's ``spark.sql.shuffle.partitions`` into batch 0's metadata (the
    Spark twin of ``test_the_checkpoint_in_process_is_sparks`` shows it with the tests' session)
    and on a restart runs with the checkpoint's value instead of the session's."""
    data = tmp_path / "in"
    _file(data, 1)
    home, wh = tmp_path / "home", tmp_path / "wh"
    p = Pipeline("in_process", home, wh, None, caplog, spark_conf={"spark.sql.shuffle.partitions": "3"})
    p.execute(
        f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');"
        f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'json', SCHEMA = '{SCHEMA}');{SINK};"
    )
    p.run(["k"])
    conf = _offsets((p.checkpoint() / "offsets" / "0").read_bytes())[1]["conf"]
    assert conf["spark.sql.shuffle.partitions"] == "3"


def test_either_executor_continues_the_others_checkpoint(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "in"
    data.mkdir()
    home, wh = tmp_path / "turns" / "home", tmp_path / "turns" / "wh"
    local, sparks = Pipeline("in_process", home, wh, None, caplog), Pipeline("spark", home, wh, spark, caplog)
    source = f"CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'json', SCHEMA = '{SCHEMA}', MAX FILES PER TRIGGER = 1);"
    local.execute(
        f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');{source}{SINK};"
    )
    for k, turn in enumerate([local, sparks, local]):
        _file(data, k)
        turn.run(["k"])
        if turn is sparks:
            assert not hasattr(sparks.last_query, "executor"), "Spark's own streaming query did not run"
        log = CheckpointLog(turn.checkpoint())
        assert log.planned() == log.committed() == list(range(k + 1)), f"after the turn of batch {k} ({turn.executor})"
    _file(data, 3)
    _file(data, 4)
    monkeypatch.setenv("ICESQL_PLANNED_BATCHES", "1")  # planned here, run on Spark
    sparks.run(["k"])  # and two batches on Spark after the last one in process
    assert sparks.last_query.executor == "spark"
    straight = Pipeline("in_process", tmp_path / "straight" / "home", tmp_path / "straight" / "wh", None, caplog)
    straight.execute(
        f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{straight.warehouse}');"
        f"{source}{SINK};"
    )
    straight.run(["k"])

    turns, once = local.state("n.t"), straight.state("n.t")
    ids = sorted(r[0] for r in turns.rows)
    assert ids == sorted({i for k in range(5) for i in range(k * 100, k * 100 + 10)}), "a row read twice or lost"
    assert turns.rows == once.rows and turns.schema == once.schema and turns.spec == once.spec
    progress = [int(s["icesql.progress"]) for s in icesql_summaries(local.table("n.t")) if "icesql.progress" in s]
    assert progress == sorted(set(progress)) and progress[-1] == 4
    assert max(int(s["icesql.progress"]) for s in icesql_summaries(straight.table("n.t")) if "icesql.progress" in s) == 4
    a, b = CheckpointLog(local.checkpoint()), CheckpointLog(straight.checkpoint())
    assert a.planned() == a.committed() == b.planned() == b.committed() == list(range(5))
    assert [a.offset(n) for n in range(5)] == [b.offset(n) for n in range(5)]
    # the source admitted every file once, in the same order (the log's segments differ: one per
    # listing that found files, so one per turn, and one for the straight run)
    admitted = _admitted(local.checkpoint())
    assert admitted == _admitted(straight.checkpoint())
    assert [(e["seq"], Path(e["path"]).name) for e in admitted] == [(k + 1, f"{k}.json") for k in range(5)]


def _admitted(checkpoint: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    rows = [r for seg in sorted((checkpoint / "icesql-files").glob("seg-*.parquet")) for r in pq.read_table(seg).to_pylist()]
    return sorted(rows, key=lambda r: r["seq"])
