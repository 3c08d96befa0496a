"""Why a sample space came out empty: the error a dataset raises at construction instead of ``len 0``.

A dataset over segments that all turn out too short for the fields' windows (or outside the time
range, or without the timeline) would otherwise have no samples, and the first sign of it would
be torch's ``num_samples=0`` far from the cause. On timestamp and duration timelines window offsets
are seconds, so ``window=tuple(range(16))`` spans 15 s, not 16 steps: the message says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from rayform.catalog import DatasetView, TimeRange
from rayform.dataloader._config import EdgeMode, Field
from rayform.dataloader._sample_index import (
    NS_PER_S,
    column_int64,
    timeline_kind,
    window_extent,
)
from rayform.errors import ConfigError
from rayform.recording._columns import RANGE_END_SUFFIX, RANGE_START_SUFFIX, SEGMENT_ID


@dataclass(frozen=True, slots=True, kw_only=True)
class LongestSegment:
    """The segment with the longest range on a timeline (index units: ns on temporal timelines)."""

    segment_id: str
    span: int


def longest_segment(view: DatasetView, index: str) -> LongestSegment | None:
    """The view's longest segment on ``index``; ``None`` when no segment has rows on it."""
    ranges = view.index_ranges_arrow()
    start, end = index + RANGE_START_SUFFIX, index + RANGE_END_SUFFIX
    if start not in ranges.column_names or end not in ranges.column_names:
        return None
    starts, start_ok = column_int64(ranges, start)
    ends, end_ok = column_int64(ranges, end)
    spans = np.where(start_ok & end_ok, ends - starts, -1)
    if not len(spans) or spans.max() < 0:
        return None
    best = int(np.argmax(spans))
    return LongestSegment(segment_id=str(ranges.column(SEGMENT_ID)[best]), span=int(spans[best]))


def span_text(span: int, *, temporal: bool) -> str:
    """A span on a timeline: seconds on temporal timelines, steps on sequence ones."""
    if temporal:
        return f"{span / NS_PER_S:.4g} s"
    return f"{span} step{'' if span == 1 else 's'}"


def empty_space_error(view: DatasetView, index: str, fields: Mapping[str, Field], *,
                      edge: EdgeMode, time_range: TimeRange | None, what: str) -> ConfigError:
    """The error for a sample space with no sample over a view that has segments."""
    kind = timeline_kind(view, index)
    temporal = kind != "sequence"
    num = len(view.segment_ids())
    longest = longest_segment(view, index)
    if longest is None:
        return ConfigError(f"{what} has no samples: none of the {num} segments has rows on "
                           f"timeline {index!r}; sample on another of {sorted(view.timelines)}")
    lo, hi = window_extent(fields, index, temporal=temporal)
    window = hi - lo
    if edge == "trim" and window > longest.span:
        seconds = ("; on a timestamp or duration timeline window offsets are seconds, so "
                   "window=tuple(range(16)) spans 15 s: for 16 steps at 15 Hz write "
                   "tuple(k / 15 for k in range(16))") if temporal else ""
        return ConfigError(
            f"{what} has no samples: the fields' windows span {span_text(window, temporal=temporal)} "
            f"on {kind} timeline {index!r}, longer than the longest of the {num} segments, "
            f"{longest.segment_id!r} ({span_text(longest.span, temporal=temporal)}); shorten the "
            f"window or pass edge='pad' to pad the edges{seconds}")
    where = "" if time_range is None else (
        f" in the time range [{time_range.start}, {time_range.end}] on {time_range.timeline!r}")
    return ConfigError(f"{what} has no samples{where}: none of the {num} segments has a sample "
                       f"there on timeline {index!r} (longest segment {longest.segment_id!r}, "
                       f"{span_text(longest.span, temporal=temporal)})")
