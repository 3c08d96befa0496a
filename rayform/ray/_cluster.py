"""Connecting to Ray and running one function over many inputs as Ray tasks (bounded, fail-fast)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from rayform._optional import require
from rayform.errors import ConfigError

_T = TypeVar("_T")


def require_ray() -> ModuleType:
    """The ``ray`` module, or an ``ImportError`` saying ``pip install 'rayform[ray]'``."""
    return require("ray", extra="ray", feature="rayform.ray")


def connect(address: str | None = None, **init_kwargs: Any) -> None:
    """Connect this process to a Ray cluster, or start a local one; no-op when already connected.

    Args:
        address: ``"auto"`` (a cluster started with ``ray start`` on this machine),
            ``"HOST:PORT"`` of a head node, ``"ray://HOST:10001"`` (Ray Client), or ``None`` to
            start a local cluster (the ``--ray`` CLI flag without an address).
        **init_kwargs: passed to ``ray.init`` (``num_cpus=…``, ``include_dashboard=False`` …).
    """
    ray = require_ray()
    if ray.is_initialized():
        return
    ray.init(address=address, **init_kwargs)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskOptions:
    """How work is spread over the Ray cluster.

    Attributes:
        num_cpus: CPUs reserved by each task.
        max_concurrency: at most this many tasks in flight (``None``: as many as there are
            units of work; Ray then runs as many as the cluster has CPUs for).
        segments_per_task: segments handled by one task (statistics, reads); larger values cut
            the per-task overhead when segments are small.
    """

    num_cpus: float = 1.0
    max_concurrency: int | None = None
    segments_per_task: int = 1

    def __post_init__(self) -> None:
        if not self.num_cpus > 0:
            raise ConfigError(f"TaskOptions.num_cpus must be > 0, got {self.num_cpus!r}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ConfigError(
                f"TaskOptions.max_concurrency must be >= 1 or None, got {self.max_concurrency!r}"
            )
        if self.segments_per_task < 1:
            raise ConfigError(
                f"TaskOptions.segments_per_task must be >= 1, got {self.segments_per_task!r}"
            )


def batched(items: Sequence[_T], size: int) -> list[list[_T]]:
    """Consecutive groups of at most ``size`` items."""
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def run_tasks(fn: Callable[..., _T], calls: Sequence[tuple[Any, ...]],
              options: TaskOptions | None = None) -> list[_T]:
    """Run ``fn(*args)`` for each ``args`` in ``calls`` as Ray tasks; results in call order.

    At most ``options.max_concurrency`` tasks are in flight. The first task to fail cancels the
    others and its own exception is raised here (chained to Ray's error, which carries the remote
    traceback), so callers catch the same errors as in a single process.
    """
    ray = require_ray()
    opts = options or TaskOptions()
    remote = ray.remote(num_cpus=opts.num_cpus)(fn)
    limit = opts.max_concurrency or max(1, len(calls))
    results: list[Any] = [None] * len(calls)
    pending: dict[Any, int] = {}
    queue = iter(enumerate(calls))
    try:
        while True:
            while len(pending) < limit:
                item = next(queue, None)
                if item is None:
                    break
                position, args = item
                pending[remote.remote(*args)] = position
            if not pending:
                return results
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                results[pending.pop(ref)] = ray.get(ref)
    except ray.exceptions.RayError as err:  # a task raised, or its worker died
        for ref in pending:
            ray.cancel(ref)
        cause = getattr(err, "cause", None)
        if isinstance(err, ray.exceptions.RayTaskError) and isinstance(cause, Exception):
            raise cause from err
        raise


__all__ = ["TaskOptions", "batched", "connect", "require_ray", "run_tasks"]
