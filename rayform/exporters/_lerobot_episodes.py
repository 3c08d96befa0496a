"""Writing LeRobot v3.0 episodes: grid sampling, numeric and video features, data files, metadata.

:class:`EpisodeExporter` accumulates episodes (in one process, or gathered from Ray tasks) and
then writes the data files and metadata; :func:`rayform.exporters.lerobot.run_export` drives it.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rayform.catalog._segment_data import ColumnRows, SegmentData
from rayform.errors import ColumnNotFoundError, ConfigError, ConversionWarning
from rayform.exporters._features import TASK_COLUMN, ExportFeature
from rayform.exporters._lerobot_meta import (
    EpisodeRecord,
    write_episodes,
    write_info,
    write_stats,
    write_tasks,
)
from rayform.exporters._lerobot_stats import Stats, aggregate_stats, numeric_stats
from rayform.exporters._lerobot_video import ProbeCache, WrittenVideo, write_episode_video
from rayform.exporters._lerobot_video_files import (
    MIB,
    EpisodeVideo,
    FileSizeLimits,
    pack_videos,
)
from rayform.exporters._video_encode import VideoEncoding
from rayform.importers.lerobot._layout import (
    DEFAULT_CHUNKS_SIZE,
    EPISODE_INDEX,
    FRAME_INDEX,
    INDEX,
    TASK_INDEX,
    TIMESTAMP,
    V30_DATA_PATH,
)
from rayform.recording._columns import TimelineKind

# Each episode's own video files, joined into the v3.0 video files by finish().
EPISODE_VIDEOS_DIR = ".episode-videos"


@dataclass
class ExportedEpisode:
    record: EpisodeRecord
    table: pa.Table


class EpisodeExporter:
    """Accumulates episodes, then writes data files and metadata."""

    def __init__(self, root: Path, features: list[ExportFeature], timeline: str,
                 kind: TimelineKind, *, fps: float, encoding: VideoEncoding,
                 tolerance_s: float, file_sizes: FileSizeLimits | None = None) -> None:
        self.root = root
        self.file_sizes = file_sizes or FileSizeLimits()
        self.features = features
        self.timeline = timeline
        self.kind = kind
        self.fps = fps
        self.encoding = encoding
        self.tolerance_s = tolerance_s
        self.tolerance = round(tolerance_s * 1e9) if kind != "sequence" else 0
        self.tasks: dict[str, int] = {}
        self.episodes: list[ExportedEpisode] = []
        self.skipped: list[str] = []
        self.specs: dict[str, dict[str, Any]] = {}
        self.probes = ProbeCache()
        self.videos_written: dict[str, int] = {"remux": 0, "encode": 0}
        self.robot_types: set[str] = set()

    # ---------------------------------------------------------------------- one episode
    def plan_episode(self, seg: SegmentData, time_range: tuple[int, int] | None) -> int | None:
        """Register a segment's tasks and return its frame count, or ``None`` if it is left out.

        The distributed export (``rayform.ray.export_lerobot``) plans every episode in order on
        the driver, then calls :meth:`add` with the planned ``index`` / ``from_index`` in tasks.
        """
        try:
            rows = {f.key: seg.column(f.column, self.timeline) for f in self.features}
        except ColumnNotFoundError as err:
            self._skip(seg.segment_id, f"it lacks a feature column ({err})")
            return None
        grid = self._grid(seg.segment_id, rows, time_range)
        if grid is None:
            return None
        self._tasks(seg, grid)
        return len(grid)

    def add(self, seg: SegmentData, time_range: tuple[int, int] | None, *,
            index: int | None = None, from_index: int | None = None) -> None:
        """Export one segment as the next episode (or as episode ``index`` whose first frame
        has global index ``from_index``, when the episodes were planned elsewhere)."""
        try:
            rows = {f.key: seg.column(f.column, self.timeline) for f in self.features}
        except ColumnNotFoundError as err:
            self._skip(seg.segment_id, f"it lacks a feature column ({err})")
            return
        grid = self._grid(seg.segment_id, rows, time_range)
        if grid is None:
            return
        query = grid + self.tolerance
        index = len(self.episodes) if index is None else index
        frames = len(grid)
        columns: dict[str, pa.Array] = {}
        stats: dict[str, Stats] = {}
        videos: dict[str, tuple[int, int, float, float]] = {}
        for feature in self.features:
            pos = rows[feature.key].latest_at(query)
            if feature.is_visual:
                written = self._video(seg, feature, pos, index)
                videos[feature.key] = (0, 0, 0.0, frames / self.fps)  # placed by finish()
                stats[feature.key] = written.stats
                continue
            values = self._numeric(seg, feature, rows[feature.key], pos)
            columns[feature.key] = _feature_column(values)
            stats[feature.key] = numeric_stats(values)
        task_ids, task_names = self._tasks(seg, grid)
        if from_index is None:
            from_index = sum(e.record.length for e in self.episodes)
        timestamps = (np.arange(frames, dtype=np.float64) / self.fps).astype(np.float32)
        book = {
            TIMESTAMP: pa.array(timestamps, pa.float32()),
            FRAME_INDEX: pa.array(np.arange(frames, dtype=np.int64)),
            EPISODE_INDEX: pa.array(np.full(frames, index, dtype=np.int64)),
            INDEX: pa.array(np.arange(from_index, from_index + frames, dtype=np.int64)),
            TASK_INDEX: pa.array(task_ids),
        }
        for name, arr in book.items():
            stats[name] = numeric_stats(arr.to_numpy(zero_copy_only=False))
        record = EpisodeRecord(index=index, tasks=task_names, length=frames, data_chunk=0,
                               data_file=0, from_index=from_index, videos=videos, stats=stats,
                               extra=self._extra(seg))
        robot = seg.record.properties.get("robot_type")
        if isinstance(robot, str):
            self.robot_types.add(robot)
        self.episodes.append(ExportedEpisode(record=record, table=pa.table({**columns, **book})))

    def _skip(self, segment_id: str, why: str) -> None:
        warnings.warn(f"export_lerobot: segment {segment_id!r} is left out: {why}",
                      ConversionWarning, stacklevel=4)
        self.skipped.append(segment_id)

    def _grid(self, segment_id: str, rows: Mapping[str, ColumnRows],
              time_range: tuple[int, int] | None) -> npt.NDArray[np.int64] | None:
        temporal = [r for r in rows.values() if not r.is_static]
        if any(len(r) == 0 for r in temporal) or not temporal:
            self._skip(segment_id, f"a feature has no data on timeline {self.timeline!r}")
            return None
        start = max(int(r.index[0]) for r in temporal)
        end = min(int(r.index[-1]) for r in temporal)
        if time_range is not None:
            start, end = max(start, int(time_range[0])), min(end, int(time_range[1]))
        if end < start:
            self._skip(segment_id, "its features do not overlap in time (or the time range is "
                       "empty)")
            return None
        if self.kind == "sequence":
            return np.arange(start, end + 1, dtype=np.int64)
        step = 1e9 / self.fps
        count = int(np.floor((end - start + self.tolerance) / step)) + 1
        return np.asarray(start + np.rint(np.arange(count) * step), dtype=np.int64)

    def _numeric(self, seg: SegmentData, feature: ExportFeature, rows: ColumnRows,
                 pos: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
        lists = rows.values.take(pa.array(pos))
        lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
        width = int(lengths[0]) if len(lengths) else 0
        if width == 0 or not bool(np.all(lengths == width)):
            raise ConfigError(
                f"segment {seg.segment_id!r}: column {feature.column!r} has rows of "
                f"{sorted(set(lengths.tolist()))[:5]} values; a LeRobot feature needs one fixed "
                "shape (choose other columns with features=...)")
        values = np.asarray(lists.flatten().to_numpy(zero_copy_only=False)).reshape(-1, width)
        spec = self.specs.get(feature.key)
        if spec is None:
            self.specs[feature.key] = {"dtype": str(values.dtype), "shape": [width],
                                       "names": _names(seg, feature, self.timeline, width)}
        elif spec["shape"] != [width]:
            raise ConfigError(
                f"segment {seg.segment_id!r}: {feature.key!r} has {width} values per frame, "
                f"other segments {spec['shape'][0]}; a LeRobot feature has one shape")
        return values

    def _video(self, seg: SegmentData, feature: ExportFeature, pos: npt.NDArray[np.int64],
               index: int) -> WrittenVideo:
        dest = episode_video_path(self.root, feature.key, index)
        written = write_episode_video(seg, feature, self.timeline, pos, dest, fps=self.fps,
                                      encoding=self.encoding, probes=self.probes,
                                      tolerance_ns=max(self.tolerance, 1))
        self.videos_written[written.method] += 1
        if feature.key not in self.specs:
            p = written.probe
            self.specs[feature.key] = {
                "dtype": "video", "shape": [p.height, p.width, 3],
                "names": ["height", "width", "channels"],
                "info": {"video.height": p.height, "video.width": p.width,
                         "video.codec": p.codec, "video.pix_fmt": p.pix_fmt,
                         "video.is_depth_map": False, "video.fps": self.fps,
                         "video.channels": 3, "has_audio": False},
            }
        return written

    def _tasks(self, seg: SegmentData, grid: npt.NDArray[np.int64]
               ) -> tuple[npt.NDArray[np.int64], list[str]]:
        texts: list[str]
        if seg.has_column(TASK_COLUMN):
            rows = seg.column(TASK_COLUMN, self.timeline)
            pos = rows.latest_at(grid + self.tolerance)
            values = [str(v[0]) if v else "" for v in rows.values.to_pylist()]
            texts = [values[p] if p >= 0 else "" for p in pos.tolist()]
        else:
            task = seg.record.properties.get("task")
            texts = [str(task) if task is not None else ""] * len(grid)
        ids = np.empty(len(texts), dtype=np.int64)
        for i, text in enumerate(texts):
            ids[i] = self.tasks.setdefault(text, len(self.tasks))
        return ids, list(dict.fromkeys(texts))

    def _extra(self, seg: SegmentData) -> dict[str, Any]:
        return {"source_segment_id": seg.segment_id}

    # ------------------------------------------------------------------------ finishing
    def finish(self, robot_type: str | None) -> tuple[int, int, int, int, list[str]]:
        if not self.episodes:
            raise ConfigError(
                f"export_lerobot: no segment could be exported on timeline {self.timeline!r} "
                f"(left out: {self.skipped})")
        self.episodes.sort(key=lambda e: e.record.index)
        self._write_data()
        self._pack_videos()
        records = [e.record for e in self.episodes]
        features = dict(self.specs)
        for name, dtype in ((TIMESTAMP, "float32"), (FRAME_INDEX, "int64"),
                            (EPISODE_INDEX, "int64"), (INDEX, "int64"), (TASK_INDEX, "int64")):
            features[name] = {"dtype": dtype, "shape": [1], "names": None}
        if robot_type is None and len(self.robot_types) == 1:
            robot_type = next(iter(self.robot_types))
        write_info(self.root, fps=self.fps, robot_type=robot_type, features=features,
                   episodes=records, num_tasks=len(self.tasks),
                   has_video=any(f.is_visual for f in self.features),
                   data_mb=self.file_sizes.data_mb, video_mb=self.file_sizes.video_mb)
        write_tasks(self.root, list(self.tasks))
        write_episodes(self.root, records)
        keys = list(records[0].stats)
        write_stats(self.root, {k: aggregate_stats([r.stats[k] for r in records]) for k in keys})
        frames = sum(r.length for r in records)
        return (len(records), frames, self.videos_written["remux"],
                self.videos_written["encode"], self.skipped)

    def _pack_videos(self) -> None:
        """Join each camera's episode videos into v3.0 files (see ``_lerobot_video_files``)."""
        for feature in (f for f in self.features if f.is_visual):
            parts = [EpisodeVideo(index=e.record.index, num_frames=e.record.length,
                                  path=episode_video_path(self.root, feature.key, e.record.index))
                     for e in self.episodes]
            placed = pack_videos(self.root, feature.key, parts, fps=self.fps,
                                 limit_bytes=int(self.file_sizes.video_mb * MIB))
            for e in self.episodes:
                p = placed[e.record.index]
                e.record.videos[feature.key] = (p.chunk_index, p.file_index, p.from_timestamp,
                                                p.to_timestamp)
        shutil.rmtree(self.root / EPISODE_VIDEOS_DIR, ignore_errors=True)

    def _write_data(self) -> None:
        cap = int(self.file_sizes.data_mb * MIB)
        file_index = 0
        pending: list[ExportedEpisode] = []
        size = 0
        for episode in self.episodes:
            if pending and size + episode.table.nbytes > cap:
                self._flush(pending, file_index)
                file_index += 1
                pending, size = [], 0
            pending.append(episode)
            size += episode.table.nbytes
        if pending:
            self._flush(pending, file_index)

    def _flush(self, episodes: list[ExportedEpisode], file_index: int) -> None:
        chunk, file = divmod(file_index, DEFAULT_CHUNKS_SIZE)
        path = self.root / V30_DATA_PATH.format(chunk_index=chunk, file_index=file)
        path.parent.mkdir(parents=True, exist_ok=True)
        table = pa.concat_tables([e.table for e in episodes])
        pq.write_table(table, path)
        for e in episodes:
            e.record.data_chunk = chunk
            e.record.data_file = file


def episode_video_path(root: Path, key: str, index: int) -> Path:
    """Where episode ``index``'s own video of camera ``key`` waits to be packed."""
    return root / EPISODE_VIDEOS_DIR / key / f"episode_{index:09d}.mp4"


def _feature_column(values: npt.NDArray[Any]) -> pa.Array:
    if values.shape[1] == 1:
        return pa.array(values[:, 0])
    flat = pa.array(np.ascontiguousarray(values).reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, values.shape[1])


def _names(seg: SegmentData, feature: ExportFeature, timeline: str, width: int
           ) -> list[str] | None:
    if not seg.has_column(feature.names_column):
        return None
    rows = seg.column(feature.names_column, timeline)
    if not len(rows):
        return None
    names = rows.values[len(rows) - 1].as_py()
    if isinstance(names, list) and len(names) == width and all(isinstance(n, str) for n in names):
        return [str(n) for n in names]
    return None

