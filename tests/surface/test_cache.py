"""The local object cache: shared by processes, verified on read, nothing half-written left."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from surface_servers import DroppingProxy, Https, S3Server

import rayform
from rayform.errors import RemoteError
from rayform.storage._cache import ObjectCache
from rayform.storage._remote import RemoteStore

CHILD = r"""
import hashlib, pathlib, sys, time
import rayform
url, ready, go = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
catalog = rayform.Catalog.open(url)
records = catalog.get_dataset("robots").segment_records()
digests = [layer.object for r in records for layer in r.layers.values()]
ready.touch()
while not go.exists():
    time.sleep(0.002)
for d in digests:
    path = catalog.store.object_path(d)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == d, d
print("ok", len(digests))
"""


def object_digests(catalog: rayform.Catalog) -> list[str]:
    records = catalog.get_dataset("robots").segment_records()
    return [layer.object for r in records for layer in r.layers.values()]


def leftovers(cache_dir: Path) -> list[Path]:
    """Temporary files that should never outlive an operation."""
    tmp = cache_dir / "tmp"
    return [p for p in tmp.rglob("*") if p.is_file()] if tmp.exists() else []


def test_two_processes_fetch_the_same_objects_at_once(https_catalog: Https, cache_dir: Path,
                                                      tmp_path: Path) -> None:
    go = tmp_path / "go"
    ready = [tmp_path / f"ready{i}" for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, https_catalog.url, str(r), str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
             for r in ready]
    deadline = time.monotonic() + 120
    while not all(r.exists() for r in ready):
        assert time.monotonic() < deadline, "children did not start"
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.01)
    go.touch()  # both start fetching the same three objects now
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert all(out.decode().strip() == "ok 3" for out, _ in outs)
    # The cache's per-object lock made one process wait for the other's download.
    digests = object_digests(rayform.Catalog.open(https_catalog.url))
    assert [https_catalog.log.gets_of(d) for d in digests] == [1, 1, 1]
    assert https_catalog.log.refetched() == []
    cache = ObjectCache(cache_dir)
    assert all(cache.cached(d) is not None for d in digests)
    assert leftovers(cache_dir) == []


def test_a_corrupt_cached_file_is_fetched_again(https_catalog: Https, cache_dir: Path) -> None:
    catalog = rayform.Catalog.open(https_catalog.url)
    digest = object_digests(catalog)[0]
    path = catalog.store.object_path(digest)
    good = path.read_bytes()
    assert https_catalog.log.gets_of(digest) == 1
    os.chmod(path, 0o644)
    path.write_bytes(good[:100] + b"\x00" * 64 + good[164:])  # same size, flipped bytes
    fresh = rayform.Catalog.open(https_catalog.url)  # a new process would see the same
    again = fresh.store.object_path(digest)
    assert again.read_bytes() == good
    assert https_catalog.log.gets_of(digest) == 2
    assert fresh.get_dataset("robots").reader_arrow("frame_index").num_rows == 72


def test_a_truncated_cached_file_is_fetched_again(https_catalog: Https) -> None:
    catalog = rayform.Catalog.open(https_catalog.url)
    digest = object_digests(catalog)[1]
    path = catalog.store.object_path(digest)
    os.chmod(path, 0o644)
    with path.open("r+b") as fh:
        fh.truncate(10)
    assert rayform.Catalog.open(https_catalog.url).store.object_path(digest).stat().st_size > 10


def test_dropped_connections_are_retried(https_catalog: Https, cache_dir: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYFORM_REMOTE_ATTEMPTS", "4")
    catalog = rayform.Catalog.open(https_catalog.url)
    digest = object_digests(catalog)[0]
    https_catalog.log.drop_next = 3  # three half-sent bodies, then a good one
    path = catalog.store.object_path(digest)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert https_catalog.log.gets_of(digest) == 4
    assert leftovers(cache_dir) == []


def test_dropped_connections_end_in_a_clear_error_and_leave_nothing(
        https_catalog: Https, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYFORM_REMOTE_ATTEMPTS", "3")
    catalog = rayform.Catalog.open(https_catalog.url)
    digest = object_digests(catalog)[0]
    https_catalog.log.drop_next = 100
    with pytest.raises(RemoteError, match=r"failed after 3 attempt\(s\).*connection") as info:
        catalog.store.object_path(digest)
    assert digest in str(info.value)
    assert https_catalog.log.gets_of(digest) == 3
    assert not ObjectCache(cache_dir).path_of(digest).exists()
    assert leftovers(cache_dir) == []
    https_catalog.log.drop_next = 0  # the server recovers: the next read works
    assert catalog.store.object_path(digest).exists()


def test_registration_into_s3_leaves_its_files_in_the_cache(s3_url: str, cache_dir: Path,
                                                            tmp_path: Path) -> None:
    from surface_data import build_catalog

    catalog = build_catalog(s3_url, tmp_path / "src")
    store = catalog.store
    assert isinstance(store, RemoteStore)
    assert all(store.is_cached(d) for d in object_digests(catalog))
    assert leftovers(cache_dir) == []


def test_s3_downloads_cut_mid_body_are_retried_then_fail_cleanly(
        s3_url: str, s3_server: S3Server, tmp_path: Path, cache_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from surface_data import build_catalog

    build_catalog(s3_url, tmp_path / "src")
    port = int(s3_server.endpoint.rsplit(":", 1)[1])
    proxy = DroppingProxy(port)
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        monkeypatch.setenv("RAYFORM_REMOTE_ATTEMPTS", "3")
        fresh_cache = tmp_path / "cache2"
        monkeypatch.setenv("RAYFORM_CACHE_DIR", str(fresh_cache))
        catalog = rayform.Catalog.open(s3_url)
        digest, other = object_digests(catalog)[:2]
        proxy.drop_next = 2  # two cut bodies, then a whole one
        path = catalog.store.object_path(digest)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
        assert proxy.dropped == 2
        proxy.drop_next = 100
        with pytest.raises(RemoteError, match=rf"{other}.*failed after 3 attempt"):
            catalog.store.object_path(other)
        assert proxy.dropped == 5
        assert not ObjectCache(fresh_cache).path_of(other).exists()
        assert leftovers(fresh_cache) == []
    finally:
        proxy.close()


def test_a_lock_held_when_a_process_forks_is_released_for_everyone(tmp_path: Path) -> None:
    fcntl = pytest.importorskip("fcntl")
    cache = ObjectCache(tmp_path / "c")
    digest = "ab" * 32
    read_end, write_end = os.pipe()
    with cache._lock(digest):  # a background download holds it ...
        pid = os.fork()  # ... when a DataLoader worker forks
        if pid == 0:  # pragma: no cover - the child waits with the inherited descriptor open
            os.read(read_end, 1)
            os._exit(0)
    try:
        fd = os.open(cache.root / "locks" / f"{digest[:3]}.lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free although the child lives
        finally:
            os.close(fd)
    finally:
        os.write(write_end, b"x")
        os.waitpid(pid, 0)
