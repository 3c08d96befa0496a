"""Synthetic episodes for the dataloader tests, and a brute-force numpy reference of the loader.

Every entity is logged on three timelines: ``frame_index`` (sequence), ``real_time`` (timestamp,
irregular steps so the sampling grid drifts against the rows) and ``elapsed`` (duration). The
reference below recomputes sample spaces and latest-at rows with plain Python loops over the
arrays that were written, independently of the loader's vectorised code.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

import rayform
from rayform.catalog import DatasetEntry

JOINTS = "/joints:Scalars:scalars"
GRIPPER = "/gripper:Scalars:scalars"
CAMERA = "/cam:EncodedImage:blob"
VIDEO = "/video:VideoStream:sample"
VIDEO_KEYFRAME = "/video:VideoStream:is_keyframe"
TIMELINES = ("frame_index", "real_time", "elapsed")
EPOCH_NS = 1_700_000_000_000_000_000
NUM_JOINTS = 3
IMAGE_SIZE = 8


def image_colour(seed: int, row: int) -> tuple[int, int, int]:
    return ((seed * 40 + row * 16) % 200 + 20, (row * 24) % 200 + 20, (seed * 70) % 200 + 20)


def png_bytes(colour: tuple[int, int, int]) -> bytes:
    """A lossless image, so the reference knows every pixel."""
    buf = io.BytesIO()
    Image.new("RGB", (IMAGE_SIZE + 2, IMAGE_SIZE), colour).save(buf, format="PNG")
    return buf.getvalue()


@dataclass
class Entity:
    """One entity's rows: its values on each timeline and its component values."""

    column: str
    times: dict[str, npt.NDArray[np.int64]]
    values: list[Any]


@dataclass
class Episode:
    """A written episode (segment) and what it holds."""

    segment_id: str
    seed: int
    entities: dict[str, Entity]

    def range_of(self, timeline: str) -> tuple[int, int]:
        lo = min(int(e.times[timeline].min()) for e in self.entities.values())
        hi = max(int(e.times[timeline].max()) for e in self.entities.values())
        return lo, hi


def write_episode(path: Path, segment_id: str, *, seed: int, num_frames: int,
                  first_frame: int = 0, gripper_start: int = 2, with_camera: bool = True,
                  with_video: bool = False, keyframe_every: int = 4) -> Episode:
    """Write one episode and return its contents."""
    rng = np.random.default_rng(seed)
    frames = np.arange(first_frame, first_frame + num_frames, dtype=np.int64)
    steps = rng.integers(7_000_000, 13_000_000, size=num_frames).astype(np.int64)
    time_ns = EPOCH_NS + seed * 1_000_000 + np.cumsum(steps) - steps[0]
    elapsed = time_ns - EPOCH_NS

    def timelines_at(rows: npt.NDArray[np.int64]) -> dict[str, npt.NDArray[np.int64]]:
        return {"frame_index": frames[rows], "real_time": time_ns[rows],
                "elapsed": elapsed[rows]}

    entities: dict[str, Entity] = {}
    all_rows = np.arange(num_frames, dtype=np.int64)
    joints = (seed * 1000.0 + frames[:, None] * 10.0 + np.arange(NUM_JOINTS)[None, :])
    entities["joints"] = Entity(JOINTS, timelines_at(all_rows), list(joints))
    grip_rows = np.arange(gripper_start, num_frames, 3, dtype=np.int64)
    grip = (seed + frames[grip_rows] / 100.0).astype(np.float32)
    entities["gripper"] = Entity(GRIPPER, timelines_at(grip_rows), list(grip))
    with rayform.RecordingWriter(path, recording_id=segment_id) as rec:
        tl = entities["joints"].times
        rec.log_scalars("/joints", timelines={
            "frame_index": tl["frame_index"], "real_time": tl["real_time"].astype("datetime64[ns]"),
            "elapsed": tl["elapsed"].astype("timedelta64[ns]")}, values=joints)
        tl = entities["gripper"].times
        rec.log_scalars("/gripper", timelines={
            "frame_index": tl["frame_index"], "real_time": tl["real_time"].astype("datetime64[ns]"),
            "elapsed": tl["elapsed"].astype("timedelta64[ns]")}, values=grip)
        if with_camera:
            cam_rows = np.arange(0, num_frames, 2, dtype=np.int64)
            colours = [image_colour(seed, int(r)) for r in cam_rows]
            entities["camera"] = Entity(CAMERA, timelines_at(cam_rows), colours)
            tl = entities["camera"].times
            rec.log_encoded_images("/cam", timelines={
                "frame_index": tl["frame_index"],
                "real_time": tl["real_time"].astype("datetime64[ns]"),
                "elapsed": tl["elapsed"].astype("timedelta64[ns]")},
                blobs=[png_bytes(c) for c in colours], media_type="image/png")
        if with_video:
            packets = [f"{segment_id}:{int(f)}".encode() for f in frames]
            flags = (frames - first_frame) % keyframe_every == 1  # first keyframe at row 1
            entities["video"] = Entity(VIDEO, timelines_at(all_rows), list(frames))
            entities["video_keyframe"] = Entity(VIDEO_KEYFRAME, timelines_at(all_rows),
                                                list(flags))
            tl = entities["video"].times
            rec.log_video_stream("/video", timelines={
                "frame_index": tl["frame_index"],
                "real_time": tl["real_time"].astype("datetime64[ns]"),
                "elapsed": tl["elapsed"].astype("timedelta64[ns]")},
                samples=packets, is_keyframe=flags, codec="h264")
    return Episode(segment_id, seed, entities)


def make_dataset(root: Path, *, num_episodes: int = 3, name: str = "robots",
                 frames: Sequence[int] | None = None, **kwargs: Any
                 ) -> tuple[DatasetEntry, list[Episode]]:
    """A catalog under ``root`` with one dataset of ``num_episodes`` episodes ``ep0 …``."""
    catalog = rayform.Catalog.create(root / "catalog")
    dataset = catalog.create_dataset(name, exist_ok=True)
    episodes = []
    paths = []
    for i in range(num_episodes):
        n = frames[i] if frames is not None else 30 + 4 * i
        path = root / "src" / f"{name}-ep{i}.rfr"
        episodes.append(write_episode(path, f"ep{i}", seed=i, num_frames=n, **kwargs))
        paths.append(path)
    dataset.register(paths).wait()
    return dataset, episodes


# --------------------------------------------------------------------------- the reference
def native_offsets(window: Sequence[float] | None, timeline: str) -> list[int]:
    if window is None:
        return [0]
    if timeline == "frame_index":
        return [int(o) for o in window]
    return [round(o * 1e9) for o in window]


def reference_samples(episodes: Sequence[Episode], timeline: str, windows: Sequence[Any], *,
                      rate_hz: float | None, edge: str) -> list[tuple[Episode, int]]:
    """Every (episode, index value) of the sample space, in global order, by brute force."""
    offsets = [o for w in windows for o in native_offsets(w, timeline)] + [0]
    lo_off, hi_off = min(offsets), max(offsets)
    step = 1 if rate_hz is None else round(1e9 / rate_hz)
    out: list[tuple[Episode, int]] = []
    for ep in sorted(episodes, key=lambda e: e.segment_id):
        start, end = ep.range_of(timeline)
        if edge == "trim":
            start, end = start - lo_off, end - hi_off
        value = start
        while value <= end:
            out.append((ep, value))
            value += step
    return out


def reference_row(times: npt.NDArray[np.int64], query: int) -> int | None:
    """The last row whose time is <= query (a plain loop)."""
    best: int | None = None
    for row, t in enumerate(times.tolist()):
        if t <= query:
            best = row
    return best


def reference_positions(ep: Episode, timeline: str, value: int, window: Sequence[float] | None,
                        edge: str) -> tuple[list[int], list[bool]]:
    """A field's output positions for one sample, and which were padded."""
    lo, hi = ep.range_of(timeline)
    positions, pads = [], []
    for off in native_offsets(window, timeline):
        p = value + off
        clamped = min(max(p, lo), hi) if edge == "pad" else p
        positions.append(clamped)
        pads.append(clamped != p)
    return positions, pads


def reference_value(ep: Episode, entity: str, timeline: str, value: int,
                    window: Sequence[float] | None, edge: str) -> npt.NDArray[Any] | None:
    """What the loader should return for one field of one sample (``None`` when missing)."""
    ent = ep.entities[entity]
    positions, _ = reference_positions(ep, timeline, value, window, edge)
    rows = [reference_row(ent.times[timeline], p) for p in positions]
    if any(r is None for r in rows):
        return None
    picked = []
    for r in rows:
        assert r is not None
        v = ent.values[r]
        if entity == "camera":
            picked.append(np.broadcast_to(np.array(v, np.uint8)[:, None, None],
                                          (3, IMAGE_SIZE, IMAGE_SIZE + 2)))
        else:
            picked.append(np.atleast_1d(np.asarray(v)))
    return np.stack(picked) if window is not None else picked[0]

