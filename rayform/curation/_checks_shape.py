"""Episode shape checks: truncated (ends mid-motion), merged (two in one), near-duplicates."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rayform.curation._check import Check
from rayform.curation._context import Context, quantiles
from rayform.curation._finding import Finding
from rayform.curation._series import SegmentSeries, Series

END_WINDOW_S = 0.5     # the end velocity: net motion over the last half second …
END_RATIO = 4.0        # … above 4x the others' usual (75th percentile) end motion …
END_FLOOR = 0.25       # … and at least a quarter of the dimension's spread
JUMP_RATIO = 2.0       # a one-row step over 2x the others' largest step …
START_MARGIN = 2.0     # … landing near another segment's start pose (2x their usual spacing)
MIN_PART_S = 1.0       # both parts at least a second long
DUPLICATE_TOL = 1e-3   # every value within 1e-3 of its dimension's spread


def _window(ctx: Context, seg: SegmentSeries) -> int | None:
    rate = seg.properties.get("fps", ctx.nominal_rate_hz)
    if not isinstance(rate, int | float) or isinstance(rate, bool) or rate <= 0:
        return None
    return max(2, round(END_WINDOW_S * float(rate)))


def _names(series: Series, dims: npt.NDArray[np.int64]) -> tuple[str, ...]:
    return tuple(series.names[d] for d in dims)


def truncated(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    window = _window(ctx, seg)
    if window is None:
        return []
    out = []
    for column, series in seg.series.items():
        n = len(series.rows)
        if n <= window:
            continue

        def end_motion(s: Series, w: int = window) -> npt.NDArray[np.float64]:
            if len(s.values) <= w:
                return np.full(s.width, np.nan)
            return np.asarray(np.abs(s.values[-1] - s.values[-1 - w]), dtype=np.float64)

        name = f"end_motion/{window}"
        others = ctx.others(column, name, end_motion, seg.segment_id, series.width)
        if not ctx.has_baseline(len(others)):
            continue
        scale = ctx.dataset_spread(column, series.width)
        live = scale > 0
        safe = np.where(live, scale, 1.0)
        usual = quantiles(others, [75.0])[0] / safe
        own = ctx.own(column, name, end_motion, seg.segment_id) / safe
        limit = np.maximum(END_RATIO * np.nan_to_num(usual), END_FLOOR)
        hot = np.flatnonzero(live & (np.nan_to_num(own) > limit))
        if not hot.size:
            continue
        worst = int(hot[np.argmax(own[hot] / limit[hot])])
        start, end = int(series.rows[n - 1 - window]), int(series.rows[-1]) + 1
        out.append(Finding(
            check="episode.truncated", severity="warning", segment=seg.segment_id,
            column=column, dims=tuple(int(d) for d in hot), dim_names=_names(series, hot),
            start_row=start, end_row=end, value=float(own[worst]),
            threshold=float(limit[worst]), baseline=float(usual[worst]),
            message=(f"ends mid-motion: dimension {series.names[worst]} moved "
                     f"{own[worst]:.2f} x its spread over the last {window} rows, where the "
                     f"other segments' ends move {usual[worst]:.2f} x (limit {limit[worst]:.2f}); "
                     f"{hot.size} dimension(s) over")))
    return out


def merged(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    window = _window(ctx, seg)
    if window is None:
        return []
    part = round(MIN_PART_S * 2 * window)  # the window is half a second
    out = []
    for column, series in seg.series.items():
        n = len(series.rows)
        if n < 2 * part:
            continue
        scale = ctx.dataset_spread(column, series.width)
        live = scale > 0
        if not live.any():
            continue
        safe = np.where(live, scale, 1.0)

        def largest_step(s: Series, k: npt.NDArray[np.float64] = safe,
                         m: npt.NDArray[np.bool_] = live) -> npt.NDArray[np.float64]:
            if len(s.values) < 2 or s.width != len(k):
                return np.full(1, np.nan)
            steps = np.sqrt(np.nansum((np.diff(s.values[:, m], axis=0) / k[m]) ** 2, axis=1))
            return np.array([float(np.max(steps))])

        def first_row(s: Series) -> npt.NDArray[np.float64]:
            return np.asarray(s.values[0], dtype=np.float64)

        key = f"largest_step/{series.width}"
        steps_others = [v[0] for sid, v in ctx.feature(column, key, largest_step).items()
                        if sid != seg.segment_id and np.isfinite(v[0])]
        starts = ctx.others(column, "first_row", first_row, seg.segment_id, series.width)
        if not ctx.has_baseline(min(len(steps_others), len(starts))):
            continue
        usual_step = float(np.median(steps_others))
        pool = starts[:, live] / scale[live]
        pool = pool[np.isfinite(pool).all(axis=1)]
        if not ctx.has_baseline(len(pool)):
            continue
        spacing = np.sqrt(((pool[:, None, :] - pool[None, :, :]) ** 2).sum(axis=2))
        np.fill_diagonal(spacing, np.inf)
        near = START_MARGIN * float(np.percentile(spacing.min(axis=1), 75))
        x = series.values[:, live] / scale[live]
        steps = np.sqrt(np.nansum(np.diff(x, axis=0) ** 2, axis=1))
        limit = JUMP_RATIO * usual_step
        for i in np.flatnonzero(steps > limit):
            t = int(i) + 1
            if t < part or n - t < part:
                continue
            # the nearest start pose to the half second before the jump and to the row after:
            # away from every one before, on one after (a spike's return to its pose is no seam)
            near_rows = x[t - window:t + 1]
            dist = np.sqrt(np.nansum((near_rows[:, None, :] - pool[None, :, :]) ** 2,
                                     axis=2)).min(axis=1)
            if dist[-1] > near or not bool(np.all(dist[:-1] > near)):
                continue
            jump = np.abs(series.values[t] - series.values[t - 1]) / safe
            dims = np.flatnonzero(live & (np.nan_to_num(jump) >= 0.25))
            row = int(series.rows[t])
            out.append(Finding(
                check="episode.merged", severity="warning", segment=seg.segment_id,
                column=column, dims=tuple(int(d) for d in dims), dim_names=_names(series, dims),
                start_row=row, end_row=row + 1, value=float(steps[i]), threshold=limit,
                baseline=usual_step,
                message=(f"two episodes in one? at row {row} the pose jumps {steps[i]:.2f} "
                         f"spreads in one row (the others' largest step: {usual_step:.2f}) back "
                         f"to a start pose ({dist[-1]:.2f} from the nearest other segment's "
                         f"first row, within {near:.2f})")))
            break
    return out


def _same(a: SegmentSeries, b: SegmentSeries, ctx: Context) -> float | None:
    """The largest difference (in spreads) of two segments' numeric series, None if unlike."""
    if a.num_rows != b.num_rows or set(a.series) != set(b.series) or not a.series:
        return None
    worst = 0.0
    for column, sa in a.series.items():
        sb = b.series[column]
        if sa.values.shape != sb.values.shape or not np.array_equal(sa.rows, sb.rows):
            return None
        scale = ctx.dataset_spread(column, sa.width)
        safe = np.where(scale > 0, scale, 1.0)
        if not np.array_equal(np.isnan(sa.values), np.isnan(sb.values)):
            return None
        diff = np.nan_to_num(np.abs(sa.values - sb.values), nan=0.0) / safe
        worst = max(worst, float(np.max(diff)) if diff.size else 0.0)
        if worst > DUPLICATE_TOL:
            return None
    return worst


def duplicates(ctx: Context) -> list[Finding]:
    by_length: dict[int, list[str]] = {}
    for sid in sorted(ctx.segments):
        by_length.setdefault(ctx.segments[sid].num_rows, []).append(sid)
    out = []
    for group in by_length.values():
        copies: set[str] = set()
        for j, later in enumerate(group):
            for earlier in group[:j]:
                if earlier in copies:
                    continue
                diff = _same(ctx.segments[earlier], ctx.segments[later], ctx)
                if diff is None:
                    continue
                copies.add(later)
                out.append(Finding(
                    check="episode.duplicate", severity="warning", segment=later,
                    value=diff, threshold=DUPLICATE_TOL,
                    message=(f"a near-duplicate of {earlier}: same {ctx.segments[later].num_rows}"
                             f" rows, every value within {diff:.2g} x its dimension's spread")))
                break
    return out


CHECKS = [
    Check(id="episode.truncated", detects="episodes that end mid-motion",
          how="per dimension, the net motion over the last 0.5 s against the other segments' "
          "75th percentile end motion", threshold=f"> max({END_RATIO:g} x usual, "
          f"{END_FLOOR:g} x spread)", cost="rows", scope="segment", run_segment=truncated,
          needs_baseline=True),
    Check(id="episode.merged", detects="two episodes recorded as one (with the row)",
          how="a one-row jump of the pose onto one of the other segments' start poses (nearer "
          "than twice their usual spacing, having been farther)",
          threshold=f"step > {JUMP_RATIO:g} x the others' largest, landing within "
          f"{START_MARGIN:g} x the start poses' spacing, parts >= {MIN_PART_S:g} s", cost="rows",
          scope="segment", run_segment=merged, needs_baseline=True),
    Check(id="episode.duplicate", detects="near-duplicate episodes",
          how="same length and every numeric value within a tolerance of an earlier segment",
          threshold=f"<= {DUPLICATE_TOL:g} x spread", cost="rows", scope="dataset",
          run_dataset=duplicates),
]
