"""Durability of a local commit: every object, the snapshot and the listings are fsynced, and so
are the folders naming them, before the commit point is published and before ``register`` returns.

A real power loss cannot be simulated here without a filesystem that drops unsynced data
(dm-flakey needs root and a block device); process crashes are tested in tests/e2e. This test
pins down the order of ``fsync`` / ``rename`` / ``link`` calls that makes a power loss safe: the
bytes of a file reach the disk before its name does, and a name before anything refers to it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from recording_factories import RecordingFactory

from rayform.catalog import DatasetEntry

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")

Event = tuple[str, str, str]


def _record(monkeypatch: pytest.MonkeyPatch) -> list[Event]:
    events: list[Event] = []
    real_fsync, real_link, real_replace = os.fsync, os.link, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"), ""))
        real_fsync(fd)

    def link(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        real_link(src, dst, *args, **kwargs)
        events.append(("link", str(src), str(dst)))

    def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        real_replace(src, dst, *args, **kwargs)
        events.append(("replace", str(src), str(dst)))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(os, "replace", replace)
    return events


def _fsynced(events: list[Event], path: str, *, before: int, after: int = -1) -> bool:
    return any(kind == "fsync" and target == path
               for kind, target, _ in events[after + 1:before])


def test_register_makes_every_file_and_folder_durable_before_the_commit(
        robots: DatasetEntry, recording_factory: RecordingFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from rayform.storage import _parts

    # A recording this small has no block-hash object by default: give it one, made durable too.
    monkeypatch.setattr(_parts, "DEFAULT_BLOCKS_FROM_BYTES", 0)
    root = Path(robots.catalog.url)
    recording = recording_factory("durable", seed=8)
    events = _record(monkeypatch)
    robots.register(recording).wait()
    commits = [i for i, (kind, _, dst) in enumerate(events)
               if kind == "link" and "/versions/" in dst]
    assert len(commits) == 1
    commit = commits[0]
    _, snapshot_tmp, snapshot = events[commit]
    # the snapshot: bytes before the link, its folder after it
    assert _fsynced(events, snapshot_tmp, before=commit)
    assert _fsynced(events, str(Path(snapshot).parent), before=len(events), after=commit)
    # every object stored by this registration (the recording, its block-hash object and the new
    # segment index): bytes before the rename, the rename before the commit
    stored = [(i, src, dst) for i, (kind, src, dst) in enumerate(events)
              if kind == "replace" and "/objects/" in dst]
    assert len(stored) == 3
    for i, src, dst in stored:
        assert i < commit
        assert _fsynced(events, src, before=i), f"object {dst} was not fsynced before its rename"
        assert _fsynced(events, str(Path(dst).parent), before=commit, after=i), \
            f"the folder of {dst} was not fsynced before the commit"
    # listings above the snapshot: durable too
    listings = [(i, src, dst) for i, (kind, src, dst) in enumerate(events)
                if kind == "replace" and dst.endswith(".listing.json")]
    assert listings, "the versions listing was not refreshed"
    for i, src, dst in listings:
        assert _fsynced(events, src, before=i)
        assert _fsynced(events, str(Path(dst).parent), before=len(events), after=i)
    assert str(root) in snapshot


def test_first_commit_makes_new_folders_durable(catalog: Any, recording_factory: RecordingFactory,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A new dataset's folders (entries/<name>, its versions/) are fsynced in their parents."""
    root = Path(catalog.url)
    events = _record(monkeypatch)
    catalog.create_dataset("fresh").register(recording_factory("first")).wait()
    synced = {target for kind, target, _ in events if kind == "fsync"}
    for folder in (root / "entries", root / "entries" / "fresh",
                   root / "entries" / "fresh" / "versions"):
        assert str(folder) in synced, folder
