"""``--write-slice NAME``: a slice of what is clean, to train on.

Segments with an error that only a whole-segment drop answers (a calibration offset, a stuck
joint, unreadable files) are left out; findings that name a row range the loader can skip (an
idle head or tail, a NaN burst, a spike) become the slice's excluded ranges, on the sequence
timeline and on the temporal one, so that no sample whose window touches them is drawn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow as pa

from rayform.catalog import Catalog, ExcludedRange, Slice
from rayform.catalog._slices import create_slice
from rayform.curation._result import CurationResult
from rayform.errors import ConfigError


def excluded_ranges(notes: pa.Table, *, labels: Sequence[str] | None = None
                    ) -> list[ExcludedRange]:
    """The ranges of notes rows (findings or annotations) as :class:`ExcludedRange` values on
    both timelines, e.g. every ``"failed grasp"`` annotation for ``slices.create(exclude=…)``.

    Args:
        notes: rows of ``dataset.annotations()`` / ``dataset.findings()`` (or a SQL result with
            their columns).
        labels: keep only rows with one of these labels (all by default).
    """
    out = []
    for row in notes.to_pylist():
        if row.get("segment") is None or (labels is not None and row.get("label") not in labels):
            continue
        if row.get("timeline") is not None and row.get("start_row") is not None:
            out.append(ExcludedRange(segment_id=row["segment"], timeline=row["timeline"],
                                     start=row["start_row"], end=row["end_row"] - 1))
        if row.get("time_timeline") is not None and row.get("start_ns") is not None:
            out.append(ExcludedRange(segment_id=row["segment"], timeline=row["time_timeline"],
                                     start=row["start_ns"], end=row["end_ns"] - 1))
    return out


def clean_selection(result: CurationResult) -> tuple[list[str], list[ExcludedRange]]:
    """The segments to keep and the ranges to exclude from them."""
    drop: set[str] = set()
    rangeable = []
    for i, row in enumerate(result.findings.select(["segment", "severity", "attrs"]).to_pylist()):
        if row["segment"] is None:
            continue
        if json.loads(row["attrs"] or "{}").get("exclude_range"):
            rangeable.append(i)
        elif row["severity"] == "error":
            drop.add(row["segment"])
    ranges = excluded_ranges(result.findings.take(pa.array(rangeable, pa.int64())))
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
