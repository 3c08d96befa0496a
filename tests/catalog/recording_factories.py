"""Deterministic synthetic robot recordings and disk snapshots for the catalog tests."""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

import rayform

# One frame every 10 ms (100 Hz) from a fixed epoch.
FRAME_NS = 10_000_000
EPOCH_NS = 1_700_000_000_000_000_000
NUM_JOINTS = 7
JPEG_EVERY = 3
VIDEO_EVERY = 3
GRIPPER_EVERY = 3
KEYFRAME_EVERY = 4

RecordingFactory = Callable[..., Path]
DiskState = dict[str, str]


def jpeg_bytes(seed: int, i: int, size: int = 8) -> bytes:
    """A tiny real JPEG whose colour depends on (seed, i)."""
    colour = ((seed * 37 + i * 11) % 256, (i * 29) % 256, (seed * 53) % 256)
    buf = io.BytesIO()
    Image.new("RGB", (size, size), colour).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def joint_values(seed: int, frames: np.ndarray) -> np.ndarray:
    """``[N, 7]`` float64 joint positions: ``seed * 1000 + frame * 10 + joint``."""
    return (seed * 1000.0 + frames[:, None] * 10.0 + np.arange(NUM_JOINTS)[None, :]).astype(np.float64)


def gripper_values(seed: int, frames: np.ndarray) -> np.ndarray:
    return (seed + frames / 100.0).astype(np.float32)


def video_packet(seed: int, i: int) -> bytes:
    """A fake encoded video packet (no decoding happens in catalog tests)."""
    return f"pkt-{seed}-{i}".encode() * 3


@dataclass
class RobotEpisode:
    """Parameters of one synthetic episode written by :func:`write_robot_episode`."""

    recording_id: str
    seed: int = 0
    num_frames: int = 30
    first_frame: int = 0
    properties: dict[str, Any] = field(default_factory=dict)
    with_debug: bool = True
    with_video: bool = True
    with_images: bool = True


def write_robot_episode(path: Path, ep: RobotEpisode) -> Path:
    """Write a multi-rate, multi-timeline robot episode.

    Timelines: ``frame_index`` (sequence), ``real_time`` (timestamp) and ``elapsed`` (duration).
    Entities:
        ``/joints/position``  ``[N, 7]`` float64 at 100 Hz on all three timelines.
        ``/gripper``          float32 scalar every 3rd frame, on frame_index and real_time only.
        ``/cam0/rgb``         8×8 JPEG every 3rd frame (frame_index, real_time).
        ``/cam1``             fake H.264 packets every 3rd frame (offset 1), keyframe every 4th
                              packet, codec ``h264`` as static data.
        ``/debug/loss``       float64 scalar every frame, frame_index only.
        ``/robot/description`` static text.
    """
    seed, n = ep.seed, ep.num_frames
    frames = np.arange(ep.first_frame, ep.first_frame + n, dtype=np.int64)
    real_time = (EPOCH_NS + frames * FRAME_NS).astype("datetime64[ns]")
    elapsed = (frames * FRAME_NS).astype("timedelta64[ns]")
    with rayform.RecordingWriter(path, recording_id=ep.recording_id) as rec:
        props: dict[str, Any] = {"task": f"task-{seed % 3}", "success": seed % 2 == 0,
                                 "site": "lab-a" if seed < 5 else "lab-b", "robot": "arm7",
                                 "episode": seed, "score": seed / 4}
        props.update(ep.properties)
        rec.set_properties(**props)
        rec.log_scalars("/joints/position",
                        timelines={"frame_index": frames, "real_time": real_time,
                                   "elapsed": elapsed},
                        values=joint_values(seed, frames))
        sub = frames[::GRIPPER_EVERY]
        rec.log_scalars("/gripper",
                        timelines={"frame_index": sub,
                                   "real_time": (EPOCH_NS + sub * FRAME_NS).astype("datetime64[ns]")},
                        values=gripper_values(seed, sub))
        if ep.with_images:
            cam = frames[::JPEG_EVERY]
            rec.log_encoded_images(
                "/cam0/rgb",
                timelines={"frame_index": cam,
                           "real_time": (EPOCH_NS + cam * FRAME_NS).astype("datetime64[ns]")},
                blobs=[jpeg_bytes(seed, int(i)) for i in cam], media_type="image/jpeg")
        if ep.with_video:
            vid = frames[1::VIDEO_EVERY]
            rec.log_video_stream(
                "/cam1",
                timelines={"frame_index": vid,
                           "real_time": (EPOCH_NS + vid * FRAME_NS).astype("datetime64[ns]")},
                samples=[video_packet(seed, int(i)) for i in vid],
                is_keyframe=np.arange(len(vid)) % KEYFRAME_EVERY == 0, codec="h264")
        if ep.with_debug:
            rec.log_scalars("/debug/loss", timelines={"frame_index": frames},
                            values=frames.astype(np.float64) * 0.5)
        rec.log_static("/robot/description", components={"TextDocument:text": "arm7-urdf"})
    return path


def disk_state(root: Path) -> DiskState:
    """Every file and folder below ``root`` with a hash of its bytes (folders map to '')."""
    state: DiskState = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        for d in dirnames:
            state[str(rel / d) + "/"] = ""
        for f in filenames:
            p = Path(dirpath) / f
            state[str(rel / f)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return state


