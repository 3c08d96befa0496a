"""Per-column statistics (min, max, mean, std, quantiles) per segment and overall, exact and mergeable.

Statistics are computed on the data plane (``view.open_segment(id).column(col, timeline)``) for
numeric ``List`` columns; a vector column gets one figure per dimension. Every figure is *exact*
and independent of the order in which rows, segments or partial results are combined, so the
single-process path, :mod:`rayform.ray` and the SQL aggregates below agree to the last bit:

- ``count``, ``min`` and ``max`` are exact by nature;
- ``mean`` and ``std`` come from the exact sums of the values and of their squares, kept as
  integers (every float64 is an integer multiple of 2**-1074), so merging partial results is an
  integer addition; the mean is then correctly rounded, ``std`` is the population standard
  deviation (``ddof=0``, as LeRobot computes it) with one rounding before the square root;
- quantiles are exact: the values are gathered and interpolated linearly between order statistics
  (``numpy.quantile(..., method="linear")``). Pass ``quantiles=()`` to skip gathering.

Values are converted to float64 first. NaN propagates as in numpy (a dimension holding a NaN has
NaN statistics); infinities give an infinite (or NaN) mean and a NaN std. Rows are the non-null rows
of the column on the chosen timeline; a column that is static in a segment contributes no rows.

The same numbers from SQL: every catalog's DataFusion context has two aggregate functions,
``vector_stats(column)`` (a struct of ``count, min, max, mean, std, q01, q10, q50, q90, q99``) and
``vector_quantile(column, level)``::

    SELECT rerun_segment_id, vector_stats("/joints/position:Scalars:scalars") AS stats
      FROM robots."/joints/position"
     WHERE frame_index IS NOT NULL          -- the rows on the timeline the statistics use
     GROUP BY rerun_segment_id              -- drop GROUP BY for the overall figures

DataFusion's own ``min(col[1])`` and ``max(col[1])`` give the same per-dimension numbers; its
``avg``, ``stddev_pop`` and ``percentile_cont`` agree only up to rounding (measured: DataFusion 55
interpolates percentiles with ~1e-8 relative error), so use ``vector_stats`` for exact figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from rayform.errors import ConfigError
from rayform.recording._columns import SEGMENT_ID, VIDEO_FRAME_TIMESTAMP, entity_of

if TYPE_CHECKING:
    from rayform.catalog._dataset import DatasetView
    from rayform.catalog._metadata import SegmentRecord

from rayform.catalog._accumulator import (
    DEFAULT_QUANTILES,
    ColumnStatistics,
    StatisticsAccumulator,
    is_numeric_list,
    quantile_key,
)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class DatasetStatistics:
    """Statistics of a dataset view: per column overall, and per segment.

    Attributes:
        dataset: the dataset's name.
        snapshot_version: the committed snapshot the figures describe.
        quantile_levels: the quantile levels computed.
        overall: column -> statistics over every segment.
        segments: segment id -> column -> statistics (only columns with rows in that segment).
    """

    dataset: str
    snapshot_version: int
    quantile_levels: tuple[float, ...]
    overall: Mapping[str, ColumnStatistics]
    segments: Mapping[str, Mapping[str, ColumnStatistics]]

    def column(self, name: str, *, segment_id: str | None = None) -> ColumnStatistics:
        """One column's statistics, overall or in one segment.

        Raises:
            ConfigError: the column (or segment) was not part of the computation.
        """
        table = self.overall if segment_id is None else self.segments.get(segment_id, {})
        stats = table.get(name)
        if stats is None:
            where = "overall" if segment_id is None else f"in segment {segment_id!r}"
            raise ConfigError(
                f"no statistics for column {name!r} {where}; computed: {sorted(table)}"
            )
        return stats

    def to_arrow(self) -> pa.Table:
        """One row per (segment, column); the overall rows have a null ``rerun_segment_id``."""
        rows: list[tuple[str | None, ColumnStatistics]] = [(None, s) for s in self.overall.values()]
        for segment_id, columns in self.segments.items():
            rows.extend((segment_id, s) for s in columns.values())
        vectors = pa.list_(pa.float64())
        data: dict[str, pa.Array] = {
            SEGMENT_ID: pa.array([r[0] for r in rows], pa.string()),
            "column": pa.array([r[1].column for r in rows], pa.string()),
            "count": pa.array([r[1].count for r in rows], pa.int64()),
        }
        for name in ("min", "max", "mean", "std"):
            data[name] = pa.array([getattr(r[1], name) for r in rows], vectors)
        for level in self.quantile_levels:
            data[quantile_key(level)] = pa.array([r[1].quantiles[level] for r in rows], vectors)
        return pa.table(data)

    def to_lerobot(self, *, feature_names: Mapping[str, str] | None = None,
                   segment_id: str | None = None) -> dict[str, dict[str, list[float] | list[int]]]:
        """The LeRobot ``stats.json`` dict (or one episode's stats with ``segment_id``).

        Args:
            feature_names: column -> LeRobot feature key (``"observation.state"``); columns not
                named keep their column name; ``None`` keeps every column name.
            segment_id: one segment's statistics instead of the overall ones.
        """
        table = self.overall if segment_id is None else self.segments.get(segment_id, {})
        names = feature_names or {}
        return {names.get(column, column): stats.to_lerobot() for column, stats in table.items()}


# ------------------------------------------------------------------------------- planning
@dataclass(frozen=True, slots=True, kw_only=True)
class StatisticsPlan:
    """What to compute: the columns, the timeline whose rows count, and the quantile levels."""

    columns: tuple[str, ...]
    timeline: str | None = None
    quantiles: tuple[float, ...] = DEFAULT_QUANTILES

    def __post_init__(self) -> None:
        for level in self.quantiles:
            if isinstance(level, bool) or not isinstance(level, int | float) or not 0 <= level <= 1:
                raise ConfigError(
                    f"statistics: quantile levels must be numbers in [0, 1], got {level!r}"
                )
        if len(set(self.quantiles)) != len(self.quantiles):
            raise ConfigError(f"statistics: quantile levels repeat: {self.quantiles!r}")
        if len(set(self.columns)) != len(self.columns):
            raise ConfigError(f"statistics: columns repeat: {self.columns!r}")

    @classmethod
    def for_view(cls, view: DatasetView, columns: str | Sequence[str] | None = None, *,
                 timeline: str | None = None,
                 quantiles: Sequence[float] = DEFAULT_QUANTILES) -> StatisticsPlan:
        """Resolve and check the columns (default: every numeric list column of the view).

        Raises:
            ColumnNotFoundError: an unknown column or timeline.
            ConfigError: a column that is not a list of numbers, a bad quantile level.
        """
        schema = view.schema()
        if timeline is not None:
            schema.timeline_kind(timeline)
        if columns is None:
            names = tuple(c for c in schema.component_columns()
                          if is_numeric_list(schema.field(c).type)
                          and not c.endswith(":" + VIDEO_FRAME_TIMESTAMP))
        else:
            names = (columns,) if isinstance(columns, str) else tuple(columns)
            for name in names:
                t = schema.field(name).type
                if not is_numeric_list(t):
                    raise ConfigError(
                        f"statistics: column {name!r} has type {t}; statistics need a list of "
                        "numbers per row (e.g. a Scalars:scalars column)"
                    )
        return cls(columns=names, timeline=timeline, quantiles=tuple(float(q) for q in quantiles))

    def row_timeline(self, record: SegmentRecord, column: str, timelines: Sequence[str]
                     ) -> str | None:
        """The timeline whose rows count for ``column`` in a segment (None: no rows there)."""
        entity = record.entities.get(entity_of(column))
        if entity is None or column.split(":", 1)[1] not in entity.components:
            return None
        if self.timeline is not None:
            return self.timeline if self.timeline in entity.ranges else None
        return next((tl for tl in timelines if tl in entity.ranges), None)


def segment_accumulators(view: DatasetView, segment_id: str, plan: StatisticsPlan
                         ) -> dict[str, StatisticsAccumulator]:
    """The partial statistics of one segment: one accumulator per column with rows there."""
    record = view.segment_record(segment_id)
    timelines = list(view.timelines)
    data = view.open_segment(segment_id)
    out: dict[str, StatisticsAccumulator] = {}
    for column in plan.columns:
        timeline = plan.row_timeline(record, column, timelines)
        if timeline is None:
            continue
        rows = data.column(column, timeline)
        if rows.is_static or len(rows) == 0:
            continue
        acc = StatisticsAccumulator(column, keep_values=bool(plan.quantiles))
        acc.add_arrow(rows.values)
        out[column] = acc
    return out


def merge_statistics(view: DatasetView, plan: StatisticsPlan,
                     partials: Mapping[str, Mapping[str, StatisticsAccumulator]]
                     ) -> DatasetStatistics:
    """Combine per-segment partials (from any process, in any order) into the final figures."""
    overall = {c: StatisticsAccumulator(c, keep_values=bool(plan.quantiles)) for c in plan.columns}
    segments: dict[str, dict[str, ColumnStatistics]] = {}
    for segment_id in sorted(partials):
        columns = partials[segment_id]
        segments[segment_id] = {c: columns[c].finish(plan.quantiles)
                                for c in plan.columns if c in columns}
        for column, acc in columns.items():
            overall[column].merge(acc)
    return DatasetStatistics(
        dataset=view.name,
        snapshot_version=view.snapshot_version,
        quantile_levels=plan.quantiles,
        overall={c: acc.finish(plan.quantiles) for c, acc in overall.items()},
        segments=segments,
    )


def compute_statistics(view: DatasetView, columns: str | Sequence[str] | None = None, *,
                       timeline: str | None = None,
                       quantiles: Sequence[float] = DEFAULT_QUANTILES) -> DatasetStatistics:
    """Per-column statistics of a dataset view, per segment and overall, in this process.

    Args:
        view: a dataset, a filtered view or an older snapshot.
        columns: numeric list columns; default every one of the view (video frame indexes aside).
        timeline: the timeline whose rows count; default, per segment, the first of the dataset's
            timelines on which the column's entity has data.
        quantiles: quantile levels in [0, 1]; ``()`` skips quantiles (and gathering the values).

    Raises:
        ColumnNotFoundError: an unknown column or timeline.
        ConfigError: a non-numeric column, rows of varying length, a bad quantile level.
    """
    plan = StatisticsPlan.for_view(view, columns, timeline=timeline, quantiles=quantiles)
    partials = {sid: segment_accumulators(view, sid, plan) for sid in view.segment_ids()}
    return merge_statistics(view, plan, partials)


__all__ = [
    "DEFAULT_QUANTILES",
    "ColumnStatistics",
    "DatasetStatistics",
    "StatisticsAccumulator",
    "StatisticsPlan",
    "compute_statistics",
    "merge_statistics",
    "quantile_key",
    "segment_accumulators",
]
