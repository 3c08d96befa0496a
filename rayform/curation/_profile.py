"""A dataset's (or slice's) columns and its numeric columns pooled over segments: what
``--baseline`` compares (:mod:`rayform.curation._checks_drift`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rayform.catalog import DatasetView
from rayform.curation._context import nanmedian, quantiles
from rayform.curation._series import SegmentSeries

LEVELS = [5.0, 25.0, 50.0, 75.0, 95.0]
PROPERTY_ENTITY = "/__properties"


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnProfile:
    """One numeric column pooled over a dataset's segments.

    Attributes:
        quantiles: ``float64[len(LEVELS), D]``.
        magnitude: ``float64[D]``, median ``|x|`` plus the 5-95 % spread.
        names: the dimension names.
        rows: how many rows were pooled.
    """

    quantiles: npt.NDArray[np.float64]
    magnitude: npt.NDArray[np.float64]
    names: tuple[str, ...]
    rows: int

    @property
    def spread(self) -> npt.NDArray[np.float64]:
        return np.asarray(self.quantiles[-1] - self.quantiles[0], dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """What drift compares: a dataset's (or slice's) columns and its pooled numeric columns."""

    name: str
    version: int
    segments: int
    columns: frozenset[str]
    numeric: dict[str, ColumnProfile]


def _data_columns(view: DatasetView) -> frozenset[str]:
    return frozenset(c for c in view.schema().component_columns()
                     if not c.startswith(PROPERTY_ENTITY))


def profile_of(view: DatasetView, segments: Iterable[SegmentSeries]) -> Profile:
    """Pool the loaded segments' numeric series into per-column profiles."""
    pooled: dict[str, list[npt.NDArray[np.float64]]] = {}
    names: dict[str, tuple[str, ...]] = {}
    count = 0
    for seg in segments:
        count += 1
        for column, series in seg.series.items():
            if column in names and len(names[column]) != series.width:
                continue  # a width change inside one dataset: coverage/values checks say so
            pooled.setdefault(column, []).append(series.values)
            names.setdefault(column, series.names)
    numeric = {}
    for column, parts in pooled.items():
        values = np.concatenate(parts)
        if not len(values):
            continue
        with np.errstate(all="ignore"):
            q = quantiles(values, LEVELS)
            magnitude = nanmedian(np.abs(values)) + (q[-1] - q[0])
        numeric[column] = ColumnProfile(quantiles=q, magnitude=magnitude, names=names[column],
                                        rows=len(values))
    return Profile(name=view.name, version=view.snapshot_version, segments=count,
                   columns=_data_columns(view), numeric=numeric)
