"""Synthetic episodes for the rayform.ray tests (4 short 100 Hz episodes with a camera)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from rayform.catalog import RecordingWriter

JOINTS = "/joints/position:Scalars:scalars"
ACTIONS = "/action:Scalars:scalars"
CAMERA = "/cam0/rgb:EncodedImage:blob"
NUM_EPISODES = 4
RATE_HZ = 100
CAMERA_EVERY = 5  # 20 Hz


def jpeg(seed: int, i: int) -> bytes:
    """A small real JPEG whose colour depends on (seed, i)."""
    from PIL import Image

    buf = io.BytesIO()
    colour = ((seed * 40 + i * 7) % 256, (i * 13) % 256, (seed * 90) % 256)
    Image.new("RGB", (16, 12), colour).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def write_episode(path: Path, recording_id: str, *, seed: int, num_frames: int) -> Path:
    """A 100 Hz episode: 7-D joints and actions on frame_index and real_time, a 20 Hz camera."""
    rng = np.random.default_rng(seed)
    frames = np.arange(num_frames)
    real_time = (1_700_000_000_000_000_000 + frames * (1_000_000_000 // RATE_HZ)).astype(
        "datetime64[ns]")
    timelines = {"frame_index": frames, "real_time": real_time}
    with RecordingWriter(path, recording_id=recording_id) as rec:
        rec.set_properties(task="pick", success=seed % 2 == 0)
        rec.log_scalars("/joints/position", timelines=timelines,
                        values=rng.normal(size=(num_frames, 7)).astype(np.float32))
        rec.log_scalars("/action", timelines=timelines,
                        values=rng.normal(size=(num_frames, 7)).astype(np.float32))
        cam = frames[::CAMERA_EVERY]
        rec.log_encoded_images("/cam0/rgb", timelines={"frame_index": cam,
                                                       "real_time": real_time[cam]},
                               blobs=[jpeg(seed, int(i)) for i in cam], media_type="image/jpeg")
    return path
