"""What a curation run returns: findings (Arrow), a verdict per segment, coverage; JSON and exit codes.

``--format json`` prints :meth:`CurationResult.to_json`::

    {"dataset": str, "version": int,
     "coverage": {"declared": int | null, "registered": int, "readable": int, "checked": int,
                  "reused": int, "columns": {column: segments having it},
                  "checks": [{"id": str, "ran": bool, "reason": str | null}]},
     "segments": [{"segment": str, "verdict": "ok" | "review" | "exclude",
                   "reasons": [str]}],
     "findings": [{segment, segment_version, check, severity, column, dims, dim_names,
                   start_row, end_row, start_ns, end_ns, value, threshold, baseline, message}]}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

import pyarrow as pa

from rayform.curation._finding import SEVERITY_RANK

Verdict = Literal["ok", "review", "exclude"]
FINDING_COLUMNS: Final = ("segment", "segment_version", "check", "severity", "column", "dims",
                          "dim_names", "start_row", "end_row", "start_ns", "end_ns", "value",
                          "threshold", "baseline", "message")
EXIT_CLEAN: Final = 0
EXIT_FINDINGS: Final = 1
EXIT_NOTHING_CHECKABLE: Final = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentVerdict:
    """``exclude`` with an error, ``review`` with a warning, else ``ok``; the reasons say why."""

    segment: str
    verdict: Verdict
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CurationResult:
    """The outcome of :func:`rayform.curation.curate`.

    Attributes:
        dataset: the dataset's name; ``version`` the snapshot checked.
        findings: one row per finding (the columns of ``<dataset>.findings``).
        verdicts: one per checked segment, in segment order.
        coverage: declared / registered / readable / checked counts, columns per segment and
            which checks ran (see the module docstring).
    """

    dataset: str
    version: int
    findings: pa.Table
    verdicts: tuple[SegmentVerdict, ...]
    coverage: dict[str, Any]

    @property
    def checkable(self) -> bool:
        return bool(self.coverage["checked"]) and any(c["ran"] for c in self.coverage["checks"])

    def verdict(self, segment: str) -> SegmentVerdict:
        for v in self.verdicts:
            if v.segment == segment:
                return v
        raise KeyError(f"no verdict for segment {segment!r}")

    def at_least(self, severity: str) -> pa.Table:
        """The findings of ``severity`` or worse."""
        rank = SEVERITY_RANK[severity]
        keep = [SEVERITY_RANK[s] >= rank for s in self.findings.column("severity").to_pylist()]
        return self.findings.filter(pa.array(keep, pa.bool_()))

    def exit_code(self, fail_on: str = "error") -> int:
        """0 clean, 1 findings at or above ``fail_on``, 3 nothing checkable."""
        if not self.checkable:
            return EXIT_NOTHING_CHECKABLE
        return EXIT_FINDINGS if self.at_least(fail_on).num_rows else EXIT_CLEAN

    def findings_view(self) -> pa.Table:
        """The findings with the documented columns only (what JSON and CSV print)."""
        return self.findings.select(list(FINDING_COLUMNS))

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "version": self.version,
            "coverage": self.coverage,
            "segments": [{"segment": v.segment, "verdict": v.verdict, "reasons": list(v.reasons)}
                         for v in self.verdicts],
            "findings": self.findings_view().to_pylist(),
        }


def verdicts_of(findings: pa.Table, segments: list[str]) -> tuple[SegmentVerdict, ...]:
    """A verdict per segment from its findings (info never changes a verdict)."""
    by_segment: dict[str, list[tuple[int, str]]] = {s: [] for s in segments}
    for row in findings.select(["segment", "severity", "check", "message"]).to_pylist():
        if row["segment"] in by_segment and SEVERITY_RANK[row["severity"]] > 0:
            by_segment[row["segment"]].append(
                (SEVERITY_RANK[row["severity"]], f"{row['check']}: {row['message']}"))
    out = []
    for segment, items in by_segment.items():
        worst = max((rank for rank, _ in items), default=0)
        verdict: Verdict = "exclude" if worst == 2 else "review" if worst == 1 else "ok"
        out.append(SegmentVerdict(segment=segment, verdict=verdict,
                                  reasons=tuple(text for rank, text in items if rank == worst)))
    return tuple(out)
