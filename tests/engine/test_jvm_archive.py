"""The driver JVM's class archive (``jvm_archive``): made once by a driver JVM as it exits,
checked by a real JVM once that JVM has exited (a dump cut short crashes a JVM rather than
falling back), then used by every later driver. Real ``java`` runs; no Spark session."""

from __future__ import annotations

import shutil
import subprocess
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


def test_the_first_driver_dumps_the_next_checks_and_uses_it(tmp_path: Path) -> None:
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


def test_a_dump_cut_short_is_never_used(tmp_path: Path) -> None:
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
