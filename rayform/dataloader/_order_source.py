"""Where a pass's order comes from: the live shuffle strategy, or (in ``_manifest_replay``) a manifest.

The iterable dataset has one run loop. An :class:`OrderSource` gives it the
:class:`~rayform.dataloader._epoch_plan.ProcessStream` of the calling process, says how to turn a
consumed count into a resumable position, and how samples with missing fields are handled
(:class:`SampleScreen`): the live order skips them (Rerun's rule, :class:`SkipIncomplete`), a
manifest already dropped them, so a missing required field there is an error.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from rayform.dataloader._epoch_plan import ProcessStream, contiguous_stream, stable_stream
from rayform.dataloader._partition import StreamPosition
from rayform.dataloader._shuffle import Seed, ShuffleStrategy
from rayform.dataloader._skipping import SkipCounter
from rayform.dataloader._stable_order import StableOrder
from rayform.errors import ConfigError

if TYPE_CHECKING:
    from rayform.dataloader._block_columns import Sample
    from rayform.dataloader._pipeline import SamplePipeline
    from rayform.dataloader._sample_index import SampleIndex

_MASK_CHUNK = 8192


class SampleScreen(ABC):
    """Decides, sample by sample, whether a decoded sample is yielded."""

    @abstractmethod
    def admit(self, sample: Sample, keys: Sequence[str], sample_id: int) -> bool:
        """True: yield ``sample`` (global index ``sample_id``); False: skip it. May raise."""

    def admit_complete(self, count: int) -> None:
        """Record ``count`` consecutive samples that have every value (all are yielded)."""
        return None

    def admit_many(self, missing: Mapping[str, npt.NDArray[np.bool_]],
                   sample_ids: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """:meth:`admit` for consecutive samples at once, given per key which have no value."""
        keys = list(missing)
        out = np.ones(len(sample_ids), dtype=np.bool_)
        for i, sample_id in enumerate(sample_ids.tolist()):
            sample = {key: None if missing[key][i] else True for key in keys}
            out[i] = self.admit(sample, keys, sample_id)
        return out


class SkipIncomplete(SampleScreen):
    """Skip samples with a ``None`` field, warning once per field, up to a consecutive limit."""

    def __init__(self, limit: int | None) -> None:
        self._counter = SkipCounter(limit)

    def admit(self, sample: Sample, keys: Sequence[str], sample_id: int) -> bool:
        missing = [k for k in keys if sample[k] is None]
        if missing:
            self._counter.skip(missing)
            return False
        self._counter.keep()
        return True

    def admit_complete(self, count: int) -> None:
        if count:
            self._counter.keep()

    def admit_many(self, missing: Mapping[str, npt.NDArray[np.bool_]],
                   sample_ids: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        if len(sample_ids) and not any(bool(m.any()) for m in missing.values()):
            self._counter.keep()
            return np.ones(len(sample_ids), dtype=np.bool_)
        return super().admit_many(missing, sample_ids)


class OrderSource(ABC):
    """The order of an iterable dataset's passes."""

    @property
    @abstractmethod
    def state_tag(self) -> str:
        """The ``"order"`` recorded in ``state_dict()`` (states resume only the same kind)."""

    @property
    @abstractmethod
    def seed(self) -> int | None:
        """The base seed recorded in ``state_dict()``."""

    @abstractmethod
    def stream(self, pipeline: SamplePipeline, pos: StreamPosition, *, epoch: int, start: int
               ) -> ProcessStream:
        """This process's stream for ``epoch``, the first ``start`` samples already consumed."""

    @abstractmethod
    def screen(self, sample_index: SampleIndex) -> SampleScreen:
        """A fresh screen for one pass over ``sample_index``."""

    def position(self, stream: ProcessStream, consumed_here: int, pos: StreamPosition) -> int:
        """The resumable position after this process consumed ``consumed_here`` samples."""
        return stream.start + consumed_here

    def position_after(self, num_samples: int, *, world_size: int) -> int:
        """The resumable position after one rank's training loop consumed ``num_samples``."""
        return num_samples


def refuse_worker_resume(pos: StreamPosition, start: int) -> None:
    """Contiguous worker shards interleave in the DataLoader: a rank count maps to no shard position.

    Raises:
        ConfigError: resuming mid-epoch inside a DataLoader worker.
    """
    if pos.in_worker and start:
        raise ConfigError(
            "resuming mid-epoch inside DataLoader worker processes needs "
            "stable_order=StableOrder(batch_size=…) (the default contiguous worker shards "
            "interleave); or resume with num_workers=0"
        )


class LiveOrder(OrderSource):
    """The shuffle strategy's order for each epoch (seeded by the epoch, or ``(seed, epoch)``).

    Args:
        strategy: the shuffle strategy.
        fetch_block_size: samples per fetch.
        seed: a base seed, or ``None`` (Rerun: the epoch alone).
        stable: deal chunks of the canonical sequence instead of contiguous shards.
        max_skipped: the consecutive-skip limit (``None``: unlimited).
    """

    def __init__(self, strategy: ShuffleStrategy, *, fetch_block_size: int, seed: int | None,
                 stable: StableOrder | None, max_skipped: int | None) -> None:
        self.strategy = strategy
        self.fetch_block_size = fetch_block_size
        self._seed = seed
        self._stable = stable
        self._max_skipped = max_skipped
        self._valid: npt.NDArray[np.bool_] | None = None
        self._missing: dict[str, npt.NDArray[np.bool_]] | None = None

    @property
    def state_tag(self) -> str:
        return "stable" if self._stable is not None else "contiguous"

    @property
    def seed(self) -> int | None:
        return self._seed

    def seed_for(self, epoch: int, *parts: int) -> Seed:
        head = [epoch] if self._seed is None else [self._seed, epoch]
        values = head + list(parts)
        return values[0] if len(values) == 1 else values

    def stream(self, pipeline: SamplePipeline, pos: StreamPosition, *, epoch: int, start: int
               ) -> ProcessStream:
        order = self.strategy.epoch_order(pipeline.sample_index,
                                          fetch_block_size=self.fetch_block_size,
                                          seed=self.seed_for(epoch))
        if self._stable is not None:
            return self._stable_stream(pipeline, order[0], pos, epoch, start)
        refuse_worker_resume(pos, start)
        stream = contiguous_stream(order, pos, fetch_block_size=self.fetch_block_size,
                                   buffer=self.strategy.emission_buffer(),
                                   buffer_seed=self.seed_for(epoch, pos.rank, pos.worker_id))
        return stream.resumed(start)

    def _stable_stream(self, pipeline: SamplePipeline, indices: npt.NDArray[np.int64],
                       pos: StreamPosition, epoch: int, start: int) -> ProcessStream:
        assert self._stable is not None
        valid, missing = self._valid_mask(pipeline)
        self._account_prefiltered(indices, valid, missing)
        canonical = indices[valid[indices]]
        buffer = self.strategy.emission_buffer()
        if buffer is not None:
            rng = np.random.default_rng(self.seed_for(epoch))
            canonical = canonical[buffer.emit_order(len(canonical), rng)]
        return stable_stream(canonical, self._stable, pos, fetch_block_size=self.fetch_block_size,
                             start=min(start, len(canonical)))

    def _valid_mask(self, pipeline: SamplePipeline
                    ) -> tuple[npt.NDArray[np.bool_], dict[str, npt.NDArray[np.bool_]]]:
        """Which samples have data for every field (index-level check, cached per process)."""
        if self._valid is None or self._missing is None:
            self._missing = missing_masks(pipeline)
            valid = np.ones(pipeline.sample_index.total_samples, dtype=np.bool_)
            for mask in self._missing.values():
                valid &= ~mask
            self._valid = valid
        return self._valid, self._missing

    def _account_prefiltered(self, indices: npt.NDArray[np.int64], valid: npt.NDArray[np.bool_],
                             missing: dict[str, npt.NDArray[np.bool_]]) -> None:
        """Apply the skip rules (warnings, consecutive limit) to samples dropped up front."""
        dropped = ~valid[indices]
        if not dropped.any():
            return
        edges = np.diff(np.concatenate([[0], dropped.astype(np.int8), [0]]))
        longest = int((np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)).max())
        per_field = {k: int(m[indices].sum()) for k, m in missing.items()}
        SkipCounter(self._max_skipped).skip_runs(per_field, int(dropped.sum()), longest)

    def screen(self, sample_index: SampleIndex) -> SampleScreen:
        return SkipIncomplete(self._max_skipped)

    def position(self, stream: ProcessStream, consumed_here: int, pos: StreamPosition) -> int:
        if self._stable is None:
            return stream.start + consumed_here
        return stream.stable_base + self._stable.position_after(consumed_here,
                                                                world_size=pos.world_size)

    def position_after(self, num_samples: int, *, world_size: int) -> int:
        if self._stable is None:
            return num_samples
        return self._stable.position_after(num_samples, world_size=world_size)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_valid"] = state["_missing"] = None  # recomputed per process, not shipped
        return state


def missing_masks(pipeline: SamplePipeline) -> dict[str, npt.NDArray[np.bool_]]:
    """Per field, which samples of the whole sample space have no data (index alone, in chunks)."""
    total = pipeline.sample_index.total_samples
    missing = {key: np.zeros(total, dtype=np.bool_) for key in pipeline.keys}
    for lo in range(0, total, _MASK_CHUNK):
        chunk = np.arange(lo, min(lo + _MASK_CHUNK, total), dtype=np.int64)
        for key, mask in pipeline.missing_fields(chunk).items():
            missing[key][lo:lo + len(chunk)] = mask
    return missing
