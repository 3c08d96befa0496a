"""PooledBatchCollator: worker batches in reusable shared-memory slots, equal to plain collation."""

from __future__ import annotations

import gc
import pickle
from collections.abc import Iterator
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np
import pytest
import torch
from dataloader_factories import CAMERA, JOINTS
from torch.utils.data import DataLoader, default_collate

import rayform.dataloader._pooled_collator as pooled_module
from rayform.catalog import DatasetEntry
from rayform.dataloader import (
    DataSource,
    Field,
    ImageDecoder,
    NumericDecoder,
    PooledBatchCollator,
    RerunMapDataset,
)
from rayform.decoders._yuv import Yuv420Frame
from rayform.errors import ConfigError

FORK_WITH_THREADS = "ignore:This process .* is multi-threaded:DeprecationWarning"
BATCH = 4


def _dataset(robots_dataset: DatasetEntry) -> RerunMapDataset:
    fields = {"state": Field(JOINTS, NumericDecoder()),
              "window": Field(JOINTS, NumericDecoder(), window=(-1, 0)),
              "image": Field(CAMERA, ImageDecoder())}
    return RerunMapDataset(DataSource(robots_dataset), "frame_index", fields,
                           sample_metadata=True)


def _plain(batch: Any) -> Any:
    """A deep copy that owns its memory (so the loader's slots can be reused)."""
    if isinstance(batch, dict):
        return {k: _plain(v) for k, v in batch.items()}
    if isinstance(batch, torch.Tensor):
        return batch.clone()
    if isinstance(batch, list):
        return [_plain(v) for v in batch]
    return batch


def _assert_equal(a: Any, b: Any) -> None:
    if isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            _assert_equal(a[key], b[key])
    elif isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, list) and a and isinstance(a[0], torch.Tensor):
        assert isinstance(b, list) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_equal(x, y)
    else:
        assert a == b


@pytest.mark.slow
@pytest.mark.filterwarnings(FORK_WITH_THREADS)
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_two_workers_give_the_plain_batches_and_reuse_slots(robots_dataset: DatasetEntry,
                                                            context: str) -> None:
    ds = _dataset(robots_dataset)
    expected = [_plain(b) for b in DataLoader(ds, batch_size=BATCH, collate_fn=default_collate)]
    collator = PooledBatchCollator(slots_per_field=3)
    before = collator.stats()
    loader = DataLoader(ds, batch_size=BATCH, num_workers=2, multiprocessing_context=context,
                        collate_fn=collator)
    got = [_plain(b) for b in loader]
    assert len(got) == len(expected) > 20
    for a, b in zip(got, expected, strict=True):
        _assert_equal(a, b)
    after = collator.stats()
    batches = after["received_batches"] - before["received_batches"]
    leaves = after["received_leaves"] - before["received_leaves"]
    slots = after["received_slots"] - before["received_slots"]
    numeric_leaves = 5  # state, window, image, meta/index_value, meta/sample_index
    assert batches == len(expected)
    assert leaves >= numeric_leaves * len(expected) * 3 // 4, "most leaves came through slots"
    assert slots <= 2 * 3 * numeric_leaves < leaves, "slot buffers were sent once and reused"


@pytest.fixture
def _no_gc() -> Iterator[None]:
    """Slots must be freed by reference counting alone, not by a garbage collection pass."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _as_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pooled_module, "get_worker_info", lambda: object())


def _send(batch: Any) -> Any:
    """What the DataLoader does with a worker's batch: pickle it for the main process."""
    return pickle.loads(ForkingPickler.dumps(batch))


def _samples(seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [{"image": torch.from_numpy(rng.integers(0, 255, (3, 4, 5), dtype=np.uint8)),
             "pose": rng.normal(size=3).astype(np.float32), "step": i, "name": f"s{i}",
             "nested": {"pair": (torch.tensor([i, i + 1]), 0.5 * i)}}
            for i in range(BATCH)]


@pytest.mark.usefixtures("_no_gc")
def test_a_slot_is_reused_only_after_the_main_process_drops_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Dropping a batch frees its slots at once (reference counting, no garbage collection)."""
    collator = PooledBatchCollator(slots_per_field=2)
    _as_worker(monkeypatch)
    first = _send(collator(_samples(1)))
    _assert_equal(first, default_collate(_samples(1)))
    held = first["image"].clone()
    second = _send(collator(_samples(2)))  # the first batch is still alive: a second slot
    assert collator.stats()["allocations"] == 2 * 5 and collator.stats()["reuses"] == 0
    third_samples = _samples(3)
    third = _send(collator(third_samples))  # both held: every field falls back
    assert collator.stats()["fallbacks"] == 5
    _assert_equal(third, default_collate(third_samples))
    assert torch.equal(first["image"], held), "a held batch is never overwritten"
    view = first["image"][0].numpy()  # a numpy view keeps the first image's slot busy
    del first, second, third
    fourth = _send(collator(_samples(4)))
    assert collator.stats()["reuses"] == 5 and collator.stats()["allocations"] == 10
    _assert_equal(fourth, default_collate(_samples(4)))
    assert np.array_equal(view, held[0].numpy())
    fifth = _send(collator(_samples(5)))  # the image's two slots: one viewed, one in `fourth`
    assert (collator.stats()["reuses"], collator.stats()["fallbacks"]) == (5 + 4, 5 + 1)
    _assert_equal(fifth, default_collate(_samples(5)))
    assert np.array_equal(view, held[0].numpy()), "the viewed slot was not overwritten"
    del view, fourth, fifth
    _send(collator(_samples(6)))
    assert collator.stats()["reuses"] == 9 + 5
    assert collator.stats()["allocations"] == 10, "no slot allocated after the first two"


def test_yuv_frames_and_a_grown_field_travel_through_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    collator = PooledBatchCollator(slots_per_field=1)
    _as_worker(monkeypatch)

    def frames(height: int) -> list[dict[str, Any]]:
        y = torch.arange(height * 4, dtype=torch.uint8).reshape(1, height, 4)
        uv = torch.full((2, (height + 1) // 2, 2), 7, dtype=torch.uint8)
        return [{"cam": Yuv420Frame(y + i, uv, "bt709", "full")} for i in range(BATCH)]

    small = _send(collator(frames(4)))
    assert isinstance(small["cam"], Yuv420Frame) and small["cam"].color_space == "bt709"
    assert torch.equal(small["cam"].y, Yuv420Frame.stack([f["cam"] for f in frames(4)]).y)
    del small
    big = _send(collator(frames(8)))  # the free slot is too small: replaced, not kept
    assert torch.equal(big["cam"].y, Yuv420Frame.stack([f["cam"] for f in frames(8)]).y)
    assert collator.stats()["slots"] == {"cam/y": 1, "cam/uv": 1}


def test_in_the_main_process_it_collates_like_default_collate() -> None:
    collator = PooledBatchCollator()
    _assert_equal(collator(_samples(0))["nested"]["pair"][0],
                  default_collate(_samples(0))["nested"]["pair"][0])
    out = collator(_samples(0))
    want = default_collate(_samples(0))
    for key in ("image", "pose", "step", "name"):
        _assert_equal(out[key], want[key])
    assert collator.stats()["allocations"] == 0


def test_bad_batches_and_arguments_are_refused() -> None:
    collator = PooledBatchCollator()
    with pytest.raises(ConfigError, match="'image' is None"):
        collator([{"image": torch.zeros(2)}, {"image": None}])
    with pytest.raises(ConfigError, match="'image' has shapes"):
        collator([{"image": torch.zeros(2)}, {"image": torch.zeros(3)}])
    with pytest.raises(ConfigError, match="sample 1 differs in structure"):
        collator([{"a": torch.zeros(2)}, {"b": torch.zeros(2)}])
    with pytest.raises(ConfigError, match="slots_per_field"):
        PooledBatchCollator(slots_per_field=0)
    with pytest.raises(TypeError):
        PooledBatchCollator(4)  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(PooledBatchCollator(max_pool_bytes=5))).max_pool_bytes == 5


def test_flat_dict_batches_collate_like_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dicts of plain leaves take a shortcut past the per-sample walk; the batch is the same."""
    rng = np.random.default_rng(7)
    samples = [{"image": torch.from_numpy(rng.integers(0, 255, (3, 4, 5), dtype=np.uint8)),
                "pose": rng.normal(size=3).astype(np.float32), "step": i, "ok": i % 2 == 0,
                "scale": 0.5 * i, "name": f"s{i}"} for i in range(BATCH)]
    flat = pooled_module._flatten_flat_dicts(samples)
    names: list[str] = []
    structure = pooled_module._flatten(samples[0], "", names, [])
    assert flat is not None and flat[:2] == (structure, names)
    assert flat[2] == [[s[k] for s in samples] for k in names]
    _as_worker(monkeypatch)
    _assert_equal(_send(PooledBatchCollator()(samples)), default_collate(samples))
    for other in ([{**s, "pose": {"x": 1}} for s in samples],  # nested: the general path
                  [samples[0], {"name": "b", **{k: v for k, v in samples[1].items()
                                                if k != "name"}}],  # other key order
                  [samples[0], {**samples[1], "image": None}]):
        assert pooled_module._flatten_flat_dicts(other) is None
    with pytest.raises(ConfigError, match="sample 1 differs in structure"):
        PooledBatchCollator()([samples[0], dict(reversed(list(samples[1].items())))])
    with pytest.raises(ConfigError, match="'image' is None"):
        PooledBatchCollator()([samples[0], {**samples[1], "image": None}])


def test_slots_are_made_in_shared_memory_and_start_free(monkeypatch: pytest.MonkeyPatch) -> None:
    _as_worker(monkeypatch)
    collator = PooledBatchCollator()
    wire = collator(_samples(0))
    assert wire.new_slots and all(b.is_shared() for b in wire.new_slots.values())
    pool = collator._pool
    assert pool is not None
    slot = pool._allocate(100)
    assert slot.buffer.is_shared() and slot.is_free and slot.capacity == 100
