"""Weighted mixing of several sources: MixtureDataset (common keys) and WeightedMixSampler.

Each source is a :class:`RerunMapDataset` over any dataset or segment selection, with its own
column paths and timeline, mapped to the same sample keys::

    mix = MixtureDataset({
        "lab": RerunMapDataset(DataSource(lab), "frame_index",
                               {"state": Field("/arm/q:Scalars:scalars", NumericDecoder())}),
        "field": RerunMapDataset(DataSource(field), "frame_index",
                                 {"state": Field("/robot/joints:Scalars:scalars", NumericDecoder())}),
    })
    sampler = WeightedMixSampler(mix, {"lab": 0.8, "field": 0.2}, num_samples=10_000, seed=0)
    loader = DataLoader(mix, batch_size=32, sampler=sampler)

Each epoch draws ``num_samples`` sources with probabilities proportional to the weights, then walks
each source through its own permutation (a fresh one every time a source is used up), all as a
pure function of ``(seed, epoch)``. The sampler shards across DDP ranks and resumes mid-epoch like
:class:`ResumableSampler`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from torch.utils.data import Dataset

from rayform.dataloader._block_columns import Sample
from rayform.dataloader._map_dataset import RerunMapDataset
from rayform.dataloader._pipeline import META_KEY
from rayform.dataloader._samplers import EpochSampler
from rayform.errors import ConfigError

SOURCE_KEY = "source"
"""Key added to ``sample["meta"]`` naming the sample's source (with ``sample_metadata=True``)."""


class MixtureDataset(Dataset[Sample]):
    """Several map datasets with the same sample keys behind one global index.

    Global indices run through the sources in the order given: ``[0, len(first))`` is the first
    source, and so on. ``__getitems__`` sends each source one batch.

    Raises:
        ConfigError: no sources, or sources whose field keys differ.
    """

    def __init__(self, sources: Mapping[str, RerunMapDataset]) -> None:
        if not sources:
            raise ConfigError("MixtureDataset needs at least one source")
        names = list(sources)
        keys = {name: sorted(ds.fields) for name, ds in sources.items()}
        first = keys[names[0]]
        for name in names[1:]:
            if keys[name] != first:
                raise ConfigError(
                    f"MixtureDataset sources must map to the same sample keys: {names[0]!r} has "
                    f"{first}, {name!r} has {keys[name]}; map each source's columns to common "
                    "keys in its fields dict"
                )
        for name, ds in sources.items():
            if not isinstance(ds, RerunMapDataset):
                raise TypeError(f"source {name!r} must be a RerunMapDataset, got "
                                f"{type(ds).__name__}")
        self._names = names
        self._sources = [sources[n] for n in names]
        lengths = np.array([len(ds) for ds in self._sources], dtype=np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)

    @property
    def source_names(self) -> list[str]:
        return list(self._names)

    @property
    def source_lengths(self) -> dict[str, int]:
        return {n: len(ds) for n, ds in zip(self._names, self._sources, strict=True)}

    def source_offset(self, name: str) -> int:
        """The global index of a source's first sample."""
        return int(self._offsets[self._names.index(name)])

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def __getitem__(self, idx: int) -> Sample:
        return self.__getitems__([idx])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[Sample]:
        idx = np.asarray(list(indices), dtype=np.int64)
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= len(self)):
            raise IndexError(f"sample index out of range for {len(self)} samples: "
                             f"{idx[(idx < 0) | (idx >= len(self))][0]}")
        which = np.searchsorted(self._offsets, idx, side="right") - 1
        out: list[Sample | None] = [None] * len(idx)
        for s in np.unique(which).tolist():
            positions = np.flatnonzero(which == s)
            local = (idx[positions] - self._offsets[s]).tolist()
            for p, sample in zip(positions.tolist(), self._sources[s].__getitems__(local),
                                 strict=True):
                meta = sample.get(META_KEY)
                if isinstance(meta, dict):
                    meta[SOURCE_KEY] = self._names[s]
                out[p] = sample
        return [s for s in out if s is not None]


class WeightedMixSampler(EpochSampler):
    """Draws samples from a :class:`MixtureDataset`'s sources in proportion to weights.

    Args:
        mixture: the mixture.
        weights: source name -> weight (>= 0, not all 0); every source needs one.
        num_samples: draws per epoch (before DDP sharding); default ``len(mixture)``.
        seed: base seed; the draw is a pure function of ``(seed, epoch)``.
        num_replicas: DDP world size (default from ``torch.distributed``).
        rank: DDP rank (default from ``torch.distributed``).
        drop_last: drop the uneven tail instead of padding by wrapping.
    """

    def __init__(self, mixture: MixtureDataset, weights: Mapping[str, float], *,
                 num_samples: int | None = None, seed: int = 0,
                 num_replicas: int | None = None, rank: int | None = None,
                 drop_last: bool = False) -> None:
        super().__init__(seed=seed, num_replicas=num_replicas, rank=rank, drop_last=drop_last)
        names = mixture.source_names
        if set(weights) != set(names):
            raise ConfigError(
                f"WeightedMixSampler needs one weight per source {names}, got {sorted(weights)}"
            )
        w = np.array([float(weights[n]) for n in names], dtype=np.float64)
        lengths = np.array([mixture.source_lengths[n] for n in names], dtype=np.int64)
        if not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
            raise ConfigError(f"weights must be finite, >= 0 and not all 0, got {dict(weights)}")
        empty = [n for n, wi, ln in zip(names, w, lengths, strict=True) if wi > 0 and ln == 0]
        if empty:
            raise ConfigError(f"sources {empty} have a weight but no samples; give them weight 0")
        self._names = names
        self._probabilities = w / w.sum()
        self._lengths = lengths
        self._offsets = np.array([mixture.source_offset(n) for n in names], dtype=np.int64)
        self._num_samples = len(mixture) if num_samples is None else int(num_samples)
        if self._num_samples < 0:
            raise ConfigError(f"num_samples must be >= 0, got {num_samples!r}")

    def epoch_order(self, epoch: int) -> npt.NDArray[np.int64]:
        rng = np.random.default_rng([self.seed, epoch])
        choice = rng.choice(len(self._lengths), size=self._num_samples, p=self._probabilities)
        out = np.empty(self._num_samples, dtype=np.int64)
        for s in range(len(self._lengths)):
            slots = np.flatnonzero(choice == s)
            if not len(slots):
                continue
            n = int(self._lengths[s])
            passes = -(-len(slots) // n)
            local = np.concatenate([
                np.random.default_rng([self.seed, epoch, s, p]).permutation(n)
                for p in range(passes)])[:len(slots)]
            out[slots] = self._offsets[s] + local
        return out

    def __repr__(self) -> str:
        probs: dict[str, Any] = dict(zip(self._names, np.round(self._probabilities, 4).tolist(),
                                         strict=True))
        return f"WeightedMixSampler(num_samples={self._num_samples}, probabilities={probs})"
