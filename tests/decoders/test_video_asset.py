"""Video assets (MP4 kept as-is): probing, and decoding frames named by their timestamps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest
from video_fixtures import (
    INTEL_VIDEOS,
    UNITREE_VIDEOS,
    codec_params,
    hwc,
    logged_failure,
    realdata_file,
    reference_file_frames,
    synthetic_frames,
)

from rayform.catalog import Catalog, DatasetEntry, RecordingWriter
from rayform.decoders import DecodeRequest, FieldBatch, VideoFrameDecoder
from rayform.errors import ConfigError, CorruptRecordingError, SourceNotFoundError
from rayform.media._video_asset import probe_video_asset
from rayform.media._video_encode import write_video_mp4

TIMESTAMP = "/cam:VideoFrameReference:timestamp"


def asset_dataset(tmp_path: Path, videos: dict[str, Path]) -> DatasetEntry:
    """One segment per video, the video logged as an asset with one row per frame."""
    catalog = Catalog.create(tmp_path / "catalog")
    dataset = catalog.create_dataset("videos")
    paths = []
    for segment_id, video in videos.items():
        info = probe_video_asset(video)
        path = tmp_path / f"{segment_id}.rfr"
        with RecordingWriter(path, recording_id=segment_id) as rec:
            rec.log_video_asset("/cam", video, timelines={"frame_index": np.arange(info.num_frames)},
                                frame_timestamps_ns=info.frame_timestamps_ns,
                                is_keyframe=info.is_keyframe)
        paths.append(path)
    dataset.register(paths).wait()
    return dataset


class AssetReader:
    """Builds the FieldBatch and DecodeRequests the pipeline would for one asset segment."""

    def __init__(self, dataset: DatasetEntry, segment_id: str) -> None:
        self.segment_id = segment_id
        segment = dataset.open_segment(segment_id)
        self.column = segment.column(TIMESTAMP, "frame_index").values
        flags = segment.column("/cam:VideoFrameReference:is_keyframe", "frame_index").values
        self.is_keyframe = np.array([row[0] for row in flags.to_pylist()], dtype=bool)
        self.open_segment = dataset.open_segment

    def batch(self, *, is_windowed: bool = False, path: str | None = TIMESTAMP) -> FieldBatch:
        return FieldBatch(column=self.column, is_windowed=is_windowed,
                          open_segment=self.open_segment, path=path)

    def request(self, position: int, outputs: list[int], offset: int = 0) -> DecodeRequest:
        start = int(np.flatnonzero(self.is_keyframe[:min(outputs) + 1])[-1])
        return DecodeRequest(sample_position=position, segment_id=self.segment_id,
                             index_value=max(outputs),
                             decode_row_indices=tuple(range(start + offset,
                                                            max(outputs) + offset + 1)),
                             output_row_indices=tuple(o + offset for o in outputs),
                             starts_at_keyframe=True)


def check_orders(reader: AssetReader, reference: list[npt.NDArray[np.uint8]], *,
                 seed: int, block: int) -> VideoFrameDecoder:
    """Random targets in one batch, then the whole file in consecutive blocks: all exact."""
    decoder = VideoFrameDecoder()
    n = len(reference)
    targets = np.random.default_rng(seed).integers(0, n, size=min(n, 40)).tolist()
    out = decoder.decode(reader.batch(), [reader.request(i, [t]) for i, t in enumerate(targets)])
    for target, tensor in zip(targets, out, strict=True):
        assert tensor is not None
        np.testing.assert_array_equal(hwc(tensor), reference[target])
    for start in range(0, n, block):
        rows = list(range(start, min(start + block, n)))
        out = decoder.decode(reader.batch(), [reader.request(i, [r]) for i, r in enumerate(rows)])
        for row, tensor in zip(rows, out, strict=True):
            assert tensor is not None
            np.testing.assert_array_equal(hwc(tensor), reference[row])
    return decoder


@pytest.mark.parametrize("codec", codec_params())
def test_synthetic_mp4_assets_are_pixel_identical(tmp_path: Path, codec: str) -> None:
    video = write_video_mp4(tmp_path / f"{codec}.mp4", synthetic_frames(45), codec=codec, gop=8,
                            fps=30)
    dataset = asset_dataset(tmp_path, {"ep": video})
    decoder = check_orders(AssetReader(dataset, "ep"), reference_file_frames(video), seed=1,
                           block=10)
    assert decoder.session_hits > 0


def test_probe_reports_frames_keyframes_and_codec(tmp_path: Path) -> None:
    video = write_video_mp4(tmp_path / "a.mp4", synthetic_frames(20), codec="h264", gop=8, fps=30)
    info = probe_video_asset(video)
    assert info.num_frames == 20 and (info.width, info.height) == (64, 48)
    assert info.codec == "h264" and not info.has_b_frames
    np.testing.assert_array_equal(np.flatnonzero(info.is_keyframe), [0, 8, 16])
    expected_ns = np.round(np.arange(20) * 1e9 / 30).astype(np.int64)
    assert np.abs(info.frame_timestamps_ns - expected_ns).max() <= 1
    assert info.average_rate_hz == pytest.approx(30.0)


def test_probe_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(SourceNotFoundError, match=r"nope\.mp4"):
        probe_video_asset(tmp_path / "nope.mp4")
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video at all" * 10)
    with pytest.raises(CorruptRecordingError, match=r"bad\.mp4"):
        probe_video_asset(bad)


def test_windows_timestamp_tolerance_and_missing_frames(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    video = write_video_mp4(tmp_path / "a.mp4", synthetic_frames(30), codec="h264", gop=10)
    reference = reference_file_frames(video)
    info = probe_video_asset(video)
    # An importer that computed timestamps as i / fps in floating point: a few ns early.
    early = (np.arange(30) * (1e9 / 30) - 50).astype(np.int64)
    early[0] = -5_000_000  # frame 0 named 5 ms before the file starts: nothing to serve
    catalog = Catalog.create(tmp_path / "catalog")
    dataset = catalog.create_dataset("videos")
    with RecordingWriter(tmp_path / "ep.rfr", recording_id="ep") as rec:
        rec.log_video_asset("/cam", video, timelines={"frame_index": np.arange(30)},
                            frame_timestamps_ns=early, is_keyframe=info.is_keyframe)
    dataset.register([tmp_path / "ep.rfr"]).wait()
    reader = AssetReader(dataset, "ep")
    decoder = VideoFrameDecoder()
    out = decoder.decode(reader.batch(is_windowed=True),
                         [reader.request(0, [7, 8, 9, 10, 11]), reader.request(1, [3, 3])])
    assert out[0].shape == (5, 3, 48, 64)
    for slot, frame in enumerate([7, 8, 9, 10, 11]):
        np.testing.assert_array_equal(hwc(out[0][slot]), reference[frame])
    np.testing.assert_array_equal(hwc(out[1][1]), reference[3])
    with logged_failure(caplog, "no decodable frame"):
        (missing,) = decoder.decode(reader.batch(), [reader.request(0, [0])])
    assert missing is None


def test_assets_of_several_segments_in_one_batch(tmp_path: Path) -> None:
    videos = {f"ep{i}": write_video_mp4(tmp_path / f"{i}.mp4", synthetic_frames(20, seed=i),
                                        codec="h264", gop=5) for i in range(2)}
    dataset = asset_dataset(tmp_path, videos)
    readers = [AssetReader(dataset, s) for s in videos]
    column = pa.concat_arrays([r.column for r in readers])
    batch = FieldBatch(column=column, open_segment=dataset.open_segment, path=TIMESTAMP)
    requests = [readers[0].request(0, [3]), readers[0].request(1, [12]),
                readers[1].request(2, [3], offset=20), readers[1].request(3, [19], offset=20)]
    out = VideoFrameDecoder().decode(batch, requests)
    refs = [reference_file_frames(v) for v in videos.values()]
    for tensor, (seg, frame) in zip(out, [(0, 3), (0, 12), (1, 3), (1, 19)], strict=True):
        np.testing.assert_array_equal(hwc(tensor), refs[seg][frame])
    # Without FieldBatch.path the segment's only asset is used.
    out = VideoFrameDecoder().decode(readers[1].batch(path=None), [readers[1].request(0, [4])])
    np.testing.assert_array_equal(hwc(out[0]), refs[1][4])


def test_asset_batches_need_open_segment(tmp_path: Path) -> None:
    video = write_video_mp4(tmp_path / "a.mp4", synthetic_frames(10), codec="h264", gop=5)
    reader = AssetReader(asset_dataset(tmp_path, {"ep": video}), "ep")
    with pytest.raises(ConfigError, match="open_segment"):
        VideoFrameDecoder().decode(FieldBatch(column=reader.column), [reader.request(0, [1])])


# ---------------------------------------------------------------------------------- real data
@pytest.mark.realdata
@pytest.mark.parametrize("episode", ["episode_000029.mp4", "episode_000030.mp4"])
def test_unitree_av1_gop2_episodes(tmp_path: Path, episode: str) -> None:
    video = realdata_file(UNITREE_VIDEOS / episode)
    info = probe_video_asset(video)
    assert info.codec == "av1" and (info.width, info.height) == (640, 480)
    assert info.is_keyframe[::2].all() and not info.is_keyframe[1::2].any()  # GOP 2
    reader = AssetReader(asset_dataset(tmp_path, {"ep": video}), "ep")
    reference = reference_file_frames(video)
    assert len(reference) == info.num_frames
    check_orders(reader, reference, seed=2, block=32)


@pytest.mark.realdata
def test_intel_h264_with_b_frames(tmp_path: Path) -> None:
    video = realdata_file(INTEL_VIDEOS / "bottle-detection.mp4")
    info = probe_video_asset(video)
    assert info.has_b_frames and info.codec == "h264" and info.num_frames == 1189
    reader = AssetReader(asset_dataset(tmp_path, {"ep": video}), "ep")
    reference = reference_file_frames(video)
    decoder = VideoFrameDecoder()
    rng = np.random.default_rng(3)
    targets = rng.integers(0, len(reference), size=30).tolist()
    out = decoder.decode(reader.batch(), [reader.request(i, [t]) for i, t in enumerate(targets)])
    for target, tensor in zip(targets, out, strict=True):
        np.testing.assert_array_equal(hwc(tensor), reference[target])
    # Consecutive blocks across a keyframe (frames 230-290; keyframes every ~250 frames).
    for start in range(230, 290, 20):
        rows = list(range(start, start + 20))
        out = decoder.decode(reader.batch(), [reader.request(i, [r]) for i, r in enumerate(rows)])
        for row, tensor in zip(rows, out, strict=True):
            np.testing.assert_array_equal(hwc(tensor), reference[row])
    # The last frames come out only when the decoder is drained at the end of the file.
    last = list(range(len(reference) - 3, len(reference)))
    out = decoder.decode(reader.batch(), [reader.request(i, [r]) for i, r in enumerate(last)])
    for row, tensor in zip(last, out, strict=True):
        np.testing.assert_array_equal(hwc(tensor), reference[row])


@pytest.mark.realdata
def test_intel_h264_with_an_audio_stream(tmp_path: Path) -> None:
    video = realdata_file(INTEL_VIDEOS / "car-detection.mp4")
    info = probe_video_asset(video)
    assert info.num_frames == 377 and info.is_keyframe.sum() == 7
    assert info.frame_timestamps_ns[1] == 80_000_000  # 12.5 fps
    reader = AssetReader(asset_dataset(tmp_path, {"ep": video}), "ep")
    check_orders(reader, reference_file_frames(video), seed=4, block=50)


def test_an_unreadable_asset_gives_none_with_one_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    video = write_video_mp4(tmp_path / "a.mp4", synthetic_frames(10), codec="h264", gop=5)
    dataset = asset_dataset(tmp_path, {"ep": video})
    reader = AssetReader(dataset, "ep")
    segment = dataset.open_segment("ep")
    digest = segment.column("/cam:AssetVideo:asset", "").values.flatten()[0].as_py()
    stored = segment.asset_path(digest)
    stored.chmod(0o644)
    stored.write_bytes(b"this is no longer an mp4" * 8)  # damaged in storage
    decoder = VideoFrameDecoder()
    with logged_failure(caplog, "video asset") as record:
        out = decoder.decode(reader.batch(), [reader.request(0, [1]), reader.request(1, [7])])
    assert out == [None, None]
    assert len(record) == 1  # once per kind of failure
