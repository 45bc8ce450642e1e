"""Kafka-protocol brokers for the KAFKA source tests (see tests/support/kafka.py and the measured
facts in its docstring): every test in this directory is marked ``kafka``.

- ``kafka_broker``: one broker per test module, parametrized over noida-db and tansu (ids
  'noida' / 'tansu'); tests sharing it use their own topic names (``topic_name``).
- ``tansu_s3``: tansu on a bucket of the session's weed mini (data survives ``restart()``).
- ``noida_broker``: a noida-db of its own per test (for restarts and crashes).

A missing binary skips with the pip package to install.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.kafka import Broker, BrokerUnavailable, S3Storage, missing_reason
from tests.support.require import missing

KAFKA_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if KAFKA_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.kafka)


def _started(kind: str, workdir: Path, **kwargs: Any) -> Broker:
    reason = missing_reason(kind)
    if reason:
        missing(reason)
    broker = Broker(kind, workdir, **kwargs)
    try:
        return broker.start()
    except BrokerUnavailable as e:
        broker.stop()
        pytest.fail(f"the {kind} broker did not start: {e}")


@pytest.fixture(scope="module", params=["noida", "tansu"], ids=["noida", "tansu"])
def kafka_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Broker]:
    """A running broker (module scope; ``.kind`` says which). Do not restart it: plain tansu
    loses everything on a restart, and other tests of the module share it."""
    broker = _started(request.param, tmp_path_factory.mktemp(f"kafka-{request.param}"))
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def noida(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A noida-db shared by the module's tests (each uses topics of its own; not to be restarted)."""
    broker = _started("noida", tmp_path_factory.mktemp("noida"))
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def noida_broker(tmp_path: Path) -> Iterator[Broker]:
    """A noida-db of this test's own, free to be killed and restarted."""
    broker = _started("noida", tmp_path / "noida")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def tansu_s3(weed: Any, tmp_path: Path) -> Iterator[Broker]:
    """tansu storing in a fresh bucket of the session's weed mini: ``restart()`` keeps data."""
    if missing_reason("tansu-s3"):
        missing(missing_reason("tansu-s3") or "")
    broker = _started("tansu-s3", tmp_path / "tansu-s3", s3=S3Storage.on_weed(weed))
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test (brokers are shared by the tests of a module)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:120]
    return f"{base}-{uuid.uuid4().hex[:6]}"
