"""One episode for the segment page: its time axis, cameras, decimated signals and notes.

Everything is placed on one time axis: seconds from the episode's first row on the dataset's
temporal timeline (or, without one, on its sequence timeline at :data:`SEQUENCE_RATE_HZ`), so
that the page's one cursor moves the cameras and the plots together.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.catalog import DatasetEntry, SegmentData
from rayform.catalog._metadata import SegmentRecord
from rayform.catalog._note_ranges import pick_timelines
from rayform.curation._series import dimension_names, numeric_columns
from rayform.recording._columns import (
    ENCODED_IMAGE_BLOB,
    VIDEO_ASSET,
    VIDEO_CODEC,
    VIDEO_FRAME_TIMESTAMP,
    VIDEO_SAMPLE,
    column_name,
)
from rayform.ui._decimate import decimate, svg_paths
from rayform.ui._values import json_value

SEQUENCE_RATE_HZ = 30.0  # how fast a sequence-only timeline plays (one step a frame)
PLOT_WIDTH = 900
PLOT_HEIGHT = 120
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")


@dataclass(frozen=True, slots=True, kw_only=True)
class Axis:
    """The episode's time axis: ``timeline`` values ``v`` are at ``(v - origin) * scale_s`` s."""

    timeline: str
    kind: str
    origin: int
    scale_s: float
    duration_s: float

    def seconds(self, values: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return (values - self.origin).astype(np.float64) * self.scale_s


@dataclass(frozen=True, slots=True, kw_only=True)
class Camera:
    """A camera of the episode.

    Attributes:
        kind: ``"image"`` (encoded images, shown frame by frame), ``"stream"`` (a packet
            stream, remuxed into MP4) or ``"asset"`` (an MP4 kept as-is).
        times_s: each frame's time on the axis.
        video_s: per frame, its time inside the served video (streams: from their first frame;
            assets: the frame's presentation time); empty for images.
    """

    entity: str
    kind: str
    codec: str | None
    times_s: list[float]
    video_s: list[float]

    def to_json(self) -> dict[str, Any]:
        return {"entity": self.entity, "kind": self.kind, "codec": self.codec,
                "times_s": self.times_s, "video_s": self.video_s}


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalPlot:
    """One numeric column drawn as a min/max envelope per dimension (an SVG path each)."""

    column: str
    names: tuple[str, ...]
    y_range: tuple[float, float]
    paths: list[str]
    samples: int
    t_s: list[float]
    low: list[list[float | None]]
    high: list[list[float | None]]

    @property
    def colours(self) -> list[str]:
        return [COLOURS[i % len(COLOURS)] for i in range(len(self.names))]

    def to_json(self) -> dict[str, Any]:
        return {"column": self.column, "names": list(self.names), "samples": self.samples,
                "y_range": list(self.y_range), "t_s": self.t_s, "low": self.low,
                "high": self.high}


@dataclass(frozen=True, slots=True, kw_only=True)
class NoteBand:
    """An annotation or finding of the episode; ``start_s``/``end_s`` ``None``: the whole of it."""

    kind: str
    label: str
    severity: str
    column: str | None
    message: str | None
    start_s: float | None
    end_s: float | None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "label": self.label, "severity": self.severity,
                "column": self.column, "message": self.message, "start_s": self.start_s,
                "end_s": self.end_s}


@dataclass(frozen=True, slots=True, kw_only=True)
class Episode:
    """Everything the segment page shows."""

    dataset: str
    segment: str
    version: str
    properties: dict[str, Any]
    axis: Axis
    cameras: list[Camera] = field(default_factory=list)
    signals: list[SignalPlot] = field(default_factory=list)
    notes: list[NoteBand] = field(default_factory=list)
    view_command: str = ""
    plot_width: int = PLOT_WIDTH

    def to_json(self) -> dict[str, Any]:
        a = self.axis
        return {"dataset": self.dataset, "segment": self.segment, "version": self.version,
                "properties": self.properties,
                "axis": {"timeline": a.timeline, "kind": a.kind, "origin": a.origin,
                         "scale_s": a.scale_s, "duration_s": a.duration_s},
                "cameras": [c.to_json() for c in self.cameras],
                "signals": [s.to_json() for s in self.signals],
                "notes": [n.to_json() for n in self.notes],
                "view_command": self.view_command, "plot_width": self.plot_width}


def episode_axis(dataset: DatasetEntry, record: SegmentRecord) -> Axis:
    """The axis of ``record``: its temporal timeline in seconds, else its sequence one."""
    sequence, temporal = pick_timelines(dataset.timelines)
    timeline = temporal or sequence
    if timeline is None:
        return Axis(timeline="", kind="sequence", origin=0, scale_s=1.0, duration_s=0.0)
    ranges = [e.ranges[timeline] for e in record.entities.values() if timeline in e.ranges]
    origin = min((r.start for r in ranges), default=0)
    end = max((r.end for r in ranges), default=origin)
    kind = dataset.timelines[timeline]
    scale = 1e-9 if kind != "sequence" else 1.0 / SEQUENCE_RATE_HZ
    return Axis(timeline=timeline, kind=kind, origin=origin, scale_s=scale,
                duration_s=max((end - origin) * scale, 0.0))


def _first_text(data: SegmentData, column: str, timeline: str) -> str | int | None:
    if not data.has_column(column):
        return None
    values = data.column(column, timeline).values
    if not len(values):
        return None
    cell = values[0].as_py()
    if isinstance(cell, list):
        cell = cell[0] if cell else None
    return cell if isinstance(cell, str | int) else None


def stream_codec(data: SegmentData, entity: str, timeline: str) -> str:
    """The codec of a ``VideoStream`` entity (Rerun stores a number, rayform a name)."""
    from rayform.importers.rrd._arrow_types import VIDEO_CODEC_NAMES
    from rayform.media._video_codec import canonical_codec

    value = _first_text(data, column_name(entity, VIDEO_CODEC), timeline)
    if isinstance(value, int):
        return VIDEO_CODEC_NAMES.get(value, "h264")
    return canonical_codec(value) if value else "h264"


def asset_digest(data: SegmentData, entity: str, timeline: str) -> str | None:
    """The digest of the video asset of ``entity`` (checked against the segment's assets when
    its path is asked for: :meth:`SegmentData.asset_path`)."""
    value = _first_text(data, column_name(entity, VIDEO_ASSET), timeline)
    return value if isinstance(value, str) else None


def _flat_int64(values: pa.Array) -> npt.NDArray[np.int64]:
    flat = values.flatten()
    if not pa.types.is_integer(flat.type):
        flat = flat.cast(pa.int64())
    return np.asarray(flat.to_numpy(zero_copy_only=False), dtype=np.int64)


def cameras_of(data: SegmentData, axis: Axis) -> list[Camera]:
    """The cameras of one segment, by entity path."""
    out = []
    for entity, info in sorted(data.record.entities.items()):
        if axis.timeline not in info.ranges:
            continue
        comps = set(info.components)
        if ENCODED_IMAGE_BLOB in comps:
            rows = data.column(column_name(entity, ENCODED_IMAGE_BLOB), axis.timeline)
            out.append(Camera(entity=entity, kind="image", codec=None,
                              times_s=axis.seconds(rows.index).round(6).tolist(), video_s=[]))
        elif VIDEO_SAMPLE in comps:
            rows = data.column(column_name(entity, VIDEO_SAMPLE), axis.timeline)
            times = axis.seconds(rows.index)
            video = times - times[0] if len(times) else times
            out.append(Camera(entity=entity, kind="stream",
                              codec=stream_codec(data, entity, axis.timeline),
                              times_s=times.round(6).tolist(), video_s=video.round(6).tolist()))
        elif VIDEO_ASSET in comps and VIDEO_FRAME_TIMESTAMP in comps:
            rows = data.column(column_name(entity, VIDEO_FRAME_TIMESTAMP), axis.timeline)
            pts_ns = _flat_int64(rows.values)
            if len(pts_ns) != len(rows.index):
                continue
            out.append(Camera(entity=entity, kind="asset", codec=None,
                              times_s=axis.seconds(rows.index).round(6).tolist(),
                              video_s=(pts_ns / 1e9).round(6).tolist()))
    return out


def _matrix(values: pa.Array) -> npt.NDArray[np.float64] | None:
    """List rows of equal width as ``[N, D]``; ``None`` when widths differ."""
    if len(values) == 0:
        return None
    offsets = np.asarray(values.offsets)
    widths = np.diff(offsets)
    if widths[0] == 0 or not bool(np.all(widths == widths[0])):
        return None
    flat = values.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    data = np.asarray(flat.to_numpy(zero_copy_only=False))
    return data.reshape(len(values), int(widths[0]))


def signals_of(dataset: DatasetEntry, data: SegmentData, axis: Axis, *,
               width: int = PLOT_WIDTH) -> list[SignalPlot]:
    """Each ``Scalars`` column of the segment on the axis, decimated to ``width`` columns."""
    out = []
    span = (0.0, max(axis.duration_s, 1e-9))
    for column in numeric_columns(dataset):
        if not data.has_column(column):
            continue
        entity = column.split(":", 1)[0]
        if axis.timeline not in data.record.entities[entity].ranges:
            continue
        rows = data.column(column, axis.timeline)
        if rows.is_static:
            continue
        matrix = _matrix(rows.values)
        if matrix is None:
            continue
        env = decimate(axis.seconds(rows.index), matrix, width=width, span_s=span)
        finite = np.concatenate([env.low[np.isfinite(env.low)], env.high[np.isfinite(env.high)]])
        lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
        if hi - lo < 1e-12:
            lo, hi = lo - 0.5, hi + 0.5
        names = dimension_names(data, column, matrix.shape[1], axis.timeline)
        out.append(SignalPlot(
            column=column, names=names, y_range=(lo, hi), samples=len(rows),
            paths=svg_paths(env, span_s=span, width=width, height=PLOT_HEIGHT, y_range=(lo, hi)),
            t_s=env.t_s.round(6).tolist(), low=json_value(env.low.tolist()),
            high=json_value(env.high.tolist())))
    return out


def notes_of(dataset: DatasetEntry, segment: str, axis: Axis) -> list[NoteBand]:
    """The segment's annotations and findings, placed on the axis where their range is on it."""
    import pyarrow.compute as pc

    out = []
    for table in (dataset.annotations(), dataset.findings()):
        mine = table.filter(pc.equal(table.column("segment"), segment))
        for row in mine.to_pylist():
            start = end = None
            if row["start_ns"] is not None and row["time_timeline"] == axis.timeline:
                start, end = row["start_ns"], row["end_ns"]
            elif row["start_row"] is not None and row["timeline"] == axis.timeline:
                start, end = row["start_row"], row["end_row"]
            band = (None, None) if start is None or end is None else (
                round((start - axis.origin) * axis.scale_s, 6),
                round((end - axis.origin) * axis.scale_s, 6))
            out.append(NoteBand(kind=row["kind"], label=row["label"] or row["check"] or "",
                                severity=row["severity"] or "info", column=row["column"],
                                message=row["message"], start_s=band[0], end_s=band[1]))
    return out


def load_episode(dataset: DatasetEntry, segment: str, *, catalog_url: str,
                 plot_width: int = PLOT_WIDTH) -> Episode:
    """The segment page's data (reads one segment's files, memory-mapped); signals decimated to
    ``plot_width`` pixel columns.

    Raises:
        SegmentNotFoundError: ``segment`` is not in the dataset.
    """
    record = dataset.segment_record(segment)
    data = dataset.open_segment(segment)
    axis = episode_axis(dataset, record)
    command = shlex.join(["rayform", "--catalog", catalog_url, "view", dataset.name, segment])
    return Episode(dataset=dataset.name, segment=segment, version=record.version,
                   properties={k: json_value(v) for k, v in sorted(record.properties.items())},
                   axis=axis, cameras=cameras_of(data, axis) if axis.timeline else [],
                   signals=signals_of(dataset, data, axis, width=plot_width) if axis.timeline else [],
                   notes=notes_of(dataset, segment, axis), view_command=command,
                   plot_width=plot_width)
