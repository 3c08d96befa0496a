"""Damaged recordings are refused at registration: a checksum over the native file's header,
schema and batches (format version 2 on), and full Arrow validation of every file registered, so
nothing invalid is ever content-addressed into a catalog (a later query over it could crash)."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from recording_factories import RecordingFactory

from rayform.catalog import DatasetEntry
from rayform.errors import CorruptRecordingError
from rayform.recording._checksum import stored_messages
from rayform.recording._file import HEADER_KEY, open_recording

Guard = Callable[[Path], AbstractContextManager[None]]


@pytest.fixture
def root(robots: DatasetEntry) -> Path:
    return Path(robots.catalog.url)


def _batch_bodies(path: Path) -> list[tuple[int, int]]:
    """(file offset, size) of each record batch body of an Arrow IPC file."""
    with pa.memory_map(str(path), "r") as mm:
        data = mm.read_buffer()
        return [(body.address - data.address, body.size) for _, body in stored_messages(data)]


def _flip(path: Path, offset: int, *, bit: int = 0x10) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= bit
    path.write_bytes(bytes(data))


def _as_version_1(src: Path, dest: Path) -> Path:
    """The same recording written as format version 1 (no checksum), as older rayform did."""
    table = pa.ipc.open_file(pa.memory_map(str(src), "r")).read_all()
    header = json.loads(table.schema.metadata[HEADER_KEY])
    header.pop("content_sha256")
    header["format_version"] = 1
    table = table.replace_schema_metadata({HEADER_KEY: json.dumps(header).encode()})
    with pa.OSFile(str(dest), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return dest


def test_writer_stores_a_checksum_that_registration_checks(recording_factory: RecordingFactory
                                                           ) -> None:
    header, _ = open_recording(recording_factory("ok"))
    assert header.format_version == 3
    assert header.content_sha256 is not None and len(header.content_sha256) == 64


@pytest.mark.parametrize("where", ["first batch", "middle batch", "last batch"])
def test_bit_flipped_payload_is_refused(robots: DatasetEntry, root: Path, disk_unchanged: Guard,
                                        recording_factory: RecordingFactory, where: str) -> None:
    path = recording_factory("flip", filename="flip.rfr")
    bodies = _batch_bodies(path)
    offset, size = {"first batch": bodies[0], "middle batch": bodies[len(bodies) // 2],
                    "last batch": bodies[-1]}[where]
    _flip(path, offset + size // 2)
    with disk_unchanged(root), pytest.raises(CorruptRecordingError,
                                             match=r"flip\.rfr: checksum mismatch"):
        robots.register(path)


def test_header_value_flip_is_refused(robots: DatasetEntry, root: Path, disk_unchanged: Guard,
                                      recording_factory: RecordingFactory) -> None:
    """A flip that keeps the header valid JSON (a property value) changes what it says."""
    path = recording_factory("hdr", filename="hdr.rfr", seed=1)
    data = path.read_bytes()
    assert data.count(b'"site":"lab-a"') >= 1
    path.write_bytes(data.replace(b'"site":"lab-a"', b'"site":"lab-c"'))
    with disk_unchanged(root), pytest.raises(CorruptRecordingError,
                                             match=r"hdr\.rfr: checksum mismatch"):
        robots.register(path)


def test_header_that_is_not_utf8_names_the_file(robots: DatasetEntry, root: Path,
                                                disk_unchanged: Guard,
                                                recording_factory: RecordingFactory) -> None:
    path = recording_factory("utf", filename="utf.rfr")
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"recording_id":"utf"', b'"recording_id":"\xff\xfe\xfd"'))
    with disk_unchanged(root), pytest.raises(
            CorruptRecordingError, match=r"utf\.rfr: recording header is not valid UTF-8 JSON"):
        robots.register(path)


def _damage_list_offsets(path: Path) -> None:
    """Point the last list offset of the /cam0/rgb blobs far past the values (a flipped bit in
    an offsets buffer): the file still opens, but the list reaches outside its buffer."""
    rows = 10  # 30 frames, one JPEG every 3rd
    pattern = np.arange(rows + 1, dtype=np.int32).tobytes()
    data = bytearray(path.read_bytes())
    at = data.find(pattern)
    assert at > 0
    data[at + 4 * rows + 2] ^= 0x40  # offset 10 -> 10 + (0x40 << 16)
    path.write_bytes(bytes(data))


def test_damaged_list_offsets_of_a_checksummed_file_are_refused(
        robots: DatasetEntry, root: Path, disk_unchanged: Guard,
        recording_factory: RecordingFactory) -> None:
    path = recording_factory("offs", filename="offs.rfr")
    _damage_list_offsets(path)
    with disk_unchanged(root), pytest.raises(CorruptRecordingError,
                                             match=r"offs\.rfr: checksum mismatch"):
        robots.register(path)


def test_damaged_list_offsets_without_a_checksum_are_refused(
        robots: DatasetEntry, root: Path, disk_unchanged: Guard, tmp_path: Path,
        recording_factory: RecordingFactory) -> None:
    """A version 1 file has no checksum: full Arrow validation still refuses it."""
    path = _as_version_1(recording_factory("offs1"), tmp_path / "offs1.rfr")
    _damage_list_offsets(path)
    open_recording(path)  # it opens: only full validation sees the damage
    with disk_unchanged(root), pytest.raises(
            CorruptRecordingError, match=r"offs1\.rfr: recording holds invalid Arrow data"):
        robots.register(path)
    assert robots.refresh().segment_ids() == ["ep0", "ep1", "ep2"]


def test_version_1_recordings_still_register(robots: DatasetEntry, tmp_path: Path,
                                             recording_factory: RecordingFactory) -> None:
    path = _as_version_1(recording_factory("old", seed=4), tmp_path / "old.rfr")
    robots.register(path).wait()
    assert "old" in robots.segment_ids()
    old = robots.open_segment("old").column("/joints/position:Scalars:scalars", "frame_index")
    assert len(old) == 30


def test_checksum_is_stable_across_rewrites(recording_factory: RecordingFactory) -> None:
    """Two writes of the same content give the same checksum (it covers content, not time)."""
    first, _ = open_recording(recording_factory("same", seed=3, filename="a.rfr"))
    second, _ = open_recording(recording_factory("same", seed=3, filename="b.rfr"))
    assert first.content_sha256 == second.content_sha256
    other, _ = open_recording(recording_factory("same", seed=4, filename="c.rfr"))
    assert other.content_sha256 != first.content_sha256
