"""``--write-slice``: excluded segments left out, flagged ranges excluded, and both dataset
styles (Rerun-compatible and ``EpisodeDataset``) drawing no sample whose window touches one."""

from __future__ import annotations

import numpy as np
import pytest
from defects import STATE_COLUMN

from rayform.catalog import Catalog, DatasetEntry, ExcludedRange, Slice
from rayform.curation import curate, write_clean_slice
from rayform.dataloader import DataSource, Field, NumericDecoder, RerunMapDataset

pytestmark = pytest.mark.realdata
NAN_SEGMENT = "episode_000000"


@pytest.fixture(scope="module")
def clean(defect_dataset: DatasetEntry) -> Slice:
    result = curate(defect_dataset, video="off")
    catalog = defect_dataset.catalog
    assert isinstance(catalog, Catalog)
    return write_clean_slice(catalog, result, "clean")


def test_slice_leaves_out_and_excludes(clean: Slice) -> None:
    kept = set(clean.segment_ids)
    for dropped in ("episode_000001", "episode_000002", "episode_000003"):  # offset, scale, stuck
        assert dropped not in kept
    assert {NAN_SEGMENT, "episode_000007", "episode_000009"} <= kept
    frames = [e for e in clean.excluded if e.segment_id == NAN_SEGMENT
              and e.timeline == "frame_index"]
    assert [(e.start, e.end) for e in frames] == [(100, 109)]
    idle = [e for e in clean.excluded if e.segment_id == "episode_000007"
            and e.timeline == "frame_index"]
    assert [(e.start, e.end) for e in idle] == [(0, 45)]
    assert any(e.timeline == "timestamp" and e.segment_id == NAN_SEGMENT for e in clean.excluded)


def test_rerun_dataset_skips_excluded(clean: Slice) -> None:
    window = (-3, -2, -1, 0, 1)
    fields = {"state": Field(STATE_COLUMN, NumericDecoder(), window=window)}
    ds = RerunMapDataset(DataSource(clean), "frame_index", fields)
    index = ds.sample_index
    positions, values = index.locate(np.arange(len(index)))
    ids = np.array([index.segment_id(int(p)) for p in positions])
    nan_values = values[ids == NAN_SEGMENT]
    assert len(nan_values)
    touches = (nan_values + window[-1] >= 100) & (nan_values + window[0] <= 109)
    assert not touches.any()
    # everything else of the segment is still there: 10 rows + the window's 4 extra positions
    plain = RerunMapDataset(DataSource(clean.view(), segments=[NAN_SEGMENT]), "frame_index",
                            fields).sample_index
    assert plain.total_samples - len(nan_values) == 10 + len(window) - 1
    sample = ds[int(np.flatnonzero(ids == NAN_SEGMENT)[0])]
    assert np.isfinite(sample["state"].numpy()).all()


def test_episode_dataset_skips_excluded(clean: Slice) -> None:
    from rayform.torch import EpisodeDataset

    nan_ns = [(e.start, e.end) for e in clean.excluded
              if e.segment_id == NAN_SEGMENT and e.timeline == "timestamp"]
    ds = EpisodeDataset(clean, obs=["/observation.state"], action="/action", fps=30, horizon=4)
    horizon_ns = round(3 / 30 * 1e9)
    seen = 0
    for i in range(len(ds)):
        sample = ds[i]
        if sample["meta"]["segment"] != NAN_SEGMENT:
            continue
        seen += 1
        t = int(sample["t_ns"])
        for start, end in nan_ns:
            assert t + horizon_ns < start or t > end
        assert bool(np.isfinite(sample["/observation.state"].numpy()).all())
    assert seen > 100


def test_excluded_range_validation(defect_dataset: DatasetEntry) -> None:
    from rayform.catalog._slices import create_slice
    from rayform.errors import ConfigError

    catalog = defect_dataset.catalog
    assert isinstance(catalog, Catalog)
    with pytest.raises(ConfigError, match="unknown timeline"):
        create_slice(catalog, defect_dataset, segments=[NAN_SEGMENT],
                     exclude=[ExcludedRange(segment_id=NAN_SEGMENT, timeline="nope", start=0,
                                            end=1)])
    with pytest.raises(ConfigError, match="after end"):
        ExcludedRange(segment_id=NAN_SEGMENT, timeline="frame_index", start=5, end=1)


def test_annotations_exclude_from_a_slice(defect_dataset: DatasetEntry) -> None:
    from rayform.catalog._slices import create_slice
    from rayform.curation import excluded_ranges

    catalog = defect_dataset.catalog
    assert isinstance(catalog, Catalog)
    defect_dataset.annotate("episode_000009", 50, 80, "failed grasp", who="test")
    defect_dataset.annotate("episode_000009", 120, 130, "subtask: lift")
    notes = catalog.sql("SELECT * FROM g1.annotations WHERE label = 'failed grasp'"
                        ).to_arrow_table()
    ranges = excluded_ranges(notes)
    assert {(r.timeline, r.start, r.end) for r in ranges if r.timeline == "frame_index"} == \
        {("frame_index", 50, 79)}
    made = create_slice(catalog, defect_dataset, segments=["episode_000009"], exclude=ranges)
    index = RerunMapDataset(DataSource(made), "frame_index",
                            {"s": Field(STATE_COLUMN, NumericDecoder())}).sample_index
    _, values = index.locate(np.arange(len(index)))
    assert not ((values >= 50) & (values <= 79)).any()
    span = defect_dataset.segment_record("episode_000009").entities[
        "/observation.state"].ranges["frame_index"]
    assert len(values) == span.end - span.start + 1 - 30


def test_iterable_dataset_skips_excluded(clean: Slice) -> None:
    from rayform.dataloader import BlockShuffle, RerunIterableDataset

    window = (-2, -1, 0)
    fields = {"state": Field(STATE_COLUMN, NumericDecoder(), window=window)}
    ds = RerunIterableDataset(DataSource(clean), "frame_index", fields, sample_metadata=True,
                              shuffle_strategy=BlockShuffle(buffer_size=64), seed=3)
    seen = 0
    for sample in ds:
        meta = sample["meta"]
        if meta["segment_id"] != NAN_SEGMENT:
            continue
        seen += 1
        value = int(meta["index_value"])
        assert value + window[-1] < 100 or value + window[0] > 109
        assert np.isfinite(sample["state"].numpy()).all()
    span = clean.view().segment_record(NAN_SEGMENT).entities["/observation.state"].ranges[
        "frame_index"]
    trimmed = span.end - span.start + 1 - (len(window) - 1)  # Rerun's trim for the window
    assert seen == trimmed - (10 + len(window) - 1)
