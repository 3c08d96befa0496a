"""FieldExtent: what a field reads for each sample of a block, worked out on the index alone.

Building a manifest needs to know, before anything is decoded, whether a sample has data for a
field, which index values its decode reads (for video, back to the prior keyframe) and how stale
the served rows are (``Field.max_staleness``); the pipeline computes it from the rows it resolved
(:meth:`rayform.dataloader._pipeline.SamplePipeline.extents`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rayform.dataloader._segment_columns import SegmentColumn


@dataclass(frozen=True, slots=True)
class FieldExtent:
    """What a field reads for each sample of a block, on the index alone (input order, ``[B]``).

    Attributes:
        missing: no row at or before an output position (or, for video, no prior keyframe).
        lo: the first index value the decode reads: the earliest output position, or for video the
            prior keyframe's index value.
        hi: the last output position.
        lag: the largest gap between an output position and the index value of the row served
            there (0 for static columns and missing samples).
    """

    missing: npt.NDArray[np.bool_]
    lo: npt.NDArray[np.int64]
    hi: npt.NDArray[np.int64]
    lag: npt.NDArray[np.int64]


def field_extent(positions: npt.NDArray[np.int64], runs: list[tuple[str, int, int]],
                 cols: list[SegmentColumn | None], rows_all: npt.NDArray[np.int64],
                 keyframe_rows: npt.NDArray[np.int64] | None, ok: npt.NDArray[np.bool_],
                 order: npt.NDArray[np.int64]) -> FieldExtent:
    """A field's :class:`FieldExtent` from its resolved rows (sorted order in, input order out)."""
    lo = positions.min(axis=1)
    lag = np.zeros(len(positions), dtype=np.int64)
    for (_, a, b), col in zip(runs, cols, strict=True):
        if col is None or col.is_static or not len(col.index):
            continue
        rows = rows_all[a:b]
        served = col.index[np.maximum(rows, 0)]
        lag[a:b] = np.where(rows >= 0, positions[a:b] - served, 0).max(axis=1)
        if keyframe_rows is not None:
            starts = np.minimum(keyframe_rows[a:b], len(col.index) - 1)
            lo[a:b] = np.where(ok[a:b], col.index[starts], lo[a:b])
    out_lo = np.empty_like(lo)
    out_hi = np.empty_like(lo)
    out_lag = np.empty_like(lag)
    missing = np.empty(len(ok), dtype=np.bool_)
    out_lo[order], out_hi[order], out_lag[order], missing[order] = \
        lo, positions.max(axis=1), np.where(ok, lag, 0), ~ok
    return FieldExtent(missing=missing, lo=out_lo, hi=out_hi, lag=out_lag)
