"""BufferPool: frame and batch buffers reused once nothing references them (no fresh pages per block).

A decoded 224×224 frame is 150 KB and a block of them several MB: fresh allocations of that size
are memory maps whose pages fault in on first write and are unmapped again when freed, which costs
about a quarter of the JPEG loading time. The decoders take their output buffers from a per-process
pool instead. A buffer goes back to the pool by itself: the pool keeps a reference to every buffer
it lent and lends it again once that is the only one left (every array and tensor view made from
a buffer holds a reference to it, so a buffer still held by a sample, a batch or a user is never
reused).
"""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import numpy.typing as npt

DEFAULT_MAX_BYTES = 128 << 20
"""Bytes of buffers a process's pool keeps (lent and idle together); larger demands are not pooled."""
_ALIGN_BYTES = 64 << 10
# sys.getrefcount(self._buffers[i]) of an idle buffer: the pool's list and the call's argument.
_IDLE_REFCOUNT = 2


class BufferPool:
    """Reusable ``uint8`` buffers for one process (thread-safe; rebuilt after ``fork``).

    Args:
        max_bytes: the most bytes the pool keeps; a request it cannot serve within that bound gets
            a plain, unpooled allocation.
    """

    def __init__(self, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"BufferPool max_bytes must be >= 0, got {max_bytes!r}")
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._buffers: list[npt.NDArray[np.uint8]] = []
        self._pid = os.getpid()

    @property
    def pooled_bytes(self) -> int:
        """Bytes the pool holds (lent and idle)."""
        with self._lock:
            return sum(b.nbytes for b in self._buffers)

    def take(self, nbytes: int) -> npt.NDArray[np.uint8]:
        """A 1-D ``uint8`` buffer of exactly ``nbytes`` (a view of a pooled buffer; contents undefined).

        The buffer returns to the pool when the returned array and every view of it are gone.
        """
        if nbytes < 0:
            raise ValueError(f"BufferPool.take needs nbytes >= 0, got {nbytes!r}")
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's buffers are the parent's
                self._buffers = []
                self._pid = os.getpid()
            buffer = self._idle_buffer(nbytes)
            if buffer is None:
                buffer = self._new_buffer(nbytes)
        return buffer[:nbytes]

    def _idle_buffer(self, nbytes: int) -> npt.NDArray[np.uint8] | None:
        # Smallest idle buffer that fits without wasting more than half of it.
        best = -1
        for i in range(len(self._buffers)):
            size = self._buffers[i].nbytes
            if nbytes <= size <= 2 * nbytes + _ALIGN_BYTES and self._is_idle(i) \
                    and (best < 0 or size < self._buffers[best].nbytes):
                best = i
        return None if best < 0 else self._buffers[best]

    def _is_idle(self, i: int) -> bool:
        # Nothing but the pool's list references the buffer (no array, view or tensor of it).
        return sys.getrefcount(self._buffers[i]) == _IDLE_REFCOUNT

    def _new_buffer(self, nbytes: int) -> npt.NDArray[np.uint8]:
        size = -(-max(nbytes, 1) // _ALIGN_BYTES) * _ALIGN_BYTES
        held = sum(b.nbytes for b in self._buffers)
        if held + size > self._max_bytes:
            # Drop idle buffers (largest first) to make room; what is lent stays lent.
            idle = sorted((i for i in range(len(self._buffers)) if self._is_idle(i)),
                          key=lambda i: -self._buffers[i].nbytes)
            drop: set[int] = set()
            for i in idle:
                if held + size <= self._max_bytes:
                    break
                held -= self._buffers[i].nbytes
                drop.add(i)
            self._buffers = [b for i, b in enumerate(self._buffers) if i not in drop]
        buffer = np.empty(size, dtype=np.uint8)
        if held + size <= self._max_bytes:
            self._buffers.append(buffer)
        return buffer


FRAME_POOL = BufferPool()
"""The process's pool for decoded frames (images and video)."""
