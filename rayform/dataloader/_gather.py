"""Batch columns: the rows a block needs from each segment, gathered into one Arrow column.

Numeric ``list<number>`` rows of uniform width are gathered with numpy and wrapped as a ``List``
column of the original type; other columns take the rows each segment needs (a zero-copy slice
when they are dense) and concatenate them, segment after segment, ascending within a segment;
blob columns with one blob per row (encoded images) join the rows' bytes into one new column
instead (:func:`gather_blobs`: no Arrow ``take`` per segment), or only when a decoder asks for the
column (:func:`gather_blob_views`: decoders that read each blob where it lies never need it).
"""

from __future__ import annotations

from dataclasses import dataclass
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


def gather_blobs(column_type: pa.DataType, runs: list[tuple[str, int, int]],
                 cols: list[SegmentColumn | None], rows_all: npt.NDArray[np.int64],
                 ok: npt.NDArray[np.bool_], views_out: list[memoryview] | None = None
                 ) -> tuple[pa.Array, npt.NDArray[np.int64]] | None:
    """Like :func:`gather_arrow` for a column whose segments all have a
    :class:`~rayform.dataloader._segment_columns.BlobTable`: the rows each segment needs, their
    blobs joined into one ``column_type`` column (one blob per row). ``None`` when a segment's
    column has no blob table (the caller then uses :func:`gather_arrow`). ``views_out`` receives
    each row's blob as it lies in its segment (zero-copy; row ``i`` of the column is
    ``views_out[i]``), for decoders that take blobs as they are (``FieldBatch.blobs``).

    Returns:
        ``(column, batch rows [B, T])``.
    """
    got = gather_blob_views(column_type, runs, cols, rows_all, ok)
    if got is None:
        return None
    blobs, out_rows = got
    if views_out is not None:
        views_out[:] = blobs.views
    return blobs.column(), out_rows


@dataclass(frozen=True, slots=True)
class GatheredBlobs:
    """The blobs of a batch's rows, one per row, as they lie in their segments (zero-copy).

    Attributes:
        column_type: the field's ``list<binary>`` (or large) Arrow type.
        views: row ``i``'s blob.
        offsets: ``int64[rows + 1]`` where each blob starts in the joined bytes.
    """

    column_type: pa.DataType
    views: list[memoryview]
    offsets: npt.NDArray[np.int64]

    def column(self) -> pa.Array:
        """The rows as one ``column_type`` column (their blobs joined: a copy of every blob)."""
        column_type = self.column_type
        blob_type = column_type.value_type
        count = len(self.views)
        large_blobs = pa.types.is_large_binary(blob_type)
        child = pa.Array.from_buffers(
            blob_type, count,
            [None, pa.py_buffer(self.offsets if large_blobs else self.offsets.astype(np.int32)),
             pa.py_buffer(b"".join(self.views))])
        row_offsets = np.arange(count + 1, dtype=np.int64 if pa.types.is_large_list(column_type)
                                else np.int32)
        if pa.types.is_list(column_type):
            return pa.ListArray.from_buffers(column_type, count,
                                             [None, pa.py_buffer(row_offsets)], children=[child])
        return pa.LargeListArray.from_buffers(column_type, count,
                                              [None, pa.py_buffer(row_offsets)], children=[child])


def gather_blob_views(column_type: pa.DataType, runs: list[tuple[str, int, int]],
                      cols: list[SegmentColumn | None], rows_all: npt.NDArray[np.int64],
                      ok: npt.NDArray[np.bool_]
                      ) -> tuple[GatheredBlobs, npt.NDArray[np.int64]] | None:
    """:func:`gather_blobs` without joining the blobs: each row's blob where it lies, and the
    column made only when :meth:`GatheredBlobs.column` is called (a decoder that reads the
    blobs as they are never needs it). ``None`` as for :func:`gather_blobs`.

    Returns:
        ``(blobs, batch rows [B, T])``.
    """
    if not (pa.types.is_list(column_type) or pa.types.is_large_list(column_type)):
        return None
    blob_type = column_type.value_type
    if not (pa.types.is_binary(blob_type) or pa.types.is_large_binary(blob_type)):
        return None
    if any(col is not None and col.blobs is None for col in cols):
        return None
    # One sorted key per distinct (run, row) read: each blob is copied (and decoded) once.
    widths = [b - a for _, a, b in runs]
    run_of = np.repeat(np.arange(len(runs), dtype=np.int64), widths)
    present = np.array([col is not None for col in cols], dtype=np.bool_)
    read = ok[:, None] & (rows_all >= 0) & present[run_of][:, None]
    span = max(int(rows_all.max()), 0) + 1 if rows_all.size else 1
    keys = run_of[:, None] * span + rows_all
    unique, inverse = np.unique(keys[read], return_inverse=True)
    out_rows = np.zeros_like(rows_all)
    out_rows[read] = inverse.reshape(-1)
    unique_runs = unique // span
    unique_rows = unique - unique_runs * span
    bounds = np.searchsorted(unique_runs, np.arange(len(runs) + 1)).tolist()
    views: list[memoryview] = []
    lengths: list[npt.NDArray[np.int64]] = []
    for r, col in enumerate(cols):
        lo, hi = bounds[r], bounds[r + 1]
        if lo == hi or col is None or col.blobs is None:
            continue
        table = col.blobs
        need = unique_rows[lo:hi]
        starts, stops = table.starts[need], table.stops[need]
        data = table.data
        views += [data[a:b] for a, b in zip(starts.tolist(), stops.tolist(), strict=True)]
        lengths.append(stops - starts)
    blob_offsets = np.zeros(len(unique) + 1, dtype=np.int64)
    if lengths:
        np.cumsum(np.concatenate(lengths), out=blob_offsets[1:])
    if not pa.types.is_large_binary(blob_type) and int(blob_offsets[-1]) >= 2**31:
        return None
    return GatheredBlobs(column_type, views, blob_offsets), out_rows


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
