"""SQL aggregates ``vector_stats`` and ``vector_quantile``: the exact statistics, from DataFusion.

They run the same accumulator as :func:`rayform.catalog.compute_statistics`, so for the same rows
they return the same numbers to the last bit (see :mod:`rayform.catalog._statistics`).
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa

from rayform.catalog._accumulator import DEFAULT_QUANTILES, StatisticsAccumulator, quantile_key
from rayform.errors import ConfigError

if TYPE_CHECKING:
    import datafusion

_STATE_TYPE: Final = pa.binary()
_VECTOR: Final = pa.list_(pa.float64())


def _stats_struct(levels: Sequence[float]) -> pa.DataType:
    fields = [pa.field("count", pa.int64())]
    fields += [pa.field(name, _VECTOR) for name in ("min", "max", "mean", "std")]
    fields += [pa.field(quantile_key(q), _VECTOR) for q in levels]
    return pa.struct(fields)


def _load_state(blob: Any) -> StatisticsAccumulator:
    acc = pickle.loads(blob)
    assert isinstance(acc, StatisticsAccumulator)
    return acc


def statistics_udafs() -> list[datafusion.AggregateUDF]:
    """The SQL aggregates ``vector_stats(col)`` and ``vector_quantile(col, level)``.

    Both run the same exact accumulator as :func:`compute_statistics`, so they return the same
    numbers for the same rows. Catalog contexts register them; add them to your own
    ``SessionContext`` with ``ctx.register_udaf``.
    """
    from datafusion import Accumulator, udaf

    struct_type = _stats_struct(DEFAULT_QUANTILES)

    class VectorStats(Accumulator):
        def __init__(self) -> None:
            self._acc = StatisticsAccumulator("vector_stats", keep_values=True)

        def state(self) -> list[pa.Scalar]:
            return [pa.scalar(pickle.dumps(self._acc), _STATE_TYPE)]

        def update(self, *values: pa.Array) -> None:
            self._acc.add_arrow(values[0])

        def merge(self, states: list[pa.Array]) -> None:
            for blob in states[0].to_pylist():
                if blob is not None:
                    self._acc.merge(_load_state(blob))

        def evaluate(self) -> pa.Scalar:
            stats = self._acc.finish(DEFAULT_QUANTILES)
            value: dict[str, Any] = {"count": stats.count}
            for name in ("min", "max", "mean", "std"):
                value[name] = getattr(stats, name).tolist()
            for level, values in stats.quantiles.items():
                value[quantile_key(level)] = values.tolist()
            return pa.scalar(value, struct_type)

    class VectorQuantile(Accumulator):
        def __init__(self) -> None:
            self._acc = StatisticsAccumulator("vector_quantile", keep_values=True)
            self._level: float | None = None

        def state(self) -> list[pa.Scalar]:
            return [pa.scalar(pickle.dumps(self._acc), _STATE_TYPE),
                    pa.scalar(self._level, pa.float64())]

        def _set_level(self, levels: pa.Array) -> None:
            for level in levels.drop_null().to_pylist()[:1]:
                if not 0 <= level <= 1:
                    raise ConfigError(f"vector_quantile: level must be in [0, 1], got {level!r}")
                self._level = float(level)

        def update(self, *values: pa.Array) -> None:
            self._set_level(values[1])
            self._acc.add_arrow(values[0])

        def merge(self, states: list[pa.Array]) -> None:
            self._set_level(states[1])
            for blob in states[0].to_pylist():
                if blob is not None:
                    self._acc.merge(_load_state(blob))

        def evaluate(self) -> pa.Scalar:
            if self._level is None:
                return pa.scalar(None, _VECTOR)
            stats = self._acc.finish((self._level,))
            return pa.scalar(stats.quantiles[self._level].tolist(), _VECTOR)

    return [
        udaf(VectorStats, [_VECTOR], struct_type, [_STATE_TYPE], "immutable", name="vector_stats"),
        udaf(VectorQuantile, [_VECTOR, pa.float64()], _VECTOR, [_STATE_TYPE, pa.float64()],
             "immutable", name="vector_quantile"),
    ]


def register_statistics_functions(ctx: datafusion.SessionContext) -> None:
    """Register ``vector_stats`` and ``vector_quantile`` in a DataFusion context."""
    for function in statistics_udafs():
        ctx.register_udaf(function)



__all__ = ["register_statistics_functions", "statistics_udafs"]
