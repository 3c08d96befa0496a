"""Value checks: NaN/Inf row ranges, dead dimensions, calibration offsets, constant scale factors."""

from __future__ import annotations

import math

import numpy as np

from rayform.curation._check import Check
from rayform.curation._context import Context, nanmedian, quantiles, runs, spread
from rayform.curation._finding import Finding
from rayform.curation._series import SegmentSeries, Series

OFFSET_MARGIN = 0.25   # of the other segments' envelope width, beyond it on either side
DEAD_FRACTION = 0.01   # a segment's spread under this fraction of the dataset's is dead
SCALE_FACTORS = {180 / math.pi: "degrees vs radians", 1000.0: "mm vs m", 100.0: "cm vs m"}
SCALE_TOLERANCE = 0.25  # relative distance of the magnitude ratio to a known factor


def _quantiles(series: Series) -> np.ndarray:
    return quantiles(series.values, [5.0, 50.0, 95.0])


def _magnitude(series: Series) -> np.ndarray:
    values = series.values
    return np.asarray(nanmedian(np.abs(values)) + spread(values), dtype=np.float64)


def _spread(series: Series) -> np.ndarray:
    return spread(series.values)


def nonfinite(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    out = []
    for column, series in seg.series.items():
        bad = ~np.isfinite(series.values)
        if not bad.any():
            continue
        for a, b in runs(np.asarray(bad.any(axis=1), dtype=np.bool_)):
            dims = tuple(int(d) for d in np.flatnonzero(bad[a:b].any(axis=0)))
            out.append(Finding(
                check="values.nonfinite", severity="error", segment=seg.segment_id,
                column=column, dims=dims, dim_names=tuple(series.names[d] for d in dims),
                start_row=int(series.rows[a]), end_row=int(series.rows[b - 1]) + 1,
                value=float(b - a), threshold=0.0, exclude_range=True,
                message=f"{b - a} row(s) with NaN/Inf in {len(dims)} dimension(s)"))
    return out


def dead(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    out = []
    for column, series in seg.series.items():
        own = ctx.own(column, "spread", _spread, seg.segment_id)
        others = ctx.others(column, "spread", _spread, seg.segment_id, series.width)
        typical = nanmedian(others) if len(others) else np.full(series.width, np.nan)
        finite_mask = np.isfinite(series.values)
        lo = np.where(finite_mask, series.values, np.inf).min(axis=0)
        hi = np.where(finite_mask, series.values, -np.inf).max(axis=0)
        counts = finite_mask.sum(axis=0)
        for d in range(series.width):
            if not counts[d]:
                continue
            constant = bool(lo[d] == hi[d])
            if ctx.has_baseline(len(others)) and typical[d] > 0 \
                    and own[d] < DEAD_FRACTION * typical[d]:
                out.append(Finding(
                    check="values.dead", severity="warning", segment=seg.segment_id,
                    column=column, dims=(d,), dim_names=(series.names[d],),
                    value=float(own[d]), threshold=float(DEAD_FRACTION * typical[d]),
                    baseline=float(typical[d]),
                    message=(f"dimension {series.names[d]!r} is "
                             f"{'constant' if constant else 'near-constant'} "
                             f"(spread {own[d]:.3g}) where the other segments move it "
                             f"(median spread {typical[d]:.3g})")))
            elif constant and counts[d] > 1:
                out.append(Finding(
                    check="values.dead", severity="info", segment=seg.segment_id,
                    column=column, dims=(d,), dim_names=(series.names[d],),
                    value=0.0, baseline=float(typical[d]) if len(others) else None,
                    message=f"dimension {series.names[d]!r} is constant at {lo[d]:.6g}"))
    return out


def scale_factor_of(ratio: float) -> tuple[float, str] | None:
    for factor, meaning in SCALE_FACTORS.items():
        for k, what in ((factor, meaning), (1 / factor, meaning)):
            if abs(ratio / k - 1) < SCALE_TOLERANCE:
                return k, what
    return None


def scale(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    key = (seg.segment_id, "scale_findings")
    if key not in ctx.features:  # offset asks too, to leave scaled dimensions to this check
        ctx.features[key] = _scale(ctx, seg)
    return list(ctx.features[key])


def _scale(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    out = []
    for column, series in seg.series.items():
        others = ctx.others(column, "magnitude", _magnitude, seg.segment_id, series.width)
        if not ctx.has_baseline(len(others)):
            continue
        own = ctx.own(column, "magnitude", _magnitude, seg.segment_id)
        typical = nanmedian(others)
        for d in range(series.width):
            if not (typical[d] > 1e-9 and np.isfinite(own[d])):
                continue
            ratio = float(own[d] / typical[d])
            # the other segments must agree among themselves far better than the factor
            lo, hi = np.nanmin(others[:, d]), np.nanmax(others[:, d])
            found = scale_factor_of(ratio)
            if found is None or hi > 3 * lo:
                continue
            out.append(Finding(
                check="values.scale", severity="error", segment=seg.segment_id, column=column,
                dims=(d,), dim_names=(series.names[d],), value=ratio, threshold=found[0],
                baseline=float(typical[d]),
                message=(f"dimension {series.names[d]!r} is {ratio:.4g}x the other segments' "
                         f"magnitude: a constant scale factor ({found[1]}?)")))
    return out


def offset(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    out = []
    scaled = {(f.column, f.dims) for f in scale(ctx, seg)}
    for column, series in seg.series.items():
        others = ctx.others(column, "quantiles", lambda s: _quantiles(s).reshape(-1),
                            seg.segment_id, 3 * series.width)
        if not ctx.has_baseline(len(others)):
            continue
        q = others.reshape(len(others), 3, series.width)
        lo, hi = np.nanmin(q[:, 0], axis=0), np.nanmax(q[:, 2], axis=0)
        own = ctx.own(column, "quantiles", lambda s: _quantiles(s).reshape(-1),
                      seg.segment_id).reshape(3, series.width)
        for d in range(series.width):
            if (column, (d,)) in scaled:
                continue
            margin = OFFSET_MARGIN * (hi[d] - lo[d]) + 1e-6
            median = own[1, d]
            if lo[d] - margin <= median <= hi[d] + margin or not np.isfinite(median):
                continue
            centre = float(np.median(q[:, 1, d][np.isfinite(q[:, 1, d])]))
            bound = hi[d] + margin if median > hi[d] else lo[d] - margin
            out.append(Finding(
                check="values.offset", severity="error", segment=seg.segment_id, column=column,
                dims=(d,), dim_names=(series.names[d],), value=float(median),
                threshold=float(bound), baseline=centre,
                message=(f"dimension {series.names[d]!r} sits at {median:.4g}, outside the other "
                         f"segments' envelope [{lo[d]:.4g}, {hi[d]:.4g}]: offset "
                         f"{median - centre:+.4g} from their median (calibration?)")))
    return out


CHECKS = [
    Check(id="values.nonfinite", detects="NaN or Inf values", how="rows where any dimension "
          "is not finite, as row ranges with the dimensions", threshold="any", cost="rows",
          scope="segment", run_segment=nonfinite),
    Check(id="values.dead", detects="dead or near-constant dimensions",
          how="the segment's 5-95 % spread against the other segments' median spread; a "
          "dimension constant everywhere is info", threshold=f"< {DEAD_FRACTION:g} x",
          cost="rows", scope="segment", run_segment=dead, needs_baseline=True),
    Check(id="values.offset", detects="calibration offsets",
          how="the segment's median outside the other segments' 5-95 % envelope",
          threshold=f"beyond the envelope by {OFFSET_MARGIN:g} x its width", cost="rows",
          scope="segment", run_segment=offset, needs_baseline=True),
    Check(id="values.scale", detects="constant scale factors (deg/rad, mm/m, cm/m)",
          how="robust magnitude (median |x| + spread) against the other segments'",
          threshold=f"ratio within {SCALE_TOLERANCE:.0%} of 57.3, 100, 1000 or their inverse",
          cost="rows", scope="segment", run_segment=scale, needs_baseline=True),
]
