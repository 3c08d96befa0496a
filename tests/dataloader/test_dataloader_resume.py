"""Mid-epoch resume: a restarted run continues with exactly the samples it had not yet seen."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from dataloader_factories import GRIPPER, JOINTS
from torch.utils.data import DataLoader

from rayform.catalog import DatasetEntry
from rayform.dataloader import (
    BlockShuffle,
    DataSource,
    Field,
    NoShuffle,
    NumericDecoder,
    RerunIterableDataset,
    RerunMapDataset,
    ResumableSampler,
    SampleShuffle,
    StableOrder,
)
from rayform.errors import ConfigError

FORK_WITH_THREADS = "ignore:This process .* is multi-threaded:DeprecationWarning"
pytestmark = pytest.mark.filterwarnings("ignore:Skipping samples where field:RuntimeWarning")


def _fields() -> dict[str, Field]:
    return {"state": Field(JOINTS, NumericDecoder()), "gripper": Field(GRIPPER, NumericDecoder())}


def _make(dataset: DatasetEntry, **kwargs: Any) -> RerunIterableDataset:
    return RerunIterableDataset(DataSource(dataset), "frame_index", _fields(),
                                fetch_block_size=5, sample_metadata=True, **kwargs)


def _ids(samples: Any) -> list[int]:
    return [s["meta"]["sample_index"] for s in samples]


@pytest.mark.parametrize("strategy", [SampleShuffle(), NoShuffle(), BlockShuffle(buffer_size=7)])
@pytest.mark.parametrize("consumed", [0, 1, 13, 40])
def test_iterable_resume_in_process(robots_dataset: DatasetEntry, strategy: Any,
                                    consumed: int) -> None:
    full_ds = _make(robots_dataset, shuffle_strategy=strategy)
    full_ds.set_epoch(3)
    full = _ids(full_ds)
    first = _make(robots_dataset, shuffle_strategy=strategy)
    first.set_epoch(3)
    seen = _ids(itertools.islice(iter(first), consumed))
    assert seen == full[:consumed]
    state = first.state_dict()
    assert state["epoch"] == 3
    resumed = _make(robots_dataset, shuffle_strategy=strategy)
    resumed.load_state_dict(state)
    resumed.set_epoch(3)  # a training loop calls set_epoch again: the resume point survives
    assert _ids(resumed) == full[consumed:]
    assert _ids(resumed) == full, "the pass after the resumed one starts the epoch afresh"
    resumed.set_epoch(4)
    assert resumed.state_dict()["position"] == 0


def test_iterable_resume_through_a_dataloader(robots_dataset: DatasetEntry) -> None:
    ds = _make(robots_dataset, shuffle_strategy=BlockShuffle(buffer_size=9))
    loader = DataLoader(ds, batch_size=4)
    full = [i for b in loader for i in b["meta"]["sample_index"].tolist()]
    it = iter(loader)
    head = [i for _ in range(5) for i in next(it)["meta"]["sample_index"].tolist()]
    state = ds.state_dict()
    del it
    again = _make(robots_dataset, shuffle_strategy=BlockShuffle(buffer_size=9))
    again.load_state_dict(state)
    rest = [i for b in DataLoader(again, batch_size=4) for i in b["meta"]["sample_index"].tolist()]
    assert head + rest == full


@pytest.mark.filterwarnings(FORK_WITH_THREADS)
def test_stable_order_resumes_with_a_different_number_of_workers(
        robots_dataset: DatasetEntry) -> None:
    def make() -> RerunIterableDataset:
        return _make(robots_dataset, shuffle_strategy=BlockShuffle(buffer_size=6), seed=1,
                     stable_order=StableOrder(batch_size=4))

    def run(ds: RerunIterableDataset, workers: int) -> list[int]:
        loader = DataLoader(ds, batch_size=4, num_workers=workers,
                            multiprocessing_context="fork" if workers else None)
        return [i for b in loader for i in b["meta"]["sample_index"].tolist()]

    full = run(make(), 2)
    state = make().state_dict(num_samples=12)  # the loop consumed 3 batches before stopping
    resumed = make()
    resumed.load_state_dict(state)
    assert run(resumed, 1) == full[12:]


@pytest.mark.filterwarnings(FORK_WITH_THREADS)
def test_resuming_default_order_inside_workers_is_refused(robots_dataset: DatasetEntry) -> None:
    ds = _make(robots_dataset)
    ds.load_state_dict({**ds.state_dict(), "position": 5})
    with pytest.raises(ConfigError, match="needs stable_order"):
        list(DataLoader(ds, batch_size=4, num_workers=1, multiprocessing_context="fork"))


def test_bad_states_are_rejected(robots_dataset: DatasetEntry) -> None:
    ds = _make(robots_dataset)
    with pytest.raises(ConfigError, match="expects a state"):
        ds.load_state_dict({"position": 3})
    other = _make(robots_dataset, seed=4)
    with pytest.raises(ConfigError, match="seed=4"):
        other.load_state_dict(ds.state_dict())
    with pytest.raises(ConfigError, match="num_samples"):
        ds.state_dict(num_samples=-1)


def test_resumable_sampler_for_the_map_dataset(robots_dataset: DatasetEntry) -> None:
    ds = RerunMapDataset(DataSource(robots_dataset), "frame_index",
                         {"state": Field(JOINTS, NumericDecoder())}, sample_metadata=True)
    sampler = ResumableSampler(ds, seed=7)
    sampler.set_epoch(2)
    full = list(sampler)
    assert sorted(full) == list(range(len(ds)))
    assert full == list(sampler), "deterministic in (seed, epoch)"
    sampler.set_epoch(3)
    assert list(sampler) != full
    sampler.set_epoch(2)
    loader = DataLoader(ds, batch_size=5, sampler=sampler)
    it = iter(loader)
    head = [i for _ in range(3) for i in next(it)["meta"]["sample_index"].tolist()]
    state = sampler.state_dict()
    assert state["position"] == 15
    fresh = ResumableSampler(ds, seed=7)
    fresh.load_state_dict(state)
    assert len(fresh) == len(ds) - 15
    rest = [i for b in DataLoader(ds, batch_size=5, sampler=fresh)
            for i in b["meta"]["sample_index"].tolist()]
    assert head + rest == full
    ranks = [list(ResumableSampler(ds, seed=7, num_replicas=3, rank=r)) for r in range(3)]
    assert sorted(set().union(*map(set, ranks))) == list(range(len(ds)))
    assert len({len(r) for r in ranks}) == 1
    with pytest.raises(ConfigError, match="num_replicas"):
        ResumableSampler(ds, seed=7, num_replicas=2, rank=0).load_state_dict(state)
