"""Per-process memo of the segment columns a pipeline reads, with a numpy view of numeric rows.

``SegmentData.column`` already caches the Arrow rows of a column; this adds, per (segment,
column), what the pipeline needs on every batch without recomputing it: the sorted index, the
Arrow values, and for ``list<number>`` columns without nulls whose rows all have the same width, a
``[rows, width]`` numpy view, so that a batch of numeric rows is gathered with one fancy-index
instead of an Arrow ``take``; for blob columns holding one blob per row (encoded images), each
row's byte range (:class:`BlobTable`), so that a batch's blobs are gathered with one join.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.catalog import DatasetView
from rayform.decoders._thread_pool import ThreadPool


@dataclass(frozen=True, slots=True)
class SegmentColumn:
    """One column of one segment, ordered on the pipeline's timeline.

    Attributes:
        index: ``int64[N]`` ascending index values (one zero for a static column).
        values: the Arrow ``List`` rows.
        is_static: a static column (one row served at every index value).
        dense: ``[N, width]`` numpy rows for ``list<number>`` columns of uniform width without
            nulls; ``None`` otherwise.
        blobs: each row's blob for ``list<binary>`` columns holding exactly one non-null blob
            per row; ``None`` otherwise.
    """

    index: npt.NDArray[np.int64]
    values: pa.Array
    is_static: bool
    dense: npt.NDArray[Any] | None
    blobs: BlobTable | None = None

    def latest_at(self, query: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Row of the latest value at or before each query value; -1 where none."""
        if self.is_static:
            return np.zeros(len(query), dtype=np.int64)
        return np.searchsorted(self.index, query, side="right") - 1


@dataclass(frozen=True, slots=True)
class BlobTable:
    """Where each row's one blob lies: bytes ``data[starts[i]:stops[i]]`` of row ``i``.

    Attributes:
        starts: ``int64[N]`` first byte of each row's blob in ``data``.
        stops: ``int64[N]`` end of each row's blob.
        data: the blobs' bytes (zero-copy: the column's data buffer).
    """

    starts: npt.NDArray[np.int64]
    stops: npt.NDArray[np.int64]
    data: memoryview


def _blob_table(values: pa.Array) -> BlobTable | None:
    t = values.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or len(values) == 0 \
            or values.null_count:
        return None
    child = values.values
    if not (pa.types.is_binary(child.type) or pa.types.is_large_binary(child.type)) \
            or child.null_count:
        return None
    outer = np.asarray(values.offsets, dtype=np.int64)
    if not bool(np.all(np.diff(outer) == 1)):
        return None
    width = np.int32 if pa.types.is_binary(child.type) else np.int64
    buffers = child.buffers()
    if buffers[2] is None:
        return None
    inner = np.frombuffer(buffers[1], dtype=width)[child.offset:].astype(np.int64)
    rows = outer[:-1]
    # Arrow buffers export signed bytes ('b'); decoders expect unsigned ('B').
    return BlobTable(starts=inner[rows], stops=inner[rows + 1],
                     data=memoryview(buffers[2]).cast("B"))


def _dense_rows(values: pa.Array) -> npt.NDArray[Any] | None:
    t = values.type
    if not pa.types.is_list(t) or values.null_count or len(values) == 0:
        return None
    inner = t.value_type
    if not (pa.types.is_integer(inner) or pa.types.is_floating(inner)):
        return None
    child = values.values
    if child.null_count:
        return None
    offsets = np.asarray(values.offsets, dtype=np.int64)
    widths = np.diff(offsets)
    width = int(widths[0])
    if width == 0 or not bool(np.all(widths == width)):
        return None
    flat = child.to_numpy(zero_copy_only=False)
    start = int(offsets[0])
    dense: npt.NDArray[Any] = flat[start:start + width * len(values)].reshape(len(values), width)
    return dense


OPEN_THREADS = 8
"""Segments whose files a block opens at once (remote stores download them concurrently)."""
_open_pool = ThreadPool(OPEN_THREADS, name="rayform-open", helpers=True)


class SegmentColumns:
    """Memo of :class:`SegmentColumn` per (segment, column) for one view and timeline."""

    def __init__(self, view: DatasetView, timeline: str) -> None:
        self._view = view
        self._timeline = timeline
        self._memo: dict[tuple[str, str], SegmentColumn | None] = {}
        self._opened: set[str] = set()

    def open_segments(self, segment_ids: Iterable[str]) -> None:
        """Open the recording files of these segments, concurrently.

        On a remote catalog a segment's first use downloads its files into the cache: one
        segment after another, a block of a shuffled epoch would pay each download's latency in
        turn; together they overlap.
        """
        todo = [sid for sid in dict.fromkeys(segment_ids) if sid not in self._opened]
        if len(todo) > 1:
            _open_pool.map(lambda sid: self._view.open_segment(sid).files(), todo)
        self._opened.update(todo)

    def get(self, segment_id: str, column: str) -> SegmentColumn | None:
        """The column's rows in a segment, or ``None`` when the segment lacks the column."""
        key = (segment_id, column)
        try:
            return self._memo[key]
        except KeyError:
            pass
        seg = self._view.open_segment(segment_id)
        found: SegmentColumn | None = None
        if seg.has_column(column):
            rows = seg.column(column, self._timeline)
            found = SegmentColumn(index=rows.index, values=rows.values,
                                  is_static=rows.is_static, dense=_dense_rows(rows.values),
                                  blobs=_blob_table(rows.values))
        self._memo[key] = found
        return found
