"""A picture of normalisation statistics: each column's per-dimension distribution, quantiles marked.

Drawn from the exact figures of :class:`~rayform.catalog.DatasetStatistics` (no second pass over
the data): per dimension a thin line from min to max, a thicker one between the outermost
quantiles, a box between the next ones, a tick at the median and a dot at the mean.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rayform._optional import require
from rayform.errors import ConfigError

if TYPE_CHECKING:
    from rayform.catalog import ColumnStatistics, DatasetStatistics


def _draw_column(ax: Any, stats: ColumnStatistics, levels: list[float]) -> None:
    dims = np.arange(len(stats.mean))
    ax.vlines(dims, stats.min, stats.max, color="0.7", linewidth=1, label="min–max")
    outer = [lv for lv in levels if lv < 0.5][:1] + [lv for lv in levels if lv > 0.5][-1:]
    inner = [lv for lv in levels if lv < 0.5][-1:] + [lv for lv in levels if lv > 0.5][:1]
    if len(outer) == 2:
        ax.vlines(dims, stats.quantiles[outer[0]], stats.quantiles[outer[1]], color="tab:blue",
                  linewidth=2, label=f"q{outer[0] * 100:g}–q{outer[1] * 100:g}")
    if len(inner) == 2 and inner != outer:
        low, high = stats.quantiles[inner[0]], stats.quantiles[inner[1]]
        ax.bar(dims, high - low, bottom=low, width=0.5, color="tab:blue", alpha=0.35,
               label=f"q{inner[0] * 100:g}–q{inner[1] * 100:g}")
    if 0.5 in stats.quantiles:
        ax.hlines(stats.quantiles[0.5], dims - 0.25, dims + 0.25, color="black", linewidth=2,
                  label="median")
    ax.plot(dims, stats.mean, "o", color="tab:orange", markersize=4, label="mean")
    ax.set_title(f"{stats.column}  ({stats.count} rows)", fontsize=9, loc="left")
    ax.set_xticks(dims)
    ax.set_xlabel("dimension", fontsize=8)
    ax.grid(axis="y", alpha=0.3)


def plot_statistics(stats: DatasetStatistics, out: str | Path) -> Path:
    """Write one panel per column of ``stats.overall`` to the image file ``out`` (PNG, SVG, PDF).

    Raises:
        ImportError: matplotlib is missing (``rayform[plot]``).
        ConfigError: no numeric column to draw.
    """
    matplotlib = require("matplotlib", extra="plot", feature="rayform stats --plot")
    matplotlib.use("Agg")  # files only: no display needed
    pyplot = require("matplotlib.pyplot", extra="plot", feature="rayform stats --plot")
    columns = [s for s in stats.overall.values() if s.count > 0]
    if not columns:
        raise ConfigError(f"dataset {stats.dataset!r} has no numeric rows to plot")
    levels = sorted(stats.quantile_levels)
    fig, axes = pyplot.subplots(len(columns), 1, figsize=(8, 2.6 * len(columns)), squeeze=False)
    for ax, column in zip(axes[:, 0], columns, strict=True):
        _draw_column(ax, column, levels)
    axes[0, 0].legend(fontsize=7, loc="upper right", ncol=5)
    fig.suptitle(f"{stats.dataset} (snapshot {stats.snapshot_version})", fontsize=10)
    fig.tight_layout()
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    pyplot.close(fig)
    return path
