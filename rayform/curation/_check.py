"""The check registry: every check's stable id, what it detects, how, its default threshold."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from rayform.curation._context import Context
from rayform.curation._finding import Finding
from rayform.curation._series import SegmentSeries
from rayform.errors import ConfigError

SegmentCheck = Callable[[Context, SegmentSeries], list[Finding]]
DatasetCheck = Callable[[Context], list[Finding]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """One check.

    Attributes:
        id: stable id ``family.name`` (what ``--checks`` globs match).
        detects: what it finds, in a few words.
        how: the rule.
        threshold: the default threshold, in words.
        cost: ``metadata``, ``rows`` (reads the numeric columns) or ``video`` (decodes frames).
        scope: ``segment`` (run per segment, cached per segment version) or ``dataset``.
        needs_baseline: compares against the other segments (needs at least 4 of them).
        needs_reference: compares against a baseline dataset or slice (``--baseline``).
    """

    id: str
    detects: str
    how: str
    threshold: str
    cost: Literal["metadata", "rows", "video"]
    scope: Literal["segment", "dataset"]
    run_segment: SegmentCheck | None = None
    run_dataset: DatasetCheck | None = None
    needs_baseline: bool = False
    needs_reference: bool = False


def select_checks(checks: Sequence[Check], patterns: Sequence[str] | None) -> list[Check]:
    """The checks whose id matches one of the globs (all for None; ``-glob`` removes).

    Raises:
        ConfigError: a pattern that matches no check.
    """
    if not patterns:
        return list(checks)
    include = [p for p in patterns if not p.startswith("-")]
    exclude = [p[1:] for p in patterns if p.startswith("-")]
    for pattern in [*include, *exclude]:
        if not any(fnmatch.fnmatchcase(c.id, pattern) for c in checks):
            raise ConfigError(
                f"checks: {pattern!r} matches no check; known: {', '.join(c.id for c in checks)}"
            )
    chosen = [c for c in checks if not include
              or any(fnmatch.fnmatchcase(c.id, p) for p in include)]
    return [c for c in chosen if not any(fnmatch.fnmatchcase(c.id, p) for p in exclude)]
