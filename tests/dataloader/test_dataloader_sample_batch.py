"""Map batches collated without a stack (SampleBatch): exactly what ``default_collate`` made.

``RerunMapDataset.__getitems__`` and ``EpisodeDataset.__getitems__`` return a
:class:`~rayform.dataloader._sample_batch.SampleBatch`; ``PooledBatchCollator`` takes its
collated form (views of the decode buffers) instead of stacking the samples. Every test compares
that batch with ``default_collate`` of the same samples (the path taken before): the same keys,
tensors equal in values, shapes and dtypes, padding masks and metadata.
"""

from __future__ import annotations

import copy
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from dataloader_factories import CAMERA, GRIPPER, JOINTS
from torch.utils.data import DataLoader, default_collate

from rayform.catalog import DatasetEntry, ExcludedRange
from rayform.dataloader import (
    DataSource,
    Field,
    ImageDecoder,
    NumericDecoder,
    PooledBatchCollator,
    RerunMapDataset,
)
from rayform.dataloader._sample_batch import DeferredSamples, SampleBatch
from rayform.errors import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "surface"))


def assert_same_batch(got: Any, want: Any, path: str = "") -> None:
    """``got`` equals ``want`` leaf by leaf: tensors in values, shape and dtype; the rest by ==."""
    assert type(got) is type(want), path
    if isinstance(want, dict):
        assert list(got) == list(want), path
        for key in want:
            assert_same_batch(got[key], want[key], f"{path}/{key}")
    elif isinstance(want, torch.Tensor):
        assert got.shape == want.shape and got.dtype == want.dtype, path
        assert torch.equal(got, want), path
    else:
        assert got == want, path


def shares_memory(batch_tensor: torch.Tensor, samples: list[dict[str, Any]], key: str) -> bool:
    return batch_tensor.untyped_storage().data_ptr() == samples[0][key].untyped_storage().data_ptr()


@pytest.mark.parametrize("edge", ["trim", "pad"])
@pytest.mark.parametrize("timeline", ["frame_index", "real_time"])
def test_map_batches_equal_default_collate(robots_dataset: DatasetEntry, edge: str, timeline: str) -> None:
    from rayform.dataloader import FixedRateSampling

    fields = {
        "state": Field(JOINTS, NumericDecoder()),
        "action": Field(
            JOINTS,
            NumericDecoder(),
            window=(0, 1, 2, 3) if timeline == "frame_index" else (0.0, 0.01, 0.02, 0.03),
        ),
        "camera": Field(CAMERA, ImageDecoder()),
    }
    sampling = None if timeline == "frame_index" else FixedRateSampling(rate_hz=50)
    ds = RerunMapDataset(
        DataSource(robots_dataset), timeline, fields, timeline_sampling=sampling, edge=edge, decode_threads=2
    )
    collate = PooledBatchCollator()
    order = np.random.default_rng(3).permutation(len(ds))
    for start in range(0, len(ds), 8):
        indices = order[start : start + 8].tolist()
        samples = ds.__getitems__(indices)
        assert isinstance(samples, SampleBatch) and samples.has_collated
        got = collate(samples)
        assert_same_batch(got, default_collate(list(samples)))
        assert shares_memory(got["action"], samples, "action")  # no stack, no copy
        if edge == "pad":
            assert got["action_is_pad"].dtype == torch.bool
    # one sample at a time, as DataLoader(batch_size=None) would read them
    assert_same_batch(collate(ds.__getitems__([5])), default_collate([ds[5]]))


def test_missing_data_takes_the_stacking_path(robots_dataset: DatasetEntry) -> None:
    # The gripper starts at row 2: the first samples have none (None in the sample dict).
    ds = RerunMapDataset(
        DataSource(robots_dataset),
        "frame_index",
        {"gripper": Field(GRIPPER, NumericDecoder()), "camera": Field(CAMERA, ImageDecoder())},
    )
    samples = ds.__getitems__([0, 1, 2, 3])
    assert samples[0]["gripper"] is None
    assert samples.collated() is None
    with pytest.raises(ConfigError, match="is None"):
        PooledBatchCollator()(samples)


def test_excluded_ranges_are_honoured(robots_dataset: DatasetEntry) -> None:
    fields = {
        "state": Field(JOINTS, NumericDecoder(), window=(-1, 0, 1)),
        "camera": Field(CAMERA, ImageDecoder()),
    }
    gone = ExcludedRange(segment_id="ep1", timeline="frame_index", start=10, end=14)
    ds = RerunMapDataset(
        DataSource(robots_dataset, excluded=(gone,)), "frame_index", fields, sample_metadata=True
    )
    plain = RerunMapDataset(DataSource(robots_dataset), "frame_index", fields)
    assert len(ds) < len(plain)
    collate = PooledBatchCollator()
    indices = list(range(len(ds)))
    batch = collate(ds.__getitems__(indices))
    assert_same_batch(batch, default_collate(list(ds.__getitems__(indices))))
    segments = np.array(batch["meta"]["segment_id"])
    values = batch["meta"]["index_value"].numpy()
    in_ep1 = values[segments == "ep1"]
    assert len(in_ep1) and not ((in_ep1 + 1 >= 10) & (in_ep1 - 1 <= 14)).any()


def test_workers_send_the_collated_batch(robots_dataset: DatasetEntry) -> None:
    fields = {
        "state": Field(JOINTS, NumericDecoder(), window=(0, 1)),
        "camera": Field(CAMERA, ImageDecoder()),
    }
    ds = RerunMapDataset(DataSource(robots_dataset), "frame_index", fields, edge="pad", sample_metadata=True)
    plain = list(DataLoader(ds, batch_size=8))
    pooled = list(
        DataLoader(
            ds, batch_size=8, num_workers=2, collate_fn=PooledBatchCollator(), multiprocessing_context="fork"
        )
    )
    assert len(plain) == len(pooled)
    for got, want in zip(pooled, plain, strict=True):
        assert_same_batch(got, want)


@pytest.fixture
def episode_slice(tmp_path: Path) -> Any:
    from surface_data import build_catalog

    import rayform

    catalog = build_catalog(tmp_path / "cat", tmp_path / "src", num_frames=60)
    return rayform.Client(catalog).slices.create("robots")


def _episodes(episode_slice: Any, edge: str) -> Any:
    from rayform.torch import EpisodeDataset

    return EpisodeDataset(episode_slice, obs=["cam0/rgb", "wrist/rgb", "joints/position"],
                          action="joints/position_delta", fps=15, horizon=4, edge=edge)


@pytest.mark.parametrize("edge", ["trim", "pad"])
def test_episode_batches_equal_default_collate(episode_slice: Any, edge: str) -> None:
    ds = _episodes(episode_slice, edge)
    collate = PooledBatchCollator()
    for indices in ([0, 7, 3, 11, 2], list(range(len(ds)))):
        samples = ds.__getitems__(indices)
        assert isinstance(samples, SampleBatch) and samples.has_collated
        got = collate(samples)
        assert_same_batch(got, default_collate(list(samples)))
        assert shares_memory(got["cam0/rgb"], samples, "cam0/rgb")  # JPEGs: decoded in place
        assert got["action"].dtype == torch.float32 and got["t_ns"].dtype == torch.int64
        assert ("action_is_pad" in got) == (edge == "pad")


@pytest.mark.parametrize("edge", ["trim", "pad"])
def test_episode_samples_shaped_as_one_batch_equal_the_per_sample_path(episode_slice: Any, edge: str) -> None:
    ds = _episodes(episode_slice, edge)
    indices = [0, 7, 3, 11, 2, len(ds) - 1]
    samples = ds.__getitems__(indices)
    raw = ds._map.__getitems__(ds.epoch_order()[np.asarray(indices)].tolist())
    want = [ds._finish(sample) for sample in raw]  # the per-sample path
    assert len(samples) == len(want)
    for got_sample, want_sample in zip(samples, want, strict=True):
        assert_same_batch(got_sample, want_sample)
    batch = samples.collated()
    assert_same_batch(batch, ds._finish_batch(raw, want))
    # shaped once for the batch: each sample's values are views of the batch's tensors
    assert shares_memory(batch["t_ns"], samples, "t_ns")
    assert shares_memory(batch["action"], samples, "action")


def test_episode_poses_take_the_stacking_path(episode_slice: Any) -> None:
    from rayform.torch import EpisodeDataset

    ds = EpisodeDataset(episode_slice, obs=["cam0/rgb", "ee/pose"], fps=15)
    samples = ds.__getitems__([0, 4, 9])
    assert samples.collated() is None  # poses are converted per segment, sample by sample
    assert_same_batch(PooledBatchCollator()(samples), default_collate(list(samples)))


def test_a_collated_batch_may_be_asked_for_some_keys_only(robots_dataset: DatasetEntry,
                                                          episode_slice: Any) -> None:
    """``SampleBatch.collated(keys)`` collates only those keys (EpisodeDataset reshapes the map
    batch without collating its metadata, which it reads per sample)."""
    fields = {"state": Field(JOINTS, NumericDecoder()), "camera": Field(CAMERA, ImageDecoder())}
    ds = RerunMapDataset(DataSource(robots_dataset), "frame_index", fields, sample_metadata=True)
    samples = ds.__getitems__([4, 0, 9])
    whole = samples.collated()
    part = samples.collated({"state"})
    assert whole is not None and part is not None and list(part) == ["state"]
    assert_same_batch(part["state"], whole["state"])
    episodes = _episodes(episode_slice, "trim")
    batch = episodes.__getitems__([0, 7, 3])
    assert list(batch.collated({"action", "t_ns"}) or {}) == ["action", "t_ns"]


def test_episode_metadata_collates_as_default_collate_does() -> None:
    """The batch's ``meta`` (strings: one list per key) is built without default_collate's
    per-key dispatch; anything else still goes through it."""
    from rayform.torch import _collate_metas

    metas = [{"slice": "slc_1", "segment": f"ep{i}", "segment_version": "v1", "site": ""}
             for i in range(5)]
    got = _collate_metas(metas)
    assert got == default_collate(metas) and list(got) == list(metas[0])
    numbered = [{**meta, "segment_version": i} for i, meta in enumerate(metas)]
    got = _collate_metas(numbered)
    assert torch.equal(got["segment_version"], torch.arange(5))
    assert got["segment"] == [m["segment"] for m in numbered]


def test_deferred_samples_are_made_once_when_the_list_is_first_read() -> None:
    made: list[int] = []

    def make() -> list[dict[str, Any]]:
        made.append(1)
        return [{"x": i} for i in range(3)]

    def fresh() -> SampleBatch:
        return SampleBatch(DeferredSamples(size=3, make=make), lambda keys: {"x": [0, 1, 2]})

    batch = fresh()
    assert len(batch) == 3 and bool(batch) and batch.is_deferred and not made
    assert batch.collated() == {"x": [0, 1, 2]} and not made
    assert batch[1] == {"x": 1} and not batch.is_deferred and len(made) == 1
    assert list(batch) == [{"x": 0}, {"x": 1}, {"x": 2}] and len(made) == 1
    # every way of reading the list sees the dicts (list's C code reads items directly)
    reads = [
        lambda b: list(b), lambda b: [*b], lambda b: b[:], lambda b: list(reversed(b))[::-1],
        lambda b: [{"y": 0}] + b, lambda b: b + [],  # noqa: RUF005 (list concatenation itself)
        lambda b: b.copy(), lambda b: tuple(b),
        lambda b: pickle.loads(pickle.dumps(b)), lambda b: copy.copy(b),
        lambda b: [s for s in b], lambda b: [s for (s,) in zip(b, strict=True)],
    ]
    for read in reads:
        assert [s for s in read(fresh()) if "x" in s] == [{"x": 0}, {"x": 1}, {"x": 2}]
    assert fresh() == [{"x": 0}, {"x": 1}, {"x": 2}]
    assert [{"x": 0}, {"x": 1}, {"x": 2}] == fresh()  # noqa: SIM300 (list's == on the left)
    assert {"x": 2} in fresh() and fresh().index({"x": 1}) == 1
    assert torch.equal(default_collate(fresh())["x"], torch.tensor([0, 1, 2]))
    grown = fresh()
    grown.append({"x": 3})
    assert len(grown) == 4 and grown[-1] == {"x": 3}
    with pytest.raises(RuntimeError, match="not the 4 announced"):
        list(SampleBatch(DeferredSamples(size=4, make=make)))
    with pytest.raises(ValueError, match="size"):
        DeferredSamples(size=-1, make=make)


def test_map_batch_dicts_are_not_made_for_the_collated_batch(robots_dataset: DatasetEntry,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """PooledBatchCollator takes the collated batch: the per-sample views and dicts are never
    made (they were made for every batch, and dropped unread)."""
    from rayform.dataloader._block_columns import BlockColumns

    fields = {"state": Field(JOINTS, NumericDecoder(), window=(0, 1)),
              "camera": Field(CAMERA, ImageDecoder())}
    ds = RerunMapDataset(DataSource(robots_dataset), "frame_index", fields, sample_metadata=True)
    indices = [9, 2, 5, 0]
    want = list(ds.__getitems__(indices))  # read: the dicts are made
    samples = ds.__getitems__(indices)
    assert isinstance(samples, SampleBatch) and samples.is_deferred and len(samples) == 4
    assert samples.values("meta") == [s["meta"] for s in want]
    assert [int(v[0, 0]) for v in samples.values("state")] == [int(s["state"][0, 0]) for s in want]
    with pytest.raises(KeyError):
        samples.values("nope")
    with monkeypatch.context() as patch:
        patch.setattr(BlockColumns, "samples", lambda self: pytest.fail("sample dicts made"))
        got = PooledBatchCollator()(samples)
    assert samples.is_deferred
    assert_same_batch(got, default_collate(want))
    assert_same_batch(default_collate(samples), default_collate(want))  # read now: made


def test_episode_batches_make_no_map_sample_dicts(episode_slice: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """EpisodeDataset shapes the map batch from its collated tensors and metadata column; its
    own per-sample dicts are made only when read."""
    from rayform.dataloader._block_columns import BlockColumns

    ds = _episodes(episode_slice, "trim")
    indices = [0, 7, 3, 11, 2]
    want = list(ds.__getitems__(indices))
    with monkeypatch.context() as patch:
        patch.setattr(BlockColumns, "samples", lambda self: pytest.fail("map dicts made"))
        samples = ds.__getitems__(indices)
        assert isinstance(samples, SampleBatch) and samples.is_deferred
        got = PooledBatchCollator()(samples)
        assert samples.is_deferred
        assert len(list(samples)) == len(want)  # its own dicts, made from the batch's tensors
    assert_same_batch(got, default_collate(want))
    for got_sample, want_sample in zip(samples, want, strict=True):
        assert_same_batch(got_sample, want_sample)
