"""The guide's promises on other people's data: Rerun-written recordings (two timestamp timelines,
a declared convention, grey cameras), padding, the task text, and slices inside a mixture."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from surface_data import EPOCH_NS, FRAME_NS, build_catalog, joints
from torch.utils.data import DataLoader

import rayform
from rayform.dataloader import (
    DataSource,
    Field,
    FixedRateSampling,
    MixtureDataset,
    NumericDecoder,
    RerunMapDataset,
)
from rayform.errors import ConfigError

torch.set_num_threads(1)
SIM_START_NS = 1_800_000_000_000_000_000
SIM_STEP_NS = 50_000_000  # 20 Hz


def grey_png(value: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full((6, 8), value, dtype=np.uint8), mode="L").save(buf, format="PNG")
    return buf.getvalue()


def write_rerun_episode(path: Path, recording_id: str, *, num_frames: int = 20,
                        convention: str | None = "opencv", sample_timeline: str | None = None,
                        extra_timeline: bool = False) -> Path:
    """A recording the way a Rerun user writes one: ``rr.set_time`` + ``rr.log`` per frame (so
    rerun-sdk adds ``log_time``), a grey PNG camera, joints and an end-effector pose."""
    rr = pytest.importorskip("rerun")
    rec = rr.RecordingStream("rerun-user", recording_id=recording_id)
    rec.save(path)
    rec.reset_time()  # rerun-sdk keeps times per thread, across recordings
    if convention is not None:
        rec.send_property("frame_convention", rr.AnyValues(text=convention))
    if sample_timeline is not None:
        rec.send_property("sample_timeline", rr.AnyValues(text=sample_timeline))
    rec.send_property("task", rr.AnyValues(text="stack the cups"))
    for i in range(num_frames):
        rec.set_time("sim_time", timestamp=np.datetime64(SIM_START_NS + i * SIM_STEP_NS, "ns"))
        if extra_timeline:
            rec.set_time("wall_time", timestamp=np.datetime64(SIM_START_NS + i * 7, "ns"))
        rec.log("/cam/grey", rr.EncodedImage(contents=grey_png(10 * i), media_type="image/png"))
        rec.log("/joints", rr.Scalars(np.arange(3, dtype=np.float64) + i))
        # OpenCV axes (x right, y down, z forward): 1 m ahead, 2 m to the right, i cm below.
        rec.log("/ee", rr.Transform3D(translation=[2.0, i / 100, 1.0],
                                      quaternion=rr.Quaternion(xyzw=[0.0, 0.0, 0.0, 1.0])))
    rec.flush()
    rec.disconnect()
    return path


@pytest.fixture
def rerun_slice(tmp_path: Path) -> rayform.Slice:
    catalog = rayform.Catalog.create(tmp_path / "cat")
    catalog.create_dataset("rerun").register(
        [write_rerun_episode(tmp_path / f"r{i}.rrd", f"r{i}") for i in range(2)]).wait()
    return rayform.Client(catalog).slices.create("rerun")


def test_the_five_lines_on_rerun_written_data(rerun_slice: rayform.Slice) -> None:
    assert rerun_slice.view().timelines == {"sim_time": "timestamp", "log_time": "timestamp"}
    dataset = rayform.torch.EpisodeDataset(rerun_slice, obs=["cam/grey", "ee"], action="joints",
                                           fps=20, horizon=4, frame="ros", seed=None)
    assert dataset.timeline == "sim_time"  # not rerun-sdk's own log_time
    assert len(dataset) == 2 * (20 - 3)
    sample = dataset[5]
    assert int(sample["t_ns"]) == SIM_START_NS + 5 * SIM_STEP_NS
    assert sample["cam/grey"].shape == (3, 6, 8) and sample["cam/grey"].dtype == torch.uint8
    assert sample["cam/grey"].unique().tolist() == [50]  # grey repeated over the channels
    # Declared OpenCV, returned ROS: x forward = z_cv, y left = -x_cv, z up = -y_cv.
    np.testing.assert_allclose(sample["ee"][:3].numpy(), [1.0, -2.0, -0.05], atol=1e-6)
    np.testing.assert_allclose(sample["action"].numpy(),
                               np.arange(3)[None, :] + np.arange(5, 9)[:, None])
    assert sample["task"] == "stack the cups"
    batch = next(iter(DataLoader(dataset, batch_size=4)))
    assert batch["cam/grey"].shape == (4, 3, 6, 8)


def test_several_timelines_are_declared_or_explained(tmp_path: Path) -> None:
    catalog = rayform.Catalog.create(tmp_path / "cat")
    catalog.create_dataset("plain").register(
        write_rerun_episode(tmp_path / "a.rrd", "a", extra_timeline=True)).wait()
    catalog.create_dataset("declared").register(
        write_rerun_episode(tmp_path / "b.rrd", "b", extra_timeline=True,
                            sample_timeline="sim_time")).wait()
    slices = rayform.Client(catalog).slices
    with pytest.raises(ConfigError, match=r"several timestamp timelines \['log_time', 'sim_time', "
                       r"'wall_time'\].*'log_time' is when rerun-sdk logged.*"
                       r"ReadOptions\(timeline='sim_time'\).*'sample_timeline'"):
        rayform.torch.EpisodeDataset(slices.create("plain"), obs=["joints"], fps=20)
    declared = rayform.torch.EpisodeDataset(slices.create("declared"), obs=["joints"], fps=20)
    assert declared.timeline == "sim_time"
    chosen = rayform.torch.EpisodeDataset(
        slices.create("plain"), obs=["joints"], fps=20,
        options=rayform.torch.ReadOptions(timeline="wall_time"))
    assert chosen.timeline == "wall_time"


def test_undeclared_convention_names_the_rerun_property(tmp_path: Path) -> None:
    catalog = rayform.Catalog.create(tmp_path / "cat")
    catalog.create_dataset("d").register(
        write_rerun_episode(tmp_path / "a.rrd", "a", convention=None)).wait()
    slice_ = rayform.Client(catalog).slices.create("d")
    with pytest.raises(ConfigError, match=r"rec\.send_property\('frame_convention'"):
        rayform.torch.EpisodeDataset(slice_, obs=["ee"], fps=20)
    assert len(rayform.torch.EpisodeDataset(slice_, obs=["joints"], fps=20)) == 20


@pytest.fixture
def guide(tmp_path: Path) -> rayform.Client:
    """Three 2-second episodes at 30 Hz (``surface_data``), property task ``"pick"``."""
    return rayform.Client(build_catalog(tmp_path / "cat", tmp_path / "src", num_frames=60))


def test_edge_pad_keeps_the_last_steps_with_a_mask(guide: rayform.Client) -> None:
    slice_ = guide.slices.create("robots")
    trimmed = rayform.torch.EpisodeDataset(slice_, obs=["joints/position"], fps=15, horizon=16,
                                           action="joints/position", seed=None)
    padded = rayform.torch.EpisodeDataset(slice_, obs=["joints/position"], fps=15, horizon=16,
                                          action="joints/position", seed=None, edge="pad")
    assert (len(trimmed), len(padded)) == (3 * 15, 3 * 30)
    assert "action_is_pad" not in trimmed[0]
    q = joints(0, np.arange(60))
    for i in (0, 14, 15, 29):
        sample = padded[i]
        frame = (int(sample["t_ns"]) - EPOCH_NS) // FRAME_NS
        steps = frame + 2 * np.arange(16)
        assert sample["action_is_pad"].tolist() == (steps > 59).tolist()
        np.testing.assert_allclose(sample["action"].numpy(), q[np.minimum(steps, 59)], rtol=1e-6)
    batch = next(iter(DataLoader(padded, batch_size=8)))
    assert batch["action_is_pad"].shape == (8, 16) and batch["action_is_pad"].dtype == torch.bool


def test_task_comes_from_the_segment(guide: rayform.Client) -> None:
    dataset = rayform.torch.EpisodeDataset(guide.slices.create("robots"), obs=["cam0/rgb"],
                                           fps=15)
    assert {dataset[i]["task"] for i in range(len(dataset))} == {"pick"}
    with pytest.raises(ConfigError, match="reserved"):
        rayform.torch.EpisodeDataset(guide.slices.create("robots"), obs=["task"], fps=15)


def test_a_slice_keeps_its_time_range_in_a_mixture(guide: rayform.Client) -> None:
    start = np.datetime64(EPOCH_NS + 10 * FRAME_NS, "ns")
    part = guide.slices.create("robots", segments=["ep0", "ep1"],
                               time_range=(start, start + np.timedelta64(500, "ms")))
    fields = {"q": Field("/joints/position:Scalars:scalars", NumericDecoder())}
    grid = FixedRateSampling(15)
    sliced = RerunMapDataset(DataSource(part), "real_time", fields, timeline_sampling=grid,
                             sample_metadata=True)
    whole = RerunMapDataset(DataSource(guide.catalog.get_dataset("robots")), "real_time",
                            fields, timeline_sampling=grid, sample_metadata=True)
    mix = MixtureDataset({"part": sliced, "whole": whole})
    times = [int(mix[i]["meta"]["index_value"]) for i in range(mix.source_lengths["part"])]
    # The grid of the whole segment (anchored at its first row), inside the range.
    lo, hi = EPOCH_NS + 10 * FRAME_NS, EPOCH_NS + 10 * FRAME_NS + 500_000_000
    expected = [v for v in EPOCH_NS + np.arange(30) * grid.ns_per_sample if lo <= v <= hi]
    assert len(expected) == 8 and times == expected * 2
    assert mix.source_lengths == {"part": 16, "whole": 3 * 30}
    assert {mix[i]["meta"]["segment_id"] for i in range(16)} == {"ep0", "ep1"}
    with pytest.raises(ConfigError, match="time range is on timeline 'real_time'"):
        RerunMapDataset(DataSource(part), "frame_index", fields)

