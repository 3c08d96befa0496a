"""Resumable samplers for the map datasets: a deterministic, DDP-sharded order with mid-epoch resume.

An epoch's order is a pure function of ``(seed, epoch)``; each DDP rank takes every
``num_replicas``-th entry (padded by wrapping, like ``DistributedSampler``, unless ``drop_last``).
``state_dict()`` records how far the rank got; after ``load_state_dict()`` the next pass yields
exactly the entries not yet consumed.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Mapping, Sized
from typing import Any

import numpy as np
import numpy.typing as npt
from torch.utils.data import Sampler

from rayform.errors import ConfigError

SAMPLER_STATE_FORMAT = "rayform.sampler/1"


def _distributed_defaults(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    import torch.distributed as dist

    if num_replicas is None:
        num_replicas = dist.get_world_size() if dist.is_available() and dist.is_initialized() \
            else 1
    if rank is None:
        rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    if num_replicas < 1 or not 0 <= rank < num_replicas:
        raise ConfigError(f"rank {rank!r} must be in [0, num_replicas={num_replicas!r})")
    return num_replicas, rank


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


class EpochSampler(Sampler[int]):
    """Base of the resumable samplers: subclasses give the epoch's global order.

    Args:
        seed: base seed; the order depends on ``(seed, epoch)``.
        num_replicas: DDP world size (default: ``torch.distributed`` if initialised, else 1).
        rank: this process's rank (default: ``torch.distributed``, else 0).
        drop_last: drop the tail that does not divide evenly instead of padding by wrapping.
    """

    def __init__(self, *, seed: int, num_replicas: int | None, rank: int | None,
                 drop_last: bool) -> None:
        self._seed = _check_int("seed", seed, 0)
        self._num_replicas, self._rank = _distributed_defaults(num_replicas, rank)
        self._drop_last = bool(drop_last)
        self._epoch = 0
        self._start = 0
        self._yielded = 0

    @abstractmethod
    def epoch_order(self, epoch: int) -> npt.NDArray[np.int64]:
        """Every entry of one epoch, before DDP sharding."""

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def seed(self) -> int:
        return self._seed

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch; a different epoch starts from its beginning."""
        epoch = _check_int("epoch", epoch, 0)
        if epoch != self._epoch:
            self._start = 0
            self._yielded = 0
        self._epoch = epoch

    def rank_order(self, epoch: int | None = None) -> npt.NDArray[np.int64]:
        """This rank's entries of an epoch (the current one by default)."""
        order = self.epoch_order(self._epoch if epoch is None else epoch)
        n, world = len(order), self._num_replicas
        if self._drop_last:
            total = (n // world) * world
            order = order[:total]
        elif n % world and n:
            total = -(-n // world) * world
            order = np.resize(order, total)
        out: npt.NDArray[np.int64] = order[self._rank::world]
        return out

    def __len__(self) -> int:
        return max(0, len(self.rank_order()) - self._start)

    def __iter__(self) -> Iterator[int]:
        order = self.rank_order()
        start, self._start = self._start, 0
        self._yielded = start
        for value in order[start:].tolist():
            self._yielded += 1
            yield value

    def state_dict(self, *, num_samples: int | None = None) -> dict[str, Any]:
        """Where this rank stands in the epoch.

        Args:
            num_samples: samples the training loop consumed this epoch on this rank; ``None``:
                what this sampler yielded (exact with ``num_workers=0``; worker processes
                prefetch ahead, so pass the count there).
        """
        position = self._yielded if num_samples is None else _check_int(
            "num_samples", num_samples, 0)
        return {"format": SAMPLER_STATE_FORMAT, "epoch": self._epoch, "seed": self._seed,
                "num_replicas": self._num_replicas, "position": int(position)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume: the next pass yields this rank's entries after ``position``.

        Raises:
            ConfigError: a state of another format, seed or world size.
        """
        expected = {"format", "epoch", "seed", "num_replicas", "position"}
        if set(state) != expected or state["format"] != SAMPLER_STATE_FORMAT:
            raise ConfigError(
                f"load_state_dict expects a sampler state with keys {sorted(expected)} and "
                f"format {SAMPLER_STATE_FORMAT!r}, got keys {sorted(state)}"
            )
        if state["seed"] != self._seed or state["num_replicas"] != self._num_replicas:
            raise ConfigError(
                f"the saved state used seed={state['seed']!r}, num_replicas="
                f"{state['num_replicas']!r}; this sampler has seed={self._seed!r}, "
                f"num_replicas={self._num_replicas!r}"
            )
        self._epoch = _check_int("epoch", state["epoch"], 0)
        self._start = _check_int("position", state["position"], 0)
        self._yielded = self._start


class ResumableSampler(EpochSampler):
    """A shuffling, DDP-aware sampler for map datasets, with mid-epoch resume.

    Args:
        data_source: the dataset (or its length).
        shuffle: permute with ``default_rng([seed, epoch])``; otherwise natural order.
        seed: base seed.
        num_replicas: DDP world size (default from ``torch.distributed``).
        rank: DDP rank (default from ``torch.distributed``).
        drop_last: drop the uneven tail instead of padding by wrapping.
    """

    def __init__(self, data_source: Sized | int, *, shuffle: bool = True, seed: int = 0,
                 num_replicas: int | None = None, rank: int | None = None,
                 drop_last: bool = False) -> None:
        super().__init__(seed=seed, num_replicas=num_replicas, rank=rank, drop_last=drop_last)
        self._length = data_source if isinstance(data_source, int) else len(data_source)
        self._shuffle = bool(shuffle)

    def epoch_order(self, epoch: int) -> npt.NDArray[np.int64]:
        if not self._shuffle:
            return np.arange(self._length, dtype=np.int64)
        order: npt.NDArray[np.int64] = np.random.default_rng([self._seed, epoch]).permutation(
            self._length).astype(np.int64)
        return order
