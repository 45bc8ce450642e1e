"""Spark's Python workers import pyspark from its installed package, not from ``pyspark.zip``.

Spark puts pyspark's bundled zips first on every Python worker's ``PYTHONPATH``; Python cannot
cache the bytecode of what it imports from a zip, so every worker process compiled pyspark again
(benchmarks/README.md, "seventh look"). ``worker_python`` is the launcher ``get_spark`` starts
local workers with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyspark
import pytest

from icesql.engine.backends.spark.session import worker_python

LIB = Path(pyspark.__file__).parent / "python" / "lib"
ZIPS = [str(LIB / "pyspark.zip"), *sorted(str(p) for p in LIB.glob("py4j-*-src.zip"))]

pytestmark = pytest.mark.skipif(not (LIB / "pyspark.zip").is_file(), reason="this pyspark has no bundled pyspark.zip")

PROBE = "import os, sys, pyspark; print(pyspark.__file__); print(os.environ['PYTHONPATH'])"


def test_the_launcher_takes_only_pysparks_zips_off_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    launcher = worker_python()
    assert launcher != sys.executable and os.access(launcher, os.X_OK)
    assert launcher.startswith(str(tmp_path / "cache" / "icesql"))
    other = tmp_path / "my dir" / "lib.zip"  # a user's entry, spaces included, stays in its place
    path = os.pathsep.join([ZIPS[0], str(other), *ZIPS[1:], "/opt/extra"])
    out = subprocess.run([launcher, "-c", PROBE], env={**os.environ, "PYTHONPATH": path},
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == pyspark.__file__  # the installed package, not .../pyspark.zip/pyspark/__init__.py
    assert out[1] == f"{other}{os.pathsep}/opt/extra"
    # what Spark hands the plain interpreter: pyspark from the zip
    plain = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, "PYTHONPATH": path},
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert "pyspark.zip" in plain[0]
    assert worker_python() == launcher  # written once, then reused


def test_no_launcher_where_it_cannot_be_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert worker_python() == sys.executable


@pytest.mark.spark
def test_a_local_sessions_workers_import_pyspark_from_its_package(spark: Any) -> None:
    def where(_: Any) -> Any:
        import pyspark as worker_pyspark

        yield worker_pyspark.__file__

    found = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    assert found == [pyspark.__file__]


def test_a_later_local_session_keeps_the_launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the first local session sets PYSPARK_PYTHON to the launcher; a session started after it
    # stopped must still use it, and a Python the user chose is not replaced by the launcher
    from icesql.engine.backends.spark.session import _local_worker_python

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    launcher = worker_python()
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert _local_worker_python() == launcher
    monkeypatch.setenv("PYSPARK_PYTHON", launcher)
    assert _local_worker_python() == launcher
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/other/python3")
    assert _local_worker_python() == sys.executable
