"""Before a run of tests that start Spark: the driver JVM's class archive (``jvm_archive``).

A user's first Spark run starts the archive maker, which makes it after that run; a test run
starts dozens of driver JVMs (every ``icesql run`` a test starts, each restart of the crash
tests, the shared session), so it is made first, by the maker's own run in the foreground
(``archive_maker.make``, about 20 s), and each of those JVMs then maps it rather than loading
its classes (``conftest``)."""

from __future__ import annotations

import time


def ensure_archive() -> str:
    """What was done, for one line of the test run's header."""
    from icesql.engine.backends.spark.archive_maker import make
    from icesql.engine.backends.spark.jvm_archive import archive_options, archive_path, wait_for_dumps
    from icesql.engine.backends.spark.session import driver_java_options
    from icesql.settings import JVM_ARCHIVE

    options = driver_java_options()
    archive = archive_path(options)
    if not JVM_ARCHIVE.enabled() or archive is None:
        return "none (ICESQL_JVM_ARCHIVE=0, or no java)"
    wait_for_dumps(timeout=120)  # a maker or a JVM of an earlier run may still be at it
    used, _ = archive_options(options, str(archive.parent))  # adopts a dump that one left
    if used.startswith("-XX:SharedArchiveFile"):
        return "in use"
    started = time.monotonic()
    made = make(archive)
    took = time.monotonic() - started
    return f"made in {took:.0f} s" if made else f"not made ({took:.0f} s)"
