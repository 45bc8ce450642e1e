"""Fixtures for the catalog store tests: a fresh store file in a private temp directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from catalog_store import CatalogStore


@pytest.fixture(autouse=True)
def _no_ambient_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's own ICESQL_SECRET_KEY must not change what these tests see.
    monkeypatch.delenv("ICESQL_SECRET_KEY", raising=False)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "home" / "catalog.db"


@pytest.fixture
def store(store_path: Path) -> Iterator[CatalogStore]:
    with CatalogStore(store_path) as s:
        yield s
