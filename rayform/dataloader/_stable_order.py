"""StableOrder: a sample sequence that does not depend on the number of workers or DDP ranks.

By default (Rerun's behaviour) each DDP rank and then each DataLoader worker takes a contiguous
shard of the epoch, so the order batches arrive in changes with ``num_workers``. With
``StableOrder(batch_size=B)`` the epoch's *canonical sequence* (the strategy's order, minus samples
with missing data, through the shuffle buffer if any) is cut into chunks of ``B`` samples; chunk
``c`` goes to rank ``c % world_size`` and, within the rank, to worker ``(c // world_size) %
num_workers``. PyTorch's DataLoader takes batches from its workers round-robin, so every rank
receives its chunks in canonical order whatever ``num_workers`` is, and the run as a whole sees
the canonical sequence whatever the number of ranks. Resuming is exact for any topology: skip the
first ``position`` samples of the canonical sequence.

The price: each process checks, once, on the index alone, which samples of the dataset have data
for every field (nothing is decoded), so incomplete samples are dropped before the sequence is cut.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rayform.errors import ConfigError


@dataclass(frozen=True, slots=True, kw_only=True)
class StableOrder:
    """Make the sample sequence independent of ``num_workers`` and of the number of DDP ranks.

    Attributes:
        batch_size: the DataLoader's ``batch_size`` (the chunk each worker produces in turn).
    """

    batch_size: int

    def __post_init__(self) -> None:
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) \
                or self.batch_size < 1:
            raise ConfigError(
                f"StableOrder.batch_size must be the DataLoader's batch_size (an integer >= 1), "
                f"got {self.batch_size!r}"
            )

    def stream(self, canonical: npt.NDArray[np.int64], *, start: int, rank: int,
               world_size: int, worker_id: int, num_workers: int) -> npt.NDArray[np.int64]:
        """The part of ``canonical[start:]`` one (rank, worker) produces, in emission order."""
        rest = canonical[start:]
        size = self.batch_size
        num_chunks = -(-len(rest) // size)
        chunk = np.arange(num_chunks, dtype=np.int64)
        mine = chunk[(chunk % world_size == rank)
                     & ((chunk // world_size) % num_workers == worker_id)]
        if not len(mine):
            return np.zeros(0, dtype=np.int64)
        starts = mine * size
        stops = np.minimum(starts + size, len(rest))
        lengths = stops - starts
        offsets = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        out: npt.NDArray[np.int64] = rest[np.arange(int(lengths.sum()), dtype=np.int64) + offsets]
        return out

    def position_after(self, num_samples: int, *, world_size: int) -> int:
        """Canonical position after one rank consumed ``num_samples`` (whole chunks, in step)."""
        return (num_samples // self.batch_size) * self.batch_size * world_size
