"""RerunIterableDataset(batch_size=…): batches cut from decoded blocks equal DataLoader batching."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import torch
from dataloader_factories import CAMERA, GRIPPER, JOINTS
from torch.utils.data import DataLoader, default_collate

from rayform.catalog import DatasetEntry
from rayform.dataloader import (
    BlockShuffle,
    DataSource,
    Field,
    ImageDecoder,
    NoShuffle,
    NumericDecoder,
    RerunIterableDataset,
    SampleShuffle,
)
from rayform.decoders import TensorRows
from rayform.errors import ConfigError

pytestmark = pytest.mark.filterwarnings("ignore:Skipping samples where field:RuntimeWarning")


def _fields(camera: bool = False) -> dict[str, Field]:
    fields = {"state": Field(JOINTS, NumericDecoder(), window=(0, 1, 2)),
              "gripper": Field(GRIPPER, NumericDecoder())}
    if camera:
        fields["image"] = Field(CAMERA, ImageDecoder())
    return fields


def _make(dataset: DatasetEntry, **kwargs: Any) -> RerunIterableDataset:
    kwargs.setdefault("fields", _fields())
    return RerunIterableDataset(DataSource(dataset), "frame_index", kwargs.pop("fields"),
                                decode_threads=1, **kwargs)


def _assert_same(got: Any, want: Any) -> None:
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want)
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for key in want:
            _assert_same(got[key], want[key])
    else:
        assert got == want


def _assert_same_batches(got: list[Any], want: list[Any]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        _assert_same(g, w)


@pytest.mark.parametrize("strategy", [NoShuffle(), SampleShuffle(), BlockShuffle(buffer_size=9)])
@pytest.mark.parametrize(("block", "batch"), [(5, 4), (16, 16), (7, 32), (40, 3)])
def test_batches_equal_dataloader_batching(robots_dataset: DatasetEntry, strategy: Any,
                                           block: int, batch: int) -> None:
    """Same samples, same order, same values as DataLoader(batch_size=…) over the sample stream
    (incomplete samples skipped, blocks that do not line up with batches, the last batch short)."""
    per_sample = _make(robots_dataset, shuffle_strategy=strategy, fetch_block_size=block)
    batched = _make(robots_dataset, shuffle_strategy=strategy, fetch_block_size=block,
                    batch_size=batch)
    for ds in (per_sample, batched):
        ds.set_epoch(2)
    want = list(DataLoader(per_sample, batch_size=batch))
    got = list(DataLoader(batched, batch_size=None))
    assert sum(len(b["state"]) for b in want) < len(per_sample)  # the gripper is sparse: skips
    _assert_same_batches(got, want)


@pytest.mark.parametrize("options", [{"edge": "pad"}, {"sample_metadata": True},
                                     {"fields": _fields(camera=True)}])
def test_batches_with_masks_metadata_and_images(robots_dataset: DatasetEntry,
                                                options: dict[str, Any]) -> None:
    """Padding masks, metadata dicts and images (a decoder without TensorRows) batch as
    default_collate batches them."""
    want = list(DataLoader(_make(robots_dataset, fetch_block_size=6, **dict(options)),
                           batch_size=8))
    got = list(_make(robots_dataset, fetch_block_size=6, batch_size=8, **dict(options)))
    _assert_same_batches(got, want)
    if options.get("edge") == "pad":
        assert any(bool(b["state_is_pad"].any()) for b in got)


def test_consecutive_rows_are_views_of_the_block(robots_dataset: DatasetEntry) -> None:
    """The batches of one block share its tensor (no copy per batch), in order or shuffled."""
    fields = {"state": Field(JOINTS, NumericDecoder(), window=(-1, 0))}
    ds = _make(robots_dataset, fields=fields, shuffle_strategy=NoShuffle(),
               fetch_block_size=24, batch_size=8)
    first, second, third = itertools.islice(iter(ds), 3)
    storages = {b["state"].untyped_storage().data_ptr() for b in (first, second, third)}
    assert len(storages) == 1
    assert second["state"].storage_offset() == first["state"].storage_offset() + first[
        "state"][0].numel() * 8
    shuffled = _make(robots_dataset, fields=fields, shuffle_strategy=SampleShuffle(),
                     fetch_block_size=24, batch_size=8)
    a, b = itertools.islice(iter(shuffled), 2)
    # Shuffled, the block's rows decode in file order and are put in block order once: its
    # batches are views of that one copy too.
    assert a["state"].untyped_storage().data_ptr() == b["state"].untyped_storage().data_ptr()
    assert b["state"].storage_offset() == a["state"].storage_offset() + a["state"].numel()


def test_collate_fn_gets_the_sample_dicts(robots_dataset: DatasetEntry) -> None:
    seen: list[int] = []

    def collate(samples: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(len(samples))
        return default_collate(samples)

    ds = _make(robots_dataset, batch_size=5, collate_fn=collate, shuffle_strategy=NoShuffle())
    want = list(DataLoader(_make(robots_dataset, shuffle_strategy=NoShuffle()), batch_size=5))
    _assert_same_batches(list(ds), want)
    assert seen == [len(b["state"]) for b in want]


def test_resume_in_batches(robots_dataset: DatasetEntry) -> None:
    """state_dict after some batches: the resumed pass yields exactly the remaining samples."""
    fields = {"state": Field(JOINTS, NumericDecoder())}
    make = lambda: _make(robots_dataset, fields=fields, shuffle_strategy=SampleShuffle(),  # noqa: E731
                         fetch_block_size=7, batch_size=6, sample_metadata=True)
    full = [i for b in make() for i in b["meta"]["sample_index"].tolist()]
    first = make()
    seen = [i for b in itertools.islice(iter(first), 3) for i in b["meta"]["sample_index"].tolist()]
    assert seen == full[:18]
    resumed = make()
    resumed.load_state_dict(first.state_dict())
    rest = [i for b in resumed for i in b["meta"]["sample_index"].tolist()]
    assert seen + rest == full


def test_workers_share_the_samples(robots_dataset: DatasetEntry) -> None:
    ds = _make(robots_dataset, batch_size=4, sample_metadata=True, fetch_block_size=5)
    want = sorted(i for b in ds for i in b["meta"]["sample_index"].tolist())
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="spawn")
    got = sorted(i for b in loader for i in b["meta"]["sample_index"].tolist())
    assert got == want


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8"])
def test_bad_batch_size(robots_dataset: DatasetEntry, bad: Any) -> None:
    with pytest.raises(ConfigError, match="batch_size must be an integer >= 1"):
        _make(robots_dataset, batch_size=bad)


def test_collate_fn_needs_batch_size(robots_dataset: DatasetEntry) -> None:
    with pytest.raises(ConfigError, match="needs batch_size"):
        _make(robots_dataset, collate_fn=default_collate)


def test_subclassed_numeric_decoder_is_honoured(robots_dataset: DatasetEntry) -> None:
    """The dense shortcut must not bypass a NumericDecoder subclass that changes decode."""

    class Doubled(NumericDecoder):
        def decode(self, batch: Any, requests: Any) -> Any:
            return [None if t is None else t * 2 for t in super().decode(batch, requests)]

    plain = _make(robots_dataset, fields={"s": Field(JOINTS, NumericDecoder())},
                  shuffle_strategy=NoShuffle(), batch_size=10)
    doubled = _make(robots_dataset, fields={"s": Field(JOINTS, Doubled())},
                    shuffle_strategy=NoShuffle(), batch_size=10)
    for p, d in zip(plain, doubled, strict=True):
        assert torch.equal(d["s"], p["s"] * 2)


def test_tensor_rows_is_a_sequence_of_rows() -> None:
    tensor = torch.arange(12).reshape(4, 3)
    rows = TensorRows(tensor)
    assert len(rows) == 4
    assert torch.equal(rows[1], tensor[1]) and torch.equal(rows[-1], tensor[3])
    assert [r.tolist() for r in rows] == tensor.tolist()
    assert isinstance(rows[1:3], TensorRows) and torch.equal(rows[1:3].tensor, tensor[1:3])
    assert "4 x (3,)" in repr(rows)
    with pytest.raises(TypeError, match="leading request dimension"):
        TensorRows(torch.tensor(1.0))
    with pytest.raises(TypeError, match="leading request dimension"):
        TensorRows(np.zeros((2, 2)))  # type: ignore[arg-type]
