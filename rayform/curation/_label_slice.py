"""A slice that keeps only the ranges carrying a label (every ``"grasp"`` annotation, say): the
inverse of excluded ranges, stored as excluded ranges so that every loader honours it.

For each segment with at least one note of a chosen label, the slice excludes everything of the
segment's span outside the union of those notes' ranges, on each timeline of the dataset: on the
two timelines notes are kept on (rows and ns) the gaps between the labelled ranges; on any other
timeline, or where the notes give no range on a timeline, the whole span (nothing there is known
to be labelled). No sample whose window leaves the labelled ranges is then drawn.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from rayform.catalog import Catalog, DatasetView, ExcludedRange, Slice
from rayform.catalog._notes import annotations_table, findings_table
from rayform.catalog._slices import create_slice
from rayform.catalog._tables import entity_ranges
from rayform.errors import ConfigError

Ranges = dict[str, dict[str, list[tuple[int, int]]]]  # segment -> timeline -> inclusive ranges


def labelled_ranges(notes: pa.Table, labels: Sequence[str]) -> Ranges:
    """The inclusive ranges of the notes with one of ``labels``, by segment and timeline."""
    wanted = set(labels)
    out: Ranges = {}
    for row in notes.select(["segment", "label", "timeline", "start_row", "end_row",
                             "time_timeline", "start_ns", "end_ns"]).to_pylist():
        if row["segment"] is None or row["label"] not in wanted:
            continue
        by_timeline = out.setdefault(row["segment"], {})
        for timeline, start, end in ((row["timeline"], row["start_row"], row["end_row"]),
                                     (row["time_timeline"], row["start_ns"], row["end_ns"])):
            if timeline is not None and start is not None and end is not None and end > start:
                by_timeline.setdefault(timeline, []).append((int(start), int(end) - 1))
    return out


def outside(span: tuple[int, int], keep: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The inclusive pieces of ``span`` that no range of ``keep`` covers."""
    lo, hi = span
    out = []
    cursor = lo
    for start, end in sorted(keep):
        if start > cursor:
            out.append((cursor, min(start - 1, hi)))
        cursor = max(cursor, end + 1)
        if cursor > hi:
            break
    if cursor <= hi:
        out.append((cursor, hi))
    return [(a, b) for a, b in out if a <= b]


def labelled_slice(catalog: Catalog, dataset: str | DatasetView, labels: Sequence[str], *,
                   name: str | None = None) -> Slice:
    """Save a slice of the segments having notes labelled one of ``labels`` (annotations, or
    findings by check id), keeping only those ranges (see the module docstring).

    Raises:
        ConfigError: no label given, or no note carries one.
    """
    if isinstance(labels, str) or not labels:
        raise ConfigError(f"labelled_slice: labels must be a non-empty list of labels, got "
                          f"{labels!r}")
    view = catalog.get_dataset(dataset) if isinstance(dataset, str) else dataset
    notes = pa.concat_tables([annotations_table(view.catalog, view.name),
                              findings_table(view.catalog, view.name)])
    kept = labelled_ranges(notes, labels)
    chosen = [s for s in view.segment_ids() if s in kept]
    if not chosen:
        have = sorted({str(v) for v in notes.column("label").to_pylist()
                       if v is not None})[:20]
        raise ConfigError(f"labelled_slice: no note of dataset {view.name!r} carries a label "
                          f"in {list(labels)!r}; labels present: {have}")
    exclude = []
    for sid in chosen:
        spans = entity_ranges(view.segment_record(sid), None)
        for timeline, span in spans.items():
            for start, end in outside(span, kept[sid].get(timeline, [])):
                exclude.append(ExcludedRange(segment_id=sid, timeline=timeline, start=start,
                                             end=end))
    return create_slice(catalog, view, segments=chosen, name=name, exclude=exclude)
