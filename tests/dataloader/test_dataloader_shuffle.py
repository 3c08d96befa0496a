"""Shuffle strategies, the shuffle buffer, shards and fetch blocks (Hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rayform.dataloader import (
    BlockShuffle,
    NoShuffle,
    SampleIndex,
    SampleShuffle,
    SegmentMetadata,
    ShuffleBuffer,
    StableOrder,
)
from rayform.dataloader._partition import contiguous_shard, fetch_blocks
from rayform.errors import ConfigError

STRATEGIES = [SampleShuffle(), NoShuffle(), BlockShuffle(), BlockShuffle(buffer_size=8)]
sizes_st = st.lists(st.integers(min_value=0, max_value=50), min_size=0, max_size=10)


def _index(sizes: list[int]) -> SampleIndex:
    return SampleIndex([SegmentMetadata(f"s{i}", 0, max(n - 1, 0), n)
                        for i, n in enumerate(sizes)])


def _segment_of(index: SampleIndex, g: np.ndarray) -> np.ndarray:
    return np.searchsorted(index.segment_offsets, g, side="right") - 1


@settings(max_examples=80)
@given(sizes_st, st.integers(1, 20), st.integers(0, 2**32 - 1),
       st.sampled_from(range(len(STRATEGIES))))
def test_epoch_orders_are_permutations_with_local_blocks(sizes: list[int], block: int,
                                                         seed: int, which: int) -> None:
    strategy = STRATEGIES[which]
    index = _index(sizes)
    indices, bounds = strategy.epoch_order(index, fetch_block_size=block, seed=seed)
    assert sorted(indices.tolist()) == list(range(index.total_samples))
    assert (bounds[-1] if len(bounds) else 0) == index.total_samples
    again, bounds2 = strategy.epoch_order(index, fetch_block_size=block, seed=seed)
    assert np.array_equal(indices, again) and np.array_equal(bounds, bounds2)
    starts = np.concatenate([[0], bounds[:-1]]).astype(int)[:len(bounds)]
    for s, e in zip(starts.tolist(), bounds.tolist(), strict=True):
        part = indices[s:e]
        assert len(set(_segment_of(index, part).tolist())) == 1, "blocks stay in one segment"
        if not isinstance(strategy, SampleShuffle):
            assert np.array_equal(part, np.arange(part[0], part[0] + len(part))), "contiguous"
            assert len(part) <= block


@given(st.lists(st.integers(1, 30), min_size=2, max_size=8), st.integers(1, 8))
def test_seeds_change_the_order_and_noshuffle_is_natural(sizes: list[int], block: int) -> None:
    index = _index(sizes)
    natural, _ = NoShuffle().epoch_order(index, fetch_block_size=block, seed=3)
    assert np.array_equal(natural, np.arange(index.total_samples))
    a, _ = SampleShuffle().epoch_order(index, fetch_block_size=block, seed=1)
    assert np.array_equal(a, np.random.default_rng(1).permutation(index.total_samples)), \
        "SampleShuffle is Rerun's default_rng(seed).permutation(total)"
    if index.total_samples >= 12:
        b, _ = SampleShuffle().epoch_order(index, fetch_block_size=block, seed=2)
        assert not np.array_equal(a, b)


def test_block_shuffle_keeps_natural_order_within_blocks() -> None:
    index = _index([8, 4])
    _, none_bounds = NoShuffle().epoch_order(index, fetch_block_size=4, seed=0)
    assert none_bounds.tolist() == [4, 8, 12]
    order, bounds = BlockShuffle().epoch_order(index, fetch_block_size=4, seed=5)
    blocks = sorted(tuple(order[s:e]) for s, e in zip([0, *bounds[:-1]], bounds, strict=True))
    assert blocks == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11)]
    assert not hasattr(BlockShuffle(), "block_size")


@given(st.integers(2, 64), st.data())
def test_shuffle_buffer_emits_each_item_once(buffer_size: int, data: st.DataObject) -> None:
    min_fill = data.draw(st.integers(1, buffer_size))
    n = data.draw(st.integers(0, 200))
    buf = ShuffleBuffer(buffer_size, min_fill=min_fill)
    order = buf.emit_order(n, np.random.default_rng(7))
    assert sorted(order.tolist()) == list(range(n))
    assert np.array_equal(order, buf.emit_order(n, np.random.default_rng(7)))
    pulled: list[int] = []

    def source():  # type: ignore[no-untyped-def]
        for i in range(n):
            pulled.append(i)
            yield i

    for t, item in enumerate(buf.shuffle(source(), np.random.default_rng(7))):
        assert item < len(pulled), "only pulled items are emitted"
        assert len(pulled) - t <= buffer_size, "the buffer never holds more than buffer_size"


def test_shuffle_buffer_first_emit_after_min_fill() -> None:
    pulled: list[int] = []

    def source():  # type: ignore[no-untyped-def]
        for i in range(64):
            pulled.append(i)
            yield i

    out = ShuffleBuffer(64, min_fill=32).shuffle(source(), np.random.default_rng(0))
    next(out)
    assert len(pulled) == 32
    out.close()
    with pytest.raises(ConfigError):
        ShuffleBuffer(1)
    with pytest.raises(ConfigError):
        ShuffleBuffer(8, min_fill=9)
    with pytest.raises(ConfigError, match="needs a buffer_size"):
        BlockShuffle(min_fill=4)


@settings(max_examples=80)
@given(st.integers(0, 300), st.integers(1, 6), st.integers(1, 4), st.integers(1, 40))
def test_shards_are_disjoint_complete_and_balanced(n: int, world: int, workers: int,
                                                   block: int) -> None:
    indices, bounds = NoShuffle().epoch_order(_index([n]), fetch_block_size=block, seed=0)
    seen: list[int] = []
    rank_sizes = []
    for rank in range(world):
        r_idx, r_bounds = contiguous_shard(indices, bounds, rank, world)
        rank_sizes.append(len(r_idx))
        for worker in range(workers):
            w_idx, w_bounds = contiguous_shard(r_idx, r_bounds, worker, workers)
            assert (w_bounds[-1] if len(w_bounds) else 0) == len(w_idx)
            fetches = fetch_blocks(w_bounds, block)
            covered = [p for s, e in fetches for p in range(s, e)]
            assert covered == list(range(len(w_idx)))
            assert all(e - s <= block for s, e in fetches)
            seen += w_idx.tolist()
    assert sorted(seen) == list(range(n))
    assert max(rank_sizes) - min(rank_sizes) <= world - 1


def test_fetch_blocks_split_long_blocks_and_pack_short_ones() -> None:
    assert fetch_blocks(np.array([20, 24, 30]), 16) == [(0, 16), (16, 30)]
    assert fetch_blocks(np.array([3, 6, 9, 12]), 8) == [(0, 6), (6, 12)]
    assert fetch_blocks(np.arange(1, 11), 4) == [(0, 4), (4, 8), (8, 10)]


@settings(max_examples=60)
@given(st.integers(0, 200), st.integers(1, 9), st.integers(1, 3), st.integers(1, 3),
       st.integers(0, 50))
def test_stable_order_deals_chunks_round_robin(n: int, batch: int, world: int, workers: int,
                                               start: int) -> None:
    canonical = np.random.default_rng(n).permutation(n).astype(np.int64)
    order = StableOrder(batch_size=batch)
    start = min(start, n)
    per_rank = []
    for rank in range(world):
        streams = [order.stream(canonical, start=start, rank=rank, world_size=world,
                                worker_id=w, num_workers=workers) for w in range(workers)]
        # What a DataLoader delivers: batches from workers round-robin.
        batches = [[s[i:i + batch].tolist() for i in range(0, len(s), batch)] for s in streams]
        delivered: list[int] = []
        k = 0
        while any(batches):
            if batches[k % workers]:
                delivered += batches[k % workers].pop(0)
            k += 1
        per_rank.append(delivered)
    rest = canonical[start:].tolist()
    chunks = [rest[i:i + batch] for i in range(0, len(rest), batch)]
    for rank in range(world):
        assert per_rank[rank] == [x for c in chunks[rank::world] for x in c]
    assert sorted(x for r in per_rank for x in r) == sorted(rest)
