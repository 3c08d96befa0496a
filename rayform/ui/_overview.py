"""The catalog's front page: per dataset its segments, rows, duration, size, versions, last change."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rayform.catalog import Catalog, DatasetEntry
from rayform.catalog._note_ranges import pick_timelines
from rayform.recording._columns import (
    LAST_UPDATED_AT,
    NUM_ROWS,
    RANGE_END_SUFFIX,
    RANGE_START_SUFFIX,
    SIZE_BYTES,
)
from rayform.ui._segment_table import SegmentTables


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetSummary:
    """One row of the dataset list.

    Attributes:
        duration_s: the segments' spans on the dataset's temporal timeline, summed (``None``
            without one).
        last_change: ISO time of the newest segment update (``None`` when empty).
    """

    name: str
    segments: int
    rows: int
    duration_s: float | None
    size_bytes: int
    version: int
    last_change: str | None
    timelines: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "segments": self.segments, "rows": self.rows,
                "duration_s": self.duration_s, "size_bytes": self.size_bytes,
                "version": self.version, "last_change": self.last_change,
                "timelines": self.timelines}


def _sum(table: pa.Table, column: str) -> int:
    if column not in table.column_names or table.num_rows == 0:
        return 0
    return int(pc.sum(table.column(column)).as_py() or 0)


def summarize(dataset: DatasetEntry, table: pa.Table) -> DatasetSummary:
    """The figures of one dataset from its segment table (metadata only, no recording read)."""
    timelines = dict(dataset.timelines)
    _, temporal = pick_timelines(timelines)
    duration: float | None = None
    if temporal is not None and table.num_rows:
        start, end = temporal + RANGE_START_SUFFIX, temporal + RANGE_END_SUFFIX
        if start in table.column_names and end in table.column_names:
            spans = pc.subtract(table.column(end).cast(pa.int64()),
                                table.column(start).cast(pa.int64()))
            duration = float(pc.sum(spans).as_py() or 0) / 1e9
    last = None
    if LAST_UPDATED_AT in table.column_names and table.num_rows:
        newest = pc.max(table.column(LAST_UPDATED_AT).cast(pa.timestamp("ns")).cast(pa.int64()))
        if newest.as_py() is not None:
            last = pa.scalar(newest.as_py(), pa.timestamp("ns")).cast(pa.string()).as_py()
            last = str(last).replace(" ", "T") + "Z"
    return DatasetSummary(name=dataset.name, segments=table.num_rows,
                          rows=_sum(table, NUM_ROWS), duration_s=duration,
                          size_bytes=_sum(table, SIZE_BYTES), version=dataset.snapshot_version,
                          last_change=last, timelines=timelines)


def catalog_overview(catalog: Catalog, tables: SegmentTables) -> list[DatasetSummary]:
    """A summary of every dataset, by name."""
    return [summarize(d, tables.get(d)[0])
            for d in sorted(catalog.datasets(), key=lambda d: d.name)]
