"""A TCP proxy that makes a loopback server look like object storage: latency per request, capped bandwidth.

Two link models, chosen by :class:`LinkShape`:

* S3-like (``per_connection_bytes_per_s`` set): each connection is served at most at that rate,
  and, with ``aggregate_bytes_per_s``, all connections together at most at that one (the
  machine's NIC). This is what object storage looks like from a training machine: S3 serves one
  connection at roughly 50-100 MB/s and total throughput grows with concurrent requests up to
  the NIC.
* one shared link (``per_connection_bytes_per_s=None``, ``aggregate_bytes_per_s`` set): every
  connection draws from one token bucket, so concurrency buys nothing.

``ShapingProxy(upstream_port, shape=LinkShape(...))`` listens on a loopback port and forwards every
connection to ``127.0.0.1:upstream_port``. Each request (a burst of bytes from the client after a
quiet moment) waits ``latency_s`` before it is forwarded; the bytes coming back are paced by the
buckets above. Connections stay concurrent: a request waiting on one connection holds up no other.
The proxy runs on threads of the process that starts it; benchmarks start it in a child process
(:func:`serve_in_child`) so that its Python work does not share the loader's interpreter lock, as
a real network would not.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from types import TracebackType

_CHUNK = 256 << 10  # pacing granularity: 5 ms at 50 MB/s
_QUIET_S = 0.002  # a pause longer than this before client bytes starts a new request


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkShape:
    """What the proxy imposes.

    Attributes:
        latency_s: added before each request is forwarded (time to first byte).
        per_connection_bytes_per_s: each connection's cap (``None``: none).
        aggregate_bytes_per_s: all connections together (``None``: none).
    """

    latency_s: float
    per_connection_bytes_per_s: float | None = None
    aggregate_bytes_per_s: float | None = None

    def __post_init__(self) -> None:
        if self.latency_s < 0:
            raise ValueError(f"latency_s must be >= 0, got {self.latency_s!r}")
        for name in ("per_connection_bytes_per_s", "aggregate_bytes_per_s"):
            rate = getattr(self, name)
            if rate is not None and rate <= 0:
                raise ValueError(f"{name} must be > 0 or None, got {rate!r}")

    def describe(self) -> str:
        parts = [f"{self.latency_s * 1e3:.0f} ms per request"]
        if self.per_connection_bytes_per_s is not None:
            parts.append(f"{self.per_connection_bytes_per_s / 1e6:.0f} MB/s per connection")
        if self.aggregate_bytes_per_s is not None:
            what = "in all" if self.per_connection_bytes_per_s is not None else "one shared link"
            parts.append(f"{self.aggregate_bytes_per_s / 1e6:.0f} MB/s {what}")
        return ", ".join(parts)


class Bucket:
    """A token bucket: :meth:`reserve` returns the moment ``n`` more bytes may leave at ``rate``."""

    def __init__(self, rate: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._clock = clock
        self._next_free = 0.0
        self._lock = threading.Lock()

    def reserve(self, n: int) -> float:
        with self._lock:
            start = max(self._clock(), self._next_free)
            self._next_free = start + n / self._rate
            return self._next_free


class Pacer:
    """When one connection's response bytes may leave: its own bucket (per-connection cap) and
    the bucket all connections share (aggregate cap), whichever is later."""

    def __init__(self, own: Bucket | None, shared: Bucket | None) -> None:
        self._own = own
        self._shared = shared

    def release_at(self, n: int) -> float:
        """The moment ``n`` more bytes may be sent (reserving them in both buckets)."""
        own = 0.0 if self._own is None else self._own.reserve(n)
        shared = 0.0 if self._shared is None else self._shared.reserve(n)
        return max(own, shared)


class ShapingProxy:
    """A latency- and bandwidth-shaping TCP proxy in front of a loopback server (a context manager).

    Attributes:
        port: the loopback port to connect to instead of the upstream one.
        requests: requests seen so far (bursts from clients).
        bytes_down: bytes sent back to clients so far.
        connections: connections accepted so far.
        most_streaming: the most connections sending response bytes at one moment.
    """

    def __init__(self, upstream_port: int, *, shape: LinkShape,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._upstream = upstream_port
        self.shape = shape
        self._clock = clock
        self._aggregate = (None if shape.aggregate_bytes_per_s is None
                           else Bucket(shape.aggregate_bytes_per_s, clock=clock))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.requests = 0
        self.bytes_down = 0
        self.connections = 0
        self.most_streaming = 0
        self._streaming = 0
        self._count_lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="shaping-proxy", daemon=True)

    def __enter__(self) -> ShapingProxy:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._closed.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self._upstream))
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.connections += 1
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client), daemon=True).start()

    def pacer(self) -> Pacer:
        """A new connection's pacer (its own bucket; the aggregate one is shared)."""
        rate = self.shape.per_connection_bytes_per_s
        own = None if rate is None else Bucket(rate, clock=self._clock)
        return Pacer(own, self._aggregate)

    def _requests(self, src: socket.socket, dst: socket.socket) -> None:
        last = 0.0
        try:
            while data := src.recv(_CHUNK):
                now = time.monotonic()
                if now - last > _QUIET_S:
                    with self._count_lock:
                        self.requests += 1
                    time.sleep(self.shape.latency_s)
                dst.sendall(data)
                last = time.monotonic()
        except OSError:
            pass
        finally:
            _close(src, dst)

    def _responses(self, src: socket.socket, dst: socket.socket) -> None:
        pacer = self.pacer()
        try:
            while data := src.recv(_CHUNK):
                with self._count_lock:
                    self._streaming += 1
                    self.most_streaming = max(self.most_streaming, self._streaming)
                    self.bytes_down += len(data)  # counted before the client can see them
                try:
                    wait = pacer.release_at(len(data)) - self._clock()
                    if wait > 0:
                        time.sleep(wait)
                    dst.sendall(data)
                finally:
                    with self._count_lock:
                        self._streaming -= 1
        except OSError:
            pass
        finally:
            _close(src, dst)


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


@dataclass(frozen=True, slots=True)
class ProxyStats:
    """What a proxy in a child process saw (read when it stops)."""

    requests: int
    bytes_down: int
    connections: int
    most_streaming: int


class ChildProxy:
    """A :class:`ShapingProxy` running in a child process: ``port`` to connect to, the child's
    ``pid``, and ``stats`` once the ``with`` block of :func:`serve_in_child` has ended."""

    def __init__(self, port: int, pid: int) -> None:
        self.port = port
        self.pid = pid
        self.stats: ProxyStats | None = None


def _child(upstream_port: int, shape: LinkShape, conn: Connection) -> None:
    with ShapingProxy(upstream_port, shape=shape) as proxy:
        conn.send(proxy.port)
        conn.recv()  # stop
        conn.send(ProxyStats(proxy.requests, proxy.bytes_down, proxy.connections,
                             proxy.most_streaming))


@contextlib.contextmanager
def serve_in_child(upstream_port: int, *, shape: LinkShape) -> Iterator[ChildProxy]:
    """Run a shaping proxy in a spawned child process for the block (see the module docstring)."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child, args=(upstream_port, shape, child), daemon=True)
    proc.start()
    try:
        assert proc.pid is not None
        handle = ChildProxy(parent.recv(), proc.pid)
        yield handle
        parent.send("stop")
        handle.stats = parent.recv()
    finally:
        proc.join(timeout=10)
        if proc.is_alive():
            proc.terminate()
