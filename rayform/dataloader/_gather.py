"""Batch columns: the rows a block needs from each segment, gathered into one Arrow column.

Numeric ``list<number>`` rows of uniform width are gathered with numpy and wrapped as a ``List``
column of the original type; other columns take the rows each segment needs (a zero-copy slice
when they are dense) and concatenate them, segment after segment, ascending within a segment.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.dataloader._segment_columns import SegmentColumn


def gather_arrow(column_type: pa.DataType, runs: list[tuple[str, int, int]],
                 cols: list[SegmentColumn | None], rows_all: npt.NDArray[np.int64],
                 ok: npt.NDArray[np.bool_], starts_all: npt.NDArray[np.int64] | None,
                 stops_all: npt.NDArray[np.int64] | None
                 ) -> tuple[pa.Array, npt.NDArray[np.int64], npt.NDArray[np.int64] | None,
                            npt.NDArray[np.int64] | None]:
    """Rows each segment needs, as Arrow slices (dense) or takes, concatenated.

    Args:
        column_type: the column's Arrow type (for an empty result).
        runs: ``(segment_id, start, stop)`` of each segment's samples (sorted order).
        cols: each run's column (``None`` where the segment lacks it).
        rows_all: ``int64[B, T]`` segment rows of every output.
        ok: ``bool[B]`` samples with data.
        starts_all: ``int64[B]`` first decode row (keyframe fields), or ``None``.
        stops_all: ``int64[B]`` end of the decode rows, or ``None``.

    Returns:
        ``(column, batch rows [B, T], batch decode starts, batch decode stops)``.
    """
    out_rows = np.zeros_like(rows_all)
    dec_start = None if starts_all is None else np.zeros_like(starts_all)
    dec_stop = None if stops_all is None else np.zeros_like(stops_all)
    parts: list[pa.Array] = []
    offset = 0
    for (_, a, b), col in zip(runs, cols, strict=True):
        run_ok = ok[a:b]
        if col is None or not run_ok.any():
            continue
        rows = rows_all[a:b]
        if starts_all is not None and stops_all is not None:
            need = covered_rows(starts_all[a:b][run_ok], stops_all[a:b][run_ok])
        else:
            need = np.unique(rows[run_ok])
        part, base, contiguous = take_rows(col.values, need)
        parts.append(part)
        if contiguous:
            out_rows[a:b] = rows - base + offset
        else:
            out_rows[a:b] = np.searchsorted(need, rows) + offset
        if starts_all is not None and stops_all is not None and dec_start is not None \
                and dec_stop is not None:
            if contiguous:
                dec_start[a:b] = starts_all[a:b] - base + offset
                dec_stop[a:b] = stops_all[a:b] - base + offset
            else:
                dec_start[a:b] = np.searchsorted(need, starts_all[a:b]) + offset
                dec_stop[a:b] = np.searchsorted(need, stops_all[a:b] - 1) + 1 + offset
        offset += len(part)
    column = parts[0] if len(parts) == 1 else (
        pa.concat_arrays(parts) if parts else pa.array([], type=column_type))
    return column, out_rows, dec_start, dec_stop


def dense_values(parts: list[npt.NDArray[Any]], keep: npt.NDArray[np.int64], n: int, width: int
                 ) -> npt.NDArray[Any]:
    """``[len(keep), width, D]``: the rows of the samples in ``keep`` from ``[rows, D]`` numpy
    parts (``n * width`` rows in all)."""
    values = parts[0] if len(parts) == 1 else np.concatenate(parts)
    values = values.reshape(n, width, -1)
    return np.ascontiguousarray(values if len(keep) == n else values[keep])


def dense_column(parts: list[npt.NDArray[Any]], list_type: pa.DataType,
                  keep: npt.NDArray[np.int64], n: int, width: int) -> pa.Array:
    """A ``List`` column of ``list_type`` from ``[rows, D]`` numpy parts (``n * width`` rows),
    keeping the rows of the samples in ``keep``."""
    values = dense_values(parts, keep, n, width)
    values = values.reshape(len(keep) * width, -1)
    count, width = values.shape
    offsets = np.arange(0, (count + 1) * width, width, dtype=np.int32)
    # Built from buffers: pyarrow's pa.array(ndarray) costs ~0.5 ms per call (pandas checks).
    child = pa.Array.from_buffers(list_type.value_type, count * width,
                                  [None, pa.py_buffer(values)])
    return pa.ListArray.from_buffers(list_type, count, [None, pa.py_buffer(offsets)],
                                     children=[child])


def take_rows(values: pa.Array, need: npt.NDArray[np.int64]) -> tuple[pa.Array, int, bool]:
    """Rows ``need`` (sorted, unique) of ``values``: a zero-copy slice when they are dense."""
    lo, hi = int(need[0]), int(need[-1]) + 1
    if hi - lo <= 2 * len(need):
        return values.slice(lo, hi - lo), lo, True
    return values.take(int64_array(need)), 0, False


def int64_array(values: npt.NDArray[np.int64]) -> pa.Array:
    """An Arrow ``int64`` array over ``values`` (zero-copy; ``pa.array`` would cost ~0.2 ms)."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def covered_rows(starts: npt.NDArray[np.int64], stops: npt.NDArray[np.int64]
                  ) -> npt.NDArray[np.int64]:
    """The sorted union of the row ranges ``[starts[i], stops[i])``."""
    lo, hi = int(starts.min()), int(stops.max())
    marks = np.zeros(hi - lo + 1, dtype=np.int64)
    np.add.at(marks, starts - lo, 1)
    np.add.at(marks, stops - lo, -1)
    return np.flatnonzero(np.cumsum(marks)[:-1] > 0).astype(np.int64) + lo
