"""``icesql maintain`` / ``Session.maintain`` / ``\\maintain`` on a sink's table, without Spark.

The sink is created (not run); its table is written like the sink writes it, with the sink's
own id in the summaries, and a staged batch waits in the sink's staging area, as after a crash.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import icesql
from icesql.engine.commit.staging import StagedBatch, Staging
from icesql.engine.iceberg.writer import WrittenFile
from icesql.repl.format import format_maintenance
from tests.support.iceberg_tables import data, local, read_rows, sink_commit, sink_table, sql_catalog

ROOT = Path(__file__).resolve().parents[2]


def setup(tmp_path: Path, options: str = "") -> tuple[Path, Any, str, list[Any]]:
    """(home, table, sink id, staged files) for sink ``ev_sink`` writing ``ns.t``."""
    home = tmp_path / "home"
    wh = tmp_path / "wh"
    with icesql.Session(home=home) as s:
        s.execute(
            f"""
            CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');
            CREATE SOURCE ev FROM FILES '{tmp_path / "in"}' (FORMAT = 'json', SCHEMA = 'id BIGINT, region STRING, v STRING');
            CREATE SINK ev_sink FROM ev INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 't')
              KEY (id) WITH (SNAPSHOT RETENTION = '1ms', KEEP SNAPSHOTS = 2, COMPACTION MINIMUM FILES = 3,
                             ORPHAN FILE AGE = '1m', MAXIMUM MANIFESTS = 4{options});
            """
        )
        obj = s.store.get_object("sink", "ev_sink")
        assert obj is not None
        sink_id = obj.object_id
    table = sink_table(sql_catalog(tmp_path, "lake"))
    for i in range(6):
        sink_commit(table, i, data(table, range(i * 10, i * 10 + 10)), sink_id=sink_id)
    staged = data(table, [100])
    Staging.for_sink(home, sink_id).add(StagedBatch(batch_id=6, data_files=(WrittenFile.dumps(staged[0]),)))
    orphan = data(table, [200])
    return home, table, sink_id, [staged[0], orphan[0]]


def age(path: str, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(local(path), (then, then))


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "icesql", "--home", str(home), "maintain", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


def test_session_maintain_runs_what_is_due_and_spares_the_staged_batch(tmp_path: Path) -> None:
    from icesql.engine.commit.snapshot import last_committed

    home, table, sink_id, (staged, orphan) = setup(tmp_path)
    for path in (staged.file_path, orphan.file_path):
        age(path, 3600)  # older than ORPHAN FILE AGE: only the staging area protects the first
    rows = read_rows(table)
    with icesql.Session(home=home) as s:
        (dry,) = s.maintain(["ev_sink"], dry_run=True)
        assert dry.dry_run and local(orphan.file_path).exists()
        assert len(table.metadata.snapshots) == 6
        (run,) = s.maintain(["ev_sink"])
        assert s._engine is not None and s._engine._spark is None  # no Spark
    kinds = [t.kind.value for t in run.tasks]
    assert kinds == ["compact", "rewrite-manifests", "expire", "remove-orphans", "remove-orphans"]
    lines = format_maintenance(run)
    assert all(line.startswith("ev_sink: ns.t: ") for line in lines), lines
    assert "compact: 6 data + 0 delete file(s)" in lines[0], lines
    assert lines[2].startswith("ev_sink: ns.t: expire: expire "), lines
    assert not local(orphan.file_path).exists()
    assert local(staged.file_path).exists()
    assert read_rows(table) == rows
    assert last_committed(table, sink_id) == (1, 5)
    table.refresh()
    assert len(table.metadata.snapshots) <= 3


def test_cli_maintain_prints_a_line_per_step_and_honours_maintenance_off(tmp_path: Path) -> None:
    home, table, _, (_, orphan) = setup(tmp_path)
    dry = cli(home, "ev_sink", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-3000:]
    out = dry.stdout.splitlines()
    assert out[0].startswith("ev_sink: ns.t: compact: would rewrite: 6 small file(s) merged"), out
    assert any(line.startswith("ev_sink: ns.t: remove-orphans data/: would delete 0 of") for line in out), out
    assert local(orphan.file_path).exists()
    real = cli(home)
    assert real.returncode == 0, real.stderr[-3000:]
    assert real.stdout.startswith("ev_sink: ns.t: compact: 6 data + 0 delete file(s)"), real.stdout
    assert "Traceback" not in real.stderr
    again = cli(home, "ev_sink")
    assert "compact" not in again.stdout.splitlines()[0], again.stdout
    missing = cli(home, "nope")
    assert missing.returncode != 0 and "nope" in missing.stderr and "Traceback" not in missing.stderr

    with icesql.Session(home=home) as s:  # a sink that never ran: no table yet; the others go on
        s.execute("CREATE SINK later FROM ev INTO ICEBERG CATALOG lake (NAMESPACE = 'ns', TABLE = 'later')")
    both = cli(home)
    assert both.returncode == 3 and both.stdout.startswith("ev_sink: ns.t: "), both.stdout + both.stderr
    assert "later: " in both.stderr and "does not exist yet" in both.stderr, both.stderr

    with icesql.Session(home=home) as s:
        s.execute("ALTER SINK ev_sink SET (MAINTENANCE = 'off')")
    off = cli(home, "ev_sink")
    assert off.returncode == 0 and off.stdout.strip() == "ev_sink: ns.t: maintenance is off (MAINTENANCE = 'off')"


def test_shell_maintain_command(tmp_path: Path) -> None:
    from icesql.repl.commands import COMMANDS

    home, table, _, _ = setup(tmp_path)
    echoed: list[str] = []

    class Ctx:
        session: Any
        timing = False
        last_statement = None

        def echo(self, text: str) -> None:
            echoed.append(text)

        def echo_error(self, text: str) -> None:
            echoed.append("ERROR " + text)

    with icesql.Session(home=home) as s:
        ctx = Ctx()
        ctx.session = s
        COMMANDS.dispatch(ctx, "\\maintain ev_sink")  # type: ignore[arg-type]
    assert echoed and echoed[0].startswith("ev_sink: ns.t: compact: "), echoed
