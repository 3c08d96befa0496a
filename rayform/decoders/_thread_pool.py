"""Per-process thread pools for decoding and prefetch (rebuilt after fork, never pickled).

One pool type with one default size serves the dataloader's block decode, its block prefetch and
the video decoder's independent runs.

On a few cores, threads inside one process beat DataLoader worker processes: the JPEG decoders and
PyAV release the GIL, while moving a batch through shared memory costs about as much as decoding
it. Pools are created on first use in the process that uses them, so a dataset pickles (spawn) or
forks without carrying threads along.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from torch.utils.data import get_worker_info

from rayform.errors import ConfigError

_T = TypeVar("_T")

MAX_DEFAULT_THREADS = 8
# Held while a pool is first set up in a process (rare; after a fork the lock is re-created).
_CREATE_LOCK = threading.Lock()


def _new_create_lock() -> None:
    global _CREATE_LOCK
    _CREATE_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_create_lock)


def available_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def default_decode_threads() -> int:
    """This process's share of the CPUs, at most 8 and at least 1: all of them in the main
    process; inside a DataLoader worker, the CPUs divided among the loader's workers and the
    ranks on this machine (``LOCAL_WORLD_SIZE``, as ``torchrun`` sets it), so that N workers on
    M cores run about M decode threads in all (2 workers on 16 cores: 8 each; 16 workers: 1)."""
    cpus = available_cpus()
    info = get_worker_info()
    if info is not None:
        cpus //= max(1, info.num_workers) * local_world_size()
    return max(1, min(MAX_DEFAULT_THREADS, cpus))


def local_world_size() -> int:
    """Training processes on this machine: ``LOCAL_WORLD_SIZE`` when set and valid, else 1."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def check_decode_threads(decode_threads: int | None) -> int | None:
    """Validate a ``decode_threads`` argument.

    Raises:
        ConfigError: not ``None`` and not an integer >= 1.
    """
    if decode_threads is None:
        return None
    if isinstance(decode_threads, bool) or not isinstance(decode_threads, int) or decode_threads < 1:
        raise ConfigError(f"decode_threads must be an integer >= 1 or None, got {decode_threads!r}")
    return decode_threads


class ThreadPool:
    """A lazily created ``ThreadPoolExecutor`` owned by one process.

    Args:
        threads: worker threads, or ``None`` for :func:`default_decode_threads` (decided in the
            process that first uses the pool).
        name: thread name prefix.
        background: run work on a pool thread even with a single thread (prefetching);
            otherwise a one-thread pool runs work in the caller.
        helpers: the caller decodes too, so the pool starts ``threads - 1`` helper threads.
    """

    def __init__(self, threads: int | None, *, name: str, background: bool = False,
                 helpers: bool = False) -> None:
        self._requested = threads
        self._name = name
        self._background = background
        self._helpers = helpers
        self._executor: ThreadPoolExecutor | None = None
        self._threads = 0
        self._pid = -1

    @property
    def threads(self) -> int:
        """Threads this process uses (decided on first use)."""
        self._ensure()
        return self._threads

    def _ensure(self) -> ThreadPoolExecutor | None:
        pid = os.getpid()
        if self._pid == pid and (self._executor is not None or not self._wants_executor()):
            return self._executor
        with _CREATE_LOCK:  # two threads' first use must not start two executors
            if self._pid != pid:
                self._threads = self._requested or default_decode_threads()
                self._executor = None
                self._pid = pid
            if self._executor is None and self._wants_executor():
                workers = self._workers()
                self._executor = ThreadPoolExecutor(workers, thread_name_prefix=self._name)
        return self._executor

    def _workers(self) -> int:
        """Pool threads: all of :attr:`threads`, or all but the caller's when it helps."""
        return self._threads - 1 if self._helpers else self._threads

    def _wants_executor(self) -> bool:
        workers = self._workers()
        return workers >= 1 and (self._threads > 1 or self._background)

    def submit(self, fn: Callable[..., _T], *args: Any) -> Future[_T]:
        """Run ``fn`` on a pool thread (or right here, when the pool has a single thread)."""
        executor = self._ensure()
        if executor is None:
            future: Future[_T] = Future()
            try:
                future.set_result(fn(*args))
            except BaseException as err:  # delivered through the future, like the executor does
                future.set_exception(err)
            return future
        return executor.submit(fn, *args)

    def map(self, fn: Callable[[_T], object], jobs: Sequence[_T]) -> None:
        """Run ``fn`` on every job, concurrently when the pool has threads; re-raise the first error.

        All jobs finish before this returns, even when one fails.
        """
        executor = self._ensure()
        if executor is None or len(jobs) <= 1:
            for job in jobs:
                fn(job)
            return
        local = jobs[:1] if self._helpers else []
        futures = [executor.submit(fn, job) for job in jobs[len(local):]]
        error: BaseException | None = None
        for job in local:
            try:
                fn(job)
            except BaseException as err:  # re-raised once the helpers are done
                error = err
        for future in futures:
            exc = future.exception()
            if exc is not None and error is None:
                error = exc
        if error is not None:
            raise error

    def drain(self, fn: Callable[[_T], object], jobs: Sequence[_T]) -> None:
        """Run ``fn`` on every job: the caller and the pool threads take jobs from one queue.

        Jobs start in order, each on whichever thread is free first, so a thread the machine
        slows down does not hold up the rest (give more jobs than threads for that). After a
        failure no further job starts; the first error is re-raised once running jobs end.
        """
        executor = self._ensure()
        if executor is None or len(jobs) <= 1:
            for job in jobs:
                fn(job)
            return
        queue = deque(jobs)
        errors: list[BaseException] = []

        def take_jobs() -> None:
            while not errors:
                try:
                    job = queue.popleft()  # atomic: no two threads take the same job
                except IndexError:
                    return
                try:
                    fn(job)
                except BaseException as err:  # re-raised by the caller
                    errors.append(err)
                    queue.clear()

        workers = self._workers()
        helpers = [executor.submit(take_jobs) for _ in range(min(workers, len(jobs) - 1))]
        take_jobs()
        for helper in helpers:
            helper.result()
        if errors:
            raise errors[0]

    def shutdown(self) -> None:
        if self._executor is not None and self._pid == os.getpid():
            self._executor.shutdown(wait=False, cancel_futures=True)
        self._executor = None

    def __getstate__(self) -> dict[str, Any]:
        return {"threads": self._requested, "name": self._name, "background": self._background,
                "helpers": self._helpers}

    def __setstate__(self, state: dict[str, Any]) -> None:
        ThreadPool.__init__(self, state["threads"], name=state["name"],
                            background=state["background"], helpers=state["helpers"])
