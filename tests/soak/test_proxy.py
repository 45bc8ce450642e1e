"""The fault proxy (``tests/support/faultproxy.py``) against a tiny local HTTP server: every fault
shows up as the error a client really gets, and ``clear()`` (or the end of the window) gives the
service back."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from tests.support.faultproxy import FaultProxy

BIG = bytes(range(256)) * 1024  # 256 KiB


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as HTTP client pools use it

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = BIG if self.path == "/big" else b"hello"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the proxy resets connections on purpose: no tracebacks on stderr


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    srv = _QuietServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def proxy(server: int) -> Iterator[FaultProxy]:
    with FaultProxy({"web": ("127.0.0.1", server)}, seed=11) as p:
        yield p


def get(proxy: FaultProxy, path: str = "/", timeout: float = 3.0) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port("web"), timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.read()
    finally:
        conn.close()


def test_passes_traffic_through(proxy: FaultProxy) -> None:
    assert get(proxy) == b"hello"
    assert get(proxy, "/big") == BIG
    with requests.Session() as s:
        r = s.post(proxy.url("web") + "/echo", data=b"x" * 100_000, timeout=5)
        assert r.content == b"x" * 100_000
    # the proxy's threads count a chunk after forwarding it: the client may have read the last
    # one before it is counted
    deadline = time.monotonic() + 5
    while True:
        stats = proxy.snapshot()["web"]
        if stats["bytes_down"] > len(BIG) + 100_000 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert stats["connections"] == 3
    assert stats["bytes_down"] > len(BIG) + 100_000 and stats["bytes_up"] > 100_000


def test_passes_traffic_through_on_descriptors_past_1024(proxy: FaultProxy) -> None:
    """A long test run holds many descriptors: the proxy's sockets then number past 1024, where
    select() raises (the pump thread died and its connection hung CI for 15 min); it polls."""
    import os

    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        assert get(proxy) == b"hello"
        assert get(proxy, "/big") == BIG
    finally:
        for fd in held:
            os.close(fd)


def test_latency_and_seeded_jitter(proxy: FaultProxy, server: int) -> None:
    proxy.latency(0.3, direction="down")
    t0 = time.monotonic()
    assert get(proxy) == b"hello"
    assert time.monotonic() - t0 >= 0.3
    proxy.clear()
    t0 = time.monotonic()
    get(proxy)
    assert time.monotonic() - t0 < 0.25
    # the same seed draws the same delays
    draws = []
    for _ in range(2):
        with FaultProxy({"web": ("127.0.0.1", server)}, seed=5) as p:
            p.latency(0.1, jitter=0.05)
            draws.append([p._delay(p._listeners["web"], "up") for _ in range(20)])
    assert draws[0] == draws[1] and len(set(draws[0])) > 1
    assert all(0.05 <= d <= 0.15 for d in draws[0])


def test_reset_connections_breaks_pooled_connections(proxy: FaultProxy) -> None:
    with requests.Session() as s:
        assert s.get(proxy.url("web"), timeout=3).content == b"hello"
        assert proxy.open_connections() == 1
        assert proxy.reset_connections() == 1
        # the pooled connection is dead: what requests (and so pyiceberg) reports
        with pytest.raises(requests.ConnectionError, match="Connection aborted|reset"):
            s.get(proxy.url("web"), timeout=3)
        assert s.get(proxy.url("web"), timeout=3).content == b"hello"  # a new connection works


def test_reset_in_the_middle_of_a_download(proxy: FaultProxy) -> None:
    proxy.latency(0.2, direction="down")
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port("web"), timeout=5)
    conn.request("GET", "/big")
    threading.Timer(0.3, proxy.reset_connections).start()
    with pytest.raises((ConnectionResetError, http.client.IncompleteRead, http.client.RemoteDisconnected)):
        resp = conn.getresponse()
        resp.read()
    conn.close()


def test_drop_new_refuses_then_recovers(proxy: FaultProxy) -> None:
    proxy.drop_new(0.8)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port("web")), timeout=1).close()
    with pytest.raises(requests.ConnectionError, match="refused"):
        requests.get(proxy.url("web"), timeout=2)
    time.sleep(1.0)
    assert get(proxy) == b"hello"


def test_drop_new_reset_mode(proxy: FaultProxy) -> None:
    proxy.drop_new(5, how="reset")
    with pytest.raises(requests.ConnectionError, match="Connection aborted|reset"):
        requests.get(proxy.url("web"), timeout=2)
    assert proxy.snapshot()["web"]["reset_on_accept"] >= 1
    proxy.clear()
    assert get(proxy) == b"hello"


def test_blackhole_drop_hangs_reads_and_kills_connections(proxy: FaultProxy) -> None:
    keep = http.client.HTTPConnection("127.0.0.1", proxy.port("web"), timeout=0.5)
    keep.request("GET", "/")
    assert keep.getresponse().read() == b"hello"
    proxy.blackhole(1.0)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        get(proxy, timeout=0.5)  # a new connection: accepted, never answered
    assert time.monotonic() - t0 >= 0.5
    with pytest.raises(TimeoutError):
        keep.request("GET", "/")
        keep.getresponse()
    time.sleep(0.8)
    assert get(proxy) == b"hello"  # after the window new connections work
    # ... but a connection that lost bytes in the hole stays silent (half-open)
    keep2 = keep
    with pytest.raises((TimeoutError, socket.timeout, http.client.HTTPException, OSError)):
        keep2.request("GET", "/")
        keep2.getresponse()
    keep.close()


def test_blackhole_stall_delivers_after_the_window(proxy: FaultProxy) -> None:
    proxy.blackhole(0.8, mode="stall")
    t0 = time.monotonic()
    assert get(proxy, timeout=5) == b"hello"
    assert time.monotonic() - t0 >= 0.7


def test_cut_response_after(proxy: FaultProxy) -> None:
    proxy.cut_response_after(1000, count=2)
    for _ in range(2):
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port("web"), timeout=3)
        conn.request("GET", "/big")
        resp = conn.getresponse()
        with pytest.raises(http.client.IncompleteRead) as info:
            resp.read()
        assert len(info.value.partial) < 1000
        conn.close()
    assert get(proxy, "/big") == BIG  # count=2: the third response is whole
    assert proxy.snapshot()["web"]["responses_cut"] == 2
    # requests (pyiceberg's client) sees the truncated body as a ChunkedEncodingError / ConnectionError
    proxy.cut_response_after(50, reset=True)
    with pytest.raises((requests.ConnectionError, requests.exceptions.ChunkedEncodingError)):
        requests.get(proxy.url("web") + "/big", timeout=3).content  # noqa: B018
    # cut inside the headers: no valid response at all
    proxy.cut_response_after(5)
    with pytest.raises(requests.ConnectionError, match="Connection aborted|RemoteDisconnected|BadStatusLine"):
        requests.get(proxy.url("web"), timeout=3)


def test_clear_restores_service(proxy: FaultProxy) -> None:
    proxy.latency(5)
    proxy.blackhole(60)
    proxy.drop_new(60, how="reset")
    proxy.cut_response_after(1, count=100)
    proxy.clear()
    assert get(proxy, "/big") == BIG


def test_only_targets_one_upstream(server: int) -> None:
    with FaultProxy({"a": ("127.0.0.1", server), "b": ("127.0.0.1", server)}) as p:
        p.drop_new(30, only="a")
        with pytest.raises(requests.ConnectionError):
            requests.get(p.url("a"), timeout=2)
        assert requests.get(p.url("b"), timeout=2).content == b"hello"


def test_loopback_only() -> None:
    with pytest.raises(ValueError, match="loopback"):
        FaultProxy({"x": ("10.0.0.1", 80)})
