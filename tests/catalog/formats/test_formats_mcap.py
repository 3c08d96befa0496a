"""ROS 2 MCAP files and rosbag2 folders (written with mcap-ros2-support) register topic by topic."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mcap_sources import write_ros2_mcap, write_rosbag2

from rayform.catalog import Catalog
from rayform.errors import ConversionWarning, FormatError

pytest.importorskip("mcap_ros2")


def _register(catalog: Catalog, path: Path, name: str = "bag") -> tuple[object, list[str]]:
    ds = catalog.create_dataset(name)
    with pytest.warns(ConversionWarning) as caught:
        ds.register(path)
    return ds, [str(w.message) for w in caught]


def test_typed_topics_become_columns_on_log_and_header_timelines(tmp_path: Path,
                                                                 catalog: Catalog) -> None:
    truth = write_ros2_mcap(tmp_path / "run.mcap")
    ds, _ = _register(catalog, tmp_path / "run.mcap")
    assert ds.segment_ids() == ["run"]  # type: ignore[attr-defined]
    assert ds.timelines == {"log_time": "timestamp", "publish_time": "timestamp",  # type: ignore
                            "header_time": "timestamp"}
    seg = ds.open_segment("run")  # type: ignore[attr-defined]
    pos = seg.column("/joint_states/position:Scalars:scalars", "log_time")
    np.testing.assert_array_equal(pos.index, truth.log_ns)
    np.testing.assert_array_equal(np.stack(pos.values.to_pylist()), truth.joints)
    names = seg.column("/joint_states/position:SeriesLines:names", "log_time")
    assert names.values[0].as_py() == ["elbow", "wrist"]
    assert not seg.has_column("/joint_states/effort:Scalars:scalars")  # always empty
    header = seg.column("/joint_states/position:Scalars:scalars", "header_time")
    np.testing.assert_array_equal(header.index, truth.header_ns)
    publish = seg.column("/odom:Odometry:position", "publish_time").index
    np.testing.assert_array_equal(publish, truth.log_ns - 1000)
    odom = np.stack(seg.column("/odom:Odometry:position", "log_time").values.to_pylist())
    np.testing.assert_array_equal(odom, truth.odom_xyz)
    assert seg.column("/odom:Odometry:child_frame_id", "log_time").values[0].as_py() == \
        ["base_link"]
    assert seg.column("/odom:Header:frame_id", "log_time").values[0].as_py() == ["base"]
    imu = seg.column("/imu:Imu:linear_acceleration", "log_time").values[0].as_py()
    assert imu == [0.0, 0.0, 9.81]
    assert seg.column("/imu:Imu:orientation", "log_time").values[0].as_py() == [0, 0, 0, 1]
    blobs = seg.column("/cam/compressed:EncodedImage:blob", "log_time").values.to_pylist()
    assert [b[0] for b in blobs] == truth.jpegs
    assert seg.column("/cam/compressed:EncodedImage:media_type", "log_time").values[0] \
        .as_py() == ["image/jpeg"]
    raw = seg.column("/cam/raw:Image:buffer", "log_time").values.to_pylist()
    assert [r[0] for r in raw] == [rgb.tobytes() for rgb in truth.raw_rgb]  # padding dropped
    fmt = seg.column("/cam/raw:Image:format", "log_time").values[0].as_py()[0]
    assert fmt == {"width": 3, "height": 2, "pixel_format": None, "color_model": 2,
                   "channel_datatype": 6}
    k = seg.column("/cam/info:CameraInfo:k", "log_time").values[0].as_py()
    assert k == [1.0, 0, 1.5, 0, 1.0, 1.0, 0, 0, 1.0]
    tf = seg.column("/tf:Transform3D:child_frame", "log_time").values.to_pylist()
    assert tf == [["a", "b"]] * len(truth.log_ns)  # one row per message, one item per transform
    translation = seg.column("/tf:Transform3D:translation", "log_time").values[2].as_py()
    assert translation == [[1.0, 2.0, 2.0], [0.0, 0.0, 0.0]]
    assert seg.column("/pose:Pose:position", "log_time").values[3].as_py() == [1.0, 2.0, 3.0]
    assert seg.column("/chatter:TextDocument:text", "log_time").values.to_pylist() == \
        [[t] for t in truth.texts]
    schema = seg.column("/odom:McapSchema:name", "log_time")
    assert schema.is_static and schema.values[0].as_py() == ["nav_msgs/msg/Odometry"]


def test_unknown_types_are_kept_raw_and_bad_schemas_skipped_with_warnings(
        tmp_path: Path, catalog: Catalog) -> None:
    write_ros2_mcap(tmp_path / "run.mcap")
    ds, messages = _register(catalog, tmp_path / "run.mcap")
    text = " | ".join(messages)
    assert "topic '/custom' (my_msgs/msg/Custom) has no typed mapping; kept as raw bytes in " \
        "'/custom:McapMessage:data'" in text
    assert "topic '/ping/_service_event' (my_srvs/srv/Ping_Event): its schema cannot be " \
        "parsed" in text
    seg = ds.open_segment("run")  # type: ignore[attr-defined]
    raw = seg.column("/custom:McapMessage:data", "log_time").values
    assert len(raw) == 6 and isinstance(raw[0].as_py()[0], bytes)
    assert seg.column("/custom:McapSchema:data", "log_time").values[0].as_py() == \
        ["int32 a\nstring b"]
    assert "/ping/_service_event" not in {c.split(":")[0]
                                          for c in ds.schema().component_columns()}  # type: ignore


def test_rosbag2_folder_is_one_segment_named_after_the_folder(tmp_path: Path,
                                                              catalog: Catalog) -> None:
    truth = write_rosbag2(tmp_path / "bag_2024")
    ds, _ = _register(catalog, tmp_path / "bag_2024")
    assert ds.segment_ids() == ["bag_2024"]  # type: ignore[attr-defined]
    row = ds.segment_table_arrow().to_pylist()[0]  # type: ignore[attr-defined]
    assert row["property:rosbag2_version"] == 5
    assert row["property:mcap_profile"] == "ros2"
    seg = ds.open_segment("bag_2024")  # type: ignore[attr-defined]
    np.testing.assert_array_equal(seg.column("/odom:Odometry:position", "log_time").index,
                                  truth.log_ns)


def test_rosbag2_with_sqlite_storage_goes_to_the_rosbag_importer(tmp_path: Path,
                                                                 catalog: Catalog) -> None:
    """A folder whose metadata says sqlite3 is read as one (here it holds an MCAP file)."""
    write_rosbag2(tmp_path / "old_bag", storage="sqlite3")
    with pytest.raises(FormatError, match=r"old_bag_0\.mcap: not a ROS 2 sqlite3 bag file"):
        catalog.create_dataset("x").register(tmp_path / "old_bag")


def test_rosbag2_with_other_storage_is_refused(tmp_path: Path, catalog: Catalog) -> None:
    write_rosbag2(tmp_path / "odd_bag", storage="rosbag_v2")
    with pytest.raises(FormatError, match="storage 'rosbag_v2' is not supported; convert"):
        catalog.create_dataset("x").register(tmp_path / "odd_bag")
