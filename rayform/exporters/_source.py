"""What an export reads: a dataset view (or a slice), on which timeline, in which time ranges."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rayform.catalog._dataset import DatasetView
from rayform.errors import ColumnNotFoundError, ConfigError
from rayform.recording._columns import TimelineKind

TimeRanges = Mapping[str, tuple[int, int]]

# Preferred timelines when the caller names none, in order.
_PREFERRED = ("timestamp", "log_time", "video_time", "frame_index")


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportSource:
    """The view to export and the time ranges that restrict its segments.

    Attributes:
        view: the segments to export.
        time_ranges: ``{segment_id: (start, end)}`` inclusive, on ``range_timeline``.
        default_range: a range for every segment (a slice's ``time_range``), or ``None``.
        range_timeline: the timeline the ranges are on (``None``: the export timeline).
    """

    view: DatasetView
    time_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    default_range: tuple[int, int] | None = None
    range_timeline: str | None = None

    def range_for(self, segment_id: str) -> tuple[int, int] | None:
        return self.time_ranges.get(segment_id, self.default_range)


def resolve_source(source: Any, time_ranges: TimeRanges | None) -> ExportSource:
    """The view to export and its time ranges.

    ``source`` is a :class:`DatasetView` (a dataset, or one filtered with ``filter_segments`` /
    ``filter_contents``) or a slice (:class:`rayform.catalog._slices.Slice`, or any object with a
    ``view()`` method returning a :class:`DatasetView` and an optional ``time_range`` with
    ``timeline``, ``start`` and ``end``).

    Raises:
        ConfigError: ``source`` is neither.
    """
    ranges = {k: (int(v[0]), int(v[1])) for k, v in (time_ranges or {}).items()}
    if isinstance(source, DatasetView):
        return ExportSource(view=source, time_ranges=ranges)
    view = getattr(source, "view", None)
    if callable(view):
        view = view()
    if not isinstance(view, DatasetView):
        raise ConfigError(
            f"export: expected a dataset, a dataset view or a slice, got {type(source).__name__}")
    time_range = getattr(source, "time_range", None)
    if time_range is None:
        return ExportSource(view=view, time_ranges=ranges)
    return ExportSource(view=view, time_ranges=ranges,
                        default_range=(int(time_range.start), int(time_range.end)),
                        range_timeline=str(time_range.timeline))


def pick_timeline(source: ExportSource, timeline: str | None) -> tuple[str, TimelineKind]:
    """The export timeline: ``timeline``, else the slice's range timeline, else the timeline the
    most entities are logged on (ties: timestamp, log_time, video_time, frame_index, then temporal
    timelines first).

    Raises:
        ColumnNotFoundError: the named timeline is not in the view.
        ConfigError: a slice's time range is on another timeline than the one asked for.
    """
    view = source.view
    timelines: dict[str, TimelineKind] = dict(view.schema().timelines)
    if not timelines:
        raise ColumnNotFoundError(f"dataset {view.name!r} has no timeline (is it empty?)")
    if timeline is None and source.range_timeline is not None:
        timeline = source.range_timeline
    if timeline is not None:
        if timeline not in timelines:
            raise ColumnNotFoundError(
                f"timeline {timeline!r} is not in dataset {view.name!r}; it has {sorted(timelines)}")
        if source.range_timeline is not None and source.range_timeline != timeline:
            raise ConfigError(
                f"export: the slice's time range is on {source.range_timeline!r}; export on that "
                f"timeline (timeline={source.range_timeline!r}), not {timeline!r}")
        return timeline, timelines[timeline]
    # The timeline most entities are logged on (a 100 Hz joint stream and 30 Hz cameras may
    # share only a timestamp timeline); ties go to the preferred names, then temporal ones.
    coverage = dict.fromkeys(timelines, 0)
    for record in view.segment_records():
        for entity in record.entities.values():
            for name in entity.ranges:
                if name in coverage:
                    coverage[name] += 1

    def rank(name: str) -> tuple[int, int, int]:
        preferred = _PREFERRED.index(name) if name in _PREFERRED else len(_PREFERRED)
        return (-coverage[name], preferred, 0 if timelines[name] != "sequence" else 1)

    name = min(timelines, key=rank)
    return name, timelines[name]
    temporal = [n for n, k in timelines.items() if k != "sequence"]
    name = temporal[0] if temporal else next(iter(timelines))
    return name, timelines[name]
