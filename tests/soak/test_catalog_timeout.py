"""A REST catalog that stops answering fails a call within ICESQL_CATALOG_TIMEOUT instead of
hanging the sink for ever (issue 16: the short soak's blackhole stalled a sink for 300 s).
Real parts: weed mini's REST catalog behind the fault proxy, icesql's own catalog loading
(without the timeout the call hangs until the blackhole ends and then for good: the test fails)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from icesql.engine.connections.catalogs import load_catalog
from icesql.engine.connections.failures import is_transient
from icesql.errors import ExecutionError
from icesql.plan import CatalogConnectionPlan, CatalogType, RestAuth, SecretName
from tests.soak.test_proxy_weed import catalog as through
from tests.support.faultproxy import FaultProxy
from tests.support.weed import WeedServer

pytestmark = pytest.mark.weed


def lake(weed: WeedServer, proxy: FaultProxy) -> CatalogConnectionPlan:
    """icesql's connection ``lake`` to weed's REST catalog through the proxy, OAuth2 client
    credentials with the secret ``pw`` (resolve it to ``weed.secret_key``)."""
    return CatalogConnectionPlan(
        "lake",
        CatalogType.REST,
        uri=proxy.url("rest"),
        warehouse=weed.table_bucket,
        auth=RestAuth.OAUTH2,
        user=weed.access_key,
        password=SecretName("pw"),
    )


def test_a_blackholed_catalog_call_fails_within_the_timeout(
    weed: WeedServer, proxy: FaultProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """icesql's catalog loading (``catalogs.load_catalog``) applies the timeout of the settings."""
    monkeypatch.setenv("ICESQL_CATALOG_TIMEOUT", "2")
    catalog = load_catalog(lake(weed, proxy), aws=None, secrets=lambda _: weed.secret_key, home=tmp_path)
    ns = f"timeout_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(ns)
    proxy.blackhole(20)
    started = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - requests' timeout, as pyiceberg passes it on
        catalog.list_tables(ns)
    assert time.monotonic() - started < 10
    proxy.clear()
    time.sleep(0.2)
    assert through(weed, proxy).list_tables(ns) == []  # the catalog answers again afterwards


def test_a_catalog_that_hangs_at_connect_fails_within_the_timeout(
    weed: WeedServer, proxy: FaultProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The constructor's own requests (the config, the OAuth2 token) have the timeout too: a
    catalog blackholed before icesql connects fails in one line naming the connection, transient,
    instead of hanging the sink's start (pyiceberg sends them before any session can be wrapped)."""
    monkeypatch.setenv("ICESQL_CATALOG_TIMEOUT", "2")
    proxy.blackhole(20)
    started = time.monotonic()
    with pytest.raises(ExecutionError) as info:
        load_catalog(lake(weed, proxy), aws=None, secrets=lambda _: weed.secret_key, home=tmp_path)
    assert time.monotonic() - started < 10
    proxy.clear()
    assert info.value.message.startswith("catalog connection 'lake'"), info.value.message
    assert "\n" not in info.value.message and weed.secret_key not in info.value.render()
    assert is_transient(info.value), info.value.message
