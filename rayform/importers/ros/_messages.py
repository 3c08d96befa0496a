"""Typed mappings of common ROS messages (ROS 2 names; ROS 1 types map the same) to rayform columns.

Each mapping takes the decoded messages of one topic and returns the components of the topic's
entity (and of child entities, for JointState), plus the header stamps when the type has a header.
Vectors are ``List<Float64>`` rows; images follow Rerun's archetypes (``EncodedImage``, ``Image``);
transforms follow Rerun's ``Transform3D`` (one instance per transform of a ``TFMessage`` row).

========================================  ==============================================
message                                   components (on the topic's entity unless noted)
========================================  ==============================================
sensor_msgs/Image                         ``Image:buffer`` (tightly packed), ``Image:format``
sensor_msgs/CompressedImage               ``EncodedImage:blob``, ``EncodedImage:media_type``
sensor_msgs/JointState                    ``<topic>/position|velocity|effort:Scalars:scalars``
                                          + static ``SeriesLines:names``; ``JointState:name``
sensor_msgs/Imu                           ``Imu:orientation`` (xyzw), ``Imu:angular_velocity``,
                                          ``Imu:linear_acceleration`` and their covariances
sensor_msgs/CameraInfo                    ``CameraInfo:width|height|distortion_model|d|k|r|p``
nav_msgs/Odometry                         ``Odometry:position|orientation|linear_velocity|``
                                          ``angular_velocity|pose_covariance|twist_covariance|``
                                          ``child_frame_id``
tf2_msgs/TFMessage                        ``Transform3D:translation|quaternion|parent_frame|``
                                          ``child_frame`` (one instance per transform)
geometry_msgs Pose*, Transform*, Twist*,  ``Pose:position|orientation|covariance``,
Accel*, Wrench*, Point*, Vector3*,        ``Transform:translation|rotation|child_frame_id``,
Quaternion*                               ``Twist:linear|angular|covariance``, ``Accel:*``,
                                          ``Wrench:force|torque``, ``Scalars:scalars``
std_msgs String / numbers / *MultiArray   ``TextDocument:text`` / ``Scalars:scalars``
std_msgs Header, ColorRGBA                ``Header:frame_id`` / ``Scalars:scalars``
========================================  ==============================================

Every stamped type also gets ``Header:frame_id``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

HEADER_FRAME_ID: Final = "Header:frame_id"
SCALARS: Final = "Scalars:scalars"
SERIES_NAMES: Final = "SeriesLines:names"


class UnmappableError(Exception):
    """The messages cannot take the typed mapping (e.g. an unknown image encoding)."""


@dataclass
class Mapped:
    """The columns made from one topic's messages."""

    components: dict[str, pa.Array] = field(default_factory=dict)
    static: dict[str, pa.Array] = field(default_factory=dict)
    children: dict[str, tuple[dict[str, pa.Array], dict[str, pa.Array]]] = field(
        default_factory=dict)
    header_ns: npt.NDArray[np.int64] | None = None


Mapping = Callable[[Sequence[Any]], Mapped]


# ----------------------------------------------------------------------------- array helpers
def _rows(values: pa.Array) -> pa.Array:
    """One value per row, wrapped in one-element lists."""
    return pa.ListArray.from_arrays(pa.array(np.arange(len(values) + 1, dtype=np.int32)), values)


def vectors(rows: Sequence[Sequence[float]] | Sequence[npt.NDArray[Any]] | npt.NDArray[Any],
            dtype: type[np.generic] = np.float64) -> pa.Array:
    """Rows of numbers (lists or arrays, ragged allowed) as ``List<dtype>``."""
    if not isinstance(rows, np.ndarray) and len(rows):
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        if lengths[0] and (lengths == lengths[0]).all():
            rows = np.asarray(rows, dtype=dtype).reshape(len(rows), int(lengths[0]))
    if isinstance(rows, np.ndarray) and rows.ndim == 2:
        n, d = rows.shape
        flat = pa.array(np.ascontiguousarray(rows, dtype=dtype).reshape(-1))
        return pa.ListArray.from_arrays(pa.array(np.arange(0, (n + 1) * d, d, dtype=np.int32)), flat)
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    offsets = np.zeros(len(rows) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat_values = np.concatenate([np.asarray(r, dtype=dtype).reshape(-1) for r in rows]) \
        if len(rows) and offsets[-1] else np.zeros(0, dtype=dtype)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat_values))


def strings(values: Sequence[str]) -> pa.Array:
    return _rows(pa.array(list(values), pa.string()))


def _stamp_ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _xyz(v: Any) -> list[float]:
    return [float(v.x), float(v.y), float(v.z)]


def _xyzw(q: Any) -> list[float]:
    return [float(q.x), float(q.y), float(q.z), float(q.w)]


def _with_header(mapped: Mapped, msgs: Sequence[Any]) -> Mapped:
    mapped.header_ns = np.fromiter((_stamp_ns(m.header.stamp) for m in msgs), np.int64, len(msgs))
    mapped.components[HEADER_FRAME_ID] = strings([str(m.header.frame_id) for m in msgs])
    return mapped


def _stamped(inner: Callable[[Sequence[Any]], Mapped], attr: str) -> Mapping:
    """A mapping for ``<Type>Stamped``: the inner type's mapping of ``msg.<attr>`` plus the header."""
    def mapping(msgs: Sequence[Any]) -> Mapped:
        return _with_header(inner([getattr(m, attr) for m in msgs]), msgs)
    return mapping


# ------------------------------------------------------------------------------- sensor_msgs
_RERUN_COLOR: Final[dict[str, tuple[int, int]]] = {
    # ROS encoding -> (Rerun ColorModel, Rerun ChannelDatatype)
    "rgb8": (2, 6), "rgba8": (3, 6), "bgr8": (4, 6), "bgra8": (5, 6), "mono8": (1, 6),
    "8uc1": (1, 6), "8uc3": (4, 6), "8uc4": (5, 6), "mono16": (1, 8), "16uc1": (1, 8),
    "16sc1": (1, 9), "32sc1": (1, 11), "32fc1": (1, 34), "64fc1": (1, 35), "rgb16": (2, 8),
    "rgba16": (3, 8), "bgr16": (4, 8), "bgra16": (5, 8), "8sc1": (1, 7),
}
_CHANNELS: Final = {1: 1, 2: 3, 3: 4, 4: 3, 5: 4}
_BYTES: Final = {6: 1, 7: 1, 8: 2, 9: 2, 10: 4, 11: 4, 12: 8, 13: 8, 33: 2, 34: 4, 35: 8}
_RERUN_PIXEL_FORMAT: Final[dict[str, tuple[int, float]]] = {
    # ROS encoding -> (Rerun PixelFormat, bytes per pixel)
    "yuv422_yuy2": (27, 2.0), "yuyv": (27, 2.0), "nv12": (26, 1.5), "bayer_rggb8": (128, 1.0),
    "bayer_bggr8": (129, 1.0), "bayer_gbrg8": (130, 1.0), "bayer_grbg8": (131, 1.0),
}
IMAGE_FORMAT_TYPE: Final = pa.struct([
    pa.field("width", pa.uint32(), nullable=False), pa.field("height", pa.uint32(), nullable=False),
    pa.field("pixel_format", pa.uint8()), pa.field("color_model", pa.uint8()),
    pa.field("channel_datatype", pa.uint8())])


def _image(msgs: Sequence[Any]) -> Mapped:
    buffers: list[bytes] = []
    formats: list[dict[str, Any]] = []
    for m in msgs:
        encoding = str(m.encoding).lower()
        width, height, step = int(m.width), int(m.height), int(m.step)
        data = bytes(m.data)
        if encoding in _RERUN_COLOR:
            model, dtype = _RERUN_COLOR[encoding]
            row_bytes = width * _CHANNELS[model] * _BYTES[dtype]
            if step > row_bytes:  # drop row padding
                rows = np.frombuffer(data, np.uint8)[: step * height].reshape(height, step)
                data = rows[:, :row_bytes].tobytes()
            if _BYTES[dtype] > 1 and bool(m.is_bigendian):
                swapped = np.frombuffer(data, np.dtype(f">u{_BYTES[dtype]}")).astype(
                    f"<u{_BYTES[dtype]}")
                data = swapped.tobytes()
            formats.append({"width": width, "height": height, "pixel_format": None,
                            "color_model": model, "channel_datatype": dtype})
        elif encoding in _RERUN_PIXEL_FORMAT:
            pixel_format, bpp = _RERUN_PIXEL_FORMAT[encoding]
            if step != int(width * (bpp if bpp >= 1 else 1)) and encoding != "nv12":
                raise UnmappableError(f"image encoding {encoding!r} with row padding (step {step})")
            formats.append({"width": width, "height": height, "pixel_format": pixel_format,
                            "color_model": None, "channel_datatype": None})
        else:
            raise UnmappableError(f"image encoding {m.encoding!r} has no Rerun image format")
        buffers.append(data)
    mapped = Mapped(components={
        "Image:buffer": _rows(pa.array(buffers, pa.binary())),
        "Image:format": _rows(pa.array(formats, IMAGE_FORMAT_TYPE)),
    })
    return _with_header(mapped, msgs)


def image_media_type(fmt: str) -> str:
    """The media type of a ``CompressedImage.format`` (``"rgb8; jpeg compressed bgr8"``)."""
    lowered = fmt.lower()
    if "png" in lowered:
        return "image/png"
    if "jpeg" in lowered or "jpg" in lowered:
        return "image/jpeg"
    raise UnmappableError(f"compressed image format {fmt!r} is neither JPEG nor PNG")


def _compressed_image(msgs: Sequence[Any]) -> Mapped:
    mapped = Mapped(components={
        "EncodedImage:blob": _rows(pa.array([bytes(m.data) for m in msgs], pa.binary())),
        "EncodedImage:media_type": strings([image_media_type(str(m.format)) for m in msgs]),
    })
    return _with_header(mapped, msgs)


def _joint_state(msgs: Sequence[Any]) -> Mapped:
    names = [list(map(str, m.name)) for m in msgs]
    mapped = Mapped(components={"JointState:name": vectors_of_strings(names)})
    static_names = pa.array([names[0]], pa.list_(pa.string()))
    for part in ("position", "velocity", "effort"):
        rows = [getattr(m, part) for m in msgs]
        if not any(len(r) for r in rows):
            continue
        static = {SERIES_NAMES: static_names} if all(len(r) == len(names[0]) for r in rows) else {}
        mapped.children["/" + part] = ({SCALARS: vectors(rows)}, static)
    return _with_header(mapped, msgs)


def vectors_of_strings(rows: Sequence[Sequence[str]]) -> pa.Array:
    return pa.array([list(r) for r in rows], pa.list_(pa.string()))


def _imu(msgs: Sequence[Any]) -> Mapped:
    mapped = Mapped(components={
        "Imu:orientation": vectors(np.array([_xyzw(m.orientation) for m in msgs])),
        "Imu:orientation_covariance": vectors([m.orientation_covariance for m in msgs]),
        "Imu:angular_velocity": vectors(np.array([_xyz(m.angular_velocity) for m in msgs])),
        "Imu:angular_velocity_covariance": vectors(
            [m.angular_velocity_covariance for m in msgs]),
        "Imu:linear_acceleration": vectors(np.array([_xyz(m.linear_acceleration) for m in msgs])),
        "Imu:linear_acceleration_covariance": vectors(
            [m.linear_acceleration_covariance for m in msgs]),
    })
    return _with_header(mapped, msgs)


def _camera_info(msgs: Sequence[Any]) -> Mapped:
    mapped = Mapped(components={
        "CameraInfo:width": _rows(pa.array([int(m.width) for m in msgs], pa.uint32())),
        "CameraInfo:height": _rows(pa.array([int(m.height) for m in msgs], pa.uint32())),
        "CameraInfo:distortion_model": strings([str(m.distortion_model) for m in msgs]),
        "CameraInfo:d": vectors([m.d for m in msgs]),
        "CameraInfo:k": vectors([m.k for m in msgs]),
        "CameraInfo:r": vectors([m.r for m in msgs]),
        "CameraInfo:p": vectors([m.p for m in msgs]),
    })
    return _with_header(mapped, msgs)


# ---------------------------------------------------------------------------- nav / geometry
def _odometry(msgs: Sequence[Any]) -> Mapped:
    mapped = Mapped(components={
        "Odometry:position": vectors(np.array([_xyz(m.pose.pose.position) for m in msgs])),
        "Odometry:orientation": vectors(np.array([_xyzw(m.pose.pose.orientation) for m in msgs])),
        "Odometry:pose_covariance": vectors([m.pose.covariance for m in msgs]),
        "Odometry:linear_velocity": vectors(np.array([_xyz(m.twist.twist.linear) for m in msgs])),
        "Odometry:angular_velocity": vectors(np.array([_xyz(m.twist.twist.angular)
                                                       for m in msgs])),
        "Odometry:twist_covariance": vectors([m.twist.covariance for m in msgs]),
        "Odometry:child_frame_id": strings([str(m.child_frame_id) for m in msgs]),
    })
    return _with_header(mapped, msgs)


_F32_3 = pa.list_(pa.field("item", pa.float32(), nullable=False), 3)
_F32_4 = pa.list_(pa.field("item", pa.float32(), nullable=False), 4)


def _fixed(values: list[list[float]], width: int, offsets: pa.Array) -> pa.Array:
    flat = pa.array(np.asarray(values, dtype=np.float32).reshape(-1), pa.float32())
    inner = pa.FixedSizeListArray.from_arrays(flat, type=_F32_3 if width == 3 else _F32_4)
    return pa.ListArray.from_arrays(offsets, inner)


def _tf_message(msgs: Sequence[Any]) -> Mapped:
    translation: list[list[float]] = []
    rotation: list[list[float]] = []
    parents: list[str] = []
    children: list[str] = []
    counts: list[int] = []
    stamps: list[int] = []
    for m in msgs:
        counts.append(len(m.transforms))
        stamps.append(_stamp_ns(m.transforms[0].header.stamp) if m.transforms else 0)
        for t in m.transforms:
            translation.append(_xyz(t.transform.translation))
            rotation.append(_xyzw(t.transform.rotation))
            parents.append(str(t.header.frame_id))
            children.append(str(t.child_frame_id))
    offsets_np = np.zeros(len(msgs) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets_np[1:])
    offsets = pa.array(offsets_np)
    return Mapped(components={
        "Transform3D:translation": _fixed(translation, 3, offsets),
        "Transform3D:quaternion": _fixed(rotation, 4, offsets),
        "Transform3D:parent_frame": pa.ListArray.from_arrays(offsets, pa.array(parents, pa.string())),
        "Transform3D:child_frame": pa.ListArray.from_arrays(offsets, pa.array(children, pa.string())),
    }, header_ns=np.asarray(stamps, dtype=np.int64))


def _pose(msgs: Sequence[Any]) -> Mapped:
    return Mapped(components={
        "Pose:position": vectors(np.array([_xyz(m.position) for m in msgs])),
        "Pose:orientation": vectors(np.array([_xyzw(m.orientation) for m in msgs])),
    })


def _pose_with_covariance(msgs: Sequence[Any]) -> Mapped:
    mapped = _pose([m.pose for m in msgs])
    mapped.components["Pose:covariance"] = vectors([m.covariance for m in msgs])
    return mapped


def _transform(msgs: Sequence[Any]) -> Mapped:
    return Mapped(components={
        "Transform:translation": vectors(np.array([_xyz(m.translation) for m in msgs])),
        "Transform:rotation": vectors(np.array([_xyzw(m.rotation) for m in msgs])),
    })


def _transform_stamped(msgs: Sequence[Any]) -> Mapped:
    mapped = _with_header(_transform([m.transform for m in msgs]), msgs)
    mapped.components["Transform:child_frame_id"] = strings([str(m.child_frame_id) for m in msgs])
    return mapped


def _pair(archetype: str, first: str, second: str) -> Mapping:
    def mapping(msgs: Sequence[Any]) -> Mapped:
        return Mapped(components={
            f"{archetype}:{first}": vectors(np.array([_xyz(getattr(m, first)) for m in msgs])),
            f"{archetype}:{second}": vectors(np.array([_xyz(getattr(m, second)) for m in msgs])),
        })
    return mapping


def _twist_with_covariance(msgs: Sequence[Any]) -> Mapped:
    mapped = _pair("Twist", "linear", "angular")([m.twist for m in msgs])
    mapped.components["Twist:covariance"] = vectors([m.covariance for m in msgs])
    return mapped


def _xyz_scalars(msgs: Sequence[Any]) -> Mapped:
    return Mapped(components={SCALARS: vectors(np.array([_xyz(m) for m in msgs]))})


def _xyzw_scalars(msgs: Sequence[Any]) -> Mapped:
    return Mapped(components={SCALARS: vectors(np.array([_xyzw(m) for m in msgs]))})


# ---------------------------------------------------------------------------------- std_msgs
def _string(msgs: Sequence[Any]) -> Mapped:
    return Mapped(components={"TextDocument:text": strings([str(m.data) for m in msgs])})


def _number(dtype: type[np.generic]) -> Mapping:
    def mapping(msgs: Sequence[Any]) -> Mapped:
        values = np.array([_number_value(m.data) for m in msgs], dtype=dtype)
        return Mapped(components={SCALARS: vectors(values.reshape(-1, 1), dtype)})
    return mapping


def _number_value(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return value[0] if value else 0
    if isinstance(value, str):
        return ord(value) if value else 0
    return value


def _multi_array(dtype: type[np.generic]) -> Mapping:
    def mapping(msgs: Sequence[Any]) -> Mapped:
        rows = [np.frombuffer(bytes(m.data), dtype) if isinstance(m.data, bytes | bytearray)
                else np.asarray(m.data, dtype) for m in msgs]
        return Mapped(components={SCALARS: vectors(rows, dtype)})
    return mapping


def _header(msgs: Sequence[Any]) -> Mapped:
    return Mapped(components={HEADER_FRAME_ID: strings([str(m.frame_id) for m in msgs])},
                  header_ns=np.fromiter((_stamp_ns(m.stamp) for m in msgs), np.int64, len(msgs)))


def _color(msgs: Sequence[Any]) -> Mapped:
    values = np.array([[m.r, m.g, m.b, m.a] for m in msgs], dtype=np.float32)
    return Mapped(components={SCALARS: vectors(values, np.float32)})


_NUMBERS: Final[dict[str, type[np.generic]]] = {
    "Bool": np.bool_, "Byte": np.uint8, "Char": np.uint8, "Int8": np.int8, "UInt8": np.uint8,
    "Int16": np.int16, "UInt16": np.uint16, "Int32": np.int32, "UInt32": np.uint32,
    "Int64": np.int64, "UInt64": np.uint64, "Float32": np.float32, "Float64": np.float64,
}

MAPPINGS: Final[dict[str, Mapping]] = {
    "sensor_msgs/msg/Image": _image,
    "sensor_msgs/msg/CompressedImage": _compressed_image,
    "sensor_msgs/msg/JointState": _joint_state,
    "sensor_msgs/msg/Imu": _imu,
    "sensor_msgs/msg/CameraInfo": _camera_info,
    "nav_msgs/msg/Odometry": _odometry,
    "tf2_msgs/msg/TFMessage": _tf_message,
    "geometry_msgs/msg/Pose": _pose,
    "geometry_msgs/msg/PoseStamped": _stamped(_pose, "pose"),
    "geometry_msgs/msg/PoseWithCovariance": _pose_with_covariance,
    "geometry_msgs/msg/PoseWithCovarianceStamped": _stamped(_pose_with_covariance, "pose"),
    "geometry_msgs/msg/Transform": _transform,
    "geometry_msgs/msg/TransformStamped": _transform_stamped,
    "geometry_msgs/msg/Twist": _pair("Twist", "linear", "angular"),
    "geometry_msgs/msg/TwistStamped": _stamped(_pair("Twist", "linear", "angular"), "twist"),
    "geometry_msgs/msg/TwistWithCovariance": _twist_with_covariance,
    "geometry_msgs/msg/TwistWithCovarianceStamped": _stamped(_twist_with_covariance, "twist"),
    "geometry_msgs/msg/Accel": _pair("Accel", "linear", "angular"),
    "geometry_msgs/msg/AccelStamped": _stamped(_pair("Accel", "linear", "angular"), "accel"),
    "geometry_msgs/msg/Wrench": _pair("Wrench", "force", "torque"),
    "geometry_msgs/msg/WrenchStamped": _stamped(_pair("Wrench", "force", "torque"), "wrench"),
    "geometry_msgs/msg/Point": _xyz_scalars,
    "geometry_msgs/msg/PointStamped": _stamped(_xyz_scalars, "point"),
    "geometry_msgs/msg/Vector3": _xyz_scalars,
    "geometry_msgs/msg/Vector3Stamped": _stamped(_xyz_scalars, "vector"),
    "geometry_msgs/msg/Quaternion": _xyzw_scalars,
    "geometry_msgs/msg/QuaternionStamped": _stamped(_xyzw_scalars, "quaternion"),
    "std_msgs/msg/String": _string,
    "std_msgs/msg/Header": _header,
    "std_msgs/msg/ColorRGBA": _color,
    **{f"std_msgs/msg/{name}": _number(dtype) for name, dtype in _NUMBERS.items()},
    **{f"std_msgs/msg/{name}MultiArray": _multi_array(dtype) for name, dtype in _NUMBERS.items()
       if name not in ("Bool", "Char")},
}


def mapping_for(schema_name: str) -> Mapping | None:
    """The typed mapping of a ROS 2 type name (``pkg/msg/Type``; ROS 1 style ``pkg/Type`` too)."""
    name = schema_name
    parts = name.split("/")
    if len(parts) == 2:
        name = f"{parts[0]}/msg/{parts[1]}"
    return MAPPINGS.get(name)
