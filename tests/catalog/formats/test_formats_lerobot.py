"""LeRobot v2.1 and v3.0 folders (written by hand) register episode by episode."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from format_sources import decode_mp4, write_lerobot_v21, write_lerobot_v30

from rayform.catalog import Catalog
from rayform.errors import ConversionWarning, FormatError

STATE = "/observation.state:Scalars:scalars"
VIDEO_TS = "/observation.images.front:VideoFrameReference:timestamp"


def test_v21_episodes_become_segments_with_features_tasks_and_timelines(
        tmp_path: Path, catalog: Catalog) -> None:
    truth = write_lerobot_v21(tmp_path / "ds", lengths={0: 12, 1: 9}, image=True)
    ds = catalog.create_dataset("lr")
    result = ds.register(tmp_path / "ds").wait()
    assert result.segment_ids == ["episode_000000", "episode_000001"]
    assert ds.timelines == {"frame_index": "sequence", "timestamp": "duration"}
    table = {r["rerun_segment_id"]: r for r in ds.segment_table_arrow().to_pylist()}
    assert table["episode_000001"]["property:task"] == "place the cube"
    assert json.loads(table["episode_000000"]["property:tasks"]) == ["pick the cube"]
    assert table["episode_000001"]["property:operator"] == "op1"
    assert table["episode_000000"]["property:robot_type"] == "test_arm"
    assert table["episode_000001"]["property:dataset_from_index"] == 12
    for index, ep in truth.episodes.items():
        seg = ds.open_segment(f"episode_{index:06d}")
        state = seg.column(STATE, "frame_index")
        np.testing.assert_array_equal(np.stack(state.values.to_pylist()), ep.state)
        assert state.values.type.value_type == "float"  # float32 kept
        reward = seg.column("/next.reward:Scalars:scalars", "frame_index")
        np.testing.assert_array_equal(np.concatenate(reward.values.to_pylist()), ep.reward)
        ts = seg.column(STATE, "timestamp").index  # float32 seconds put on the exact grid
        np.testing.assert_array_equal(ts, np.arange(len(ep.state)) * round(1e9 / truth.fps))
        raw = seg.column("/timestamp:Scalars:scalars", "frame_index").values.to_pylist()
        seconds = (np.arange(len(ep.state)) / truth.fps).astype(np.float32)  # as stored
        np.testing.assert_array_equal(np.concatenate(raw), seconds)
        names = seg.column("/observation.state:SeriesLines:names", "frame_index")
        assert names.is_static and names.values[0].as_py() == ["j0", "j1", "j2"]
        assert seg.column("/action:SeriesLines:names", "frame_index").values[0].as_py() == \
            ["j0", "j1", "j2"]
        tasks = seg.column("/task:TextDocument:text", "frame_index").values.to_pylist()
        assert tasks == [[ep.task]] * len(ep.state)
        media = seg.column("/observation.images.wrist:EncodedImage:media_type", "frame_index")
        assert media.values[0].as_py() == ["image/png"]


def test_v21_video_is_kept_as_is_with_frame_timestamps(tmp_path: Path, catalog: Catalog) -> None:
    truth = write_lerobot_v21(tmp_path / "ds", lengths={0: 12})
    ds = catalog.create_dataset("lr")
    ds.register(tmp_path / "ds")
    seg = ds.open_segment("episode_000000")
    refs = seg.column(VIDEO_TS, "frame_index")
    pts = np.concatenate(refs.values.to_pylist())
    np.testing.assert_array_equal(pts, np.rint(np.arange(12) * 1e8).astype(np.int64))
    keys = np.concatenate(seg.column(
        "/observation.images.front:VideoFrameReference:is_keyframe", "frame_index")
        .values.to_pylist())
    assert keys.tolist() == [i % 2 == 0 for i in range(12)]  # GOP 2
    digest = seg.column("/observation.images.front:AssetVideo:asset", "frame_index") \
        .values[0][0].as_py()
    source = truth.root / f"videos/chunk-000/{truth.video_key}/episode_000000.mp4"
    assert seg.asset_path(digest).read_bytes() == source.read_bytes()  # no re-encoding


def test_v30_episodes_share_files_and_point_into_concatenated_videos(
        tmp_path: Path, catalog: Catalog) -> None:
    truth = write_lerobot_v30(tmp_path / "ds", lengths={0: 8, 1: 6, 2: 7}, episodes_per_file=2)
    ds = catalog.create_dataset("lr3")
    assert ds.register(tmp_path / "ds").wait().segment_ids == \
        ["episode_000000", "episode_000001", "episode_000002"]
    seg1 = ds.open_segment("episode_000001")
    np.testing.assert_array_equal(np.stack(seg1.column(STATE, "frame_index").values.to_pylist()),
                                  truth.episodes[1].state)
    # episode 1 starts 8 frames into file-000.mp4
    pts = np.concatenate(seg1.column(VIDEO_TS, "frame_index").values.to_pylist())
    np.testing.assert_array_equal(pts, np.rint((8 + np.arange(6)) * 1e8).astype(np.int64))
    d0 = ds.open_segment("episode_000000").column(
        "/observation.images.front:AssetVideo:asset", "frame_index").values[0][0].as_py()
    d1 = seg1.column("/observation.images.front:AssetVideo:asset", "frame_index") \
        .values[0][0].as_py()
    d2 = ds.open_segment("episode_000002").column(
        "/observation.images.front:AssetVideo:asset", "frame_index").values[0][0].as_py()
    assert d0 == d1 != d2  # one MP4 stored once for both episodes
    frames = decode_mp4(seg1.asset_path(d1))
    assert len(frames) == 14
    table = {r["rerun_segment_id"]: r for r in ds.segment_table_arrow().to_pylist()}
    assert table["episode_000002"]["property:task"] == "pick the cube"
    assert table["episode_000002"]["property:codebase_version"] == "v3.0"


def test_partial_download_registers_what_is_there_and_names_what_is_not(
        tmp_path: Path, catalog: Catalog) -> None:
    write_lerobot_v21(tmp_path / "ds", lengths={0: 5, 1: 5, 2: 5, 3: 5}, absent=(0, 2),
                      missing_videos=(3,))
    ds = catalog.create_dataset("partial")
    with pytest.warns(ConversionWarning) as caught:
        result = ds.register(tmp_path / "ds").wait()
    assert result.segment_ids == ["episode_000001", "episode_000003"]
    messages = " | ".join(str(w.message) for w in caught)
    assert "2 listed in its metadata have no data file (episode_000000, episode_000002)" \
        in messages
    assert "episode 3: video 'observation.images.front' is missing" in messages
    assert not ds.open_segment("episode_000003").has_column(VIDEO_TS)
    assert ds.open_segment("episode_000001").has_column(VIDEO_TS)


def test_a_folder_that_is_not_a_lerobot_dataset_says_so(tmp_path: Path, catalog: Catalog) -> None:
    (tmp_path / "stuff").mkdir()
    (tmp_path / "stuff" / "notes.txt").write_text("hello")
    ds = catalog.create_dataset("x")
    with pytest.raises(FormatError, match=r"stuff: not a LeRobot dataset \(no meta/info.json\)"):
        ds.register(tmp_path / "stuff")
    assert ds.segment_ids() == []


def test_unsupported_codebase_version_is_refused(tmp_path: Path, catalog: Catalog) -> None:
    write_lerobot_v21(tmp_path / "ds", lengths={0: 3}, video=False)
    info = json.loads((tmp_path / "ds/meta/info.json").read_text())
    info["codebase_version"] = "v1.6"
    (tmp_path / "ds/meta/info.json").write_text(json.dumps(info))
    with pytest.raises(FormatError, match=r"codebase_version 'v1\.6' is not supported"):
        catalog.create_dataset("x").register(tmp_path / "ds")
