"""Row tables: a field's rows for every sample, cached per process, serve exactly what the per-run
``searchsorted`` served: across segments, windows over segment edges (trim and pad, padding masks),
a sparse column (missing data), timestamp timelines, and decode failures skipped."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from dataloader_factories import CAMERA, GRIPPER, JOINTS

import rayform.dataloader._row_tables as row_tables
from rayform.catalog import DatasetEntry
from rayform.dataloader import DataSource, Field, ImageDecoder, NumericDecoder, RerunMapDataset
from rayform.dataloader._row_tables import RowTable


def fields(timeline: str) -> dict[str, Field]:
    window = (-3, -1, 0, 2, 5) if timeline == "frame_index" else (-0.03, 0.0, 0.02, 0.05)
    return {
        "state": Field(JOINTS, NumericDecoder()),
        "action": Field(JOINTS, NumericDecoder(), window=window),
        "gripper": Field(GRIPPER, NumericDecoder()),  # sparse: the first samples have none
        "camera": Field(CAMERA, ImageDecoder(), window=window[:2]),
    }


def dataset(robots_dataset: DatasetEntry, timeline: str, edge: str) -> RerunMapDataset:
    from rayform.dataloader import FixedRateSampling

    sampling = None if timeline == "frame_index" else FixedRateSampling(rate_hz=50)
    return RerunMapDataset(DataSource(robots_dataset), timeline, fields(timeline),
                           timeline_sampling=sampling, edge=edge,  # type: ignore[arg-type]
                           sample_metadata=True, decode_threads=2)


def assert_same_samples(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert list(a) == list(b)
        for key in b:
            if isinstance(b[key], torch.Tensor):
                assert isinstance(a[key], torch.Tensor) and a[key].dtype == b[key].dtype, key
                assert torch.equal(a[key], b[key]), key
            else:
                assert a[key] == b[key], key


@pytest.mark.parametrize("edge", ["trim", "pad"])
@pytest.mark.parametrize("timeline", ["frame_index", "real_time"])
def test_cached_rows_serve_what_the_per_run_search_served(
        robots_dataset: DatasetEntry, timeline: str, edge: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    cached = dataset(robots_dataset, timeline, edge)
    rng = np.random.default_rng(7)
    # shuffled batches spanning every segment, then every sample (each segment's first and
    # last samples: windows at the edges)
    batches = [rng.permutation(len(cached))[:12].tolist() for _ in range(6)]
    batches.append(list(range(len(cached))))
    got = [cached.__getitems__(b) for b in batches]
    tables = cached.pipeline._row_tables
    assert set(tables) == set(fields(timeline))
    assert all(isinstance(t, RowTable) for t in tables.values())
    monkeypatch.setattr(row_tables, "ROW_TABLE_MAX_BYTES", 0)  # too small: no table at all
    plain = dataset(robots_dataset, timeline, edge)
    want = [plain.__getitems__(b) for b in batches]
    assert all(t is None for t in plain.pipeline._row_tables.values())
    for g, w in zip(got, want, strict=True):
        assert_same_samples(g, w)
    if edge == "pad":  # every grid point: windows clamped at the edges, the sparse column
        assert any(bool(s["action_is_pad"].any()) for s in got[-1])
        assert any(s["gripper"] is None for s in got[-1])  # missing data stays missing


def test_a_table_is_filled_once_per_segment_and_only_for_segments_read(
        robots_dataset: DatasetEntry) -> None:
    ds = dataset(robots_dataset, "frame_index", "trim")
    index = ds.sample_index
    first = [0, 1, 2]  # all in the first segment
    assert int(index.locate(first)[0].max()) == 0
    ds.__getitems__(first)
    table = ds.pipeline._row_tables["action"]
    assert isinstance(table, RowTable)
    assert table._filled.tolist() == [True] + [False] * (index.num_segments - 1)
    ds.__getitems__(list(range(len(ds))))
    assert bool(table._filled.all())


def test_a_field_whose_table_would_exceed_the_bound_resolves_per_run(
        robots_dataset: DatasetEntry, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = dataset(robots_dataset, "frame_index", "pad")
    # room for the one-output fields' tables only, not for the 5-step window's
    monkeypatch.setattr(row_tables, "ROW_TABLE_MAX_BYTES", 4 * 2 * len(ds))
    samples = ds.__getitems__(list(range(len(ds))))
    tables = ds.pipeline._row_tables
    assert tables["action"] is None and tables["camera"] is not None
    assert isinstance(tables["state"], RowTable)
    monkeypatch.setattr(row_tables, "ROW_TABLE_MAX_BYTES", 0)
    assert_same_samples(samples, dataset(robots_dataset, "frame_index", "pad").__getitems__(
        list(range(len(ds)))))
