"""GOP-aware planning: requests grouped into runs, runs shared out between decode threads."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rayform.decoders import DecodeRequest
from rayform.decoders._requests import RequestArrays
from rayform.decoders._video_plan import (
    PacketRun,
    Unresolved,
    plan_packet_runs,
    schedule_runs,
)


def make_requests(segments: list[tuple[int, int]], picks: list[tuple[int, int, int]]
                  ) -> tuple[list[DecodeRequest], np.ndarray]:
    """Segments of (num_rows, gop) laid out one after another; picks (segment, row, width)."""
    offsets = np.cumsum([0] + [n for n, _ in segments])
    requests = []
    for i, (seg, row, width) in enumerate(picks):
        n, gop = segments[seg]
        last = min(row, n - 1)
        first = max(0, last - width)
        key = first - first % gop
        base = int(offsets[seg])
        requests.append(DecodeRequest(
            sample_position=i, segment_id=f"s{seg}", index_value=last,
            decode_row_indices=tuple(range(base + key, base + last + 1)),
            output_row_indices=tuple(range(base + first, base + last + 1)),
            starts_at_keyframe=True))
    return requests, np.ones(int(offsets[-1]), dtype=bool)


segments_st = st.lists(st.tuples(st.integers(1, 60), st.integers(1, 12)), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), segments=segments_st, parts=st.integers(1, 4))
def test_schedule_covers_every_frame_once_per_stream(data: st.DataObject,
                                                     segments: list[tuple[int, int]],
                                                     parts: int) -> None:
    picks = data.draw(st.lists(st.tuples(st.integers(0, len(segments) - 1), st.integers(0, 59),
                                         st.integers(0, 5)), min_size=1, max_size=40))
    requests, nonempty = make_requests(segments, picks)
    runs, keys = plan_packet_runs(requests, nonempty)
    jobs = schedule_runs(runs, parts=parts)
    assert 1 <= len(jobs) <= max(parts, len(runs))
    scheduled: list[PacketRun] = [run for job in jobs for run in job]
    wanted = set().union(*(run.wanted_rows for run in scheduled))
    for request, frame_keys in zip(requests, keys, strict=True):
        assert not isinstance(frame_keys, Unresolved)
        assert set(frame_keys) <= wanted
        assert list(frame_keys) == list(request.output_row_indices)
    # No packet is decoded twice: runs of one stream never overlap.
    for a in scheduled:
        assert a.start <= min(a.wanted_rows) and max(a.wanted_rows) <= a.end
        for b in scheduled:
            if a is not b and a.segment_id == b.segment_id:
                assert a.end < b.start or b.end < a.start
    # Every run starts at some request's keyframe.
    starts = {r.decode_row_indices[0] for r in requests}
    assert {run.start for run in scheduled} <= starts


def as_arrays(requests: list[DecodeRequest], width: int) -> RequestArrays:
    """The same requests as the pipeline hands them over (windows padded to ``width``)."""
    outputs = np.array([[r.output_row_indices[0]] * (width - len(r.output_row_indices))
                        + list(r.output_row_indices) for r in requests], dtype=np.int64)
    return RequestArrays(
        sample_positions=np.arange(len(requests), dtype=np.int64),
        segment_ids=[r.segment_id for r in requests],
        index_values=np.array([r.index_value for r in requests], dtype=np.int64),
        output_rows=outputs.reshape(len(requests), width),
        decode_starts=np.array([r.decode_row_indices[0] for r in requests], dtype=np.int64),
        decode_stops=np.array([r.decode_row_indices[-1] + 1 for r in requests], dtype=np.int64),
        starts_at_keyframe=True)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), segments=segments_st, holes=st.integers(0, 3))
def test_plans_from_request_arrays_equal_plans_from_requests(
        data: st.DataObject, segments: list[tuple[int, int]], holes: int) -> None:
    picks = data.draw(st.lists(st.tuples(st.integers(0, len(segments) - 1), st.integers(0, 59),
                                         st.just(2)), min_size=1, max_size=40))
    requests, nonempty = make_requests(segments, picks)
    requests = [r for r in requests if len(r.output_row_indices) == 3] or requests[:0]
    nonempty[::holes + 2] = holes == 0  # some rows without a packet: unresolved requests
    arrays = as_arrays(requests, 3)
    assert plan_packet_runs(arrays, nonempty) == plan_packet_runs(list(arrays), nonempty)


def test_requests_without_a_packet_since_their_keyframe_are_unresolved() -> None:
    requests = [DecodeRequest(sample_position=0, segment_id="s", index_value=3,
                              decode_row_indices=(2, 3), output_row_indices=(3,))]
    nonempty = np.array([True, True, False, False])
    runs, keys = plan_packet_runs(requests, nonempty)
    assert runs == [] or all(not run.wanted_rows for run in runs)
    assert keys == [Unresolved("empty")]


def test_one_gop_one_run_and_parts_split_at_run_boundaries() -> None:
    segments = [(64, 8)]
    picks = [(0, r, 0) for r in (1, 3, 5, 9, 12, 30, 31, 50)]
    requests, nonempty = make_requests(segments, picks)
    runs, _ = plan_packet_runs(requests, nonempty)
    assert [(r.start, r.end) for r in runs] == [(0, 5), (8, 12), (24, 31), (48, 50)]
    assert [[(r.start, r.end) for r in job] for job in schedule_runs(runs, parts=1)] == [
        [(0, 5), (8, 12), (24, 31), (48, 50)]]
    # Four independent runs for two slots: a job each, the longest first.
    assert [[(r.start, r.end) for r in job] for job in schedule_runs(runs, parts=2)] == [
        [(24, 31)], [(0, 5)], [(8, 12)], [(48, 50)]]


def test_a_sequential_stretch_is_cut_into_parts_at_keyframes() -> None:
    segments = [(64, 8)]
    picks = [(0, r, 0) for r in range(5, 45)]  # a block of 40 frames over GOPs of 8
    requests, nonempty = make_requests(segments, picks)
    runs, _ = plan_packet_runs(requests, nonempty)
    assert [(r.start, r.end) for r in schedule_runs(runs, parts=1)[0]] == [(0, 44)]
    runs, _ = plan_packet_runs(requests, nonempty)  # scheduling merges runs in place
    jobs = schedule_runs(runs, parts=3)
    assert [[(r.start, r.end) for r in job] for job in jobs] == [
        [(0, 15)], [(16, 31)], [(32, 44)]]
