"""TensorRows: a decoder's results held as one stacked tensor (one row per request).

A decoder that decodes a whole block at once (``NumericDecoder``'s gather) already has its results
as one ``[N, …]`` tensor. Returning it as ``TensorRows`` instead of a list of ``N`` tensors keeps
it whole: the dataset can then hand out batches as views or one ``index_select`` of it, with no
per-sample tensor objects and no per-sample stacking (``RerunIterableDataset(batch_size=…)``).
It is still a ``Sequence`` of per-request tensors, so code written against the plain contract
(``decode`` returns one value per request) reads it as a list.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np
import numpy.typing as npt
import torch


class TensorRows(Sequence[torch.Tensor]):
    """Per-request results as rows of one tensor: result ``i`` is ``tensor[i]``, or
    ``tensor[rows[i]]`` when ``rows`` is given.

    Args:
        tensor: ``[R, …]`` the decoded rows.
        rows: ``int64[N]`` the row of each request (in request order); ``None``: request ``i``
            is row ``i`` and ``N == R``. Decoders that write into a block-ordered buffer
            shared by several tasks (``rayform.decoders._output_arena``) give their rows of it.
    """

    __slots__ = ("rows", "tensor")

    def __init__(self, tensor: torch.Tensor, rows: npt.NDArray[np.int64] | None = None) -> None:
        if not isinstance(tensor, torch.Tensor) or tensor.dim() < 1:
            raise TypeError(f"TensorRows needs a tensor with a leading request dimension, "
                            f"got {tensor!r}")
        if rows is not None and len(rows) and (
                int(rows.min()) < 0 or int(rows.max()) >= tensor.shape[0]):
            raise IndexError(f"TensorRows rows must lie in [0, {tensor.shape[0]}), got "
                             f"{int(rows.min())}..{int(rows.max())}")
        self.tensor = tensor
        self.rows = rows

    def __len__(self) -> int:
        return int(self.tensor.shape[0]) if self.rows is None else len(self.rows)

    @overload
    def __getitem__(self, item: int) -> torch.Tensor: ...

    @overload
    def __getitem__(self, item: slice) -> TensorRows: ...

    def __getitem__(self, item: int | slice) -> torch.Tensor | TensorRows:
        if self.rows is None:
            return TensorRows(self.tensor[item]) if isinstance(item, slice) else self.tensor[item]
        if isinstance(item, slice):
            return TensorRows(self.tensor, self.rows[item])
        return self.tensor[int(self.rows[item])]

    def __iter__(self) -> Iterator[torch.Tensor]:
        return iter(self.unbind())

    def unbind(self) -> list[torch.Tensor]:
        """Every result as its own tensor (views of :attr:`tensor`)."""
        views = self.tensor.unbind(0)
        if self.rows is None:
            return list(views)
        return [views[r] for r in self.rows.tolist()]

    def __repr__(self) -> str:
        return f"TensorRows({len(self)} x {tuple(self.tensor.shape[1:])}, {self.tensor.dtype})"

