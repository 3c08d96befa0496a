"""The time grid of an imported episode: what an importer did about its time timeline.

Sources without timestamps (RLDS, Zarr replay buffers) get a time timeline only when the rate is
known; sources whose float timestamps sit a rounding error off ``frame_index / fps`` (LeRobot's
float32 seconds) are put on the exact grid. Both use the grid a
:class:`~rayform.dataloader.FixedRateSampling` at the same rate draws: ``k * round(1e9 / fps)`` ns,
so that the Rerun rule (a sample takes the latest row at or before its instant, tolerance 0) gives
every sample its own frame. Each importer writes :data:`TIME_GRID_PROPERTY` on every segment.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import numpy.typing as npt

from rayform.errors import ConfigError

TIME_GRID_PROPERTY: Final = "time_grid"
"""Segment property: one of the ``GRID_*`` values below."""
TIME_GRID_ERROR_PROPERTY: Final = "time_grid_max_error_s"
"""Segment property (with :data:`GRID_SNAPPED`): the largest distance of a source timestamp from
its grid instant, in seconds."""

GRID_SNAPPED: Final = "snapped"
"""The source timestamps agreed with ``frame_index / fps`` within the format's tolerance: the time
timeline is the exact grid and the raw values are kept as a column."""
GRID_SOURCE: Final = "source"
"""The time timeline holds the source's own timestamps, unchanged."""
GRID_FROM_RATE: Final = "from_rate"
"""The source has no timestamps: the time timeline is ``frame_index`` times the step of the rate
given at import (or declared by the dataset)."""
GRID_NONE: Final = "frame_index_only"
"""The source has no timestamps and no rate was given: only the ``frame_index`` timeline."""

NS_PER_S: Final = 1_000_000_000


def check_rate_hz(rate_hz: float | None, *, what: str) -> float | None:
    """``rate_hz`` validated (``None`` allowed): a positive finite number of frames per second."""
    if rate_hz is None:
        return None
    if isinstance(rate_hz, bool) or not isinstance(rate_hz, int | float) \
            or not math.isfinite(rate_hz) or rate_hz <= 0 or round(NS_PER_S / rate_hz) < 1:
        raise ConfigError(f"{what}: fps must be a positive number of frames per second (at most "
                          f"1e9), got {rate_hz!r}")
    return float(rate_hz)


def step_ns(rate_hz: float) -> int:
    """The grid step in nanoseconds, as :class:`~rayform.dataloader.FixedRateSampling` rounds it."""
    return round(NS_PER_S / rate_hz)


def grid_ns(frame_index: npt.NDArray[np.int64], rate_hz: float) -> npt.NDArray[np.int64]:
    """The grid instants of ``frame_index`` at ``rate_hz`` (int64 ns)."""
    return frame_index.astype(np.int64) * step_ns(rate_hz)


def grid_error_s(seconds: npt.NDArray[np.floating], frame_index: npt.NDArray[np.int64],
                 rate_hz: float) -> float:
    """The largest distance (s) between ``seconds`` and ``frame_index / rate_hz``; 0 when empty."""
    if len(seconds) == 0:
        return 0.0
    exact = frame_index.astype(np.float64) / rate_hz
    return float(np.max(np.abs(seconds.astype(np.float64) - exact)))
