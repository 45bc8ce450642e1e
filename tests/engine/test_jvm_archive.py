"""The driver JVM's class archive (``jvm_archive``): made once per install by the archive maker
(``archive_maker``), never by a user's run: the maker's own driver JVM dumps it as it exits
(``ICESQL_JVM_ARCHIVE=dump``), a real JVM checks the dump once that JVM has exited (a dump cut
short crashes a JVM rather than falling back), then every later driver uses it. Real ``java``
runs; the maker's test runs a real Spark sink (in a process of its own)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from icesql.engine.backends.spark import jvm_archive as J
from tests.support.require import requires

pytestmark = requires(shutil.which("java") is not None, "needs java on PATH")

OPTIONS = "-XX:+UseSerialGC"


def _class_path() -> str:
    home = J._spark_home()
    assert home is not None
    return f"{home / 'conf'}:{home / 'jars'}/*"


def _dump(path: Path) -> None:
    """A real dynamic archive as a driver JVM leaves one (here a JVM that says its version),
    with the ticket the driver writes (that JVM has exited)."""
    p = subprocess.Popen(
        [
            "java",
            OPTIONS,
            f"-XX:ArchiveClassesAtExit={path}",
            "-Xlog:cds=off",
            "-cp",
            _class_path(),
            "-version",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert p.wait() == 0
    J.remember_class_path(path, _class_path(), p.pid)


def test_the_makers_driver_dumps_the_next_checks_and_uses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ICESQL_JVM_ARCHIVE", "dump")  # what the maker's own run has
    options, dump = J.archive_options(OPTIONS, str(tmp_path))
    assert dump is not None and options.startswith(f"-XX:ArchiveClassesAtExit={dump} ")
    assert "-Xlog:cds=off" in options  # never a CDS warning on the user's terminal

    # while its JVM runs, no second dump and no check
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        J.remember_class_path(dump, _class_path(), sleeper.pid)
        assert J.archive_options(OPTIONS, str(tmp_path)) == ("", None)
    finally:
        sleeper.kill()
        sleeper.wait()
    # that JVM was killed before it wrote anything: a new dump is asked for
    options, again = J.archive_options(OPTIONS, str(tmp_path))
    assert again is not None and options.startswith("-XX:ArchiveClassesAtExit=")

    _dump(again)
    J.wait_for_dumps(str(tmp_path), timeout=5)
    options, none = J.archive_options(OPTIONS, str(tmp_path))
    (archive,) = tmp_path.glob("spark-cds-*.jsa")
    assert none is None and options.startswith(f"-XX:SharedArchiveFile={archive} ")
    assert not list(tmp_path.glob("*.dump*"))
    # the archive works for a JVM on that class path
    p = subprocess.run(
        ["java", OPTIONS, *options.split(), "-cp", _class_path(), "-version"], capture_output=True, text=True
    )
    assert p.returncode == 0 and "sharing" in p.stderr

    # other JVM options (or another Java, other jars): another archive
    other, _ = J.archive_options("-XX:+UseParallelGC", str(tmp_path))
    assert other.startswith("-XX:ArchiveClassesAtExit=")


def test_a_dump_cut_short_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICESQL_JVM_ARCHIVE", "dump")
    _, dump = J.archive_options(OPTIONS, str(tmp_path))
    assert dump is not None
    _dump(dump)
    data = dump.read_bytes()
    dump.chmod(0o644)
    dump.write_bytes(data[: len(data) // 2])  # as if the JVM was killed while it wrote
    assert J.archive_options(OPTIONS, str(tmp_path)) == ("", None)
    assert not list(tmp_path.glob("*.jsa")) and list(tmp_path.glob("*.jsa.bad"))
    assert J.archive_options(OPTIONS, str(tmp_path)) == ("", None)  # and none is made again
    assert not list(tmp_path.glob("hs_err_pid*.log"))


def test_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICESQL_JVM_ARCHIVE", "0")
    assert J.archive_options(OPTIONS, str(tmp_path)) == ("", None)
    assert not any(tmp_path.iterdir())


def test_a_users_run_never_dumps_it_starts_one_maker_that_makes_the_archive_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first driver of an install runs without an archive and without dumping (a dumping JVM
    is slower all through its run); it starts the maker, detached, which waits for that run's
    process to exit, then makes the archive with a sink of its own on Spark. A run that starts a
    driver while the maker works starts no second maker, and the maker gives way to it (its own
    run killed) until that process exits; the run after it maps the archive."""
    from icesql.engine.backends.spark.session import driver_java_options

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache = tmp_path / "icesql"
    options = driver_java_options()
    start = (
        "import sys, time; from icesql.engine.backends.spark import jvm_archive as J, session as S; "
        "print(J.archive_options(S.driver_java_options(), may_make=True), flush=True); "
        "time.sleep(float(sys.argv[1]))"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PYTHONPATH": os.pathsep.join(sys.path)}

    def a_run(seconds: float) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", start, str(seconds)], stdout=subprocess.PIPE, text=True, env=env
        )

    first = a_run(0)
    out, _ = first.communicate(timeout=60)
    assert out.strip() == "('', None)"  # the user's run: no archive, no dump
    (lock,) = cache.glob("spark-cds-*.jsa.making")
    archive = lock.with_name(lock.name[: -len(".making")])
    maker = int(lock.read_text())
    assert J.alive(maker)

    # wait for the maker's own run to be under way, then start a driver beside it
    log = Path(f"{lock}.log")
    deadline = time.monotonic() + 300
    while not list(cache.glob("*.dump.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list(cache.glob("*.dump.json")), "the maker's run never started its driver"
    second = a_run(8)
    assert second.stdout is not None and second.stdout.readline().strip() == "('', None)"  # none yet
    assert list(cache.glob("*.making")) == [lock] and int(lock.read_text()) == maker  # no second maker
    busy = list(cache.glob("*.busy"))
    assert [b.name.rsplit(".", 2)[-2] for b in busy] == [str(second.pid)]
    deadline = time.monotonic() + 5
    while "gave way" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "gave way" in log.read_text()  # its run was killed for this one
    assert not list(cache.glob("*.jsa"))
    second.wait(timeout=30)

    deadline = time.monotonic() + 600
    while J.alive(maker) and time.monotonic() < deadline:
        time.sleep(1)
    said = log.read_text()
    assert archive.is_file(), said
    assert "class archive made" in said
    assert (
        not list(cache.glob("*.making"))
        and not list(cache.glob("*.dump*"))
        and not list(cache.glob("*.busy"))
    )
    used, dump = J.archive_options(options)
    assert dump is None and used.startswith(f"-XX:SharedArchiveFile={archive} ")


def test_a_makers_lock_holds_while_its_process_lives(tmp_path: Path) -> None:
    archive = tmp_path / "spark-cds-0123456789abcdef.jsa"
    lock = Path(f"{archive}.making")
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        lock.write_text(str(sleeper.pid))
        assert J._maker_running(archive)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not J._maker_running(archive) and not lock.exists()  # a maker that died: dropped
    lock.write_text("")  # taken, its process not started yet
    assert J._maker_running(archive)
    os.utime(lock, (time.time() - J.STARTING - 1,) * 2)
    assert not J._maker_running(archive) and not lock.exists()


def test_a_verbose_runs_options_start_no_maker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The maker's run has icesql's own driver options; a ``--verbose`` driver's differ, and a
    maker for them would make an archive no run of theirs maps (and start again every run)."""
    from icesql.engine.backends.spark.session import driver_java_options

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    debug = driver_java_options("DEBUG")
    assert debug != driver_java_options()
    assert J.archive_options(debug, may_make=debug == driver_java_options()) == ("", None)
    assert not list(tmp_path.glob("icesql/*.making"))
