"""A segment's numeric series as float64 arrays on its sequence timeline: what the checks read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.catalog import DatasetView, SegmentData
from rayform.catalog._note_ranges import SegmentClock, pick_timelines
from rayform.recording._columns import entity_of

SCALARS: str = "Scalars:scalars"
NAMES: str = "SeriesLines:names"
FRAME_TIMESTAMP: str = "VideoFrameReference:timestamp"
VIDEO_ASSET: str = "AssetVideo:asset"


@dataclass(frozen=True, slots=True, kw_only=True)
class Series:
    """One numeric column of one segment.

    Attributes:
        column: the component column.
        rows: ``int64[N]`` sequence values of its rows.
        values: ``float64[N, D]``.
        names: the ``D`` dimension names (``"0"``, ``"1"``… when the recording names none).
    """

    column: str
    rows: npt.NDArray[np.int64]
    values: npt.NDArray[np.float64]
    names: tuple[str, ...]

    @property
    def width(self) -> int:
        return int(self.values.shape[1])


@dataclass(slots=True, kw_only=True)
class SegmentSeries:
    """Everything the per-segment checks read of one segment (loaded once)."""

    segment_id: str
    version: str
    properties: dict[str, Any]
    clock: SegmentClock
    series: dict[str, Series] = field(default_factory=dict)
    video_timestamps: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = \
        field(default_factory=dict)  # entity -> (rows, frame timestamps ns)
    video_assets: dict[str, str] = field(default_factory=dict)  # entity -> asset digest
    columns: tuple[str, ...] = ()
    data: SegmentData | None = None

    @property
    def num_rows(self) -> int:
        return len(self.clock.rows)


def numeric_columns(view: DatasetView) -> list[str]:
    """The dataset's ``Scalars`` columns holding numbers."""
    schema = view.arrow_schema()
    out = []
    for name in view.schema().component_columns():
        if not name.endswith(":" + SCALARS):
            continue
        t = schema.field(name).type
        item = getattr(t, "value_type", None)
        if item is not None and (pa.types.is_floating(item) or pa.types.is_integer(item)):
            out.append(name)
    return out


def _matrix(values: pa.Array) -> npt.NDArray[np.float64] | None:
    """List rows as ``[N, D]`` float64 (None when rows differ in width)."""
    if len(values) == 0:
        return np.zeros((0, 0), dtype=np.float64)
    offsets = np.asarray(values.offsets)
    widths = np.diff(offsets)
    if not bool(np.all(widths == widths[0])) or widths[0] == 0:
        return None
    flat = values.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    data = np.asarray(flat.to_numpy(zero_copy_only=False), dtype=np.float64)
    return data.reshape(len(values), int(widths[0]))


def dimension_names(data: SegmentData, column: str, width: int,
                    timeline: str) -> tuple[str, ...]:
    """The names of ``column``'s ``width`` dimensions (its entity's ``SeriesLines:names`` when
    they fit, else ``"0"``, ``"1"``, …)."""
    names_column = f"{entity_of(column)}:{NAMES}"
    if data.has_column(names_column):
        rows = data.column(names_column, timeline).values
        if len(rows):
            names = [str(n) for n in rows[len(rows) - 1].as_py() or []]
            if len(names) == width:
                return tuple(names)
    return tuple(str(i) for i in range(width))


def load_series(view: DatasetView, segment_id: str, columns: list[str]) -> SegmentSeries:
    """Read a segment's numeric columns, video frame timestamps and clock.

    Raises:
        RayformError: the segment's files cannot be read (the caller reports it).
    """
    data = view.open_segment(segment_id)
    record = data.record
    seq, _ = pick_timelines(view.timelines)
    clock = SegmentClock.of(data, view.timelines)
    out = SegmentSeries(segment_id=segment_id, version=record.version,
                        properties=dict(record.properties), clock=clock, data=data)
    present = []
    for entity, idx in record.entities.items():
        present += [f"{entity}:{c}" for c in idx.components]
    out.columns = tuple(sorted(present))
    # rows are sequence values; without a sequence timeline, positions on the temporal one
    timeline = seq if seq is not None else clock.time_timeline
    if timeline is None:
        return out
    for column in columns:
        if not data.has_column(column):
            continue
        rows = data.column(column, timeline)
        if rows.is_static:
            continue
        matrix = _matrix(rows.values)
        if matrix is None or matrix.shape[1] == 0:
            continue
        index = rows.index if seq is not None or clock.ns is None else \
            np.searchsorted(clock.ns, rows.index).astype(np.int64)
        names = dimension_names(data, column, matrix.shape[1], timeline)
        out.series[column] = Series(column=column, rows=index, values=matrix, names=names)
    if seq is None:
        return out
    for entity in record.entities:
        ts_column = f"{entity}:{FRAME_TIMESTAMP}"
        if data.has_column(ts_column):
            rows = data.column(ts_column, seq)
            stamps = _matrix(rows.values)
            if stamps is not None and stamps.shape[1] == 1:
                out.video_timestamps[entity] = (rows.index, stamps[:, 0].astype(np.int64))
        asset_column = f"{entity}:{VIDEO_ASSET}"
        if data.has_column(asset_column):
            values = data.column(asset_column, seq).values
            if len(values):
                digest = (values[len(values) - 1].as_py() or [None])[0]
                if isinstance(digest, str):
                    out.video_assets[entity] = digest
    return out
