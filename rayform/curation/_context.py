"""What every check sees: the loaded segments, nominal rates and robust per-dimension baselines.

A baseline is what the dataset's *other* segments give: per-segment robust features (median,
5th/95th percentiles, spread, longest run of repeated values …) reduced across the others with
medians and envelopes, so that one bad segment cannot move the baseline it is judged against.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from rayform.catalog import DatasetView
from rayform.curation._series import SegmentSeries, Series

Feature = Callable[[Series], npt.NDArray[np.float64]]
MIN_BASELINE_SEGMENTS = 4  # checks against the other segments need at least this many others


def runs(mask: npt.NDArray[np.bool_]) -> list[tuple[int, int]]:
    """Half-open ``(start, end)`` positions of the runs of True in ``mask``."""
    if not mask.size:
        return []
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def longest_repeat(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per column of ``[N, D]``: the longest run of identical consecutive values (in rows)."""
    if len(values) < 2:
        return np.ones(values.shape[1]) if values.ndim == 2 else np.ones(0)
    same = values[1:] == values[:-1]
    out = np.ones(values.shape[1])
    for d in np.flatnonzero(same.any(axis=0)):
        found = runs(same[:, d])
        out[d] = 1 + max(b - a for a, b in found)
    return out


def quantiles(values: npt.NDArray[np.float64], qs: list[float]) -> npt.NDArray[np.float64]:
    """``float64[len(qs), D]``: percentiles of each column of ``[N, D]``, NaN ignored (numpy's
    ``nanpercentile`` goes column by column in Python; this does so only for columns with NaN)."""
    width = values.shape[1] if values.ndim == 2 else 1
    out = np.full((len(qs), width), np.nan)
    if not len(values):
        return out
    finite = np.isfinite(values)
    clean = finite.all(axis=0)
    if clean.any():
        out[:, clean] = np.percentile(values[:, clean], qs, axis=0)
    for d in np.flatnonzero(~clean):
        column = values[finite[:, d], d]
        if len(column):
            out[:, d] = np.percentile(column, qs)
    return out


def nanmedian(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per column of ``[N, D]``: the median, NaN ignored (NaN where a column has none)."""
    if len(values) and bool(np.isfinite(values).all()):
        return np.asarray(np.median(values, axis=0), dtype=np.float64)
    return np.asarray(quantiles(values, [50.0])[0], dtype=np.float64)


def spread(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per column: the 5th-95th percentile spread (NaN ignored)."""
    if not len(values):
        return np.zeros(values.shape[1])
    lo, hi = quantiles(values, [5.0, 95.0])
    return np.asarray(hi - lo, dtype=np.float64)


@dataclass(slots=True, kw_only=True)
class Context:
    """The dataset under check."""

    view: DatasetView
    segments: dict[str, SegmentSeries]
    nominal_rate_hz: float | None
    video: str = "sample"
    baseline: Any = None  # a Profile of the --baseline dataset or slice (rayform.curation._profile)
    features: dict[tuple[str, str], Any] = \
        field(default_factory=dict)

    def feature(self, column: str, name: str, compute: Feature) -> dict[str, npt.NDArray[np.float64]]:
        """``{segment: float64[D]}`` of one per-segment feature of ``column`` (computed once)."""
        key = (column, name)
        cached = self.features.get(key)
        if cached is None:
            cached = {}
            for sid, seg in self.segments.items():
                series = seg.series.get(column)
                if series is not None and len(series.rows):
                    with np.errstate(all="ignore"):
                        cached[sid] = compute(series)
            self.features[key] = cached
        return cached

    def others(self, column: str, name: str, compute: Feature, segment: str,
               width: int) -> npt.NDArray[np.float64]:
        """``float64[S, D]``: the feature over the other segments of the same width."""
        values = [v for sid, v in self.feature(column, name, compute).items()
                  if sid != segment and v.shape == (width,)]
        return np.array(values, dtype=np.float64).reshape(len(values), width)

    def has_baseline(self, count: int) -> bool:
        return count >= MIN_BASELINE_SEGMENTS

    def own(self, column: str, name: str, compute: Feature, segment: str
            ) -> npt.NDArray[np.float64]:
        """The feature of ``segment`` itself (from the same cache as :meth:`others`)."""
        return self.feature(column, name, compute)[segment]

    def dataset_spread(self, column: str, width: int) -> npt.NDArray[np.float64]:
        """Per dimension: the median over segments of each segment's 5-95 % spread."""
        key = (column, f"dataset_spread/{width}")
        if key in self.features:
            return self.features[key]  # type: ignore[no-any-return]
        self.features[key] = self._dataset_spread(column, width)
        return self.features[key]  # type: ignore[no-any-return]

    def _dataset_spread(self, column: str, width: int) -> npt.NDArray[np.float64]:
        values = [v for v in self.feature(column, "spread", lambda s: spread(s.values)).values()
                  if v.shape == (width,)]
        if not values:
            return np.zeros(width)
        return nanmedian(np.array(values, dtype=np.float64))

    def series_of(self, column: str) -> Iterable[tuple[SegmentSeries, Series]]:
        for seg in self.segments.values():
            series = seg.series.get(column)
            if series is not None:
                yield seg, series
