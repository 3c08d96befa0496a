"""Synthetic sources in each format, written by that format's own writer (or by hand for LeRobot).

Every factory returns the ground truth it wrote, so tests compare registered columns against it.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from rayform.media._video_encode import write_video_mp4

FrameArray = npt.NDArray[np.uint8]


def synthetic_frames(num_frames: int, *, height: int = 48, width: int = 64, seed: int = 0
                     ) -> FrameArray:
    """Smooth frames with a bright block whose position encodes the frame number."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    base = np.stack([xx * 255 // width, yy * 255 // height,
                     np.full_like(xx, int(rng.integers(40, 200)))], axis=-1).astype(np.uint8)
    frames = np.repeat(base[None], num_frames, axis=0)
    for i in range(num_frames):
        x = (i * 7) % (width - 8)
        y = (i * 5) % (height - 8)
        frames[i, y:y + 8, x:x + 8] = 255
    return frames


def decode_mp4(path: Path) -> FrameArray:
    """Every frame of an MP4, RGB, in presentation order (PyAV)."""
    import av

    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


# ------------------------------------------------------------------------------- LeRobot
@dataclass
class LeRobotEpisodeTruth:
    index: int
    task: str
    state: npt.NDArray[np.float32]
    action: npt.NDArray[np.float32]
    frames: FrameArray | None
    reward: npt.NDArray[np.float32]


@dataclass
class LeRobotTruth:
    root: Path
    fps: int
    episodes: dict[int, LeRobotEpisodeTruth] = field(default_factory=dict)
    video_key: str = "observation.images.front"
    state_names: tuple[str, ...] = ("j0", "j1", "j2")


def _feature_specs(fps: int, *, video: bool, image: bool) -> dict[str, Any]:
    features: dict[str, Any] = {
        "observation.state": {"dtype": "float32", "shape": [3], "names": [["j0", "j1", "j2"]]},
        "action": {"dtype": "float32", "shape": [3], "names": {"motors": ["j0", "j1", "j2"]}},
        "next.reward": {"dtype": "float32", "shape": [1], "names": None},
    }
    if video:
        features["observation.images.front"] = {
            "dtype": "video", "shape": [48, 64, 3], "names": ["height", "width", "channel"],
            "info": {"video.fps": fps, "video.codec": "h264", "video.pix_fmt": "yuv420p"}}
    if image:
        features["observation.images.wrist"] = {"dtype": "image", "shape": [16, 16, 3],
                                                "names": ["height", "width", "channel"]}
    for name, dtype in (("timestamp", "float32"), ("frame_index", "int64"),
                        ("episode_index", "int64"), ("index", "int64"), ("task_index", "int64")):
        features[name] = {"dtype": dtype, "shape": [1], "names": None}
    return features


def _episode_truth(index: int, length: int, task: str, *, video: bool) -> LeRobotEpisodeTruth:
    rng = np.random.default_rng(100 + index)
    return LeRobotEpisodeTruth(
        index=index, task=task,
        state=rng.normal(size=(length, 3)).astype(np.float32),
        action=rng.normal(size=(length, 3)).astype(np.float32),
        frames=synthetic_frames(length, seed=index) if video else None,
        reward=rng.random(length).astype(np.float32))


def _episode_table(ep: LeRobotEpisodeTruth, fps: int, first_index: int, task_index: int,
                   images: list[bytes] | None) -> pa.Table:
    n = len(ep.state)
    columns: dict[str, pa.Array] = {
        "observation.state": pa.FixedSizeListArray.from_arrays(pa.array(ep.state.reshape(-1)), 3),
        "action": pa.FixedSizeListArray.from_arrays(pa.array(ep.action.reshape(-1)), 3),
        "next.reward": pa.array(ep.reward),
        "timestamp": pa.array((np.arange(n) / fps).astype(np.float32)),
        "frame_index": pa.array(np.arange(n, dtype=np.int64)),
        "episode_index": pa.array(np.full(n, ep.index, dtype=np.int64)),
        "index": pa.array(np.arange(first_index, first_index + n, dtype=np.int64)),
        "task_index": pa.array(np.full(n, task_index, dtype=np.int64)),
    }
    if images is not None:
        columns["observation.images.wrist"] = pa.array(
            [{"bytes": b, "path": None} for b in images],
            pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
    return pa.table(columns)


def _png(seed: int) -> bytes:
    from PIL import Image

    arr = np.random.default_rng(seed).integers(0, 255, size=(16, 16, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def write_lerobot_v21(root: Path, *, lengths: dict[int, int], fps: int = 10,
                      absent: tuple[int, ...] = (), video: bool = True, image: bool = False,
                      missing_videos: tuple[int, ...] = ()) -> LeRobotTruth:
    """A LeRobot v2.1 folder written by hand; ``absent`` episodes are listed but have no files."""
    tasks = ["pick the cube", "place the cube"]
    truth = LeRobotTruth(root=root, fps=fps)
    (root / "meta").mkdir(parents=True)
    episodes_lines, first = [], 0
    for index, length in sorted(lengths.items()):
        task_index = index % 2
        ep = _episode_truth(index, length, tasks[task_index], video=video)
        episodes_lines.append({"episode_index": index, "tasks": [ep.task], "length": length,
                               "operator": f"op{index}"})
        if index not in absent:
            truth.episodes[index] = ep
            images = [_png(index * 1000 + i) for i in range(length)] if image else None
            data = root / f"data/chunk-000/episode_{index:06d}.parquet"
            data.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(_episode_table(ep, fps, first, task_index, images), data)
            if video and index not in missing_videos:
                mp4 = root / f"videos/chunk-000/{truth.video_key}/episode_{index:06d}.mp4"
                mp4.parent.mkdir(parents=True, exist_ok=True)
                assert ep.frames is not None
                write_video_mp4(mp4, ep.frames, codec="h264", gop=2, fps=fps)
        first += length
    info = {
        "codebase_version": "v2.1", "robot_type": "test_arm", "total_episodes": len(lengths),
        "total_frames": first, "total_tasks": 2, "total_videos": len(lengths) if video else 0,
        "total_chunks": 1, "chunks_size": 1000, "fps": fps, "splits": {"train": "0:2"},
        "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
        "video_path": ("videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}"
                       ".mp4") if video else None,
        "features": _feature_specs(fps, video=video, image=image),
    }
    (root / "meta/info.json").write_text(json.dumps(info, indent=2))
    (root / "meta/tasks.jsonl").write_text(
        "".join(json.dumps({"task_index": i, "task": t}) + "\n" for i, t in enumerate(tasks)))
    (root / "meta/episodes.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in episodes_lines))
    return truth


def write_lerobot_v30(root: Path, *, lengths: dict[int, int], fps: int = 10,
                      episodes_per_file: int = 2) -> LeRobotTruth:
    """A LeRobot v3.0 folder written by hand: episodes share data files and MP4 files."""
    tasks = ["pick the cube", "place the cube"]
    truth = LeRobotTruth(root=root, fps=fps)
    order = sorted(lengths)
    rows: list[dict[str, Any]] = []
    first = 0
    for file_index, start in enumerate(range(0, len(order), episodes_per_file)):
        group = order[start:start + episodes_per_file]
        tables, frames, offset = [], [], 0
        for index in group:
            ep = _episode_truth(index, lengths[index], tasks[index % 2], video=True)
            truth.episodes[index] = ep
            tables.append(_episode_table(ep, fps, first, index % 2, None))
            assert ep.frames is not None
            frames.append(ep.frames)
            n = lengths[index]
            rows.append({
                "episode_index": index, "tasks": [ep.task], "length": n,
                "data/chunk_index": 0, "data/file_index": file_index,
                "dataset_from_index": first, "dataset_to_index": first + n,
                f"videos/{truth.video_key}/chunk_index": 0,
                f"videos/{truth.video_key}/file_index": file_index,
                f"videos/{truth.video_key}/from_timestamp": offset / fps,
                f"videos/{truth.video_key}/to_timestamp": (offset + n) / fps,
                "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0,
                "stats/action/mean": ep.action.mean(axis=0).tolist(),
            })
            offset += n
            first += n
        data = root / f"data/chunk-000/file-{file_index:03d}.parquet"
        data.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.concat_tables(tables), data)
        mp4 = root / f"videos/{truth.video_key}/chunk-000/file-{file_index:03d}.mp4"
        mp4.parent.mkdir(parents=True, exist_ok=True)
        write_video_mp4(mp4, np.concatenate(frames), codec="h264", gop=2, fps=fps)
    (root / "meta/episodes/chunk-000").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), root / "meta/episodes/chunk-000/file-000.parquet")
    pq.write_table(pa.table({"task_index": pa.array([0, 1], pa.int64()),
                             "__index_level_0__": pa.array(tasks)}),
                   root / "meta/tasks.parquet")
    info = {
        "codebase_version": "v3.0", "robot_type": "test_arm", "total_episodes": len(lengths),
        "total_frames": first, "total_tasks": 2, "chunks_size": 1000,
        "data_files_size_in_mb": 100, "video_files_size_in_mb": 200, "fps": fps,
        "splits": {"train": f"0:{len(lengths)}"},
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
        "features": _feature_specs(fps, video=True, image=False),
    }
    (root / "meta/info.json").write_text(json.dumps(info, indent=2))
    return truth
