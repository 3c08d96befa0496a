"""Video decode failures follow the dataset's policy (as images do); a video file that is gone,
offline or unreadable for a reason other than its content always propagates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from video_fixtures import FRAME_NUMBER, VIDEO_ASSET_TIMESTAMP, synthetic_frames, video_dataset

import rayform.decoders._asset_cache as asset_cache
from rayform.catalog import Catalog, DatasetEntry, RecordingWriter
from rayform.dataloader import DataSource, Field, NumericDecoder, RerunMapDataset
from rayform.decoders import VideoFrameDecoder
from rayform.errors import DecodeError, ObjectMissingError, OfflineError
from rayform.media._video_encode import encode_video_packets
from rayform.storage import object_key

GOP = 4
BROKEN_GOP = 2  # rows 8..11: their keyframe packet is garbage


def _broken_stream(tmp_path: Path) -> DatasetEntry:
    frames = synthetic_frames(16)
    packets, is_keyframe = encode_video_packets(frames, codec="h264", gop=GOP, fps=30)
    packets = list(packets)
    packets[BROKEN_GOP * GOP] = b"\x00\x00\x00\x01\x65" + b"\x13" * 64
    timelines = {"frame_index": np.arange(16)}
    with RecordingWriter(tmp_path / "ep.rfr", recording_id="ep") as rec:
        rec.log_video_stream("/cam", timelines=timelines, samples=packets,
                             is_keyframe=is_keyframe, codec="h264")
        rec.log_scalars("/frame_number", timelines=timelines, values=np.arange(16))
    dataset = Catalog.create(tmp_path / "catalog").create_dataset("video")
    dataset.register(tmp_path / "ep.rfr").wait()
    return dataset


def _fields(path: str = "/cam:VideoStream:sample") -> dict[str, Field]:
    return {"image": Field(path, VideoFrameDecoder()), "frame": Field(FRAME_NUMBER,
                                                                       NumericDecoder())}


def test_undecodable_frames_raise_naming_segment_entity_and_index(tmp_path: Path) -> None:
    dataset = _broken_stream(tmp_path)
    ds = RerunMapDataset(DataSource(dataset), "frame_index", _fields())
    assert ds[BROKEN_GOP * GOP - 1]["image"] is not None
    with pytest.raises(DecodeError, match=r"dataset 'video': field 'image' \(entity '/cam', "
                                          r"column '/cam:VideoStream:sample'\) of segment 'ep' at "
                                          rf"frame_index = {BROKEN_GOP * GOP + 1} could not be "
                                          r"decoded"):
        ds[BROKEN_GOP * GOP + 1]
    lenient = RerunMapDataset(DataSource(dataset), "frame_index", _fields(),
                              on_decode_error="none")
    with pytest.warns(RuntimeWarning, match="such samples are None"):
        assert lenient.__getitems__([BROKEN_GOP * GOP + 1])[0]["image"] is None


def test_a_missing_video_file_propagates(tmp_path: Path) -> None:
    dataset, _ = video_dataset(tmp_path, [12], codec="h264", gop=4, as_asset=True)
    ds = RerunMapDataset(DataSource(dataset), "frame_index", _fields(VIDEO_ASSET_TIMESTAMP))
    asset = next(iter(dataset.segment_record("ep0").layers["base"].assets))
    (Path(dataset.catalog.url) / object_key(asset)).unlink()
    with pytest.raises(ObjectMissingError, match=rf"object {asset} is missing from catalog"):
        ds[3]


def test_offline_while_reading_a_video_propagates(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    dataset, _ = video_dataset(tmp_path, [12], codec="h264", gop=4, as_asset=True)
    ds = RerunMapDataset(DataSource(dataset), "frame_index", _fields(VIDEO_ASSET_TIMESTAMP))

    def offline(*args: object, **kwargs: object) -> None:
        raise OfflineError("RAYFORM_OFFLINE=1 forbids network access and object … is not cached")

    monkeypatch.setattr(asset_cache.AssetCache, "lookup", offline)
    with pytest.raises(OfflineError, match="RAYFORM_OFFLINE=1"):
        ds[3]
