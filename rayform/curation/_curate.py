"""``curate(view)``: run the checks over a dataset, keep the findings as catalog data.

Steps: load every segment's numeric series (a segment that cannot be read is a finding); reuse
the stored findings of segments whose version was already checked with the same checks; run the
per-segment checks on the rest and the dataset checks on all; commit the findings (replacing the
previous ones) next to the dataset; return them with a verdict per segment and the coverage.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rayform.catalog import DatasetEntry, DatasetView, Slice
from rayform.catalog._notes import findings_table as stored_findings
from rayform.catalog._notes import load_notes, notes_rows, replace_findings
from rayform.curation import (
    _checks_drift,
    _checks_episode,
    _checks_series,
    _checks_shape,
    _checks_stored,
    _checks_timing,
    _checks_values,
)
from rayform.curation._check import Check, select_checks
from rayform.curation._context import MIN_BASELINE_SEGMENTS, Context
from rayform.curation._finding import Finding
from rayform.curation._profile import profile_of
from rayform.curation._result import CurationResult, verdicts_of
from rayform.curation._series import SegmentSeries, load_series, numeric_columns
from rayform.errors import ConfigError, RayformError

VideoMode = Literal["off", "sample", "full"]
VIDEO_MODES: tuple[VideoMode, ...] = ("off", "sample", "full")
CURATION_FORMAT = 4  # bump when a check's rule changes: stored findings are then recomputed

COVERAGE_CHECKS = [
    Check(id="coverage.declared", detects="episodes the source declares but are not registered",
          how="the source's declared episode count against the registered segments",
          threshold="any missing", cost="metadata", scope="dataset"),
    Check(id="coverage.readable", detects="segments whose files cannot be read",
          how="open every segment's recording files and numeric columns", threshold="any",
          cost="rows", scope="dataset"),
    Check(id="coverage.columns", detects="columns missing from a segment",
          how="a column at least half the other segments have", threshold="half",
          cost="metadata", scope="dataset"),
]


def all_checks() -> list[Check]:
    """Every check, in the order they run."""
    from rayform.curation import _checks_video

    return [*COVERAGE_CHECKS, *_checks_timing.CHECKS, *_checks_values.CHECKS,
            *_checks_stored.CHECKS, *_checks_series.CHECKS, *_checks_episode.CHECKS,
            *_checks_shape.CHECKS, *_checks_video.CHECKS, *_checks_drift.CHECKS]


def _view_of(source: DatasetView | Slice) -> DatasetView:
    if isinstance(source, Slice):
        return source.view()
    if not isinstance(source, DatasetView):
        raise TypeError(f"curate: expected a DatasetEntry, DatasetView or Slice, got "
                        f"{type(source).__name__}")
    return source


def _coverage_findings(ctx: Context, view: DatasetView, unreadable: dict[str, str],
                       declared: int | None) -> list[Finding]:
    out = []
    registered = len(view.segment_ids())
    if declared is not None and declared > registered:
        out.append(Finding(check="coverage.declared", severity="info", value=float(registered),
                           threshold=float(declared),
                           message=(f"{registered} of {declared} declared episodes are "
                                    f"registered (a partial download?); the {registered} present "
                                    "are checked")))
    for sid, why in unreadable.items():
        out.append(Finding(check="coverage.readable", severity="error", segment=sid,
                           message=f"cannot be read: {why}"))
    counts: dict[str, int] = {}
    for seg in ctx.segments.values():
        for column in seg.columns:
            counts[column] = counts.get(column, 0) + 1
    for sid, seg in ctx.segments.items():
        have = set(seg.columns)
        others = len(ctx.segments) - 1
        for column, count in counts.items():
            if column not in have and others and count >= max(1, others / 2):
                out.append(Finding(check="coverage.columns", severity="warning", segment=sid,
                                   column=column, value=0.0, baseline=float(count),
                                   message=f"lacks column {column!r}, which {count} of the "
                                           f"other {others} segments have"))
    return out


def _declared(segments: dict[str, SegmentSeries]) -> int | None:
    values = [s.properties.get("dataset_total_episodes") for s in segments.values()]
    numbers = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return max(numbers) if numbers else None


def nominal_rate(segments: dict[str, SegmentSeries]) -> float | None:
    rates = [s.properties.get("fps") for s in segments.values()]
    numbers = [float(r) for r in rates if isinstance(r, int | float) and not isinstance(r, bool)]
    return float(np.median(numbers)) if numbers else None


def config_key(checks: Sequence[Check], video: str) -> str:
    text = json.dumps({"format": CURATION_FORMAT, "checks": [c.id for c in checks],
                       "video": video})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_segment(check: Check, ctx: Context, seg: SegmentSeries) -> list[Finding]:
    assert check.run_segment is not None
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: handled as NaN
        return check.run_segment(ctx, seg)


def load_all(view: DatasetView, *, numeric: bool = True
             ) -> tuple[dict[str, SegmentSeries], dict[str, str]]:
    """Every segment's series (``numeric=False``: clock and video references only), and the
    segments that cannot be read, with why."""
    columns = numeric_columns(view) if numeric else []
    segments: dict[str, SegmentSeries] = {}
    unreadable: dict[str, str] = {}
    for sid in view.segment_ids():
        try:
            segments[sid] = load_series(view, sid, columns)
        except (RayformError, OSError, pa.ArrowException) as err:
            unreadable[sid] = str(err)
    return segments, unreadable


def curate(source: DatasetView | Slice, *, checks: Sequence[str] | None = None,
           video: VideoMode = "sample", baseline: DatasetView | Slice | None = None,
           persist: bool = True) -> CurationResult:
    """Check a dataset (or a view or slice of it) and keep the findings as catalog data.

    Args:
        source: a dataset entry, a view of it, or a slice.
        checks: globs over check ids (``["values.*", "-values.dead"]``); all by default.
        video: ``"sample"`` checks a sample of each camera's frames, ``"full"`` every frame,
            ``"off"`` none (the video checks are then reported as skipped).
        baseline: another dataset (or a view or slice) to compare against: the ``drift.*``
            checks report columns gained or lost, unit changes and shifted distributions per
            column and dimension (skipped without one).
        persist: commit the findings as ``<dataset>.findings`` (needs a writable catalog).

    Returns:
        the findings, a verdict per segment and the coverage (see :class:`CurationResult`).

    Raises:
        ConfigError: an unknown check glob or video mode.
    """
    if video not in VIDEO_MODES:
        raise ConfigError(f"curate: video must be one of {VIDEO_MODES}, got {video!r}")
    view = _view_of(source)
    chosen = select_checks(all_checks(), checks)
    config = config_key(chosen, video)
    # only video and metadata checks chosen (``--checks 'video.*'``): no numeric column to read
    segments, unreadable = load_all(view, numeric=baseline is not None or any(
        c.cost == "rows" for c in chosen))
    reference = None
    if baseline is not None:
        base_view = _view_of(baseline)
        reference = profile_of(base_view, load_all(base_view)[0].values())
    ctx = Context(view=view, segments=segments, nominal_rate_hz=nominal_rate(segments),
                  video=video, baseline=reference)
    notes = load_notes(view.catalog, view.name)
    reuse: set[str] = set()
    previous = None
    if notes is not None and notes.findings_config == config:
        previous = stored_findings(view.catalog, view.name)
        reuse = {sid for sid, seg in segments.items() if notes.checked.get(sid) == seg.version}
    now = time.time_ns()
    version = view.snapshot_version
    rows: list[dict[str, Any]] = []
    for sid, seg in segments.items():
        if sid in reuse:
            continue
        for check in chosen:
            if check.scope == "segment" and (check.cost != "video" or video != "off"):
                for f in run_segment(check, ctx, seg):
                    rows.append(f.row(version=seg.version, dataset_version=version,
                                      clock=seg.clock, created_at_ns=now))
    dataset_findings = []
    chosen_ids = {c.id for c in chosen}
    dataset_findings += [f for f in _coverage_findings(ctx, view, unreadable, _declared(segments))
                         if f.check in chosen_ids]
    for check in chosen:
        if check.run_dataset is not None:
            dataset_findings += check.run_dataset(ctx)
    for f in dataset_findings:
        about = segments.get(f.segment) if f.segment is not None else None
        rows.append(f.row(version=None if about is None else about.version,
                          dataset_version=version, clock=None if about is None else about.clock,
                          created_at_ns=now))
    table = notes_rows(rows)
    if previous is not None and reuse:
        segment_scope = [c.id for c in chosen if c.scope == "segment"]
        keep = pc.and_(pc.is_in(previous.column("segment"), pa.array(sorted(reuse))),
                       pc.is_in(previous.column("check"), pa.array(segment_scope)))
        table = pa.concat_tables([previous.filter(keep.fill_null(False)), table])
    table = table.sort_by([("segment", "ascending"), ("check", "ascending"),
                           ("start_row", "ascending")])
    if persist:
        kept = _kept_from_other_views(view, notes, config, segments)
        if kept is not None:
            table = pa.concat_tables([kept, table])
        replace_findings(view.catalog, view.name, table, dataset_version=version, config=config,
                         checked={**_checked_elsewhere(view, notes, config),
                                  **{sid: s.version for sid, s in segments.items()}})
        if kept is not None:
            table = table.slice(kept.num_rows)
    coverage = {
        "declared": _declared(segments),
        "registered": len(view.segment_ids()),
        "readable": len(segments),
        "checked": len(segments),
        "reused": len(reuse),
        "columns": _column_counts(segments),
        "checks": _check_status(all_checks(), chosen, ctx, video),
    }
    return CurationResult(dataset=view.name, version=version, findings=table,
                          verdicts=verdicts_of(table, view.segment_ids()), coverage=coverage)


def _column_counts(segments: dict[str, SegmentSeries]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for seg in segments.values():
        for column in seg.columns:
            counts[column] = counts.get(column, 0) + 1
    return dict(sorted(counts.items()))


def _check_status(every: list[Check], chosen: list[Check], ctx: Context,
                  video: str) -> list[dict[str, Any]]:
    picked = {c.id for c in chosen}
    others = len(ctx.segments) - 1
    out = []
    for check in every:
        reason = None
        if check.id not in picked:
            reason = "not selected (--checks)"
        elif check.cost == "video" and video == "off":
            reason = "video checks off (--video off)"
        elif check.needs_reference and ctx.baseline is None:
            reason = "needs a baseline dataset or slice to compare against (--baseline)"
        elif check.needs_baseline and others < MIN_BASELINE_SEGMENTS:
            reason = (f"needs at least {MIN_BASELINE_SEGMENTS} other segments to compare "
                      f"against; the dataset has {others}")
        out.append({"id": check.id, "ran": reason is None, "reason": reason})
    return out


def _kept_from_other_views(view: DatasetView, notes: Any, config: str,
                           segments: dict[str, SegmentSeries]) -> pa.Table | None:
    """Stored findings of segments outside this view that are still current (a slice run
    replaces only its own segments' findings)."""
    if notes is None or notes.findings_config != config or not isinstance(view, DatasetView):
        return None
    elsewhere = _checked_elsewhere(view, notes, config)
    if not elsewhere:
        return None
    previous = stored_findings(view.catalog, view.name)
    keep = pc.is_in(previous.column("segment"), pa.array(sorted(elsewhere)))
    return previous.filter(keep.fill_null(False))


def _checked_elsewhere(view: DatasetView, notes: Any, config: str) -> dict[str, str]:
    if notes is None or notes.findings_config != config:
        return {}
    here = set(view.segment_ids())
    try:
        newest = view.catalog.get_dataset(view.name)  # type: ignore[attr-defined]
    except (AttributeError, RayformError):
        return {}
    current = {r.segment_id: r.version for r in newest.segment_records()} \
        if isinstance(newest, DatasetEntry) else {}
    return {sid: v for sid, v in notes.checked.items()
            if sid not in here and current.get(sid) == v}
