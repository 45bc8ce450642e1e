"""The driver JVM icesql starts runs the serial garbage collector.

On the Arrow path the driver only coordinates, yet with the JVM's default collector (G1) its heap
grew with the garbage of a long write to 1.2-2.0 GB of RSS after a 10M-row append (0.77 GB with
the serial collector, the write as fast: benchmarks/README.md, "tenth look"). A user's own
``spark.driver.extraJavaOptions`` replaces icesql's whole, as it did before for the logging.
The driver also maps the class archive of Spark's classes (``jvm_archive``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icesql.engine.backends.spark.session import DRIVER_GC, driver_java_options


def test_the_options_name_the_serial_collector_and_the_quiet_logging() -> None:
    quiet = driver_java_options("ERROR").split()
    assert quiet[0] == DRIVER_GC == "-XX:+UseSerialGC"
    assert len(quiet) == 2 and quiet[1].startswith("-Dlog4j2.configurationFile=file:")
    assert quiet[1].endswith("log4j2.properties")
    assert Path(quiet[1].split("file:", 1)[1]).is_file(), "the logging profile ships beside the session module"
    # -v (DEBUG) keeps Spark's own logging profile, and the collector
    assert driver_java_options("debug").split() == [DRIVER_GC]


@pytest.mark.spark
def test_the_sessions_driver_jvm_collects_with_the_serial_collector(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = {beans.get(i).getName() for i in range(beans.size())}
    assert names == {"Copy", "MarkSweepCompact"}  # the serial collector's young and old generations
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    quiet = driver_java_options("ERROR")
    assert f" {quiet} " in f"{options} "  # after Spark's own module flags
    # then the class archive the test run made first (conftest), which the JVM maps
    archive = options.split(quiet, 1)[1].split()
    assert archive[0].startswith("-XX:SharedArchiveFile=") and archive[0].endswith(".jsa"), options
    assert "sharing" in jvm.java.lang.System.getProperty("java.vm.info")


@pytest.mark.spark
def test_the_driver_jvm_writes_to_this_process_never_to_its_callers_output(spark: Any) -> None:
    """The driver JVM's standard output and error are pipes this process reads and passes on,
    never the caller's own: a driver JVM may outlive icesql (the archive maker's writes the class
    archive as it exits, 10-15 s), and a JVM holding the caller's output kept a
    caller reading it (``subprocess.run(capture_output=True)``, CI, cron) waiting for that
    (benchmarks/README.md, "The first Spark run")."""
    import os

    pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    read_here = set()  # the pipes this process holds open for reading
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            flags = next(x for x in open(f"/proc/self/fdinfo/{fd}").read().splitlines() if x.startswith("flags:"))
        except (OSError, StopIteration):
            continue
        if int(flags.split()[1], 8) & 3 == os.O_RDONLY:
            read_here.add(target)
    for fd in (1, 2):
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        assert target.startswith("pipe:"), (fd, target)
        assert target in read_here, f"the JVM's fd {fd} ({target}) is not read by this process"
