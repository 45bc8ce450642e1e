"""Fixtures for the end-to-end tests: SQL text → ``icesql.Session`` → Spark → Iceberg.

* ``weed`` comes from ``tests/conftest.py`` (one ``weed mini`` for the whole run).
* ``spark``: the one local Spark session of the run (``local[2]``, 2 shuffle partitions, UTC);
  every module hands it to ``icesql.Session(spark=...)``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.pipeline_helpers import spark_for_tests


@pytest.fixture(scope="module")
def spark() -> Any:
    # getOrCreate: every module of the run gets the same session (the machine has 2 cores)
    return spark_for_tests()
