"""Export a dataset, a filtered view or a slice to a LeRobot v3.0 dataset folder.

Laid out as LeRobot writes v3.0: episodes share Parquet data files and, per camera, MP4 files
(joined without re-encoding) up to :class:`FileSizeLimits`. Each segment becomes one episode (in
segment-id order), sampled on a grid at ``fps`` on one
timeline with latest-at alignment: the grid runs from the latest first sample to the earliest
last sample of the exported columns (every frame has every feature), and each feature takes its
latest value at or before each grid point (plus ``tolerance_s``, so that timestamps rounded to
float32 by LeRobot land on their own frame).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rayform._atomic import atomic_path
from rayform.errors import ConfigError
from rayform.exporters._features import ExportFeature, select_features
from rayform.exporters._lerobot_episodes import EpisodeExporter, ExportedEpisode
from rayform.exporters._lerobot_video_files import FileSizeLimits
from rayform.exporters._source import (
    ExportSource,
    TimeRanges,
    pick_timeline,
    resolve_source,
)
from rayform.exporters._video_encode import VideoEncoding


@dataclass(frozen=True, slots=True, kw_only=True)
class LeRobotExport:
    """What :func:`export_lerobot` wrote.

    Attributes:
        root: the dataset folder.
        num_episodes: episodes written.
        num_frames: frames written over all episodes.
        features: the feature keys (without LeRobot's own columns).
        remuxed_videos: episode videos copied from their source without re-encoding.
        encoded_videos: episode videos encoded.
        skipped_segments: segments left out (no data on the timeline, or missing a feature).
    """

    root: Path
    num_episodes: int
    num_frames: int
    features: tuple[str, ...]
    remuxed_videos: int
    encoded_videos: int
    skipped_segments: tuple[str, ...]


def export_lerobot(source: Any, out_dir: str | os.PathLike[str], *, fps: float,
                   timeline: str | None = None, features: Mapping[str, str] | None = None,
                   robot_type: str | None = None, video: VideoEncoding | None = None,
                   tolerance_s: float = 1e-4, time_ranges: TimeRanges | None = None,
                   file_sizes: FileSizeLimits | None = None,
                   progress: bool | None = None) -> LeRobotExport:
    """Write ``source`` as a LeRobot v3.0 dataset in ``out_dir`` (created; must not exist or be
    empty). LeRobot (and rayform's LeRobot importer) can open the result.

    Args:
        source: a dataset, a view (``filter_segments`` / ``filter_contents``) or a slice (its
            segments at their pinned versions, within its time range).
        out_dir: the dataset folder to create.
        fps: the frame rate of the export grid (and of the videos).
        timeline: the timeline to sample on; default a slice's time-range timeline, else the
            timeline most entities are logged on. On a sequence timeline every index value is
            one frame.
        features: ``{lerobot_key: column}``; default every numeric list column (key: entity path
            with ``.`` separators, plus the field unless it is ``Scalars:scalars``) and every
            video / encoded-image column (key: entity path).
        robot_type: ``info.json`` ``robot_type``; default the segments' ``robot_type`` property.
        video: how video is encoded where it cannot be remuxed (default :class:`VideoEncoding`).
        tolerance_s: latest-at slack added to each grid point (temporal timelines).
        time_ranges: ``{segment_id: (start, end)}`` inclusive, in the timeline's units (ns on
            temporal timelines), restricting each segment.
        file_sizes: :class:`FileSizeLimits`: episodes share data files and per-camera video files
            up to these sizes (LeRobot's defaults: 100 and 200 MiB).
        progress: show a progress bar (default: when stderr is a terminal).

    Returns:
        What was written.

    Raises:
        ConfigError: ``out_dir`` is not empty, ``fps`` is not positive, or nothing to export.
        ColumnNotFoundError: an unknown timeline or column.
    """
    from tqdm import tqdm

    def write_sequentially(exporter: EpisodeExporter, resolved: ExportSource) -> None:
        show = progress if progress is not None else sys.stderr.isatty()
        view = resolved.view
        for segment_id in tqdm(view.segment_ids(), desc="export lerobot", unit="episode",
                               disable=not show):
            exporter.add(view.open_segment(segment_id), resolved.range_for(segment_id))

    return run_export(source, out_dir, write_sequentially, fps=fps, timeline=timeline,
                      features=features, robot_type=robot_type, video=video,
                      tolerance_s=tolerance_s, time_ranges=time_ranges, file_sizes=file_sizes)


EpisodeWriter = Callable[["EpisodeExporter", ExportSource], None]


def run_export(source: Any, out_dir: str | os.PathLike[str], write: EpisodeWriter, *,
               fps: float, timeline: str | None, features: Mapping[str, str] | None,
               robot_type: str | None, video: VideoEncoding | None, tolerance_s: float,
               time_ranges: TimeRanges | None, file_sizes: FileSizeLimits | None = None
               ) -> LeRobotExport:
    """The export driver: validate, let ``write`` add the episodes, write metadata, publish.

    ``write(exporter, source)`` adds every episode (in this process, or gathered from workers);
    the folder appears atomically (written under a temporary name, then renamed).
    """
    if not fps > 0:
        raise ConfigError(f"export_lerobot: fps must be positive, got {fps!r}")
    resolved = resolve_source(source, time_ranges)
    view = resolved.view
    root = Path(out_dir).resolve()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ConfigError(f"export_lerobot: {root} exists and is not an empty folder; choose a "
                          "new folder")
    timeline_name, kind = pick_timeline(resolved, timeline)
    chosen = select_features(view, features)
    encoding = video or VideoEncoding()
    with atomic_path(root) as tmp:
        tmp.mkdir()
        exporter = EpisodeExporter(tmp, chosen, timeline_name, kind, fps=fps, encoding=encoding,
                                   tolerance_s=tolerance_s, file_sizes=file_sizes)
        write(exporter, resolved)
        result = exporter.finish(robot_type)
        if root.exists():
            root.rmdir()  # an empty folder (checked above); os.replace cannot replace a folder
    return LeRobotExport(root=root, num_episodes=result[0], num_frames=result[1],
                         features=tuple(f.key for f in chosen), remuxed_videos=result[2],
                         encoded_videos=result[3], skipped_segments=tuple(result[4]))


__all__ = [
    "EpisodeExporter",
    "EpisodeWriter",
    "ExportFeature",
    "ExportSource",
    "ExportedEpisode",
    "FileSizeLimits",
    "LeRobotExport",
    "TimeRanges",
    "export_lerobot",
    "run_export",
]
