"""Fixtures of the fault-injection tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.faultproxy import FaultProxy
from tests.support.weed import WeedServer


@pytest.fixture
def proxy(weed: WeedServer) -> Iterator[FaultProxy]:
    """A fault proxy in front of weed mini's S3 and REST ports (test_proxy.py has one of its own,
    in front of a local server)."""
    with FaultProxy(
        {"s3": ("127.0.0.1", weed.s3_port), "rest": ("127.0.0.1", weed.iceberg_port)}, seed=3
    ) as p:
        yield p
