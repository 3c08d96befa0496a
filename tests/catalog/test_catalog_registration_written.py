"""Registering an importer's output: what the writer validated, checksummed and hashed is not read
back again; the file is moved into the store under the digest the writer computed. Anything that
differs from what the writer left (a changed file, a file outside the staging folder) is verified
from its bytes as before."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from recording_factories import RecordingFactory

from rayform.catalog import Catalog
from rayform.catalog._registration import inspect_layer, store_layer
from rayform.errors import CorruptRecordingError
from rayform.recording._file import open_recording
from rayform.recording._written import written_file


def _flip_keeping_times(path: Path, offset: int) -> None:
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_the_writer_remembers_the_digest_of_the_file_it_wrote(
        recording_factory: RecordingFactory) -> None:
    path = recording_factory("ep")
    written = written_file(path)
    assert written is not None
    assert written.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_file_changed_after_writing_is_not_taken_from_the_writer(
        recording_factory: RecordingFactory) -> None:
    path = recording_factory("ep")
    path.write_bytes(path.read_bytes() + b"\0")
    assert written_file(path) is None


def test_an_importer_output_is_moved_into_the_store_under_its_digest(
        catalog: Catalog, recording_factory: RecordingFactory) -> None:
    path = recording_factory("ep", num_frames=600)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    header, table = open_recording(path)
    prepared = inspect_layer(path, source_uri=str(path), layer_name="base", converted=True)
    assert prepared.source_sha256 == digest
    assert prepared.layer.num_rows == table.num_rows
    stored = store_layer(catalog.store, prepared)
    assert stored.layer.object == digest
    assert not path.exists(), "moved, not copied"
    with pytest.raises(FileNotFoundError):
        path.stat()
    object_path = catalog.store.object_path(digest)
    assert hashlib.sha256(object_path.read_bytes()).hexdigest() == digest
    assert open_recording(object_path)[0] == header


def test_the_index_from_timelines_equals_the_full_read(recording_factory: RecordingFactory
                                                       ) -> None:
    path = recording_factory("ep", num_frames=600)
    fast = inspect_layer(path, source_uri="s", layer_name="base", converted=True)
    full = inspect_layer(path, source_uri="s", layer_name="base")
    assert fast.source_sha256 is not None and full.source_sha256 is None
    assert fast.layer.entities == full.layer.entities
    assert fast.schema == full.schema
    assert fast.timelines == full.timelines


def test_a_converted_file_damaged_in_place_is_still_refused(
        recording_factory: RecordingFactory) -> None:
    """A bit flipped with the size and times kept changes the inode's ctime only: the writer's
    record still names the file, so its identity must include what a rewrite changes."""
    path = recording_factory("ep", num_frames=600)
    _flip_keeping_times(path, path.stat().st_size // 2)
    with pytest.raises(CorruptRecordingError, match=r"checksum mismatch|invalid Arrow|readable"):
        inspect_layer(path, source_uri=str(path), layer_name="base", converted=True)


def test_a_damaged_native_source_is_refused_though_this_process_wrote_it(
        catalog: Catalog, recording_factory: RecordingFactory) -> None:
    """A recording given as a source (not converted into the registration's staging folder) is
    verified from its bytes whatever the writer remembers."""
    path = recording_factory("ep", num_frames=600)
    _flip_keeping_times(path, path.stat().st_size // 2)
    with pytest.raises(CorruptRecordingError):
        catalog.create_dataset("d").register(path).wait()
