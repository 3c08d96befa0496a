"""RerunIterableDataset: a shuffled, sharded stream of samples (Rerun 0.41 API, plus resume).

One pass (``__iter__``):

1. the shuffle strategy's epoch order, seeded by the epoch (``set_epoch``), or by
   ``(seed, epoch)`` when a ``seed`` is given;
2. a contiguous shard per DDP rank (``torch.distributed``), then per DataLoader worker
   (or, with :class:`StableOrder`, chunks of the canonical sequence dealt round-robin);
3. fetch blocks of up to ``fetch_block_size`` samples, each decoded in one pipeline pass while the
   previous block is being consumed (one block of lookahead on a background thread);
4. the ``BlockShuffle(buffer_size=…)`` stream shuffle, if any, seeded by ``[epoch, rank, worker]``;
5. samples with a ``None`` field are skipped (warned once per field); more than
   ``max_consecutive_skipped_samples`` in a row raise ``RuntimeError``.

``len(ds)`` is the global number of samples. Mid-epoch resume: ``state_dict()`` /
``load_state_dict()``; the next pass continues with exactly the samples not yet consumed (see
:meth:`RerunIterableDataset.state_dict`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from torch.utils.data import IterableDataset

from rayform.dataloader._config import DataSource, EdgeMode, Field
from rayform.dataloader._map_dataset import build_pipeline
from rayform.dataloader._partition import StreamPosition, contiguous_shard, fetch_blocks
from rayform.dataloader._pipeline import Sample
from rayform.dataloader._sample_index import FixedRateSampling, SampleIndex
from rayform.dataloader._shuffle import SampleShuffle, Seed, ShuffleStrategy, check_block_size
from rayform.dataloader._skipping import (
    DEFAULT_MAX_CONSECUTIVE_SKIPPED,
    SkipCounter,
    check_max_skipped,
)
from rayform.dataloader._stable_order import StableOrder
from rayform.decoders._thread_pool import ThreadPool
from rayform.errors import ConfigError

STATE_FORMAT = "rayform.RerunIterableDataset/1"
_MASK_CHUNK = 8192


@dataclass(frozen=True, slots=True)
class _Stream:
    """What one process produces in one pass."""

    indices: npt.NDArray[np.int64]  # global indices, in fetch order
    fetches: list[tuple[int, int]]  # position ranges into ``indices``
    emission: npt.NDArray[np.int64]  # positions, in emission order
    start: int  # emission entries already consumed (resume)
    stable_base: int  # canonical position of the stream start (StableOrder)


class RerunIterableDataset(IterableDataset[Sample]):
    """An iterable dataset over a catalog dataset: shuffled, sharded, skipping incomplete samples.

    Args:
        source: the dataset and optional segment list.
        index: the index timeline.
        fields: sample key -> :class:`Field`.
        timeline_sampling: the grid on timestamp / duration timelines (required there).
        fetch_block_size: samples per fetch and decode pass.
        shuffle_strategy: :class:`SampleShuffle` (default), :class:`BlockShuffle` or
            :class:`NoShuffle`.
        decode_threads: decode threads per process (``None``: one per CPU up to 8 in the main
            process, 1 inside a DataLoader worker).
        max_consecutive_skipped_samples: give up after this many incomplete samples in a row
            (``None``: never).
        edge: ``"trim"`` or ``"pad"`` (see :data:`~rayform.dataloader.EdgeMode`).
        sample_metadata: add ``sample["meta"]`` (segment id and version, index value, index).
        seed: a base seed; orders then depend on ``(seed, epoch)``. ``None`` (Rerun): the epoch.
        stable_order: make the sequence independent of ``num_workers`` and the number of ranks.
    """

    def __init__(self, source: DataSource, index: str, fields: Mapping[str, Field], *,
                 timeline_sampling: FixedRateSampling | None = None,
                 fetch_block_size: int = 128,
                 shuffle_strategy: ShuffleStrategy | None = None,
                 decode_threads: int | None = None,
                 max_consecutive_skipped_samples: int | None = DEFAULT_MAX_CONSECUTIVE_SKIPPED,
                 edge: EdgeMode = "trim",
                 sample_metadata: bool = False,
                 seed: int | None = None,
                 stable_order: StableOrder | None = None) -> None:
        super().__init__()
        check_block_size(fetch_block_size)
        if shuffle_strategy is not None and not isinstance(shuffle_strategy, ShuffleStrategy):
            raise TypeError(f"shuffle_strategy must be SampleShuffle(), BlockShuffle(…) or "
                            f"NoShuffle(), got {shuffle_strategy!r}")
        if stable_order is not None and not isinstance(stable_order, StableOrder):
            raise TypeError(f"stable_order must be StableOrder(batch_size=…), got {stable_order!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ConfigError(f"seed must be an integer >= 0 or None, got {seed!r}")
        self._max_skipped = check_max_skipped(max_consecutive_skipped_samples)
        self._pipeline = build_pipeline(source, index, fields,
                                        timeline_sampling=timeline_sampling,
                                        decode_threads=decode_threads, edge=edge,
                                        sample_metadata=sample_metadata)
        self._fields = dict(fields)
        self._fetch_block_size = int(fetch_block_size)
        self._strategy: ShuffleStrategy = shuffle_strategy or SampleShuffle()
        self._seed = seed
        self._stable = stable_order
        self._epoch = 0
        self._resume_position = 0
        self._consumed = 0
        self._valid: npt.NDArray[np.bool_] | None = None
        self._missing: dict[str, npt.NDArray[np.bool_]] | None = None
        self._prefetch = ThreadPool(1, name="rayform-fetch", background=True)

    # ------------------------------------------------------------------------ properties
    @property
    def sample_index(self) -> SampleIndex:
        return self._pipeline.sample_index

    @property
    def fields(self) -> dict[str, Field]:
        return dict(self._fields)

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def shuffle_strategy(self) -> ShuffleStrategy:
        return self._strategy

    def __len__(self) -> int:
        """The global number of samples (not per rank or worker), as in Rerun."""
        return self._pipeline.sample_index.total_samples

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch (the shuffle seed); a new epoch starts from its beginning."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ConfigError(f"set_epoch needs an integer >= 0, got {epoch!r}")
        if epoch != self._epoch:
            self._resume_position = 0
            self._consumed = 0
        self._epoch = epoch

    def __repr__(self) -> str:
        return (f"RerunIterableDataset({self._pipeline.view.name!r}, "
                f"fields={sorted(self._fields)}, samples={len(self)}, "
                f"shuffle_strategy={self._strategy!r}, epoch={self._epoch})")

    # ------------------------------------------------------------------------ resume
    def state_dict(self, *, num_samples: int | None = None) -> dict[str, Any]:
        """Where this epoch stands, for a checkpoint.

        Args:
            num_samples: samples this rank's training loop consumed this epoch. ``None``: what
                this process's own iterator yielded (exact with ``num_workers=0``). With worker
                processes the main process cannot see consumption, so pass the count (it maps to a
                position exactly with ``stable_order``).

        Returns:
            ``{"format", "epoch", "seed", "order", "position"}`` (plain ints and strings).
        """
        position = self._consumed
        if num_samples is not None:
            if isinstance(num_samples, bool) or not isinstance(num_samples, int) \
                    or num_samples < 0:
                raise ConfigError(f"num_samples must be an integer >= 0, got {num_samples!r}")
            if self._stable is not None:
                world = StreamPosition.current().world_size
                position = self._stable.position_after(num_samples, world_size=world)
            else:
                position = num_samples
        return {
            "format": STATE_FORMAT,
            "epoch": self._epoch,
            "seed": self._seed,
            "order": "stable" if self._stable is not None else "contiguous",
            "position": int(position),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume: the next pass continues the saved epoch after its consumed samples.

        Raises:
            ConfigError: a state from another format, seed or ordering.
        """
        expected = {"format", "epoch", "seed", "order", "position"}
        if set(state) != expected or state["format"] != STATE_FORMAT:
            raise ConfigError(
                f"load_state_dict expects a state from RerunIterableDataset.state_dict() with "
                f"keys {sorted(expected)} and format {STATE_FORMAT!r}, got keys {sorted(state)}"
            )
        order = "stable" if self._stable is not None else "contiguous"
        if state["order"] != order or state["seed"] != self._seed:
            raise ConfigError(
                f"the saved state used order={state['order']!r}, seed={state['seed']!r}; this "
                f"dataset uses order={order!r}, seed={self._seed!r}; build it the same way"
            )
        position = state["position"]
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise ConfigError(f"state position must be an integer >= 0, got {position!r}")
        self._epoch = int(state["epoch"])
        self._resume_position = position
        self._consumed = position

    # ------------------------------------------------------------------------ iteration
    def _seed_for(self, *parts: int) -> Seed:
        head = [self._epoch] if self._seed is None else [self._seed, self._epoch]
        values = head + list(parts)
        return values[0] if len(values) == 1 else values

    def __iter__(self) -> Iterator[Sample]:
        position = StreamPosition.current()
        stream = self._plan(position)
        self._resume_position = 0
        return self._run(stream, position)

    def _plan(self, pos: StreamPosition) -> _Stream:
        index = self._pipeline.sample_index
        indices, bounds = self._strategy.epoch_order(
            index, fetch_block_size=self._fetch_block_size, seed=self._seed_for())
        if self._stable is not None:
            return self._plan_stable(indices, pos)
        if pos.in_worker and self._resume_position:
            raise ConfigError(
                "resuming mid-epoch inside DataLoader worker processes needs "
                "stable_order=StableOrder(batch_size=…) (the default contiguous worker shards "
                "interleave); or resume with num_workers=0"
            )
        indices, bounds = contiguous_shard(indices, bounds, pos.rank, pos.world_size)
        indices, bounds = contiguous_shard(indices, bounds, pos.worker_id, pos.num_workers)
        fetches = fetch_blocks(bounds, self._fetch_block_size)
        buffer = self._strategy.emission_buffer()
        if buffer is None:
            emission = np.arange(len(indices), dtype=np.int64)
        else:
            rng = np.random.default_rng(self._seed_for(pos.rank, pos.worker_id))
            emission = buffer.emit_order(len(indices), rng)
        start = min(self._resume_position, len(indices))
        return _Stream(indices, fetches, emission, start, 0)

    def _plan_stable(self, indices: npt.NDArray[np.int64], pos: StreamPosition) -> _Stream:
        assert self._stable is not None
        valid = self._valid_mask()
        self._account_prefiltered(indices)
        canonical = indices[valid[indices]]
        buffer = self._strategy.emission_buffer()
        if buffer is not None:
            rng = np.random.default_rng(self._seed_for())
            canonical = canonical[buffer.emit_order(len(canonical), rng)]
        start = min(self._resume_position, len(canonical))
        mine = self._stable.stream(canonical, start=start, rank=pos.rank,
                                   world_size=pos.world_size, worker_id=pos.worker_id,
                                   num_workers=pos.num_workers)
        size = self._fetch_block_size
        fetches = [(s, min(s + size, len(mine))) for s in range(0, len(mine), size)]
        return _Stream(mine, fetches, np.arange(len(mine), dtype=np.int64), 0, start)

    def _valid_mask(self) -> npt.NDArray[np.bool_]:
        """Which samples have data for every field (index-level check, cached per process)."""
        if self._valid is None:
            total = self._pipeline.sample_index.total_samples
            missing = {key: np.zeros(total, dtype=np.bool_) for key in self._pipeline.keys}
            for lo in range(0, total, _MASK_CHUNK):
                chunk = np.arange(lo, min(lo + _MASK_CHUNK, total), dtype=np.int64)
                for key, mask in self._pipeline.missing_fields(chunk).items():
                    missing[key][lo:lo + len(chunk)] = mask
            valid = np.ones(total, dtype=np.bool_)
            for mask in missing.values():
                valid &= ~mask
            self._valid, self._missing = valid, missing
        return self._valid

    def _account_prefiltered(self, indices: npt.NDArray[np.int64]) -> None:
        """Apply the skip rules (warnings, consecutive limit) to samples dropped up front."""
        assert self._valid is not None and self._missing is not None
        dropped = ~self._valid[indices]
        if not dropped.any():
            return
        edges = np.diff(np.concatenate([[0], dropped.astype(np.int8), [0]]))
        longest = int((np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)).max())
        per_field = {k: int(m[indices].sum()) for k, m in self._missing.items()}
        SkipCounter(self._max_skipped).skip_runs(per_field, int(dropped.sum()), longest)

    def _run(self, stream: _Stream, pos: StreamPosition) -> Iterator[Sample]:
        counter = SkipCounter(self._max_skipped)
        keys = self._pipeline.keys
        todo = stream.emission[stream.start:]
        self._consumed = stream.start if self._stable is None else stream.stable_base
        consumed_here = 0
        needed = np.zeros(len(stream.indices), dtype=np.bool_)
        needed[todo] = True
        blocks = [np.arange(s, e, dtype=np.int64)[needed[s:e]] for s, e in stream.fetches]
        blocks = [b for b in blocks if len(b)]
        decoded: dict[int, Sample] = {}
        produced = self._prefetched(blocks, stream.indices)
        try:
            for p in todo.tolist():
                while p not in decoded:
                    positions, samples = next(produced)
                    decoded.update(zip(positions.tolist(), samples, strict=True))
                sample = decoded.pop(p)
                consumed_here += 1
                self._track(stream, pos, consumed_here)
                missing = [k for k in keys if sample[k] is None]
                if missing:
                    counter.skip(missing)
                    continue
                counter.keep()
                yield sample
        finally:
            produced.close()

    def _track(self, stream: _Stream, pos: StreamPosition, consumed_here: int) -> None:
        if self._stable is None:
            self._consumed = stream.start + consumed_here
        else:
            self._consumed = stream.stable_base + self._stable.position_after(
                consumed_here, world_size=pos.world_size)

    def _prefetched(self, blocks: list[npt.NDArray[np.int64]], indices: npt.NDArray[np.int64]
                    ) -> Generator[tuple[npt.NDArray[np.int64], list[Sample]], None, None]:
        pending: deque[tuple[npt.NDArray[np.int64], Future[list[Sample]]]] = deque()
        queue = iter(blocks)

        def submit() -> None:
            block = next(queue, None)
            if block is not None:
                pending.append((block, self._prefetch.submit(self._pipeline.process,
                                                             indices[block])))

        submit()
        submit()
        try:
            while pending:
                block, future = pending.popleft()
                samples = future.result()
                submit()
                yield block, samples
        finally:
            for _, future in pending:
                future.cancel()
