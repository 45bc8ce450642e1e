"""A TCP proxy that misbehaves on command, for fault-injection tests.

One listening port per upstream (``weed mini``'s S3 port and its Iceberg REST port, say), on
loopback only. A client that is given the proxy's address instead of the server's goes through
it as through a real network, and the test breaks that network at will::

    with FaultProxy({"s3": ("127.0.0.1", weed.s3_port), "rest": ("127.0.0.1", weed.iceberg_port)},
                    seed=7) as proxy:
        proxy.url("s3"), proxy.url("rest")       # what the client is configured with
        proxy.latency(0.2, jitter=0.1)           # every forwarded chunk waits 0.1-0.3 s
        proxy.reset_connections(only="rest")     # RST every open connection
        proxy.drop_new(5)                        # refuse new connections for 5 s
        proxy.drop_new(5, how="reset")           # accept, then RST them at once
        proxy.blackhole(10)                      # forward nothing for 10 s; bytes are lost and
                                                 # the connections that lost some stay dead
        proxy.blackhole(10, mode="stall")        # hold the bytes, deliver them after 10 s
        proxy.cut_response_after(100, count=2)   # the next 2 responses stop after 100 bytes
        proxy.clear()                            # every fault off (open connections stay)

Faults apply to every upstream unless ``only=`` names one (or several). Durations are
wall-clock windows starting at the call; the faults without a duration stay until ``clear()``.
Randomness (latency jitter) comes from ``random.Random(seed)``: a seeded run draws the same
delays in the same order of forwarded chunks.

Semantics, as a client sees them:

* ``latency`` — each chunk forwarded in the chosen ``direction`` (``"both"``, ``"up"`` =
  client → server, ``"down"`` = server → client) is delayed ``seconds ± jitter``;
* ``reset_connections`` — open connections are closed with an RST on both sides (``SO_LINGER``
  0): a client reading or writing gets ``ECONNRESET``; a pooled idle connection fails on reuse;
* ``drop_new(how="refuse")`` — the listening socket is closed for the window: ``connect()``
  fails with ``ECONNREFUSED``; ``how="reset"``: the connection is accepted and reset at once;
* ``blackhole(mode="drop")`` — nothing is forwarded, in either direction, on open or new
  connections; bytes that arrive are thrown away, and a connection that lost bytes stays
  silent for good (half-open, like a flushed NAT entry); the client's reads hang until its
  own timeout. New connections after the window work. ``mode="stall"``: the bytes wait in the
  socket buffers and flow again when the window ends (TCP retransmitting through an outage);
* ``cut_response_after(nbytes, count)`` — on the next ``count`` connections that receive
  bytes from the server after the call, ``nbytes`` more bytes are forwarded, then the connection
  is closed (FIN; ``reset=True`` for an RST): the client sees a truncated body or "connection
  closed" mid-response. (A TCP proxy does not see HTTP message boundaries: on a kept-alive
  connection whose next response is shorter than ``nbytes``, the count goes on into the next.)

``FaultProxy.stats`` counts connections, bytes and applied faults per upstream; ``events`` is a
list of ``(monotonic time, upstream, what)`` for test reports.
"""

from __future__ import annotations

import contextlib
import random
import select
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

LOOPBACK = "127.0.0.1"
_CHUNK = 65536
_TICK = 0.05


def _linger_close(sock: socket.socket) -> None:
    """Close ``sock`` with an RST instead of a FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def _quiet_close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()


@dataclass
class _Faults:
    """The faults in force on one listener (all times ``time.monotonic()``)."""

    latency: float = 0.0
    jitter: float = 0.0
    latency_dir: str = "both"
    refuse_until: float = 0.0
    reset_new_until: float = 0.0
    blackhole_until: float = 0.0
    blackhole_mode: str = "drop"
    cut_bytes: int = 0
    cut_left: int = 0  # responses still to cut
    cut_reset: bool = False

    def blackholed(self, now: float) -> bool:
        return now < self.blackhole_until


def _readable(sock: socket.socket, timeout: float) -> bool:
    """Whether ``sock`` has something to read (or its end) within ``timeout`` seconds. poll(), not
    select(): select() raises ValueError for a descriptor past 1024, which a long test run in one
    process reaches; the pump thread then died and its connection hung (CI, 28 Nov: 15 min)."""
    fd = sock.fileno()
    if fd < 0:
        raise OSError("socket closed")
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(timeout * 1000))


@dataclass(eq=False)
class _Conn:
    listener: _Listener
    client: socket.socket
    upstream: socket.socket | None = None
    closed: bool = False
    dead: bool = False  # lost bytes in a blackhole: forwards nothing until closed
    cut_left: int | None = None  # bytes of the response being cut still to forward
    cut_reset: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def close(self, *, reset: bool = False) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
        closer = _linger_close if reset else _quiet_close
        closer(self.client)
        if self.upstream is not None:
            closer(self.upstream)


class _Listener:
    """One listening port forwarding to one upstream."""

    def __init__(self, proxy: FaultProxy, name: str, upstream: tuple[str, int], port: int) -> None:
        self.proxy = proxy
        self.name = name
        self.upstream = upstream
        self.port = port
        self.faults = _Faults()
        self.conns: set[_Conn] = set()
        self.sock: socket.socket | None = None
        self.thread: threading.Thread | None = None

    def _bind(self) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        deadline = time.monotonic() + 5
        while True:
            try:
                s.bind((LOOPBACK, self.port))
                break
            except OSError:
                if time.monotonic() > deadline:
                    s.close()
                    raise
                time.sleep(0.05)
        s.listen(128)
        s.settimeout(_TICK)
        self.port = s.getsockname()[1]
        return s

    def start(self) -> None:
        self.sock = self._bind()
        self.thread = threading.Thread(target=self._accept_loop, name=f"faultproxy-{self.name}", daemon=True)
        self.thread.start()

    def _accept_loop(self) -> None:
        proxy = self.proxy
        while not proxy._stopping.is_set():
            now = time.monotonic()
            with proxy._lock:
                refuse_until = self.faults.refuse_until
            if now < refuse_until:
                if self.sock is not None:  # connect() is refused while the port is closed
                    _quiet_close(self.sock)
                    self.sock = None
                    proxy._event(self.name, "listener closed (refusing)")
                time.sleep(min(_TICK, refuse_until - now))
                continue
            if self.sock is None:
                try:
                    self.sock = self._bind()
                except OSError as e:  # pragma: no cover - somebody took the port meanwhile
                    proxy._event(self.name, f"cannot listen again: {e}")
                    time.sleep(0.2)
                    continue
                proxy._event(self.name, "listener open again")
            try:
                client, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                if proxy._stopping.is_set():
                    return
                continue
            client.setblocking(True)
            proxy._count(self.name, "connections")
            with proxy._lock:
                reset_now = time.monotonic() < self.faults.reset_new_until
            if reset_now:
                proxy._count(self.name, "reset_on_accept")
                _linger_close(client)
                continue
            conn = _Conn(self, client)
            with proxy._lock:
                self.conns.add(conn)
            threading.Thread(
                target=self._serve, args=(conn,), name=f"faultproxy-{self.name}-conn", daemon=True
            ).start()

    def _serve(self, conn: _Conn) -> None:
        proxy = self.proxy
        # in a blackhole the server is not even contacted: the client waits on a silent socket
        if proxy._blackholed(self) and self.faults.blackhole_mode == "drop":
            conn.dead = True  # its first bytes fall into the hole: it never comes to life
            proxy._count(self.name, "blackholed_connections")
        while not conn.closed and not conn.dead and proxy._blackholed(self):
            time.sleep(_TICK)
        if conn.dead:
            with contextlib.suppress(OSError):
                while not conn.closed:
                    r = _readable(conn.client, _TICK)
                    if r and not conn.client.recv(_CHUNK):
                        break
            conn.close()
            self._forget(conn)
            return
        if conn.closed:
            self._forget(conn)
            return
        try:
            up = socket.create_connection(self.upstream, timeout=5)
            up.settimeout(None)
        except OSError:
            proxy._count(self.name, "upstream_unreachable")
            conn.close(reset=True)
            self._forget(conn)
            return
        conn.upstream = up
        if conn.closed:  # reset while connecting
            _linger_close(up)
            self._forget(conn)
            return
        t = threading.Thread(
            target=self._pump,
            args=(conn, up, conn.client, "down"),
            name=f"faultproxy-{self.name}-down",
            daemon=True,
        )
        t.start()
        self._pump(conn, conn.client, up, "up")
        t.join()
        conn.close()
        self._forget(conn)

    def _forget(self, conn: _Conn) -> None:
        with self.proxy._lock:
            self.conns.discard(conn)

    def _pump(self, conn: _Conn, src: socket.socket, dst: socket.socket, direction: str) -> None:
        proxy = self.proxy
        name = self.name
        try:
            while not conn.closed:
                f = self.faults
                if conn.dead or (proxy._blackholed(self) and f.blackhole_mode == "stall"):
                    if conn.dead:  # throw away whatever arrives; forward nothing
                        r = _readable(src, _TICK)
                        if r and not src.recv(_CHUNK):
                            break
                    else:
                        time.sleep(_TICK)
                    continue
                r = _readable(src, _TICK)
                if not r:
                    continue
                data = src.recv(_CHUNK)
                if not data:  # EOF: pass the half-close on
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    break
                if proxy._blackholed(self):
                    if f.blackhole_mode == "drop":
                        conn.dead = True
                        proxy._count(name, "blackholed_bytes", len(data))
                        proxy._count(name, "blackholed_connections")
                        continue
                delay = proxy._delay(self, direction)
                if delay > 0:
                    time.sleep(delay)
                for pat in proxy._watch.get(name, ()):
                    if pat in data:
                        proxy._count(name, "seen:" + pat.decode(errors="replace"), data.count(pat))
                cut = False
                if direction == "down":
                    data, cut = proxy._cut(self, conn, data)
                if data:
                    dst.sendall(data)
                    proxy._count(name, f"bytes_{direction}", len(data))
                if cut:
                    proxy._count(name, "responses_cut")
                    proxy._event(name, "response cut")
                    conn.close(reset=conn.cut_reset)
                    break
        except OSError:
            # one side went away (reset, or closed by us): take the other side down with an RST
            conn.close(reset=True)


class FaultProxy:
    """A threaded TCP proxy with a fault-injection control API (see the module docstring)."""

    def __init__(
        self,
        upstreams: Mapping[str, tuple[str, int]],
        *,
        seed: int = 0,
        ports: Mapping[str, int] | None = None,
        watch: Mapping[str, Iterable[bytes]] | None = None,
    ) -> None:
        """``upstreams``: name -> (loopback host, port). ``ports``: fixed listening ports (default:
        free ones). ``watch``: name -> byte strings counted in the bytes forwarded either way (e.g.
        ``b"POST /v1/oauth/tokens"`` counts token requests, ``b"HTTP/1.1 401"`` rejections;
        ``stats[name]["seen:..."]``)."""
        self._lock = threading.RLock()
        self._watch = {name: [bytes(p) for p in pats] for name, pats in (watch or {}).items()}
        self._stopping = threading.Event()
        self._rng = random.Random(seed)
        self.seed = seed
        self.stats: dict[str, Counter[str]] = {name: Counter() for name in upstreams}
        self.events: list[tuple[float, str, str]] = []
        self._listeners = {
            name: _Listener(self, name, (host, int(port)), int((ports or {}).get(name, 0)))
            for name, (host, port) in upstreams.items()
        }
        for name, (host, _) in upstreams.items():
            if host not in (LOOPBACK, "localhost"):
                raise ValueError(f"upstream {name} is not on loopback: {host}")

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> FaultProxy:
        for listener in self._listeners.values():
            listener.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        for listener in self._listeners.values():
            if listener.sock is not None:
                _quiet_close(listener.sock)
            with self._lock:
                conns = list(listener.conns)
            for c in conns:
                c.close(reset=True)
            if listener.thread is not None:
                listener.thread.join(timeout=5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ addresses
    def port(self, name: str) -> int:
        return self._listeners[name].port

    def url(self, name: str, scheme: str = "http") -> str:
        return f"{scheme}://{LOOPBACK}:{self.port(name)}"

    @property
    def names(self) -> list[str]:
        return list(self._listeners)

    def set_upstream(self, name: str, host: str, port: int) -> None:
        """Forward new connections of ``name`` to another address (a restarted server)."""
        self._listeners[name].upstream = (host, int(port))

    def open_connections(self, only: str | Iterable[str] | None = None) -> int:
        with self._lock:
            return sum(len(ln.conns) for ln in self._targets(only))

    # ------------------------------------------------------------------ faults
    def _targets(self, only: str | Iterable[str] | None) -> list[_Listener]:
        if only is None:
            return list(self._listeners.values())
        names = [only] if isinstance(only, str) else list(only)
        return [self._listeners[n] for n in names]

    def latency(
        self,
        seconds: float,
        jitter: float = 0.0,
        *,
        direction: str = "both",
        only: str | Iterable[str] | None = None,
    ) -> None:
        if direction not in ("both", "up", "down"):
            raise ValueError(f"direction must be both, up or down, not {direction!r}")
        with self._lock:
            for ln in self._targets(only):
                ln.faults.latency, ln.faults.jitter, ln.faults.latency_dir = seconds, jitter, direction
                self._event(ln.name, f"latency {seconds}s ±{jitter}s ({direction})")

    def reset_connections(self, only: str | Iterable[str] | None = None) -> int:
        """RST every open connection; returns how many there were."""
        n = 0
        with self._lock:
            targets = [(ln, list(ln.conns)) for ln in self._targets(only)]
        for ln, conns in targets:
            for c in conns:
                c.close(reset=True)
                n += 1
            self._count(ln.name, "connections_reset", len(conns))
            self._event(ln.name, f"reset {len(conns)} connection(s)")
        return n

    def drop_new(
        self, duration: float, *, how: str = "refuse", only: str | Iterable[str] | None = None
    ) -> None:
        """New connections fail for ``duration`` seconds: refused (``how="refuse"``) or accepted
        and reset at once (``how="reset"``)."""
        if how not in ("refuse", "reset"):
            raise ValueError(f"how must be refuse or reset, not {how!r}")
        until = time.monotonic() + duration
        with self._lock:
            for ln in self._targets(only):
                if how == "refuse":
                    ln.faults.refuse_until = until
                else:
                    ln.faults.reset_new_until = until
                self._event(ln.name, f"drop new connections ({how}) for {duration}s")
        if how == "refuse":  # wait until the listeners have actually closed
            deadline = time.monotonic() + 2
            while (
                time.monotonic() < deadline
                and any(ln.sock is not None for ln in self._targets(only))
                and time.monotonic() < until
            ):
                time.sleep(0.01)

    def blackhole(
        self, duration: float, *, mode: str = "drop", only: str | Iterable[str] | None = None
    ) -> None:
        if mode not in ("drop", "stall"):
            raise ValueError(f"mode must be drop or stall, not {mode!r}")
        until = time.monotonic() + duration
        with self._lock:
            for ln in self._targets(only):
                ln.faults.blackhole_until = until
                ln.faults.blackhole_mode = mode
                self._event(ln.name, f"blackhole ({mode}) for {duration}s")

    def cut_response_after(
        self, nbytes: int, count: int = 1, *, reset: bool = False, only: str | Iterable[str] | None = None
    ) -> None:
        with self._lock:
            for ln in self._targets(only):
                ln.faults.cut_bytes = max(0, int(nbytes))
                ln.faults.cut_left = int(count)
                ln.faults.cut_reset = reset
                self._event(ln.name, f"cut the next {count} response(s) after {nbytes} bytes")

    def clear(self, only: str | Iterable[str] | None = None) -> None:
        """Every fault off, a cut a connection has claimed but not made yet included. Connections
        a ``drop`` blackhole killed stay dead (their bytes are gone); reset them with
        ``reset_connections`` if the test wants them closed."""
        targets = self._targets(only)
        with self._lock:
            for ln in targets:
                ln.faults = _Faults()
                for c in ln.conns:
                    c.cut_left = None
                self._event(ln.name, "clear")
        # a refusing listener opens its port again before clear() returns
        deadline = time.monotonic() + 5
        while any(ln.sock is None for ln in targets) and time.monotonic() < deadline:
            time.sleep(0.005)

    # ------------------------------------------------------------------ internals
    def _event(self, name: str, what: str) -> None:
        with self._lock:
            self.events.append((time.monotonic(), name, what))

    def _count(self, name: str, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[name][key] += n

    def _blackholed(self, ln: _Listener) -> bool:
        return ln.faults.blackholed(time.monotonic())

    def _delay(self, ln: _Listener, direction: str) -> float:
        with self._lock:
            f = ln.faults
            if f.latency <= 0 and f.jitter <= 0:
                return 0.0
            if f.latency_dir not in ("both", direction):
                return 0.0
            d = f.latency + (self._rng.uniform(-f.jitter, f.jitter) if f.jitter else 0.0)
            return max(0.0, d)

    def _cut(self, ln: _Listener, conn: _Conn, data: bytes) -> tuple[bytes, bool]:
        with self._lock:
            if conn.cut_left is None:
                f = ln.faults
                if f.cut_left <= 0:
                    return data, False
                f.cut_left -= 1
                conn.cut_left = f.cut_bytes
                conn.cut_reset = f.cut_reset
            left = conn.cut_left
        if len(data) < left:
            conn.cut_left = left - len(data)
            return data, False
        return data[:left], True

    def snapshot(self) -> dict[str, Any]:
        """Counters per upstream, for reports."""
        with self._lock:
            return {name: dict(c) for name, c in self.stats.items()}


@contextlib.contextmanager
def fault_proxy(upstreams: Mapping[str, tuple[str, int]], **kwargs: Any) -> Any:
    proxy = FaultProxy(upstreams, **kwargs).start()
    try:
        yield proxy
    finally:
        proxy.stop()


__all__ = ["FaultProxy", "fault_proxy"]
