"""The archive maker: makes the driver JVM's class archive (``jvm_archive``) off every user's run.

Started by ``jvm_archive.start_maker`` as a detached process when a driver JVM starts with no
archive to map, it lowers its own priority as far as it goes, waits for the process that started
it to exit (``--after``; at most ``AFTER_AT_MOST`` seconds, a sink that runs for hours does not
keep every later start from its archive), then runs a small sink on Spark in a scratch home
under ``ICESQL_JVM_ARCHIVE=dump``: its driver JVM loads the classes a sink's run loads and dumps
them as it exits. Then the dump is checked and made the archive (``archive_options``), the scratch
home removed and its lock (``<archive>.making``) let go. When no archive came of it, a
``<archive>.bad`` marker stops any further maker for this install (``ICESQL_JVM_ARCHIVE=0`` is
then what it was before, and the reason is in ``<archive>.making.log``).

``make(archive)`` is the same run in the foreground: the test suite makes the archive before
its first Spark test with it.

    python -m icesql.engine.backends.spark.archive_maker <archive> [--after PID]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

AFTER_AT_MOST = 300.0  # seconds the maker waits for the run that started it before it goes on
RUN_TIMEOUT = 900.0  # seconds the sink's run may take at the lowest priority on a busy machine

_SCRIPT = """
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = './warehouse');
CREATE SOURCE events FROM FILES 'data/'
  (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP, user_id INT, region STRING, amount DOUBLE, kind STRING');
CREATE SINK events_sink FROM events INTO ICEBERG CATALOG lake (NAMESPACE = 'archive', TABLE = 'events')
PARTITION BY (day(ts), region);
"""


def _rows(n: int) -> str:
    regions = ("eu-west-1", "us-east-1", "ap-south-1")
    return "".join(
        f'{{"id": {i}, "ts": "2026-11-{20 + i % 3}T08:{i % 60:02d}:00Z", "user_id": {i % 7}, '
        f'"region": "{regions[i % 3]}", "amount": {i * 1.5}, "kind": "view"}}\n'
        for i in range(n)
    )


def _wait_for(pid: int, at_most: float) -> None:
    from icesql.engine.backends.spark.jvm_archive import _alive

    deadline = time.monotonic() + at_most
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.5)


def make(archive: Path, *, after: int | None = None, lowest_priority: bool = False, say: Any = None) -> bool:
    """Make ``archive`` (the ``jvm_archive`` path of this install's key): True when it exists
    afterwards; ``say`` gets a line on what happened (the maker's log). ``<archive>.making`` is
    held by ``main`` (``start_maker`` took it); the foreground caller needs none."""
    from icesql.engine.backends.spark.jvm_archive import archive_options, wait_for_dumps
    from icesql.engine.backends.spark.session import driver_java_options

    if lowest_priority:
        try:
            os.nice(19)
        except OSError:
            pass
    if after is not None:
        _wait_for(after, AFTER_AT_MOST)
    options = driver_java_options()
    directory = archive.parent
    cache_home = directory.parent if directory.name == "icesql" else None
    with tempfile.TemporaryDirectory(prefix="icesql-archive-") as scratch:
        work = Path(scratch)
        (work / "data").mkdir()
        (work / "data" / "events-000.json").write_text(_rows(200), encoding="utf-8")
        (work / "make.sql").write_text(_SCRIPT, encoding="utf-8")
        env = dict(os.environ, ICESQL_JVM_ARCHIVE="dump", ICESQL_LOCAL_RUN="0")
        env.pop("ICESQL_HOME", None)
        if cache_home is not None:
            env["XDG_CACHE_HOME"] = str(cache_home)
        cmd = [
            sys.executable,
            "-m",
            "icesql",
            "--home",
            str(work / "home"),
            "run",
            str(work / "make.sql"),
            "--once",
            "--spark-master",
            "local[2]",
            "--conf",
            "spark.ui.enabled=false",
        ]
        started = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=scratch, timeout=RUN_TIMEOUT)
            said = (p.stdout + p.stderr).strip()
            ok = p.returncode == 0
        except subprocess.TimeoutExpired:
            said, ok = f"the sink's run took more than {RUN_TIMEOUT:.0f} s", False
        wait_for_dumps(str(directory), timeout=RUN_TIMEOUT, makers=False)  # its driver JVM dumps as it exits
    if not ok and say is not None:
        say(f"the maker's sink failed: {said[-2000:]}")
    archive_options(options, str(directory))  # checks the dump and makes it the archive
    made = archive.is_file()
    if say is not None:
        say(
            f"class archive {'made' if made else 'not made'} in {time.monotonic() - started:.0f} s: {archive}"
        )
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="icesql-archive-maker")
    parser.add_argument("archive")
    parser.add_argument("--after", type=int, default=None)
    args = parser.parse_args(argv)
    archive = Path(args.archive)
    lock = Path(f"{archive}.making")
    try:
        made = make(archive, after=args.after, lowest_priority=True, say=lambda line: print(line, flush=True))
        if not made and not archive.is_file():
            Path(f"{archive}.bad").touch()  # no second maker for this install: the log says why
        return 0 if made else 1
    finally:
        lock.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
