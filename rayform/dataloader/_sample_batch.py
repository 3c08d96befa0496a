"""SampleBatch: a map dataset's batch of sample dicts that also carries the batch already collated.

``DataLoader(ds, batch_size=B)`` hands a map dataset's ``__getitems__`` result to its
``collate_fn``. rayform decodes a batch field by field into one buffer per field (JPEGs straight
into the rows of one pooled ``[B, H, W, C]`` buffer, seen as a ``torch.channels_last``
``[B, C, H, W]`` batch), so the collated batch already exists: each
field's tensor is a view of that buffer. :class:`SampleBatch` is a plain ``list`` of the per-sample
dicts (any ``collate_fn`` sees what it always saw; ``default_collate`` stacks them as before) that
also holds a function building the batch from the buffers without the stack.
:class:`~rayform.dataloader.PooledBatchCollator` uses it: in the main process it returns those views
(no copy at all), in a DataLoader worker it copies each field into its shared-memory slot in one
``copy_`` rather than stacking the samples' views.

The collated form equals ``default_collate(list(batch))``: the same keys and nesting, tensors of
the same values, shapes and dtypes (``torch.equal``), strings as lists, numbers as tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

Batch = dict[str, Any]
Collate = Callable[[Collection[str] | None], Batch | None]
"""Builds the collated batch (only the keys given, when given), or ``None``."""


class SampleBatch(list[dict[str, Any]]):
    """The sample dicts of one batch (a ``list``), plus :meth:`collated`.

    Args:
        samples: the per-sample dicts, in batch order.
        collate: builds ``default_collate(samples)``'s result without stacking (views of the
            decode buffers), given the keys wanted (``None``: all), or returns ``None`` when the
            samples need the stack after all; ``None`` when the batch has no such form (skipped
            samples).
    """

    __slots__ = ("_collate",)

    def __init__(
        self, samples: Iterable[dict[str, Any]], collate: Collate | None = None
    ) -> None:
        super().__init__(samples)
        self._collate = collate

    @property
    def has_collated(self) -> bool:
        """Whether :meth:`collated` has a batch to give."""
        return self._collate is not None

    def collated(self, keys: Collection[str] | None = None) -> Batch | None:
        """The batch as ``default_collate`` would make it (tensors may be views of the decode
        buffers), or ``None`` when it is not available; with ``keys``, only those keys (a caller
        that reshapes the batch skips collating what it does not use, such as metadata)."""
        return None if self._collate is None else self._collate(keys)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (a custom pin-memory or queue path): the samples only; the views travel as such.
        return (SampleBatch, (list(self),))
