"""The shaping proxy: S3-like pacing (a cap per connection, one for all) and faithful forwarding."""

from __future__ import annotations

import socket
import threading

import pytest
from shaping_proxy import Bucket, LinkShape, Pacer, ShapingProxy, serve_in_child

MB = 1_000_000


class FrozenClock:
    """A clock that moves only when told (pacing is arithmetic on it, never measured)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_spaces_bytes_at_its_rate_and_forgets_idle_time() -> None:
    clock = FrozenClock()
    bucket = Bucket(100.0, clock=clock)
    assert bucket.reserve(50) == pytest.approx(0.5)
    assert bucket.reserve(50) == pytest.approx(1.0)  # queued behind the first
    clock.now = 10.0
    assert bucket.reserve(100) == pytest.approx(11.0)  # an idle link saves no credit


def test_s3_like_connections_are_capped_each_and_scale_until_the_aggregate_cap() -> None:
    clock = FrozenClock()
    shape = LinkShape(latency_s=0.0, per_connection_bytes_per_s=50 * MB,
                      aggregate_bytes_per_s=400 * MB)
    proxy = ShapingProxy(1, shape=shape, clock=clock)
    try:
        one = proxy.pacer()
        assert one.release_at(50 * MB) == pytest.approx(1.0)  # one connection: 50 MB/s
        clock.now = 10.0
        pacers = [proxy.pacer() for _ in range(8)]
        # eight connections move 50 MB each in the second one alone would take: 400 MB/s
        assert [p.release_at(50 * MB) for p in pacers] == pytest.approx([11.0] * 8)
        clock.now = 20.0
        pacers = [proxy.pacer() for _ in range(16)]
        # sixteen: the aggregate (the NIC) is the cap, 800 MB take 2 s
        assert max(p.release_at(50 * MB) for p in pacers) == pytest.approx(22.0)
    finally:
        proxy.__exit__(None, None, None)


def test_one_shared_link_gives_concurrent_connections_nothing() -> None:
    clock = FrozenClock()
    proxy = ShapingProxy(1, shape=LinkShape(latency_s=0.0, aggregate_bytes_per_s=50 * MB),
                         clock=clock)
    try:
        pacers = [proxy.pacer() for _ in range(4)]
        assert max(p.release_at(50 * MB) for p in pacers) == pytest.approx(4.0)
    finally:
        proxy.__exit__(None, None, None)


def test_a_pacer_waits_for_the_later_of_its_two_buckets() -> None:
    clock = FrozenClock()
    shared = Bucket(10.0, clock=clock)
    assert Pacer(Bucket(100.0, clock=clock), shared).release_at(10) == pytest.approx(1.0)
    assert Pacer(Bucket(1.0, clock=clock), shared).release_at(10) == pytest.approx(10.0)
    assert Pacer(None, None).release_at(10) == 0.0


@pytest.mark.parametrize("field", ["per_connection_bytes_per_s", "aggregate_bytes_per_s"])
def test_a_shape_refuses_a_rate_that_is_not_positive(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        LinkShape(latency_s=0.03, **{field: 0.0})
    with pytest.raises(ValueError, match="latency_s"):
        LinkShape(latency_s=-1.0)


def echo_server() -> tuple[socket.socket, threading.Thread]:
    """A loopback server that sends back each request's bytes ten times."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            while data := conn.recv(1 << 16):
                conn.sendall(data * 10)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


def exchange(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(payload)
        got = b""
        while len(got) < 10 * len(payload):
            chunk = sock.recv(1 << 16)
            assert chunk, "the proxy closed the connection early"
            got += chunk
    return got


SHAPE = LinkShape(latency_s=0.001, per_connection_bytes_per_s=500 * MB,
                  aggregate_bytes_per_s=1000 * MB)


def test_the_proxy_forwards_bytes_unchanged_and_counts_them() -> None:
    listener, _ = echo_server()
    with listener, ShapingProxy(listener.getsockname()[1], shape=SHAPE) as proxy:
        payload = bytes(range(256)) * 40
        assert exchange(proxy.port, payload) == payload * 10
        assert proxy.connections == 1 and proxy.requests >= 1
        assert proxy.bytes_down == 10 * len(payload)


def test_a_proxy_in_a_child_process_forwards_and_reports_its_traffic() -> None:
    listener, _ = echo_server()
    with listener, serve_in_child(listener.getsockname()[1], shape=SHAPE) as proxy:
        assert exchange(proxy.port, b"ping") == b"ping" * 10
    assert proxy.stats is not None
    assert (proxy.stats.connections, proxy.stats.bytes_down) == (1, 40)
