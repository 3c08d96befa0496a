"""The dataset page's statistics: ``rayform stats``'s figures, one row per column and dimension."""

from __future__ import annotations

from typing import Any

from rayform.catalog import DatasetEntry, compute_statistics
from rayform.ui._values import json_rows


def statistics_rows(dataset: DatasetEntry) -> list[dict[str, Any]]:
    """Count, min, max, mean, std and quantiles of every numeric column's dimensions, named
    where the recordings name them (exact; the page shows 4 significant digits, as the CLI)."""
    if not dataset.segment_ids():
        return []
    return json_rows(compute_statistics(dataset).dimension_table())
