"""A small synthetic catalog shaped like the Rayform guide's: two cameras, joints, joint deltas."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

import rayform

FPS = 30
FRAME_NS = 1_000_000_000 // FPS
EPOCH_NS = 1_700_000_000_000_000_000
NUM_JOINTS = 7
IMAGE_H, IMAGE_W = 12, 16


def jpeg(seed: int, i: int, *, h: int = IMAGE_H, w: int = IMAGE_W) -> bytes:
    """A small real JPEG of one flat colour that depends on (seed, i)."""
    colour = ((seed * 40 + i * 7) % 256, (i * 13) % 256, (seed * 90 + 30) % 256)
    buf = io.BytesIO()
    Image.new("RGB", (w, h), colour).save(buf, format="JPEG", quality=95)
    return buf.getvalue()


def joints(seed: int, frames: np.ndarray) -> np.ndarray:
    """``[N, 7]`` float64 joint angles: ``seed + frame / 100 + joint / 10``."""
    return seed + frames[:, None] / 100.0 + np.arange(NUM_JOINTS)[None, :] / 10.0


def pose_ros(seed: int, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """End-effector translation ``[N, 3]`` and quaternion ``[N, 4]`` (xyzw) in the ROS
    convention (x forward, y left, z up): a yaw of ``frame / 100`` rad about the up axis."""
    t = np.stack([1.0 + seed + frames / 100.0, 2.0 + frames / 1000.0,
                  np.full(len(frames), 3.0)], axis=1)
    half = frames / 200.0
    q = np.stack([np.zeros(len(frames)), np.zeros(len(frames)), np.sin(half), np.cos(half)], 1)
    return t, q


def pose_opencv(seed: int, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same physical pose written in the OpenCV convention (x right, y down, z forward):
    ``(x, y, z)_cv = (-y, -z, x)_ros`` and the yaw is about -y."""
    t, _ = pose_ros(seed, frames)
    t_cv = np.stack([-t[:, 1], -t[:, 2], t[:, 0]], axis=1)
    half = frames / 200.0
    q = np.stack([np.zeros(len(frames)), -np.sin(half), np.zeros(len(frames)), np.cos(half)], 1)
    return t_cv, q


def write_episode(path: Path, recording_id: str, *, seed: int, num_frames: int = 24,
                  first_frame: int = 0, properties: dict[str, Any] | None = None,
                  convention: str = "ros") -> Path:
    """One episode at 30 Hz on ``frame_index`` and ``real_time``.

    Entities: ``/cam0/rgb`` and ``/wrist/rgb`` (JPEG), ``/joints/position`` (7 float64),
    ``/joints/position_delta`` (7 float64, next minus current), ``/ee/pose`` (Transform3D
    translation + quaternion, in ``convention``); properties ``site``, ``task``, ``success``,
    ``frame_convention``.
    """
    frames = np.arange(first_frame, first_frame + num_frames, dtype=np.int64)
    tl = {"frame_index": frames,
          "real_time": (EPOCH_NS + frames * FRAME_NS).astype("datetime64[ns]")}
    q = joints(seed, frames)
    delta = np.diff(q, axis=0, append=q[-1:])
    translation, quaternion = (pose_opencv if convention == "opencv" else pose_ros)(seed, frames)
    with rayform.RecordingWriter(path, recording_id=recording_id) as rec:
        props: dict[str, Any] = {"site": f"lab-{'ab'[seed % 2]}", "task": "pick",
                                 "success": seed % 3 != 2, "frame_convention": convention}
        props.update(properties or {})
        rec.set_properties(**props)
        rec.log_encoded_images("/cam0/rgb", timelines=tl,
                               blobs=[jpeg(seed, int(i)) for i in frames], media_type="image/jpeg")
        rec.log_encoded_images("/wrist/rgb", timelines=tl,
                               blobs=[jpeg(seed + 50, int(i)) for i in frames],
                               media_type="image/jpeg")
        rec.log_scalars("/joints/position", timelines=tl, values=q)
        rec.log_scalars("/joints/position_delta", timelines=tl, values=delta)
        rec.log_columns("/ee/pose", timelines=tl,
                        components={"Transform3D:translation": translation,
                                    "Transform3D:quaternion": quaternion})
    return path


def build_catalog(root: Path, src: Path, *, num_episodes: int = 3, num_frames: int = 24,
                  dataset: str = "robots") -> rayform.Catalog:
    """A catalog at ``root`` (any URL) with dataset ``robots`` of episodes ``ep0…``."""
    catalog = rayform.Catalog.create(root)
    ds = catalog.create_dataset(dataset)
    src.mkdir(parents=True, exist_ok=True)
    paths = [write_episode(src / f"ep{i}.rfr", f"ep{i}", seed=i, num_frames=num_frames)
             for i in range(num_episodes)]
    ds.register(paths).wait()
    return catalog
