"""The datasets inside torch DataLoaders: samplers, forked and spawned workers, sharding, order."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

import numpy as np
import pytest
import torch
from dataloader_factories import GRIPPER, JOINTS
from torch.utils.data import DataLoader, DistributedSampler, WeightedRandomSampler

from rayform.catalog import DatasetEntry
from rayform.dataloader import (
    BlockShuffle,
    DataSource,
    Field,
    NoShuffle,
    NumericDecoder,
    RerunIterableDataset,
    RerunMapDataset,
    SampleShuffle,
    StableOrder,
)
from rayform.dataloader._iterable_dataset import FIRST_FETCH_SAMPLES
from rayform.dataloader._partition import StreamPosition
from rayform.decoders._thread_pool import ThreadPool

FORK_WITH_THREADS = "ignore:This process .* is multi-threaded:DeprecationWarning"


def _fields() -> dict[str, Field]:
    return {"state": Field(JOINTS, NumericDecoder()),
            "action": Field(JOINTS, NumericDecoder(), window=(0, 1, 2))}


def _indices(loader: DataLoader[Any]) -> list[int]:
    out: list[int] = []
    for batch in loader:
        assert batch["state"].shape[1:] == (3,)
        assert batch["action"].shape[1:] == (3, 3)
        out += batch["meta"]["sample_index"].tolist()
    return out


def test_map_dataset_with_shuffle_distributed_and_weighted_samplers(
        robots_dataset: DatasetEntry) -> None:
    ds = RerunMapDataset(DataSource(robots_dataset), "frame_index", _fields(),
                         sample_metadata=True)
    n = len(ds)
    assert sorted(_indices(DataLoader(ds, batch_size=8, shuffle=True))) == list(range(n))
    halves = [_indices(DataLoader(ds, batch_size=8, sampler=DistributedSampler(
        ds, num_replicas=2, rank=r, shuffle=True, seed=3, drop_last=True))) for r in range(2)]
    assert not set(halves[0]) & set(halves[1])
    assert len(halves[0]) == len(halves[1]) == n // 2
    first = ds.sample_index.segments[0].num_samples
    weights = [0.0 if i < first else 1.0 for i in range(n)]
    drawn = _indices(DataLoader(ds, batch_size=16, sampler=WeightedRandomSampler(
        weights, num_samples=64, replacement=True, generator=torch.Generator().manual_seed(0))))
    assert len(drawn) == 64 and min(drawn) >= first


@pytest.mark.filterwarnings(FORK_WITH_THREADS)
def test_iterable_workers_fork_partition_each_epoch(robots_dataset: DatasetEntry) -> None:
    ds = RerunIterableDataset(DataSource(robots_dataset), "frame_index", _fields(),
                              fetch_block_size=5, sample_metadata=True,
                              shuffle_strategy=BlockShuffle(buffer_size=6))
    loader = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context="fork")
    epoch0 = _indices(loader)
    assert sorted(epoch0) == list(range(len(ds)))
    assert epoch0 == _indices(loader), "same epoch, same order"
    ds.set_epoch(1)
    epoch1 = _indices(loader)
    assert sorted(epoch1) == list(range(len(ds))) and epoch1 != epoch0


@pytest.mark.slow
def test_iterable_and_map_workers_spawn(robots_dataset: DatasetEntry) -> None:
    ds = RerunIterableDataset(DataSource(robots_dataset), "frame_index", _fields(),
                              fetch_block_size=16, sample_metadata=True)
    loader = DataLoader(ds, batch_size=8, num_workers=2, multiprocessing_context="spawn",
                        persistent_workers=True)
    assert sorted(_indices(loader)) == list(range(len(ds)))
    single = list(RerunIterableDataset(DataSource(robots_dataset), "frame_index", _fields(),
                                       fetch_block_size=16, sample_metadata=True))
    assert {s["meta"]["sample_index"] for s in single} == set(range(len(ds)))
    mds = RerunMapDataset(DataSource(robots_dataset), "frame_index", _fields(),
                          sample_metadata=True)
    mloader = DataLoader(mds, batch_size=8, num_workers=1, multiprocessing_context="spawn")
    assert _indices(mloader) == list(range(len(mds)))


@pytest.mark.filterwarnings(FORK_WITH_THREADS)
@pytest.mark.parametrize("strategy", [SampleShuffle(), BlockShuffle(buffer_size=10)])
def test_stable_order_is_the_same_for_0_1_and_2_workers(robots_dataset: DatasetEntry,
                                                        strategy: Any) -> None:
    fields = {**_fields(), "gripper": Field(GRIPPER, NumericDecoder())}
    ds = RerunIterableDataset(DataSource(robots_dataset), "frame_index", fields,
                              fetch_block_size=6, sample_metadata=True, seed=11,
                              shuffle_strategy=strategy, stable_order=StableOrder(batch_size=4))
    with pytest.warns(RuntimeWarning, match="field 'gripper' has no value"):
        runs = [_indices(DataLoader(ds, batch_size=4, num_workers=w,
                                    multiprocessing_context="fork" if w else None))
                for w in (0, 1, 2)]
    assert runs[0] == runs[1] == runs[2]
    assert len(set(runs[0])) == len(runs[0]) < len(ds), "incomplete samples were dropped"
    default = RerunIterableDataset(DataSource(robots_dataset), "frame_index", _fields(),
                                   fetch_block_size=6, sample_metadata=True,
                                   shuffle_strategy=NoShuffle())
    orders = [_indices(DataLoader(default, batch_size=4, num_workers=w,
                                  multiprocessing_context="fork" if w else None))
              for w in (0, 2)]
    assert orders[0] != orders[1], "the default contiguous shards do depend on num_workers"


def _freeze_count(samples: list[Any]) -> int:
    return gc.get_freeze_count()


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_worker_freezes_what_it_inherited_and_the_main_process_does_not(
        robots_dataset: DatasetEntry) -> None:
    """A forked worker's full collections skip the parent's heap (gc.freeze, once per worker)."""
    ds = RerunIterableDataset(DataSource(robots_dataset), "frame_index",
                              {"state": Field(JOINTS, NumericDecoder())})
    before = gc.get_freeze_count()
    counts = list(DataLoader(ds, batch_size=4, num_workers=1, collate_fn=_freeze_count,
                             multiprocessing_context="fork"))
    assert counts and all(c > before for c in counts)
    list(DataLoader(ds, batch_size=4))
    assert gc.get_freeze_count() == before


@pytest.mark.parametrize("batch_size", [None, 5])
def test_a_worker_decodes_a_first_batch_before_the_rest_of_its_first_block(
        robots_dataset: DatasetEntry, batch_size: int | None) -> None:
    ds = RerunIterableDataset(DataSource(robots_dataset), "frame_index", _fields(),
                              fetch_block_size=64, batch_size=batch_size)
    main, worker = StreamPosition(), StreamPosition(num_workers=1, in_worker=True)
    stream = ds._order.stream(ds._pipeline, worker, epoch=0, start=0)
    _, whole, was_cut = ds._blocks(stream, main)
    todo, cut, is_cut = ds._blocks(stream, worker)
    first = batch_size or FIRST_FETCH_SAMPLES
    assert (was_cut, is_cut) == (False, True)
    assert [len(b) for b in cut[:2]] == [first, len(whole[0]) - first]
    assert int(todo[0]) in cut[0]
    np.testing.assert_array_equal(np.concatenate(cut), np.concatenate(whole))


@pytest.mark.filterwarnings(FORK_WITH_THREADS)
def test_worker_streams_with_a_cut_first_block_match_the_main_process(
        robots_dataset: DatasetEntry) -> None:
    ds = RerunIterableDataset(DataSource(robots_dataset), "frame_index", _fields(),
                              fetch_block_size=64, sample_metadata=True,
                              stable_order=StableOrder(batch_size=4))
    runs = [_indices(DataLoader(ds, batch_size=4, num_workers=w,
                                multiprocessing_context="fork" if w else None))
            for w in (0, 1)]
    assert runs[0] == runs[1] and sorted(runs[0]) == list(range(len(ds)))


@pytest.mark.parametrize("first_alone", [False, True])
def test_a_cut_first_block_is_decoded_before_the_second_starts(robots_dataset: DatasetEntry,
                                                               first_alone: bool) -> None:
    """Two blocks ahead as a rule; after a worker's cut first block, the second block starts only
    once the first is decoded (it would share the worker's CPU with the first batch)."""
    ds = RerunIterableDataset(DataSource(robots_dataset), "frame_index", _fields(),
                              fetch_block_size=8)
    ds._prefetch = ThreadPool(2, name="test-fetch", background=True)
    events: list[tuple[str, int]] = []
    lock = threading.Lock()

    def process(indices: np.ndarray) -> int:
        key = int(indices[0])
        with lock:
            events.append(("start", key))
        time.sleep(0.05 if not events[1:] else 0.0)  # the first block is slow
        with lock:
            events.append(("end", key))
        return len(indices)

    indices = np.arange(24, dtype=np.int64)
    blocks = [np.arange(0, 8), np.arange(8, 16), np.arange(16, 24)]
    got = [n for _, n in ds._prefetched(blocks, indices, process, first_alone=first_alone)]
    assert got == [8, 8, 8]
    second_start = events.index(("start", 8))
    first_end = events.index(("end", 0))
    assert (second_start > first_end) is first_alone
