"""Per-process table of every sample's rows for one field: a batch's rows in one fancy-index.

The sample space is fixed when a pipeline is built, so the row each output of a sample reads
(the latest row at or before its position, ``-1`` where none) never changes. Resolving a shuffled
batch segment by segment costs one ``searchsorted`` per field and segment run (a batch of 32 spans
every segment of a small dataset), and in the main process those numpy calls wait for the GIL
while the decode threads run. :class:`RowTable` instead holds ``int32 [total_samples, T]`` rows
for one field, filled lazily a segment (sample-index position) at a time the first time a batch
touches it, with exactly the arithmetic the uncached path uses (:func:`output_positions`); a
batch's rows are then ``table[indices]``.

Memory: at most :data:`ROW_TABLE_MAX_BYTES` per field and process (``4 * T`` bytes per sample,
allocated untouched, so only the filled segments' pages become resident); a field whose table
would be larger, or a column with ``2**31`` rows or more, is resolved per segment run as before.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from rayform.dataloader._sample_index import SampleIndex
from rayform.dataloader._segment_columns import SegmentColumn

ROW_TABLE_MAX_BYTES = 64 << 20
"""The most memory one field's row table takes in one process (64 MiB: a 16-step window over a
million samples)."""
_MAX_ROW = 2**31 - 1


def output_positions(values: npt.NDArray[np.int64], offsets: npt.NDArray[np.int64],
                     range_lo: npt.NDArray[np.int64] | None, range_hi: npt.NDArray[np.int64] | None,
                     tolerance: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_] | None]:
    """Every output position of samples at index ``values`` (``[B, T]``) and, when the window
    is clamped to the segments (``range_lo``/``range_hi`` given: ``edge="pad"``), which outputs
    were moved (the padding mask, sorted order); positions include the tolerance shift."""
    positions = values[:, None] + offsets[None, :]
    moved = None
    if range_lo is not None and range_hi is not None:
        clamped = np.clip(positions, range_lo[:, None] - tolerance, range_hi[:, None] + tolerance)
        moved = clamped != positions
        positions = clamped
    if tolerance:
        positions = positions + tolerance  # rows just after an instant count as at it
    return positions, moved


class RowTable:
    """Every sample's rows of one (non-keyframe) field, filled lazily per segment position.

    Args:
        sample_index: the pipeline's sample space.
        offsets: the field's native window offsets (``[T]``).
        pad: windows are clamped to their segment (``edge="pad"``).
    """

    __slots__ = ("_bounds", "_filled", "_offsets", "_pad", "_rows", "_sample_index")

    def __init__(self, sample_index: SampleIndex, offsets: npt.NDArray[np.int64], *,
                 pad: bool) -> None:
        self._sample_index = sample_index
        self._offsets = offsets
        self._pad = pad
        self._bounds = sample_index.segment_offsets.tolist()  # position p: [p, p + 1)
        self._rows = np.empty((sample_index.total_samples, len(offsets)), dtype=np.int32)
        self._filled = np.zeros(sample_index.num_segments, dtype=np.bool_)

    @staticmethod
    def fits(sample_index: SampleIndex, width: int) -> bool:
        """Whether a table for ``width`` outputs per sample stays within the memory bound."""
        return 4 * width * sample_index.total_samples <= ROW_TABLE_MAX_BYTES

    def rows(self, indices: npt.NDArray[np.int64], segment_positions: npt.NDArray[np.int64],
             column: Callable[[int], SegmentColumn | None]) -> npt.NDArray[np.int64] | None:
        """``int64 [B, T]`` rows of the samples at ``indices`` (global); ``segment_positions``
        are the distinct positions they lie in and ``column(position)`` gives a position's
        column (``None`` where the segment lacks it). ``None`` when a column is too long for
        the table (the caller resolves per run)."""
        todo = segment_positions[~self._filled[segment_positions]]
        for position in todo.tolist():
            if not self._fill(position, column(position)):
                return None
        return self._rows[indices].astype(np.int64)

    def _fill(self, position: int, col: SegmentColumn | None) -> bool:
        index = self._sample_index
        lo, hi = self._bounds[position], self._bounds[position + 1]
        if col is not None and len(col.index) > _MAX_ROW:
            return False
        if col is None:
            self._rows[lo:hi] = -1
        elif col.is_static:
            self._rows[lo:hi] = 0
        else:
            seg, values = index.locate(np.arange(lo, hi, dtype=np.int64))
            bounds = index.segment_bounds(seg) if self._pad else (None, None)
            positions, _ = output_positions(values, self._offsets, bounds[0], bounds[1],
                                            index.tolerance_ns)
            self._rows[lo:hi] = col.latest_at(positions.reshape(-1)).reshape(hi - lo, -1)
        self._filled[position] = True
        return True
