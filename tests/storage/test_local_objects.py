"""A local catalog's objects made in memory, and object folders fsynced once for many objects."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import rayform._atomic as atomic
import rayform.storage._local as local
from rayform.storage._local import LocalStore
from rayform.storage._store import object_key


def _synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    synced: list[str] = []
    real = atomic.fsync_dir

    def fsync_dir(path: Path) -> None:
        synced.append(str(path))
        real(path)

    monkeypatch.setattr(local, "fsync_dir", fsync_dir)
    return synced


def test_an_object_made_in_memory_is_stored_under_its_digest(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    digest, size = store.put_object_bytes(b"blocks")
    assert (digest, size) == (hashlib.sha256(b"blocks").hexdigest(), 6)
    assert (tmp_path / object_key(digest)).read_bytes() == b"blocks"
    assert store.put_object_bytes(b"blocks") == (digest, size)  # stored once
    assert not any((tmp_path / ".staging").iterdir())


def test_an_object_name_is_durable_when_put_returns(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalStore(tmp_path)
    synced = _synced(monkeypatch)
    digest, _ = store.put_object_bytes(b"one")
    assert str((tmp_path / object_key(digest)).parent) in synced


def test_deferred_folder_syncs_fsync_each_folder_once_when_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalStore(tmp_path)
    synced = _synced(monkeypatch)
    datas = [b"%d" % i for i in range(40)]  # 40 objects: several share a folder
    pending: set[str] = set()
    with store.folder_syncs_deferred(pending):
        digests = [store.put_object_bytes(data)[0] for data in datas]
    folders = {str((tmp_path / object_key(d)).parent) for d in digests}
    assert len(folders) < len(digests)
    assert pending == folders
    assert not set(synced) & folders, "deferred: nothing names them yet"
    store.sync_folders(pending)
    assert sorted(s for s in synced if s in folders) == sorted(folders)
    # Outside the context, the store is back to fsyncing each name at once.
    digest, _ = store.put_object_bytes(b"after")
    assert str((tmp_path / object_key(digest)).parent) in synced
