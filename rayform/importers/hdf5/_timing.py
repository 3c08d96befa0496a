"""The timelines of HDF5 episodes, and the segment properties that say how they were made."""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from rayform.recording._writer import RecordingWriter, TimelineLike

FRAME_INDEX: Final = "frame_index"
TIMESTAMP: Final = "timestamp"
RATE_PROPERTY: Final = "rate_hz"
TIME_GRID_PROPERTY: Final = "time_grid"
"""A segment property saying how the ``timestamp`` timeline was made (or why there is none)."""


def grid_step_ns(rate_hz: float) -> int:
    """The frame step in nanoseconds at ``rate_hz``: ``round(1e9 / rate_hz)``, the step
    :class:`~rayform.dataloader.FixedRateSampling` uses, so that sample ``k`` is frame ``k``."""
    return round(1e9 / rate_hz)


def frame_timelines(count: int, rate_hz: float | None) -> dict[str, TimelineLike]:
    """``frame_index`` ``0 … count-1`` and, with a rate, ``timestamp`` (a duration timeline) on
    the exact grid ``frame_index × grid_step_ns(rate_hz)``."""
    index = np.arange(count, dtype=np.int64)
    out: dict[str, TimelineLike] = {FRAME_INDEX: index}
    if rate_hz is not None:
        out[TIMESTAMP] = (index * grid_step_ns(rate_hz)).astype("timedelta64[ns]")
    return out


def describe_grid(rec: RecordingWriter, rate_hz: float | None, *, rate_source: str) -> None:
    """Set :data:`RATE_PROPERTY` and :data:`TIME_GRID_PROPERTY` for a grid made by
    :func:`frame_timelines` (``rate_source`` says where the rate came from)."""
    if rate_hz is None:
        rec.set_property(TIME_GRID_PROPERTY,
                         "none: the source stores no rate or timestamps, so the segment has the "
                         "frame_index timeline only; give rate_hz (rayform register --fps) for a "
                         "timestamp timeline")
        return
    rec.set_property(RATE_PROPERTY, float(rate_hz))
    rec.set_property(TIME_GRID_PROPERTY,
                     f"exact: timestamp = frame_index x {grid_step_ns(rate_hz)} ns "
                     f"({rate_hz:g} Hz, {rate_source}); the source stores no timestamps")


def scaled_ns(values: npt.NDArray[np.generic], unit_ns: int) -> npt.NDArray[np.int64]:
    """Times in ``unit_ns`` nanoseconds per unit as int64 nanoseconds (floats rounded)."""
    if values.dtype.kind == "f":
        return np.round(values.astype(np.float64) * unit_ns).astype(np.int64)
    return values.astype(np.int64) * unit_ns
