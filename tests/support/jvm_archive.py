"""Before a run of tests that start Spark: the driver JVM's class archive (``jvm_archive``).

A user's first Spark run makes it as its JVM exits; a test run starts dozens of driver JVMs
(every ``icesql run`` a test starts, each restart of the crash tests, the shared session), so it
is made first, by the README's quick start run once in a scratch directory (about 20 s), and
each of those JVMs then maps it rather than loading its classes (``conftest``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ensure_archive() -> str:
    """What was done, for one line of the test run's header."""
    from icesql.engine.backends.spark.jvm_archive import archive_options, wait_for_dumps
    from icesql.engine.backends.spark.session import driver_java_options

    options = driver_java_options()
    wait_for_dumps(timeout=60)  # one a JVM of an earlier run may still write
    used, dump = archive_options(options)
    if dump is None:
        return "in use" if used else "none (ICESQL_JVM_ARCHIVE=0, or no java)"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="icesql-archive-") as scratch:
        examples = Path(scratch) / "examples"
        shutil.copytree(ROOT / "examples", examples, ignore=shutil.ignore_patterns("warehouse"))
        # on Spark: a run --once of the quick start otherwise runs without it (local_query)
        env = dict(os.environ, PYTHONPATH=str(ROOT), ICESQL_LOCAL_RUN="0")
        env.pop("ICESQL_HOME", None)
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "icesql",
                "--home",
                str(Path(scratch) / "home"),
                "run",
                str(examples / "quickstart.sql"),
                "--once",
                "--spark-master",
                "local[2]",
                "--conf",
                "spark.ui.enabled=false",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=scratch,
            timeout=600,
        )
        if p.returncode != 0:
            return f"not made: the quick start failed ({p.stderr.strip().splitlines()[-1:]})"
        wait_for_dumps(timeout=120)
    used, _ = archive_options(options)  # checks the dump and makes it the archive
    took = time.monotonic() - started
    return f"made in {took:.0f} s" if used.startswith("-XX:SharedArchiveFile") else f"not made ({took:.0f} s)"
