"""The driver JVM's class archive (``jvm_archive``): made once by a JVM as it exits, checked by
a real JVM before any driver maps it (a dump cut short crashes a JVM rather than falling back),
then used by every later driver. Real ``java`` runs; no Spark session."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from icesql.engine import jvm_archive as J

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="needs java on PATH")

OPTIONS = "-XX:+UseSerialGC"


def _dump(path: Path, class_path: str) -> None:
    """A real dynamic archive, as a driver JVM leaves one (here of a JVM that only says its version)."""
    subprocess.run(
        ["java", OPTIONS, f"-XX:ArchiveClassesAtExit={path}", "-Xlog:cds=off", "-cp", class_path, "-version"],
        check=True,
        capture_output=True,
    )
    J.remember_class_path(path, class_path)
    old = time.time() - J.SETTLED - 5
    os.utime(path, (old, old))


def _class_path() -> str:
    home = J._spark_home()
    assert home is not None
    return f"{home / 'conf'}:{home / 'jars'}/*"


def test_the_first_driver_dumps_the_next_checks_and_uses_it(tmp_path: Path) -> None:
    options, dump = J.archive_options(OPTIONS, str(tmp_path))
    assert dump is not None and options.startswith(f"-XX:ArchiveClassesAtExit={dump} ")
    assert "-Xlog:cds=off" in options  # never a CDS warning on the user's terminal
    # a JVM is writing it (not settled): no second dump, no use
    dump.write_bytes(b"")
    assert J.archive_options(OPTIONS, str(tmp_path)) == ("", None)
    dump.unlink()

    _dump(dump, _class_path())
    options, again = J.archive_options(OPTIONS, str(tmp_path))
    (archive,) = tmp_path.glob("spark-cds-*.jsa")
    assert again is None and options.startswith(f"-XX:SharedArchiveFile={archive} ")
    assert not list(tmp_path.glob("*.dump*"))
    # the archive works for a JVM on that class path
    p = subprocess.run(
        ["java", OPTIONS, *options.split(), "-cp", _class_path(), "-version"], capture_output=True, text=True
    )
    assert p.returncode == 0 and "sharing" in p.stderr

    # another Java, other jars or other options: another archive
    other, _ = J.archive_options("-XX:+UseParallelGC", str(tmp_path))
    assert other.startswith("-XX:ArchiveClassesAtExit=")


def test_a_dump_cut_short_is_never_used(tmp_path: Path) -> None:
    _, dump = J.archive_options(OPTIONS, str(tmp_path))
    assert dump is not None
    _dump(dump, _class_path())
    data = dump.read_bytes()
    dump.chmod(0o644)
    dump.write_bytes(data[: len(data) // 2])  # the JVM killed while it wrote
    old = time.time() - J.SETTLED - 5
    os.utime(dump, (old, old))
    assert J.archive_options(OPTIONS, str(tmp_path)) == ("", None)
    assert not list(tmp_path.glob("*.jsa")) and list(tmp_path.glob("*.jsa.bad"))
    assert J.archive_options(OPTIONS, str(tmp_path)) == ("", None)  # and none is made again
    assert not list(tmp_path.glob("hs_err_pid*.log"))


def test_a_dump_without_its_class_path_is_dropped_and_made_again(tmp_path: Path) -> None:
    _, dump = J.archive_options(OPTIONS, str(tmp_path))
    assert dump is not None
    _dump(dump, _class_path())
    Path(f"{dump}.cp").unlink()  # the session never came up to say it
    options, again = J.archive_options(OPTIONS, str(tmp_path))
    assert again is not None and options.startswith("-XX:ArchiveClassesAtExit=") and not dump.exists()


def test_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICESQL_JVM_ARCHIVE", "0")
    assert J.archive_options(OPTIONS, str(tmp_path)) == ("", None)
    assert not any(tmp_path.iterdir())
