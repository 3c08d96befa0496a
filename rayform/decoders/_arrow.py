"""Arrow helpers shared by the decoders: flatten list columns to numpy, find blobs in rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.errors import DecodeError

_LIST_TYPES = (pa.types.is_list, pa.types.is_large_list)


def _is_list(t: pa.DataType) -> bool:
    return any(check(t) for check in _LIST_TYPES)


def _is_numeric(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t))


def flatten_rows(column: pa.Array) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64]] | None:
    """Flatten a column of rows to ``(values, offsets)``: row ``i`` is ``values[offsets[i]:offsets[i+1]]``.

    Rows may be lists, large lists or fixed-size lists, nested to any depth (inner levels are
    flattened into the row), or plain scalars (one value per row). Returns ``None`` when the
    column holds nulls at any level or non-numeric leaves, which the caller decodes row by row.
    """
    if column.null_count:
        return None
    if not (_is_list(column.type) or pa.types.is_fixed_size_list(column.type)):
        if not _is_numeric(column.type):
            return None
        return _leaf_numpy(column), np.arange(len(column) + 1, dtype=np.int64)
    if pa.types.is_fixed_size_list(column.type):
        size = column.type.list_size
        offsets = (np.arange(len(column) + 1, dtype=np.int64) + column.offset) * size
    else:
        offsets = np.asarray(column.offsets, dtype=np.int64)
    values: pa.Array = column.values
    while True:
        t = values.type
        if _is_list(t):
            if values.null_count:
                return None
            inner = np.asarray(values.offsets, dtype=np.int64)
            offsets = inner[offsets]
            values = values.values
        elif pa.types.is_fixed_size_list(t):
            if values.null_count:
                return None
            offsets = (offsets + values.offset) * t.list_size
            values = values.values
        else:
            break
    if not _is_numeric(values.type) or values.null_count:
        return None
    return _leaf_numpy(values), offsets


def _leaf_numpy(values: pa.Array) -> npt.NDArray[Any]:
    if pa.types.is_boolean(values.type):
        return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.bool_)
    out: npt.NDArray[Any] = values.to_numpy(zero_copy_only=False)
    return out


def row_numpy(rows: pa.Array) -> list[npt.NDArray[Any] | None]:
    """Each row's values flattened to a writeable 1-D numpy array; ``None`` for a null row."""
    flat = flatten_rows(rows)
    if flat is not None:
        values, offsets = flat
        return [np.array(values[offsets[i]:offsets[i + 1]]) for i in range(len(rows))]
    out: list[npt.NDArray[Any] | None] = []
    for i in range(len(rows)):
        row = rows.slice(i, 1)
        if not row.is_valid().to_pylist()[0]:
            out.append(None)
            continue
        while _is_list(row.type) or pa.types.is_fixed_size_list(row.type):
            row = row.flatten()
        if row.null_count:
            out.append(None)
            continue
        if not _is_numeric(row.type):
            raise DecodeError(
                f"NumericDecoder needs numeric values, got Arrow type {rows.type}; use a select "
                "function that picks a numeric component, or another decoder"
            )
        out.append(np.array(_leaf_numpy(row)))
    return out


class BlobReader:
    """Finds the first blob of each row of a blob column, zero-copy.

    Accepted row layouts: ``list<binary>``, ``list<large_binary>``, ``list<list<uint8>>``, and
    plain ``binary`` / ``large_binary`` / ``list<uint8>`` rows (one blob per row, e.g. after a
    ``select``). Offsets and validity are read once as numpy arrays, so a lookup is a few slices.
    """

    def __init__(self, column: pa.Array) -> None:
        t = column.type
        self._row_valid = _validity(column)
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            self._outer: npt.NDArray[np.int64] | None = None
            blobs: pa.Array = column
        elif _is_list(t) and (pa.types.is_binary(t.value_type) or pa.types.is_large_binary(
                t.value_type) or _is_list(t.value_type)):
            self._outer = np.asarray(column.offsets, dtype=np.int64)
            blobs = column.values
        elif _is_list(t) and pa.types.is_uint8(t.value_type):
            self._outer = None
            blobs = column
        else:
            raise DecodeError(
                f"expected encoded blobs (list<binary> or list<list<uint8>> rows), got Arrow type "
                f"{t}; is this an EncodedImage:blob column?"
            )
        self._blob_valid = _validity(blobs)
        if pa.types.is_binary(blobs.type) or pa.types.is_large_binary(blobs.type):
            width = np.int32 if pa.types.is_binary(blobs.type) else np.int64
            offsets = blobs.buffers()[1]
            self._starts = np.frombuffer(offsets, dtype=width)[blobs.offset:] \
                .astype(np.int64)
            data = blobs.buffers()[2]
        else:  # list<uint8> blobs
            self._starts = np.asarray(blobs.offsets, dtype=np.int64) + blobs.values.offset
            data = blobs.values.buffers()[1]
        # Arrow buffers export signed bytes ('b'); decoders expect unsigned ('B').
        self._data = memoryview(data).cast("B") if data is not None else memoryview(b"")

    def blob(self, row: int) -> memoryview | None:
        """The first blob of ``row``; ``None`` for a null or empty row."""
        if not self._row_valid[row]:
            return None
        if self._outer is None:
            index = row
        else:
            start, stop = self._outer[row], self._outer[row + 1]
            if stop <= start:
                return None
            index = int(start)
        if not self._blob_valid[index]:
            return None
        return self._data[int(self._starts[index]):int(self._starts[index + 1])]


def _validity(array: pa.Array) -> npt.NDArray[np.bool_]:
    if not array.null_count:
        return np.ones(len(array), dtype=np.bool_)
    return np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=np.bool_)
