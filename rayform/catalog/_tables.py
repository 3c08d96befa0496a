"""Arrow tables the query plane serves: segment table, index ranges, aligned reads, entity data.

Everything here is computed from metadata (segment table, index ranges) or from memory-mapped
columns with ``numpy.searchsorted`` (aligned reads): no DataFusion window functions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from rayform.catalog._metadata import SegmentRecord
from rayform.catalog._schema import INDEX_TYPES, ContentFilter
from rayform.catalog._segment_data import SegmentData
from rayform.recording._columns import (
    LAST_UPDATED_AT,
    LAYER_NAMES,
    NUM_ROWS,
    PROPERTY_PREFIX,
    RANGE_END_SUFFIX,
    RANGE_START_SUFFIX,
    SEGMENT_ID,
    SEGMENT_VERSION,
    SIZE_BYTES,
    STORAGE_URLS,
    TimelineKind,
    entity_of,
)
from rayform.recording._file import fits_arrow


def _property_type(values: list[Any]) -> pa.DataType:
    present = [v for v in values if v is not None]
    if not present:
        return pa.string()
    if all(isinstance(v, bool) for v in present):
        return pa.bool_()
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        # A crafted catalog's int beyond int64 makes the column text rather than every read fail.
        return pa.int64() if all(fits_arrow(v) for v in present) else pa.string()
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return pa.float64()
    return pa.string()


def _property_column(values: list[Any]) -> pa.Array:
    t = _property_type(values)
    if t == pa.string():
        values = [None if v is None else str(v) for v in values]
    return pa.array(values, type=t)


def entity_ranges(record: SegmentRecord, contents: ContentFilter | None
                  ) -> dict[str, tuple[int, int]]:
    """A segment's (start, end) on each timeline over the entities the filter keeps."""
    out: dict[str, tuple[int, int]] = {}
    for entity, idx in record.entities.items():
        if contents is not None and not contents.matches(entity):
            continue
        for tl, r in idx.ranges.items():
            prev = out.get(tl)
            out[tl] = (r.start, r.end) if prev is None else (min(prev[0], r.start), max(prev[1], r.end))
    return out


def index_ranges_table(records: Sequence[SegmentRecord], timelines: Mapping[str, TimelineKind],
                       contents: ContentFilter | None) -> pa.Table:
    """``rerun_segment_id, <tl>:start, <tl>:end, …`` — one row per segment, from metadata."""
    ranges = [entity_ranges(r, contents) for r in records]
    cols: dict[str, pa.Array] = {SEGMENT_ID: pa.array([r.segment_id for r in records], pa.string())}
    for tl, kind in timelines.items():
        t = INDEX_TYPES[kind]
        starts = [rg[tl][0] if tl in rg else None for rg in ranges]
        ends = [rg[tl][1] if tl in rg else None for rg in ranges]
        cols[tl + RANGE_START_SUFFIX] = pa.array(starts, pa.int64()).cast(t)
        cols[tl + RANGE_END_SUFFIX] = pa.array(ends, pa.int64()).cast(t)
    return pa.table(cols)


def segment_table(records: Sequence[SegmentRecord], timelines: Mapping[str, TimelineKind],
                  contents: ContentFilter | None, object_url: Any) -> pa.Table:
    """The segment table: ids, layers, storage, size, version, properties, index ranges."""
    cols: dict[str, pa.Array] = {
        SEGMENT_ID: pa.array([r.segment_id for r in records], pa.string()),
        LAYER_NAMES: pa.array([list(r.layers) for r in records], pa.list_(pa.string())),
        STORAGE_URLS: pa.array([[object_url(layer.object) for layer in r.layers.values()]
                                for r in records], pa.list_(pa.string())),
        LAST_UPDATED_AT: pa.array([r.last_updated_at_ns for r in records], pa.int64()).cast(
            pa.timestamp("ns")),
        NUM_ROWS: pa.array([r.num_rows for r in records], pa.uint64()),
        SIZE_BYTES: pa.array([r.size_bytes for r in records], pa.uint64()),
        SEGMENT_VERSION: pa.array([r.version for r in records], pa.string()),
    }
    names = sorted({k for r in records for k in r.properties})
    for name in names:
        cols[PROPERTY_PREFIX + name] = _property_column([r.properties.get(name) for r in records])
    ranges = index_ranges_table(records, timelines, contents)
    for name in ranges.column_names[1:]:
        cols[name] = ranges.column(name).combine_chunks()
    return pa.table(cols)


def index_ranges_from_index(rows: pa.Table | None, timelines: Mapping[str, TimelineKind],
                            contents: ContentFilter | None) -> pa.Table:
    """Like :func:`index_ranges_table`, computed columnar from segment index rows."""
    if rows is None or rows.num_rows == 0:
        return index_ranges_table([], timelines, contents)
    n = rows.num_rows
    cols: dict[str, pa.Array] = {SEGMENT_ID: rows.column("segment_id").combine_chunks()}
    ranges = rows.column("ranges").combine_chunks()
    parent = np.asarray(pc.list_parent_indices(ranges), dtype=np.int64)
    flat = ranges.flatten()
    entity = flat.field("entity")
    timeline = flat.field("timeline")
    start = np.asarray(flat.field("start"), dtype=np.int64)
    end = np.asarray(flat.field("end"), dtype=np.int64)
    keep = np.ones(len(flat), dtype=bool)
    if contents is not None and len(flat):
        kept = [e for e in pc.unique(entity).to_pylist() if contents.matches(e)]
        keep = np.asarray(pc.is_in(entity, value_set=pa.array(kept, pa.string())), dtype=bool)
    for tl, kind in timelines.items():
        sel = keep & np.asarray(pc.equal(timeline, tl), dtype=bool)
        lo = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        hi = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
        np.minimum.at(lo, parent[sel], start[sel])
        np.maximum.at(hi, parent[sel], end[sel])
        present = np.zeros(n, dtype=bool)
        present[parent[sel]] = True
        t = INDEX_TYPES[kind]
        cols[tl + RANGE_START_SUFFIX] = pa.array(lo, pa.int64(), mask=~present).cast(t)
        cols[tl + RANGE_END_SUFFIX] = pa.array(hi, pa.int64(), mask=~present).cast(t)
    return pa.table(cols)


def segment_table_from_index(rows: pa.Table | None, timelines: Mapping[str, TimelineKind],
                             contents: ContentFilter | None, object_url: Any) -> pa.Table:
    """Like :func:`segment_table`, computed columnar from segment index rows."""
    if rows is None or rows.num_rows == 0:
        return segment_table([], timelines, contents, object_url)
    cols: dict[str, pa.Array] = {
        SEGMENT_ID: rows.column("segment_id").combine_chunks(),
        LAYER_NAMES: rows.column("layer_names").combine_chunks(),
        STORAGE_URLS: pa.array([[object_url(d) for d in objects]
                                for objects in rows.column("objects").to_pylist()],
                               pa.list_(pa.string())),
        LAST_UPDATED_AT: rows.column("last_updated_at_ns").combine_chunks().cast(
            pa.timestamp("ns")),
        NUM_ROWS: rows.column("num_rows").combine_chunks().cast(pa.uint64()),
        SIZE_BYTES: rows.column("size_bytes").combine_chunks().cast(pa.uint64()),
        SEGMENT_VERSION: rows.column("version").combine_chunks(),
    }
    properties = [json.loads(p) for p in rows.column("properties").to_pylist()]
    for name in sorted({k for p in properties for k in p}):
        cols[PROPERTY_PREFIX + name] = _property_column([p.get(name) for p in properties])
    ranges = index_ranges_from_index(rows, timelines, contents)
    for name in ranges.column_names[1:]:
        cols[name] = ranges.column(name).combine_chunks()
    return pa.table(cols)


def _take_with_nulls(values: pa.Array, positions: npt.NDArray[np.int64]) -> pa.Array:
    """Rows ``positions`` of ``values``; null where a position is negative."""
    mask = positions < 0
    if len(values) == 0:
        return pa.nulls(len(positions), type=values.type)
    if (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)) \
            and values.null_count == 0:
        return _take_lists(values, positions, mask)
    idx = pa.array(np.where(mask, 0, positions), mask=mask, type=pa.int64())
    return values.take(idx)


def _take_lists(values: pa.Array, positions: npt.NDArray[np.int64],
                mask: npt.NDArray[np.bool_]) -> pa.Array:
    """Gather list rows with numpy arithmetic on the offsets (Arrow's list take is ~10x slower)."""
    offsets = np.asarray(values.offsets)  # absolute positions in values.values, slice-aware
    pos = np.where(mask, 0, positions)
    fixed = _fixed_width_rows(values, offsets)
    if fixed is not None:  # every row has the same length (vectors): one numpy row gather
        rows = fixed[pos[~mask]]
        width = fixed.shape[1]
        row_offsets = np.zeros(len(pos) + 1, dtype=np.int64)
        np.cumsum(np.where(mask, 0, width), out=row_offsets[1:])
        offset_type = pa.int64() if pa.types.is_large_list(values.type) else pa.int32()
        return type(values).from_arrays(
            pa.array(row_offsets, offset_type), pa.array(rows.reshape(-1), values.type.value_type),
            type=values.type, mask=pa.array(mask) if mask.any() else None)
    starts = offsets[pos].astype(np.int64)
    lengths = offsets[pos + 1].astype(np.int64) - starts
    lengths[mask] = 0
    new_offsets = np.zeros(len(pos) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    child_index = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1])
    child = values.values.take(pa.array(child_index, pa.int64()))
    offset_type = pa.int64() if pa.types.is_large_list(values.type) else pa.int32()
    return type(values).from_arrays(pa.array(new_offsets, offset_type), child, type=values.type,
                                    mask=pa.array(mask) if mask.any() else None)


def _fixed_width_rows(values: pa.Array, offsets: npt.NDArray[Any]) -> npt.NDArray[Any] | None:
    """The list rows as a ``[N, width]`` numpy view when all rows have one width and the items
    are nullless fixed-width numbers (zero-copy); otherwise None."""
    child = values.values
    item = values.type.value_type
    if not (pa.types.is_integer(item) or pa.types.is_floating(item)) or child.null_count:
        return None
    if len(offsets) < 2:
        return None
    widths = np.diff(offsets)
    width = int(widths[0])
    if width == 0 or not bool(np.all(widths == width)):
        return None
    start = int(offsets[0])
    flat: npt.NDArray[Any] = child.slice(start, len(values) * width).to_numpy(zero_copy_only=True)
    return flat.reshape(len(values), width)


def aligned_table(segments: Sequence[SegmentData], columns: Sequence[tuple[str, pa.DataType]],
                  index: str, kind: TimelineKind, *, fill_latest_at: bool,
                  index_values: Mapping[str, npt.NDArray[np.int64]] | None) -> pa.Table:
    """One row per (segment, index value): latest-at (or exact) rows of every column.

    Without ``index_values`` the rows are the distinct index values at which any of the columns
    has data in that segment. Latest-at never crosses segments.
    """
    index_type = INDEX_TYPES[kind]
    seg_names: list[str] = []
    seg_counts: list[int] = []
    idx_parts: list[npt.NDArray[np.int64]] = []
    col_parts: dict[str, list[pa.Array]] = {name: [] for name, _ in columns}
    for seg in segments:
        present = [(n, t) for n, t in columns if seg.has_column(n)]
        rows = {n: seg.column(n, index) for n, _ in present}
        if index_values is not None:
            values = index_values.get(seg.segment_id)
            if values is None:
                continue
            query = np.asarray(values, dtype=np.int64)
        else:
            temporal = [r.index for r in rows.values() if not r.is_static and len(r)]
            if not temporal:
                continue
            query = np.unique(np.concatenate(temporal))
        seg_names.append(seg.segment_id)
        seg_counts.append(len(query))
        idx_parts.append(query)
        for name, t in columns:
            r = rows.get(name)
            if r is None:
                col_parts[name].append(pa.nulls(len(query), type=t))
                continue
            pos = r.latest_at(query) if fill_latest_at else r.exact(query)
            col_parts[name].append(_take_with_nulls(r.values, pos).cast(t))
    out: dict[str, pa.Array] = {
        SEGMENT_ID: pa.array(seg_names, pa.string()).take(
            pa.array(np.repeat(np.arange(len(seg_names)), seg_counts), pa.int64())),
        index: pa.array(np.concatenate(idx_parts) if idx_parts else np.zeros(0, np.int64),
                        pa.int64()).cast(index_type),
    }
    for name, t in columns:
        parts = col_parts[name]
        out[name] = pa.concat_arrays(parts) if parts else pa.array([], type=t)
    return pa.table(out)


def entity_table(segments: Sequence[SegmentData], entity: str,
                 columns: Sequence[tuple[str, pa.DataType]],
                 timelines: Mapping[str, TimelineKind]) -> pa.Table:
    """Every row an entity logged, across segments: segment id, its timelines, its components."""
    parts: list[pa.Table] = []
    wanted = [n for n, _ in columns if entity_of(n) == entity]
    schema_fields = [pa.field(SEGMENT_ID, pa.string())]
    schema_fields += [pa.field(tl, INDEX_TYPES[k]) for tl, k in timelines.items()]
    schema_fields += [pa.field(n, t) for n, t in columns if n in wanted]
    schema = pa.schema(schema_fields)
    for seg in segments:
        for header, table in seg.files():
            blocks = [b for b in (header.entities.get(entity), header.static_entities.get(entity))
                      if b is not None]
            for block in blocks:
                part = table.slice(block.start, block.stop - block.start)
                arrays = [pa.array([seg.segment_id] * part.num_rows, pa.string())]
                for f in schema_fields[1:]:
                    if f.name in part.column_names:
                        arrays.append(part.column(f.name).combine_chunks().cast(f.type))
                    else:
                        arrays.append(pa.nulls(part.num_rows, type=f.type))
                parts.append(pa.Table.from_arrays(arrays, schema=schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()
