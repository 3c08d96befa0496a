"""Each entity's index in a segment layer: its components, rows and range on each timeline.

A recording's entities lie in consecutive row spans of one table, so the ranges of all of them on
a timeline are found in one pass of numpy reductions over the spans (``reduceat``), not one
slice, ``min`` and ``max`` per entity: a recording of many small entities (an RLDS step's
features, a Zarr episode's arrays) spent more on those calls than on the rest of its indexing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.catalog._metadata import EntityIndex, IndexRange
from rayform.recording._file import RecordingHeader

_LOWEST: Final = np.iinfo(np.int64).min
_HIGHEST: Final = np.iinfo(np.int64).max


def index_entities(header: RecordingHeader, table: pa.Table) -> dict[str, EntityIndex]:
    """The index of every entity of a recording (``table``: its columns, the timelines at least)."""
    out: dict[str, EntityIndex] = {}
    spans = [(rows.start, rows.stop) for rows in header.entities.values()]
    bounds = {timeline: timeline_bounds(*int64_values(table.column(timeline)), spans)
              for timeline in header.timelines}
    for k, (entity, rows) in enumerate(header.entities.items()):
        ranges: dict[str, IndexRange] = {}
        for timeline, kind in header.timelines.items():
            found = bounds[timeline][k]
            if found is not None:
                ranges[timeline] = IndexRange(kind=kind, start=found[0], end=found[1])
        out[entity] = EntityIndex(components=list(rows.components), ranges=ranges,
                                  num_rows=rows.stop - rows.start)
    for entity, rows in header.static_entities.items():
        static = EntityIndex(components=list(rows.components), ranges={},
                             num_rows=rows.stop - rows.start)
        out[entity] = merge_entities([out, {entity: static}])[entity] if entity in out else static
    return out


def timeline_bounds(values: npt.NDArray[np.int64], valid: npt.NDArray[np.bool_] | None,
                    spans: Sequence[tuple[int, int]]) -> list[tuple[int, int] | None]:
    """The least and greatest valid value of ``values[start:stop]`` for each span (None: none
    valid), as slicing each would find them."""
    out: list[tuple[int, int] | None] = [None] * len(spans)
    n = len(values)
    inside = [k for k, (start, stop) in enumerate(spans) if 0 <= start < stop <= n]
    for k, (start, stop) in enumerate(spans):
        if not 0 <= start < stop <= n:  # empty, or not laid out as the writer lays them out
            out[k] = _sliced_bounds(values, valid, start, stop)
    if not inside:
        return out
    # reduceat over [start, stop, start, stop, ...] reduces each span at the even places; a
    # sentinel after the values lets the last stop be an index.
    at = np.array([spans[k] for k in inside], dtype=np.intp).reshape(-1)
    if valid is None:
        low = high = np.append(values, 0)
        counts = None
    else:
        low = np.append(np.where(valid, values, _HIGHEST), 0)
        high = np.append(np.where(valid, values, _LOWEST), 0)
        counts = np.add.reduceat(np.append(valid, False).astype(np.int64), at)[::2]
    least = np.minimum.reduceat(low, at)[::2].tolist()
    greatest = np.maximum.reduceat(high, at)[::2].tolist()
    for i, k in enumerate(inside):
        if counts is None or counts[i]:
            out[k] = (least[i], greatest[i])
    return out


def _sliced_bounds(values: npt.NDArray[np.int64], valid: npt.NDArray[np.bool_] | None,
                   start: int, stop: int) -> tuple[int, int] | None:
    part = values[start:stop]
    if valid is not None:
        part = part[valid[start:stop]]
    return (int(part.min()), int(part.max())) if len(part) else None


def int64_values(column: pa.ChunkedArray
                 ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_] | None]:
    """A timeline column (int64, timestamp[ns] or duration[ns]) as int64 numpy values (a null
    as 0) and where they are valid (None: all of them)."""
    array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if not pa.types.is_int64(array.type):
        array = array.view(pa.int64()) if array.type.bit_width == 64 else array.cast(pa.int64())
    if array.null_count == 0:
        return array.to_numpy(zero_copy_only=False), None
    valid: npt.NDArray[np.bool_] = array.is_valid().to_numpy(zero_copy_only=False)
    return array.fill_null(0).to_numpy(zero_copy_only=False), valid


def merge_entities(records: list[dict[str, EntityIndex]]) -> dict[str, EntityIndex]:
    """Union of entity indexes: components united, ranges widened, rows added."""
    merged: dict[str, EntityIndex] = {}
    for entities in records:
        for entity, idx in entities.items():
            old = merged.get(entity)
            if old is None:
                merged[entity] = idx
                continue
            ranges = dict(old.ranges)
            for tl, r in idx.ranges.items():
                prev = ranges.get(tl)
                ranges[tl] = r if prev is None else IndexRange(
                    kind=r.kind, start=min(prev.start, r.start), end=max(prev.end, r.end))
            merged[entity] = EntityIndex(
                components=sorted(set(old.components) | set(idx.components)),
                ranges=ranges, num_rows=old.num_rows + idx.num_rows)
    return merged
