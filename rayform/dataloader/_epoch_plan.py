"""One process's plan for a pass: which samples, fetched in which blocks, emitted in which order.

A :class:`ProcessStream` is what the iterable dataset's single run loop consumes, whatever the order
comes from: the live shuffle strategy (:func:`contiguous_stream`, :func:`stable_stream`) or a frozen
:class:`~rayform.dataloader.Manifest`, whose rows for one (rank, worker) were produced by these same
functions when it was scheduled, minus the samples it found incomplete (:meth:`ProcessStream.keep`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rayform.dataloader._partition import StreamPosition, contiguous_shard, fetch_blocks
from rayform.dataloader._shuffle import Order, Seed, ShuffleBuffer
from rayform.dataloader._stable_order import StableOrder


@dataclass(frozen=True, slots=True)
class ProcessStream:
    """What one process produces in one pass.

    Attributes:
        indices: global sample indices, in fetch order.
        fetches: ``(start, stop)`` position ranges into ``indices``, one per fetch block.
        emission: positions into ``indices``, in the order samples are yielded.
        start: emission entries already consumed (resume).
        stable_base: canonical position of the stream start (:class:`StableOrder` only).
    """

    indices: npt.NDArray[np.int64]
    fetches: list[tuple[int, int]]
    emission: npt.NDArray[np.int64]
    start: int = 0
    stable_base: int = 0

    def fetch_groups(self) -> npt.NDArray[np.int64]:
        """The fetch block number of every position."""
        groups = np.zeros(len(self.indices), dtype=np.int64)
        for number, (lo, hi) in enumerate(self.fetches):
            groups[lo:hi] = number
        return groups

    def emit_rank(self) -> npt.NDArray[np.int64]:
        """The emission slot of every position (the inverse of ``emission``)."""
        ranks = np.empty(len(self.emission), dtype=np.int64)
        ranks[self.emission] = np.arange(len(self.emission), dtype=np.int64)
        return ranks

    def keep(self, mask: npt.NDArray[np.bool_]) -> ProcessStream:
        """The stream without the positions where ``mask`` is False.

        Fetch blocks keep their surviving samples (empty blocks vanish) and the emission order keeps
        its relative order, so the result yields exactly what the full stream yields once the
        dropped samples are skipped.
        """
        new_position = np.cumsum(mask, dtype=np.int64) - 1
        groups = self.fetch_groups()[mask]
        cuts = np.flatnonzero(np.diff(groups)) + 1
        starts = np.concatenate([[0], cuts]).astype(np.int64) if len(groups) else np.zeros(0, np.int64)
        stops = np.concatenate([cuts, [len(groups)]]).astype(np.int64) if len(groups) \
            else np.zeros(0, np.int64)
        emission = new_position[self.emission[mask[self.emission]]]
        return ProcessStream(indices=self.indices[mask],
                             fetches=list(zip(starts.tolist(), stops.tolist(), strict=True)),
                             emission=emission.astype(np.int64))

    def resumed(self, start: int, *, stable_base: int = 0) -> ProcessStream:
        """The same stream, ``start`` emission entries already consumed."""
        return ProcessStream(self.indices, self.fetches, self.emission,
                             min(start, len(self.emission)), stable_base)


def contiguous_stream(order: Order, pos: StreamPosition, *, fetch_block_size: int,
                      buffer: ShuffleBuffer | None, buffer_seed: Seed) -> ProcessStream:
    """Rerun's partition: a contiguous shard per rank, then per worker, then fetch blocks.

    Args:
        order: the epoch order ``(indices, block_bounds)`` of a shuffle strategy.
        pos: the (rank, worker) to plan for.
        fetch_block_size: samples per fetch.
        buffer: the strategy's emission buffer, if any.
        buffer_seed: the seed of the buffer's generator (``[epoch, rank, worker]`` in Rerun).
    """
    indices, bounds = order
    indices, bounds = contiguous_shard(indices, bounds, pos.rank, pos.world_size)
    indices, bounds = contiguous_shard(indices, bounds, pos.worker_id, pos.num_workers)
    fetches = fetch_blocks(bounds, fetch_block_size)
    if buffer is None:
        emission = np.arange(len(indices), dtype=np.int64)
    else:
        emission = buffer.emit_order(len(indices), np.random.default_rng(buffer_seed))
    return ProcessStream(indices, fetches, emission)


def stable_stream(canonical: npt.NDArray[np.int64], stable: StableOrder, pos: StreamPosition, *,
                  fetch_block_size: int, start: int) -> ProcessStream:
    """:class:`StableOrder`'s partition of ``canonical[start:]`` (already filtered and buffered)."""
    mine = stable.stream(canonical, start=start, rank=pos.rank, world_size=pos.world_size,
                         worker_id=pos.worker_id, num_workers=pos.num_workers)
    fetches = [(s, min(s + fetch_block_size, len(mine)))
               for s in range(0, len(mine), fetch_block_size)]
    return ProcessStream(mine, fetches, np.arange(len(mine), dtype=np.int64), 0, start)
