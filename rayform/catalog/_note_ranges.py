"""A segment's clock: its sequence timeline's values against its temporal timeline's, for notes.

A note's range is kept twice: as rows ``[start_row, end_row)`` on the segment's sequence timeline
and as ``[start_ns, end_ns)`` on its temporal timeline, so that a sample index on either timeline
can skip it. :class:`SegmentClock` converts one into the other from the segment's own rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rayform.catalog._segment_data import SegmentData, index_to_int64
from rayform.errors import ConfigError


@dataclass(frozen=True, slots=True, kw_only=True)
class NoteRange:
    """One range on both timelines (either side may be unknown)."""

    timeline: str | None
    start_row: int | None
    end_row: int | None
    time_timeline: str | None
    start_ns: int | None
    end_ns: int | None


def pick_timelines(timelines: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The dataset's sequence timeline and its temporal one (the first of each kind, by name)."""
    sequence = sorted(t for t, k in timelines.items() if k == "sequence")
    temporal = sorted(t for t, k in timelines.items() if k != "sequence")
    return (sequence[0] if sequence else None), (temporal[0] if temporal else None)


class SegmentClock:
    """The (sequence value, ns) pairs of one segment's rows, sorted on the sequence value."""

    def __init__(self, rows: npt.NDArray[np.int64], ns: npt.NDArray[np.int64] | None, *,
                 timeline: str | None, time_timeline: str | None) -> None:
        self.rows = rows
        self.ns = ns
        self.timeline = timeline
        self.time_timeline = time_timeline

    @classmethod
    def of(cls, segment: SegmentData, timelines: Mapping[str, str]) -> SegmentClock:
        """Read the clock from the segment's files (every entity row that has the timelines)."""
        seq, temporal = pick_timelines(timelines)
        rows_parts: list[npt.NDArray[np.int64]] = []
        ns_parts: list[npt.NDArray[np.int64]] = []
        for _, table in segment.files():
            names = table.column_names
            if seq is not None and seq in names:
                col = table.column(seq)
                valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
                if temporal is not None and temporal in names:
                    tcol = table.column(temporal)
                    valid &= np.asarray(tcol.is_valid().to_numpy(zero_copy_only=False),
                                        dtype=bool)
                    ns_parts.append(index_to_int64(tcol.fill_null(0))[valid])
                rows_parts.append(index_to_int64(col.fill_null(0))[valid])
            elif seq is None and temporal is not None and temporal in names:
                tcol = table.column(temporal)
                valid = np.asarray(tcol.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
                ns_parts.append(index_to_int64(tcol.fill_null(0))[valid])
        if seq is None:
            ns = np.unique(np.concatenate(ns_parts)) if ns_parts else np.zeros(0, np.int64)
            return cls(np.arange(len(ns), dtype=np.int64), ns, timeline=None,
                       time_timeline=temporal)
        rows = np.concatenate(rows_parts) if rows_parts else np.zeros(0, np.int64)
        if len(ns_parts) == len(rows_parts) and ns_parts:
            ns_all = np.concatenate(ns_parts)
            order = np.lexsort((ns_all, rows))
            rows, ns_all = rows[order], ns_all[order]
            first = np.ones(len(rows), dtype=bool)
            first[1:] = rows[1:] != rows[:-1]
            return cls(rows[first], ns_all[first], timeline=seq, time_timeline=temporal)
        return cls(np.unique(rows), None, timeline=seq, time_timeline=None)

    def range_of_rows(self, start_row: int, end_row: int) -> NoteRange:
        """``[start_row, end_row)`` on the sequence timeline, with its ns span when known."""
        start_ns = end_ns = None
        if self.ns is not None:
            lo = int(np.searchsorted(self.rows, start_row, side="left"))
            hi = int(np.searchsorted(self.rows, end_row, side="left"))
            if hi > lo:
                start_ns = int(self.ns[lo])
                end_ns = int(self.ns[lo:hi].max()) + 1
        return NoteRange(timeline=self.timeline, start_row=start_row, end_row=end_row,
                         time_timeline=self.time_timeline if start_ns is not None else None,
                         start_ns=start_ns, end_ns=end_ns)

    def range_of_ns(self, start_ns: int, end_ns: int) -> NoteRange:
        """``[start_ns, end_ns)`` on the temporal timeline, with the rows it covers."""
        if self.ns is None:
            raise ConfigError("this dataset has no temporal timeline; give the range in rows")
        inside = (self.ns >= start_ns) & (self.ns < end_ns)
        start_row = end_row = None
        if self.timeline is not None and inside.any():
            start_row = int(self.rows[inside].min())
            end_row = int(self.rows[inside].max()) + 1
        return NoteRange(timeline=self.timeline if start_row is not None else None,
                         start_row=start_row, end_row=end_row, time_timeline=self.time_timeline,
                         start_ns=start_ns, end_ns=end_ns)


__all__ = ["NoteRange", "SegmentClock", "pick_timelines"]
