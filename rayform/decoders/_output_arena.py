"""OutputArena: one output buffer for a field's block, in block order, shared by its decode tasks.

The pipeline decodes an image field's requests (sorted by segment and time) in chunks that its
decode threads take in turn. Decoded into one buffer per chunk, the block's images would end up in
several buffers in decode order, and a batch cut from them would have to be stacked or gathered.
With an arena every task writes each of its requests into the row of one pooled buffer that is the
request's position in the block (the order the dataset emits a block's samples in), so the
block's results are the rows of one tensor in block order (:class:`~rayform.decoders.TensorRows`
with ``rows``) and a batching dataset hands out a run of consecutive samples as a view of it: no
stacking, no gather.

Inside a DataLoader worker, :class:`~rayform.dataloader.PooledBatchCollator` lends the arenas
shared-memory slots (:func:`set_arena_buffers`): the images are then decoded straight into the
memory the main process reads the batch from, and the collator sends the slot without a copy.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import torch

from rayform.decoders._buffer_pool import FRAME_POOL

_T = TypeVar("_T")

ArenaBuffers = Callable[[str, int], torch.Tensor | None]
"""Given a field's key and a byte count, a ``uint8 [nbytes]`` buffer for its block, or ``None``
(the arena then takes one from the frame pool)."""

_arena_buffers: tuple[int, ArenaBuffers] | None = None  # (the process that set it, the source)


def set_arena_buffers(source: ArenaBuffers | None) -> None:
    """Where this process's arenas take their buffers first (``None``: the frame pool only);
    a forked child does not inherit it."""
    global _arena_buffers
    _arena_buffers = None if source is None else (os.getpid(), source)


def _take(key: str, shape: tuple[int, ...]) -> torch.Tensor:
    """A ``uint8`` buffer of ``shape`` for the field ``key``: lent by the process's source, or
    from the frame pool (shaped with numpy: torch's ``view`` releases the GIL, see
    ``decoders._image._slab_views``)."""
    nbytes = math.prod(shape)
    source = _arena_buffers
    if source is not None and source[0] == os.getpid():
        lent = source[1](key, nbytes)
        if lent is not None:
            return lent.view(shape)
    return torch.from_numpy(FRAME_POOL.take(nbytes).reshape(shape))


class OutputArena:
    """One ``uint8`` buffer with a row per sample of a block (thread-safe).

    Args:
        size: samples in the block (rows of the buffer).
        sample_positions: ``int64[N]`` the field's requests' block positions (each once).
        key: the field's sample key (names the buffer to :func:`set_arena_buffers`' source).
    """

    __slots__ = ("_buffer", "_derived", "_key", "_known", "_lock", "_size")

    def __init__(self, size: int, sample_positions: npt.NDArray[np.int64], *,
                 key: str = "") -> None:
        self._size = size
        self._key = key
        self._known = np.zeros(size, dtype=np.bool_)
        self._known[sample_positions] = True
        self._lock = threading.Lock()
        self._buffer: torch.Tensor | None = None
        self._derived: dict[Hashable, Any] = {}

    def __len__(self) -> int:
        return self._size

    def rows(self, sample_positions: npt.NDArray[np.int64], row_shape: tuple[int, ...]
             ) -> tuple[torch.Tensor, npt.NDArray[np.int64]] | None:
        """The block's buffer ``uint8 [size, *row_shape]`` and the rows a task's requests go to
        (their block positions); ``None`` when a position is not a request of this arena or
        another task already shaped the buffer otherwise (the caller then decodes into a buffer
        of its own). Tasks with disjoint requests write disjoint rows.

        The buffer is taken on first use from the process's arena buffer source (a worker's
        shared-memory slots, see :func:`set_arena_buffers`) or else its frame pool, and goes
        back once nothing references it.
        """
        if not len(sample_positions):
            return None
        lo, hi = int(sample_positions.min()), int(sample_positions.max())
        if lo < 0 or hi >= self._size or not bool(self._known[sample_positions].all()):
            return None
        with self._lock:
            if self._buffer is None:
                self._buffer = _take(self._key, (self._size, *row_shape))
            elif tuple(self._buffer.shape[1:]) != row_shape:
                return None
            return self._buffer, sample_positions

    def derived(self, key: Hashable, make: Callable[[torch.Tensor], _T]) -> _T:
        """``make(buffer)``, made once per ``key`` for the block and shared by its tasks (after
        :meth:`rows` shaped the buffer).

        A decoder's views of the buffer (its numpy array, a permuted or sliced tensor) are the
        same for every task of the block; made once, the other tasks do not call into torch,
        whose tensor methods release the GIL, on their way from one decode to the next.
        """
        try:
            found: _T = self._derived[key]
            return found
        except KeyError:
            pass
        buffer = self._buffer
        assert buffer is not None, "derived() needs the buffer rows() made"
        # Made without the lock (a task holding it while ``make`` waits for the GIL would stall
        # the others): two tasks may both make it, and every task gets the first one stored.
        value: _T = self._derived.setdefault(key, make(buffer))
        return value
