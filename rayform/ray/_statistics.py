"""Distributed per-column statistics: per-segment partials in Ray tasks, merged exactly on the driver.

The tasks run the single-process accumulator (:mod:`rayform.catalog._statistics`) on their segments
and return it; partial moments are exact integers and quantiles are taken over the gathered values,
so the result equals :func:`rayform.catalog.compute_statistics` bit for bit, whatever the number of
workers or the order in which tasks finish.
"""

from __future__ import annotations

from collections.abc import Sequence

from rayform.catalog._accumulator import DEFAULT_QUANTILES, StatisticsAccumulator
from rayform.catalog._dataset import DatasetView
from rayform.catalog._statistics import (
    DatasetStatistics,
    StatisticsPlan,
    merge_statistics,
    segment_accumulators,
)
from rayform.ray._cluster import TaskOptions, batched, run_tasks


def _segment_group_statistics(view: DatasetView, segment_ids: list[str], plan: StatisticsPlan
                              ) -> dict[str, dict[str, StatisticsAccumulator]]:
    """Runs in a Ray task: the view was pickled as configuration and reopens the catalog here."""
    return {sid: segment_accumulators(view, sid, plan) for sid in segment_ids}


def compute_statistics(view: DatasetView, columns: str | Sequence[str] | None = None, *,
                       timeline: str | None = None,
                       quantiles: Sequence[float] = DEFAULT_QUANTILES,
                       options: TaskOptions | None = None) -> DatasetStatistics:
    """Per-column statistics of a dataset view, computed by Ray tasks; same figures as in-process.

    Arguments are those of :func:`rayform.catalog.compute_statistics`, plus ``options`` (CPUs per
    task, concurrency, segments per task). Every task opens the catalog itself, so the catalog must
    be reachable from the workers (shared filesystem, ``s3://`` or ``https://``). Quantiles gather
    the column values on the driver (8 bytes per value); pass ``quantiles=()`` to avoid it.

    Raises:
        ColumnNotFoundError, ConfigError: as :func:`rayform.catalog.compute_statistics`.
    """
    opts = options or TaskOptions()
    plan = StatisticsPlan.for_view(view, columns, timeline=timeline, quantiles=quantiles)
    groups = batched(view.segment_ids(), opts.segments_per_task)
    results = run_tasks(_segment_group_statistics, [(view, group, plan) for group in groups], opts)
    partials = {sid: accs for result in results for sid, accs in result.items()}
    return merge_statistics(view, plan, partials)


__all__ = ["compute_statistics"]
