"""Curation: checks over a dataset's rows, statistics and video; findings as catalog data (no torch)."""

from __future__ import annotations

from rayform.curation._check import Check
from rayform.curation._clean_slice import excluded_ranges, write_clean_slice
from rayform.curation._curate import all_checks, curate
from rayform.curation._finding import Finding
from rayform.curation._label_slice import labelled_slice
from rayform.curation._plot import plot_findings
from rayform.curation._registration_checks import check_registered, register_checked
from rayform.curation._result import CurationResult, SegmentVerdict

__all__ = [
    "Check",
    "CurationResult",
    "Finding",
    "SegmentVerdict",
    "all_checks",
    "check_registered",
    "curate",
    "excluded_ranges",
    "labelled_slice",
    "plot_findings",
    "register_checked",
    "write_clean_slice",
]
