"""ObjectPrefetcher: announced objects are downloaded in the background within both bounds."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rayform.errors import ConfigError
from rayform.storage._prefetch import ObjectPrefetcher


class GatedFetch:
    """A fetch that blocks until released, recording what ran at once."""

    def __init__(self, *, fail: frozenset[str] = frozenset()) -> None:
        self.release = threading.Event()
        self.started: list[str] = []
        self.done: list[str] = []
        self.most_at_once = 0
        self._now = 0
        self._lock = threading.Lock()
        self._fail = fail

    def __call__(self, digest: str) -> Path:
        with self._lock:
            self.started.append(digest)
            self._now += 1
            self.most_at_once = max(self.most_at_once, self._now)
        self.release.wait(10)
        with self._lock:
            self._now -= 1
            self.done.append(digest)
        if digest in self._fail:
            raise OSError(f"cannot fetch {digest}")
        return Path(digest)


def wait_for(condition: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.005)


def names(n: int) -> list[str]:
    return [f"obj{i:02d}" for i in range(n)]


def test_downloads_stay_within_both_bounds_and_follow_the_reader() -> None:
    fetch = GatedFetch()
    pf = ObjectPrefetcher(fetch, lambda d: False, max_in_flight=2, max_ahead=3)
    pf.announce(names(10))
    wait_for(lambda: len(fetch.started) == 2)
    time.sleep(0.05)
    assert fetch.started == ["obj00", "obj01"] and pf.running == 2  # in flight: 2
    fetch.release.set()
    wait_for(lambda: len(fetch.done) == 3 and pf.running == 0)
    time.sleep(0.05)
    assert fetch.started == ["obj00", "obj01", "obj02"]  # ahead of the reader: 3
    assert pf.ahead == 3
    pf.claimed("obj00")
    pf.claimed("obj07")  # read on demand: never prefetched later
    wait_for(lambda: len(fetch.done) == 4)
    pf.claimed("obj01")
    pf.claimed("obj02")
    pf.claimed("obj03")
    wait_for(lambda: pf.ahead == 3 and pf.running == 0)
    assert fetch.started == ["obj00", "obj01", "obj02", "obj03", "obj04", "obj05", "obj06"]
    assert fetch.most_at_once <= 2
    for d in ("obj04", "obj05", "obj06"):
        pf.claimed(d)
    wait_for(lambda: pf.ahead == 2 and pf.running == 0)
    assert fetch.started[-2:] == ["obj08", "obj09"]
    assert len(set(fetch.started)) == len(fetch.started) == 9  # nothing twice, obj07 skipped
    pf.close()


def test_announced_objects_are_pulled_lazily_and_cached_ones_skipped() -> None:
    pulled: list[str] = []

    def announced() -> Iterator[str]:
        for d in names(100_000):
            pulled.append(d)
            yield d

    fetch = GatedFetch()
    fetch.release.set()
    cached = {"obj00", "obj02"}
    pf = ObjectPrefetcher(fetch, lambda d: d in cached, max_in_flight=1, max_ahead=2)
    pf.announce(announced())
    pf.announce(["obj01", "obj03"])  # announced twice: downloaded once
    wait_for(lambda: len(fetch.done) == 2)
    time.sleep(0.05)
    assert fetch.started == ["obj01", "obj03"]
    assert len(pulled) == 4  # only as far as the bounds allowed
    pf.claimed("obj01")
    wait_for(lambda: len(fetch.done) == 3)
    assert fetch.started[-1] == "obj04"
    pf.close()


def test_objects_announced_first_go_before_earlier_hints() -> None:
    fetch = GatedFetch()
    pf = ObjectPrefetcher(fetch, lambda d: False, max_in_flight=1, max_ahead=10)
    pf.announce(names(4))
    wait_for(lambda: fetch.started == ["obj00"])  # running: it goes on
    pf.announce(["soon1", "obj02", "soon2"], first=True)
    fetch.release.set()
    wait_for(lambda: len(fetch.done) == 6)
    assert fetch.started == ["obj00", "soon1", "obj02", "soon2", "obj01", "obj03"]


def test_a_failed_prefetch_is_dropped_and_frees_its_place() -> None:
    fetch = GatedFetch(fail=frozenset({"obj00"}))
    fetch.release.set()
    pf = ObjectPrefetcher(fetch, lambda d: False, max_in_flight=1, max_ahead=1)
    pf.announce(names(3))
    wait_for(lambda: len(fetch.done) == 2 and pf.running == 0)
    assert fetch.started == ["obj00", "obj01"]  # the failure did not hold the window
    assert pf.ahead == 1
    pf.close()


def test_a_hint_that_cannot_be_followed_raises_nothing() -> None:
    def broken() -> Iterator[str]:
        yield "obj00"
        raise LookupError("no such segment")

    fetch = GatedFetch()
    fetch.release.set()
    pf = ObjectPrefetcher(fetch, lambda d: False, max_in_flight=1, max_ahead=4)
    pf.announce(broken())
    pf.announce(["obj01"])
    wait_for(lambda: len(fetch.done) == 2)
    assert fetch.started == ["obj00", "obj01"]
    pf.close()


@pytest.mark.parametrize(("in_flight", "ahead"), [(0, 4), (2, 0)])
def test_bounds_must_be_positive(in_flight: int, ahead: int) -> None:
    with pytest.raises(ConfigError, match="prefetch bounds"):
        ObjectPrefetcher(GatedFetch(), lambda d: False, max_in_flight=in_flight, max_ahead=ahead)
