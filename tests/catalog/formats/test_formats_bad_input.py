"""Truncated or corrupt sources register nothing and name the file and what is wrong."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from format_sources import write_lerobot_v21, write_lerobot_v30

from rayform.catalog import Catalog, RecordingWriter
from rayform.errors import CorruptRecordingError, FormatError

DiskGuard = Callable[[Path], AbstractContextManager[None]]


@pytest.fixture
def seeded(tmp_path: Path, catalog: Catalog) -> Catalog:
    """A catalog whose dataset ``ds`` already holds one segment."""
    import numpy as np

    with RecordingWriter(tmp_path / "keep.rfr", recording_id="keep") as rec:
        rec.log_scalars("/x", timelines={"frame_index": np.arange(3)}, values=np.arange(3.0))
    catalog.create_dataset("ds").register(tmp_path / "keep.rfr")
    return catalog


def _truncate(path: Path, keep: float) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def _check_refused(catalog: Catalog, source: Path, error: type[Exception], match: str,
                   disk_unchanged: DiskGuard) -> None:
    ds = catalog.get_dataset("ds")
    with disk_unchanged(Path(catalog.url)), pytest.raises(error, match=match):
        ds.register([source])
    assert catalog.get_dataset("ds").segment_ids() == ["keep"]


def test_truncated_rrd(tmp_path: Path, seeded: Catalog, disk_unchanged: DiskGuard) -> None:
    pytest.importorskip("rerun")
    from rrd_sources import write_rrd

    write_rrd(tmp_path / "a.rrd", "a")
    path = _truncate(tmp_path / "a.rrd", 0.6)
    _check_refused(seeded, path, CorruptRecordingError,
                   r"a\.rrd: not a readable Rerun \.rrd file \(truncated or damaged\)",
                   disk_unchanged)


def test_garbage_rrd(tmp_path: Path, seeded: Catalog, disk_unchanged: DiskGuard) -> None:
    pytest.importorskip("rerun")
    path = tmp_path / "junk.rrd"
    path.write_bytes(b"not an rrd at all")
    _check_refused(seeded, path, CorruptRecordingError, r"junk\.rrd: not a readable Rerun",
                   disk_unchanged)


def test_truncated_mcap(tmp_path: Path, seeded: Catalog, disk_unchanged: DiskGuard) -> None:
    pytest.importorskip("mcap_ros2")
    from mcap_sources import write_ros2_mcap

    write_ros2_mcap(tmp_path / "run.mcap", num_messages=30, with_bad_schema=False)
    path = _truncate(tmp_path / "run.mcap", 0.5)
    _check_refused(seeded, path, CorruptRecordingError,
                   r"run\.mcap: not a readable MCAP file \(truncated or damaged\)",
                   disk_unchanged)


def test_mcap_without_magic(tmp_path: Path, seeded: Catalog, disk_unchanged: DiskGuard) -> None:
    pytest.importorskip("mcap_ros2")
    path = tmp_path / "fake.mcap"
    path.write_bytes(b"hello world, no magic here")
    _check_refused(seeded, path, CorruptRecordingError, r"fake\.mcap: not an MCAP file",
                   disk_unchanged)


def test_truncated_mp4(tmp_path: Path, seeded: Catalog, disk_unchanged: DiskGuard) -> None:
    pytest.importorskip("av")
    from format_sources import synthetic_frames

    from rayform.media._video_encode import write_video_mp4

    path = _truncate(write_video_mp4(tmp_path / "v.mp4", synthetic_frames(20), fps=10), 0.5)
    _check_refused(seeded, path, CorruptRecordingError, r"v\.mp4", disk_unchanged)


def test_truncated_lerobot_parquet(tmp_path: Path, seeded: Catalog,
                                   disk_unchanged: DiskGuard) -> None:
    write_lerobot_v21(tmp_path / "lr", lengths={0: 5, 1: 5}, video=False)
    _truncate(tmp_path / "lr/data/chunk-000/episode_000001.parquet", 0.5)
    _check_refused(seeded, tmp_path / "lr", CorruptRecordingError,
                   r"episode_000001\.parquet: not a readable Parquet file", disk_unchanged)


def test_lerobot_bad_info_json(tmp_path: Path, seeded: Catalog,
                               disk_unchanged: DiskGuard) -> None:
    write_lerobot_v21(tmp_path / "lr", lengths={0: 5}, video=False)
    (tmp_path / "lr/meta/info.json").write_text('{"codebase_version": "v2.1", ')
    _check_refused(seeded, tmp_path / "lr", CorruptRecordingError,
                   r"info\.json: not valid JSON", disk_unchanged)


def test_lerobot_info_without_features(tmp_path: Path, seeded: Catalog,
                                       disk_unchanged: DiskGuard) -> None:
    write_lerobot_v21(tmp_path / "lr", lengths={0: 5}, video=False)
    info = json.loads((tmp_path / "lr/meta/info.json").read_text())
    del info["features"]
    (tmp_path / "lr/meta/info.json").write_text(json.dumps(info))
    _check_refused(seeded, tmp_path / "lr", FormatError, r"info\.json: missing key 'features'",
                   disk_unchanged)


def test_lerobot_v30_video_that_does_not_match_the_rows(tmp_path: Path, seeded: Catalog,
                                                        disk_unchanged: DiskGuard) -> None:
    pytest.importorskip("av")
    write_lerobot_v30(tmp_path / "lr", lengths={0: 4, 1: 4}, episodes_per_file=1)
    import pyarrow.parquet as pq

    meta = tmp_path / "lr/meta/episodes/chunk-000/file-000.parquet"
    rows = pq.read_table(meta).to_pylist()
    rows[1]["videos/observation.images.front/from_timestamp"] = 50.0  # far past the end
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(rows), meta)
    _check_refused(seeded, tmp_path / "lr", CorruptRecordingError,
                   r"no frame of the video is near the episode's timestamps", disk_unchanged)


def test_lerobot_with_no_episode_files(tmp_path: Path, seeded: Catalog,
                                       disk_unchanged: DiskGuard) -> None:
    write_lerobot_v21(tmp_path / "lr", lengths={0: 5, 1: 5}, absent=(0, 1), video=False)
    with pytest.warns(UserWarning, match="partial LeRobot dataset"):
        _check_refused(seeded, tmp_path / "lr", FormatError,
                       r"none of the 2 episodes listed in its metadata has a data file",
                       disk_unchanged)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("fps", "thirty", r"info\.json: 'fps' must be a number, got 'thirty'; fix meta/info\.json"),
    ("fps", 0, r"info\.json: fps must be positive, got 0\.0"),
    ("chunks_size", "many", r"info\.json: 'chunks_size' must be an integer, got 'many'"),
    ("total_episodes", 2.5, r"info\.json: 'total_episodes' must be an integer, got 2\.5"),
])
def test_lerobot_info_numbers_name_the_key(tmp_path: Path, seeded: Catalog,
                                           disk_unchanged: DiskGuard, key: str, value: object,
                                           message: str) -> None:
    write_lerobot_v21(tmp_path / "lr", lengths={0: 5}, video=False)
    info = json.loads((tmp_path / "lr/meta/info.json").read_text())
    info[key] = value
    (tmp_path / "lr/meta/info.json").write_text(json.dumps(info))
    _check_refused(seeded, tmp_path / "lr", FormatError, message, disk_unchanged)


@pytest.mark.parametrize(("key", "template"), [
    ("data_path", "../outside/episode_{episode_index:06d}.parquet"),
    ("data_path", "/etc/passwd"),
    ("data_path", "data/../../x/{episode_index}.parquet"),
    ("video_path", "videos/../../../{video_key}/{episode_index}.mp4"),
    ("video_path", "/tmp/{video_key}.mp4"),
])
def test_lerobot_path_templates_stay_inside_the_dataset(tmp_path: Path, seeded: Catalog,
                                                        disk_unchanged: DiskGuard, key: str,
                                                        template: str) -> None:
    write_lerobot_v21(tmp_path / "lr", lengths={0: 5}, video=key == "video_path")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "episode_000000.parquet").write_bytes(
        (tmp_path / "lr/data/chunk-000/episode_000000.parquet").read_bytes())
    info = json.loads((tmp_path / "lr/meta/info.json").read_text())
    info[key] = template
    (tmp_path / "lr/meta/info.json").write_text(json.dumps(info))
    _check_refused(seeded, tmp_path / "lr", FormatError,
                   rf"info\.json: {key} '.*' \(from template .*\) leaves the dataset folder",
                   disk_unchanged)
