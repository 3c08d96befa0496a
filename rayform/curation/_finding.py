"""A finding: one check's verdict on a segment (or the dataset), with its range and evidence."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from rayform.catalog._note_ranges import SegmentClock
from rayform.catalog._notes import KIND_FINDING, SEVERITIES
from rayform.errors import ConfigError

SEVERITY_RANK: Final = {name: rank for rank, name in enumerate(SEVERITIES)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """What a check found.

    Attributes:
        check: the check's stable id (``values.nonfinite``).
        severity: ``info``, ``warning`` or ``error``.
        message: one human sentence with the numbers.
        segment: the segment (None: about the dataset).
        column: the component column, if any.
        dims: the dimension indices concerned.
        dim_names: their names.
        start_row: first row (sequence value) of the range, if the finding has one.
        end_row: one past the last row (half-open).
        value: the measured value; ``threshold`` the limit it crossed; ``baseline`` what the
            dataset's other segments give.
        exclude_range: ``--write-slice`` may drop only this range instead of the segment.
    """

    check: str
    severity: str
    message: str
    segment: str | None = None
    column: str | None = None
    dims: tuple[int, ...] = ()
    dim_names: tuple[str, ...] = ()
    start_row: int | None = None
    end_row: int | None = None
    value: float | None = None
    threshold: float | None = None
    baseline: float | None = None
    exclude_range: bool = False

    def __post_init__(self) -> None:
        if self.severity not in SEVERITY_RANK:
            raise ConfigError(f"Finding.severity must be one of {SEVERITIES}, got "
                              f"{self.severity!r}")

    def row(self, *, version: str | None, dataset_version: int, clock: SegmentClock | None,
            created_at_ns: int) -> dict[str, Any]:
        """The finding as a notes row (ns range from the segment's clock)."""
        where = None
        if clock is not None and self.start_row is not None and self.end_row is not None:
            where = clock.range_of_rows(self.start_row, self.end_row)

        def number(x: float | None) -> float | None:
            return None if x is None or not math.isfinite(x) else float(x)

        return {
            "segment": self.segment, "segment_version": version,
            "dataset_version": dataset_version, "kind": KIND_FINDING, "check": self.check,
            "label": self.check, "severity": self.severity, "column": self.column,
            "dims": list(self.dims) if self.column is not None else None,
            "dim_names": list(self.dim_names) if self.column is not None else None,
            "timeline": None if where is None else where.timeline,
            "start_row": self.start_row, "end_row": self.end_row,
            "time_timeline": None if where is None else where.time_timeline,
            "start_ns": None if where is None else where.start_ns,
            "end_ns": None if where is None else where.end_ns,
            "value": number(self.value), "threshold": number(self.threshold),
            "baseline": number(self.baseline), "message": self.message,
            "attrs": '{"exclude_range": true}' if self.exclude_range else "{}",
            "created_at_ns": created_at_ns,
        }
