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

The dicts may be :class:`DeferredSamples`: made the first time the list is read (an element, an
iteration, a comparison …; ``len`` is known without them), so that a collator that takes the
collated form never pays for the per-sample views and dicts it would not use.

The collated form equals ``default_collate(list(batch))``: the same keys and nesting, tensors of
the same values, shapes and dtypes (``torch.equal``), strings as lists, numbers as tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

Batch = dict[str, Any]
Collate = Callable[[Collection[str] | None], Batch | None]
"""Builds the collated batch (only the keys given, when given), or ``None``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeferredSamples:
    """A batch's sample dicts, made when first needed.

    Attributes:
        size: the number of samples ``make`` returns.
        make: builds the dicts, in batch order.
        values: each sample's value of one key, in batch order, without making the dicts
            (``None``: read from the dicts).
    """

    size: int
    make: Callable[[], list[dict[str, Any]]]
    values: Callable[[str], list[Any]] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0:
            raise ValueError(f"DeferredSamples size must be an integer >= 0, got {self.size!r}")


class SampleBatch(list[dict[str, Any]]):
    """The sample dicts of one batch (a ``list``), plus :meth:`collated`.

    Args:
        samples: the per-sample dicts, in batch order, or :class:`DeferredSamples` that make them
            when the list is first read.
        collate: builds ``default_collate(samples)``'s result without stacking (views of the
            decode buffers), given the keys wanted (``None``: all), or returns ``None`` when the
            samples need the stack after all; ``None`` when the batch has no such form (skipped
            samples).
    """

    __slots__ = ("_collate", "_pending")

    def __init__(
        self, samples: Iterable[dict[str, Any]] | DeferredSamples, collate: Collate | None = None
    ) -> None:
        self._collate = collate
        self._pending: DeferredSamples | None = None
        if isinstance(samples, DeferredSamples):
            super().__init__()
            self._pending = samples
        else:
            super().__init__(samples)

    @property
    def has_collated(self) -> bool:
        """Whether :meth:`collated` has a batch to give."""
        return self._collate is not None

    @property
    def is_deferred(self) -> bool:
        """Whether the sample dicts are still to be made (nothing has read the list yet)."""
        return self._pending is not None

    def collated(self, keys: Collection[str] | None = None) -> Batch | None:
        """The batch as ``default_collate`` would make it (tensors may be views of the decode
        buffers), or ``None`` when it is not available; with ``keys``, only those keys (a caller
        that reshapes the batch skips collating what it does not use, such as metadata)."""
        return None if self._collate is None else self._collate(keys)

    def values(self, key: str) -> list[Any]:
        """Each sample's value of ``key``, in batch order (read without making the sample dicts
        when they are deferred and can be).

        Raises:
            KeyError: the samples have no ``key``.
        """
        pending = self._pending
        if pending is not None and pending.values is not None:
            return pending.values(key)
        return [sample[key] for sample in self]

    def _fill(self) -> None:
        """Make the deferred dicts (once)."""
        pending = self._pending
        if pending is None:
            return
        samples = pending.make()
        if len(samples) != pending.size:
            raise RuntimeError(f"SampleBatch: the deferred samples were {len(samples)} dicts, "
                               f"not the {pending.size} announced")
        list.extend(self, samples)
        self._pending = None

    def __len__(self) -> int:
        pending = self._pending
        return pending.size if pending is not None else list.__len__(self)

    def __radd__(self, other: Any) -> Any:
        # ``[...] + batch``: list's concatenation reads this list's items directly (not through
        # its methods), so they are made first; NotImplemented lets it go on.
        self._fill()
        return NotImplemented

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (a custom pin-memory or queue path): the samples only; the views travel as such.
        return (SampleBatch, (list(self),))


def _filling(name: str) -> Callable[..., Any]:
    """``list.<name>``, after the deferred dicts are made."""
    method = getattr(list, name)

    def call(self: SampleBatch, *args: Any, **kwargs: Any) -> Any:
        self._fill()
        return method(self, *args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = method.__doc__
    return call


# Every list method that reads or changes the items (len is known without them).
for _name in ("__getitem__", "__setitem__", "__delitem__", "__iter__", "__reversed__",
              "__contains__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
              "__add__", "__iadd__", "__mul__", "__rmul__", "__imul__", "__repr__", "__sizeof__",
              "append", "clear", "copy", "count", "extend", "index", "insert", "pop", "remove",
              "reverse", "sort"):
    setattr(SampleBatch, _name, _filling(_name))
del _name
