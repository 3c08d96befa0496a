"""Metadata reads started early: several small files a reader will need one after another,
requested at once so that they cost one round trip instead of several.

An :class:`EarlyReads` holds, per key, the pending response of a GET started in the background;
the next read of that key takes it (once) instead of sending a request of its own. The bytes are
the server's answer to the same request, parsed and checked by the same reader afterwards: an
early read changes when a file is fetched, never what is trusted. A response nobody takes within
:data:`EARLY_TTL_S` is dropped (a mutable file read later is fetched afresh), and a forked child
starts with none (the threads stay in the parent).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future

EARLY_TTL_S = 30.0


class EarlyReads:
    """Background GETs whose responses the next read of each key takes (see the module docstring).

    Args:
        get: fetches one key (with the store's retries) and returns its bytes.
    """

    def __init__(self, get: Callable[[str], bytes]) -> None:
        self._get = get
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._pending: dict[str, tuple[float, Future[bytes]]] = {}

    def start(self, keys: Iterable[str]) -> None:
        """Request each key (not already pending) on its own thread; returns at once."""
        for key in keys:
            with self._lock:
                self._check_fork()
                held = self._pending.get(key)
                if held is not None and not _stale(held[0]):
                    continue
                future: Future[bytes] = Future()
                self._pending[key] = (time.monotonic(), future)
            threading.Thread(target=self._run, args=(key, future), daemon=True,
                             name="rayform-early-read").start()

    def take(self, key: str) -> Future[bytes] | None:
        """The early response for ``key`` (removed: a second read fetches again), or None."""
        with self._lock:
            self._check_fork()
            held = self._pending.pop(key, None)
        if held is None or _stale(held[0]):
            return None
        return held[1]

    def _check_fork(self) -> None:
        if self._pid != os.getpid():  # a forked child: the parent's threads are not here
            self._pid = os.getpid()
            self._pending = {}

    def _run(self, key: str, future: Future[bytes]) -> None:
        try:
            data = self._get(key)
        except Exception as err:  # the reader that takes it raises it, as its own GET would
            future.set_exception(err)
        else:
            future.set_result(data)


def _stale(started: float) -> bool:
    return time.monotonic() - started > EARLY_TTL_S
