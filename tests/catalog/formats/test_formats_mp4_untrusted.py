"""A damaged MP4 whose tags are no longer UTF-8 (a flip at byte 27 of the real Intel video) is
CorruptRecordingError naming the file, not PyAV's UnicodeDecodeError."""

from __future__ import annotations

from pathlib import Path

import pytest

from rayform.catalog import Catalog
from rayform.errors import CorruptRecordingError

pytest.importorskip("av")
VIDEO = Path(__file__).resolve().parents[3] / ".." / "shared" / "realdata" / (
    "intel-sample-videos/bottle-detection.mp4")


@pytest.mark.realdata
def test_a_tag_flipped_out_of_utf8_is_a_corrupt_recording(tmp_path: Path,
                                                          catalog: Catalog) -> None:
    if not VIDEO.is_file():
        pytest.skip(f"{VIDEO} is absent (../shared/realdata)")
    data = bytearray(VIDEO.read_bytes())
    data[27] ^= 0x80
    bad = tmp_path / "flipped.mp4"
    bad.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordingError, match=r"flipped\.mp4.* is not a readable video file"):
        catalog.create_dataset("x").register(bad)
