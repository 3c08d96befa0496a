""".rrd recordings written by rerun-sdk itself, for the differential test against Rerun's loader.

Two sets: synthetic episodes (scalars, real JPEGs and an H.264 ``VideoStream`` with keyframe
flags, on a sequence and an irregular timestamp timeline), and the Unitree G1 LeRobot episodes of
``../shared/realdata`` logged through rerun-sdk as a Rerun user would (their joint states and
actions, and their AV1 camera packets as a ``VideoStream``, on ``frame_index`` and a duration
timeline from the Parquet ``timestamp``).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from PIL import Image

from rayform.media import encode_video_packets

START_NS = 1_800_000_000_000_000_000
G1_CAMERA = "observation.images.cam_high"


def _jpeg(seed: int, i: int) -> bytes:
    rng = np.random.default_rng(seed * 1000 + i)
    pixels = (np.linspace(0, 255, 32 * 24 * 3).reshape(24, 32, 3) + rng.integers(0, 40, (24, 32, 3)))
    buf = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def _frames(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 255, (1, 48, 64, 3))
    shift = (np.arange(n)[:, None, None, None] * 9) % 255
    return ((base + shift) % 255).astype(np.uint8)


def write_synthetic(folder: Path, *, num_episodes: int = 3) -> list[Path]:
    """``ep{i}.rrd``: ``30 + 5 i`` frames; joints, a JPEG camera and an H.264 video stream."""
    import rerun as rr

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for seed in range(num_episodes):
        n = 30 + 5 * seed
        rng = np.random.default_rng(seed)
        frames = np.arange(n)
        steps = rng.integers(25_000_000, 41_000_000, n)  # ~30 Hz with jitter: the grid drifts
        sim_ns = START_NS + seed * 7_000_000 + np.cumsum(steps) - steps[0]
        packets, keys = encode_video_packets(_frames(n, seed), codec="h264", gop=5, fps=30)
        path = folder / f"ep{seed}.rrd"
        rec = rr.RecordingStream("rayform-differential", recording_id=f"ep{seed}")
        rec.save(path)
        times = [rr.TimeColumn("frame", sequence=frames),
                 rr.TimeColumn("sim_time", timestamp=sim_ns.astype("datetime64[ns]"))]
        rec.send_columns("/joints", indexes=times,
                         columns=rr.Scalars.columns(scalars=rng.normal(size=(n, 4))))
        rec.send_columns("/cam", indexes=times, columns=rr.EncodedImage.columns(
            blob=[_jpeg(seed, i) for i in range(n)], media_type=["image/jpeg"] * n))
        rec.log("/video", rr.VideoStream(codec=rr.VideoCodec.H264), static=True)
        rec.send_columns("/video", indexes=times,
                         columns=rr.VideoStream.columns(sample=packets, is_keyframe=keys))
        rec.flush()
        rec.disconnect()
        paths.append(path)
    return paths


def write_g1(realdata: Path, folder: Path) -> list[Path]:
    """The Unitree G1 episodes (state, action, AV1 camera) logged through rerun-sdk."""
    import av
    import rerun as rr

    folder.mkdir(parents=True, exist_ok=True)
    root = realdata / "unitree-g1-lerobot-v21"
    paths = []
    for data in sorted((root / "data").rglob("episode_*.parquet")):
        table = pq.read_table(data)
        frames = table.column("frame_index").to_numpy()
        seconds = table.column("timestamp").to_numpy().astype(np.float64)
        video = root / "videos" / data.parent.name / G1_CAMERA / f"{data.stem}.mp4"
        with av.open(str(video)) as container:
            stream = container.streams.video[0]
            demuxed = [(bytes(p), bool(p.is_keyframe)) for p in container.demux(stream) if p.size]
        assert len(demuxed) == len(frames)
        path = folder / f"{data.stem}.rrd"
        rec = rr.RecordingStream("rayform-differential", recording_id=data.stem)
        rec.save(path)
        times = [rr.TimeColumn("frame_index", sequence=frames),
                 rr.TimeColumn("timestamp", duration=seconds)]
        for key in ("observation.state", "action"):
            values = np.stack(table.column(key).to_numpy(zero_copy_only=False)).astype(np.float64)
            rec.send_columns(f"/{key}", indexes=times, columns=rr.Scalars.columns(scalars=values))
        rec.log(f"/{G1_CAMERA}", rr.VideoStream(codec=rr.VideoCodec.AV1), static=True)
        rec.send_columns(f"/{G1_CAMERA}", indexes=times, columns=rr.VideoStream.columns(
            sample=[p for p, _ in demuxed], is_keyframe=[k for _, k in demuxed]))
        rec.flush()
        rec.disconnect()
        paths.append(path)
    return paths
