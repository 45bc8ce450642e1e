"""Fixtures of the conformance suite: the run's one local Spark session, a noida-db broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.pipeline_helpers import spark_for_tests


@pytest.fixture(scope="module")
def spark() -> Any:
    # getOrCreate: every module of the run gets the same session (the machine has 2 cores)
    return spark_for_tests()


@pytest.fixture(autouse=True)
def _local_run_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process executor is chosen by default; an environment turning it off would make
    every in-process run a Spark one (the runs assert where they ran, so they would fail)."""
    monkeypatch.delenv("ICESQL_LOCAL_RUN", raising=False)


@pytest.fixture(scope="module")
def noida(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A noida-db shared by the module's tests (each uses topics of its own)."""
    from tests.support.kafka import Broker, BrokerUnavailable, missing_reason

    reason = missing_reason("noida")
    if reason:
        pytest.skip(reason)
    broker = Broker("noida", Path(tmp_path_factory.mktemp("noida")))
    try:
        broker.start()
    except BrokerUnavailable as e:
        broker.stop()
        pytest.fail(f"the noida broker did not start: {e}")
    try:
        yield broker
    finally:
        broker.stop()
