"""Episode checks: length outliers, idle heads and tails, and a cross-episode outlier score."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rayform.curation._check import Check
from rayform.curation._context import MIN_BASELINE_SEGMENTS, Context, nanmedian, runs, spread
from rayform.curation._finding import Finding
from rayform.curation._series import SegmentSeries

LENGTH_RATIO = 2.0       # longer than 2x or shorter than 1/2 of the median length
IDLE_FRACTION = 0.01     # every dimension moves under 1 % of its spread per row …
IDLE_MIN_S = 1.0         # … for at least a second at the head or the tail
OUTLIER_Z = 8.0          # robust z-score of the per-segment features
OUTLIER_MIN_SEGMENTS = 6


def length(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    others = [s.num_rows for sid, s in ctx.segments.items() if sid != seg.segment_id]
    if len(others) < MIN_BASELINE_SEGMENTS or seg.num_rows == 0:
        return []
    median = float(np.median(others))
    ratio = seg.num_rows / median
    if 1 / LENGTH_RATIO <= ratio <= LENGTH_RATIO:
        return []
    return [Finding(check="episode.length", severity="warning", segment=seg.segment_id,
                    value=float(seg.num_rows), threshold=LENGTH_RATIO, baseline=median,
                    message=(f"{seg.num_rows} rows, {ratio:.2f}x the other segments' median "
                             f"length {median:.0f}"))]


def _motion(ctx: Context, seg: SegmentSeries) -> tuple[npt.NDArray[np.int64],
                                                       npt.NDArray[np.float64]] | None:
    """Per row transition: the largest step of any dimension, in units of its spread."""
    parts = []
    rows = None
    for column, series in seg.series.items():
        if len(series.rows) < 2 or (rows is not None and not np.array_equal(rows, series.rows)):
            continue
        rows = series.rows
        scale = ctx.dataset_spread(column, series.width)
        live = scale > 0
        if live.any():
            steps = np.abs(np.diff(series.values[:, live], axis=0)) / scale[live]
            parts.append(np.nanmax(steps, axis=1))
    if rows is None or not parts:
        return None
    return rows, np.max(np.array(parts), axis=0)


def idle(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    motion = _motion(ctx, seg)
    rate = seg.properties.get("fps", ctx.nominal_rate_hz)
    if motion is None or not isinstance(rate, int | float) or rate <= 0:
        return []
    rows, step = motion
    need = round(IDLE_MIN_S * float(rate))
    quiet = runs(step < IDLE_FRACTION)
    out = []
    for a, b in quiet:
        at_head, at_tail = a == 0, b == len(step)
        if not (at_head or at_tail) or b - a < need or (at_head and at_tail):
            continue
        # transition i joins rows i and i+1: a still head ends at row b (its last still row)
        start, end = (int(rows[0]), int(rows[b]) + 1) if at_head \
            else (int(rows[a]), int(rows[-1]) + 1)
        where = "head" if at_head else "tail"
        out.append(Finding(
            check="episode.idle", severity="info", segment=seg.segment_id, start_row=start,
            end_row=end, value=float(end - start), threshold=float(need), exclude_range=True,
            message=(f"idle {where}: rows {start}..{end - 1} ({(end - start) / float(rate):.2f} s) "
                     f"with every dimension moving under {IDLE_FRACTION:.0%} of its spread "
                     "per row")))
    return out


def _features(ctx: Context, seg: SegmentSeries) -> dict[str, float]:
    out: dict[str, float] = {"length": float(seg.num_rows)}
    for column, series in seg.series.items():
        if len(series.rows) < 4:
            continue
        scale = ctx.dataset_spread(column, series.width)
        med = nanmedian(series.values)
        own = spread(series.values)
        jerk = nanmedian(np.abs(np.diff(series.values, n=3, axis=0)))
        for d in range(series.width):
            if not scale[d] > 0:
                continue
            out[f"{column}[{d}] median"] = float(med[d] / scale[d])
            out[f"{column}[{d}] spread"] = float(own[d] / scale[d])
            out[f"{column}[{d}] jerk"] = float(jerk[d] / scale[d])
    return out


def outliers(ctx: Context) -> list[Finding]:
    if len(ctx.segments) < OUTLIER_MIN_SEGMENTS:
        return []
    table = {sid: _features(ctx, seg) for sid, seg in ctx.segments.items()}
    names = sorted({k for f in table.values() for k in f})
    matrix = np.array([[table[s].get(n, np.nan) for n in names] for s in table], dtype=np.float64)
    with np.errstate(all="ignore"):
        median = nanmedian(matrix)
        mad = 1.4826 * nanmedian(np.abs(matrix - median))
        floor = np.where([n == "length" for n in names], 0.1 * np.abs(median), 0.1)
        z = np.abs(matrix - median) / np.maximum(mad, floor)
    out = []
    for i, sid in enumerate(table):
        row = np.nan_to_num(z[i], nan=0.0)
        order = np.argsort(row)[::-1][:3]
        score = float(np.mean(row[order]))
        if score <= OUTLIER_Z:
            continue
        worst = ", ".join(f"{names[j]} (z={row[j]:.1f})" for j in order)
        out.append(Finding(check="outlier.score", severity="warning", segment=sid, value=score,
                           threshold=OUTLIER_Z,
                           message=f"cross-episode outlier score {score:.1f}: {worst}"))
    return out


CHECKS = [
    Check(id="episode.length", detects="episodes much shorter or longer than the others",
          how="rows against the other segments' median", threshold=f"outside 1/{LENGTH_RATIO:g} "
          f"x .. {LENGTH_RATIO:g} x", cost="metadata", scope="segment", run_segment=length,
          needs_baseline=True),
    Check(id="episode.idle", detects="idle heads and tails (as row ranges to drop)",
          how="every dimension's step under a fraction of its dataset spread",
          threshold=f"< {IDLE_FRACTION:.0%} of spread per row for >= {IDLE_MIN_S:g} s",
          cost="rows", scope="segment", run_segment=idle),
    Check(id="outlier.score", detects="episodes unlike the others",
          how="mean of the 3 largest robust z-scores (median/MAD) of per-segment features: "
          "length, and per dimension median, spread and jerk", threshold=f"> {OUTLIER_Z:g}",
          cost="rows", scope="dataset", run_dataset=outliers, needs_baseline=True),
]
