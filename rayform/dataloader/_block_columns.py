"""BlockColumns: a decoded block held by field (columns), before it is cut into samples or batches.

The pipeline decodes a block of samples field by field. Each field's results become one column:

- :class:`StackedColumn`: the decoder returned :class:`~rayform.decoders.TensorRows` (one ``[N, …]``
  tensor), so the column is that tensor plus, per sample, the row holding its value (``-1``: the
  sample has no value);
- :class:`ListColumn`: one value (or ``None``) per sample, for everything else.

From the columns come the per-sample dicts the Rerun surface yields (:meth:`BlockColumns.samples`)
and, with no per-sample work for stacked columns, whole batches (:func:`assemble_batch`): a
contiguous run of rows is a view of the block's tensor, any other selection one ``index_select``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import default_collate

from rayform.decoders import TensorRows

Sample = dict[str, Any]
REORDER_MAX_BYTES = 1 << 20
"""A complete column this small is reordered into block order when it is made (one gather per
block rather than one per batch)."""


def gather_rows(tensor: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``tensor.index_select(0, rows)`` in ``tensor``'s memory layout: rows of a channels-last
    view (``[N, C, H, W]`` over ``[N, H, W, C]`` memory) are copied as the rows they are in
    memory, not transposed into ``[N, C, H, W]`` order (about 8x dearer)."""
    order = memory_order(tensor)
    if order is None:
        return tensor.index_select(0, rows)
    return tensor.permute(order).index_select(0, rows).permute(inverse_order(order))


def cat_rows(parts: Sequence[torch.Tensor]) -> torch.Tensor:
    """``torch.cat(parts)`` (along rows) in the parts' common memory layout (see
    :func:`gather_rows`); a single part is returned as it is."""
    if len(parts) == 1:
        return parts[0]
    order = memory_order(parts[0])
    if order is None or any(memory_order(part) != order for part in parts[1:]):
        return torch.cat(list(parts))
    return torch.cat([part.permute(order) for part in parts]).permute(inverse_order(order))


def memory_order(tensor: torch.Tensor) -> list[int] | None:
    """The dimensions in memory order (rows first, then by falling stride) when that is not
    their own order, else ``None``."""
    strides = tensor.stride()
    rest = sorted(range(1, tensor.dim()), key=lambda d: -strides[d])
    return None if rest == list(range(1, tensor.dim())) else [0, *rest]


def inverse_order(order: list[int]) -> list[int]:
    inverse = [0] * len(order)
    for position, dim in enumerate(order):
        inverse[dim] = position
    return inverse


@dataclass(frozen=True, slots=True)
class StackedColumn:
    """A column whose values are rows of one tensor.

    Attributes:
        tensor: ``[R, …]`` the decoded rows.
        rows: ``int64[N]`` per sample (block order), its row of ``tensor``; ``-1``: no value.
        identity: ``rows`` is ``0, 1, …, N - 1`` (sample ``i`` is row ``i``).
    """

    tensor: torch.Tensor
    rows: npt.NDArray[np.int64]
    identity: bool = False

    @staticmethod
    def of(tensor: torch.Tensor, rows: npt.NDArray[np.int64]) -> StackedColumn:
        """The column, with :attr:`identity` worked out."""
        identity = len(rows) == tensor.shape[0] and bool(
            np.array_equal(rows, np.arange(len(rows), dtype=np.int64)))
        return StackedColumn(tensor, rows, identity)

    def rows_at(self, start: int, stop: int) -> torch.Tensor:
        """The rows of samples ``start:stop`` (all present): a view when :attr:`identity`."""
        if self.identity:
            return self.tensor[start:stop]
        return gather_rows(self.tensor, torch.from_numpy(self.rows[start:stop]))

    def rows_of(self, positions: torch.Tensor) -> torch.Tensor:
        """The rows of the samples at ``positions`` (int64, all present)."""
        if self.identity:
            return gather_rows(self.tensor, positions)
        return gather_rows(self.tensor, torch.from_numpy(self.rows[positions.numpy()]))

    def values(self) -> list[Any]:
        unbound = self.tensor.unbind(0)
        if self.identity:
            return list(unbound)
        return [unbound[r] if r >= 0 else None for r in self.rows.tolist()]

    def missing(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        return self.rows[positions] < 0

    def take(self, positions: npt.NDArray[np.int64]) -> torch.Tensor:
        """The rows of ``positions`` (all present) stacked: a view when they are consecutive."""
        rows = self.rows[positions]
        first = int(rows[0])
        if int(rows[-1]) - first + 1 == len(rows) and bool(np.all(np.diff(rows) == 1)):
            return self.tensor[first:first + len(rows)]
        return gather_rows(self.tensor, torch.from_numpy(rows))


@dataclass(frozen=True, slots=True)
class ListColumn:
    """A column of one value (or ``None``) per sample (block order)."""

    items: list[Any]

    def values(self) -> list[Any]:
        return self.items

    def missing(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        items = self.items
        return np.fromiter((items[p] is None for p in positions.tolist()), dtype=np.bool_,
                           count=len(positions))


Column: TypeAlias = StackedColumn | ListColumn


def field_column(size: int, parts: Sequence[tuple[npt.NDArray[np.int64], Sequence[Any]]]
                 ) -> Column:
    """One field's column from its decode results: ``(sample positions, results)`` per task."""
    stacked = _one_tensor(size, parts)
    if stacked is not None:
        return stacked
    items: list[Any] = [None] * size
    for positions, results in parts:
        values = results.unbind() if isinstance(results, TensorRows) else results
        for position, value in zip(positions.tolist(), values, strict=True):
            items[position] = value
    return ListColumn(items)


def _one_tensor(size: int, parts: Sequence[tuple[npt.NDArray[np.int64], Sequence[Any]]]
                ) -> StackedColumn | None:
    """The parts' results as rows of one tensor: one :class:`TensorRows` part; several over
    the same block buffer, each with its rows of it (the tasks of one field wrote into one
    ``rayform.decoders._output_arena`` buffer); or several whose tensors lie back to back in
    one storage, joined into one view without a copy. ``None`` otherwise."""
    results = [r for _, r in parts]
    if not results or not all(isinstance(r, TensorRows) for r in results):
        return None
    rows_of = [r for r in results if isinstance(r, TensorRows)]
    rows = np.full(size, -1, dtype=np.int64)
    first = rows_of[0].tensor
    if all(r.rows is not None for r in rows_of):
        if any(r.tensor is not first and not _same_view(r.tensor, first) for r in rows_of):
            return None
        for (positions, _), r in zip(parts, rows_of, strict=True):
            assert r.rows is not None
            rows[positions] = r.rows
        return StackedColumn.of(first, rows)
    if any(r.rows is not None for r in rows_of):
        return None
    tensors = [r.tensor for r in rows_of]
    if len(tensors) == 1:
        joined = first
    else:
        storage, at = first.untyped_storage().data_ptr(), first.storage_offset()
        for tensor in tensors:
            if tensor.untyped_storage().data_ptr() != storage or tensor.storage_offset() != at \
                    or tensor.dtype != first.dtype or tensor.shape[1:] != first.shape[1:] \
                    or tensor.stride() != first.stride():
                return None
            at += tensor.shape[0] * tensor.stride(0)
        total = sum(int(t.shape[0]) for t in tensors)
        joined = first.as_strided((total, *first.shape[1:]), first.stride(),
                                  first.storage_offset())
    positions = np.concatenate([p for p, _ in parts])
    rows[positions] = np.arange(len(positions), dtype=np.int64)
    column = StackedColumn.of(joined, rows)
    if not column.identity and len(positions) == size and joined.shape[0] == size \
            and joined.numel() * joined.element_size() <= REORDER_MAX_BYTES:
        # Small rows (numeric fields, decoded in segment order): put them in block order once
        # here, so that batches of consecutive samples are views rather than a gather each.
        return StackedColumn(gather_rows(joined, torch.from_numpy(rows)),
                             np.arange(size, dtype=np.int64), True)
    return column


def _same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
            and a.storage_offset() == b.storage_offset() and a.shape == b.shape
            and a.stride() == b.stride() and a.dtype == b.dtype)


@dataclass(slots=True)
class BlockColumns:
    """A decoded block: one column per sample key, in the order keys appear in a sample.

    Attributes:
        size: the number of samples (block order = the order the indices were given in).
        columns: sample key -> column.
        failed: block positions of the samples whose data failed to decode.
    """

    size: int
    columns: dict[str, Column]
    failed: set[int] = field(default_factory=set)
    _dense: bool | None = None

    @property
    def dense(self) -> bool:
        """Every column is stacked and every sample has every value."""
        if self._dense is None:
            self._dense = all(
                isinstance(col, StackedColumn) and (col.identity or bool((col.rows >= 0).all()))
                for col in self.columns.values())
        return self._dense

    def slice(self, start: int, stop: int) -> dict[str, torch.Tensor]:
        """The batch of samples ``start:stop`` of a :attr:`dense` block (views where rows are
        in block order)."""
        return {key: _stacked(col).rows_at(start, stop) for key, col in self.columns.items()}

    def select(self, positions: torch.Tensor) -> dict[str, torch.Tensor]:
        """The batch of the samples at ``positions`` (int64) of a :attr:`dense` block."""
        return {key: _stacked(col).rows_of(positions) for key, col in self.columns.items()}

    def samples(self) -> list[Sample]:
        """One dict per sample, in block order."""
        keys = list(self.columns)
        if not keys:
            return [{} for _ in range(self.size)]
        values = [col.values() for col in self.columns.values()]
        return [dict(zip(keys, row, strict=True)) for row in zip(*values, strict=True)]

    def values(self, key: str) -> list[Any]:
        """Each sample's value of ``key``, in block order (what :meth:`samples` puts there).

        Raises:
            KeyError: no column ``key``.
        """
        return list(self.columns[key].values())

    def missing(self, keys: Sequence[str], positions: npt.NDArray[np.int64]
                ) -> dict[str, npt.NDArray[np.bool_]]:
        """Per key in ``keys``, which samples at ``positions`` have no value."""
        return {key: self.columns[key].missing(positions) for key in keys}

    def sample(self, position: int) -> Sample:
        """The dict of the sample at block position ``position``."""
        return {key: _value(col, position) for key, col in self.columns.items()}

    def collated(self, keys: Collection[str] | None = None) -> dict[str, Any] | None:
        """The whole block as ``default_collate(self.samples())`` would make it, without the
        stack: a stacked column in block order is its tensor (a view of the decode buffer), any
        other one ``index_select``; list columns go through ``default_collate``. ``None`` when a
        sample lacks a value (``default_collate`` cannot collate ``None`` either). With
        ``keys``, only the columns named there."""
        if not self.size:
            return None
        batch: dict[str, Any] = {}
        for key, col in self.columns.items():
            if keys is not None and key not in keys:
                continue
            if isinstance(col, StackedColumn):
                if col.identity:
                    batch[key] = col.tensor
                    continue
                if len(col.rows) and int(col.rows.min()) < 0:
                    return None
                batch[key] = gather_rows(col.tensor, torch.from_numpy(col.rows))
            else:
                if any(item is None for item in col.items):
                    return None
                batch[key] = default_collate(col.items)
        return batch


def _stacked(col: Column) -> StackedColumn:
    assert isinstance(col, StackedColumn)
    return col


def _row(col: StackedColumn, position: int) -> torch.Tensor | None:
    r = int(col.rows[position])
    return col.tensor[r] if r >= 0 else None


Collate: TypeAlias = Callable[[list[Sample]], Any]


def assemble_batch(pieces: Sequence[tuple[BlockColumns, npt.NDArray[np.int64]]],
                   collate_fn: Collate | None) -> Any:
    """One batch from ``(block, positions)`` pieces, in order (every sample has all its values).

    Stacked columns become one tensor (views when a piece's rows are consecutive); other columns
    go through ``default_collate``. With ``collate_fn`` the per-sample dicts go through it instead.
    """
    if collate_fn is not None:
        return collate_fn([block.sample(p) for block, positions in pieces
                           for p in positions.tolist()])
    keys = list(pieces[0][0].columns)
    batch: dict[str, Any] = {}
    for key in keys:
        cols = [(block.columns[key], positions) for block, positions in pieces]
        if all(isinstance(col, StackedColumn) for col, _ in cols):
            parts = [col.take(positions) for col, positions in cols
                     if isinstance(col, StackedColumn)]
            batch[key] = cat_rows(parts)
        else:
            values = [_value(col, p) for col, positions in cols for p in positions.tolist()]
            batch[key] = default_collate(values)
    return batch


def _value(col: Column, position: int) -> Any:
    return col.items[position] if isinstance(col, ListColumn) else _row(col, position)

