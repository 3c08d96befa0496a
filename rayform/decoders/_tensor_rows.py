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

import torch


class TensorRows(Sequence[torch.Tensor]):
    """Per-request results as the rows of one tensor: ``rows[i]`` is ``tensor[i]``.

    Args:
        tensor: ``[N, …]``, one row per request, in request order.
    """

    __slots__ = ("tensor",)

    def __init__(self, tensor: torch.Tensor) -> None:
        if not isinstance(tensor, torch.Tensor) or tensor.dim() < 1:
            raise TypeError(f"TensorRows needs a tensor with a leading request dimension, "
                            f"got {tensor!r}")
        self.tensor = tensor

    def __len__(self) -> int:
        return int(self.tensor.shape[0])

    @overload
    def __getitem__(self, item: int) -> torch.Tensor: ...

    @overload
    def __getitem__(self, item: slice) -> TensorRows: ...

    def __getitem__(self, item: int | slice) -> torch.Tensor | TensorRows:
        if isinstance(item, slice):
            return TensorRows(self.tensor[item])
        return self.tensor[item]

    def __iter__(self) -> Iterator[torch.Tensor]:
        return iter(self.tensor.unbind(0))

    def unbind(self) -> list[torch.Tensor]:
        """Every row as its own tensor (views of :attr:`tensor`)."""
        return list(self.tensor.unbind(0))

    def __repr__(self) -> str:
        return f"TensorRows({len(self)} x {tuple(self.tensor.shape[1:])}, {self.tensor.dtype})"


def as_tensor_rows(results: Sequence[object]) -> TensorRows | None:
    """``results`` as :class:`TensorRows` when a decoder returned them so, else ``None``."""
    return results if isinstance(results, TensorRows) else None
