"""Signals decimated for plotting: the min and max of every dimension in each pixel column.

A plot ``width`` pixels wide cannot show more than two values per column, so a million-sample
signal becomes ``2 × width`` points per dimension while every spike stays visible (the envelope
keeps each column's extremes, unlike sampling every n-th value). Rows are read in chunks, so the
memory used is the chunk plus the ``width × D`` result, whatever the length of the signal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

CHUNK_ROWS = 1 << 18


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    """Per pixel column that holds samples: its time and each dimension's min and max.

    Attributes:
        t_s: ``float64[C]`` column centres in seconds from the episode start.
        low: ``float64[C, D]`` minimum per column and dimension (NaN where all were NaN).
        high: ``float64[C, D]`` maximum.
    """

    t_s: npt.NDArray[np.float64]
    low: npt.NDArray[np.float64]
    high: npt.NDArray[np.float64]


def decimate(t_s: npt.NDArray[np.float64], values: npt.NDArray[np.float64], *, width: int,
             span_s: tuple[float, float]) -> Envelope:
    """The min/max envelope of ``values`` (``[N, D]`` rows at ascending times ``t_s``) over
    ``width`` columns spanning ``span_s``; signals of at most ``2 × width`` rows are returned as
    they are (low = high = value)."""
    if width < 1:
        raise ValueError(f"width must be 1 or more pixels, got {width!r}")
    n, dims = values.shape
    if n <= 2 * width:
        data = values.astype(np.float64, copy=False)
        return Envelope(t_s=t_s.astype(np.float64), low=data, high=data)
    start, end = span_s
    scale = width / max(end - start, 1e-12)
    low = np.full((width, dims), np.inf)
    high = np.full((width, dims), -np.inf)
    seen = np.zeros(width, dtype=bool)
    for first in range(0, n, CHUNK_ROWS):
        chunk = values[first:first + CHUNK_ROWS].astype(np.float64)
        column = np.clip(((t_s[first:first + CHUNK_ROWS] - start) * scale).astype(np.int64),
                         0, width - 1)
        # rows are time-ordered, so each column's rows are contiguous: reduce per run
        starts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
        cols = column[starts]
        np.fmin.at(low, cols, np.fmin.reduceat(chunk, starts, axis=0))  # NaN never wins
        np.fmax.at(high, cols, np.fmax.reduceat(chunk, starts, axis=0))
        seen[cols] = True
    keep = np.flatnonzero(seen)
    low, high = low[keep], high[keep]
    low[~np.isfinite(low)] = np.nan
    high[~np.isfinite(high)] = np.nan
    centres = (start + (keep + 0.5) / scale).astype(np.float64)
    return Envelope(t_s=centres, low=low, high=high)


def svg_paths(envelope: Envelope, *, span_s: tuple[float, float], width: int, height: int,
              y_range: tuple[float, float]) -> list[str]:
    """One SVG path (``d`` attribute) per dimension: through each column's min and max."""
    start, end = span_s
    x = (envelope.t_s - start) * (width / max(end - start, 1e-12))
    lo, hi = y_range
    scale = (height - 4) / max(hi - lo, 1e-12)
    paths = []
    for dim in range(envelope.low.shape[1]):
        y_low = height - 2 - (envelope.low[:, dim] - lo) * scale
        y_high = height - 2 - (envelope.high[:, dim] - lo) * scale
        parts = []
        pen_up = True
        for xi, a, b in zip(x.tolist(), y_low.tolist(), y_high.tolist(), strict=True):
            if a != a:  # NaN: lift the pen
                pen_up = True
                continue
            parts.append(f"{'M' if pen_up else 'L'}{xi:.1f} {a:.1f}")
            if b != a:
                parts.append(f"L{xi:.1f} {b:.1f}")
            pen_up = False
        paths.append("".join(parts))
    return paths
