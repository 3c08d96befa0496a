"""The same ROS messages written as a ROS 1 ``.bag``, a ROS 2 sqlite3 bag and a ROS 2 MCAP bag
(rosbags' own writers), for the tests that they register equal."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

EPOCH_S = 1_700_000_000
COUNT = 40
# (topic, ROS 2 type name); NavSatFix has no typed mapping: it is kept raw.
TOPICS = (("/imu", "sensor_msgs/msg/Imu"), ("/odom", "nav_msgs/msg/Odometry"),
          ("/joint_states", "sensor_msgs/msg/JointState"), ("/chatter", "std_msgs/msg/String"),
          ("/cam/compressed", "sensor_msgs/msg/CompressedImage"),
          ("/fix", "sensor_msgs/msg/NavSatFix"))
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) + b"\xff\xd9"


@dataclass(frozen=True, slots=True)
class BagTruth:
    """What was written: log times per topic and the values tests compare with."""

    log_ns: dict[str, np.ndarray]
    header_ns: np.ndarray
    accel: np.ndarray  # [COUNT, 3] Imu linear acceleration


def _messages(ts: Any, *, ros1: bool) -> list[tuple[str, str, int, Any]]:
    t = ts.types

    def header(i: int, frame: str) -> Any:
        stamp = t["builtin_interfaces/msg/Time"](sec=EPOCH_S + i // 10, nanosec=(i % 10) * 10**8)
        extra = {"seq": i} if ros1 else {}
        return t["std_msgs/msg/Header"](stamp=stamp, frame_id=frame, **extra)

    def vec(x: float, y: float, z: float) -> Any:
        return t["geometry_msgs/msg/Vector3"](x=x, y=y, z=z)

    quat = t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0)
    cov9 = np.arange(9, dtype=np.float64)
    cov36 = np.arange(36, dtype=np.float64) / 10
    out: list[tuple[str, str, int, Any]] = []
    for i in range(COUNT):
        log = (EPOCH_S + i // 10) * 10**9 + (i % 10) * 10**8 + 2_000_000
        h = header(i, "base_link")
        out.append(("/imu", "sensor_msgs/msg/Imu", log, t["sensor_msgs/msg/Imu"](
            header=h, orientation=quat, orientation_covariance=cov9,
            angular_velocity=vec(0.1 * i, 0.0, -0.1), angular_velocity_covariance=cov9,
            linear_acceleration=vec(0.0, 9.81, 0.01 * i), linear_acceleration_covariance=cov9)))
        pose = t["geometry_msgs/msg/Pose"](position=t["geometry_msgs/msg/Point"](
            x=float(i), y=2.0, z=0.0), orientation=quat)
        out.append(("/odom", "nav_msgs/msg/Odometry", log + 1, t["nav_msgs/msg/Odometry"](
            header=header(i, "odom"), child_frame_id="base_link",
            pose=t["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=cov36),
            twist=t["geometry_msgs/msg/TwistWithCovariance"](
                twist=t["geometry_msgs/msg/Twist"](linear=vec(1.0, 0.0, 0.0),
                                                   angular=vec(0.0, 0.0, 0.5)),
                covariance=cov36))))
        out.append(("/joint_states", "sensor_msgs/msg/JointState", log + 2,
                    t["sensor_msgs/msg/JointState"](
                        header=h, name=["elbow", "wrist"],
                        position=np.array([0.5 * i, -0.25 * i]), velocity=np.array([1.0, 2.0]),
                        effort=np.array([], dtype=np.float64))))
        if i % 4 == 0:
            out.append(("/chatter", "std_msgs/msg/String", log + 3,
                        t["std_msgs/msg/String"](data=f"hello {i}")))
            out.append(("/cam/compressed", "sensor_msgs/msg/CompressedImage", log + 4,
                        t["sensor_msgs/msg/CompressedImage"](
                            header=h, format="jpeg",
                            data=np.frombuffer(JPEG + bytes([i]), dtype=np.uint8))))
            status = t["sensor_msgs/msg/NavSatStatus"](status=0, service=1)
            out.append(("/fix", "sensor_msgs/msg/NavSatFix", log + 5, t["sensor_msgs/msg/NavSatFix"](
                header=header(i, "gps"), status=status, latitude=48.0 + i * 1e-5,
                longitude=11.0, altitude=500.0, position_covariance=cov9,
                position_covariance_type=2)))
    return out


def truth() -> BagTruth:
    from rosbags.typesys import Stores, get_typestore

    messages = _messages(get_typestore(Stores.ROS2_HUMBLE), ros1=False)
    log_ns: dict[str, list[int]] = {}
    for topic, _, log, _ in messages:
        log_ns.setdefault(topic, []).append(log)
    imu = [m for topic, _, _, m in messages if topic == "/imu"]
    return BagTruth(
        log_ns={k: np.asarray(v, dtype=np.int64) for k, v in log_ns.items()},
        header_ns=np.asarray([m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in imu]),
        accel=np.asarray([[m.linear_acceleration.x, m.linear_acceleration.y,
                           m.linear_acceleration.z] for m in imu]))


def write_ros1_bag(path: Path) -> Path:
    """A ROS 1 bag (``#ROSBAG V2.0``) of the messages, with ROS 1 (Noetic) definitions."""
    from rosbags.rosbag1 import Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS1_NOETIC)
    with Writer(path) as writer:
        _write(writer, ts, ts.serialize_ros1, ros1=True)
    return path


def write_rosbag2(folder: Path, *, storage: str) -> Path:
    """A rosbag2 folder of ``storage`` ``"sqlite3"`` or ``"mcap"`` (metadata version 9)."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    plugin = StoragePlugin.SQLITE3 if storage == "sqlite3" else StoragePlugin.MCAP
    with Writer(folder, version=9, storage_plugin=plugin) as writer:
        _write(writer, ts, ts.serialize_cdr, ros1=False)
    return folder


def _write(writer: Any, ts: Any, serialize: Callable[[Any, str], Any], *, ros1: bool) -> None:
    connections: dict[str, Any] = {}
    for topic, msgtype, log, message in _messages(ts, ros1=ros1):
        if topic not in connections:
            connections[topic] = writer.add_connection(topic, msgtype, typestore=ts)
        writer.write(connections[topic], log, bytes(serialize(message, msgtype)))
