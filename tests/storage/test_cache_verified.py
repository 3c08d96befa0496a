"""ObjectCache: a cached object is hashed once per process, whichever cache handle opens it, and
again whenever the file is not the one that was hashed."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from rayform.storage import _cache
from rayform.storage._cache import ObjectCache


@pytest.fixture
def hashes(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files ``ObjectCache`` hashes, in order."""
    seen: list[Path] = []
    real = _cache.sha256_file

    def counting(path: Path) -> str:
        seen.append(Path(path))
        return real(path)

    monkeypatch.setattr(_cache, "sha256_file", counting)
    return seen


def stored(root: Path, data: bytes) -> tuple[str, Path]:
    """``data`` placed in the cache folder as another process would leave it (not hashed here)."""
    digest = hashlib.sha256(data).hexdigest()
    path = root / "objects" / digest[:2] / digest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return digest, path


def test_a_second_cache_handle_in_the_process_does_not_hash_again(
        tmp_path: Path, hashes: list[Path]) -> None:
    digest, path = stored(tmp_path, b"episode bytes" * 1000)
    assert ObjectCache(tmp_path).cached(digest) == path
    assert ObjectCache(tmp_path).cached(digest) == path  # the next epoch's catalog handle
    assert hashes == [path]


def test_a_downloaded_object_is_not_hashed_again_by_another_handle(
        tmp_path: Path, hashes: list[Path]) -> None:
    data = b"downloaded" * 1000
    digest = hashlib.sha256(data).hexdigest()
    src = tmp_path / "src"
    src.write_bytes(data)
    root = tmp_path / "cache"
    installed = ObjectCache(root).add_file(src, digest)
    hashes.clear()
    assert ObjectCache(root).cached(digest) == installed
    assert hashes == []


def test_a_replaced_file_is_hashed_again_and_a_corrupt_one_removed(
        tmp_path: Path, hashes: list[Path]) -> None:
    data = b"episode bytes" * 1000
    digest, path = stored(tmp_path, data)
    assert ObjectCache(tmp_path).cached(digest) == path
    forged = tmp_path / "forged"
    forged.write_bytes(b"x" + data[1:])  # same size, another file (inode)
    os.replace(forged, path)
    assert ObjectCache(tmp_path).cached(digest) is None
    assert not path.exists()
    assert hashes == [path, path]


def test_the_memo_of_hashed_objects_is_bounded(tmp_path: Path, hashes: list[Path],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cache, "_VERIFIED", {})
    monkeypatch.setattr(_cache, "_VERIFIED_MAX", 1)
    first, first_path = stored(tmp_path, b"first" * 100)
    second, second_path = stored(tmp_path, b"second" * 100)
    cache = ObjectCache(tmp_path)
    assert cache.cached(first) == first_path
    assert cache.cached(second) == second_path  # the memo starts afresh: first forgotten
    assert cache.cached(first) == first_path
    assert hashes == [first_path, second_path, first_path]
    assert len(_cache._VERIFIED) == 1
