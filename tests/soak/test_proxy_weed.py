"""The fault proxy between real clients and ``weed mini``: pyiceberg's ``RestCatalog`` (OAuth2
through the proxy too) and pyarrow's S3 filesystem (SigV4 signed for the proxy's address, which
weed accepts). Each fault surfaces as the client error icesql has to live with, and the service
comes back after ``clear()``.

What these tests pin down about the clients, as icesql configures them today:

* pyiceberg's REST client has no read timeout: a blackholed catalog call blocks until the
  connection is reset (it would block for ever);
* a REST call whose connection is reset fails
  (``('Connection aborted.', ConnectionResetError(...))``); requests does not retry it;
* a REST response cut inside its headers reaches pyiceberg as an empty body and fails as a
  pydantic ``ValidationError`` ("Invalid JSON"), not as a connection error;
* pyarrow's S3 client retries on its own (a reset pooled connection goes unnoticed) and has
  timeouts; its errors are ``OSError`` with a curl code.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
import requests

from tests.support.faultproxy import FaultProxy
from tests.support.weed import WeedServer

pytestmark = pytest.mark.weed

BUCKET = "faultproxy-smoke"


def catalog(weed: WeedServer, proxy: FaultProxy) -> Any:
    return weed.rest_catalog(proxy.url("rest"), name="through-proxy", s3=False)


def s3fs(weed: WeedServer, proxy: FaultProxy) -> Any:
    import pyarrow.fs as pafs

    return pafs.S3FileSystem(
        access_key=weed.access_key,
        secret_key=weed.secret_key,
        region=weed.region,
        endpoint_override=proxy.url("s3"),
        scheme="http",
        force_virtual_addressing=False,
        connect_timeout=0.5,
        request_timeout=0.5,
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=2),
    )


def test_rest_catalog_through_the_proxy(weed: WeedServer, proxy: FaultProxy) -> None:
    from pydantic import ValidationError

    ns = f"proxy_{uuid.uuid4().hex[:8]}"
    cat = catalog(weed, proxy)  # the OAuth2 token comes through the proxy too
    cat.create_namespace(ns)
    assert (ns,) in cat.list_namespaces()

    proxy.latency(0.2, only="rest")
    t0 = time.monotonic()
    assert (ns,) in cat.list_namespaces()
    assert time.monotonic() - t0 >= 0.4  # request and response each wait
    proxy.clear()

    # a reset while a call is under way fails it (requests does not retry), the next call works
    proxy.latency(1.0, direction="down", only="rest")
    threading.Timer(0.3, proxy.reset_connections, kwargs={"only": "rest"}).start()
    with pytest.raises(requests.ConnectionError, match="Connection aborted"):
        cat.list_namespaces()
    proxy.clear()
    assert (ns,) in cat.list_namespaces()

    # refused: a new catalog (config + token) cannot even start
    proxy.drop_new(30, only="rest")
    with pytest.raises(requests.ConnectionError, match="Max retries exceeded.*Connection refused"):
        catalog(weed, proxy)
    proxy.clear()

    # a response cut inside its headers: an empty body, which pyiceberg fails to parse
    proxy.cut_response_after(20, only="rest")
    with pytest.raises(ValidationError, match="Invalid JSON"):
        cat.list_namespaces()
    proxy.clear()
    assert (ns,) in cat.list_namespaces()

    # blackholed: the call blocks (no read timeout) until the connection goes away
    result: dict[str, Any] = {}

    def call() -> None:
        try:
            result["ok"] = cat.list_namespaces()
        except BaseException as e:  # noqa: BLE001 - the test looks at it
            result["error"] = e

    proxy.blackhole(120, only="rest")
    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(2.0)
    assert t.is_alive(), f"expected the catalog call to hang in the blackhole, got {result}"
    proxy.clear()
    proxy.reset_connections(only="rest")
    t.join(5.0)
    assert not t.is_alive()
    assert isinstance(result.get("error"), requests.ConnectionError)

    assert (ns,) in cat.list_namespaces()  # clear() gave the service back
    cat.drop_namespace(ns)
    stats = proxy.snapshot()["rest"]
    assert (
        stats["connections_reset"] >= 2
        and stats["responses_cut"] == 1
        and stats["blackholed_connections"] >= 1
    )


def test_s3_through_the_proxy(weed: WeedServer, proxy: FaultProxy) -> None:
    client = weed.s3_client()
    try:
        client.create_bucket(Bucket=BUCKET)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    key = f"{BUCKET}/smoke/{uuid.uuid4().hex}.bin"
    body = bytes(range(256)) * 2000  # 512000 bytes
    fs = s3fs(weed, proxy)
    with fs.open_output_stream(key) as out:
        out.write(body)
    assert fs.open_input_file(key).read() == body
    before = proxy.snapshot()["s3"]
    assert before["bytes_up"] >= len(body) and before["bytes_down"] >= len(body)

    proxy.latency(0.1, only="s3")
    assert fs.open_input_file(key).read() == body
    proxy.clear()

    # a reset pooled connection is retried by the S3 client on its own
    proxy.reset_connections(only="s3")
    assert fs.open_input_file(key).read() == body

    # every response cut short: a partial transfer error (after the client's own retries)
    proxy.cut_response_after(1000, count=10, only="s3")
    with pytest.raises(OSError, match="curlCode: 18|partial|NETWORK_CONNECTION"):
        fs.open_input_file(key).read()
    proxy.clear()

    # refused: a new client cannot connect
    proxy.drop_new(30, only="s3")
    with pytest.raises(OSError, match="curlCode: 7|onnect"):
        s3fs(weed, proxy).open_input_file(key).read()
    proxy.clear()

    # blackholed: the client's request timeout fires
    proxy.blackhole(30, only="s3")
    t0 = time.monotonic()
    with pytest.raises(OSError, match="curlCode: 28|Timeout"):
        s3fs(weed, proxy).open_input_file(key).read()
    assert time.monotonic() - t0 < 20
    proxy.clear()

    assert s3fs(weed, proxy).open_input_file(key).read() == body
    client.delete_object(Bucket=BUCKET, Key=key.split("/", 1)[1])
