"""Undecodable video follows on_decode_error: an MP4 whose first 64 KiB of sample data are zeroed
raises DecodeError by default, and with 'skip' a batch whose samples all failed is a DecodeError
(map dataset) or left out (iterable dataset), never a raw IndexError in torch's collate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from torch.utils.data import DataLoader
from video_fixtures import VIDEO_ASSET_TIMESTAMP, synthetic_frames

from rayform.catalog import Catalog, DatasetEntry, RecordingWriter
from rayform.dataloader import DataSource, Field, RerunIterableDataset, RerunMapDataset
from rayform.decoders import VideoFrameDecoder
from rayform.errors import DecodeError
from rayform.media._video_asset import probe_video_asset
from rayform.media._video_encode import write_video_mp4

pytest.importorskip("av")
NUM_FRAMES = 40


@pytest.fixture
def zeroed_video(tmp_path: Path) -> DatasetEntry:
    """A dataset of one segment whose MP4's first 64 KiB of sample data (mdat) are zeros."""
    frames = synthetic_frames(NUM_FRAMES, height=240, width=320, seed=0)
    video = write_video_mp4(tmp_path / "v.mp4", frames, codec="h264", gop=10, fps=30)
    info = probe_video_asset(video)
    data = bytearray(video.read_bytes())
    start = data.find(b"mdat") + 4
    size = min(64 << 10, len(data) - start)
    data[start:start + size] = bytes(size)
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(bytes(data))
    with RecordingWriter(tmp_path / "ep.rfr", recording_id="ep") as rec:
        rec.log_video_asset("/cam", bad, timelines={"frame_index": np.arange(NUM_FRAMES)},
                            frame_timestamps_ns=info.frame_timestamps_ns,
                            is_keyframe=info.is_keyframe)
    dataset = Catalog.create(tmp_path / "catalog").create_dataset("v")
    dataset.register([tmp_path / "ep.rfr"]).wait()
    return dataset


def _fields() -> dict[str, Field]:
    return {"image": Field(VIDEO_ASSET_TIMESTAMP, VideoFrameDecoder())}


def test_zeroed_sample_data_raises_decode_error_by_default(zeroed_video: DatasetEntry) -> None:
    ds = RerunMapDataset(DataSource(zeroed_video), "frame_index", _fields())
    with pytest.raises(DecodeError, match="segment 'ep' at frame_index = 0 could not be decoded"):
        ds.__getitems__(list(range(NUM_FRAMES)))
    iterable = RerunIterableDataset(DataSource(zeroed_video), "frame_index", _fields())
    with pytest.raises(DecodeError, match="could not be decoded"):
        list(iterable)


def test_an_all_skipped_map_batch_is_a_decode_error_not_an_index_error(
        zeroed_video: DatasetEntry) -> None:
    ds = RerunMapDataset(DataSource(zeroed_video), "frame_index", _fields(),
                         on_decode_error="skip")
    loader = DataLoader(ds, batch_size=4)
    with pytest.warns(RuntimeWarning), pytest.raises(DecodeError, match="empty batch"):
        next(iter(loader))


def test_all_skipped_iterable_batches_are_left_out(zeroed_video: DatasetEntry) -> None:
    ds = RerunIterableDataset(DataSource(zeroed_video), "frame_index", _fields(),
                              on_decode_error="skip", batch_size=4)
    with pytest.warns(RuntimeWarning):
        batches = list(ds)
    assert batches == []
