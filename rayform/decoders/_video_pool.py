"""Decode threads for video: independent runs of one block decoded concurrently.

PyAV releases the GIL while FFmpeg decodes and converts, so on a few cores threads inside one
process beat DataLoader worker processes (DESIGN §6). The pool is created on first use in the
process that uses it: a forked worker builds its own (threads do not survive a fork) and a
pickled decoder carries none.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Final, TypeVar

MAX_AUTO_THREADS: Final = 4

T = TypeVar("T")


def auto_decode_threads() -> int:
    """Threads for a decoder with ``decode_threads=None``.

    One inside a DataLoader worker process (the workers already spread the load); otherwise the
    CPUs this process may use, at most :data:`MAX_AUTO_THREADS`.
    """
    try:
        from torch.utils.data import get_worker_info

        if get_worker_info() is not None:
            return 1
    except ImportError:  # pragma: no cover - torch is installed with the dataloader
        pass
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_AUTO_THREADS, cpus))


class RunPool:
    """A lazily created thread pool, rebuilt in a new process, never pickled."""

    def __init__(self, threads: int | None) -> None:
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._pid = -1
        self._lock = threading.Lock()

    @property
    def threads(self) -> int:
        return self._threads if self._threads is not None else auto_decode_threads()

    def map(self, fn: Callable[[T], object], jobs: Sequence[T]) -> None:
        """Run ``fn`` on every job (in this thread when there is one), re-raising the first error."""
        if len(jobs) <= 1 or self.threads <= 1:
            for job in jobs:
                fn(job)
            return
        pool = self._executor()
        for future in [pool.submit(fn, job) for job in jobs]:
            future.result()

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pool = ThreadPoolExecutor(max_workers=self.threads,
                                                thread_name_prefix="rayform-video")
                self._pid = os.getpid()
            return self._pool
