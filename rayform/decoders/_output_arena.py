"""OutputArena: one output buffer for a field's block, shared by the decode tasks it is split into.

The pipeline splits an image field's requests into chunks that its decode threads take in turn.
Decoded into one buffer per chunk, the block's images end up in several buffers, and a batch cut
from them has to be stacked. With an arena, every chunk writes its rows into its own slice of one
pooled buffer (request ``i`` of the field's block at row ``i``), so the block's results are the
rows of one tensor (:class:`~rayform.decoders.TensorRows`) and batching datasets hand out views
of it (consecutive rows) or one ``index_select``, with no stacking copy.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import numpy.typing as npt
import torch

from rayform.decoders._buffer_pool import FRAME_POOL


class OutputArena:
    """Rows of one ``uint8`` buffer for every request of a field's block (thread-safe).

    Args:
        sample_positions: ``int64[N]`` the block's requests, in request order (the pipeline's
            ``RequestArrays.sample_positions``); each appears once.
    """

    __slots__ = ("_buffer", "_lock", "_positions", "_row_of", "_row_shape", "_total")

    def __init__(self, sample_positions: npt.NDArray[np.int64]) -> None:
        self._positions = sample_positions
        self._row_of = {p: i for i, p in enumerate(sample_positions.tolist())}
        self._total = len(sample_positions)
        self._lock = threading.Lock()
        self._row_shape: tuple[int, ...] | None = None
        self._buffer: torch.Tensor | None = None

    def __len__(self) -> int:
        return self._total

    def rows(self, sample_positions: npt.NDArray[np.int64], row_shape: tuple[int, ...]
             ) -> torch.Tensor | None:
        """A view of the ``uint8 [len(sample_positions), *row_shape]`` rows of a task's requests
        (their block positions, in request order); ``None`` when they are not a run of
        consecutive requests of this arena, or when another task already shaped the buffer
        otherwise (the caller then decodes into a buffer of its own). Tasks with disjoint
        requests get disjoint rows.

        The buffer is taken from the process's frame pool on first use and goes back to it once
        nothing references it.
        """
        count = len(sample_positions)
        start = self._row_of.get(int(sample_positions[0])) if count else None
        if start is None or start + count > self._total or not np.array_equal(
                self._positions[start:start + count], sample_positions):
            return None
        with self._lock:
            if self._buffer is None:
                row_bytes = math.prod(row_shape)
                self._buffer = torch.from_numpy(FRAME_POOL.take(self._total * row_bytes)
                                                .reshape(self._total, *row_shape))
                self._row_shape = row_shape
            elif self._row_shape != row_shape:
                return None
            return self._buffer[start:start + count]
