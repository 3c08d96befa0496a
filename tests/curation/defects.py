"""Defect fixtures: copies of the real Unitree G1 LeRobot v2.1 episodes, with defects injected.

``build_dataset(root)`` writes a LeRobot v2.1 folder of 16 episodes under ``root``: each a copy
of real episode 29 or 30 with its first rows dropped (0, 5 … 35; so the copies differ), and a
known defect injected into twelve of them (``DEFECTS``: what each check must find, where; a
duplicate starts as a copy of the episode it duplicates).
Everything is deterministic; the real files are only read.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "realdata" / \
    "unitree-g1-lerobot-v21"
SOURCES = (29, 30)
TRIMS = (0, 5, 10, 15, 20, 25, 30, 35)
STATE, ACTION = "observation.state", "action"
STATE_COLUMN = "/observation.state:Scalars:scalars"
ACTION_COLUMN = "/action:Scalars:scalars"


@dataclass(frozen=True)
class Defect:
    """One injected defect and what curate must report for it."""

    episode: int
    check: str
    column: str | None
    dim: int | None
    rows: tuple[int, int] | None      # half-open expected range (±1 row), None: whole segment
    inject: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
    copy_of: int | None = None        # start from this episode's rows instead of its own

    @property
    def segment(self) -> str:
        return f"episode_{self.episode:06d}"


def _nan_burst(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    t[STATE][100:110, 3] = np.nan
    return t


def _offset(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    t[STATE][:, 0] += 0.3
    return t


def _scale(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    t[STATE][:, 10] *= 180 / np.pi
    return t


def _stuck(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    t[STATE][130:200, 10] = t[STATE][130, 10]
    return t


def _spike(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    t[ACTION][120, 8] += 1.0
    return t


def _gap(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    keep = np.ones(len(t["frame_index"]), dtype=bool)
    keep[150:155] = False
    return {k: v[keep] for k, v in t.items()}


def _repeated_timestamp(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    t["timestamp"][60] = t["timestamp"][59]
    return t


def _idle_head(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    for key in (STATE, ACTION):
        t[key][:45] = t[key][45]
    return t


def _short(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v[:60] for k, v in t.items()}


def _truncated(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v[:146] for k, v in t.items()}  # real episode 29's rows 30..175: mid-motion


def _merged(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    half = len(t["frame_index"]) // 2  # the episode's second half, then its first: one seam
    out = {k: np.concatenate([v[half:], v[:half]]) for k, v in t.items()}
    n = len(out["frame_index"])
    out["frame_index"] = np.arange(n, dtype=np.int64)
    out["timestamp"] = (np.arange(n) / 30.0).astype(np.float32)
    return out


def _near_copy(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    for key in (STATE, ACTION):
        t[key] = t[key] + np.float32(1e-6)
    return t


# episode numbers 0..15: copy i is of SOURCES[i % 2] with TRIMS[i // 2] head rows dropped
DEFECTS = (
    Defect(0, "values.nonfinite", STATE_COLUMN, 3, (100, 110), _nan_burst),
    Defect(1, "values.offset", STATE_COLUMN, 0, None, _offset),
    Defect(2, "values.scale", STATE_COLUMN, 10, None, _scale),
    Defect(3, "series.frozen", STATE_COLUMN, 10, (130, 200), _stuck),
    Defect(4, "series.spike", ACTION_COLUMN, 8, (120, 121), _spike),
    Defect(5, "timing.timestamps", None, None, (149, 156), _gap),
    Defect(6, "timing.timestamps", None, None, (59, 61), _repeated_timestamp),
    Defect(7, "episode.idle", None, None, (0, 46), _idle_head),
    Defect(8, "episode.length", None, None, None, _short),
    Defect(12, "episode.truncated", STATE_COLUMN, 5, (130, 146), _truncated),
    Defect(13, "episode.merged", STATE_COLUMN, None, (124, 125), _merged),
    Defect(14, "episode.duplicate", None, None, None, _near_copy, copy_of=10),
)
CLEAN = (9, 10, 11, 15)
NUM_EPISODES = 16


def _columns(table: pa.Table) -> dict[str, np.ndarray]:
    out = {}
    for name in table.column_names:
        col = table.column(name).combine_chunks()
        if pa.types.is_fixed_size_list(col.type):
            out[name] = np.asarray(col.flatten().to_numpy(), dtype=np.float32).reshape(
                len(col), col.type.list_size).copy()
        else:
            out[name] = np.asarray(col.to_numpy(zero_copy_only=False)).copy()
    return out


def _table(columns: dict[str, np.ndarray], like: pa.Schema) -> pa.Table:
    arrays = []
    for field in like:
        values = columns[field.name]
        if pa.types.is_fixed_size_list(field.type):
            flat = pa.array(values.reshape(-1).astype(np.float32), pa.float32())
            arrays.append(pa.FixedSizeListArray.from_arrays(flat, field.type.list_size))
        else:
            arrays.append(pa.array(values).cast(field.type))
    return pa.Table.from_arrays(arrays, schema=like)


def build_dataset(root: Path, *, defects: bool | tuple[Defect, ...] = True, trims: tuple[int, ...] = TRIMS,
                  videos: dict[int, Callable[[Path, Path], None]] | None = None) -> Path:
    """Write the LeRobot v2.1 folder (``2 * len(trims)`` episodes) under ``root``; returns its
    path. ``videos`` maps an episode to a function writing its MP4 from the real one."""
    out = root / "g1-defects"
    count = 2 * len(trims)
    (out / "meta").mkdir(parents=True)
    info = json.loads((REAL / "meta/info.json").read_text())
    chosen = DEFECTS if defects is True else () if defects is False else defects
    by_episode = {d.episode: d for d in chosen}
    episodes = []
    first_index = 0
    video_key = "observation.images.cam_high"
    for i in range(count):
        defect = by_episode.get(i)
        like = i if defect is None or defect.copy_of is None else defect.copy_of
        source = SOURCES[like % 2]
        trim = trims[like // 2]
        table = pq.read_table(REAL / f"data/chunk-000/episode_{source:06d}.parquet")
        cols = {k: v[trim:] for k, v in _columns(table).items()}
        n = len(cols["frame_index"])
        cols["frame_index"] = np.arange(n, dtype=np.int64)
        cols["timestamp"] = (np.arange(n) / 30.0).astype(np.float32)
        declared = n
        if defect is not None:
            cols = defect.inject(cols)
            if defect.inject in (_short, _truncated):
                declared = len(cols["frame_index"])
        n = len(cols["frame_index"])
        cols["episode_index"] = np.full(n, i, dtype=np.int64)
        cols["index"] = np.arange(first_index, first_index + n, dtype=np.int64)
        first_index += n
        data = out / f"data/chunk-000/episode_{i:06d}.parquet"
        data.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(_table(cols, table.schema), data)
        video = out / f"videos/chunk-000/{video_key}/episode_{i:06d}.mp4"
        video.parent.mkdir(parents=True, exist_ok=True)
        real_video = REAL / f"videos/chunk-000/{video_key}/episode_{source:06d}.mp4"
        if videos is not None and i in videos:
            videos[i](real_video, video)
        else:
            shutil.copyfile(real_video, video)
        episodes.append({"episode_index": i, "tasks": ["Pick up the yellow bottle on the table."],
                         "length": declared})
    info.update(total_episodes=count, total_frames=first_index, total_videos=count,
                splits={"train": f"0:{count}"})
    (out / "meta/info.json").write_text(json.dumps(info))
    (out / "meta/episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    shutil.copyfile(REAL / "meta/tasks.jsonl", out / "meta/tasks.jsonl")
    return out


def slow_timestamps(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Timestamps at 25 Hz where the dataset declares 30 (a wrong nominal rate)."""
    t["timestamp"] = (np.arange(len(t["timestamp"])) / 25.0).astype(np.float32)
    return t


def real_copy(root: Path, edit: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
              | None = None, *, features: Callable[[dict[str, Any]], None] | None = None,
              stats: Callable[[dict[int, dict[str, Any]]], None] | None = None) -> Path:
    """A copy of the real LeRobot folder under ``root`` (videos and metadata as they are), each
    episode's columns passed through ``edit``, ``info.json``'s features through ``features`` and
    ``episodes_stats.jsonl`` (by episode) through ``stats``."""
    out = root / "g1-copy"
    shutil.copytree(REAL, out, ignore=shutil.ignore_patterns("*.parquet"))
    info = json.loads((REAL / "meta/info.json").read_text())
    if features is not None:
        features(info["features"])
        (out / "meta/info.json").write_text(json.dumps(info))
    if stats is not None:
        rows = [json.loads(line) for line in
                (REAL / "meta/episodes_stats.jsonl").read_text().splitlines() if line.strip()]
        by_episode = {r["episode_index"]: r["stats"] for r in rows}
        stats(by_episode)
        (out / "meta/episodes_stats.jsonl").write_text("".join(
            json.dumps({"episode_index": i, "stats": s}) + "\n" for i, s in by_episode.items()))
    for source in SOURCES:
        name = f"data/chunk-000/episode_{source:06d}.parquet"
        table = pq.read_table(REAL / name)
        cols = _columns(table)
        schema = table.schema
        if edit is not None:
            cols = edit(cols)
            fields = [f for f in schema if f.name in cols]
            for key, values in cols.items():
                if key not in schema.names:
                    fields.append(pa.field(key, pa.list_(pa.float32(), values.shape[1])))
            schema = pa.schema(fields)
        pq.write_table(_table(cols, schema), out / name)
    return out
