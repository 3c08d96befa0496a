"""Read-ahead of remote objects: background downloads into the verified cache, bounded.

An :class:`ObjectPrefetcher` takes digests a reader announces it will need soon (in the order it
expects to need them) and downloads them on a few background threads through the same path as an
on-demand read (:meth:`ObjectCache.fetch`: streamed to a temporary file, sha256-checked, then
installed), so a prefetched object is exactly as trusted as one fetched on demand. A reader that
asks for an object while it is being prefetched waits on the cache's per-object lock and then
finds it installed: nothing is downloaded twice.

Bounds:
    * memory: ``max_in_flight`` downloads at once, each streaming through the transport's buffer
      (1 MiB for S3, 1 MiB for HTTPS): at most ``max_in_flight`` MiB of bytes in flight in RAM,
      plus one digest string per announced object;
    * disk and bandwidth: at most ``max_ahead`` objects prefetched but not yet read; announced
      objects beyond that wait until the reader catches up (:meth:`claimed`).

A failed prefetch is dropped silently: the reader's own request fetches it again and raises
the real error. Not fork-safe by design: a forked child starts with an empty prefetcher.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from rayform.errors import ConfigError

DEFAULT_MAX_IN_FLIGHT = 4
DEFAULT_MAX_AHEAD = 16


class ObjectPrefetcher:
    """Bounded background downloads of announced objects (see the module docstring).

    Args:
        fetch: downloads one object into the cache and returns its path (verified).
        is_cached: True when an object is already in the cache (never queued).
        max_in_flight: downloads running at once.
        max_ahead: objects prefetched (or being prefetched) but not yet read.
    """

    def __init__(self, fetch: Callable[[str], Path], is_cached: Callable[[str], bool], *,
                 max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
                 max_ahead: int = DEFAULT_MAX_AHEAD) -> None:
        if max_in_flight < 1 or max_ahead < 1:
            raise ConfigError(f"prefetch bounds must be >= 1, got max_in_flight={max_in_flight!r}, "
                              f"max_ahead={max_ahead!r}")
        self._fetch = fetch
        self._is_cached = is_cached
        self.max_in_flight = max_in_flight
        self.max_ahead = max_ahead
        self._lock = threading.RLock()
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._pending: deque[str] = deque()
        self._known: set[str] = set()  # announced (pending, running or done), never re-queued
        self._ahead: set[str] = set()  # started by the prefetcher and not yet claimed
        self._running = 0
        self._pool: ThreadPoolExecutor | None = None

    def _check_fork(self) -> None:
        if self._pid != os.getpid():  # a forked child: the parent's threads are not here
            self._lock = threading.RLock()
            self._reset()

    # ---------------------------------------------------------------------------- use
    def announce(self, digests: Iterable[str]) -> None:
        """Queue objects that will be read soon, in the order given (already announced and
        cached ones are skipped); returns at once."""
        self._check_fork()
        with self._lock:
            for digest in digests:
                if digest not in self._known:
                    self._known.add(digest)
                    self._pending.append(digest)
            self._pump()

    def claimed(self, digest: str) -> None:
        """The reader has read ``digest``: it no longer counts against ``max_ahead``."""
        self._check_fork()
        with self._lock:
            self._known.add(digest)  # read on demand: never worth prefetching any more
            if digest in self._ahead:
                self._ahead.discard(digest)
                self._pump()

    @property
    def ahead(self) -> int:
        """Objects prefetched or being prefetched and not yet read."""
        with self._lock:
            return len(self._ahead)

    @property
    def pending(self) -> int:
        """Announced objects not started yet."""
        with self._lock:
            return len(self._pending)

    # ------------------------------------------------------------------------ running
    def _pump(self) -> None:
        """Start downloads while both bounds allow (holding ``_lock``)."""
        while (self._pending and self._running < self.max_in_flight
               and len(self._ahead) < self.max_ahead):
            digest = self._pending.popleft()
            if self._is_cached(digest):
                continue
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_in_flight,
                                                thread_name_prefix="rayform-prefetch")
            try:
                future = self._pool.submit(self._fetch, digest)
            except RuntimeError:  # the interpreter is shutting down: nothing more to start
                self._pending.clear()
                return
            self._running += 1
            self._ahead.add(digest)
            future.add_done_callback(lambda done, d=digest: self._finished(d, done))

    def _finished(self, digest: str, future: Future[Path]) -> None:
        with self._lock:
            self._running -= 1
            if future.exception() is not None:
                # Dropped: the reader's own request fetches it again and raises the real error.
                self._ahead.discard(digest)
            self._pump()

    def close(self) -> None:
        """Drop what is pending and wait for the running downloads."""
        with self._lock:
            self._pending.clear()
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
