"""A picture of normalisation statistics: each column's per-dimension distribution, quantiles marked.

Drawn from the exact figures of :class:`~rayform.catalog.DatasetStatistics` (no second pass over
the data): per dimension a capped line from min to max, a thicker one between the outermost quantiles,
a box between the next ones, a tick at the median and a dot at the mean; dimensions are labelled
with their names (joint names) where the recording has them, and the legend sits below the panels.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rayform._optional import require
from rayform.errors import ConfigError

if TYPE_CHECKING:
    from rayform.catalog import ColumnStatistics, DatasetStatistics


def _draw_column(ax: Any, stats: ColumnStatistics, levels: list[float],
                 names: tuple[str, ...] | None) -> None:
    dims = np.arange(len(stats.mean))
    # the whisker: dark enough to see beside the boxes, with caps at min and max
    ax.vlines(dims, stats.min, stats.max, color="0.3", linewidth=1.2, label="min–max", zorder=2)
    ax.scatter(dims, stats.min, marker="_", color="0.3", s=40, zorder=2)
    ax.scatter(dims, stats.max, marker="_", color="0.3", s=40, zorder=2)
    outer = [lv for lv in levels if lv < 0.5][:1] + [lv for lv in levels if lv > 0.5][-1:]
    inner = [lv for lv in levels if lv < 0.5][-1:] + [lv for lv in levels if lv > 0.5][:1]
    if len(outer) == 2:
        ax.vlines(dims, stats.quantiles[outer[0]], stats.quantiles[outer[1]], color="tab:blue",
                  linewidth=3, label=f"q{outer[0] * 100:g}–q{outer[1] * 100:g}", zorder=3)
    if len(inner) == 2 and inner != outer:
        low, high = stats.quantiles[inner[0]], stats.quantiles[inner[1]]
        ax.bar(dims, high - low, bottom=low, width=0.5, color="tab:blue", alpha=0.35,
               label=f"q{inner[0] * 100:g}–q{inner[1] * 100:g}", zorder=3)
    if 0.5 in stats.quantiles:
        ax.hlines(stats.quantiles[0.5], dims - 0.25, dims + 0.25, color="black", linewidth=2,
                  label="median", zorder=4)
    ax.plot(dims, stats.mean, "o", color="tab:orange", markersize=4, label="mean", zorder=5)
    ax.set_title(f"{stats.column}  ({stats.count} rows)", fontsize=9, loc="left")
    ax.set_xticks(dims)
    if names is not None:
        ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
    else:
        ax.set_xlabel("dimension", fontsize=8)
    ax.grid(axis="y", alpha=0.3)


def statistics_figure(stats: DatasetStatistics, pyplot: Any) -> Any:
    """One panel per column of ``stats.overall``; dimensions named where the recording names
    them; the legend below the panels, clear of the data.

    Raises:
        ConfigError: no numeric column to draw.
    """
    columns = [s for s in stats.overall.values() if s.count > 0]
    if not columns:
        raise ConfigError(f"dataset {stats.dataset!r} has no numeric rows to plot")
    levels = sorted(stats.quantile_levels)
    named = any(stats.dimension_names.get(c.column) for c in columns)
    width = max(8.0, 0.32 * max(len(c.mean) for c in columns))
    fig, axes = pyplot.subplots(len(columns), 1, squeeze=False, layout="constrained",
                                figsize=(width, (3.6 if named else 2.6) * len(columns) + 0.6))
    for ax, column in zip(axes[:, 0], columns, strict=True):
        _draw_column(ax, column, levels, stats.dimension_names.get(column.column))
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=7)
    fig.suptitle(f"{stats.dataset} (snapshot {stats.snapshot_version})", fontsize=10)
    return fig


def plot_statistics(stats: DatasetStatistics, out: str | Path) -> Path:
    """Write one panel per column of ``stats.overall`` to the image file ``out`` (PNG, SVG, PDF).

    Raises:
        ImportError: matplotlib is missing (``rayform[plot]``).
        ConfigError: no numeric column to draw.
    """
    matplotlib = require("matplotlib", extra="plot", feature="rayform stats --plot")
    matplotlib.use("Agg")  # files only: no display needed
    pyplot = require("matplotlib.pyplot", extra="plot", feature="rayform stats --plot")
    fig = statistics_figure(stats, pyplot)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    pyplot.close(fig)
    return path
