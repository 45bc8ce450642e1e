"""Fixtures of the engine tests."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.pipeline_helpers import spark_for_tests


@pytest.fixture(scope="module")
def spark() -> Any:
    # getOrCreate: every module of the run gets the same session (the machine has 2 cores)
    return spark_for_tests()
