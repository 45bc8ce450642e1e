"""A class-data-sharing (CDS) archive of the driver JVM's classes, made once per install.

A local Spark driver loads some 15,000 classes from ~250 jars as it starts, and parses and
verifies each one again in every process: on this 2-core machine that was most of the 10-20 s
before a session answers and of the first query's planning. The JVM can keep the classes it
loaded in an archive (``-XX:ArchiveClassesAtExit``, a standard feature of Java 13+) and map it
on the next start (``-XX:SharedArchiveFile``) instead (benchmarks/README.md, "Start-up").

How it is kept, under the user's cache directory (``settings.user_cache_dir``)::

    spark-cds-<key>.jsa                   the archive, used by every driver JVM icesql starts
    spark-cds-<key>.jsa.making            the archive maker's process id, while it runs
    spark-cds-<key>.jsa.making.log        what the last maker's run said (for a look when none is made)
    spark-cds-<key>.jsa.making.<pid>.busy a run (process <pid>) started a driver while the maker works
    spark-cds-<key>.jsa.<pid>.dump        written by the driver JVM of process <pid> as it exits
    spark-cds-<key>.jsa.<pid>.dump.json   that JVM's class path and process id, once it runs
    spark-cds-<key>.jsa.bad               a dump failed its check, or the maker made none: none
                                          is made again for <key>

``<key>`` covers what an archive is only valid for: the ``java`` that runs it, the Spark jars
(names, sizes, times) and the JVM options icesql gives. **No user's run makes it**: a JVM that
dumps its classes as it exits is slower all through its run (1.04-1.58x in four pairs of runs,
benchmarks/README.md "The first Spark run"), so the first driver with no archive runs without
one and starts the **archive maker** (``archive_maker``): a detached process of the lowest
priority that waits for the run that started it to end and for a quiet machine, then runs a
small sink on Spark in a scratch home with ``ICESQL_JVM_ARCHIVE=dump`` (its driver JVM dumps as
it exits), checks the dump and makes it the archive. A run that starts a driver meanwhile runs
without one, starts no second maker, and leaves a ``busy`` note: the maker kills its own run at
once and waits for that process to exit (two cores share their caches: even an idle-class
maker slowed a run beside it by 60 %).

A dump is checked with a ``java -Xshare:on -version`` run on the dumping JVM's class path once
that JVM has exited - a dump cut short by a kill makes a JVM crash instead of falling back, so
nothing unchecked is ever used - and renamed to the archive. The JVM falls back to loading
classes itself when an archive does not match (``-Xshare:auto``), so a class path that differs
(``spark.driver.extraClassPath``) costs only the speed. ``ICESQL_JVM_ARCHIVE=0`` turns it off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("icesql.spark")

QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"  # never a CDS warning on the user's terminal
ORPHANED = 600.0  # seconds after which a dump whose driver never said which JVM writes it is dropped
STARTING = 60.0  # seconds a maker's lock without its process id yet counts as a maker starting
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


def archive_path(options: str, cache_dir: str | None = None) -> Path | None:
    """Where this install's archive for a driver JVM started with ``options`` is kept (None: no
    ``java`` or no Spark jars to make one of)."""
    from icesql.settings import user_cache_dir

    java = _java()
    spark_home = _spark_home()
    if java is None or spark_home is None or not (spark_home / "jars").is_dir():
        return None
    return Path(cache_dir or user_cache_dir()) / f"spark-cds-{_key(java, spark_home, options)}.jsa"


def archive_options(
    options: str, cache_dir: str | None = None, *, may_make: bool = False
) -> tuple[str, Path | None]:
    """JVM options that use this install's archive for a driver JVM started with ``options``
    ("" when there is none yet), and the dump the JVM will write (only under
    ``ICESQL_JVM_ARCHIVE=dump``, the archive maker's own run; then ``remember_class_path`` once
    it runs). With no archive and no maker at work, ``may_make`` starts one (``start_maker``):
    the driver's options are the ones the maker's run has (icesql's own, not a ``--verbose``
    run's: a maker for those would make an archive no run of theirs maps, every run)."""
    from icesql.settings import JVM_ARCHIVE

    if not JVM_ARCHIVE.enabled():
        return "", None
    try:
        java = _java()
        archive = archive_path(options, cache_dir)
        if java is None or archive is None:
            return "", None
        directory = archive.parent
        if archive.is_file():
            forget_dead_dumps(archive)  # of JVMs that started before it was made
            return f"-XX:SharedArchiveFile={archive} {QUIET}", None
        if Path(f"{archive}.bad").exists():
            return "", None
        state = _settle(java, archive, options)
        if state == "made":
            return f"-XX:SharedArchiveFile={archive} {QUIET}", None
        if state == "bad":
            return "", None
        if (JVM_ARCHIVE.get() or "").lower() == "dump":  # the maker's run: this JVM dumps
            if state == "writing":
                return "", None
            directory.mkdir(parents=True, exist_ok=True)
            dump = Path(f"{archive}.{os.getpid()}.dump")
            return f"-XX:ArchiveClassesAtExit={dump} {QUIET}", dump
        if cache_dir is None:
            if _maker_running(archive):  # it gives way to this run until this process exits
                _busy_note(archive, os.getpid()).touch()
            elif state == "none" and may_make:
                start_maker(archive)
        return "", None
    except (OSError, ValueError):
        log.debug("no JVM class archive", exc_info=True)
        return "", None


def _settle(java: str, archive: Path, options: str) -> str:
    """Look at the dumps of ``archive`` under way or left: "made" (one passed its check and is
    the archive now), "bad" (one failed it: none again), "writing" (a JVM writes one), "none"."""
    writing = False
    for dump, ticket in _dumps(archive):
        if not ticket:  # its session never came up (or is coming up now)
            if not dump.exists() or time.time() - dump.stat().st_mtime > ORPHANED:
                _forget(dump)
            writing = writing or dump.exists()
            continue
        if alive(int(ticket.get("jvm_pid", 0))):
            writing = True  # the JVM runs (or writes it as it exits)
            continue
        if not dump.exists():  # the JVM was killed: nothing was written
            _forget(dump)
            continue
        if _usable(java, dump, options, ticket.get("class_path", "")):
            os.replace(dump, archive)
            for other, _ in _dumps(archive):
                if other != dump:
                    _forget(other)
            _forget(dump)
            log.debug("JVM class archive %s made", archive)
            return "made"
        _forget(dump)
        Path(f"{archive}.bad").touch()
        log.debug("JVM class archive dump %s failed its check; none for this install", dump)
        return "bad"
    return "writing" if writing else "none"


def _busy_note(archive: Path, pid: int | str) -> Path:
    """The note a run (process ``pid``; ``"*"``: any, a glob) that started a driver while the
    maker works leaves."""
    return Path(f"{archive}.making.{pid}.busy")


def runs_waiting(archive: Path) -> bool:
    """Whether a run that started a driver while the maker works still runs (its ``busy`` note;
    the notes of runs that have exited are dropped): the maker gives way to it until it exits."""
    waiting = False
    for note in archive.parent.glob(_busy_note(archive, "*").name):
        try:
            pid = int(note.name.rsplit(".", 2)[-2])
        except ValueError:
            pid = 0
        if alive(pid):
            waiting = True
        else:
            note.unlink(missing_ok=True)
    return waiting


def _maker_running(archive: Path) -> bool:
    """A maker holds ``<archive>.making`` (its process id; a lock not yet given one is a maker
    starting, for ``STARTING`` seconds); a lock left by a maker that died is dropped."""
    lock = Path(f"{archive}.making")
    try:
        text = lock.read_text(encoding="utf-8").strip()
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return False
    if (text and alive(int(text))) or (not text and age < STARTING):
        return True
    lock.unlink(missing_ok=True)
    return False


def start_maker(archive: Path) -> bool:
    """Start the archive maker for ``archive`` (``archive_maker``), detached and at the lowest
    priority, after the run of this process: it waits for this process to exit. Only one at a
    time (``<archive>.making``, taken with ``O_EXCL``)."""
    lock = Path(f"{archive}.making")
    archive.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    try:
        with open(f"{lock}.log", "wb") as out:
            p = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "icesql.engine.backends.spark.archive_maker",
                    str(archive),
                    "--after",
                    str(os.getpid()),
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # not in the caller's process group: no signal of its reaches it
                close_fds=True,
            )
        os.write(fd, str(p.pid).encode())
        log.debug("JVM class archive maker started (pid %d) for %s", p.pid, archive)
        return True
    except OSError:
        log.debug("the JVM class archive maker did not start", exc_info=True)
        lock.unlink(missing_ok=True)
        return False
    finally:
        os.close(fd)


def remember_class_path(dump: Path, class_path: str, jvm_pid: int) -> None:
    """The JVM that will write ``dump`` runs: its class path (the dump's check runs on the same
    one) and its process id (the dump is complete once that process has exited)."""
    try:
        tmp = Path(f"{dump}.json.tmp")
        tmp.write_text(json.dumps({"class_path": class_path, "jvm_pid": jvm_pid}), encoding="utf-8")
        os.replace(tmp, f"{dump}.json")
    except OSError:
        log.debug("cannot write %s.json", dump, exc_info=True)


def wait_for_dumps(cache_dir: str | None = None, timeout: float = 120.0, *, makers: bool = True) -> None:
    """Until no JVM that will write a dump under ``cache_dir``, and (``makers``) no archive
    maker, still runs (a set-up that wants the archive made before what follows: the next driver
    uses it; the maker itself waits only for its run's JVM)."""
    from icesql.settings import user_cache_dir

    directory = Path(cache_dir or user_cache_dir())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = []
        for ticket in directory.glob("spark-cds-*.dump.json"):
            try:
                pids.append(int(json.loads(ticket.read_text(encoding="utf-8")).get("jvm_pid", 0)))
            except (OSError, ValueError):
                continue
        locks = directory.glob("spark-cds-*.jsa.making") if makers else ()
        if not any(alive(p) for p in pids) and not any(
            _maker_running(Path(str(k)[: -len(".making")])) for k in locks
        ):
            return
        time.sleep(0.5)


def _dumps(archive: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Each dump of ``archive`` under way or left (``<archive>.<pid>.dump``), with its ticket."""
    out: dict[Path, dict[str, Any]] = {}
    for path in archive.parent.glob(f"{archive.name}.*.dump*"):
        name = path.name
        if name.endswith(".dump"):
            out.setdefault(path, {})
        elif name.endswith(".dump.json"):
            dump = path.with_name(name[: -len(".json")])
            try:
                out[dump] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                out.setdefault(dump, {})
    return sorted(out.items())


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie has exited)."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def forget_dead_dumps(archive: Path) -> None:
    """Drop the dumps of ``archive`` whose JVM has exited, written or not: the archive maker's,
    after it killed its run (a JVM killed while it dumped leaves a part of one, which must not
    reach the check: a dump that fails it stops any maker for the install)."""
    for dump, ticket in _dumps(archive):
        if not alive(int(ticket.get("jvm_pid", 0) or 0)):
            _forget(dump)


def _forget(dump: Path) -> None:
    for path in (dump, Path(f"{dump}.json"), Path(f"{dump}.json.tmp")):
        path.unlink(missing_ok=True)


def _usable(java: str, dump: Path, options: str, class_path: str) -> bool:
    """Whether a JVM on the dumping JVM's class path maps ``dump`` (``-Xshare:on`` fails rather
    than fall back)."""
    if not class_path:
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


__all__ = [
    "alive",
    "archive_options",
    "archive_path",
    "forget_dead_dumps",
    "remember_class_path",
    "start_maker",
    "wait_for_dumps",
]
