"""Stored statistics against the rows: the figures a source keeps (LeRobot's per-episode
``episodes_stats.jsonl`` / v3.0 ``stats/…`` columns, and its ``meta/stats.json``, which training
normalises with), kept at registration as ``source_stats:<feature>:<stat>`` and
``source_dataset_stats:<feature>:<stat>`` properties, recomputed from the rows and compared.

A feature ``key`` is the column ``/<key>:Scalars:scalars`` (or, for the sequence timeline's own
name such as ``frame_index``, that timeline's values). ``min``, ``max`` and ``count`` must agree
exactly (up to float32 rounding), ``mean`` and ``std`` (population, as LeRobot computes it) within
``1e-4`` of the dimension's range: what float32 accumulation gives, and far below any real error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from rayform.curation._check import Check
from rayform.curation._context import Context
from rayform.curation._finding import Finding
from rayform.curation._series import SCALARS, SegmentSeries

EPISODE_PREFIX = "source_stats"
DATASET_PREFIX = "source_dataset_stats"
STATS = ("count", "min", "max", "mean", "std")
EXACT_TOL = 1e-6       # min / max / count: relative (float32 values kept as float64)
MOMENT_TOL = 1e-4      # mean / std: of the dimension's range


def stored(properties: Mapping[str, Any], prefix: str) -> dict[str, dict[str, list[float]]]:
    """``{feature: {stat: values}}`` of the properties ``<prefix>:<feature>:<stat>``."""
    out: dict[str, dict[str, list[float]]] = {}
    for name, value in properties.items():
        if not name.startswith(prefix + ":"):
            continue
        items = value if isinstance(value, list) else [value]  # one number: a scalar
        feature, _, stat = name[len(prefix) + 1:].rpartition(":")
        numbers = [float(v) for v in items
                   if isinstance(v, int | float) and not isinstance(v, bool)]
        if feature and stat in STATS and numbers and len(numbers) == len(items):
            out.setdefault(feature, {})[stat] = numbers
    return out


def _values(seg: SegmentSeries, feature: str) -> tuple[str, npt.NDArray[np.float64],
                                                        tuple[str, ...]] | None:
    column = f"/{feature}:{SCALARS}"
    series = seg.series.get(column)
    if series is not None:
        return column, series.values, series.names
    if seg.clock.timeline == feature and len(seg.clock.rows):
        return feature, seg.clock.rows.astype(np.float64)[:, None], ("0",)
    return None


def recomputed(values: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
    """``count``/``min``/``max``/``mean``/``std`` (ddof 0) per dimension, NaN ignored."""
    finite = ~np.isnan(values)
    with np.errstate(all="ignore"):
        return {"count": np.array([float(len(values))]),
                "min": np.where(finite.any(axis=0), np.nanmin(
                    np.where(finite, values, np.inf), axis=0), np.nan),
                "max": np.where(finite.any(axis=0), np.nanmax(
                    np.where(finite, values, -np.inf), axis=0), np.nan),
                "mean": np.nanmean(values, axis=0), "std": np.nanstd(values, axis=0)}


def _compare(check: str, severity: str, segment: str | None, column: str,
             names: tuple[str, ...], figures: Mapping[str, list[float]],
             fresh: Mapping[str, npt.NDArray[np.float64]], what: str) -> Iterable[Finding]:
    width = len(fresh["min"])
    span = np.nan_to_num(fresh["max"] - fresh["min"])
    for stat in STATS:
        if stat not in figures:
            continue
        have = np.asarray(figures[stat], dtype=np.float64)
        want = fresh[stat]
        if have.shape != want.shape:
            yield Finding(check=check, severity=severity, segment=segment, column=column,
                          value=float(len(want)), baseline=float(len(have)),
                          message=(f"{what} {stat!r} of {column!r} has {len(have)} value(s); "
                                   f"the column has {width} dimension(s)"))
            continue
        tol = EXACT_TOL * np.maximum(1.0, np.abs(have))
        if stat in ("mean", "std"):
            tol = tol + MOMENT_TOL * span
        both_nan = np.isnan(have) & np.isnan(want)
        bad = np.flatnonzero(~both_nan & ~(np.abs(have - want) <= tol))
        if not bad.size:
            continue
        worst = int(bad[np.argmax(np.nan_to_num(np.abs(have - want)[bad], nan=np.inf))])
        dims = tuple(int(d) for d in bad) if stat != "count" else ()
        yield Finding(
            check=check, severity=severity, segment=segment, column=column, dims=dims,
            dim_names=tuple(names[d] for d in dims) if len(names) == width else (),
            value=float(want[worst]), threshold=float(tol[worst]), baseline=float(have[worst]),
            message=(f"{what} {stat} of {column!r} disagrees with the rows in {bad.size} "
                     f"dimension(s): stored {have[worst]:.6g}, recomputed {want[worst]:.6g}"
                     + (f" (dimension {names[worst]!r})" if stat != "count"
                        and len(names) == width else "")))


def episode(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    out: list[Finding] = []
    for feature, figures in sorted(stored(seg.properties, EPISODE_PREFIX).items()):
        found = _values(seg, feature)
        if found is None:
            continue
        column, values, names = found
        out += _compare("bookkeeping.stats", "warning", seg.segment_id, column, names, figures,
                        recomputed(values), "the source's stored episode")
    return out


def dataset(ctx: Context) -> list[Finding]:
    """``meta/stats.json`` against every segment's rows pooled (when every declared episode is
    registered: the figures cover the whole dataset)."""
    carriers = [s for s in ctx.segments.values() if stored(s.properties, DATASET_PREFIX)]
    if not carriers:
        return []
    declared = [s.properties.get("dataset_total_episodes") for s in ctx.segments.values()]
    total = max((d for d in declared if isinstance(d, int) and not isinstance(d, bool)),
                default=len(ctx.segments))
    if total > len(ctx.segments):
        return [Finding(check="bookkeeping.dataset_stats", severity="info", value=float(len(ctx.segments)),
                        threshold=float(total),
                        message=(f"the source's dataset statistics cover {total} episodes; "
                                 f"{len(ctx.segments)} are here, so they are not compared"))]
    out: list[Finding] = []
    for feature, figures in sorted(stored(carriers[0].properties, DATASET_PREFIX).items()):
        parts = [found for seg in ctx.segments.values()
                 if (found := _values(seg, feature)) is not None]
        if not parts or len({p[1].shape[1] for p in parts}) != 1:
            continue
        column, _, names = parts[0]
        pooled = np.concatenate([p[1] for p in parts])
        out += _compare("bookkeeping.dataset_stats", "error", None, column, names, figures,
                        recomputed(pooled), "the source's dataset statistic (meta/stats.json)")
    return out


CHECKS = [
    Check(id="bookkeeping.stats", detects="stored episode statistics that disagree with the rows",
          how="the source's per-episode statistics (LeRobot episodes_stats.jsonl, v3.0 stats/ "
          "columns; kept at registration) against count, min, max, mean, std recomputed per "
          "column and dimension",
          threshold=f"min/max/count exact; mean/std within {MOMENT_TOL:g} x range", cost="rows",
          scope="segment", run_segment=episode),
    Check(id="bookkeeping.dataset_stats",
          detects="stored dataset statistics (what training normalises with) that disagree "
          "with the rows", how="LeRobot's meta/stats.json (kept at registration) against the "
          "figures recomputed over every segment, when every declared episode is registered",
          threshold=f"min/max/count exact; mean/std within {MOMENT_TOL:g} x range", cost="rows",
          scope="dataset", run_dataset=dataset),
]
