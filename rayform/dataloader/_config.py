"""What to load: DataSource (a dataset and an optional segment list) and Field (a column to decode).

``Field.window`` holds explicit offsets relative to the sample's index value, one output per
offset, order and duplicates kept: integers on sequence timelines, **seconds** on timestamp and
duration timelines (``(-0.2, -0.1, 0.0)``), not snapped to the sampling grid (Rerun 0.41).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from numbers import Real
from typing import Any, Literal, TypeAlias

from rayform.catalog import DatasetView, ExcludedRange, Slice, TimeRange
from rayform.decoders import ColumnDecoder, Selector
from rayform.decoders._base import is_selector
from rayform.errors import ConfigError, SegmentNotFoundError

EdgeMode: TypeAlias = Literal["trim", "pad"]
"""How samples near a segment's edges are handled.

``"trim"`` (Rerun's behaviour, the default): the sample space of each segment is trimmed so that
every window offset stays inside the segment. ``"pad"`` (LeRobot's): every grid point is a sample;
window positions outside the segment are clamped to its first / last index value and reported in
a ``<key>_is_pad`` bool mask ``[T]``.
"""

EDGE_MODES: tuple[EdgeMode, ...] = ("trim", "pad")


def check_edge(edge: str) -> EdgeMode:
    """Validate an ``edge`` argument.

    Raises:
        ConfigError: not ``"trim"`` or ``"pad"``.
    """
    if edge not in EDGE_MODES:
        raise ConfigError(f"edge must be 'trim' or 'pad', got {edge!r}")
    return edge


@dataclass(frozen=True)
class DataSource:
    """A dataset (or view, or slice) to sample from, optionally restricted to some segments.

    Attributes:
        dataset: a :class:`rayform.catalog.DatasetEntry`, :class:`~rayform.catalog.DatasetView`
            or :class:`~rayform.catalog.Slice`. A slice becomes its pinned view (``slice_.view()``)
            and its time range becomes ``time_range``.
        segments: segment ids to keep (kept in the dataset's order), or ``None`` for all.
        time_range: a rayform option (keyword-only): only samples whose index value lies in this
            inclusive range, on the grid the segment would have without it. It must be on the
            index timeline the dataset samples.
        excluded: a rayform option (keyword-only): ranges no sample's window may touch (a
            slice's ``excluded``, e.g. from ``rayform curate --write-slice``); ranges on other
            timelines than the sampled one are ignored.

    Raises:
        SegmentNotFoundError: a segment id is not in the dataset.
    """

    dataset: DatasetView
    segments: Sequence[str] | None = None
    _: KW_ONLY
    time_range: TimeRange | None = None
    excluded: tuple[ExcludedRange, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "excluded", tuple(self.excluded))
        if isinstance(self.dataset, Slice):
            object.__setattr__(self, "excluded", self.excluded or self.dataset.excluded)
            if self.time_range is not None and self.dataset.time_range is not None:
                raise ConfigError(f"DataSource: slice {self.dataset.id} has its own time range "
                                  f"{self.dataset.time_range}; do not give time_range too")
            object.__setattr__(self, "time_range", self.time_range or self.dataset.time_range)
            object.__setattr__(self, "dataset", self.dataset.view())
        if not isinstance(self.dataset, DatasetView):
            raise TypeError(
                f"DataSource.dataset must be a rayform DatasetEntry, DatasetView or Slice, got "
                f"{type(self.dataset).__name__}; open one with Catalog.open(url).get_dataset(name)"
            )
        if self.time_range is not None and not isinstance(self.time_range, TimeRange):
            raise TypeError(f"DataSource.time_range must be a rayform TimeRange, got "
                            f"{type(self.time_range).__name__}")
        if isinstance(self.segments, str):
            raise ConfigError(
                f"DataSource.segments must be a list of segment ids, got the string "
                f"{self.segments!r}; write segments=[{self.segments!r}]"
            )
        if self.segments is not None:
            object.__setattr__(self, "segments", tuple(self.segments))
            known = set(self.dataset.segment_ids())
            unknown = sorted(set(self.segments) - known)
            if unknown:
                raise SegmentNotFoundError(
                    f"DataSource: dataset {self.dataset.name!r} has no segment(s) "
                    f"{unknown[:10]}; see dataset.segment_ids()"
                )

    def filter_segments(self, segment_ids: Sequence[str]) -> DataSource:
        """The same dataset restricted to ``segment_ids``."""
        return dataclasses.replace(self, segments=tuple(segment_ids))


@dataclass(frozen=True)
class Field:
    """One entry of a sample: a column, its decoder, and optionally a window of offsets.

    Attributes:
        path: the column ``"<entity>:<Archetype>:<component>"``, e.g.
            ``"/joints/position:Scalars:scalars"``.
        decode: the :class:`~rayform.decoders.ColumnDecoder` producing the tensor.
        select: a function on the Arrow rows that keeps the row count (e.g. picks a struct
            field), or a Rerun ``Selector`` (``Selector(".[0].dog")``, run with ``execute``).
        window: explicit offsets from the sample's index value (integers on sequence timelines,
            seconds on temporal ones); output ``[T, ...]`` with one entry per offset.
        max_staleness: validated and kept for recipes; like Rerun's live loader, not enforced.
    """

    path: str
    decode: ColumnDecoder
    select: Selector | None = None
    window: tuple[int | float, ...] | None = None
    max_staleness: int | float | None = None

    def __post_init__(self) -> None:
        # An entity path passes here: the dataset it meets names its columns (_field_columns).
        if not isinstance(self.path, str) or not self.path:
            raise ConfigError(
                f"Field.path must be a column name '<entity>:<Archetype>:<component>', got "
                f"{self.path!r}; see dataset.schema().component_columns()"
            )
        if not isinstance(self.decode, ColumnDecoder):
            raise TypeError(
                f"Field {self.path!r}: decode must be a ColumnDecoder instance such as "
                f"NumericDecoder(), got {self.decode!r}"
            )
        if self.select is not None and not is_selector(self.select):
            raise TypeError(
                f"Field {self.path!r}: select must be a function of the Arrow rows or a Rerun "
                f"Selector (rerun.chunk.Selector), got {self.select!r}"
            )
        if self.window is not None:
            object.__setattr__(self, "window", _check_window(self.path, self.window))
        if self.max_staleness is not None:
            value = self.max_staleness
            if not _is_real(value) or not math.isfinite(value) or value < 0:
                raise ConfigError(
                    f"Field {self.path!r}: Field.max_staleness must be a finite number >= 0, "
                    f"got {value!r}"
                )

    @property
    def prior_keyframe_path(self) -> str | None:
        """The keyframe column the decoder needs (video), or ``None``."""
        return self.decode.prior_keyframe_path(self.path)

    @property
    def fill_latest_at(self) -> bool:
        return self.decode.fill_latest_at

    def to_recipe(self) -> dict[str, Any]:
        """A JSON-able description of the field (for logs and manifests)."""
        return {
            "path": self.path,
            "window": None if self.window is None else list(self.window),
            "max_staleness": self.max_staleness,
            "decoder": repr(self.decode),
            "select": None if self.select is None else repr(self.select),
        }


def _is_real(value: object) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _check_window(path: str, window: object) -> tuple[int | float, ...]:
    if isinstance(window, str) or not isinstance(window, Sequence):
        raise ConfigError(
            f"Field {path!r}: window must be a tuple of offsets such as (-2, -1, 0), got "
            f"{window!r}"
        )
    offsets = tuple(window)
    if not offsets:
        raise ConfigError(f"Field {path!r}: window must contain at least one offset, got ()")
    bad = [o for o in offsets if not _is_real(o) or not math.isfinite(float(o))]
    if bad:
        raise ConfigError(
            f"Field {path!r}: window offsets must be finite numbers, got {bad!r} in {offsets!r}"
        )
    return offsets
