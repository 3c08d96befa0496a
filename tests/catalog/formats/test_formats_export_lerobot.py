"""Export to LeRobot v3.0: read back by rayform's own importer, pyarrow and PyAV."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from format_sources import decode_mp4, synthetic_frames, write_lerobot_v21, write_lerobot_v30

from rayform.catalog import Catalog, RecordingWriter
from rayform.errors import ConfigError
from rayform.exporters import FileSizeLimits, VideoEncoding, export_lerobot
from rayform.media._video_encode import encode_video_packets

pytest.importorskip("av")
STATE = "/observation.state:Scalars:scalars"
FRONT = "observation.images.front"


def test_lerobot_round_trip_keeps_values_and_frames(tmp_path: Path, catalog: Catalog) -> None:
    truth = write_lerobot_v21(tmp_path / "src", lengths={0: 12, 1: 9})
    src = catalog.create_dataset("src")
    src.register(tmp_path / "src")
    result = export_lerobot(src, tmp_path / "out", fps=truth.fps)
    assert (result.num_episodes, result.num_frames) == (2, 21)
    assert result.remuxed_videos == 2 and result.encoded_videos == 0
    assert set(result.features) == {"observation.state", "action", "next.reward", FRONT}
    back = catalog.create_dataset("back")
    back.register(tmp_path / "out")
    # As LeRobot v3.0 writes it: both episodes in one MP4, one after the other.
    assert sorted(p.name for p in (tmp_path / f"out/videos/{FRONT}").rglob("*.mp4")) == \
        ["file-000.mp4"]
    exported = decode_mp4(tmp_path / f"out/videos/{FRONT}/chunk-000/file-000.mp4")
    spans = {e["episode_index"]: (e[f"videos/{FRONT}/from_timestamp"],
                                  e[f"videos/{FRONT}/to_timestamp"])
             for e in pq.read_table(tmp_path / "out/meta/episodes/chunk-000/file-000.parquet")
             .to_pylist()}
    assert spans == {0: (0.0, pytest.approx(1.2)), 1: (pytest.approx(1.2), pytest.approx(2.1))}
    for index, ep in truth.episodes.items():
        seg = back.open_segment(f"episode_{index:06d}")
        np.testing.assert_array_equal(
            np.stack(seg.column(STATE, "frame_index").values.to_pylist()), ep.state)
        np.testing.assert_array_equal(
            np.stack(seg.column("/action:Scalars:scalars", "frame_index").values.to_pylist()),
            ep.action)
        np.testing.assert_array_equal(
            np.concatenate(seg.column("/next.reward:Scalars:scalars", "frame_index")
                           .values.to_pylist()), ep.reward)
        assert seg.column("/task:TextDocument:text", "frame_index").values[0].as_py() == \
            [ep.task]
        original = decode_mp4(truth.root / f"videos/chunk-000/{FRONT}/episode_{index:06d}.mp4")
        first = round(spans[index][0] * truth.fps)
        np.testing.assert_array_equal(exported[first:first + len(original)], original)  # remuxed
    props = {r["rerun_segment_id"]: r for r in back.segment_table_arrow().to_pylist()}
    assert props["episode_000001"]["property:source_segment_id"] == "episode_000001"
    assert props["episode_000001"]["property:robot_type"] == "test_arm"


def test_export_folder_is_a_complete_v30_dataset(tmp_path: Path, catalog: Catalog) -> None:
    write_lerobot_v30(tmp_path / "src", lengths={0: 8, 1: 6, 2: 7})
    src = catalog.create_dataset("src")
    src.register(tmp_path / "src")
    export_lerobot(src.filter_segments(["episode_000001", "episode_000002"]), tmp_path / "out",
                   fps=10)
    out = tmp_path / "out"
    info = json.loads((out / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 10
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (2, 13, 2)
    assert info["features"]["observation.state"] == {
        "dtype": "float32", "shape": [3], "names": ["j0", "j1", "j2"]}
    assert info["features"][FRONT]["dtype"] == "video"
    assert info["features"][FRONT]["shape"] == [48, 64, 3]
    assert info["features"]["timestamp"] == {"dtype": "float32", "shape": [1], "names": None}
    data = pq.read_table(out / "data/chunk-000/file-000.parquet")
    assert data.column("episode_index").to_pylist() == [0] * 6 + [1] * 7
    assert data.column("index").to_pylist() == list(range(13))
    assert data.column("frame_index").to_pylist()[:7] == [0, 1, 2, 3, 4, 5, 0]
    np.testing.assert_allclose(data.column("timestamp").to_numpy()[6:8], [0.0, 0.1], atol=1e-7)
    episodes = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [(e["dataset_from_index"], e["dataset_to_index"]) for e in episodes] == \
        [(0, 6), (6, 13)]
    assert episodes[1][f"videos/{FRONT}/to_timestamp"] == pytest.approx(0.6 + 0.7)
    assert len(episodes[0]["stats/observation.state/mean"]) == 3
    assert np.asarray(episodes[0][f"stats/{FRONT}/mean"]).shape == (3, 1, 1)
    tasks = pq.read_table(out / "meta/tasks.parquet")
    assert tasks.column("task").to_pylist() == ["place the cube", "pick the cube"]
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["task"]
    stats = json.loads((out / "meta/stats.json").read_text())
    state = np.concatenate([pq.read_table(out / "data/chunk-000/file-000.parquet")
                            .column("observation.state").to_pylist()]).reshape(-1, 3)
    np.testing.assert_allclose(stats["observation.state"]["mean"], state.mean(axis=0), rtol=1e-5)
    assert stats["observation.state"]["count"] == [13]
    assert len(decode_mp4(out / f"videos/{FRONT}/chunk-000/file-000.mp4")) == 13
    assert [(e[f"videos/{FRONT}/file_index"], e[f"videos/{FRONT}/from_timestamp"])
            for e in episodes] == [(0, 0.0), (0, pytest.approx(0.6))]
    assert not (out / ".episode-videos").exists()


def test_export_resamples_at_another_rate_with_latest_at(tmp_path: Path,
                                                         catalog: Catalog) -> None:
    truth = write_lerobot_v21(tmp_path / "src", lengths={0: 12})  # 10 Hz
    src = catalog.create_dataset("src")
    src.register(tmp_path / "src")
    result = export_lerobot(src, tmp_path / "out", fps=20)
    assert result.num_frames == 23 and result.encoded_videos == 1  # 20 Hz: re-encoded
    back = catalog.create_dataset("back")
    back.register(tmp_path / "out")
    state = np.stack(back.open_segment("episode_000000").column(STATE, "frame_index")
                     .values.to_pylist())
    np.testing.assert_array_equal(state, np.repeat(truth.episodes[0].state, 2, axis=0)[:23])
    video = decode_mp4(tmp_path / f"out/videos/{FRONT}/chunk-000/file-000.mp4")
    assert len(video) == 23
    original = truth.episodes[0].frames
    assert original is not None
    error = np.abs(video.astype(int) - np.repeat(original, 2, axis=0)[:23].astype(int)).mean()
    assert error < 8.0  # lossy re-encode of the repeated frames


def test_native_packet_streams_and_images_are_encoded(tmp_path: Path, catalog: Catalog) -> None:
    frames = synthetic_frames(10)
    packets, keys = encode_video_packets(frames, codec="h264", gop=5, fps=10)
    with RecordingWriter(tmp_path / "ep.rfr", recording_id="ep") as rec:
        t = {"t": (np.arange(10) * 100_000_000).astype("timedelta64[ns]")}
        rec.set_property("task", "wave")
        rec.log_scalars("/joints", timelines=t, values=np.arange(20.0).reshape(10, 2))
        rec.log_video_stream("/cam", timelines=t, samples=packets, is_keyframe=keys, codec="h264")
    ds = catalog.create_dataset("native")
    ds.register(tmp_path / "ep.rfr")
    result = export_lerobot(ds, tmp_path / "out", fps=10,
                            video=VideoEncoding(codec="h264", gop_size=4))
    assert set(result.features) == {"joints", "cam"} and result.encoded_videos == 1
    video = decode_mp4(tmp_path / "out/videos/cam/chunk-000/file-000.mp4")
    assert video.shape == (10, 48, 64, 3)
    assert np.abs(video.astype(int) - frames.astype(int)).mean() < 8.0
    data = pq.read_table(tmp_path / "out/data/chunk-000/file-000.parquet")
    assert data.column("joints").to_pylist()[3] == [6.0, 7.0]
    assert pq.read_table(tmp_path / "out/meta/tasks.parquet").column("task").to_pylist() == \
        ["wave"]


def test_export_refuses_a_non_empty_folder(tmp_path: Path, catalog: Catalog) -> None:
    write_lerobot_v21(tmp_path / "src", lengths={0: 3}, video=False)
    src = catalog.create_dataset("src")
    src.register(tmp_path / "src")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="exists and is not an empty folder"):
        export_lerobot(src, tmp_path / "out", fps=10)
    assert (tmp_path / "out" / "keep.txt").read_text() == "mine"


def test_export_of_a_slice_keeps_its_segments_and_time_range(tmp_path: Path,
                                                              catalog: Catalog) -> None:
    from rayform.catalog._slices import TimeRange, create_slice

    truth = write_lerobot_v21(tmp_path / "src", lengths={0: 12, 1: 9}, video=False)
    src = catalog.create_dataset("src")
    src.register(tmp_path / "src")
    slice_ = create_slice(catalog, src, segments=["episode_000001"],
                          time_range=TimeRange(timeline="frame_index", start=2, end=6))
    result = export_lerobot(slice_, tmp_path / "out", fps=10)
    assert (result.num_episodes, result.num_frames) == (1, 5)
    data = pq.read_table(tmp_path / "out/data/chunk-000/file-000.parquet")
    np.testing.assert_array_equal(np.stack(data.column("observation.state").to_pylist()),
                                  truth.episodes[1].state[2:7])
    with pytest.raises(ConfigError, match="the slice's time range is on 'frame_index'"):
        export_lerobot(slice_, tmp_path / "out2", fps=10, timeline="timestamp")


def test_episodes_share_files_up_to_the_size_limits(tmp_path: Path, catalog: Catalog) -> None:
    """LeRobot v3.0's layout: episodes packed into data and video files up to a size limit."""
    lengths = {i: 10 + i for i in range(6)}
    truth = write_lerobot_v21(tmp_path / "src", lengths=lengths)
    src = catalog.create_dataset("src")
    src.register(tmp_path / "src")
    one_video = (tmp_path / f"src/videos/chunk-000/{FRONT}/episode_000000.mp4").stat().st_size
    limits = FileSizeLimits(data_mb=2.5 * 1024 / 1024**2, video_mb=2.5 * one_video / 1024**2)
    result = export_lerobot(src, tmp_path / "out", fps=truth.fps, file_sizes=limits)
    assert (result.num_episodes, result.remuxed_videos) == (6, 6)
    out = tmp_path / "out"
    info = json.loads((out / "meta/info.json").read_text())
    assert info["video_files_size_in_mb"] == limits.video_mb
    episodes = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    video_files = [e[f"videos/{FRONT}/file_index"] for e in episodes]
    data_files = [e["data/file_index"] for e in episodes]
    assert 1 < len(set(video_files)) < 6 and video_files == sorted(video_files)
    assert 1 < len(set(data_files)) < 6 and data_files == sorted(data_files)
    for file in set(video_files):
        path = out / f"videos/{FRONT}/chunk-000/file-{file:03d}.mp4"
        members = [e for e in episodes if e[f"videos/{FRONT}/file_index"] == file]
        assert len(members) == 1 or path.stat().st_size <= limits.video_mb * 1024**2
        frames = decode_mp4(path)
        assert len(frames) == sum(e["length"] for e in members)
        for e in members:  # every episode where from_timestamp says, frame for frame
            original = decode_mp4(truth.root / "videos/chunk-000" / FRONT /
                                  f"episode_{e['episode_index']:06d}.mp4")
            first = round(e[f"videos/{FRONT}/from_timestamp"] * truth.fps)
            np.testing.assert_array_equal(frames[first:first + len(original)], original)
    for file in set(data_files):
        table = pq.read_table(out / f"data/chunk-000/file-{file:03d}.parquet")
        assert sorted(set(table.column("episode_index").to_pylist())) == \
            [e["episode_index"] for e in episodes if e["data/file_index"] == file]
    back = catalog.create_dataset("back")
    back.register(out)  # rayform's own importer finds each episode in the shared files
    assert len(back.segment_ids()) == 6


def test_packing_starts_a_new_file_for_other_codec_parameters(tmp_path: Path) -> None:
    from rayform.exporters._lerobot_video_files import EpisodeVideo, pack_videos
    from rayform.media import write_video_mp4

    parts = []
    for index, (h, w) in enumerate([(48, 64), (48, 64), (32, 32)]):
        path = tmp_path / f"ep{index}.mp4"
        write_video_mp4(path, synthetic_frames(5, height=h, width=w, seed=index), codec="h264",
                        gop=2, fps=10)
        parts.append(EpisodeVideo(index=index, path=path, num_frames=5))
    placed = pack_videos(tmp_path / "out", "cam", parts, fps=10, limit_bytes=1 << 30)
    assert [(p.file_index, p.from_timestamp) for p in placed.values()] == \
        [(0, 0.0), (0, pytest.approx(0.5)), (1, 0.0)]
    assert len(decode_mp4(tmp_path / "out/videos/cam/chunk-000/file-000.mp4")) == 10


def test_export_of_a_filtered_view_of_a_mixed_dataset(tmp_path: Path, catalog: Catalog) -> None:
    """Default features come from the view's segments, not from the whole dataset's schema."""
    truth = write_lerobot_v21(tmp_path / "src", lengths={0: 8, 1: 6}, video=False)
    mixed = catalog.create_dataset("mixed")
    mixed.register(tmp_path / "src")
    with RecordingWriter(tmp_path / "other.rfr", recording_id="other") as rec:
        rec.log_scalars("/joints", timelines={"frame_index": np.arange(5)},
                        values=np.ones((5, 7)))
    mixed.register(tmp_path / "other.rfr")
    view = mixed.filter_segments(["episode_000000", "episode_000001"])
    result = export_lerobot(view, tmp_path / "out", fps=10)
    assert (result.num_episodes, result.skipped_segments) == (2, ())
    assert set(result.features) == {"observation.state", "action", "next.reward"}
    data = pq.read_table(tmp_path / "out/data/chunk-000/file-000.parquet")
    np.testing.assert_array_equal(np.stack(data.column("action").to_pylist())[8:],
                                  truth.episodes[1].action)


def test_lerobot_opens_the_export(tmp_path: Path, catalog: Catalog) -> None:
    """LeRobot itself reads the export (where the ``lerobot`` package is installed: 0.4.4 pins
    torch<2.11 and pulls CUDA torch and torchvision, so it is not installed beside rayform's CPU
    torch here)."""
    lerobot_dataset = pytest.importorskip(
        "lerobot.datasets.lerobot_dataset",
        reason="lerobot is not installed: lerobot 0.4.4 pins torch<2.11, so pip would replace "
               "the CPU torch with CUDA torch 2.10 and add torchvision (pip install --dry-run)")
    truth = write_lerobot_v21(tmp_path / "src", lengths={0: 8, 1: 6})
    src = catalog.create_dataset("src")
    src.register(tmp_path / "src")
    export_lerobot(src, tmp_path / "out", fps=truth.fps)
    ds = lerobot_dataset.LeRobotDataset("rayform/export", root=tmp_path / "out")
    assert len(ds) == 14
    item = ds[10]
    np.testing.assert_array_equal(item["observation.state"].numpy(), truth.episodes[1].state[2])
    assert tuple(item[FRONT].shape) == (3, 48, 64)
    assert item["task"] == truth.episodes[1].task
