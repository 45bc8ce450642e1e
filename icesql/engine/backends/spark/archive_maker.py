"""The archive maker: makes the driver JVM's class archive (``jvm_archive``) off every user's run.

Started by ``jvm_archive.start_maker`` as a detached process when a driver JVM starts with no
archive to map, it lowers its own priority as far as it goes (SCHED_IDLE, idle I/O), waits for
the process that started it to exit (``--after``; at most ``AFTER_AT_MOST`` seconds, a sink that
runs for hours does not keep every later start from its archive) and for a quiet machine, then
runs a small sink on Spark in a scratch home under ``ICESQL_JVM_ARCHIVE=dump``: its driver JVM
loads the classes a sink's run loads and dumps them as it exits. A user's run that starts a
driver meanwhile leaves a ``busy`` note (``jvm_archive``): the maker kills its run (a killed JVM
dumps nothing), waits for that process to exit and a quiet machine, and starts again (at most
``ATTEMPTS`` times; then the next run that starts a driver starts a new maker). Then the dump is
checked and made the archive (``archive_options``), the scratch home removed and its lock
(``<archive>.making``) let go. When the maker's sink failed, a ``<archive>.bad`` marker stops any
further maker for this install (as ``ICESQL_JVM_ARCHIVE=0``; the reason is in
``<archive>.making.log``).

``make(archive)`` is the same run in the foreground: the test suite makes the archive before
its first Spark test with it.

    python -m icesql.engine.backends.spark.archive_maker <archive> [--after PID]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

AFTER_AT_MOST = 300.0  # seconds the maker waits for the run that started it before it goes on
RUN_TIMEOUT = 900.0  # seconds the sink's run may take at the lowest priority on a busy machine
QUIET_IDLE = 0.75  # the share of the CPU time that must be idle for the maker to start its run
QUIET_AT_MOST = 3600.0  # seconds the maker waits for a quiet machine before it gives up (for now)
ATTEMPTS = 5  # runs the maker may give way to before it gives up (for now: the next run starts one)

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


def _lowest_priority() -> None:
    """Run (this process and the ones it starts: the sink's run, its JVM, its workers) only on
    what the machine leaves idle: Linux's SCHED_IDLE, below every nice level (a nice-19 maker still
    slowed a run beside it by a third on two cores), and the idle I/O class; nice 19 where those
    are not to be had."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        try:
            os.nice(19)
        except OSError:
            pass
    number = {"x86_64": 251, "aarch64": 30}.get(os.uname().machine)  # ioprio_set: no Python API for it
    if number is not None:
        try:  # (IOPRIO_WHO_PROCESS, this process, IOPRIO_CLASS_IDLE << 13)
            import ctypes

            ctypes.CDLL(None, use_errno=True).syscall(number, 1, 0, 3 << 13)
        except (OSError, AttributeError):
            pass


def _wait_for(pid: int, at_most: float) -> None:
    from icesql.engine.backends.spark.jvm_archive import alive

    deadline = time.monotonic() + at_most
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.5)


def _idle_share(seconds: float = 2.0) -> float:
    """The share of the machine's CPU time left idle over ``seconds`` (/proc/stat; 1.0 where
    there is no such file)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        return fields[3] + (fields[4] if len(fields) > 4 else 0), sum(fields)

    try:
        idle0, total0 = sample()
        time.sleep(seconds)
        idle1, total1 = sample()
    except (OSError, ValueError, IndexError):
        return 1.0
    return (idle1 - idle0) / max(1, total1 - total0)


def _wait_for_quiet(archive: Path, at_most: float) -> bool:
    """Until no user's run waits on the maker and the machine is mostly idle (``QUIET_IDLE`` of
    its CPU time over 2 s: an in-process run, or anything else, is let be); False after
    ``at_most`` seconds without."""
    from icesql.engine.backends.spark.jvm_archive import runs_waiting

    deadline = time.monotonic() + at_most
    while time.monotonic() < deadline:
        if not runs_waiting(archive) and _idle_share() >= QUIET_IDLE:
            return True
        time.sleep(1.0)
    return False


def _one_run(archive: Path, work: Path, env: dict[str, str], *, yields: bool) -> tuple[str, str]:
    """The maker's sink, run once: ("done", output) when it ran to its end, ("failed", why), or
    ("yielded", "") when a user's run started a driver meanwhile (``yields``): the maker's run is
    killed at once, its JVM with it (a killed JVM dumps nothing), and tried again later."""
    import signal

    from icesql.engine.backends.spark.jvm_archive import runs_waiting

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
    shutil.rmtree(work / "home", ignore_errors=True)
    shutil.rmtree(work / "warehouse", ignore_errors=True)
    with open(work / "run.log", "w+b") as out:
        p = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=work,
            start_new_session=True,  # its own process group: the JVM and the workers go with it
        )
        deadline = time.monotonic() + RUN_TIMEOUT
        while p.poll() is None:
            if (yields and runs_waiting(archive)) or time.monotonic() > deadline:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
                if time.monotonic() > deadline:
                    return "failed", f"the sink's run took more than {RUN_TIMEOUT:.0f} s"
                return "yielded", ""
            time.sleep(0.5)
        out.seek(0)
        said = out.read().decode(errors="replace").strip()
    return ("done", said) if p.returncode == 0 else ("failed", f"the sink's run failed: {said[-2000:]}")


def make(archive: Path, *, after: int | None = None, background: bool = False, say: Any = None) -> bool:
    """Make ``archive`` (the ``jvm_archive`` path of this install's key): True when it exists
    afterwards; ``say`` gets a line on what happened (the maker's log). ``background``: the
    maker's way, at the lowest priority, after the process ``after`` has exited, only while the
    machine is quiet, and giving way to any user's run that starts a driver meanwhile.
    ``<archive>.making`` is held by ``main`` (``start_maker`` took it); the foreground caller
    needs none."""
    from icesql.engine.backends.spark.jvm_archive import (
        archive_options,
        forget_dead_dumps,
        wait_for_dumps,
    )
    from icesql.engine.backends.spark.session import driver_java_options

    tell = say or (lambda line: None)
    if background:
        _lowest_priority()
        if after is not None:
            _wait_for(after, AFTER_AT_MOST)
    options = driver_java_options()
    directory = archive.parent
    cache_home = directory.parent if directory.name == "icesql" else None
    started = time.monotonic()
    outcome = "yielded"
    with tempfile.TemporaryDirectory(prefix="icesql-archive-") as scratch:
        work = Path(scratch)
        (work / "data").mkdir()
        (work / "data" / "events-000.json").write_text(_rows(200), encoding="utf-8")
        (work / "make.sql").write_text(_SCRIPT, encoding="utf-8")
        env = dict(os.environ, ICESQL_JVM_ARCHIVE="dump", ICESQL_LOCAL_RUN="0")
        env.pop("ICESQL_HOME", None)
        if cache_home is not None:
            env["XDG_CACHE_HOME"] = str(cache_home)
        for _ in range(ATTEMPTS if background else 1):
            if background and not _wait_for_quiet(archive, QUIET_AT_MOST):
                tell(f"the machine was never quiet for {QUIET_AT_MOST:.0f} s: no archive this time")
                return False
            outcome, said = _one_run(archive, work, env, yields=background)
            if outcome != "yielded":
                break
            tell("a run started a Spark driver: the maker's run gave way to it")
            forget_dead_dumps(archive)  # the killed JVM's ticket (it dumped nothing)
        if outcome == "yielded":
            tell(f"gave way {ATTEMPTS} times: no archive this time")
            return False
        wait_for_dumps(str(directory), timeout=RUN_TIMEOUT, makers=False)  # its driver JVM dumps as it exits
    if outcome == "failed":
        tell(said)
    archive_options(options, str(directory))  # checks the dump and makes it the archive
    made = archive.is_file()
    tell(f"class archive {'made' if made else 'not made'} in {time.monotonic() - started:.0f} s: {archive}")
    if not made and outcome == "failed":
        Path(f"{archive}.bad").touch()  # no maker again for this install: the log says why
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="icesql-archive-maker")
    parser.add_argument("archive")
    parser.add_argument("--after", type=int, default=None)
    args = parser.parse_args(argv)
    archive = Path(args.archive)
    lock = Path(f"{archive}.making")
    try:
        return (
            0
            if make(archive, after=args.after, background=True, say=lambda line: print(line, flush=True))
            else 1
        )
    finally:
        lock.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
