"""Read-ahead of remote objects: background downloads into the verified cache, bounded.

An :class:`ObjectPrefetcher` takes digests a reader announces it will need soon (in the order it
expects to need them) and downloads them on a few background threads through the same path as an
on-demand read (:meth:`ObjectCache.fetch`: streamed to a temporary file, sha256-checked, then
installed), so a prefetched object is exactly as trusted as one fetched on demand. A reader that
asks for an object while it is being prefetched waits on the cache's per-object lock and then
finds it installed: nothing is downloaded twice.

Bounds:
    * memory: ``max_in_flight`` downloads at once (8 by default: object stores cap each connection,
      around 50-90 MB/s on S3, and scale with concurrent requests, so a full shuffle's first batch,
      which needs every segment, waits for one wave of parallel downloads rather than several),
      each on at most ``PartPlan.connections`` ranged requests (4: objects over 8 MiB come in
      parts, see :mod:`rayform.storage._parts`), each streaming through the transport's buffer
      (1 MiB for S3, 1 MiB for HTTPS): at most ``max_in_flight`` x 4 MiB of bytes in flight in
      RAM (plus a 1 MiB read-back buffer per object), and one digest string per object started
      or read;
    * disk and bandwidth: at most ``max_ahead`` objects prefetched but not yet read; announced
      objects beyond that wait until the reader catches up (:meth:`claimed`).

A failed prefetch is dropped silently: the reader's own request fetches it again and raises
the real error. A forked child starts with an empty prefetcher (the threads stay in the parent).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from rayform.errors import ConfigError

DEFAULT_MAX_IN_FLIGHT = 8
DEFAULT_MAX_AHEAD = 16


class ObjectPrefetcher:
    """Bounded background downloads of announced objects (see the module docstring).

    Args:
        fetch: downloads one object into the cache and returns its path (verified).
        is_cached: True when an object is already in the cache (never queued); a cheap check
            (the file exists): the reader verifies the copy when it opens it, as always.
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
        self._pending: deque[Iterator[str]] = deque()  # announced, pulled lazily
        self._seen: set[str] = set()  # started or read: never started again
        self._ahead: set[str] = set()  # started by the prefetcher and not yet read
        self._running = 0
        self._threads: set[threading.Thread] = set()

    def _check_fork(self) -> None:
        if self._pid != os.getpid():  # a forked child: the parent's threads are not here
            self._lock = threading.RLock()
            self._reset()

    # ---------------------------------------------------------------------------- use
    def announce(self, digests: Iterable[str], *, first: bool = False) -> None:
        """Queue objects that will be read soon, in the order given; returns at once.

        ``digests`` is consumed lazily, only as far as the bounds let downloads start (announcing
        every object of a 100,000-segment dataset costs nothing up front); objects already
        started, read or present in the cache are skipped. With ``first`` they go before what
        earlier calls announced (a reader that learns its order late: the objects it needs
        soonest come first); downloads already running go on."""
        self._check_fork()
        with self._lock:
            if first:
                self._pending.appendleft(iter(digests))
            else:
                self._pending.append(iter(digests))
            self._pump()

    def claimed(self, digest: str) -> None:
        """The reader has read ``digest``: it no longer counts against ``max_ahead``."""
        self._check_fork()
        with self._lock:
            self._seen.add(digest)  # read on demand: never worth prefetching any more
            if digest in self._ahead:
                self._ahead.discard(digest)
                self._pump()

    @property
    def ahead(self) -> int:
        """Objects prefetched or being prefetched and not yet read."""
        with self._lock:
            return len(self._ahead)

    @property
    def running(self) -> int:
        """Downloads in progress."""
        with self._lock:
            return self._running

    # ------------------------------------------------------------------------ running
    def _next(self) -> str | None:
        """The next announced object worth downloading, or None (holding ``_lock``)."""
        while self._pending:
            try:
                digest = next(self._pending[0], None)
            except Exception:  # a hint that cannot be followed is dropped, never raised
                digest = None
            if digest is None:
                self._pending.popleft()
            elif digest not in self._seen and not self._is_cached(digest):
                return digest
        return None

    def _pump(self) -> None:
        """Start downloads while both bounds allow (holding ``_lock``)."""
        while self._running < self.max_in_flight and len(self._ahead) < self.max_ahead:
            digest = self._next()
            if digest is None:
                return
            # Daemon threads (at most max_in_flight alive): a process that exits does not wait
            # for read-ahead nobody will read; the cache sweeps the partial file later.
            thread = threading.Thread(target=self._run, args=(digest,), daemon=True,
                                      name="rayform-prefetch")
            self._seen.add(digest)
            self._running += 1
            self._ahead.add(digest)
            self._threads.add(thread)
            thread.start()

    def _run(self, digest: str) -> None:
        failed = False
        try:
            self._fetch(digest)
        except Exception:  # dropped: the reader's own request fetches it and raises the error
            failed = True
        with self._lock:
            self._running -= 1
            self._threads.discard(threading.current_thread())
            if failed:
                self._ahead.discard(digest)
            self._pump()

    def close(self) -> None:
        """Drop what is pending and wait for the running downloads."""
        with self._lock:
            self._pending.clear()
            threads = list(self._threads)
        for thread in threads:
            thread.join()
