"""Synthetic ROS 2 MCAP files written with ``mcap-ros2-support``'s writer (CDR serialization)."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

SEPARATOR = "=" * 80
_DEFS: dict[str, str] = {
    "builtin_interfaces/Time": "int32 sec\nuint32 nanosec",
    "std_msgs/Header": "builtin_interfaces/Time stamp\nstring frame_id",
    "std_msgs/String": "string data",
    "geometry_msgs/Point": "float64 x\nfloat64 y\nfloat64 z",
    "geometry_msgs/Vector3": "float64 x\nfloat64 y\nfloat64 z",
    "geometry_msgs/Quaternion": "float64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1",
    "geometry_msgs/Pose": "geometry_msgs/Point position\ngeometry_msgs/Quaternion orientation",
    "geometry_msgs/PoseStamped": "std_msgs/Header header\ngeometry_msgs/Pose pose",
    "geometry_msgs/PoseWithCovariance": "geometry_msgs/Pose pose\nfloat64[36] covariance",
    "geometry_msgs/Twist": "geometry_msgs/Vector3 linear\ngeometry_msgs/Vector3 angular",
    "geometry_msgs/TwistWithCovariance": "geometry_msgs/Twist twist\nfloat64[36] covariance",
    "geometry_msgs/Transform": ("geometry_msgs/Vector3 translation\n"
                                "geometry_msgs/Quaternion rotation"),
    "geometry_msgs/TransformStamped": ("std_msgs/Header header\nstring child_frame_id\n"
                                       "geometry_msgs/Transform transform"),
    "tf2_msgs/TFMessage": "geometry_msgs/TransformStamped[] transforms",
    "nav_msgs/Odometry": ("std_msgs/Header header\nstring child_frame_id\n"
                          "geometry_msgs/PoseWithCovariance pose\n"
                          "geometry_msgs/TwistWithCovariance twist"),
    "sensor_msgs/JointState": ("std_msgs/Header header\nstring[] name\nfloat64[] position\n"
                               "float64[] velocity\nfloat64[] effort"),
    "sensor_msgs/Imu": ("std_msgs/Header header\ngeometry_msgs/Quaternion orientation\n"
                        "float64[9] orientation_covariance\ngeometry_msgs/Vector3 angular_velocity\n"
                        "float64[9] angular_velocity_covariance\n"
                        "geometry_msgs/Vector3 linear_acceleration\n"
                        "float64[9] linear_acceleration_covariance"),
    "sensor_msgs/Image": ("std_msgs/Header header\nuint32 height\nuint32 width\nstring encoding\n"
                          "uint8 is_bigendian\nuint32 step\nuint8[] data"),
    "sensor_msgs/CompressedImage": "std_msgs/Header header\nstring format\nuint8[] data",
    "sensor_msgs/RegionOfInterest": ("uint32 x_offset\nuint32 y_offset\nuint32 height\n"
                                     "uint32 width\nbool do_rectify"),
    "sensor_msgs/CameraInfo": ("std_msgs/Header header\nuint32 height\nuint32 width\n"
                               "string distortion_model\nfloat64[] d\nfloat64[9] k\nfloat64[9] r\n"
                               "float64[12] p\nuint32 binning_x\nuint32 binning_y\n"
                               "sensor_msgs/RegionOfInterest roi"),
    "my_msgs/Custom": "int32 a\nstring b",
}


def msgdef(name: str) -> str:
    """A ROS 2 ``.msg`` schema with its dependencies appended (rosbag2's MCAP layout)."""
    order: list[str] = []

    def visit(type_name: str) -> None:
        for line in _DEFS[type_name].splitlines():
            dep = re.sub(r"\[.*\]", "", line.split()[0])
            if "/" in dep and dep not in order:
                order.append(dep)
                visit(dep)

    visit(name)
    parts = [_DEFS[name]] + [f"{SEPARATOR}\nMSG: {dep}\n{_DEFS[dep]}" for dep in order]
    return "\n".join(parts)


def _ros_name(name: str) -> str:
    pkg, typ = name.split("/")
    return f"{pkg}/msg/{typ}"


@dataclass
class McapTruth:
    log_ns: npt.NDArray[np.int64]
    header_ns: npt.NDArray[np.int64]
    joints: npt.NDArray[np.float64]
    odom_xyz: npt.NDArray[np.float64]
    jpegs: list[bytes] = field(default_factory=list)
    raw_rgb: list[npt.NDArray[np.uint8]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)


def _stamp(ns: int) -> dict[str, int]:
    return {"sec": ns // 1_000_000_000, "nanosec": ns % 1_000_000_000}


def _jpeg(seed: int) -> bytes:
    from PIL import Image

    arr = np.random.default_rng(seed).integers(0, 255, (8, 8, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG")
    return buf.getvalue()


def write_ros2_mcap(path: Path, *, num_messages: int = 6, with_bad_schema: bool = True
                    ) -> McapTruth:
    """Typed topics of every mapped kind, an unknown type and an unparseable service schema."""
    from mcap_ros2.writer import Writer

    n = num_messages
    log_ns = 1_700_000_000_000_000_000 + np.arange(n, dtype=np.int64) * 50_000_000
    header_ns = 900_000_000_000 + np.arange(n, dtype=np.int64) * 50_000_000
    rng = np.random.default_rng(7)
    truth = McapTruth(log_ns=log_ns, header_ns=header_ns, joints=rng.normal(size=(n, 2)),
                      odom_xyz=rng.normal(size=(n, 3)))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        writer = Writer(fh)
        schemas = {name: writer.register_msgdef(_ros_name(name), msgdef(name)) for name in _DEFS
                   if name not in ("builtin_interfaces/Time",)}

        def put(topic: str, name: str, i: int, message: dict[str, Any]) -> None:
            writer.write_message(topic, schemas[name], message, log_time=int(log_ns[i]),
                                 publish_time=int(log_ns[i]) - 1000)

        for i in range(n):
            header = {"stamp": _stamp(int(header_ns[i])), "frame_id": "base"}
            quat = {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}
            vec = {"x": 1.0, "y": 2.0, "z": float(i)}
            put("/joint_states", "sensor_msgs/JointState", i, {
                "header": header, "name": ["elbow", "wrist"],
                "position": truth.joints[i].tolist(), "velocity": [0.5, -0.5], "effort": []})
            put("/imu", "sensor_msgs/Imu", i, {
                "header": header, "orientation": quat, "orientation_covariance": [0.0] * 9,
                "angular_velocity": vec, "angular_velocity_covariance": [0.0] * 9,
                "linear_acceleration": {"x": 0.0, "y": 0.0, "z": 9.81},
                "linear_acceleration_covariance": [0.0] * 9})
            truth.jpegs.append(_jpeg(i))
            put("/cam/compressed", "sensor_msgs/CompressedImage", i, {
                "header": header, "format": "rgb8; jpeg compressed bgr8",
                "data": truth.jpegs[-1]})
            rgb = rng.integers(0, 255, (2, 3, 3), dtype=np.uint8)
            truth.raw_rgb.append(rgb)
            padded = np.zeros((2, 12), dtype=np.uint8)  # step 12 > 3 * 3: row padding
            padded[:, :9] = rgb.reshape(2, 9)
            put("/cam/raw", "sensor_msgs/Image", i, {
                "header": header, "height": 2, "width": 3, "encoding": "rgb8",
                "is_bigendian": 0, "step": 12, "data": padded.tobytes()})
            put("/cam/info", "sensor_msgs/CameraInfo", i, {
                "header": header, "height": 2, "width": 3, "distortion_model": "plumb_bob",
                "d": [0.1, 0.0, 0.0, 0.0, 0.0], "k": [1.0, 0, 1.5, 0, 1.0, 1.0, 0, 0, 1.0],
                "r": [1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0], "p": [1.0] + [0.0] * 11,
                "binning_x": 0, "binning_y": 0,
                "roi": {"x_offset": 0, "y_offset": 0, "height": 0, "width": 0,
                        "do_rectify": False}})
            xyz = truth.odom_xyz[i]
            put("/odom", "nav_msgs/Odometry", i, {
                "header": header, "child_frame_id": "base_link",
                "pose": {"pose": {"position": {"x": xyz[0], "y": xyz[1], "z": xyz[2]},
                                  "orientation": quat}, "covariance": [0.0] * 36},
                "twist": {"twist": {"linear": vec, "angular": vec}, "covariance": [0.0] * 36}})
            put("/tf", "tf2_msgs/TFMessage", i, {"transforms": [
                {"header": header, "child_frame_id": "a",
                 "transform": {"translation": vec, "rotation": quat}},
                {"header": header, "child_frame_id": "b",
                 "transform": {"translation": {"x": 0.0, "y": 0.0, "z": 0.0},
                               "rotation": quat}}]})
            put("/pose", "geometry_msgs/PoseStamped", i, {
                "header": header, "pose": {"position": vec, "orientation": quat}})
            truth.texts.append(f"hello {i}")
            put("/chatter", "std_msgs/String", i, {"data": truth.texts[-1]})
            put("/custom", "my_msgs/Custom", i, {"a": i, "b": "x"})
        if with_bad_schema:
            low = writer._writer  # the plain MCAP writer underneath
            schema_id = low.register_schema("my_srvs/srv/Ping_Event", "ros2msg",
                                            b"int32 request\n---\nint32 response")
            channel_id = low.register_channel("/ping/_service_event", "cdr", schema_id)
            low.add_message(channel_id, log_time=int(log_ns[0]), data=b"\x00\x01\x00\x00",
                            publish_time=int(log_ns[0]))
        writer.finish()
    return truth


ROSBAG2_METADATA = """rosbag2_bagfile_information:
  version: 5
  storage_identifier: {storage}
  duration:
    nanoseconds: 250000000
  starting_time:
    nanoseconds_since_epoch: 1700000000000000000
  message_count: 66
  topics_with_message_count: []
  compression_format: ""
  compression_mode: ""
  relative_file_paths:
    - {name}
"""


def write_rosbag2(folder: Path, *, storage: str = "mcap") -> McapTruth:
    """A rosbag2 folder: ``metadata.yaml`` next to one MCAP file."""
    folder.mkdir(parents=True)
    truth = write_ros2_mcap(folder / f"{folder.name}_0.mcap", with_bad_schema=False)
    (folder / "metadata.yaml").write_text(
        ROSBAG2_METADATA.format(storage=storage, name=f"{folder.name}_0.mcap"))
    return truth
