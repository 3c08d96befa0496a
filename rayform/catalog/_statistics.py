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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from rayform.errors import ConfigError
from rayform.recording._columns import (
    SEGMENT_ID,
    SERIES_LINES_NAMES,
    VIDEO_FRAME_TIMESTAMP,
    column_name,
    entity_of,
)

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
        dimension_names: column -> one name per dimension (joint names), for the columns whose
            entity has a static ``SeriesLines:names`` of their width.
        feature_keys: column -> LeRobot feature key, for columns registered from LeRobot
            (``/observation.state:Scalars:scalars`` -> ``observation.state``).
    """

    dataset: str
    snapshot_version: int
    quantile_levels: tuple[float, ...]
    overall: Mapping[str, ColumnStatistics]
    segments: Mapping[str, Mapping[str, ColumnStatistics]]
    dimension_names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    feature_keys: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        widths = {c: len(s.mean) for c, s in self.overall.items()}
        return (f"DatasetStatistics(dataset={self.dataset!r}, snapshot_version="
                f"{self.snapshot_version}, columns={widths}, segments={len(self.segments)}, "
                f"quantile_levels={self.quantile_levels})")

    def dimension_table(self, *, per_segment: bool = False) -> pa.Table:
        """One row per column and dimension (and per segment too, with ``per_segment``).

        Columns: ``rerun_segment_id`` (null for the overall rows; only with ``per_segment``),
        ``column``, ``dim``, ``name`` (the dimension's name, null where unknown), ``count`` and
        one float column per figure (``min``, ``max``, ``mean``, ``std``, ``q01`` …).
        """
        groups: list[tuple[str | None, Mapping[str, ColumnStatistics]]] = [(None, self.overall)]
        if per_segment:
            groups += list(self.segments.items())
        figures = ["min", "max", "mean", "std", *(quantile_key(q) for q in self.quantile_levels)]
        rows: dict[str, list[object]] = {k: [] for k in (SEGMENT_ID, "column", "dim", "name",
                                                          "count", *figures)}
        for segment_id, columns in groups:
            for column, stats in columns.items():
                names = self.dimension_names.get(column)
                values = [stats.min, stats.max, stats.mean, stats.std,
                          *(stats.quantiles[q] for q in self.quantile_levels)]
                for dim in range(len(stats.mean)):
                    rows[SEGMENT_ID].append(segment_id)
                    rows["column"].append(column)
                    rows["dim"].append(dim)
                    rows["name"].append(None if names is None else names[dim])
                    rows["count"].append(stats.count)
                    for figure, array in zip(figures, values, strict=True):
                        rows[figure].append(float(array[dim]))
        types = {SEGMENT_ID: pa.string(), "column": pa.string(), "dim": pa.int64(),
                 "name": pa.string(), "count": pa.int64()}
        table = pa.table({k: pa.array(v, types.get(k, pa.float64())) for k, v in rows.items()})
        return table if per_segment else table.drop_columns([SEGMENT_ID])

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
                named keep their column name; ``None``: the keys of columns registered from
                LeRobot (:attr:`feature_keys`), the column name for the others.
            segment_id: one segment's statistics instead of the overall ones.
        """
        table = self.overall if segment_id is None else self.segments.get(segment_id, {})
        names = self.feature_keys if feature_names is None else feature_names
        return {names.get(column, column): stats.to_lerobot() for column, stats in table.items()}


LEROBOT_VERSION_PROPERTY = "codebase_version"  # set on every segment the LeRobot importer writes
SCALARS = "Scalars:scalars"


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
    final = {c: acc.finish(plan.quantiles) for c, acc in overall.items()}
    return DatasetStatistics(
        dataset=view.name,
        snapshot_version=view.snapshot_version,
        quantile_levels=plan.quantiles,
        overall=final,
        segments=segments,
        dimension_names=dimension_names(view, {c: len(s.mean) for c, s in final.items()
                                               if s.count}),
        feature_keys=lerobot_feature_keys(view, plan.columns),
    )


def lerobot_feature_keys(view: DatasetView, columns: Sequence[str]) -> dict[str, str]:
    """The LeRobot feature key of each ``/<key>:Scalars:scalars`` column, when the view's
    segments were registered from LeRobot (they carry its ``codebase_version`` property)."""
    records = view.segment_records()
    if not records or not all(LEROBOT_VERSION_PROPERTY in r.properties for r in records):
        return {}
    suffix = ":" + SCALARS
    return {c: entity_of(c)[1:] for c in columns if c.endswith(suffix) and c.count(":") == 2}


def dimension_names(view: DatasetView, widths: Mapping[str, int]) -> dict[str, tuple[str, ...]]:
    """Per column, the names of its dimensions: its entity's static ``SeriesLines:names``
    (the first segment that has them) when they match the column's width."""
    out: dict[str, tuple[str, ...]] = {}
    timelines = list(view.timelines)
    records = view.segment_records() if widths else []
    for column, width in widths.items():
        entity = entity_of(column)
        for record in records:
            info = record.entities.get(entity)
            if info is None or SERIES_LINES_NAMES not in info.components or not timelines:
                continue
            rows = view.open_segment(record.segment_id).column(
                column_name(entity, SERIES_LINES_NAMES), timelines[0])
            if rows.is_static and len(rows):
                names = [str(n) for n in rows.values.to_pylist()[0] or []]
                if len(names) == width:
                    out[column] = tuple(names)
            break
    return out


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
