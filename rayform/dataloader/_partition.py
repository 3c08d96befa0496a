"""Partitioning an epoch: contiguous shards per DDP rank then per DataLoader worker, fetch blocks.

Shards are contiguous, sample-granular slices of the epoch order: ``N // world`` samples each, the
last shard taking the remainder (sizes differ by at most ``world - 1``). A block cut by a shard
boundary stays contiguous on both sides. Fetches pack whole blocks greedily up to
``fetch_block_size`` samples and split longer blocks at that stride.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class StreamPosition:
    """Where this process sits: DDP rank / world size and DataLoader worker / worker count."""

    rank: int = 0
    world_size: int = 1
    worker_id: int = 0
    num_workers: int = 1
    in_worker: bool = False

    @staticmethod
    def current() -> StreamPosition:
        """The position of the calling process (``torch.distributed`` and DataLoader worker info)."""
        import torch.distributed as dist
        from torch.utils.data import get_worker_info

        rank, world = 0, 1
        if dist.is_available() and dist.is_initialized():
            rank, world = dist.get_rank(), dist.get_world_size()
        info = get_worker_info()
        if info is None:
            return StreamPosition(rank=rank, world_size=world)
        return StreamPosition(rank=rank, world_size=world, worker_id=info.id,
                              num_workers=info.num_workers, in_worker=True)


def contiguous_shard(indices: npt.NDArray[np.int64], block_bounds: npt.NDArray[np.int64],
                     rank: int, world_size: int
                     ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Shard ``rank`` of ``world_size``: a contiguous slice of ``indices`` and its block bounds."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} out of range for world size {world_size}")
    n = len(indices)
    per = n // world_size
    lo = rank * per
    hi = n if rank == world_size - 1 else lo + per
    if hi <= lo:
        return indices[lo:lo], np.zeros(0, dtype=np.int64)
    inner = block_bounds[(block_bounds > lo) & (block_bounds < hi)]
    bounds = np.concatenate([inner, np.array([hi], dtype=np.int64)]) - lo
    return indices[lo:hi], bounds.astype(np.int64)


def fetch_blocks(block_bounds: npt.NDArray[np.int64], fetch_block_size: int
                 ) -> list[tuple[int, int]]:
    """``(start, stop)`` positions of each fetch: whole blocks packed up to ``fetch_block_size``."""
    n = int(block_bounds[-1]) if len(block_bounds) else 0
    sizes = np.diff(block_bounds, prepend=0)
    if len(sizes) and int(sizes.max()) == 1:  # one-sample blocks (SampleShuffle): plain chunks
        return [(s, min(s + fetch_block_size, n)) for s in range(0, n, fetch_block_size)]
    fetches: list[tuple[int, int]] = []
    pack_start = pack_stop = 0
    start = 0
    for end in block_bounds.tolist():
        while start < end:
            if (pack_stop - pack_start) + (end - start) <= fetch_block_size:
                pack_stop = end
                start = end
            elif pack_stop > pack_start:
                fetches.append((pack_start, pack_stop))
                pack_start = pack_stop = start
            else:
                fetches.append((start, start + fetch_block_size))
                start += fetch_block_size
                pack_start = pack_stop = start
    if pack_stop > pack_start:
        fetches.append((pack_start, pack_stop))
    return fetches
