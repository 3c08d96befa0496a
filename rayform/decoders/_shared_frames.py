"""SharedFramePool: frame buffers in memory the decode worker processes write into (one memfd arena).

The video decoder's worker processes (:mod:`rayform.decoders._video_processes`) convert frames
straight into the call's frame slots, so the slots must be memory both processes map: one
anonymous shared file (``memfd``) per process, mapped once by every worker. Buffers are cut from
it and come back by themselves, as :class:`~rayform.decoders._buffer_pool.BufferPool`'s do: the
pool holds each buffer it lent and lends it again once nothing else references it. When the arena
has no room for a request, :meth:`take` returns ``None`` and the caller decodes in-process.
"""

from __future__ import annotations

import bisect
import mmap
import os
import sys
import threading

import numpy as np
import numpy.typing as npt

DEFAULT_ARENA_BYTES = 128 << 20
"""Bytes of shared frame memory per process (pages are committed only once written)."""
_ALIGN_BYTES = 64 << 10
# sys.getrefcount(buffer) of an idle buffer: the pool's list and the call's argument.
_IDLE_REFCOUNT = 2


class SharedFramePool:
    """Buffers cut from one shared-memory arena (thread-safe; one per process, never pickled).

    Args:
        arena_bytes: the arena's size.
    """

    def __init__(self, *, arena_bytes: int = DEFAULT_ARENA_BYTES) -> None:
        if arena_bytes < _ALIGN_BYTES:
            raise ValueError(f"SharedFramePool arena_bytes must be >= {_ALIGN_BYTES}, got "
                             f"{arena_bytes!r}")
        self.arena_bytes = -(-arena_bytes // _ALIGN_BYTES) * _ALIGN_BYTES
        self.fd = os.memfd_create("rayform-video-frames", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, self.arena_bytes)
        self._map = mmap.mmap(self.fd, self.arena_bytes)
        self._arena = np.frombuffer(self._map, dtype=np.uint8)
        self.address = int(self._arena.ctypes.data)
        self._lock = threading.Lock()
        self._offsets: list[int] = []  # sorted, parallel to _buffers
        self._buffers: list[npt.NDArray[np.uint8]] = []

    def take(self, nbytes: int) -> npt.NDArray[np.uint8] | None:
        """A 1-D ``uint8`` view of ``nbytes`` shared bytes (contents undefined), or ``None`` when
        the arena has no room. The bytes return to the pool once nothing references them."""
        if nbytes < 0:
            raise ValueError(f"SharedFramePool.take needs nbytes >= 0, got {nbytes!r}")
        size = -(-max(nbytes, 1) // _ALIGN_BYTES) * _ALIGN_BYTES
        with self._lock:
            buffer = self._idle(nbytes, size)
            if buffer is None:
                buffer = self._carve(size)
        return None if buffer is None else buffer[:nbytes]

    def offset_of(self, array: npt.NDArray[np.uint8]) -> int:
        """Where ``array``'s first byte lies in the arena (what a worker writes at)."""
        offset = int(array.ctypes.data) - self.address
        if not 0 <= offset <= self.arena_bytes - array.nbytes:
            raise ValueError("array does not lie in this SharedFramePool's arena")
        return offset

    def _is_idle(self, i: int) -> bool:
        return sys.getrefcount(self._buffers[i]) == _IDLE_REFCOUNT

    def _idle(self, nbytes: int, size: int) -> npt.NDArray[np.uint8] | None:
        best = -1
        for i, buffer in enumerate(self._buffers):
            if nbytes <= buffer.nbytes <= 2 * size and self._is_idle(i) \
                    and (best < 0 or buffer.nbytes < self._buffers[best].nbytes):
                best = i
        return None if best < 0 else self._buffers[best]

    def _carve(self, size: int) -> npt.NDArray[np.uint8] | None:
        offset = self._gap(size)
        if offset is None:  # drop idle buffers to make room, then look again
            keep = [i for i in range(len(self._buffers)) if not self._is_idle(i)]
            self._offsets = [self._offsets[i] for i in keep]
            self._buffers = [self._buffers[i] for i in keep]
            offset = self._gap(size)
            if offset is None:
                return None
        # Its own array over the map (not a view of the arena's), so that views of it count
        # as references to it.
        buffer = np.frombuffer(self._map, dtype=np.uint8, count=size, offset=offset)
        i = bisect.bisect(self._offsets, offset)
        self._offsets.insert(i, offset)
        self._buffers.insert(i, buffer)
        return buffer

    def _gap(self, size: int) -> int | None:
        """The first offset with ``size`` free bytes after it."""
        end = 0
        for offset, buffer in zip(self._offsets, self._buffers, strict=True):
            if offset - end >= size:
                return end
            end = offset + buffer.nbytes
        return end if self.arena_bytes - end >= size else None
