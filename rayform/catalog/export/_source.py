"""What an export reads: a dataset view (or a slice), on which timeline, in which time ranges."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayform.catalog._columns import TimelineKind
from rayform.catalog._dataset import DatasetView
from rayform.errors import ColumnNotFoundError, ConfigError

TimeRanges = Mapping[str, tuple[int, int]]

# Preferred timelines when the caller names none, in order.
_PREFERRED = ("timestamp", "log_time", "video_time", "frame_index")


def resolve_source(source: Any, time_ranges: TimeRanges | None) -> tuple[DatasetView, TimeRanges]:
    """The view to export and its per-segment time ranges.

    ``source`` is a :class:`DatasetView` (a dataset, or one filtered with ``filter_segments`` /
    ``filter_contents``) or a slice: any object with a ``view`` (attribute or method) returning
    a :class:`DatasetView`, and optionally ``time_ranges`` (``{segment_id: (start, end)}``,
    inclusive, in the export timeline's units).

    Raises:
        ConfigError: ``source`` is neither.
    """
    if isinstance(source, DatasetView):
        return source, dict(time_ranges or {})
    view = getattr(source, "view", None)
    if callable(view):
        view = view()
    if not isinstance(view, DatasetView):
        raise ConfigError(
            f"export: expected a dataset, a dataset view or a slice, got {type(source).__name__}")
    ranges = dict(getattr(source, "time_ranges", None) or {})
    ranges.update(time_ranges or {})
    return view, ranges


def pick_timeline(view: DatasetView, timeline: str | None) -> tuple[str, TimelineKind]:
    """The export timeline: ``timeline`` or the first of timestamp, log_time, video_time,
    frame_index, or else the first temporal timeline of the view.

    Raises:
        ColumnNotFoundError: the named timeline is not in the view.
    """
    timelines: dict[str, TimelineKind] = dict(view.schema().timelines)
    if not timelines:
        raise ColumnNotFoundError(f"dataset {view.name!r} has no timeline (is it empty?)")
    if timeline is not None:
        if timeline not in timelines:
            raise ColumnNotFoundError(
                f"timeline {timeline!r} is not in dataset {view.name!r}; it has {sorted(timelines)}")
        return timeline, timelines[timeline]
    for name in _PREFERRED:
        if name in timelines:
            return name, timelines[name]
    temporal = [n for n, k in timelines.items() if k != "sequence"]
    name = temporal[0] if temporal else next(iter(timelines))
    return name, timelines[name]
