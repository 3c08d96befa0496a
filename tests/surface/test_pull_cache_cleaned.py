"""``client.pull()`` while the cache is cleaned under it (files deleted between its steps, or by
a cleaner running alongside): what vanished is fetched again, or the pull fails with a rayform
error naming the cache — never a raw ``FileNotFoundError``, never data other than the source's."""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from surface_servers import Https
from test_offline import read_everything

import rayform
from rayform.catalog import _pull
from rayform.errors import RayformError


def _slice(local_catalog: rayform.Catalog) -> str:
    return rayform.Client(local_catalog).slices.create("robots", segments=["ep0", "ep2"]).id


def _wipe(cache_dir: Path) -> None:
    """Delete everything the cache holds (the folder itself may be gone too)."""
    with contextlib.suppress(FileNotFoundError):
        for folder in cache_dir.iterdir():
            shutil.rmtree(folder, ignore_errors=True)


def _reads_offline_like(local_catalog: rayform.Catalog, https_url: str, slice_id: str,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYFORM_OFFLINE", "1")
    slice_ = rayform.Client(https_url).slices.get(slice_id)
    assert read_everything(slice_.view()) == read_everything(slice_.view(local_catalog))
    monkeypatch.delenv("RAYFORM_OFFLINE")


@pytest.mark.parametrize("wipe_before", ["downloads", "dry_run"])
def test_a_cache_wiped_between_the_steps_of_a_pull_is_fetched_again(
        https_catalog: Https, local_catalog: rayform.Catalog, cache_dir: Path,
        monkeypatch: pytest.MonkeyPatch, wipe_before: str) -> None:
    slice_id = _slice(local_catalog)
    name = "offline_dry_run" if wipe_before == "dry_run" else "ThreadPoolExecutor"
    target: Callable[..., object] = getattr(_pull, name)
    calls = [0]

    def wiping(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        if calls[0] == 1:
            _wipe(cache_dir)
        return target(*args, **kwargs)

    monkeypatch.setattr(_pull, name, wiping)
    result = rayform.Client(https_catalog.url).pull(slice_id, progress=False)
    assert result.num_objects == 2 and calls[0] == 2  # the second round found everything
    monkeypatch.setattr(_pull, name, target)
    _reads_offline_like(local_catalog, https_catalog.url, slice_id, monkeypatch)


def test_a_pull_after_the_cache_was_wiped_fetches_everything_again(
        https_catalog: Https, local_catalog: rayform.Catalog, cache_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    slice_id = _slice(local_catalog)
    client = rayform.Client(https_catalog.url)
    first = client.pull(slice_id, progress=False)
    _wipe(cache_dir)
    again = client.pull(slice_id, progress=False)
    assert again.fetched_objects == first.num_objects == 2
    _reads_offline_like(local_catalog, https_catalog.url, slice_id, monkeypatch)


def test_a_cleaner_running_alongside_a_pull_never_gives_a_raw_error(
        https_catalog: Https, local_catalog: rayform.Catalog, cache_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    slice_id = _slice(local_catalog)
    stop = threading.Event()

    def cleaner() -> None:
        while not stop.is_set():
            _wipe(cache_dir)
            stop.wait(0.02)

    outcomes: list[str] = []
    thread = threading.Thread(target=cleaner, daemon=True)
    thread.start()
    try:
        for _ in range(8):
            try:
                rayform.Client(https_catalog.url).pull(slice_id, progress=False)
                outcomes.append("pulled")
            except RayformError as err:  # named: never a raw OSError from pyarrow or os
                assert str(cache_dir) in str(err) or "cache" in str(err), err
                outcomes.append(type(err).__name__)
    finally:
        stop.set()
        thread.join()
    assert len(outcomes) == 8
    rayform.Client(https_catalog.url).pull(slice_id, progress=False)
    _reads_offline_like(local_catalog, https_catalog.url, slice_id, monkeypatch)


@pytest.fixture
def blocks_however_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """These recordings are small: registered with block-hash objects and read block by block
    all the same (by default neither)."""
    from rayform.storage import _parts

    monkeypatch.setattr(_parts, "DEFAULT_BLOCKS_FROM_BYTES", 0)


def test_a_block_hash_object_removed_right_after_its_download_is_a_cache_error(
        blocks_however_small: None, https_catalog: Https, local_catalog: rayform.Catalog,
        cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race CI once hit: a cleaner deletes the block-hash object between its verified
    download and its read. The pull names the cache; a pull after it works."""
    from rayform.storage import _remote

    slice_id = _slice(local_catalog)
    download = _remote.RemoteStore._download
    blocks_seen: list[str] = []

    def vanishing(self: _remote.RemoteStore, digest: str) -> Path:
        path = download(self, digest)
        if digest in self._block_lists.values():
            blocks_seen.append(digest)
            path.unlink()
        return path

    monkeypatch.setattr(_remote.RemoteStore, "_download", vanishing)
    with pytest.raises(RayformError, match=r"block-hash object .* in the cache"):
        rayform.Client(https_catalog.url).pull(slice_id, progress=False)
    assert blocks_seen  # the catalog's objects do have block hashes: the race was reached
    monkeypatch.setattr(_remote.RemoteStore, "_download", download)
    rayform.Client(https_catalog.url).pull(slice_id, progress=False)
    _reads_offline_like(local_catalog, https_catalog.url, slice_id, monkeypatch)
