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
from rayform.recording import _written
from rayform.recording._file import open_recording
from rayform.recording._written import BLOCK_BYTES as WRITTEN_BLOCK_BYTES
from rayform.recording._written import written_file
from rayform.storage import _parts
from rayform.storage._block_hashes import BLOCK_BYTES, BlockHashes, hash_blocks


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


def test_the_writer_hands_over_the_block_digests_of_the_file_it_wrote(
        recording_factory: RecordingFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    assert WRITTEN_BLOCK_BYTES == BLOCK_BYTES, "registration would hash every file again"
    monkeypatch.setattr(_written, "BLOCK_DIGESTS_FROM_BYTES", 0)
    path = recording_factory("ep", num_frames=3000)  # several blocks
    written = written_file(path)
    assert written is not None
    assert path.stat().st_size > 2 * BLOCK_BYTES
    assert written.block_digests == hash_blocks(path).digests


def test_the_block_hash_object_of_a_moved_output_lists_the_stored_bytes(
        catalog: Catalog, recording_factory: RecordingFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parts, "DEFAULT_BLOCKS_FROM_BYTES", 0)  # a block-hash object however small
    monkeypatch.setattr(_written, "BLOCK_DIGESTS_FROM_BYTES", 0)
    path = recording_factory("ep", num_frames=3000)
    prepared = inspect_layer(path, source_uri=str(path), layer_name="base", converted=True)
    assert prepared.block_digests is not None
    stored = store_layer(catalog.store, prepared)
    assert not path.exists(), "moved, not copied"
    blocks = stored.layer.block_hashes
    assert blocks is not None
    listed = BlockHashes.from_bytes(catalog.store.object_path(blocks).read_bytes(), source="t")
    assert listed == hash_blocks(catalog.store.object_path(stored.layer.object))


def test_a_converted_file_replaced_after_writing_is_indexed_and_hashed_from_its_bytes(
        catalog: Catalog, recording_factory: RecordingFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Another recording put in place of the one written (a new inode at the same path): the
    layout the writer remembers for that path (its timelines, entities, block digests) is not
    taken for it."""
    monkeypatch.setattr(_parts, "DEFAULT_BLOCKS_FROM_BYTES", 0)  # a block-hash object however small
    path = recording_factory("ep", num_frames=600)
    other = recording_factory("ep", num_frames=2500, seed=7)
    os.replace(other, path)
    assert written_file(path) is None
    fast = inspect_layer(path, source_uri="s", layer_name="base", converted=True)
    _, table = open_recording(path)
    assert fast.source_sha256 is None and fast.block_digests is None
    assert fast.layer.num_rows == table.num_rows
    assert fast.layer.entities == inspect_layer(path, source_uri="s",
                                                layer_name="base").layer.entities
    stored = store_layer(catalog.store, fast)
    blocks = stored.layer.block_hashes
    assert blocks is not None
    listed = BlockHashes.from_bytes(catalog.store.object_path(blocks).read_bytes(), source="t")
    assert listed == hash_blocks(catalog.store.object_path(stored.layer.object))


@pytest.mark.parametrize("overlapped_from", [0, 1 << 62])
def test_a_checksum_computed_while_writing_gives_the_same_file(
        tmp_path: Path, recording_factory: RecordingFactory, monkeypatch: pytest.MonkeyPatch,
        overlapped_from: int) -> None:
    """A large recording is written with its header's checksum unset while the checksum is
    computed, then its header rewritten in place: the file is byte for byte the one written
    after computing the checksum, and verifies in full."""
    import rayform.recording._writer as writer
    from rayform.recording._checksum import verify_recording

    monkeypatch.setattr(_written, "BLOCK_DIGESTS_FROM_BYTES", 0)
    serial = recording_factory("ep", num_frames=900, filename="serial.rfr")
    monkeypatch.setattr(writer, "_OVERLAPPED_CHECKSUM_BYTES", overlapped_from)
    path = recording_factory("ep", num_frames=900, filename="overlapped.rfr")
    assert path.read_bytes() == serial.read_bytes()
    header, table = open_recording(path)
    verify_recording(path, header, table)
    written = written_file(path)
    assert written is not None
    assert written.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert written.block_digests == hash_blocks(path).digests


def test_below_the_block_hash_bound_the_writer_hashes_the_file_once_and_registration_its_blocks(
        catalog: Catalog, recording_factory: RecordingFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A file below the size from which registration stores a block-hash object (the writer's
    bound is the catalog's) gets no block digests from its writer; a registration that stores
    one for it all the same (the bound lowered) hashes its blocks from the file."""
    assert _written.BLOCK_DIGESTS_FROM_BYTES == _parts.DEFAULT_BLOCKS_FROM_BYTES
    path = recording_factory("ep", num_frames=3000)
    assert 2 * BLOCK_BYTES < path.stat().st_size < _written.BLOCK_DIGESTS_FROM_BYTES
    written = written_file(path)
    assert written is not None and written.block_digests is None
    assert written.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setattr(_parts, "DEFAULT_BLOCKS_FROM_BYTES", 0)
    prepared = inspect_layer(path, source_uri=str(path), layer_name="base", converted=True)
    assert prepared.source_sha256 == written.sha256 and prepared.block_digests is None
    expected = hash_blocks(path)
    stored = store_layer(catalog.store, prepared)
    assert stored.layer.block_hashes is not None
    listed = BlockHashes.from_bytes(
        catalog.store.object_path(stored.layer.block_hashes).read_bytes(), source="t")
    assert listed == expected


def test_the_writer_refuses_logged_data_that_is_not_valid_arrow(tmp_path: Path) -> None:
    """Registration trusts what the writer validated: an entity's own column that only a full
    validation finds bad (text that is not UTF-8) is refused when the recording is written (the
    columns of nulls around it are the writer's own)."""
    import numpy as np
    import pyarrow as pa

    from rayform.errors import ConfigError
    from rayform.recording import RecordingWriter

    offsets = pa.py_buffer(np.array([0, 1, 3], dtype=np.int32).tobytes())
    text = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"a\xff\xfe")])
    writer = RecordingWriter(tmp_path / "ep.rfr", recording_id="ep")
    writer.log_scalars("/ok", timelines={"frame_index": np.arange(3)}, values=np.ones(3))
    writer.log_columns("/bad", timelines={"frame_index": np.arange(2)},
                       components={"TextDocument:text": text})
    with pytest.raises(ConfigError, match=r"not valid Arrow"):
        writer.close()
    assert not (tmp_path / "ep.rfr").exists()
