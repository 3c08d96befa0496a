"""Local failures are named for what they are: a full disk (real ENOSPC from ``/dev/full``) is a
``DiskFullError`` naming the folder, and an object that is gone is an ``ObjectMissingError``."""

from __future__ import annotations

import errno
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from recording_factories import RecordingFactory

import rayform
import rayform.storage._local as local_store
from rayform.catalog import Catalog, DatasetEntry, check_catalog
from rayform.errors import DiskFullError, LocalStorageError, ObjectMissingError, RayformError
from rayform.storage import object_key

Guard = Callable[[Path], AbstractContextManager[None]]
FULL = Path("/dev/full")  # every write fails with ENOSPC

pytestmark = pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full (Linux)")


@pytest.fixture
def root(robots: DatasetEntry) -> Path:
    return Path(robots.catalog.url)


def test_full_disk_while_storing_names_the_catalog(robots: DatasetEntry, root: Path,
                                                   disk_unchanged: Guard,
                                                   recording_factory: RecordingFactory,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    real_copy, real_write = local_store.copy_hashed, local_store.write_durably
    monkeypatch.setattr(local_store, "copy_hashed", lambda src, dest: real_copy(src, FULL))
    # (objects made in memory, the block-hash objects, are written by another route)
    monkeypatch.setattr(local_store, "write_durably", lambda path, data: real_write(FULL, data))
    recording = recording_factory("new", seed=7)
    with disk_unchanged(root), pytest.raises(DiskFullError) as info:
        robots.register(recording)
    err = info.value
    assert isinstance(err, OSError) and isinstance(err, LocalStorageError)
    assert err.errno == errno.ENOSPC
    assert f"no space is left on the filesystem of {root}" in str(err)
    assert "free space there" in str(err)
    assert robots.refresh().segment_ids() == ["ep0", "ep1", "ep2"]


def test_full_disk_while_writing_a_recording_names_the_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_file = pa.OSFile
    monkeypatch.setattr(pa, "OSFile", lambda path, mode="r": real_file(str(FULL), mode))
    folder = tmp_path / "recordings"
    folder.mkdir()
    writer = rayform.RecordingWriter(folder / "ep.rfr", recording_id="ep")
    writer.log_scalars("/x", timelines={"frame_index": np.arange(1000)},
                       values=np.arange(1000.0))
    with pytest.raises(DiskFullError, match=rf"writing recording .*ep\.rfr: no space is left on "
                                            rf"the filesystem of {folder}"):
        writer.close()
    assert list(folder.iterdir()) == []  # no partial file


def test_missing_object_is_object_missing_error(robots: DatasetEntry, root: Path) -> None:
    record = robots.segment_record("ep1")
    path = root / object_key(record.layers["base"].object)
    path.chmod(0o644)
    path.unlink()
    view = Catalog.open(root).get_dataset("robots")
    with pytest.raises(ObjectMissingError, match=r"is missing from catalog .*restore the object"
                       ) as info:
        view.open_segment("ep1").column("/joints/position:Scalars:scalars", "frame_index")
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, RayformError)


def _full_for(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """pyarrow's writes of files called ``name`` go to /dev/full (real ENOSPC from pyarrow)."""
    real_file = pa.OSFile

    def os_file(path: str, mode: str = "r") -> pa.NativeFile:
        return real_file(str(FULL) if Path(path).name == name and "w" in mode else path, mode)

    monkeypatch.setattr(pa, "OSFile", os_file)


def test_full_disk_while_writing_the_segment_index_names_the_staging_folder(
        robots: DatasetEntry, root: Path, disk_unchanged: Guard,
        recording_factory: RecordingFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    recording = recording_factory("new", seed=7)
    _full_for(monkeypatch, "segment-index.arrow")
    # The recording is stored by then: an unreferenced object, as a killed writer leaves one.
    with disk_unchanged(root / "entries"), pytest.raises(DiskFullError) as info:
        robots.register(recording)
    assert info.value.errno == errno.ENOSPC
    assert re.search(rf"writing a segment index for catalog {re.escape(str(root))}: no space is "
                     rf"left on the filesystem of {re.escape(str(root))}/\.staging/", str(info.value))
    assert robots.refresh().segment_ids() == ["ep0", "ep1", "ep2"]
    assert not (root / ".staging").exists() or not any((root / ".staging").iterdir())
    report = check_catalog(root)
    # the new segment's recording (too small for a block-hash object) was stored before the
    # index: gc's
    assert report.ok and report.unreferenced_objects == 1


def test_full_disk_while_writing_table_rows_names_the_staging_folder(
        robots: DatasetEntry, root: Path, disk_unchanged: Guard,
        monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = robots.catalog
    table = catalog.create_table("notes", pa.schema([("x", pa.int64())]))
    _full_for(monkeypatch, "table.arrow")
    with disk_unchanged(root), pytest.raises(DiskFullError, match=r"writing table rows for "
                                                                  r"catalog .*: no space is left "
                                                                  r"on the filesystem of .*staging"):
        table.append(pa.table({"x": [1, 2, 3]}))
    assert catalog.get_table("notes").to_arrow().num_rows == 0
