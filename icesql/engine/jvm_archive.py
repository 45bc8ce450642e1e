"""A class-data-sharing (CDS) archive of the driver JVM's classes, made once per install.

A local Spark driver loads some 15,000 classes from ~250 jars as it starts, and parses and
verifies each one again in every process: on this 2-core machine that was most of the 10-20 s
before a session answers and of the first query's planning. The JVM can keep the classes it
loaded in an archive (``-XX:ArchiveClassesAtExit``, a standard feature of Java 13+) and map it
on the next start (``-XX:SharedArchiveFile``) instead (benchmarks/README.md, "Start-up").

How it is kept, under the user's cache directory (``settings.user_cache_dir``)::

    spark-cds-<key>.jsa              the archive, used by every driver JVM icesql starts
    spark-cds-<key>.jsa.<pid>.dump   written by the JVM of process <pid> as it exits (no archive yet)
    spark-cds-<key>.jsa.bad          an archive that failed its check: none is made again for <key>

``<key>`` covers what an archive is only valid for: the ``java`` that runs it, the Spark jars
(names, sizes, times) and the JVM options icesql gives. The first driver with no archive dumps
one as its JVM exits (after icesql has exited: it costs the user nothing). The next start checks
a dump with a ``java -Xshare:on -version`` run on the same class path (a dump cut short by a kill
makes a JVM crash instead of falling back, so nothing unchecked is ever used; the class path is
the one the dumping JVM reported, ``<dump>.cp``) and then renames it
to the archive. The JVM falls back to loading classes itself when an archive does not match
(``-Xshare:auto``), so a class path that differs (``spark.driver.extraClassPath``) costs only
the speed. ``ICESQL_JVM_ARCHIVE=0`` turns it off.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

log = logging.getLogger("icesql.spark")

QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"  # never a CDS warning on the user's terminal
SETTLED = 30.0  # seconds since a dump last changed before it is checked (its JVM may still write it)
CHECK_TIMEOUT = 60.0


def _spark_home() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).parent


def _java() -> str | None:
    """The ``java`` spark-submit starts: ``$JAVA_HOME/bin/java``, else the one on ``PATH``."""
    from icesql.settings import JAVA_HOME

    home = JAVA_HOME.get()
    if home:
        java = os.path.join(home, "bin", "java")
        return java if os.access(java, os.X_OK) else None
    return shutil.which("java")


def _key(java: str, spark_home: Path, options: str) -> str:
    h = hashlib.sha256()
    real = os.path.realpath(java)
    st = os.stat(real)
    h.update(f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0{options}\0{spark_home}\0".encode())
    for entry in sorted(os.scandir(spark_home / "jars"), key=lambda e: e.name):
        s = entry.stat()
        h.update(f"{entry.name}\0{s.st_size}\0{s.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def archive_options(options: str, cache_dir: str | None = None) -> tuple[str, Path | None]:
    """JVM options that use this install's archive (or, with none yet, dump one at exit), for a
    driver JVM started with ``options`` ("" when there is none to use or make), and the dump the
    JVM will write (then ``remember_class_path`` once it runs)."""
    from icesql.settings import JVM_ARCHIVE, user_cache_dir

    if not JVM_ARCHIVE.enabled():
        return "", None
    try:
        java = _java()
        spark_home = _spark_home()
        if java is None or spark_home is None or not (spark_home / "jars").is_dir():
            return "", None
        directory = Path(cache_dir or user_cache_dir())
        archive = directory / f"spark-cds-{_key(java, spark_home, options)}.jsa"
        if archive.is_file():
            for late in directory.glob(f"{archive.name}.*.dump"):  # JVMs that started before it was made
                if time.time() - late.stat().st_mtime > SETTLED:
                    _forget(late)
            return f"-XX:SharedArchiveFile={archive} {QUIET}", None
        if Path(f"{archive}.bad").exists():
            return "", None
        dumps = sorted(directory.glob(f"{archive.name}.*.dump"))
        for dump in dumps:
            if time.time() - dump.stat().st_mtime < SETTLED:
                continue
            if _usable(java, dump, options):
                os.replace(dump, archive)
                for other in directory.glob(f"{archive.name}.*.dump*"):
                    other.unlink(missing_ok=True)
                log.debug("JVM class archive %s made", archive)
                return f"-XX:SharedArchiveFile={archive} {QUIET}", None
            checked = Path(f"{dump}.cp").exists()  # on the class path it was made with: unusable
            _forget(dump)
            if checked:
                Path(f"{archive}.bad").touch()
                log.debug("JVM class archive dump %s failed its check; none for this install", dump)
                return "", None
        if any(directory.glob(f"{archive.name}.*.dump")):
            return "", None  # one is being written
        directory.mkdir(parents=True, exist_ok=True)
        dump = Path(f"{archive}.{os.getpid()}.dump")
        return f"-XX:ArchiveClassesAtExit={dump} {QUIET}", dump
    except OSError:
        log.debug("no JVM class archive", exc_info=True)
        return "", None


def remember_class_path(dump: Path, class_path: str) -> None:
    """The class path of the JVM that will write ``dump`` (its check runs on the same one)."""
    try:
        Path(f"{dump}.cp").write_text(class_path, encoding="utf-8")
    except OSError:
        log.debug("cannot write %s.cp", dump, exc_info=True)


def _forget(dump: Path) -> None:
    dump.unlink(missing_ok=True)
    Path(f"{dump}.cp").unlink(missing_ok=True)


def _usable(java: str, dump: Path, options: str) -> bool:
    """Whether a JVM on the dumping JVM's class path maps ``dump`` (``-Xshare:on`` fails rather
    than fall back); False when that class path is not known."""
    try:
        class_path = Path(f"{dump}.cp").read_text(encoding="utf-8")
    except OSError:
        return False
    cmd = [
        java,
        *options.split(),
        f"-XX:SharedArchiveFile={dump}",
        "-Xshare:on",
        "-cp",
        class_path,
        "-version",
    ]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=CHECK_TIMEOUT, cwd=dump.parent)
    except (OSError, subprocess.TimeoutExpired):
        return False
    for crash in dump.parent.glob("hs_err_pid*.log"):  # a JVM that crashed on it leaves one here
        if crash.stat().st_mtime >= dump.stat().st_mtime:
            crash.unlink(missing_ok=True)
    return p.returncode == 0 and "sharing" in p.stderr


__all__ = ["archive_options", "remember_class_path"]
