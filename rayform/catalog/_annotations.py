"""``dataset.annotate(segment, start, end, label, **attrs)``: a time-ranged note, committed."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa

from rayform.catalog._dataset import DatasetView
from rayform.catalog._note_ranges import NoteRange, SegmentClock
from rayform.catalog._notes import KIND_ANNOTATION, append_annotations, attrs_json, notes_rows
from rayform.catalog._segment_data import time_value_ns
from rayform.errors import ConfigError, SegmentNotFoundError


def resolve_range(entry: DatasetView, segment: str, start: Any, end: Any) -> NoteRange:
    """``[start, end)`` of ``segment`` on both timelines: ints are rows on the sequence timeline,
    times (datetime64 / timedelta64) are on the temporal one.

    Raises:
        SegmentNotFoundError: no such segment.
        ConfigError: mixed or reversed bounds, or a kind of bound the dataset has no timeline for.
    """
    if segment not in entry.segment_ids():
        raise SegmentNotFoundError(
            f"annotate: dataset {entry.name!r} has no segment {segment!r}; see "
            "dataset.segment_ids()"
        )
    clock = SegmentClock.of(entry.open_segment(segment), entry.timelines)
    start_ns, end_ns = time_value_ns(start), time_value_ns(end)
    if (start_ns is None) != (end_ns is None):
        raise ConfigError(f"annotate: start {start!r} and end {end!r} must both be rows (ints) "
                          "or both be times")
    if start_ns is not None and end_ns is not None:
        if end_ns <= start_ns:
            raise ConfigError(f"annotate: end {end!r} must be after start {start!r} (half-open)")
        return clock.range_of_ns(start_ns, end_ns)
    for name, value in (("start", start), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ConfigError(f"annotate: {name} must be a row (int) or a time "
                              f"(numpy.timedelta64 / datetime64), got {value!r}")
    if clock.timeline is None:
        raise ConfigError(f"annotate: dataset {entry.name!r} has no sequence timeline; give "
                          "start and end as times (numpy.timedelta64 / datetime64)")
    if int(end) <= int(start):
        raise ConfigError(f"annotate: end {end!r} must be after start {start!r} (half-open rows)")
    return clock.range_of_rows(int(start), int(end))


def annotate(entry: DatasetView, segment: str, start: Any, end: Any, label: str,
             attrs: dict[str, Any]) -> pa.Table:
    """Commit one annotation; returns its row (a one-row notes table)."""
    if not isinstance(label, str) or not label.strip():
        raise ConfigError(f"annotate: label must be a non-empty string, got {label!r}")
    where = resolve_range(entry, segment, start, end)
    row = {
        "segment": segment, "segment_version": entry.segment_record(segment).version,
        "dataset_version": entry.snapshot_version, "kind": KIND_ANNOTATION, "label": label,
        "severity": "info", "timeline": where.timeline, "start_row": where.start_row,
        "end_row": where.end_row, "time_timeline": where.time_timeline,
        "start_ns": where.start_ns, "end_ns": where.end_ns, "attrs": attrs_json(attrs),
        "created_at_ns": time.time_ns(),
    }
    table = notes_rows([row])
    append_annotations(entry.catalog, entry.name, table)
    return table
