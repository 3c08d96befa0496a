"""Exact, mergeable per-column statistics: the accumulator and its result (one numeric column).

Sums of values and of their squares are kept as integers (every float64 is an integer multiple of
2**-1074), so merging partial results is an integer addition and the figures do not depend on the
order rows, segments or partial results are combined in. See :mod:`rayform.catalog._statistics`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from rayform.errors import ConfigError

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
def is_numeric_list(t: pa.DataType) -> bool:
    """True for a list column of integers or floats (what statistics are computed on)."""
    if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
        return False
    inner = t.value_type
    return bool(pa.types.is_integer(inner) or pa.types.is_floating(inner))


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
        if not is_numeric_list(values.type):
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

    def __repr__(self) -> str:
        levels = ", ".join(quantile_key(q) for q in self.quantiles)
        return (f"ColumnStatistics(column={self.column!r}, count={self.count}, "
                f"dims={len(self.mean)}, quantiles=[{levels}])")

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


