"""SampleIndex: index arithmetic (Hypothesis), trimming and padding, and building from metadata."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from dataloader_factories import GRIPPER, JOINTS, Episode
from hypothesis import given, settings
from hypothesis import strategies as st

from rayform.catalog import DatasetEntry
from rayform.dataloader import (
    DataSource,
    Field,
    FixedRateSampling,
    NumericDecoder,
    SampleIndex,
    SegmentMetadata,
)
from rayform.dataloader._sample_index import _from_ranges
from rayform.errors import ColumnNotFoundError, ConfigError, SegmentNotFoundError

segment_sizes = st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=12)


def _index(sizes: list[int], *, step: int | None = None, starts: list[int] | None = None
           ) -> SampleIndex:
    starts = starts or [10 * i for i in range(len(sizes))]
    s = 1 if step is None else step
    segments = [SegmentMetadata(f"s{i}", st_, st_ + (n - 1) * s, n)
                for i, (st_, n) in enumerate(zip(starts, sizes, strict=True))]
    dtype = None if step is None else "datetime64[ns]"
    return SampleIndex(segments, ns_per_sample=step, ns_dtype=dtype)


@settings(max_examples=40)
@given(segment_sizes, st.data())
def test_global_to_local_is_a_bijection(sizes: list[int], data: st.DataObject) -> None:
    index = _index(sizes)
    assert index.total_samples == sum(sizes)
    seen = set()
    ids = [s.segment_id for s in index.segments]
    for g in range(index.total_samples):
        seg, value = index.global_to_local(g)
        assert isinstance(value, int)
        pos = value - seg.index_start
        assert 0 <= pos < seg.num_samples
        seen.add((seg.segment_id, pos))
        k = ids.index(seg.segment_id)
        assert index.segment_offsets[k] + pos == g
    assert len(seen) == index.total_samples
    bad = data.draw(st.one_of(st.integers(max_value=-1),
                              st.integers(min_value=index.total_samples)))
    with pytest.raises(IndexError):
        index.global_to_local(bad)


@given(segment_sizes, st.integers(min_value=1, max_value=10**9), st.data())
def test_locate_matches_global_to_local_on_a_grid(sizes: list[int], step: int,
                                                  data: st.DataObject) -> None:
    index = _index(sizes, step=step, starts=[i * 10**12 for i in range(len(sizes))])
    picks = data.draw(st.lists(st.integers(0, index.total_samples - 1), max_size=30))
    seg, values = index.locate(np.array(picks, dtype=np.int64))
    for g, s, v in zip(picks, seg.tolist(), values.tolist(), strict=True):
        meta, value = index.global_to_local(g)
        assert index.segments[s] == meta
        assert value == np.datetime64(v, "ns")
        assert (v - meta.index_start) % step == 0


def _ranges(starts: list[int], lengths: list[int], kind: str) -> pa.Table:
    arrow = {"sequence": pa.int64(), "timestamp": pa.timestamp("ns"),
             "duration": pa.duration("ns")}[kind]
    return pa.table({
        "rerun_segment_id": [f"s{i}" for i in range(len(starts))],
        "t:start": pa.array(starts, pa.int64()).cast(arrow),
        "t:end": pa.array([s + n for s, n in zip(starts, lengths, strict=True)],
                          pa.int64()).cast(arrow),
    })


@settings(max_examples=60, deadline=None)  # timing varies on a shared machine
@given(st.lists(st.tuples(st.integers(-1000, 1000), st.integers(0, 200)), min_size=1,
                max_size=8),
       st.integers(-30, 0), st.integers(0, 30), st.sampled_from(["trim", "pad"]))
def test_trimming_keeps_windows_inside_segments(segs: list[tuple[int, int]], lo: int, hi: int,
                                                edge: str) -> None:
    starts, lengths = [s for s, _ in segs], [n for _, n in segs]
    extent = (lo, hi) if edge == "trim" else (0, 0)
    index = _from_ranges(_ranges(starts, lengths, "sequence"), "t", "sequence", None, extent,
                         edge)  # type: ignore[arg-type]
    expected = []
    for i, (s, n) in enumerate(segs):
        first, last = (s - lo, s + n - hi) if edge == "trim" else (s, s + n)
        expected += [(f"s{i}", v) for v in range(first, last + 1)]
    got = [(index.global_to_local(g)[0].segment_id, index.global_to_local(g)[1])
           for g in range(index.total_samples)]
    assert got == expected
    for g in range(index.total_samples):
        seg, value = index.global_to_local(g)
        assert seg.range_start is not None and seg.range_end is not None
        if edge == "trim":
            assert seg.range_start <= int(value) + lo and int(value) + hi <= seg.range_end


@settings(max_examples=60)
@given(st.lists(st.tuples(st.integers(0, 10**10), st.integers(0, 10**9)), min_size=1,
                max_size=6),
       st.integers(1, 10**8), st.integers(-10**8, 0), st.integers(0, 10**8),
       st.sampled_from(["timestamp", "duration"]))
def test_temporal_grid_is_anchored_at_the_trimmed_start(segs: list[tuple[int, int]], step: int,
                                                        lo: int, hi: int, kind: str) -> None:
    starts, lengths = [s for s, _ in segs], [n for _, n in segs]
    index = _from_ranges(_ranges(starts, lengths, kind), "t", kind, step, (lo, hi), "trim")
    total = 0
    for s, n in segs:
        first, last = s - lo, s + n - hi
        total += (last - first) // step + 1 if last >= first else 0
    assert index.total_samples == total
    for meta in index.segments:
        assert meta.index_end == meta.index_start + (meta.num_samples - 1) * step
        assert meta.range_start is not None and meta.range_end is not None
        assert meta.index_start == meta.range_start - lo
        assert meta.index_end + hi <= meta.range_end


def test_null_and_empty_ranges_are_skipped() -> None:
    table = pa.table({"rerun_segment_id": ["a", "b", "c"],
                      "t:start": pa.array([0, None, 5], pa.int64()),
                      "t:end": pa.array([3, None, 6], pa.int64())})
    index = _from_ranges(table, "t", "sequence", None, (0, 4), "trim")
    assert [s.segment_id for s in index.segments] == []
    index = _from_ranges(table, "t", "sequence", None, (0, 1), "trim")
    assert [(s.segment_id, s.num_samples) for s in index.segments] == [("a", 3), ("c", 1)]


def test_build_on_each_timeline_kind(robots_dataset: DatasetEntry,
                                     robots_episodes: list[Episode]) -> None:
    fields = {"q": Field(JOINTS, NumericDecoder())}
    seq = SampleIndex.build(DataSource(robots_dataset), "frame_index", fields)
    assert seq.ns_dtype is None and seq.ns_per_sample is None
    assert seq.total_samples == sum(30 + 4 * i for i in range(3))
    assert isinstance(seq.global_to_local(0)[1], int)
    ts = SampleIndex.build(DataSource(robots_dataset), "real_time", fields,
                           timeline_sampling=FixedRateSampling(rate_hz=1000.0))
    assert ts.is_timestamp and ts.ns_per_sample == 1_000_000
    assert isinstance(ts.global_to_local(0)[1], np.datetime64)
    du = SampleIndex.build(DataSource(robots_dataset), "elapsed", fields,
                           timeline_sampling=FixedRateSampling(rate_hz=1.0))
    assert du.is_duration and du.ns_per_sample == 1_000_000_000
    assert isinstance(du.global_to_local(0)[1], np.timedelta64)
    start, _ = robots_episodes[0].range_of("elapsed")
    assert du.global_to_local(0)[1] == np.timedelta64(start, "ns")


def test_build_trims_by_window_offsets_in_seconds(robots_dataset: DatasetEntry,
                                                  robots_episodes: list[Episode]) -> None:
    fields = {"a": Field(JOINTS, NumericDecoder(), window=(-0.05, 0.0)),
              "b": Field(GRIPPER, NumericDecoder(), window=(0.0, 0.0125))}
    index = SampleIndex.build(DataSource(robots_dataset), "real_time", fields,
                              timeline_sampling=FixedRateSampling(rate_hz=100.0))
    first = index.segments[0]
    lo, hi = robots_episodes[0].range_of("real_time")
    assert first.index_start == lo + 50_000_000
    assert first.index_end <= hi - 12_500_000 < first.index_end + 10_000_000
    assert index.offset_index(np.datetime64(first.index_start, "ns"), -2.5) == \
        np.datetime64(first.index_start - 2_500_000_000, "ns")
    assert index.output_index_values(1, Field(JOINTS, NumericDecoder())) == (1,)


def test_segment_filter_keeps_dataset_order_and_refuses_unknown(robots_dataset: DatasetEntry
                                                                ) -> None:
    fields = {"q": Field(JOINTS, NumericDecoder())}
    index = SampleIndex.build(DataSource(robots_dataset, segments=["ep2", "ep0"]),
                              "frame_index", fields)
    assert [s.segment_id for s in index.segments] == ["ep0", "ep2"]
    with pytest.raises(SegmentNotFoundError, match=r"has no segment\(s\) \['nope'\]"):
        DataSource(robots_dataset, segments=["ep2", "nope", "ep0"])
    empty = SampleIndex.build(DataSource(robots_dataset, segments=[]), "frame_index",
                              fields)
    assert empty.total_samples == 0
    with pytest.raises(IndexError):
        empty.global_to_local(0)


def test_build_errors(robots_dataset: DatasetEntry) -> None:
    src = DataSource(robots_dataset)
    q = {"q": Field(JOINTS, NumericDecoder())}
    with pytest.raises(TypeError, match="'real_time' is a timestamp timeline; you must pass"):
        SampleIndex.build(src, "real_time", q)
    with pytest.raises(TypeError, match="duration timeline"):
        SampleIndex.build(src, "elapsed", q)
    with pytest.raises(ColumnNotFoundError, match="unknown index timeline 'log_tick'"):
        SampleIndex.build(src, "log_tick", q)
    frac = {"a": Field(JOINTS, NumericDecoder(), window=(0, 0.5))}
    with pytest.raises(ConfigError, match=r"Field 'a'.*integral window offsets.*\(0\.5,\)"):
        SampleIndex.build(src, "frame_index", frac)
    with pytest.warns(UserWarning, match="is ignored: index 'frame_index' is not a timestamp"):
        SampleIndex.build(src, "frame_index", q, timeline_sampling=FixedRateSampling(rate_hz=5))
    with pytest.raises(ConfigError, match="rate_hz must be > 0"):
        FixedRateSampling(rate_hz=0)
    with pytest.raises(ConfigError, match="integral max_staleness"):
        SampleIndex.build(src, "frame_index",
                          {"a": Field(JOINTS, NumericDecoder(), max_staleness=0.5)})


def test_an_index_of_segment_arrays_equals_one_of_segment_objects() -> None:
    from rayform.dataloader._sample_index import SegmentArrays

    metas = [SegmentMetadata("a", 10, 14, 5, range_start=8, range_end=16),
             SegmentMetadata("b", 0, 0, 1),
             SegmentMetadata("c", 3, 9, 7, range_start=3, range_end=9)]
    arrays = SegmentArrays.from_metadata(metas)
    from_arrays, from_objects = SampleIndex(arrays), SampleIndex(metas)
    assert from_arrays.segments == from_objects.segments == metas
    assert [from_arrays.segment_id(i) for i in range(3)] == ["a", "b", "c"]
    assert from_arrays.num_segments == 3 and from_arrays.total_samples == 13
    assert from_arrays.global_to_local(6) == from_objects.global_to_local(6) == (metas[2], 3)
    with pytest.raises(ConfigError, match="every column needs 3 entries"):
        SegmentArrays(segment_ids=["a", "b", "c"], index_start=arrays.index_start[:2],
                      index_end=arrays.index_end, num_samples=arrays.num_samples,
                      range_start=arrays.range_start, range_end=arrays.range_end,
                      has_range=arrays.has_range)
