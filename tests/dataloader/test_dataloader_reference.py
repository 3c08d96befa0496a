"""The loader equals a brute-force numpy reference for every field kind, window, edge and timeline."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from dataloader_factories import (
    CAMERA,
    GRIPPER,
    JOINTS,
    Episode,
    reference_positions,
    reference_samples,
    reference_value,
)

from rayform.catalog import DatasetEntry
from rayform.dataloader import (
    DataSource,
    Field,
    FixedRateSampling,
    ImageDecoder,
    NoShuffle,
    NumericDecoder,
    RerunIterableDataset,
    RerunMapDataset,
)

# timeline -> (sampling rate or None, windows per field kind)
TIMELINES: dict[str, tuple[float | None, dict[str, tuple[Any, ...]]]] = {
    "frame_index": (None, {"action": (0, 1, 2, 5), "history": (-3, -1, -1, 0),
                           "grip": (-2, 0), "clip": (-4, 0)}),
    "real_time": (40.0, {"action": (0.0, 0.01, 0.0375), "history": (-0.05, -0.02, -0.02, 0.0),
                         "grip": (-0.03, 0.0), "clip": (-0.045, 0.0)}),
    "elapsed": (25.0, {"action": (0.0, 0.02), "history": (-0.031, 0.0),
                       "grip": (-0.02, 0.0), "clip": (-0.04, 0.0)}),
}
ENTITY_OF = {"state": "joints", "action": "joints", "history": "joints", "gripper": "gripper",
             "grip": "gripper", "image": "camera", "clip": "camera"}


def _fields(windows: dict[str, tuple[Any, ...]]) -> dict[str, Field]:
    numeric, image = NumericDecoder(), ImageDecoder()
    return {
        "state": Field(JOINTS, numeric),
        "action": Field(JOINTS, numeric, window=windows["action"]),
        "history": Field(JOINTS, numeric, window=windows["history"]),
        "gripper": Field(GRIPPER, numeric),
        "grip": Field(GRIPPER, numeric, window=windows["grip"]),
        "image": Field(CAMERA, image),
        "clip": Field(CAMERA, image, window=windows["clip"]),
    }


def _check_sample(sample: dict[str, Any], ep: Episode, value: int, timeline: str,
                  fields: dict[str, Field], edge: str) -> None:
    assert sample["meta"]["segment_id"] == ep.segment_id
    assert sample["meta"]["index_value"] == value
    for key, field in fields.items():
        expected = reference_value(ep, ENTITY_OF[key], timeline, value, field.window, edge)
        got = sample[key]
        if expected is None:
            assert got is None, (key, ep.segment_id, value)
            continue
        assert isinstance(got, torch.Tensor), (key, ep.segment_id, value)
        assert got.shape == expected.shape, (key, got.shape, expected.shape)
        np.testing.assert_array_equal(got.numpy(), expected, err_msg=f"{key} at {value}")
        if ENTITY_OF[key] == "joints":
            assert got.dtype == torch.float64
        if ENTITY_OF[key] == "gripper":
            assert got.dtype == torch.float32
        if ENTITY_OF[key] == "camera":
            assert got.dtype == torch.uint8
        if edge == "pad" and field.window is not None:
            _, pads = reference_positions(ep, timeline, value, field.window, edge)
            assert sample[key + "_is_pad"].tolist() == pads
        else:
            assert key + "_is_pad" not in sample


@pytest.mark.parametrize("edge", ["trim", "pad"])
@pytest.mark.parametrize("timeline", list(TIMELINES))
def test_map_dataset_equals_reference(robots_dataset: DatasetEntry,
                                      robots_episodes: list[Episode], timeline: str,
                                      edge: str) -> None:
    rate, windows = TIMELINES[timeline]
    fields = _fields(windows)
    sampling = None if rate is None else FixedRateSampling(rate_hz=rate)
    ds = RerunMapDataset(DataSource(robots_dataset), timeline, fields,
                         timeline_sampling=sampling, edge=edge, sample_metadata=True)
    expected = reference_samples(robots_episodes, timeline, [f.window for f in fields.values()],
                                 rate_hz=rate, edge=edge)
    assert len(ds) == len(expected)
    order = np.random.default_rng(0).permutation(len(ds))
    for chunk in np.array_split(order, max(1, len(order) // 13)):
        samples = ds.__getitems__(chunk.tolist())
        for i, sample in zip(chunk.tolist(), samples, strict=True):
            ep, value = expected[i]
            assert sample["meta"]["sample_index"] == i
            _check_sample(sample, ep, value, timeline, fields, edge)
    if edge == "pad":
        assert any(s["grip"] is None for s in ds.__getitems__(list(range(3)))), \
            "the sparse gripper starts late: early samples have no value"


@pytest.mark.parametrize("timeline", list(TIMELINES))
def test_iterable_dataset_equals_reference_and_skips_missing(
        robots_dataset: DatasetEntry, robots_episodes: list[Episode], timeline: str) -> None:
    rate, windows = TIMELINES[timeline]
    fields = _fields(windows)
    sampling = None if rate is None else FixedRateSampling(rate_hz=rate)
    ds = RerunIterableDataset(DataSource(robots_dataset), timeline, fields,
                              timeline_sampling=sampling, shuffle_strategy=NoShuffle(),
                              fetch_block_size=7, sample_metadata=True)
    expected = reference_samples(robots_episodes, timeline, [f.window for f in fields.values()],
                                 rate_hz=rate, edge="trim")
    complete = [(ep, v) for ep, v in expected
                if all(reference_value(ep, ENTITY_OF[k], timeline, v, f.window, "trim")
                       is not None for k, f in fields.items())]
    if len(complete) < len(expected):
        with pytest.warns(RuntimeWarning, match="Skipping samples where field"):
            samples = list(ds)
    else:
        samples = list(ds)
    assert len(ds) == len(expected)
    assert [(s["meta"]["segment_id"], s["meta"]["index_value"]) for s in samples] == \
        [(ep.segment_id, v) for ep, v in complete]
    for sample, (ep, value) in zip(samples, complete, strict=True):
        _check_sample(sample, ep, value, timeline, fields, "trim")


def test_getitems_equals_getitem(robots_dataset: DatasetEntry) -> None:
    fields = _fields(TIMELINES["frame_index"][1])
    ds = RerunMapDataset(DataSource(robots_dataset), "frame_index", fields)
    batch = ds.__getitems__([5, 40, 2, 5, 70])
    for i, sample in zip([5, 40, 2, 5, 70], batch, strict=True):
        single = ds[i]
        assert single.keys() == sample.keys()
        for key, value in single.items():
            if value is None:
                assert sample[key] is None
            else:
                assert torch.equal(value, sample[key])
    assert batch[0]["image"].data_ptr() != batch[3]["image"].data_ptr(), \
        "a repeated sample must not share image memory"
