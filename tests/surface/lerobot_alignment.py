"""Which camera frame ``EpisodeDataset`` serves on real LeRobot data, against LeRobot's own rule.

LeRobot picks, for a query instant ``t`` (seconds from the episode's start), the row whose stored
``timestamp`` is nearest to ``t`` and accepts it only within ``1e-4`` s. This module reads the
Unitree G1 LeRobot v2.1 episodes of ``../shared/realdata``, samples them with
``rayform.torch.EpisodeDataset`` and counts the samples whose camera frame (identified by pixels,
against every frame decoded straight from the MP4 with PyAV) or ``observation.state`` (bit-equal
to the Parquet row) is not the row LeRobot's rule picks.

Run it as a script to print the counts::

    PYTHONPATH=. python tests/surface/lerobot_alignment.py [fps ...]
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow.parquet as pq

REALDATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "realdata"
G1 = "unitree-g1-lerobot-v21"
CAMERA = "observation.images.cam_high"
STATE = "observation.state"
LEROBOT_TOLERANCE_S = 1e-4
_POOL = 8  # pixels are compared on 8x8 block means: robust to colour-conversion rounding


@dataclass(frozen=True, slots=True)
class Episode:
    """One episode's reference data: Parquet timestamps, frame indices, states and video frames."""

    segment_id: str
    timestamps_s: npt.NDArray[np.float64]
    frame_index: npt.NDArray[np.int64]
    state: npt.NDArray[np.float32]
    frames: npt.NDArray[np.float32]  # [N, 3, H/8, W/8] block means, in frame order


@dataclass(frozen=True, slots=True)
class Alignment:
    """Counts for one ``EpisodeDataset`` epoch, overall and per segment."""

    fps: float
    samples: int
    frame_off: int
    state_off: int
    no_lerobot_frame: int
    per_segment: dict[str, tuple[int, int]]  # segment -> (samples, frame_off)

    def line(self) -> str:
        parts = ", ".join(f"{sid}: {off}/{n}" for sid, (n, off) in sorted(self.per_segment.items()))
        return (f"fps={self.fps:g}: camera frame off for {self.frame_off} of {self.samples} "
                f"samples ({parts}); observation.state off for {self.state_off}; "
                f"{self.no_lerobot_frame} samples have no row within {LEROBOT_TOLERANCE_S} s")


def pooled(image: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
    """``(3, H, W)`` uint8 -> ``(3, H/8, W/8)`` float32 block means."""
    c, h, w = image.shape
    blocks = image[:, : h // _POOL * _POOL, : w // _POOL * _POOL].astype(np.float32)
    return blocks.reshape(c, h // _POOL, _POOL, w // _POOL, _POOL).mean(axis=(2, 4))


def load_episodes(root: Path) -> dict[str, Episode]:
    """Every episode of the Unitree folder that has its data and video files."""
    import av

    episodes: dict[str, Episode] = {}
    for data in sorted((root / "data").rglob("episode_*.parquet")):
        table = pq.read_table(data)
        order = np.argsort(table.column("frame_index").to_numpy())
        video = root / "videos" / data.parent.name / CAMERA / f"{data.stem}.mp4"
        with av.open(str(video)) as container:
            frames = [pooled(f.to_ndarray(format="rgb24").transpose(2, 0, 1))
                      for f in container.decode(video=0)]
        episodes[data.stem] = Episode(
            segment_id=data.stem,
            timestamps_s=table.column("timestamp").to_numpy().astype(np.float64)[order],
            frame_index=table.column("frame_index").to_numpy().astype(np.int64)[order],
            state=np.stack(table.column(STATE).to_numpy(zero_copy_only=False))[order]
            .astype(np.float32),
            frames=np.stack(frames))
    return episodes


def lerobot_row(episode: Episode, t_s: float) -> int | None:
    """LeRobot's rule: the row with the nearest stored timestamp, if within 1e-4 s."""
    gaps = np.abs(episode.timestamps_s - t_s)
    row = int(np.argmin(gaps))
    return row if gaps[row] <= LEROBOT_TOLERANCE_S else None


def matching_frames(episode: Episode, image: npt.NDArray[np.uint8], near: int) -> set[int]:
    """The video frames (by position) an image is, among the frames around ``near``.

    Several when the video repeats a frame (this one does: from frame 80 of episode 29 on, each
    frame is shown twice).
    """
    lo, hi = max(near - 3, 0), min(near + 4, len(episode.frames))
    distances = np.abs(episode.frames[lo:hi] - pooled(image)[None]).mean(axis=(1, 2, 3))
    return {lo + int(i) for i in np.flatnonzero(distances <= distances.min() + 1e-6)}


def measure(dataset: Any, episodes: dict[str, Episode]) -> Alignment:
    """Read every sample of ``dataset`` (an ``EpisodeDataset`` with obs ``[CAMERA, STATE]``)."""
    frame_off = state_off = missing = 0
    per: dict[str, list[int]] = {}
    for i in range(len(dataset)):
        sample = dataset[i]
        episode = episodes[sample["meta"]["segment"]]
        counts = per.setdefault(episode.segment_id, [0, 0])
        counts[0] += 1
        t_s = int(sample["t_ns"]) / 1e9 + float(episode.timestamps_s[0])
        row = lerobot_row(episode, t_s)
        if row is None:
            missing += 1
            continue
        image = sample[CAMERA]
        if image is None or row not in matching_frames(episode, image.numpy(), row):
            frame_off += 1
            counts[1] += 1
        state = sample[STATE]
        if state is None or not np.array_equal(state.numpy(), episode.state[row]):
            state_off += 1
    return Alignment(fps=float(dataset.fps), samples=len(dataset), frame_off=frame_off,
                     state_off=state_off, no_lerobot_frame=missing,
                     per_segment={k: (v[0], v[1]) for k, v in per.items()})


def episode_dataset(root: Path, workdir: Path, *, fps: float, **kwargs: Any) -> Any:
    """``EpisodeDataset`` over the Unitree folder registered into a fresh catalog."""
    import rayform
    import rayform.torch
    from rayform.errors import ConversionWarning

    client = rayform.Client(rayform.Catalog.create(workdir / "catalog", exist_ok=True))
    dataset = client.catalog.create_dataset("g1", exist_ok=True)
    if not dataset.segment_ids():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConversionWarning)  # the partial download (98 missing)
            dataset.register(root)
    slice_ = client.slices.create("g1")
    return rayform.torch.EpisodeDataset(slice_, obs=[CAMERA, STATE], fps=fps, seed=None,
                                        **kwargs)


def main(argv: list[str]) -> None:
    rates = [float(a) for a in argv] or [15.0, 30.0]
    root = REALDATA / G1
    episodes = load_episodes(root)
    with tempfile.TemporaryDirectory() as tmp:
        for fps in rates:
            print(measure(episode_dataset(root, Path(tmp), fps=fps), episodes).line())


if __name__ == "__main__":
    main(sys.argv[1:])
