"""The data plane: memory-mapped, per-segment column access with vectorised latest-at.

No DataFusion here. A :class:`SegmentData` opens the recording files of one segment (one per layer)
lazily, and hands out :class:`ColumnRows`: the non-null rows of one component column sorted on one
timeline, as an int64 index array (nanoseconds on temporal timelines) plus the Arrow ``List`` values,
zero-copy where the file allows. Latest-at is ``numpy.searchsorted``.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from rayform.catalog._metadata import SegmentRecord, block_lists
from rayform.errors import ColumnNotFoundError
from rayform.recording._columns import entity_of
from rayform.recording._file import RecordingHeader, open_recording
from rayform.recording._widening import widen
from rayform.storage._store import Store


@dataclass(frozen=True, slots=True)
class ColumnRows:
    """The rows of one component column in one segment, ordered on one timeline.

    Attributes:
        index: ``int64[N]`` ascending index values (ns on temporal timelines).
        values: Arrow ``List`` array of ``N`` rows (non-null).
        is_static: the column is static: ``values`` has one row, served at every index value.
    """

    index: npt.NDArray[np.int64]
    values: pa.Array
    is_static: bool = False

    def __len__(self) -> int:
        return len(self.values)

    def latest_at(self, query: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Row positions of the latest row at or before each query value; -1 where none."""
        if self.is_static:
            return np.zeros(len(query), dtype=np.int64)
        return np.searchsorted(self.index, query, side="right").astype(np.int64) - 1

    def exact(self, query: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Row positions of the (last) row exactly at each query value; -1 where none."""
        pos = self.latest_at(query)
        if self.is_static:
            return pos
        hit = pos >= 0
        hit[hit] = self.index[pos[hit]] == query[hit]
        return np.where(hit, pos, -1)


def one_array(arr: pa.ChunkedArray) -> pa.Array:
    """The rows as one array: the chunk itself, zero-copy, when they lie in one chunk (an entity's
    rows in a recording file are one record batch); concatenated otherwise. A copy would give
    every process that reads the segment (each DataLoader worker) its own copy of the column."""
    if arr.num_chunks == 1:
        return arr.chunk(0)
    return arr.combine_chunks()


def time_value_ns(value: Any) -> int | None:
    """``value`` in ns when it is a time (``datetime64``, ``timedelta64``, ``datetime``,
    ``timedelta``; an aware datetime taken in UTC), else ``None``."""
    if isinstance(value, _dt.datetime):
        value = np.datetime64(value.replace(tzinfo=None) if value.tzinfo is None
                              else value.astimezone(_dt.timezone.utc).replace(tzinfo=None), "ns")
    elif isinstance(value, _dt.timedelta):
        value = np.timedelta64(value, "ns")
    if isinstance(value, np.datetime64):
        return int(value.astype("datetime64[ns]").astype(np.int64))
    if isinstance(value, np.timedelta64):
        return int(value.astype("timedelta64[ns]").astype(np.int64))
    return None


def index_to_int64(arr: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.int64]:
    """View an int64 / timestamp[ns] / duration[ns] Arrow array as int64 numpy (nulls not allowed)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = one_array(arr)
    if not pa.types.is_int64(arr.type):
        arr = arr.view(pa.int64()) if arr.type.bit_width == 64 else arr.cast(pa.int64())
    out: npt.NDArray[np.int64] = arr.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return out


class SegmentData:
    """Lazy, memory-mapped access to one segment's recording files (all layers).

    With ``schema`` (the dataset's merged schema) a column a layer holds narrower (a struct
    without some fields, non-nullable items) is served widened to the dataset's type, nulls where
    the layer lacks a field; without it each layer's own type is served.
    """

    def __init__(self, record: SegmentRecord, store: Store, *,
                 schema: pa.Schema | None = None) -> None:
        self.record = record
        self._store = store
        self._schema = schema
        self._files: list[tuple[RecordingHeader, pa.Table]] | None = None
        self._cache: dict[tuple[str, str], ColumnRows] = {}
        self._others: dict[tuple[str, str, str], pa.Array] = {}

    @property
    def segment_id(self) -> str:
        return self.record.segment_id

    @property
    def version(self) -> str:
        return self.record.version

    def files(self) -> list[tuple[RecordingHeader, pa.Table]]:
        """The (header, memory-mapped table) of each layer's recording file, opened once."""
        if self._files is None:
            self._store.note_block_hashes(block_lists(self.record))
            self._files = [self._store.read_object(layer.object, open_recording)
                           for layer in self.record.layers.values()]
        return self._files

    def has_column(self, column: str) -> bool:
        entity = self.record.entities.get(entity_of(column))
        return entity is not None and column.split(":", 1)[1] in entity.components

    def column(self, column: str, timeline: str) -> ColumnRows:
        """The non-null rows of ``column`` ordered on ``timeline`` (cached per process).

        Raises:
            ColumnNotFoundError: the segment has no such column.
        """
        key = (column, timeline)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        rows = self._load(column, timeline)
        self._cache[key] = rows
        return rows

    def _load(self, column: str, timeline: str) -> ColumnRows:
        entity = entity_of(column)
        indexes: list[npt.NDArray[np.int64]] = []
        values: list[pa.Array] = []
        static: pa.Array | None = None
        found = False
        for header, table in self.files():
            if column not in table.column_names:
                continue
            found = True
            block = header.static_entities.get(entity)
            if block is not None:
                part = table.column(column).slice(block.start, block.stop - block.start)
                part = one_array(part).drop_null()
                if len(part):
                    static = part.slice(len(part) - 1)
            temporal = _temporal_rows(header, table, column, timeline)
            if temporal is None:
                continue
            comp, idx, keep = temporal
            if keep.false_count:
                comp = comp.filter(keep)
                idx = idx.filter(keep)
            indexes.append(index_to_int64(idx))
            values.append(comp)
        if not found:
            raise ColumnNotFoundError(
                f"segment {self.segment_id!r} has no column {column!r}; "
                "see dataset.schema().component_columns()"
            )
        target = self._dataset_type(column)
        if target is not None:
            values = [widen(v, target) for v in values]
            static = None if static is None else widen(static, target)
        if static is not None:
            return ColumnRows(index=np.zeros(1, np.int64), values=static, is_static=True)
        if not values:
            empty_type = target or self.files()[0][1].schema.field(column).type
            return ColumnRows(index=np.zeros(0, np.int64), values=pa.array([], type=empty_type))
        index = np.concatenate(indexes) if len(indexes) > 1 else indexes[0]
        merged = pa.concat_arrays(values) if len(values) > 1 else values[0]
        if len(index) > 1 and not bool(np.all(index[1:] >= index[:-1])):
            order = np.argsort(index, kind="stable")
            index = index[order]
            merged = merged.take(pa.array(order))
        return ColumnRows(index=np.ascontiguousarray(index), values=merged)

    def other_index(self, column: str, timeline: str, other: str) -> pa.Array:
        """The values on timeline ``other`` of the rows :meth:`column` (``column``, ``timeline``)
        returns, in the same order (``int64``, ns on temporal timelines; null where a row has no
        ``other`` value, and for a static column)."""
        key = (column, timeline, other)
        cached = self._others.get(key)
        if cached is None:
            cached = self._other_index(column, timeline, other)
            self._others[key] = cached
        return cached

    def _other_index(self, column: str, timeline: str, other: str) -> pa.Array:
        rows = self.column(column, timeline)
        if rows.is_static:
            return pa.nulls(len(rows), pa.int64())
        parts: list[pa.Array] = []
        indexes: list[npt.NDArray[np.int64]] = []
        for header, table in self.files():
            temporal = _temporal_rows(header, table, column, timeline)
            if temporal is None:
                continue
            _, idx, keep = temporal
            block = header.entities[entity_of(column)]
            if other in table.column_names:
                values = one_array(table.column(other).slice(block.start, block.stop - block.start))
                values = values.view(pa.int64()) if values.type.bit_width == 64 else values
            else:
                values = pa.nulls(len(idx), pa.int64())
            if keep.false_count:
                values = values.filter(keep)
                idx = idx.filter(keep)
            parts.append(values.cast(pa.int64()))
            indexes.append(index_to_int64(idx))
        if not parts:
            return pa.nulls(0, pa.int64())
        merged = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
        index = np.concatenate(indexes) if len(indexes) > 1 else indexes[0]
        if len(index) > 1 and not bool(np.all(index[1:] >= index[:-1])):
            merged = merged.take(pa.array(np.argsort(index, kind="stable")))
        return merged

    def _dataset_type(self, column: str) -> pa.DataType | None:
        if self._schema is None:
            return None
        i = self._schema.get_field_index(column)
        return self._schema.field(i).type if i >= 0 else None

    def asset_path(self, digest: str) -> Path:
        """Local path of an asset (e.g. an MP4) attached to this segment."""
        for layer in self.record.layers.values():
            if digest in layer.assets:
                return self._store.object_path(digest)
        raise ColumnNotFoundError(f"segment {self.segment_id!r} has no asset {digest!r}")


def _temporal_rows(header: RecordingHeader, table: pa.Table, column: str, timeline: str
                   ) -> tuple[pa.Array, pa.Array, pa.BooleanArray] | None:
    """A file's temporal rows of ``column``: its values, its ``timeline`` values and which rows
    have both (None when the file holds no temporal rows of it on that timeline)."""
    if column not in table.column_names:
        return None
    block = header.entities.get(entity_of(column))
    if block is None or timeline not in table.column_names:
        return None
    n = block.stop - block.start
    comp = one_array(table.column(column).slice(block.start, n))
    idx = one_array(table.column(timeline).slice(block.start, n))
    return comp, idx, pc.and_(comp.is_valid(), idx.is_valid())
