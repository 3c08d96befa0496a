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
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from rayform.errors import ConfigError
from rayform.recording._columns import SEGMENT_ID, VIDEO_FRAME_TIMESTAMP, entity_of

if TYPE_CHECKING:
    from rayform.catalog._dataset import DatasetView
    from rayform.catalog._metadata import SegmentRecord

DEFAULT_QUANTILES: Final[tuple[float, ...]] = (0.01, 0.10, 0.50, 0.90, 0.99)
"""The quantile levels LeRobot v3.0 stores (``q01 … q99``)."""

Float64Array = npt.NDArray[np.float64]

# Every finite float64 is M * 2**(e - 53) with |M| < 2**53 and e = frexp exponent in [-1073, 1024].
_MANTISSA_BITS: Final = 53
_EXPONENT_OFFSET: Final = 1073
_NUM_SHIFTS: Final = 1024 + _EXPONENT_OFFSET + 1
_SUM_SCALE: Final = _MANTISSA_BITS + _EXPONENT_OFFSET  # sum S means S * 2**-1126
_SQUARE_SCALE: Final = 2 * _SUM_SCALE  # sum of squares Q means Q * 2**-2252
_PIECE_BITS: Final = 14  # |M| as 4 pieces of 14 bits: piece products < 2**28, their sums < 2**30
_NUM_PIECES: Final = 4
_CHUNK_ROWS: Final = 1 << 20  # float64 bincount stays exact: < 2**23 addends of < 2**30 per bucket


def quantile_key(level: float) -> str:
    """The LeRobot name of a quantile level: ``0.01 -> "q01"``, ``0.5 -> "q50"``, ``0.025 -> "q2.5"``."""
    percent = round(level * 100, 6)
    return f"q{int(percent):02d}" if percent == int(percent) else f"q{percent:g}"


# ------------------------------------------------------------------------------ exact sums
def _exact_sums(values: Float64Array) -> tuple[list[int], list[int]]:
    """Per column of finite ``values [N, D]``: the exact sum (x 2**1126) and sum of squares (x 2**2252)."""
    n, d = values.shape
    sums = [0] * d
    squares = [0] * d
    dims = np.arange(d, dtype=np.int64)
    piece_mask = (1 << _PIECE_BITS) - 1
    for start in range(0, n, _CHUNK_ROWS):
        fraction, exponent = np.frexp(values[start:start + _CHUNK_ROWS])
        mantissa = np.ldexp(fraction, _MANTISSA_BITS).astype(np.int64)
        shift = exponent.astype(np.int64) + _EXPONENT_OFFSET
        # Sums: M = hi * 2**26 + lo; bucket by (shift, dim); float64 bincount of < 2**27 is exact.
        keys = (shift * d + dims).ravel()
        hi = mantissa >> 26
        lo = mantissa - (hi << 26)
        for part, extra in ((hi, 26), (lo, 0)):
            totals = np.bincount(keys, weights=part.ravel().astype(np.float64),
                                 minlength=_NUM_SHIFTS * d)
            for key in np.flatnonzero(totals):
                sums[key % d] += int(totals[key]) << (int(key // d) + extra)
        # Squares: M**2 = sum_k c_k * 2**(14 k) with c_k the pair products of 14-bit pieces of |M|.
        magnitude = np.abs(mantissa)
        pieces = [(magnitude >> (_PIECE_BITS * i)) & piece_mask for i in range(_NUM_PIECES)]
        keys = (2 * shift * d + dims).ravel()
        for k in range(2 * _NUM_PIECES - 1):
            coef = sum((pieces[i] * pieces[k - i] for i in range(max(0, k - 3), min(k, 3) + 1)),
                       start=np.zeros_like(magnitude))
            totals = np.bincount(keys, weights=coef.ravel().astype(np.float64),
                                 minlength=2 * _NUM_SHIFTS * d)
            for key in np.flatnonzero(totals):
                squares[key % d] += int(totals[key]) << (int(key // d) + _PIECE_BITS * k)
    return sums, squares


def _divide(numerator: int, denominator: int) -> float:
    """``numerator / denominator`` correctly rounded (Python int division), inf on overflow."""
    try:
        return numerator / denominator
    except OverflowError:
        return float("inf") if (numerator > 0) == (denominator > 0) else float("-inf")


# ---------------------------------------------------------------------------- accumulator
class StatisticsAccumulator:
    """Mergeable partial statistics of one numeric vector column (exact; merge order is free).

    Feed rows with :meth:`add` or :meth:`add_arrow`, combine partials with :meth:`merge` and read
    the result with :meth:`finish`. Instances pickle (Ray tasks return them).
    """

    def __init__(self, column: str, *, keep_values: bool) -> None:
        self.column = column
        self.keep_values = keep_values
        self.dims: int | None = None
        self.count = 0
        self.minimum: Float64Array | None = None
        self.maximum: Float64Array | None = None
        self.sums: list[int] = []
        self.squares: list[int] = []
        self.nan_count: npt.NDArray[np.int64] | None = None
        self.posinf_count: npt.NDArray[np.int64] | None = None
        self.neginf_count: npt.NDArray[np.int64] | None = None
        self.values: list[Float64Array] = []

    def _init_dims(self, dims: int) -> None:
        if self.dims is None:
            self.dims = dims
            self.minimum = np.full(dims, np.inf)
            self.maximum = np.full(dims, -np.inf)
            self.sums = [0] * dims
            self.squares = [0] * dims
            self.nan_count = np.zeros(dims, np.int64)
            self.posinf_count = np.zeros(dims, np.int64)
            self.neginf_count = np.zeros(dims, np.int64)
        elif self.dims != dims:
            raise ConfigError(
                f"statistics: column {self.column!r} has rows of {self.dims} and of {dims} values; "
                "statistics need vectors of one fixed size"
            )

    def add(self, rows: npt.ArrayLike) -> None:
        """Add rows ``[N, D]`` (or ``[N]`` for scalars); converted to float64."""
        values = np.asarray(rows, dtype=np.float64)
        if values.ndim == 1:
            values = values[:, None]
        if values.ndim != 2:
            raise ConfigError(
                f"statistics: column {self.column!r}: rows must be [N, D], got shape {values.shape}"
            )
        self._init_dims(values.shape[1])
        if len(values) == 0:
            return
        assert self.minimum is not None and self.maximum is not None
        assert self.nan_count is not None and self.posinf_count is not None
        assert self.neginf_count is not None
        self.count += len(values)
        self.minimum = np.minimum(self.minimum, values.min(axis=0))
        self.maximum = np.maximum(self.maximum, values.max(axis=0))
        finite = np.isfinite(values)
        if not finite.all():
            self.nan_count += np.isnan(values).sum(axis=0)
            self.posinf_count += (values == np.inf).sum(axis=0)
            self.neginf_count += (values == -np.inf).sum(axis=0)
            sums, squares = _exact_sums(np.where(finite, values, 0.0))
        else:
            sums, squares = _exact_sums(values)
        self.sums = [a + b for a, b in zip(self.sums, sums, strict=True)]
        self.squares = [a + b for a, b in zip(self.squares, squares, strict=True)]
        if self.keep_values:
            self.values.append(values)

    def add_arrow(self, values: pa.Array | pa.ChunkedArray) -> None:
        """Add the rows of an Arrow ``List`` column of numbers (null rows are skipped)."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if values.null_count:
            values = values.drop_null()
        if not _is_numeric_list(values.type):
            raise ConfigError(
                f"statistics: column {self.column!r} has type {values.type}; statistics need a "
                "list of numbers per row (e.g. a Scalars:scalars column)"
            )
        if len(values) == 0:
            return
        lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False)
        if lengths.min() != lengths.max():
            raise ConfigError(
                f"statistics: column {self.column!r} has rows of lengths "
                f"{sorted(set(lengths.tolist()))[:5]}; statistics need vectors of one fixed size"
            )
        flat = values.flatten().to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        self.add(flat.reshape(len(values), int(lengths[0])))

    def merge(self, other: StatisticsAccumulator) -> None:
        """Add another partial of the same column (its values are shared, not copied)."""
        if other.dims is None:
            return
        self._init_dims(other.dims)
        if other.count == 0:
            return
        assert other.minimum is not None and other.maximum is not None
        assert other.nan_count is not None and other.posinf_count is not None
        assert other.neginf_count is not None
        assert self.nan_count is not None and self.posinf_count is not None
        assert self.neginf_count is not None
        self.count += other.count
        self.minimum = np.minimum(self.minimum, other.minimum)  # type: ignore[arg-type]
        self.maximum = np.maximum(self.maximum, other.maximum)  # type: ignore[arg-type]
        self.sums = [a + b for a, b in zip(self.sums, other.sums, strict=True)]
        self.squares = [a + b for a, b in zip(self.squares, other.squares, strict=True)]
        self.nan_count += other.nan_count
        self.posinf_count += other.posinf_count
        self.neginf_count += other.neginf_count
        if self.keep_values:
            if not other.keep_values:
                raise ConfigError(
                    f"statistics: column {self.column!r}: cannot merge a partial without values "
                    "into one that computes quantiles"
                )
            self.values.extend(other.values)

    def finish(self, quantiles: Sequence[float] = ()) -> ColumnStatistics:
        """The statistics of everything added so far."""
        dims = self.dims or 0
        n = self.count
        if n == 0:
            empty = np.full(dims, np.nan)
            return ColumnStatistics(column=self.column, count=0, min=empty, max=empty, mean=empty,
                                    std=empty, quantiles={q: empty for q in quantiles})
        assert self.minimum is not None and self.maximum is not None
        assert self.nan_count is not None and self.posinf_count is not None
        assert self.neginf_count is not None
        mean = np.empty(dims)
        std = np.empty(dims)
        for i in range(dims):
            nan, pos, neg = self.nan_count[i], self.posinf_count[i], self.neginf_count[i]
            if nan or (pos and neg):
                mean[i] = np.nan
            elif pos or neg:
                mean[i] = np.inf if pos else -np.inf
            else:
                mean[i] = _divide(self.sums[i], n << _SUM_SCALE)
            if nan or pos or neg:
                std[i] = np.nan
            else:
                spread = n * self.squares[i] - self.sums[i] * self.sums[i]  # n^2 var * 2**2252
                std[i] = np.sqrt(_divide(spread, (n * n) << _SQUARE_SCALE))
        levels: dict[float, Float64Array] = {}
        if quantiles:
            if not self.keep_values:
                raise ConfigError(
                    f"statistics: column {self.column!r}: quantiles need the values; create the "
                    "accumulator with keep_values=True"
                )
            data = self.values[0] if len(self.values) == 1 else np.concatenate(self.values)
            with np.errstate(invalid="ignore"):  # inf - inf between infinite neighbours: NaN
                table = np.quantile(data, list(quantiles), axis=0, method="linear")
            levels = {q: np.asarray(table[i], np.float64) for i, q in enumerate(quantiles)}
        return ColumnStatistics(column=self.column, count=n, min=self.minimum.copy(),
                                max=self.maximum.copy(), mean=mean, std=std, quantiles=levels)


def _is_numeric_list(t: pa.DataType) -> bool:
    if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
        return False
    inner = t.value_type
    return bool(pa.types.is_integer(inner) or pa.types.is_floating(inner))


# -------------------------------------------------------------------------------- results
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ColumnStatistics:
    """Statistics of one numeric column, one value per dimension (float64 arrays of shape ``[D]``).

    Attributes:
        column: the column name.
        count: number of rows.
        min, max, mean, std: per-dimension figures (``std`` with ``ddof=0``).
        quantiles: level (0..1) -> per-dimension exact quantile (linear interpolation).
    """

    column: str
    count: int
    min: Float64Array
    max: Float64Array
    mean: Float64Array
    std: Float64Array
    quantiles: Mapping[float, Float64Array] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ConfigError(f"ColumnStatistics {self.column!r}: count must be >= 0, got {self.count}")
        shapes = {a.shape for a in (self.min, self.max, self.mean, self.std,
                                    *self.quantiles.values())}
        if len(shapes) != 1:
            raise ConfigError(
                f"ColumnStatistics {self.column!r}: all figures need one shape [D], got {shapes}"
            )

    def to_lerobot(self) -> dict[str, list[float] | list[int]]:
        """``{"min": [...], "max": [...], "mean": [...], "std": [...], "count": [n], "q01": ...}``."""
        out: dict[str, list[float] | list[int]] = {
            "min": self.min.tolist(),
            "max": self.max.tolist(),
            "mean": self.mean.tolist(),
            "std": self.std.tolist(),
            "count": [self.count],
        }
        for level, values in self.quantiles.items():
            out[quantile_key(level)] = values.tolist()
        return out


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
                          if _is_numeric_list(schema.field(c).type)
                          and not c.endswith(":" + VIDEO_FRAME_TIMESTAMP))
        else:
            names = (columns,) if isinstance(columns, str) else tuple(columns)
            for name in names:
                t = schema.field(name).type
                if not _is_numeric_list(t):
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
