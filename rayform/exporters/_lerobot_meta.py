"""Writing the ``meta/`` folder of a LeRobot v3.0 dataset (info, tasks, episodes, stats)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rayform.exporters._lerobot_stats import Stats, stats_json
from rayform.importers.lerobot._layout import (
    DEFAULT_CHUNKS_SIZE,
    INFO_PATH,
    STATS_PATH,
    V30_DATA_PATH,
    V30_EPISODES_PATH,
    V30_TASKS_PATH,
    V30_VIDEO_PATH,
)

CODEBASE_VERSION = "v3.0"
DATA_FILES_SIZE_IN_MB = 100
VIDEO_FILES_SIZE_IN_MB = 200


@dataclass(slots=True, kw_only=True)
class EpisodeRecord:
    """What ``meta/episodes`` holds for one exported episode."""

    index: int
    tasks: list[str]
    length: int
    data_chunk: int
    data_file: int
    from_index: int
    videos: dict[str, tuple[int, int, float, float]] = field(default_factory=dict)
    stats: dict[str, Stats] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=4, ensure_ascii=False) + "\n", encoding="utf-8")


def write_info(root: Path, *, fps: float, robot_type: str | None,
               features: Mapping[str, dict[str, Any]], episodes: Sequence[EpisodeRecord],
               num_tasks: int, has_video: bool, data_mb: float = DATA_FILES_SIZE_IN_MB,
               video_mb: float = VIDEO_FILES_SIZE_IN_MB) -> None:
    total_frames = sum(e.length for e in episodes)
    write_json(root / INFO_PATH, {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": len(episodes),
        "total_frames": total_frames,
        "total_tasks": num_tasks,
        "chunks_size": DEFAULT_CHUNKS_SIZE,
        "data_files_size_in_mb": _number(data_mb),
        "video_files_size_in_mb": _number(video_mb),
        "fps": int(fps) if float(fps).is_integer() else fps,
        "splits": {"train": f"0:{len(episodes)}"},
        "data_path": V30_DATA_PATH,
        "video_path": V30_VIDEO_PATH if has_video else None,
        "features": dict(features),
    })


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def write_tasks(root: Path, tasks: Sequence[str]) -> None:
    """``meta/tasks.parquet``: ``task_index`` with the task text as the (pandas) index ``task``."""
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode",
                            "numpy_type": "object", "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
             "numpy_type": "int64", "metadata": None},
            {"name": "task", "field_name": "task", "pandas_type": "unicode",
             "numpy_type": "object", "metadata": None},
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.0",
    }
    table = pa.table({"task_index": pa.array(np.arange(len(tasks)), pa.int64()),
                      "task": pa.array(list(tasks), pa.string())})
    table = table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})
    path = root / V30_TASKS_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def write_episodes(root: Path, episodes: Sequence[EpisodeRecord]) -> None:
    """``meta/episodes/chunk-000/file-000.parquet``: one row per episode."""
    rows: list[dict[str, Any]] = []
    for e in episodes:
        row: dict[str, Any] = {
            "episode_index": e.index,
            "tasks": e.tasks,
            "length": e.length,
            "data/chunk_index": e.data_chunk,
            "data/file_index": e.data_file,
            "dataset_from_index": e.from_index,
            "dataset_to_index": e.from_index + e.length,
        }
        for key, (chunk, file, start, stop) in e.videos.items():
            row[f"videos/{key}/chunk_index"] = chunk
            row[f"videos/{key}/file_index"] = file
            row[f"videos/{key}/from_timestamp"] = start
            row[f"videos/{key}/to_timestamp"] = stop
        for key, stats in e.stats.items():
            for name, value in stats_json(stats).items():
                row[f"stats/{key}/{name}"] = value
        row["meta/episodes/chunk_index"] = 0
        row["meta/episodes/file_index"] = 0
        row.update(e.extra)
        rows.append(row)
    names = list(dict.fromkeys(name for row in rows for name in row))
    table = pa.table({name: [row.get(name) for row in rows] for name in names})
    path = root / V30_EPISODES_PATH.format(chunk_index=0, file_index=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def write_stats(root: Path, stats: Mapping[str, Stats]) -> None:
    write_json(root / STATS_PATH, {key: stats_json(value) for key, value in stats.items()})
