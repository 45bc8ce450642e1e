"""A REST catalog that stops answering fails a call within ICESQL_CATALOG_TIMEOUT instead of
hanging the sink for ever (issue 16: the short soak's blackhole stalled a sink for 300 s).
Real parts: weed mini's REST catalog behind the fault proxy, icesql's own catalog loading."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from icesql.engine.pyiceberg_internals import set_request_timeout
from tests.support.faultproxy import FaultProxy
from tests.support.weed import WeedServer

pytestmark = pytest.mark.weed


@pytest.fixture
def proxy(weed: WeedServer) -> Iterator[FaultProxy]:
    with FaultProxy({"rest": ("127.0.0.1", weed.iceberg_port)}, seed=5) as p:
        yield p


def rest(weed: WeedServer, proxy: FaultProxy) -> Any:
    from pyiceberg.catalog.rest import RestCatalog

    return RestCatalog(
        "through-proxy",
        uri=proxy.url("rest"),
        warehouse=weed.table_bucket,
        credential=f"{weed.access_key}:{weed.secret_key}",
        **{"oauth2-server-uri": proxy.url("rest") + "/v1/oauth/tokens"},
    )


def test_a_blackholed_catalog_call_fails_within_the_timeout(weed: WeedServer, proxy: FaultProxy) -> None:
    catalog = rest(weed, proxy)
    set_request_timeout(catalog, 2.0)
    ns = f"timeout_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(ns)
    proxy.blackhole(20)
    started = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - requests' timeout, as pyiceberg passes it on
        catalog.list_tables(ns)
    assert time.monotonic() - started < 10
    proxy.clear()
    time.sleep(0.2)
    assert rest(weed, proxy).list_tables(ns) == []  # the catalog answers again afterwards
