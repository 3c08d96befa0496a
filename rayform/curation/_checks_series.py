"""Time-series checks: frozen dimensions, spikes, and tracking error between command and state."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rayform.curation._check import Check
from rayform.curation._context import Context, longest_repeat, nanmedian, quantiles, runs
from rayform.curation._finding import Finding
from rayform.curation._series import SegmentSeries, Series

FROZEN_MIN_FRAMES = 15        # a frozen run lasts at least this many rows …
FROZEN_BASELINE_FACTOR = 2.0  # … and twice the longest run the other segments have
FROZEN_COMMAND_MOVE = 0.25    # while the command moves this fraction of its spread
SPIKE_FACTOR = 0.5            # a lone sample this fraction of the dimension's spread off …
SPIKE_WINDOW = 2              # … the median of the 2 rows either side, and back after it
TRACKING_FACTOR = 3.0         # |command - state| over 3x its usual 95th percentile …
TRACKING_FLOOR = 0.1          # … and over 0.1 of the dimension's spread …
TRACKING_MIN_FRAMES = 10      # … for at least this many rows


def command_pairs(columns: list[str]) -> dict[str, str]:
    """``{state column: command column}``: ``…state…`` paired with ``…action…``."""
    states = [c for c in columns if "state" in c.split(":", 1)[0].lower()]
    commands = [c for c in columns if "action" in c.split(":", 1)[0].lower()]
    return {s: commands[0] for s in states if len(commands) == 1}


def _paired(seg: SegmentSeries) -> list[tuple[Series, Series]]:
    out = []
    for state, command in command_pairs(list(seg.series)).items():
        s, c = seg.series[state], seg.series[command]
        if s.width == c.width and np.array_equal(s.rows, c.rows):
            out.append((s, c))
    return out


def frozen(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    out = []
    for state, command in _paired(seg):
        others = ctx.others(state.column, "longest_repeat", lambda s: longest_repeat(s.values),
                            seg.segment_id, state.width)
        usual = nanmedian(others) if len(others) else np.ones(state.width)
        move = ctx.dataset_spread(command.column, command.width)
        same = state.values[1:] == state.values[:-1]
        for d in range(state.width):
            limit = max(FROZEN_MIN_FRAMES, FROZEN_BASELINE_FACTOR * usual[d])
            for a, b in runs(same[:, d]):
                length = b - a + 1
                if length < limit or a == 0 or b == len(same):
                    continue  # a hold at the head or tail is start-up or rest (episode.idle)
                moved = float(np.ptp(command.values[a:b + 1, d]))
                if not move[d] > 0 or moved < FROZEN_COMMAND_MOVE * move[d]:
                    continue
                out.append(Finding(
                    check="series.frozen", severity="error", segment=seg.segment_id,
                    column=state.column, dims=(d,), dim_names=(state.names[d],),
                    start_row=int(state.rows[a]), end_row=int(state.rows[b]) + 1,
                    value=float(length), threshold=float(limit), baseline=float(usual[d]),
                    message=(f"{state.names[d]!r} holds {state.values[a, d]:.6g} for {length} rows "
                             f"(twice the median longest hold of the other segments: {limit:.0f}) while its "
                             f"command moves {moved:.3g} ({moved / move[d]:.0%} of its spread): "
                             "stuck joint or gripper")))
    return out


def _spikes(series: Series, scale: npt.NDArray[np.float64]) -> list[tuple[int, int, int, float]]:
    values = series.values
    n = len(values)
    k = SPIKE_WINDOW
    if n < 2 * k + 1:
        return []
    windows = np.lib.stride_tricks.sliding_window_view(values, 2 * k + 1, axis=0)
    neighbours = np.concatenate([windows[..., :k], windows[..., k + 1:]], axis=-1)
    local = np.median(neighbours, axis=-1)
    centre = values[k:n - k]
    residual = np.abs(centre - local)
    spread_n = np.ptp(neighbours, axis=-1)
    found = []
    for d in range(values.shape[1]):
        if not scale[d] > 0:
            continue
        limit = SPIKE_FACTOR * scale[d]
        hits = (residual[:, d] > limit) & (spread_n[:, d] < limit / 2)
        for i in np.flatnonzero(hits):
            found.append((int(i + k), d, int(i + k) + 1, float(residual[i, d])))
    return found


def spike(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    out = []
    for column, series in seg.series.items():
        scale = ctx.dataset_spread(column, series.width)
        for row, d, end, size in _spikes(series, scale):
            out.append(Finding(
                check="series.spike", severity="warning", segment=seg.segment_id, column=column,
                dims=(d,), dim_names=(series.names[d],), start_row=int(series.rows[row]),
                end_row=int(series.rows[end - 1]) + 1, value=size,
                threshold=SPIKE_FACTOR * float(scale[d]), baseline=float(scale[d]),
                exclude_range=True,
                message=(f"{series.names[d]!r} jumps {size:.3g} away from its neighbours at row "
                         f"{series.rows[row]} and back (dimension spread {scale[d]:.3g})")))
    return out


def _tracking_p95(pair: tuple[Series, Series]) -> npt.NDArray[np.float64]:
    state, command = pair
    return np.asarray(quantiles(np.abs(command.values - state.values), [95.0])[0], dtype=np.float64)


def _tracking_by_segment(ctx: Context, column: str) -> dict[str, npt.NDArray[np.float64]]:
    key = (column, "tracking_p95")
    cached = ctx.features.get(key)
    if cached is None:
        cached = {}
        for sid, other in ctx.segments.items():
            for pair in _paired(other):
                if pair[0].column == column:
                    cached[sid] = _tracking_p95(pair)
        ctx.features[key] = cached
    return cached


def tracking(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    out = []
    for state, command in _paired(seg):
        usual_all = [v for sid, v in _tracking_by_segment(ctx, state.column).items()
                     if sid != seg.segment_id and v.shape == (state.width,)]
        if not usual_all:
            continue
        usual = nanmedian(np.array(usual_all))
        dim_spread = ctx.dataset_spread(state.column, state.width)
        error = np.abs(command.values - state.values)
        for d in range(state.width):
            limit = max(TRACKING_FACTOR * usual[d], usual[d] + TRACKING_FLOOR * dim_spread[d])
            if not limit > 0:
                continue
            for a, b in runs(error[:, d] > limit):
                if b - a < TRACKING_MIN_FRAMES:
                    continue
                peak = float(np.nanmax(error[a:b, d]))
                out.append(Finding(
                    check="series.tracking", severity="warning", segment=seg.segment_id,
                    column=state.column, dims=(d,), dim_names=(state.names[d],),
                    start_row=int(state.rows[a]), end_row=int(state.rows[b - 1]) + 1,
                    value=peak, threshold=float(limit), baseline=float(usual[d]),
                    message=(f"{state.names[d]!r} does not follow its command for {b - a} rows: "
                             f"|command - state| up to {peak:.3g} (usual 95th percentile "
                             f"{usual[d]:.3g})")))
    return out


CHECKS = [
    Check(id="series.frozen", detects="a state dimension stuck while its command moves",
          how="a run of identical values, not at the head or tail, longer than the other "
          "segments' median longest run of that dimension while the paired command moves",
          threshold=f">= max({FROZEN_MIN_FRAMES}, {FROZEN_BASELINE_FACTOR:g} x usual) rows, "
          f"command moving >= {FROZEN_COMMAND_MOVE:g} x its spread", cost="rows",
          scope="segment", run_segment=frozen),
    Check(id="series.spike", detects="isolated spikes on state or command",
          how=f"a sample far from the median of the {SPIKE_WINDOW} rows either side, which agree "
          "among themselves", threshold=f"> {SPIKE_FACTOR:g} x the dimension's spread",
          cost="rows", scope="segment", run_segment=spike),
    Check(id="series.tracking", detects="a joint or gripper that does not follow its command",
          how="|command - state| per dimension against the other segments' 95th percentile",
          threshold=f"> max({TRACKING_FACTOR:g} x usual, usual + {TRACKING_FLOOR:g} x spread) for "
          f">= {TRACKING_MIN_FRAMES} rows", cost="rows", scope="segment", run_segment=tracking),
]
