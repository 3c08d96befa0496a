"""A TCP proxy that makes a loopback server look like object storage: latency per request, capped bandwidth.

``ShapingProxy(upstream_port, latency_s=0.03, bandwidth_bytes_per_s=50e6)`` listens on a loopback
port and forwards every connection to ``127.0.0.1:upstream_port``. Each request (a burst of bytes
from the client after a quiet moment) waits ``latency_s`` before it is forwarded, and the bytes
coming back share one token bucket of ``bandwidth_bytes_per_s`` across all connections (one
link). Connections stay concurrent: a request waiting on one connection holds up no other.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from types import TracebackType

_CHUNK = 64 << 10
_QUIET_S = 0.002  # a pause longer than this before client bytes starts a new request


class ShapingProxy:
    """A latency- and bandwidth-shaping TCP proxy in front of a loopback server (a context manager).

    Attributes:
        port: the loopback port to connect to instead of the upstream one.
        requests: requests seen so far (bursts from clients).
        bytes_down: bytes sent back to clients so far.
    """

    def __init__(self, upstream_port: int, *, latency_s: float, bandwidth_bytes_per_s: float
                 ) -> None:
        self._upstream = upstream_port
        self._latency_s = latency_s
        self._rate = bandwidth_bytes_per_s
        self._bucket_lock = threading.Lock()
        self._next_free = 0.0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.requests = 0
        self.bytes_down = 0
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
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client), daemon=True).start()

    def _requests(self, src: socket.socket, dst: socket.socket) -> None:
        last = 0.0
        try:
            while data := src.recv(_CHUNK):
                now = time.monotonic()
                if now - last > _QUIET_S:
                    self.requests += 1
                    time.sleep(self._latency_s)
                dst.sendall(data)
                last = time.monotonic()
        except OSError:
            pass
        finally:
            _close(src, dst)

    def _responses(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(_CHUNK):
                with self._bucket_lock:
                    start = max(time.monotonic(), self._next_free)
                    self._next_free = start + len(data) / self._rate
                wait = self._next_free - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                dst.sendall(data)
                self.bytes_down += len(data)
        except OSError:
            pass
        finally:
            _close(src, dst)


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
