"""NumericDecoder: numeric component rows to tensors, keeping the Arrow value dtype.

Unwindowed fields give ``[D]`` (all values of the row's list, nested lists flattened; ``[1]`` for a
scalar); windowed fields give ``[T, D]``. A null row, or a window whose rows differ in width, gives
``None`` (Rerun 0.41). Without a ``select`` and without nulls, a whole block is gathered with one
numpy fancy-index and returned as one tensor (:class:`~rayform.decoders.TensorRows`); otherwise
rows are decoded one request at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from rayform.decoders._arrow import flatten_rows, row_numpy
from rayform.decoders._base import ColumnDecoder, DecodeConcurrency, DecodeRequest, FieldBatch
from rayform.decoders._requests import output_row_matrix
from rayform.decoders._tensor_rows import TensorRows


class NumericDecoder(ColumnDecoder):
    """Decode numeric rows (``Scalars:scalars`` and other numeric lists) to tensors.

    Output: ``[D]`` per sample, ``[T, D]`` with a window, in the column's dtype (``float64`` for
    ``Scalars``, ``float32`` for ``list<float32>`` …).
    """

    @property
    def decode_concurrency(self) -> DecodeConcurrency:
        return "inline"

    def decode(self, batch: FieldBatch, requests: Sequence[DecodeRequest]
               ) -> Sequence[torch.Tensor | None]:
        if not requests:
            return []
        rows = output_row_matrix(requests)
        flat = flatten_rows(batch.column) if batch.select is None else None
        if rows is not None and flat is not None:
            return _gather(flat[0], flat[1], rows, windowed=batch.is_windowed)
        return [self._decode_one(batch, r) for r in requests]

    def decode_dense(self, values: npt.NDArray[Any], *, windowed: bool) -> TensorRows | None:
        """What :meth:`decode` returns for rows already gathered as ``[N, T, D]`` numpy values
        (``T == 1`` without a window; no ``select``), or ``None`` when a subclass changes
        :meth:`decode` (the loader then goes through ``decode``)."""
        if type(self).decode is not NumericDecoder.decode:
            return None
        return TensorRows(torch.from_numpy(values if windowed else values[:, 0]))

    def _decode_one(self, batch: FieldBatch, request: DecodeRequest) -> torch.Tensor | None:
        values = row_numpy(batch.take_output_rows(request))
        if any(v is None for v in values):
            return None
        arrays = [v for v in values if v is not None]
        if not batch.is_windowed:
            return torch.from_numpy(arrays[0])
        if len({a.shape[0] for a in arrays}) != 1:
            return None
        return torch.from_numpy(np.stack(arrays))


def _gather(values: npt.NDArray[Any], offsets: npt.NDArray[np.int64],
            rows: npt.NDArray[np.int64], *, windowed: bool) -> Sequence[torch.Tensor | None]:
    starts = offsets[rows]
    widths = offsets[rows + 1] - starts
    width = int(widths.flat[0])
    if bool(np.all(widths == width)):
        gathered = values[starts[..., None] + np.arange(width, dtype=np.int64)]
        return TensorRows(torch.from_numpy(gathered if windowed else gathered[:, 0]))
    out: list[torch.Tensor | None] = []
    for row_starts, row_widths in zip(starts, widths, strict=True):
        if not windowed:
            s, w = int(row_starts[0]), int(row_widths[0])
            out.append(torch.from_numpy(np.array(values[s:s + w])))
        elif bool(np.all(row_widths == row_widths[0])):
            idx = row_starts[:, None] + np.arange(int(row_widths[0]), dtype=np.int64)
            out.append(torch.from_numpy(values[idx]))
        else:
            out.append(None)
    return out
