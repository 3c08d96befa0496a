"""Keyframes of video-like fields: where each request's decode must start.

A decoder whose ``prior_keyframe_path(path)`` names a sibling ``List<Bool>`` column gets, for each
request, the rows from the latest keyframe at or before its earliest output index value to its
last output row (contiguous rows of the field in one segment). Keyframe flags may be logged
densely (True/False on every row) or sparsely (only True rows).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.dataloader._segment_columns import SegmentColumns
from rayform.decoders._arrow import flatten_rows


class KeyframeIndex:
    """The keyframe index values of each (segment, keyframe column), memoized per process."""

    def __init__(self, columns: SegmentColumns) -> None:
        self._columns = columns
        self._keyframes: dict[tuple[str, str], npt.NDArray[np.int64]] = {}

    def decode_ranges(self, segment_id: str, keyframe_path: str,
                      row_index: npt.NDArray[np.int64], positions: npt.NDArray[np.int64],
                      rows: npt.NDArray[np.int64]
                      ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                                 npt.NDArray[np.bool_]]:
        """Each request's decode rows ``[start, stop)`` in the segment's column, and validity.

        Args:
            segment_id: the segment.
            keyframe_path: the keyframe flag column.
            row_index: ``int64[N]`` index values of the field's rows in the segment.
            positions: ``int64[R, T]`` output index values of each request.
            rows: ``int64[R, T]`` latest row at or before each output position.

        Returns:
            ``(start, stop, ok)``: ``start`` is the keyframe's row, ``stop`` one past the last
            output row; ``ok`` is False where no keyframe precedes the earliest output.
        """
        keyframes = self.keyframe_values(segment_id, keyframe_path)
        if not len(keyframes):
            zeros = np.zeros(len(positions), dtype=np.int64)
            return zeros, zeros, np.zeros(len(positions), dtype=np.bool_)
        earliest = positions.min(axis=1)
        k = np.searchsorted(keyframes, earliest, side="right") - 1
        value = keyframes[np.maximum(k, 0)]
        start = np.searchsorted(row_index, value, side="left").astype(np.int64)
        inside = start < len(row_index)
        exact = np.zeros(len(start), dtype=np.bool_)
        exact[inside] = row_index[start[inside]] == value[inside]
        stop = rows.max(axis=1) + 1
        ok = (k >= 0) & exact & (stop > start) & np.all(rows >= start[:, None], axis=1)
        return start, stop, ok

    def keyframe_values(self, segment_id: str, keyframe_path: str) -> npt.NDArray[np.int64]:
        """Sorted index values of the rows flagged as keyframes."""
        key = (segment_id, keyframe_path)
        cached = self._keyframes.get(key)
        if cached is not None:
            return cached
        col = self._columns.get(segment_id, keyframe_path)
        if col is None or col.is_static:
            values = np.zeros(0, dtype=np.int64)
        else:
            values = col.index[first_flags(col.values)]
        self._keyframes[key] = values
        return values


def first_flags(values: pa.Array) -> npt.NDArray[np.bool_]:
    """The first element of each ``List<Bool>`` row (``False`` for empty or null rows)."""
    flat = flatten_rows(values)
    if flat is not None:
        data, offsets = flat
        nonempty = offsets[1:] > offsets[:-1]
        out = np.zeros(len(values), dtype=np.bool_)
        out[nonempty] = np.asarray(data, dtype=np.bool_)[offsets[:-1][nonempty]]
        return out
    return np.array([bool(row[0]) if row else False for row in values.to_pylist()],
                    dtype=np.bool_)
