"""A dataloader epoch over data registered from each format gives back the source values."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from format_sources import decode_mp4, write_lerobot_v30

from rayform.catalog import Catalog

torch = pytest.importorskip("torch")
pytest.importorskip("av")

from rayform.dataloader import (  # noqa: E402
    DataSource,
    Field,
    FixedRateSampling,
    ImageDecoder,
    NumericDecoder,
    RerunMapDataset,
    VideoFrameDecoder,
)


def _epoch(dataset: RerunMapDataset, batch_size: int = 8) -> Iterator[dict[str, Any]]:
    torch.set_num_threads(1)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size,
                                         collate_fn=lambda items: items)
    for batch in loader:
        yield from batch


def test_epoch_over_lerobot_v30_with_shared_video_files(tmp_path: Path,
                                                        catalog: Catalog) -> None:
    truth = write_lerobot_v30(tmp_path / "src", lengths={0: 8, 1: 6, 2: 7}, episodes_per_file=2)
    ds = catalog.create_dataset("lr")
    ds.register(tmp_path / "src")
    loader = RerunMapDataset(DataSource(ds), "frame_index", {
        "state": Field("/observation.state:Scalars:scalars", NumericDecoder()),
        "image": Field("/observation.images.front:VideoFrameReference:timestamp",
                       VideoFrameDecoder(codec="h264")),
    }, sample_metadata=True)
    decoded = {0: decode_mp4(tmp_path / "src/videos/observation.images.front/chunk-000/"
                                        "file-000.mp4"),
               2: decode_mp4(tmp_path / "src/videos/observation.images.front/chunk-000/"
                                        "file-001.mp4")}
    offsets = {0: (0, 0), 1: (0, 8), 2: (2, 0)}  # episode -> (file's first episode, frame offset)
    samples = list(_epoch(loader))
    assert len(samples) == 21
    for sample in samples:
        index = int(sample["meta"]["segment_id"][-6:])
        frame = int(sample["meta"]["index_value"])
        ep = truth.episodes[index]
        np.testing.assert_array_equal(sample["state"].numpy(), ep.state[frame])
        first, offset = offsets[index]
        expected = decoded[first][offset + frame]
        image = sample["image"].permute(1, 2, 0).numpy()
        assert np.abs(image.astype(int) - expected.astype(int)).mean() < 3.0


def test_epoch_over_rrd_packet_stream_and_scalars(tmp_path: Path, catalog: Catalog) -> None:
    pytest.importorskip("rerun")
    from rrd_sources import write_rrd

    truth = write_rrd(tmp_path / "a.rrd", "rec_a", num_frames=12)
    ds = catalog.create_dataset("rrd")
    ds.register(tmp_path / "a.rrd")
    loader = RerunMapDataset(DataSource(ds), "frame", {
        "joints": Field("/robot/joints:Scalars:scalars", NumericDecoder(), window=(0, 1)),
        "cam": Field("/cam:VideoStream:sample", VideoFrameDecoder(codec="h264")),
    }, sample_metadata=True)
    samples = list(_epoch(loader))
    assert len(samples) == 11  # the window (0, 1) trims the last frame
    for sample in samples:
        frame = int(sample["meta"]["index_value"])
        np.testing.assert_allclose(sample["joints"].numpy(), truth.joints[frame:frame + 2])
        assert tuple(sample["cam"].shape) == (3, 48, 64)


def test_epoch_over_mcap_numeric_and_jpeg_topics(tmp_path: Path, catalog: Catalog) -> None:
    pytest.importorskip("mcap_ros2")
    from mcap_sources import write_ros2_mcap

    truth = write_ros2_mcap(tmp_path / "run.mcap", num_messages=6, with_bad_schema=False)
    ds = catalog.create_dataset("bag")
    with pytest.warns(UserWarning, match="has no typed mapping"):
        ds.register(tmp_path / "run.mcap")
    loader = RerunMapDataset(DataSource(ds), "log_time", {
        "odom": Field("/odom:Odometry:position", NumericDecoder()),
        "joints": Field("/joint_states/position:Scalars:scalars", NumericDecoder()),
        "image": Field("/cam/compressed:EncodedImage:blob", ImageDecoder()),
    }, timeline_sampling=FixedRateSampling(rate_hz=20.0), sample_metadata=True)
    samples = list(_epoch(loader))
    assert len(samples) == 6  # messages every 50 ms, sampled at 20 Hz
    for i, sample in enumerate(samples):
        np.testing.assert_array_equal(sample["odom"].numpy(), truth.odom_xyz[i])
        np.testing.assert_array_equal(sample["joints"].numpy(), truth.joints[i])
        assert tuple(sample["image"].shape) == (3, 8, 8)


def test_episode_dataset_carries_lerobot_tasks(tmp_path: Path, catalog: Catalog) -> None:
    """The task text reaches the sample (LeRobot's per-frame task_index, as text)."""
    from format_sources import write_lerobot_v21

    import rayform

    truth = write_lerobot_v21(tmp_path / "src", lengths={0: 12, 1: 10}, video=False)
    catalog.create_dataset("lr").register(tmp_path / "src")
    slice_ = rayform.Client(catalog).slices.create("lr")
    ds = rayform.torch.EpisodeDataset(slice_, obs=["observation.state"], action="action",
                                      fps=10, horizon=2, seed=None)
    samples = [ds[i] for i in range(len(ds))]
    assert {s["meta"]["segment"]: s["task"] for s in samples} == {
        f"episode_{i:06d}": ep.task for i, ep in truth.episodes.items()}
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=4)))
    assert batch["task"] == [truth.episodes[0].task] * 4  # strings collate into a list


def test_ros2_mcap_poses_are_declared_ros(tmp_path: Path, catalog: Catalog) -> None:
    pytest.importorskip("mcap_ros2")
    from mcap_sources import write_ros2_mcap

    from rayform.errors import ConversionWarning

    write_ros2_mcap(tmp_path / "bag.mcap", with_bad_schema=False)
    ds = catalog.create_dataset("bags")
    with pytest.warns(ConversionWarning):
        ds.register(tmp_path / "bag.mcap")
    (record,) = ds.segment_records()
    assert record.properties["frame_convention"] == "ros"
