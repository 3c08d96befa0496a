"""The real files of ``../shared/realdata``: counts, timelines and values checked against each
format's own reader, a dataloader epoch, and round trips (LeRobot and ``.rrd``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from rayform.catalog import Catalog, DatasetEntry
from rayform.errors import ConversionWarning

pytestmark = pytest.mark.realdata
G1 = "unitree-g1-lerobot-v21"
NAV2 = "evo-nav2-turtlebot-mcap/nav2_turtlebot.mcap"
BAGS = "rosbag2-test-bags"
CAM = "/observation.images.cam_high"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """One catalog for the module: each real source is registered once."""
    return Catalog.create(tmp_path_factory.mktemp("realdata") / "catalog")


@pytest.fixture(scope="module")
def g1(realdata: Path, shared: Catalog) -> DatasetEntry:
    pytest.importorskip("av")
    ds = shared.create_dataset("g1")
    with pytest.warns(ConversionWarning, match=r"98 listed in its metadata have no data file"):
        ds.register(realdata / G1)
    return ds


@pytest.fixture(scope="module")
def nav2(realdata: Path, shared: Catalog) -> DatasetEntry:
    pytest.importorskip("mcap_ros2")
    ds = shared.create_dataset("nav2")
    ds.register(realdata / NAV2)
    return ds


def _packets(path: Path) -> list[bytes]:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return [bytes(p) for p in container.demux(stream) if p.size]


def test_g1_lerobot_episodes(g1: DatasetEntry, realdata: Path) -> None:
    assert g1.segment_ids() == ["episode_000029", "episode_000030"]
    rows = {r["rerun_segment_id"]: r for r in g1.segment_table_arrow().to_pylist()}
    assert rows["episode_000029"]["property:length"] == 221
    assert rows["episode_000030"]["property:dataset_from_index"] == 10861
    assert rows["episode_000029"]["property:task"] == "Pick up the yellow bottle on the table."
    assert rows["episode_000030"]["timestamp:end"].total_seconds() == pytest.approx(9.2, abs=1e-6)
    source = pq.read_table(realdata / G1 / "data/chunk-000/episode_000029.parquet")
    seg = g1.open_segment("episode_000029")
    state = seg.column("/observation.state:Scalars:scalars", "frame_index")
    np.testing.assert_array_equal(np.stack(state.values.to_pylist()),
                                  np.stack(source.column("observation.state").to_pylist()))
    names = seg.column("/observation.state:SeriesLines:names", "frame_index").values[0].as_py()
    assert len(names) == 26 and names[0] == "kLeftShoulderPitch"
    keys = np.concatenate(seg.column(f"{CAM}:VideoFrameReference:is_keyframe", "frame_index")
                          .values.to_pylist())
    assert len(keys) == 221 and int(keys.sum()) == 111  # GOP 2, as ffprobe says


def test_g1_lerobot_round_trip_remuxes_av1(g1: DatasetEntry, realdata: Path, tmp_path: Path,
                                           catalog: Catalog) -> None:
    from rayform.exporters import export_lerobot

    result = export_lerobot(g1, tmp_path / "out", fps=30)
    assert (result.num_episodes, result.num_frames, result.remuxed_videos) == (2, 498, 2)
    src = [realdata / G1 / f"videos/chunk-000/observation.images.cam_high/episode_0000{i}.mp4"
           for i in (29, 30)]
    out = tmp_path / "out/videos/observation.images.cam_high/chunk-000/file-000.mp4"
    # The same AV1 frames, not re-encoded, both episodes in one file (LeRobot v3.0's layout).
    assert _packets(out) == _packets(src[0]) + _packets(src[1])
    back = catalog.create_dataset("back")
    back.register(tmp_path / "out")
    for old, new in (("episode_000029", "episode_000000"), ("episode_000030", "episode_000001")):
        for column in ("/observation.state:Scalars:scalars", "/action:Scalars:scalars",
                       "/task:TextDocument:text"):
            a = g1.open_segment(old).column(column, "frame_index").values
            b = back.open_segment(new).column(column, "frame_index").values
            assert a.equals(b), column
        column = f"{CAM}:VideoFrameReference:timestamp"  # pts in its file: shifted by its start
        a_ns = np.concatenate(g1.open_segment(old).column(column, "frame_index").values
                              .to_pylist())
        b_ns = np.concatenate(back.open_segment(new).column(column, "frame_index").values
                              .to_pylist())
        assert np.abs((b_ns - b_ns[0]) - (a_ns - a_ns[0])).max() <= 1  # ns rounding of pts


def test_g1_dataloader_epoch(g1: DatasetEntry) -> None:
    torch = pytest.importorskip("torch")
    from rayform.dataloader import (
        DataSource,
        Field,
        FixedRateSampling,
        NumericDecoder,
        RerunMapDataset,
        VideoFrameDecoder,
    )

    torch.set_num_threads(1)
    ds = RerunMapDataset(DataSource(g1), "timestamp", {
        "state": Field("/observation.state:Scalars:scalars", NumericDecoder()),
        "action": Field("/action:Scalars:scalars", NumericDecoder(), window=(0.0, 1 / 3)),
        "image": Field(f"{CAM}:VideoFrameReference:timestamp", VideoFrameDecoder(codec="av1")),
    }, timeline_sampling=FixedRateSampling(rate_hz=3.0))
    loader = torch.utils.data.DataLoader(ds, batch_size=16, collate_fn=lambda items: items)
    samples = [s for batch in loader for s in batch]
    assert len(samples) == len(ds) > 40
    assert all(tuple(s["image"].shape) == (3, 480, 640) for s in samples)
    assert all(tuple(s["action"].shape) == (2, 26) for s in samples)
    assert samples[0]["image"].float().std() > 10  # a real picture, not a blank frame


def test_nav2_mcap_topics_rates_and_values(nav2: DatasetEntry, realdata: Path) -> None:
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    seg = nav2.open_segment("nav2_turtlebot")
    odom = seg.column("/odom:Odometry:position", "log_time")
    tf = seg.column("/tf:Transform3D:translation", "log_time")
    assert (len(odom), len(tf)) == (2639, 5422)
    assert len(seg.column("/tf_static:Transform3D:translation", "log_time")) == 1
    assert len(seg.column("/amcl_pose:Pose:position", "log_time")) == 135
    odom_hz = (len(odom) - 1) / ((odom.index[-1] - odom.index[0]) / 1e9)
    tf_hz = (len(tf) - 1) / ((tf.index[-1] - tf.index[0]) / 1e9)
    assert 25 < odom_hz < 29 and 53 < tf_hz < 59
    header = seg.column("/odom:Odometry:position", "header_time").index
    assert 900e9 < header[0] < 1100e9  # simulation time, apart from the wall-clock log_time
    with (realdata / NAV2).open("rb") as fh:
        reader = make_reader(fh, decoder_factories=[DecoderFactory()])
        messages = [m for _, _, _, m in reader.iter_decoded_messages(topics=["/odom"])]
    for i in (0, 1000, 2638):
        expected = messages[i].pose.pose.position
        assert odom.values[i].as_py() == [expected.x, expected.y, expected.z]


def test_nav2_dataloader_epoch_and_lerobot_export(nav2: DatasetEntry, tmp_path: Path,
                                                  catalog: Catalog) -> None:
    torch = pytest.importorskip("torch")
    from rayform.dataloader import (
        DataSource,
        Field,
        FixedRateSampling,
        NumericDecoder,
        RerunMapDataset,
    )
    from rayform.exporters import export_lerobot

    torch.set_num_threads(1)
    ds = RerunMapDataset(DataSource(nav2), "log_time", {
        "odom": Field("/odom:Odometry:position", NumericDecoder()),
        "pose": Field("/amcl_pose:Pose:position", NumericDecoder()),
    }, timeline_sampling=FixedRateSampling(rate_hz=5.0))
    samples = [s for batch in torch.utils.data.DataLoader(ds, batch_size=64,
                                                          collate_fn=lambda items: items)
               for s in batch if s["pose"] is not None]
    assert len(samples) > 400 and tuple(samples[0]["odom"].shape) == (3,)
    result = export_lerobot(nav2, tmp_path / "out", fps=10,
                            features={"observation.state": "/odom:Odometry:position",
                                      "action": "/odom:Odometry:linear_velocity"})
    span_s = 97.355 - 0.0  # the bag's length; /odom starts and ends within it
    assert 0.9 * span_s * 10 < result.num_frames <= span_s * 10 + 1
    back = catalog.create_dataset("back")
    back.register(tmp_path / "out")
    state = back.open_segment("episode_000000").column("/observation.state:Scalars:scalars",
                                                       "frame_index")
    assert len(state) == result.num_frames


def test_rosbag2_bags_with_raw_and_unparseable_channels(realdata: Path, catalog: Catalog) -> None:
    pytest.importorskip("mcap_ros2")
    ds = catalog.create_dataset("bags")
    with pytest.warns(ConversionWarning) as caught:
        ds.register([realdata / BAGS / "talker",
                     realdata / BAGS / "bag_with_topics_and_service_events"])
    text = " | ".join(str(w.message) for w in caught)
    for topic in ("/test_service1/_service_event", "/test_service2/_service_event"):
        assert f"topic '{topic}' (test_msgs/srv/BasicTypes_Event): its schema cannot be " \
               "parsed" in text
    assert "topic '/rosout' (rcl_interfaces/msg/Log) has no typed mapping" in text
    talker = ds.open_segment("talker")
    texts = talker.column("/topic:TextDocument:text", "log_time").values.to_pylist()
    assert texts == [[f"Hello, world! {i}"] for i in range(10)]
    assert len(talker.column("/rosout:McapMessage:data", "log_time")) == 10
    events = ds.open_segment("bag_with_topics_and_service_events")
    assert len(events.column("/test_topic1:McapMessage:data", "log_time")) == 1
    row = {r["rerun_segment_id"]: r for r in ds.segment_table_arrow().to_pylist()}
    assert row["talker"]["property:rosbag2_version"] == 4
    assert row["bag_with_topics_and_service_events"]["property:rosbag2_version"] == 8


@pytest.mark.parametrize(("name", "frames", "keyframes", "audio"),
                         [("bottle-detection", 1189, 5, False), ("car-detection", 377, 7, True)])
def test_intel_mp4(realdata: Path, catalog: Catalog, name: str, frames: int, keyframes: int,
                   audio: bool) -> None:
    pytest.importorskip("av")
    ds = catalog.create_dataset("videos")
    ds.register(realdata / "intel-sample-videos" / f"{name}.mp4")
    row = ds.segment_table_arrow().to_pylist()[0]
    assert (row["property:num_frames"], row["property:has_audio"]) == (frames, audio)
    seg = ds.open_segment(name)
    keys = np.concatenate(seg.column("/video:VideoFrameReference:is_keyframe", "frame_index")
                          .values.to_pylist())
    assert (len(keys), int(keys.sum())) == (frames, keyframes)


def test_intel_mp4_with_b_frames_dataloader_epoch(realdata: Path, catalog: Catalog) -> None:
    torch = pytest.importorskip("torch")
    import av

    from rayform.dataloader import (
        DataSource,
        Field,
        FixedRateSampling,
        RerunMapDataset,
        VideoFrameDecoder,
    )

    torch.set_num_threads(1)
    path = realdata / "intel-sample-videos/bottle-detection.mp4"
    ds = catalog.create_dataset("videos")
    ds.register(path)
    loader = RerunMapDataset(DataSource(ds), "video_time", {
        "frame": Field("/video:VideoFrameReference:timestamp", VideoFrameDecoder(codec="h264")),
    }, timeline_sampling=FixedRateSampling(rate_hz=1.0), sample_metadata=True)
    samples: list[dict[str, Any]] = [s for b in torch.utils.data.DataLoader(
        loader, batch_size=8, collate_fn=lambda items: items) for s in b]
    assert len(samples) == 40  # 39.8 s at 1 Hz
    wanted = {int(s["meta"]["index_value"]): s["frame"] for s in samples[:3]}
    with av.open(str(path)) as container:  # the latest frame at or before each sample time
        stream = container.streams.video[0]
        previous = None
        for frame in container.decode(stream):
            t_ns = round(frame.pts * stream.time_base * 1e9)
            for value in sorted(v for v in wanted if v < t_ns):
                assert previous is not None
                got = wanted.pop(value).permute(1, 2, 0).numpy().astype(int)
                assert np.abs(got - previous.to_ndarray(format="rgb24").astype(int)).mean() < 2
            previous = frame
            if not wanted:
                break
    assert not wanted


def test_real_segments_round_trip_through_rrd(g1: DatasetEntry, nav2: DatasetEntry,
                                              tmp_path: Path, catalog: Catalog) -> None:
    pytest.importorskip("rerun")
    from rayform.exporters import export_rrd

    for source, segment, timeline in ((g1, "episode_000029", "frame_index"),
                                      (nav2, "nav2_turtlebot", "log_time")):
        out = export_rrd(source, segment, tmp_path / f"{segment}.rrd")
        back = catalog.create_dataset(f"back_{segment}")
        back.register(out)
        a, b = source.open_segment(segment), back.open_segment(segment)
        assert b.record.properties == a.record.properties
        for column in source.schema().component_columns():
            ra, rb = a.column(column, timeline), b.column(column, timeline)
            np.testing.assert_array_equal(ra.index, rb.index)
            assert ra.values.equals(rb.values), column
