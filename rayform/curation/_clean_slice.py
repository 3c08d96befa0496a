"""``--write-slice NAME``: a slice of what is clean, to train on.

Segments with an error that only a whole-segment drop answers (a calibration offset, a stuck
joint, unreadable files) are left out; findings that name a row range the loader can skip (an
idle head or tail, a NaN burst, a spike) become the slice's excluded ranges, on the sequence
timeline and on the temporal one, so that no sample whose window touches them is drawn.
"""

from __future__ import annotations

import json

from rayform.catalog import Catalog, ExcludedRange, Slice
from rayform.catalog._slices import create_slice
from rayform.curation._result import CurationResult
from rayform.errors import ConfigError


def clean_selection(result: CurationResult) -> tuple[list[str], list[ExcludedRange]]:
    """The segments to keep and the ranges to exclude from them."""
    drop: set[str] = set()
    ranges: list[ExcludedRange] = []
    for row in result.findings.to_pylist():
        segment = row["segment"]
        if segment is None:
            continue
        rangeable = bool(json.loads(row["attrs"] or "{}").get("exclude_range"))
        if row["severity"] == "error" and not rangeable:
            drop.add(segment)
        if not rangeable:
            continue
        if row["timeline"] is not None and row["start_row"] is not None:
            ranges.append(ExcludedRange(segment_id=segment, timeline=row["timeline"],
                                        start=row["start_row"], end=row["end_row"] - 1))
        if row["time_timeline"] is not None and row["start_ns"] is not None:
            ranges.append(ExcludedRange(segment_id=segment, timeline=row["time_timeline"],
                                        start=row["start_ns"], end=row["end_ns"] - 1))
    keep = [v.segment for v in result.verdicts if v.segment not in drop]
    return keep, [r for r in ranges if r.segment_id not in drop]


def write_clean_slice(catalog: Catalog, result: CurationResult, name: str) -> Slice:
    """Save the clean part of the curated dataset as a slice named ``name``.

    Raises:
        ConfigError: nothing is clean.
    """
    keep, ranges = clean_selection(result)
    if not keep:
        raise ConfigError(f"curate --write-slice {name!r}: every segment of {result.dataset!r} "
                          "is excluded; nothing is clean to save")
    view = catalog.get_dataset(result.dataset).at_version(result.version)
    return create_slice(catalog, view, segments=keep, name=name, exclude=ranges)
