"""Large objects in concurrent ranged parts: reassembled in one file, hashed in order, verified
whole before they enter the cache; a bad part fails the download and leaves nothing behind."""

from __future__ import annotations

import hashlib
import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rayform.errors import ConfigError, RemoteError
from rayform.storage._cache import ObjectCache, Sink
from rayform.storage._parts import HashFront, PartPlan, RangeReply
from rayform.storage._remote import RemoteStore, Transport
from rayform.storage._retry import RetryPolicy, TransientError

CHUNK = 7  # transport chunk (bytes): parts arrive in several chunks each


class RangedTransport(Transport):
    """Serves ``objects`` by key with plain and ranged GETs (``Accept-Ranges`` unless not
    ``honours_ranges``), recording each request and the most open at once; with ``together``,
    that many requests after the first (which names the object's size) answer only once all of
    them are open (requests made one after another fail)."""

    url = "s3://bucket/cat"
    writable = False
    ranged = True

    def __init__(self, objects: dict[str, bytes], *, together: int = 1,
                 honours_ranges: bool = True) -> None:
        self.objects = objects
        self.ranges: list[tuple[int, int | None]] = []  # (start, stop); None: a plain GET
        self.open_now = 0
        self.most_open = 0
        self.honours_ranges = honours_ranges
        self.corrupt_from: int | None = None  # flip the byte at this offset in replies
        self.short_from: int | None = None  # a reply starting here ends one byte early
        self.shift_from: int | None = None  # a reply for this start claims one byte later
        self._barrier = threading.Barrier(together, timeout=10) if together > 1 else None
        self._waited = 0
        self._lock = threading.Lock()

    def download(self, key: str, sink: Sink) -> None:
        sink.write(self.objects[key])

    def open_range(self, key: str, start: int, stop: int | None, /) -> RangeReply:
        data = self.objects[key.rsplit("/", 1)[1]]
        with self._lock:
            self.ranges.append((start, stop))
            self.open_now += 1
            self.most_open = max(self.most_open, self.open_now)
            wait = self._barrier is not None and 0 < self._waited <= self._barrier.parties
            self._waited += 1
        if wait:
            assert self._barrier is not None
            self._barrier.wait()
        if stop is None:
            return RangeReply(total_bytes=len(data), start=0, length_bytes=len(data),
                              accepts_ranges=self.honours_ranges,
                              chunks=self._chunks(data, 0, len(data)), close=self._closed)
        end = min(stop, len(data))
        if self.short_from == start:
            end -= 1
        claimed = start + 1 if self.shift_from == start else start
        return RangeReply(total_bytes=len(data), start=claimed, length_bytes=None,
                          accepts_ranges=True, chunks=self._chunks(data, start, end),
                          close=self._closed)

    def _chunks(self, data: bytes, start: int, end: int) -> Iterator[bytes]:
        for pos in range(start, end, CHUNK):
            chunk = bytearray(data[pos:min(pos + CHUNK, end)])
            if self.corrupt_from is not None and pos <= self.corrupt_from < pos + len(chunk):
                chunk[self.corrupt_from - pos] ^= 0xFF
            yield bytes(chunk)

    def _closed(self) -> None:
        with self._lock:
            self.open_now -= 1

    def list_names(self, prefix: str) -> list[str]:
        return []

    def exists(self, key: str) -> bool:
        return True


def _object(size: int, seed: int = 0) -> tuple[str, bytes]:
    data = random.Random(seed).randbytes(size)
    return hashlib.sha256(data).hexdigest(), data


def _store(transport: RangedTransport, root: Path, plan: PartPlan) -> RemoteStore:
    return RemoteStore(transport, cache=ObjectCache(root), parts=plan,
                       retry=RetryPolicy(max_attempts=1, backoff_s=0.0))


def _served(*objects: tuple[str, bytes]) -> dict[str, bytes]:
    return {digest: data for digest, data in objects}


def _leftovers(root: Path) -> list[Path]:
    return [p for p in (root / "tmp").rglob("*") if p.is_file()] + \
        [p for p in (root / "objects").rglob("*") if p.is_file()]


def test_a_large_object_comes_in_ranged_parts_reassembled_and_verified(tmp_path: Path) -> None:
    digest, data = _object(1000)
    transport = RangedTransport(_served((digest, data)))
    path = _store(transport, tmp_path, PartPlan(part_bytes=96, connections=3)).object_path(digest)
    assert path.read_bytes() == data
    # a plain GET (whose first 96 bytes are kept), then the other parts as ranged GETs
    assert transport.ranges[0] == (0, None)
    assert sorted(transport.ranges[1:]) == [(s, min(s + 96, 1000)) for s in range(96, 1000, 96)]
    assert transport.open_now == 0  # every reply released


def test_parts_of_one_object_run_concurrently_within_the_connection_bound(tmp_path: Path) -> None:
    digest, data = _object(2000, seed=1)
    transport = RangedTransport(_served((digest, data)), together=2)
    # Parts after the first asked one after another would break the barrier (no cache then).
    path = _store(transport, tmp_path, PartPlan(part_bytes=100, connections=3)).object_path(digest)
    assert path.read_bytes() == data
    assert 2 <= transport.most_open <= 3
    assert len(transport.ranges) == 20


def test_an_object_no_larger_than_a_part_takes_one_request(tmp_path: Path) -> None:
    digest, data = _object(96, seed=2)
    transport = RangedTransport(_served((digest, data)))
    _store(transport, tmp_path, PartPlan(part_bytes=96, connections=4)).object_path(digest)
    assert transport.ranges == [(0, None)]


def test_a_server_without_ranges_sends_the_whole_object_once(tmp_path: Path) -> None:
    digest, data = _object(500, seed=3)
    transport = RangedTransport(_served((digest, data)), honours_ranges=False)
    path = _store(transport, tmp_path, PartPlan(part_bytes=64, connections=4)).object_path(digest)
    assert path.read_bytes() == data
    assert transport.ranges == [(0, None)]


def test_an_empty_object_is_cached(tmp_path: Path) -> None:
    digest, data = _object(0)
    transport = RangedTransport(_served((digest, data)))
    assert _store(transport, tmp_path, PartPlan(part_bytes=64)).object_path(digest).stat().st_size == 0


def test_a_corrupted_part_is_rejected_and_nothing_is_cached(tmp_path: Path) -> None:
    digest, data = _object(1000, seed=4)
    transport = RangedTransport(_served((digest, data)))
    transport.corrupt_from = 700  # inside the 8th part of 100 bytes
    store = _store(transport, tmp_path, PartPlan(part_bytes=100, connections=4))
    with pytest.raises(RemoteError) as info:
        store.object_path(digest)
    message = str(info.value)
    assert digest in message and "in 10 ranged parts" in message and "nothing was cached" in message
    assert _leftovers(tmp_path) == []
    assert not store.is_cached(digest)


@pytest.mark.parametrize("fault", ["short_from", "shift_from"])
def test_a_part_with_the_wrong_bytes_or_range_fails_the_download(tmp_path: Path,
                                                                  fault: str) -> None:
    digest, data = _object(1000, seed=5)
    transport = RangedTransport(_served((digest, data)))
    setattr(transport, fault, 300)
    store = _store(transport, tmp_path, PartPlan(part_bytes=100, connections=4))
    with pytest.raises(RemoteError, match=r"300"):
        store.object_path(digest)
    assert _leftovers(tmp_path) == []


def test_hash_front_hashes_chunks_written_in_any_order(tmp_path: Path) -> None:
    data = random.Random(6).randbytes(5000)
    chunks = [(pos, data[pos:pos + 37]) for pos in range(0, len(data), 37)]
    random.Random(7).shuffle(chunks)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        front = HashFront(fd)
        for pos, chunk in chunks:
            os.pwrite(fd, chunk, pos)
            front.wrote(pos, chunk)
        assert front.hexdigest(len(data)) == hashlib.sha256(data).hexdigest()
    finally:
        os.close(fd)


def test_hash_front_refuses_a_file_with_a_gap(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        front = HashFront(fd)
        os.pwrite(fd, b"abc", 0)
        front.wrote(0, b"abc")
        os.pwrite(fd, b"ghi", 6)
        front.wrote(6, b"ghi")
        with pytest.raises(TransientError, match="only 3 of 9 bytes"):
            front.hexdigest(9)
    finally:
        os.close(fd)


@pytest.mark.parametrize("kwargs", [{"part_bytes": 0}, {"connections": 0}, {"part_bytes": 1.5}])
def test_part_plan_rejects_bad_bounds(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="PartPlan"):
        PartPlan(**kwargs)  # type: ignore[arg-type]

