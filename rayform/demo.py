"""The demo catalog: a small synthetic robot dataset written with rayform's own writer.

Four (or more) episodes of a 7-joint arm: joint positions and their deltas at 100 Hz, a 224×224
JPEG camera at 30 Hz, a 224×224 H.264 camera at 30 Hz as a packet stream with keyframe flags, and
task / success / site / robot properties. All streams share the ``real_time`` timestamp timeline;
the cameras also carry a ``frame_index`` sequence timeline.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from rayform.catalog import Catalog, DatasetEntry, RecordingWriter
from rayform.errors import CatalogNotFoundError

DEMO_DATASET = "demo"
TASKS = ("pick up the red cube", "open the drawer")
JOINTS = 7
IMAGE_SIZE = 224
EPOCH_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoSpec:
    """Size of the demo dataset."""

    num_episodes: int = 4
    duration_s: float = 4.0
    joint_rate_hz: float = 100.0
    camera_rate_hz: float = 30.0
    gop: int = 30
    seed: int = 0

    def __post_init__(self) -> None:
        if self.num_episodes < 1 or self.duration_s <= 0:
            raise ValueError(f"DemoSpec needs num_episodes >= 1 and duration_s > 0, got {self}")


def _frames(rng: np.random.Generator, n: int, phase: float) -> npt.NDArray[np.uint8]:
    """Synthetic camera frames: a coloured disc moving over a gradient, [N, H, W, 3] uint8."""
    yy, xx = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE].astype(np.float32)
    base = np.stack([xx, yy, (xx + yy) / 2], axis=-1) * (255.0 / IMAGE_SIZE)
    out = np.empty((n, IMAGE_SIZE, IMAGE_SIZE, 3), np.uint8)
    colour = rng.uniform(64, 255, size=3)
    for i in range(n):
        t = phase + i / 30.0
        cx = IMAGE_SIZE / 2 + 70 * np.cos(t)
        cy = IMAGE_SIZE / 2 + 70 * np.sin(1.3 * t)
        disc = (xx - cx) ** 2 + (yy - cy) ** 2 < 28**2
        frame = base.copy()
        frame[disc] = colour
        out[i] = frame.astype(np.uint8)
    return out


def _jpeg(frames: npt.NDArray[np.uint8]) -> list[bytes]:
    from PIL import Image

    blobs = []
    for frame in frames:
        buf = io.BytesIO()
        Image.fromarray(frame).save(buf, format="JPEG", quality=90)
        blobs.append(buf.getvalue())
    return blobs


def write_episode(path: Path, episode: int, spec: DemoSpec) -> Path:
    """Write one synthetic episode recording to ``path``."""
    from rayform.media._video_encode import encode_video_packets

    rng = np.random.default_rng([spec.seed, episode])
    n_joint = int(spec.duration_s * spec.joint_rate_hz)
    n_cam = int(spec.duration_s * spec.camera_rate_hz)
    t_joint = EPOCH_NS + episode * 10**11 + np.round(
        np.arange(n_joint) * 1e9 / spec.joint_rate_hz).astype(np.int64)
    t_cam = EPOCH_NS + episode * 10**11 + np.round(
        np.arange(n_cam) * 1e9 / spec.camera_rate_hz).astype(np.int64)
    freq = rng.uniform(0.2, 1.0, size=JOINTS)
    phase = rng.uniform(0, np.pi, size=JOINTS)
    secs = (t_joint - t_joint[0]) / 1e9
    position = (np.sin(secs[:, None] * 2 * np.pi * freq + phase)).astype(np.float32)
    delta = np.diff(position, axis=0, append=position[-1:]).astype(np.float32)
    frames = _frames(rng, n_cam, phase=float(episode))
    packets, keyframes = encode_video_packets(frames, codec="h264", gop=spec.gop,
                                              fps=round(spec.camera_rate_hz))
    task = TASKS[episode % len(TASKS)]
    with RecordingWriter(path, recording_id=f"episode_{episode:03d}") as rec:
        rec.set_properties(task=task, success=episode % 4 != 3,
                           site="lab-a" if episode % 2 == 0 else "lab-b",
                           robot="arm7", operator=f"op{episode % 3}", frame_convention="ros")
        joint_tl = {"real_time": t_joint.astype("datetime64[ns]")}
        rec.log_scalars("/joints/position", timelines=joint_tl, values=position)
        rec.log_scalars("/joints/position_delta", timelines=joint_tl, values=delta)
        cam_tl = {"real_time": t_cam.astype("datetime64[ns]"), "frame_index": np.arange(n_cam)}
        rec.log_encoded_images("/cam0/rgb", timelines=cam_tl, blobs=_jpeg(frames),
                               media_type="image/jpeg")
        rec.log_video_stream("/wrist/rgb", timelines=cam_tl, samples=packets,
                             is_keyframe=keyframes, codec="h264")
    return path


def existing_demo(url: str) -> DatasetEntry | None:
    """The demo dataset of the catalog at ``url`` if it holds episodes, else ``None``."""
    try:
        catalog = Catalog.open(url)
    except CatalogNotFoundError:
        return None
    if DEMO_DATASET not in catalog.dataset_names():
        return None
    dataset = catalog.get_dataset(DEMO_DATASET)
    return dataset if dataset.segment_ids() else None


STAGING_PREFIX = "rayform-demo-"
"""``$TMPDIR/rayform-demo-<pid>-…``: where a demo writes its episodes before the catalog exists."""


def remove_abandoned_staging(folder: Path) -> list[Path]:
    """Remove the staging folders of demo runs whose process is gone (killed, e.g. SIGKILL)."""
    removed = []
    for path in folder.glob(f"{STAGING_PREFIX}*"):
        pid_text = path.name[len(STAGING_PREFIX):].split("-", 1)[0]
        if not pid_text.isdigit() or not path.is_dir():
            continue
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        except PermissionError:  # alive, another user's
            continue
    return removed


def build_demo(url: str, spec: DemoSpec | None = None, *, replace: bool = False,
               progress: bool = False) -> DatasetEntry:
    """Create the demo dataset in the catalog at ``url``.

    An existing demo dataset with episodes is kept as it is unless ``replace``, which rewrites it
    with exactly ``spec.num_episodes`` episodes (episodes beyond them are unregistered).
    """
    spec = spec or DemoSpec()
    kept = existing_demo(url)
    if kept is not None and not replace:
        return kept
    from tqdm import tqdm

    remove_abandoned_staging(Path(tempfile.gettempdir()))
    tmp = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-"))
    try:  # the episodes first: a failure (a missing extra) leaves no catalog behind
        paths = [write_episode(tmp / f"episode_{e:03d}.rfr", e, spec)
                 for e in tqdm(range(spec.num_episodes), desc="write episodes", unit="episode",
                               disable=not progress)]
        dataset = Catalog.create(url).create_dataset(DEMO_DATASET, exist_ok=True)
        written = dataset.register([str(p) for p in paths], on_duplicate="replace",
                                   progress=progress).wait().segment_ids
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    extra = sorted(set(dataset.segment_ids()) - set(written))
    if extra:
        dataset.unregister(segments_to_drop=extra)
    return dataset


SUMMARY_SQL = """
SELECT "property:task" AS task,
       count(*) AS episodes,
       sum(CASE WHEN "property:success" THEN 1 ELSE 0 END) AS successes,
       sum(rerun_num_rows) AS rows,
       round(sum(rerun_size_bytes) / 1e6, 2) AS megabytes,
       round(avg(CAST("real_time:end" AS BIGINT) - CAST("real_time:start" AS BIGINT)) / 1e9, 2)
         AS seconds_per_episode
FROM demo.segments
GROUP BY "property:task"
ORDER BY task
"""


def demo_fields() -> dict[str, object]:
    """The training fields of the demo: state, a 16-step action chunk, both cameras."""
    from rayform.dataloader import Field, ImageDecoder, NumericDecoder, VideoFrameDecoder

    return {
        "state": Field("/joints/position:Scalars:scalars", decode=NumericDecoder()),
        "action": Field("/joints/position_delta:Scalars:scalars", decode=NumericDecoder(),
                        window=tuple(step / 15 for step in range(16))),
        "cam0": Field("/cam0/rgb:EncodedImage:blob", decode=ImageDecoder()),
        "wrist": Field("/wrist/rgb:VideoStream:sample", decode=VideoFrameDecoder(codec="h264")),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochTiming:
    """One pass over the demo's samples: how many, and how long it took."""

    num_samples: int
    seconds: float

    @property
    def samples_per_s(self) -> float:
        return self.num_samples / self.seconds if self.seconds > 0 else float("inf")


def loader_pass(dataset: DatasetEntry, *, batch_size: int = 32, progress: bool = False) -> str:
    """Two shuffled epochs of the demo through a torch DataLoader; returns a printable report.

    The first epoch is cold (files opened, decoders started); the second is the one a training run
    sees from then on.
    """
    import time

    import torch
    from torch.utils.data import DataLoader

    from rayform.dataloader import DataSource, FixedRateSampling, RerunMapDataset

    torch.set_num_threads(1)
    samples = RerunMapDataset(DataSource(dataset), "real_time", demo_fields(),  # type: ignore[arg-type]
                              timeline_sampling=FixedRateSampling(rate_hz=15))
    loader = DataLoader(samples, batch_size=batch_size, shuffle=True)
    shapes: dict[str, str] = {}
    epochs: list[EpochTiming] = []
    from tqdm import tqdm

    for name in ("cold epoch", "warm epoch"):
        start = time.perf_counter()
        count = 0
        for batch in tqdm(loader, desc=name, unit="batch", disable=not progress, leave=False):
            count += int(batch["state"].shape[0])
            if not shapes:
                shapes = {k: f"{tuple(v.shape)} {str(v.dtype).removeprefix('torch.')}"
                          for k, v in batch.items()}
        epochs.append(EpochTiming(num_samples=count, seconds=time.perf_counter() - start))
    cold, warm = epochs
    lines = [f"a shuffled epoch on a 15 Hz grid: {warm.num_samples} samples, batch {batch_size}, "
             "num_workers=0",
             f"  warm epoch: {warm.seconds:.2f} s ({warm.samples_per_s:.0f} samples/s)",
             f"  cold first epoch: {cold.seconds:.2f} s ({cold.samples_per_s:.0f} samples/s; "
             "opens files and decoders)",
             "first batch:"]
    lines += [f"  {key:7s} {shape}" for key, shape in shapes.items()]
    return "\n".join(lines)
