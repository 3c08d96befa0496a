"""Bookkeeping and timing: declared length = rows = video frames, index contiguity, the video
timestamp grid, monotonic timestamps, gaps with their missing frames, measured vs nominal rate."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rayform.curation._check import Check
from rayform.curation._context import Context
from rayform.curation._finding import Finding
from rayform.curation._series import SegmentSeries

GAP_FACTOR = 1.5        # a step over 1.5 nominal steps is a gap
RATE_TOLERANCE = 0.02   # measured rate within 2 % of nominal
GRID_TOLERANCE = 0.25   # a video timestamp within a quarter step of its grid point


def _step_ns(ctx: Context, seg: SegmentSeries) -> float | None:
    fps = seg.properties.get("fps", ctx.nominal_rate_hz)
    if isinstance(fps, int | float) and not isinstance(fps, bool) and fps > 0:
        return 1e9 / float(fps)
    return None


def length(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    out = []
    declared = seg.properties.get("declared_length")
    rows = seg.num_rows
    if isinstance(declared, int) and not isinstance(declared, bool) and declared != rows:
        out.append(Finding(check="bookkeeping.length", severity="error", segment=seg.segment_id,
                           value=float(rows), threshold=float(declared),
                           message=f"the source declares {declared} frames; {rows} rows are "
                                   "registered"))
    for entity, (frame_rows, _) in seg.video_timestamps.items():
        if len(frame_rows) != rows:
            out.append(Finding(
                check="bookkeeping.length", severity="error", segment=seg.segment_id,
                column=f"{entity}:VideoFrameReference:timestamp", value=float(len(frame_rows)),
                threshold=float(rows),
                message=f"camera {entity!r} has {len(frame_rows)} frame references for {rows} rows"))
    return out


def index(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    rows = seg.clock.rows
    if seg.clock.timeline is None or len(rows) < 2:
        return []
    steps = np.diff(rows)
    out = []
    for i in np.flatnonzero(steps != 1):
        missing = int(steps[i]) - 1
        out.append(Finding(
            check="bookkeeping.index", severity="error", segment=seg.segment_id,
            start_row=int(rows[i]), end_row=int(rows[i + 1]) + 1, value=float(missing),
            threshold=0.0, message=(f"{seg.clock.timeline} jumps from {rows[i]} to {rows[i + 1]}: "
                                    f"{missing} index value(s) missing")))
    return out


def _grid_findings(seg: SegmentSeries, what: str, check: str, rows: npt.NDArray[np.int64],
                   stamps: npt.NDArray[np.int64], step: float, column: str | None
                   ) -> list[Finding]:
    out = []
    diffs = np.diff(stamps).astype(np.float64)
    for i in np.flatnonzero(diffs <= GRID_TOLERANCE * step):
        out.append(Finding(
            check=check, severity="error", segment=seg.segment_id, column=column,
            start_row=int(rows[i]), end_row=int(rows[i + 1]) + 1, value=float(diffs[i]),
            threshold=float(GRID_TOLERANCE * step), baseline=step,
            message=(f"{what} of rows {rows[i]} and {rows[i + 1]} are "
                     f"{'the same' if diffs[i] == 0 else 'out of order' if diffs[i] < 0 else 'too close'}"
                     f" ({diffs[i] / 1e6:.3g} ms apart; nominal {step / 1e6:.3g} ms): a "
                     "repeated/duplicated frame")))
    for i in np.flatnonzero(diffs > GAP_FACTOR * step):
        missing = round(diffs[i] / step) - 1
        out.append(Finding(
            check=check, severity="warning" if check.startswith("timing") else "error",
            segment=seg.segment_id, column=column, start_row=int(rows[i]),
            end_row=int(rows[i + 1]) + 1, value=float(missing), threshold=GAP_FACTOR,
            baseline=step,
            message=(f"{what} jump {diffs[i] / 1e6:.4g} ms after row {rows[i]} "
                     f"(nominal {step / 1e6:.4g} ms): {missing} frame(s) missing")))
    return out


def video_grid(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    step = _step_ns(ctx, seg)
    if step is None:
        return []
    out = []
    for entity, (rows, stamps) in seg.video_timestamps.items():
        out += _grid_findings(seg, f"video frame timestamps of {entity!r}",
                              "bookkeeping.video_grid", rows, stamps, step,
                              f"{entity}:VideoFrameReference:timestamp")
    return out


def timestamps(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    ns = seg.clock.ns
    step = _step_ns(ctx, seg)
    if ns is None or len(ns) < 2 or step is None:
        return []
    return _grid_findings(seg, "timestamps", "timing.timestamps", seg.clock.rows, ns, step, None)


def rate(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    """Per stream (the rows' timestamps, each camera's frame timestamps): median step against
    the nominal rate."""
    step = _step_ns(ctx, seg)
    if step is None:
        return []
    streams: list[tuple[str | None, object]] = [(None, seg.clock.ns)]
    streams += [(f"{e}:VideoFrameReference:timestamp", stamps)
                for e, (_, stamps) in seg.video_timestamps.items()]
    out = []
    for column, stamps in streams:
        if not isinstance(stamps, np.ndarray) or len(stamps) < 3:
            continue
        measured = float(np.median(np.diff(stamps)))
        if measured <= 0 or abs(step / measured - 1) <= RATE_TOLERANCE:
            continue
        what = "rows" if column is None else column.split(":", 1)[0]
        out.append(Finding(check="timing.rate", severity="warning", segment=seg.segment_id,
                           column=column, value=1e9 / measured, threshold=RATE_TOLERANCE,
                           baseline=1e9 / step,
                           message=(f"{what}: measured rate {1e9 / measured:.4g} Hz; nominal "
                                    f"{1e9 / step:.4g} Hz")))
    return out


CHECKS = [
    Check(id="bookkeeping.length", detects="declared length, rows and video frames disagree",
          how="the source's declared frame count and each camera's frame references against "
          "the rows", threshold="exact", cost="metadata", scope="segment", run_segment=length),
    Check(id="bookkeeping.index", detects="holes in the frame index",
          how="consecutive sequence-timeline values differ by 1", threshold="exact",
          cost="rows", scope="segment", run_segment=index),
    Check(id="bookkeeping.video_grid", detects="missing or duplicated video frames",
          how="frame timestamps on the 1/fps grid: a step under 1/4 frame repeats a frame, over "
          "1.5 frames drops round(step)-1", threshold="1/4 and 1.5 frame steps", cost="rows",
          scope="segment", run_segment=video_grid),
    Check(id="timing.timestamps", detects="non-monotonic or repeated timestamps, gaps",
          how="steps of the temporal timeline against 1/fps; a gap gives its missing frames",
          threshold="1/4 and 1.5 nominal steps", cost="rows", scope="segment",
          run_segment=timestamps),
    Check(id="timing.rate", detects="measured rate differs from the nominal rate, per stream",
          how="median timestamp step of the rows and of each camera against the declared fps",
          threshold=f"{RATE_TOLERANCE:.0%}", cost="rows", scope="segment", run_segment=rate),
]
