"""Metadata read early: files a reader needs one after another are requested at once, and each
response is taken by the next read of its key (once), never by a later one."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from rayform.storage import _early
from rayform.storage._cache import ObjectCache, Sink
from rayform.storage._remote import RemoteStore, Transport
from rayform.storage._retry import RetryPolicy

FILES = {
    "catalog.json": b'{"catalog": 1}',
    "entries/robots/entry.json": b'{"entry": 1}',
    "entries/robots/versions/000000000001.json": b'{"snapshot": 1}',
}


class FakeTransport(Transport):
    """Serves ``FILES``; with ``together``, a GET answers only once that many are in flight."""

    url = "s3://bucket/cat"
    writable = False

    def __init__(self, *, together: int = 1) -> None:
        self.gets: Counter[str] = Counter()
        self._barrier = threading.Barrier(together, timeout=10)
        self._lock = threading.Lock()
        self.files = dict(FILES)

    def download(self, key: str, sink: Sink) -> None:
        with self._lock:
            self.gets[key] += 1
        self._barrier.wait()  # BrokenBarrierError when the GETs come one after another
        if key not in self.files:
            raise FileNotFoundError(key)
        sink.write(self.files[key])

    def list_names(self, prefix: str) -> list[str]:
        return []

    def exists(self, key: str) -> bool:
        return key in self.files


def store(transport: FakeTransport, root: Path) -> RemoteStore:
    return RemoteStore(transport, cache=ObjectCache(root),
                       retry=RetryPolicy(max_attempts=1, backoff_s=0.0))


def test_files_hinted_together_are_requested_at_once_and_read_without_another_request(
        tmp_path: Path) -> None:
    transport = FakeTransport(together=len(FILES))
    remote = store(transport, tmp_path)
    remote.prefetch_metadata(FILES)
    for key, data in FILES.items():  # read one after another, as a catalog does
        assert remote.read_bytes(key) == data
    assert transport.gets == Counter({key: 1 for key in FILES})


def test_an_early_response_serves_one_read_only(tmp_path: Path) -> None:
    entry = "entries/robots/entry.json"
    transport = FakeTransport()
    remote = store(transport, tmp_path)
    remote.prefetch_metadata([entry])
    assert remote.read_bytes(entry) == FILES[entry]
    transport.files[entry] = b'{"entry": 2}'  # changed since: read again, afresh
    assert remote.read_bytes(entry) == b'{"entry": 2}'
    assert transport.gets[entry] == 2


def test_catalog_json_is_fetched_once_per_store_and_afresh_by_a_new_one(tmp_path: Path) -> None:
    """A store's cache namespace is the hash of the ``catalog.json`` it read, so it keeps that
    copy; reopening the catalog (a new store) reads the current one."""
    transport = FakeTransport()
    remote = store(transport, tmp_path)
    assert remote.read_bytes("catalog.json") == FILES["catalog.json"]
    transport.files["catalog.json"] = b'{"catalog": 2}'
    remote.prefetch_metadata(["catalog.json"])  # known: no request
    assert remote.read_bytes("catalog.json") == FILES["catalog.json"]
    assert transport.gets["catalog.json"] == 1
    assert store(transport, tmp_path).read_bytes("catalog.json") == b'{"catalog": 2}'
    assert transport.gets["catalog.json"] == 2


def test_an_early_response_left_too_long_is_dropped(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    transport = FakeTransport()
    remote = store(transport, tmp_path)
    monkeypatch.setattr(_early, "EARLY_TTL_S", -1.0)  # every response is already too old
    remote.prefetch_metadata(["catalog.json"])
    assert remote.read_bytes("catalog.json") == FILES["catalog.json"]
    assert transport.gets["catalog.json"] == 2


def test_a_missing_file_read_early_raises_as_its_own_request_would(tmp_path: Path) -> None:
    transport = FakeTransport()
    remote = store(transport, tmp_path)
    remote.prefetch_metadata(["entries/nope/entry.json"])
    with pytest.raises(FileNotFoundError):
        remote.read_bytes("entries/nope/entry.json")


def test_an_immutable_file_already_cached_is_not_requested_again(tmp_path: Path) -> None:
    snapshot = "entries/robots/versions/000000000001.json"
    first = store(FakeTransport(), tmp_path)
    assert first.read_bytes(snapshot) == FILES[snapshot]  # cached under the catalog's identity
    transport = FakeTransport()
    again = store(transport, tmp_path)
    again.prefetch_metadata([snapshot])
    assert again.read_bytes(snapshot) == FILES[snapshot]
    assert transport.gets[snapshot] == 0


def test_offline_nothing_is_requested_early(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    transport = FakeTransport()
    monkeypatch.setenv("RAYFORM_OFFLINE", "1")
    store(transport, tmp_path).prefetch_metadata(FILES)
    assert transport.gets == Counter()
