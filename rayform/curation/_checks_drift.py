"""Drift against a baseline (``--baseline``): columns gained or lost, unit changes, shifted
distributions, per column and dimension, between the dataset checked and another dataset or slice.

Both sides are reduced the same way: every segment's rows of a numeric column pooled, then per
dimension the 5/25/50/75/95th percentiles and a robust magnitude (median ``|x|`` + 5-95 % spread).
The baseline's spread is floored at a small fraction of the column's typical spread, so that a
dimension that barely moves in the baseline (a resting joint) is not flagged for moving a little.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from rayform.curation._check import Check
from rayform.curation._checks_values import scale_factor_of
from rayform.curation._context import Context
from rayform.curation._finding import Finding
from rayform.curation._profile import ColumnProfile, Profile, profile_of

SHIFT_LIMIT = 0.5       # mean |quantile difference| over the baseline's 5-95 % spread
SPREAD_RATIO = 3.0      # the spread grew or shrank by more than this factor
SPREAD_FLOOR = 0.25     # of the column's median spread: the least spread a dimension is given


def _label(profile: Profile) -> str:
    return f"{profile.name}@{profile.version} ({profile.segments} segments)"


def _pair(ctx: Context) -> tuple[Profile, Profile] | None:
    if ctx.baseline is None:
        return None
    key = ("", "drift_profile")
    if key not in ctx.features:
        ctx.features[key] = profile_of(ctx.view, ctx.segments.values())
    return ctx.features[key], ctx.baseline


def columns(ctx: Context) -> list[Finding]:
    pair = _pair(ctx)
    if pair is None:
        return []
    here, base = pair
    out = []
    for column in sorted(base.columns - here.columns):
        out.append(Finding(check="drift.columns", severity="warning", column=column,
                           message=f"column {column!r} of the baseline {_label(base)} is "
                                   "missing here"))
    for column in sorted(here.columns - base.columns):
        out.append(Finding(check="drift.columns", severity="info", column=column,
                           message=f"column {column!r} is new: the baseline {_label(base)} "
                                   "has none"))
    for column in sorted(set(here.numeric) & set(base.numeric)):
        a, b = len(here.numeric[column].names), len(base.numeric[column].names)
        if a != b:
            out.append(Finding(check="drift.columns", severity="error", column=column,
                               value=float(a), baseline=float(b),
                               message=f"column {column!r} has {a} dimensions; the baseline "
                                       f"{_label(base)} has {b}"))
    return out


def _common(here: Profile, base: Profile) -> Iterable[tuple[str, ColumnProfile, ColumnProfile]]:
    for column in sorted(set(here.numeric) & set(base.numeric)):
        a, b = here.numeric[column], base.numeric[column]
        if len(a.names) == len(b.names):
            yield column, a, b


def _scaled(here: Profile, base: Profile) -> list[Finding]:
    out = []
    for column, a, b in _common(here, base):
        for d in range(len(a.names)):
            if not (b.magnitude[d] > 1e-9 and np.isfinite(a.magnitude[d])):
                continue
            ratio = float(a.magnitude[d] / b.magnitude[d])
            found = scale_factor_of(ratio)
            if found is None:
                continue
            out.append(Finding(
                check="drift.scale", severity="error", column=column, dims=(d,),
                dim_names=(a.names[d],), value=ratio, threshold=found[0],
                baseline=float(b.magnitude[d]),
                message=(f"dimension {a.names[d]!r} is {ratio:.4g}x the baseline "
                         f"{_label(base)}'s magnitude: a unit change ({found[1]}?)")))
    return out


def scale(ctx: Context) -> list[Finding]:
    pair = _pair(ctx)
    return [] if pair is None else _scaled(*pair)


def shift(ctx: Context) -> list[Finding]:
    pair = _pair(ctx)
    if pair is None:
        return []
    here, base = pair
    scaled = {(f.column, f.dims) for f in _scaled(here, base)}
    out = []
    for column, a, b in _common(here, base):
        spread = b.spread
        live = spread[np.isfinite(spread) & (spread > 0)]
        floor = SPREAD_FLOOR * float(np.median(live)) if len(live) else 0.0
        scale_d = np.maximum(np.nan_to_num(spread), floor) + 1e-9
        with np.errstate(all="ignore"):
            distance = np.mean(np.abs(a.quantiles - b.quantiles), axis=0) / scale_d
            ratio = (np.nan_to_num(a.spread) + 1e-9) / scale_d
        for d in range(len(a.names)):
            if (column, (d,)) in scaled or not np.isfinite(distance[d]):
                continue
            median, centre = float(a.quantiles[2, d]), float(b.quantiles[2, d])
            if distance[d] > SHIFT_LIMIT:
                out.append(Finding(
                    check="drift.shift", severity="warning", column=column, dims=(d,),
                    dim_names=(a.names[d],), value=float(distance[d]), threshold=SHIFT_LIMIT,
                    baseline=centre,
                    message=(f"dimension {a.names[d]!r} shifted: median {median:.4g} against "
                             f"the baseline {_label(base)}'s {centre:.4g}; its quantiles lie "
                             f"{distance[d]:.2f} x the baseline's 5-95 % spread away")))
            elif not 1 / SPREAD_RATIO <= ratio[d] <= SPREAD_RATIO and spread[d] > floor:
                out.append(Finding(
                    check="drift.shift", severity="warning", column=column, dims=(d,),
                    dim_names=(a.names[d],), value=float(ratio[d]), threshold=SPREAD_RATIO,
                    baseline=float(spread[d]),
                    message=(f"dimension {a.names[d]!r}: its 5-95 % spread is "
                             f"{ratio[d]:.3g} x the baseline {_label(base)}'s "
                             f"({spread[d]:.4g})")))
    return out


CHECKS = [
    Check(id="drift.columns", detects="columns gained, lost or resized against the baseline",
          how="the component columns of both; the dimension count of numeric ones",
          threshold="any", cost="metadata", scope="dataset", run_dataset=columns,
          needs_reference=True),
    Check(id="drift.scale", detects="unit changes against the baseline (deg/rad, mm/m, cm/m)",
          how="pooled robust magnitude (median |x| + spread) per dimension against the "
          "baseline's", threshold="ratio within 25 % of 57.3, 100, 1000 or their inverse",
          cost="rows", scope="dataset", run_dataset=scale, needs_reference=True),
    Check(id="drift.shift", detects="distribution shift against the baseline",
          how="per dimension, the mean |difference| of the pooled 5/25/50/75/95th percentiles "
          "over the baseline's 5-95 % spread; or the spread changing by a factor",
          threshold=f"> {SHIFT_LIMIT:g} x spread, or spread x{SPREAD_RATIO:g} / "
          f"{SPREAD_RATIO:g}", cost="rows", scope="dataset", run_dataset=shift,
          needs_reference=True),
]
