"""Findings written at registration (``register_checked`` / ``rayform register --curate``): the
cheap checks that need no other segment, run on the segments a registration adds.

They are what registration already knows (a LeRobot episode whose declared length disagrees with
its rows, an MP4 with a frame fewer than rows, NaN bursts, stored statistics that disagree),
reported as findings instead of refusing the dataset. Order, for crash safety: the segments are
committed first (the dataset's snapshot), then their findings (the notes' own commit, merged with
the findings of the other segments). A crash between the two leaves segments without findings,
never findings without segments; the next ``rayform curate`` checks every segment version it has
not checked yet, so nothing is lost.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any, Final

from rayform.catalog import DatasetEntry, RegistrationResult
from rayform.catalog._notes import merge_findings, notes_rows
from rayform.curation._check import Check
from rayform.curation._context import Context
from rayform.curation._curate import (
    VideoMode,
    all_checks,
    config_key,
    load_all,
    nominal_rate,
    run_segment,
)
from rayform.curation._finding import Finding
from rayform.curation._result import CurationResult, verdicts_of

REGISTRATION_CHECKS: Final = (
    "bookkeeping.length", "bookkeeping.index", "bookkeeping.video_grid", "bookkeeping.stats",
    "timing.timestamps", "timing.rate", "values.nonfinite", "video.frames",
)
"""Per-segment checks that need no other segment and decode no frame (``video.frames`` demuxes
the container's index only)."""


def registration_checks() -> list[Check]:
    return [c for c in all_checks() if c.id in REGISTRATION_CHECKS]


def check_registered(dataset: DatasetEntry, segment_ids: Sequence[str]) -> CurationResult:
    """Run the registration checks on ``segment_ids`` of ``dataset`` and commit their findings
    (the stored findings of the other segments are kept)."""
    chosen = registration_checks()
    video: VideoMode = "sample"
    if not segment_ids:  # nothing registered: nothing to check, nothing committed
        return CurationResult(dataset=dataset.name, version=dataset.snapshot_version,
                              findings=notes_rows([]), verdicts=(),
                              coverage={"declared": None, "registered": 0, "readable": 0,
                                        "checked": 0, "reused": 0, "columns": {}, "checks": []})
    view = dataset.filter_segments(list(dict.fromkeys(segment_ids)))
    segments, unreadable = load_all(view)
    ctx = Context(view=view, segments=segments, nominal_rate_hz=nominal_rate(segments),
                  video=video)
    now = time.time_ns()
    version = view.snapshot_version
    rows: list[dict[str, Any]] = []
    for seg in segments.values():
        for check in chosen:
            for f in run_segment(check, ctx, seg):
                rows.append(f.row(version=seg.version, dataset_version=version,
                                  clock=seg.clock, created_at_ns=now))
    for sid, why in unreadable.items():
        rows.append(Finding(check="coverage.readable", severity="error", segment=sid,
                            message=f"cannot be read: {why}").row(
            version=None, dataset_version=version, clock=None, created_at_ns=now))
    table = notes_rows(rows).sort_by([("segment", "ascending"), ("check", "ascending"),
                                      ("start_row", "ascending")])
    merge_findings(view.catalog, view.name, table, dataset_version=version,
                   config=config_key(chosen, video),
                   segments={sid: s.version for sid, s in segments.items()})
    coverage: dict[str, Any] = {"declared": None, "registered": len(view.segment_ids()),
                "readable": len(segments), "checked": len(segments), "reused": 0,
                "columns": {}, "checks": [{"id": c.id, "ran": True, "reason": None}
                                          for c in chosen]}
    return CurationResult(dataset=view.name, version=version, findings=table,
                          verdicts=verdicts_of(table, view.segment_ids()), coverage=coverage)


def register_checked(dataset: DatasetEntry,
                     sources: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                     **register_options: Any) -> tuple[RegistrationResult, CurationResult]:
    """``dataset.register(sources, **register_options)``, then the registration checks on the
    segments it added, their findings committed next to the dataset (see the module docstring).

    Returns:
        the registration's result and the findings on the new segments.
    """
    result = dataset.register(sources, **register_options).wait()
    return result, check_registered(dataset, result.segment_ids)
