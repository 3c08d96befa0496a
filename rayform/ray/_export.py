"""Distributed LeRobot export: episodes planned in order on the driver, written by Ray tasks.

The single-process exporter (:mod:`rayform.exporters.lerobot`) numbers episodes, frames and
tasks as it goes. Here the driver first plans every episode in segment order (which segments are
left out, each episode's frame count, the task table: metadata and index columns only), so every
task can write its episodes (data rows, statistics, videos) at their final place with the same
per-episode code; the driver then writes the data files and metadata. The folder is the same as
:func:`rayform.exporters.export_lerobot` writes (the output folder must be on storage the
workers share).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rayform.errors import ConfigError
from rayform.exporters import VideoEncoding
from rayform.exporters.lerobot import (
    EpisodeExporter,
    ExportedEpisode,
    ExportFeature,
    ExportSource,
    FileSizeLimits,
    LeRobotExport,
    TimeRanges,
    run_export,
)
from rayform.ray._cluster import TaskOptions, batched, run_tasks
from rayform.recording._columns import TimelineKind


@dataclass(frozen=True, slots=True, kw_only=True)
class _ExportPlan:
    """Everything a task needs to build an exporter identical to the driver's (pickles small)."""

    source: ExportSource
    root: Path
    features: tuple[ExportFeature, ...]
    timeline: str
    kind: TimelineKind
    fps: float
    encoding: VideoEncoding
    tolerance_s: float
    file_sizes: FileSizeLimits
    tasks: Mapping[str, int]

    def exporter(self) -> EpisodeExporter:
        exporter = EpisodeExporter(self.root, list(self.features), self.timeline, self.kind,
                                   fps=self.fps, encoding=self.encoding,
                                   tolerance_s=self.tolerance_s, file_sizes=self.file_sizes)
        exporter.tasks = dict(self.tasks)
        return exporter


@dataclass(frozen=True, slots=True, kw_only=True)
class _GroupResult:
    episodes: list[ExportedEpisode]
    specs: dict[str, dict[str, Any]]
    videos_written: dict[str, int]
    robot_types: set[str]


def _export_group(plan: _ExportPlan, jobs: list[tuple[str, int, int]]) -> _GroupResult:
    """Runs in a Ray task: write episodes ``(segment_id, index, from_index)`` of the plan."""
    exporter = plan.exporter()
    for segment_id, index, from_index in jobs:
        exporter.add(plan.source.view.open_segment(segment_id),
                     plan.source.range_for(segment_id), index=index, from_index=from_index)
    if len(exporter.episodes) != len(jobs):
        raise RuntimeError(
            f"export_lerobot: a task exported {len(exporter.episodes)} of {len(jobs)} planned "
            "episodes; the dataset changed under the export"
        )
    return _GroupResult(episodes=exporter.episodes, specs=exporter.specs,
                        videos_written=exporter.videos_written, robot_types=exporter.robot_types)


def _merge_specs(into: dict[str, dict[str, Any]], specs: Mapping[str, dict[str, Any]]) -> None:
    """Keep the first episode's spec of each feature, as the sequential export does."""
    for key, spec in specs.items():
        known = into.setdefault(key, spec)
        if known["shape"] != spec["shape"]:
            raise ConfigError(
                f"export_lerobot: feature {key!r} has shape {spec['shape']} in some episodes and "
                f"{known['shape']} in others; a LeRobot feature has one shape"
            )


def export_lerobot(source: Any, out_dir: str | os.PathLike[str], *, fps: float,
                   timeline: str | None = None, features: Mapping[str, str] | None = None,
                   robot_type: str | None = None, video: VideoEncoding | None = None,
                   tolerance_s: float = 1e-4, time_ranges: TimeRanges | None = None,
                   file_sizes: FileSizeLimits | None = None,
                   options: TaskOptions | None = None) -> LeRobotExport:
    """:func:`rayform.exporters.export_lerobot` with the episodes written by Ray tasks.

    The arguments are the single-process exporter's (``progress`` aside), plus ``options``
    (``segments_per_task`` episodes per task). The result is the same folder.

    Raises:
        ConfigError: ``out_dir`` is not empty, ``fps`` is not positive, or nothing to export.
        ColumnNotFoundError: an unknown timeline or column.
    """
    opts = options or TaskOptions()

    def write_in_tasks(driver: EpisodeExporter, resolved: ExportSource) -> None:
        view = resolved.view
        jobs: list[tuple[str, int, int]] = []
        frames = 0
        for segment_id in view.segment_ids():
            length = driver.plan_episode(view.open_segment(segment_id),
                                         resolved.range_for(segment_id))
            if length is not None:
                jobs.append((segment_id, len(jobs), frames))
                frames += length
        plan = _ExportPlan(source=resolved, root=driver.root, features=tuple(driver.features),
                           timeline=driver.timeline, kind=driver.kind, fps=driver.fps,
                           encoding=driver.encoding, tolerance_s=driver.tolerance_s,
                           file_sizes=driver.file_sizes, tasks=dict(driver.tasks))
        groups = batched(jobs, opts.segments_per_task)
        for result in run_tasks(_export_group, [(plan, group) for group in groups], opts):
            driver.episodes.extend(result.episodes)
            _merge_specs(driver.specs, result.specs)
            for method, count in result.videos_written.items():
                driver.videos_written[method] += count
            driver.robot_types |= result.robot_types

    return run_export(source, out_dir, write_in_tasks, fps=fps, timeline=timeline,
                      features=features, robot_type=robot_type, video=video,
                      tolerance_s=tolerance_s, time_ranges=time_ranges, file_sizes=file_sizes)

__all__ = ["export_lerobot"]
