"""Weighted mixing of sources with different schemas mapped to common keys."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from dataloader_factories import JOINTS
from torch.utils.data import DataLoader

import rayform
from rayform.catalog import DatasetEntry
from rayform.dataloader import (
    DataSource,
    Field,
    MixtureDataset,
    NumericDecoder,
    RerunMapDataset,
    WeightedMixSampler,
)
from rayform.errors import ConfigError


@pytest.fixture
def other_robot(tmp_path: Path) -> DatasetEntry:
    """A dataset with another layout: ``/arm/q`` float32 on a ``step`` timeline."""
    catalog = rayform.Catalog.create(tmp_path / "other")
    dataset = catalog.create_dataset("arms")
    paths = []
    for i in range(2):
        path = tmp_path / f"arm{i}.rfr"
        with rayform.RecordingWriter(path, recording_id=f"arm{i}") as rec:
            steps = np.arange(20)
            rec.log_scalars("/arm/q", timelines={"step": steps},
                            values=np.full((20, 3), -1.0 - i, dtype=np.float32))
        paths.append(path)
    dataset.register(paths)
    return dataset


def _mixture(robots: DatasetEntry, arms: DatasetEntry) -> MixtureDataset:
    return MixtureDataset({
        "robots": RerunMapDataset(DataSource(robots), "frame_index",
                                  {"q": Field(JOINTS, NumericDecoder())}, sample_metadata=True),
        "arms": RerunMapDataset(DataSource(arms), "step",
                                {"q": Field("/arm/q:Scalars:scalars", NumericDecoder(),
                                            window=(0,))}, sample_metadata=True),
    })


def test_mixture_maps_sources_to_common_keys(robots_dataset: DatasetEntry,
                                             other_robot: DatasetEntry) -> None:
    mix = _mixture(robots_dataset, other_robot)
    assert len(mix) == mix.source_lengths["robots"] + 40
    offset = mix.source_offset("arms")
    batch = mix.__getitems__([0, offset, offset + 25, 1])
    assert [s["meta"]["source"] for s in batch] == ["robots", "arms", "arms", "robots"]
    assert batch[0]["q"].dtype == torch.float64 and batch[1]["q"].dtype == torch.float32
    assert batch[2]["q"].tolist() == [[-2.0, -2.0, -2.0]]
    with pytest.raises(ConfigError, match="same sample keys"):
        MixtureDataset({"a": RerunMapDataset(DataSource(robots_dataset), "frame_index",
                                             {"q": Field(JOINTS, NumericDecoder())}),
                        "b": RerunMapDataset(DataSource(other_robot), "step",
                                             {"x": Field("/arm/q:Scalars:scalars",
                                                         NumericDecoder())})})


def test_weighted_mix_is_deterministic_and_follows_weights(robots_dataset: DatasetEntry,
                                                           other_robot: DatasetEntry) -> None:
    mix = _mixture(robots_dataset, other_robot)
    offset = mix.source_offset("arms")
    sampler = WeightedMixSampler(mix, {"robots": 1.0, "arms": 3.0}, num_samples=4000, seed=9)
    sampler.set_epoch(1)
    draws = list(sampler)
    assert draws == list(sampler), "a pure function of (seed, epoch)"
    sampler.set_epoch(2)
    assert list(sampler) != draws
    share = sum(d >= offset for d in draws) / len(draws)
    assert 0.72 < share < 0.78
    arms = [d for d in draws if d >= offset]
    counts = Counter(arms)
    assert max(counts.values()) - min(counts.values()) <= 1, "each source walked evenly"
    none = WeightedMixSampler(mix, {"robots": 1.0, "arms": 0.0}, num_samples=300, seed=9)
    assert all(d < offset for d in none)
    ranks = [list(WeightedMixSampler(mix, {"robots": 1.0, "arms": 1.0}, num_samples=101,
                                     seed=3, num_replicas=2, rank=r)) for r in range(2)]
    single = list(WeightedMixSampler(mix, {"robots": 1.0, "arms": 1.0}, num_samples=101, seed=3))
    assert ranks[0] == single[0::2] and ranks[1] == (single + single[:1])[1::2]
    loader = DataLoader(mix, batch_size=8, sampler=WeightedMixSampler(
        mix, {"robots": 1.0, "arms": 1.0}, num_samples=32, seed=0), collate_fn=list)
    assert sum(len(b) for b in loader) == 32
    with pytest.raises(ConfigError, match="one weight per source"):
        WeightedMixSampler(mix, {"robots": 1.0})
    with pytest.raises(ConfigError, match="not all 0"):
        WeightedMixSampler(mix, {"robots": 0.0, "arms": 0.0})
