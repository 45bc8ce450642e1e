"""Automatic maintenance driven by a running sink (issue 13): the short soak of the default suite.

An upsert sink commits once per input file (MAX FILES PER TRIGGER = 1, a commit per batch) under
aggressive maintenance thresholds, while another writer (pyiceberg) appends rows of its own to the
same table. Compaction runs either between the sink's commits (``between``: small rewrites) or
beside them on a thread of its own that commits in a gap (``beside``: every rewrite counts as
large, so the sink's position deletes made meanwhile must be carried over). Afterwards:

* DuckDB and DataFusion read exactly an independent replay of the changes plus the foreign rows;
* maintenance ran (compaction, expiration) and said so in the log;
* old snapshots were expired but the sink still resumes exactly once: a second run over more
  files gives the replay again;
* no sink commit failed (``run`` raises if the sink fails).

The long soak (two sinks committing every second for 30 minutes, the table's health sampled
against the issue's bounds) is ``tests/soak/test_maintenance_soak.py`` (``-m slow``).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import shutil
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from icesql.plan import MaintenancePolicy
from tests.engine.test_key_index import c, d, engine, readers_agree, replay, sink, source, u
from tests.support.pipeline_helpers import State, load_table, write_json_lines

pytestmark = pytest.mark.spark


def policy(large: bool) -> MaintenancePolicy:
    return MaintenancePolicy(
        compaction_minimum_files=3,
        maximum_delete_files=3,
        maximum_manifests=4,
        snapshot_retention=1.0,
        keep_snapshots=3,
        expire_every=0.0,
        large_rewrite_bytes=1 if large else 64 * 1024 * 1024,
    )


def changes(rng: random.Random, files: int, start_lsn: int, live: dict[int, str]) -> list[list[dict[str, Any]]]:
    """``files`` files of upserts and deletes over 40 keys (``live``: the keys present)."""
    out, lsn = [], start_lsn
    for _ in range(files):
        events = []
        for _ in range(rng.randint(3, 8)):
            k = rng.randrange(40)
            lsn += 1
            if k in live and rng.random() < 0.25:
                events.append(d(k, lsn=lsn))
                del live[k]
            elif k in live:
                live[k] = f"v{lsn}"
                events.append(u(k, live[k], lsn=lsn))
            else:
                live[k] = f"v{lsn}"
                events.append(c(k, live[k], lsn=lsn))
        out.append(events)
    return out


class ForeignWriter(threading.Thread):
    """Appends rows with keys of its own (``first_key`` and up) to the sink's table ``identifier``,
    every ``every`` s."""

    def __init__(
        self, home: Path, every: float = 0.7, *, identifier: str = "ns.t", first_key: int = 10_000
    ) -> None:
        super().__init__(daemon=True)
        self.home, self.every = home, every
        self.identifier, self.first_key = identifier, first_key
        self.rows: list[tuple[Any, ...]] = []
        self.stop = threading.Event()
        self.conflicts = 0

    def run(self) -> None:
        n = self.first_key
        while not self.stop.wait(self.every):
            try:
                table = load_table(self.home, self.identifier)
            except Exception:
                continue  # not created yet
            row = (n, "us", f"foreign{n}")
            try:
                table.append(
                    pa.table(
                        {"id": pa.array([row[0]], pa.int64()), "region": [row[1]], "v": [row[2]]},
                        schema=table.schema().as_arrow(),
                    )
                )
            except Exception:  # a commit conflict with the sink or the maintenance: try again
                self.conflicts += 1
                continue
            self.rows.append(row)
            n += 1


def soak(spark: Any, tmp_path: Path, *, large: bool, files: int, caplog: Any) -> None:
    home, data, state = tmp_path / "home", tmp_path / "in", State()
    rng = random.Random(13)
    live: dict[int, str] = {}
    batches = changes(rng, files, 0, live)
    for i, events in enumerate(batches):
        write_json_lines(data, f"{i:05d}.json", events)
    plan = sink(maintenance=policy(large))
    caplog.set_level(logging.INFO, logger="icesql.sink")

    # one file per micro-batch: one commit per file
    cdc = dataclasses.replace(source(data), max_files_per_trigger=1)
    foreign = ForeignWriter(home)
    try:
        foreign.start()
        engine(home, spark, data, state, source_plan=cdc).run([plan], once=True)
        foreign.stop.set()
        foreign.join()
        events = [e for b in batches for e in b]
        expected = sorted(replay(events) + foreign.rows, key=repr)
        readers_agree(home, expected)

        lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("maintenance sink=")]
        steps = {part.split("=", 1)[1] for line in lines for part in line.split() if part.startswith("step=")}
        assert {"compact", "expire"} <= steps, lines
        table = load_table(home, "ns.t")
        commits = len(batches)
        assert len(list(table.snapshots())) < commits, "old snapshots were expired"
        live_deletes = sum(
            1
            for m in table.current_snapshot().manifests(table.io)
            for e in m.fetch_manifest_entry(table.io, discard_deleted=True)
            if int(e.data_file.content) != 0
        )
        # compaction keeps the delete files near the threshold: a due compaction runs at least
        # every other gap between commits, so only the last commits' delete files (2 each: by
        # position, and by key for the foreign writer's rows) come on top of the threshold
        assert live_deletes <= policy(large).maximum_delete_files + 3, (live_deletes, lines[-6:])

        # the sink resumes exactly once over the maintained table, its checkpoint lost too
        shutil.rmtree(home / "sinks")
        more = changes(rng, 4, 100_000, live)
        for i, ev in enumerate(more):
            write_json_lines(data, f"{files + i:05d}.json", ev)
        engine(home, spark, data, state, source_plan=cdc).run([plan], once=True)
        readers_agree(home, sorted(replay(events + [e for b in more for e in b]) + foreign.rows, key=repr))
    finally:
        foreign.stop.set()


@pytest.mark.parametrize("where", ["between", "beside"])
def test_a_running_upsert_sink_maintains_its_table_beside_a_foreign_writer(
    spark: Any, tmp_path: Path, caplog: Any, where: str
) -> None:
    soak(spark, tmp_path, large=where == "beside", files=24, caplog=caplog)
