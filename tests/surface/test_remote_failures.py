"""Remote failures named for what they are: a hung server costs one deadline, not attempts x
timeout; a full cache disk is a DiskFullError after one attempt, not a "dropped connection"
retried; a cache file deleted while in use is fetched again once, then reported as missing."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from surface_servers import Https

import rayform
import rayform.storage._cache as cache_mod
import rayform.storage._parts as parts_mod
from rayform.catalog._snapshot import clear_cache
from rayform.errors import CacheError, DiskFullError, ObjectMissingError, RemoteError
from rayform.storage import RemoteStore

JOINTS = "/joints/position:Scalars:scalars"


@contextlib.contextmanager
def hung_server() -> Iterator[int]:
    """A TCP server on loopback that accepts connections and never answers; yields its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)  # the kernel completes handshakes; nobody ever reads or writes
    try:
        yield int(server.getsockname()[1])
    finally:
        server.close()


@pytest.fixture
def tight_deadline(monkeypatch: pytest.MonkeyPatch) -> float:
    """10 attempts of 0.5 s each would take 5 s; the deadline allows 1.5 s."""
    monkeypatch.setenv("RAYFORM_REMOTE_ATTEMPTS", "10")
    monkeypatch.setenv("RAYFORM_REMOTE_TIMEOUT_S", "0.5")
    monkeypatch.setenv("RAYFORM_REMOTE_DEADLINE_S", "1.5")
    return 1.5


def test_hung_https_server_costs_one_deadline(tight_deadline: float) -> None:
    with hung_server() as port:
        started = time.monotonic()
        with pytest.raises(RemoteError, match=r"RAYFORM_REMOTE_DEADLINE_S=1\.5 s") as info:
            rayform.Catalog.open(f"http://127.0.0.1:{port}/cat")
        spent = time.monotonic() - started
    assert tight_deadline - 0.1 <= spent < tight_deadline + 0.5, spent
    assert "catalog.json" in str(info.value)


def test_hung_s3_server_costs_at_most_deadline_plus_one_timeout(
        tight_deadline: float, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("boto3")
    with hung_server() as port:
        for name, value in {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
                            "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
                            "AWS_DEFAULT_REGION": "us-east-1"}.items():
            monkeypatch.setenv(name, value)
        started = time.monotonic()
        with pytest.raises(RemoteError, match="RAYFORM_REMOTE_DEADLINE_S"):
            rayform.Catalog.open("s3://bucket/cat")
        spent = time.monotonic() - started
    assert spent < tight_deadline + 0.5 + 1.0, spent


class _FullDisk:
    """Writes into ``/dev/full`` in place of the cache's download files (real ENOSPC on write),
    whether the download streams through a sink or lands in ranged parts."""

    def __init__(self) -> None:
        self.files: list[Any] = []
        self.fds: list[int] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_init = cache_mod.HashingSink.__init__

        def init(sink: Any, fh: Any, cache: Any) -> None:
            full = open("/dev/full", "wb", buffering=0)  # noqa: SIM115 - closed in close()
            self.files.append(full)
            real_init(sink, full, cache)

        monkeypatch.setattr(cache_mod.HashingSink, "__init__", init)
        full_fd = os.open("/dev/full", os.O_WRONLY)
        self.fds.append(full_fd)
        real_pwrite = os.pwrite
        monkeypatch.setattr(parts_mod.os, "pwrite",
                            lambda fd, data, at: real_pwrite(full_fd, data, at))

    def close(self) -> None:
        for fh in self.files:
            fh.close()
        for fd in self.fds:
            os.close(fd)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_full_cache_disk_is_not_a_dropped_connection(https_catalog: Https, cache_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    remote = rayform.Catalog.open(https_catalog.url).get_dataset("robots")
    digest = remote.segment_record("ep0").layers["base"].object
    full = _FullDisk()
    full.install(monkeypatch)
    try:
        with pytest.raises(DiskFullError) as info:
            remote.open_segment("ep0").column(JOINTS, "frame_index")
    finally:
        full.close()
    assert info.value.errno == errno.ENOSPC
    assert f"on the filesystem of {cache_dir}" in str(info.value)
    assert "RAYFORM_CACHE_DIR" in str(info.value)
    # Never retried as if the network failed (the write that failed was the recording's
    # block-hash object, the first thing fetched to read the recording).
    assert https_catalog.log.refetched() == [], https_catalog.log.object_gets()
    assert https_catalog.log.gets_of(digest) <= 1


def _unlink_after_resolving(monkeypatch: pytest.MonkeyPatch, times: int) -> list[str]:
    """Make ``object_path`` delete the cached file it returns, ``times`` times (a cache cleaned
    between finding a file and opening it)."""
    real = RemoteStore.object_path
    deleted: list[str] = []

    def object_path(self: RemoteStore, digest: str) -> Path:
        path = real(self, digest)
        if len(deleted) < times:
            path.unlink()
            deleted.append(digest)
        return path

    monkeypatch.setattr(RemoteStore, "object_path", object_path)
    return deleted


def test_cache_file_deleted_while_in_use_is_fetched_again(https_catalog: Https,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    remote = rayform.Catalog.open(https_catalog.url).get_dataset("robots")
    digest = remote.segment_record("ep0").layers["base"].object
    deleted = _unlink_after_resolving(monkeypatch, times=1)
    rows = remote.open_segment("ep0").column(JOINTS, "frame_index")
    assert len(rows) == 24
    assert deleted == [digest]
    assert https_catalog.log.gets_of(digest) == 2


def test_cache_file_deleted_twice_is_reported_missing(https_catalog: Https,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    remote = rayform.Catalog.open(https_catalog.url).get_dataset("robots")
    digest = remote.segment_record("ep0").layers["base"].object
    _unlink_after_resolving(monkeypatch, times=2)
    with pytest.raises(ObjectMissingError, match=rf"object {digest} of catalog .* vanished while "
                                                 r"being read, twice"):
        remote.open_segment("ep0").column(JOINTS, "frame_index")


def _vanishing_cache(monkeypatch: pytest.MonkeyPatch, cache_dir: Path, times: int) -> None:
    """The cache's temporary file disappears just before it is renamed into place, ``times``
    times (another process cleaning the cache folder)."""
    real_replace = os.replace
    count = [0]

    def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if count[0] < times and str(dst).startswith(str(cache_dir)):
            count[0] += 1
            os.unlink(src)
        real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


def test_cache_deleted_while_caching_metadata_is_not_a_missing_catalog(
        https_catalog: Https, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _vanishing_cache(monkeypatch, cache_dir, times=1)
    clear_cache()
    catalog = rayform.Catalog.open(https_catalog.url)  # not "is not a rayform catalog"
    assert catalog.dataset_names() == ["robots"]


def test_cache_that_keeps_vanishing_is_a_cache_error(https_catalog: Https, cache_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _vanishing_cache(monkeypatch, cache_dir, times=100)
    with pytest.raises(CacheError, match=r"the folder was deleted or replaced while in use"):
        rayform.Catalog.open(https_catalog.url)


def test_cache_dir_that_is_a_file(https_catalog: Https, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    not_a_folder = tmp_path / "cache-file"
    not_a_folder.write_text("oops")
    monkeypatch.setenv("RAYFORM_CACHE_DIR", str(not_a_folder))
    with pytest.raises(CacheError, match=rf"cache folder {not_a_folder} is a file, not a folder; "
                                         r"point RAYFORM_CACHE_DIR at a folder"):
        rayform.Catalog.open(https_catalog.url)
