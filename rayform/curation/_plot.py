"""``rayform curate --plot DIR``: one PNG per flagged segment, the evidence around its findings.

Per segment whose verdict is not ``ok``: one panel per numeric column a finding names (else the
segment's first numeric column), the flagged dimensions drawn over the rows (the others faint),
each finding's row range shaded in its severity's colour and labelled with its check (a
threshold on the series' own scale drawn as a dashed line, the baseline dotted), findings
without a column (timing, episode) shaded on every panel, then for each video finding a row of
frames around its range (:mod:`rayform.curation._plot_frames`), and the findings' messages
listed below. Files are named for the segment (an id that is not a plain file name gets a
hashed one).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rayform._optional import require
from rayform.catalog import DatasetView, Slice
from rayform.curation._plot_frames import MAX_FRAMES, FramePlan, Thumbnail, decode_plan, plan_frames
from rayform.curation._result import CurationResult
from rayform.curation._series import SegmentSeries, load_series, numeric_columns

FEATURE = "rayform curate --plot"
COLOURS = {"error": "tab:red", "warning": "tab:orange", "info": "tab:blue"}
MAX_DIMS = 8            # flagged dimensions drawn per panel
MAX_MESSAGES = 10       # finding messages listed under the panels
FRAME_ROW_IN = 2.0      # height of a row of frames, inches
VALUE_SCALE = ("values.offset",)  # checks whose threshold and baseline are values of the series
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$")


def require_pyplot() -> Any:
    """matplotlib's pyplot on the file-only backend, or the one-line install error.

    Raises:
        ImportError: matplotlib is missing (``rayform[plot]``).
    """
    matplotlib = require("matplotlib", extra="plot", feature=FEATURE)
    matplotlib.use("Agg")
    return require("matplotlib.pyplot", extra="plot", feature=FEATURE)


def file_name(segment: str) -> str:
    """``<segment>.png``, or a hashed name for an id that is not a plain file name."""
    if _PLAIN_NAME.match(segment) and ".." not in segment:
        return f"{segment}.png"
    return f"segment-{hashlib.sha256(segment.encode()).hexdigest()[:16]}.png"


def _panels(seg: SegmentSeries, rows: list[dict[str, Any]]) -> list[str]:
    named = [c for c in dict.fromkeys(r["column"] for r in rows) if c in seg.series]
    return named or list(seg.series)[:1]


def _draw_panel(ax: Any, seg: SegmentSeries, column: str, rows: list[dict[str, Any]]) -> None:
    series = seg.series[column]
    mine = [r for r in rows if r["column"] == column]
    flagged = list(dict.fromkeys(d for r in mine for d in (r["dims"] or [])))[:MAX_DIMS]
    for d in range(series.width):
        if d not in flagged:
            ax.plot(series.rows, series.values[:, d], color="0.8", linewidth=0.6, zorder=1)
    for d in flagged:
        if d < series.width:
            ax.plot(series.rows, series.values[:, d], linewidth=1.2, zorder=3,
                    label=series.names[d])
    for r in mine:
        if r["check"] in VALUE_SCALE and r["threshold"] is not None:
            colour = COLOURS[r["severity"]]
            ax.axhline(r["threshold"], color=colour, linestyle="--", linewidth=1, zorder=2,
                       label=f"{r['check']} threshold")
            if r["baseline"] is not None:
                ax.axhline(r["baseline"], color=colour, linestyle=":", linewidth=1, zorder=2,
                           label="the others' median")
    for r in rows:
        if r["start_row"] is None or (r["column"] not in (None, column)
                                      and r["column"] in seg.series):
            continue
        ax.axvspan(r["start_row"] - 0.5, r["end_row"] - 0.5, color=COLOURS[r["severity"]],
                   alpha=0.25, zorder=2)
        ax.annotate(r["check"], xy=(r["start_row"], 1.0), xycoords=("data", "axes fraction"),
                    fontsize=7, va="bottom", color=COLOURS[r["severity"]])
    ax.set_title(column, fontsize=9, loc="left")
    ax.set_xlabel(seg.clock.timeline or "row", fontsize=8)
    ax.grid(alpha=0.3)
    if flagged:
        ax.legend(fontsize=7, loc="upper right")


def _draw_frames(axes: list[Any], plan: FramePlan, thumbs: list[Thumbnail]) -> None:
    camera = plan.entity.rsplit("/", 1)[-1]
    for i, ax in enumerate(axes):
        ax.axis("off")
        if i >= len(thumbs):
            continue
        thumb = thumbs[i]
        head = f"{plan.check} {camera}" if i == 0 else ""
        ax.set_title(f"{head}\nrow {thumb.row} ({thumb.role})", fontsize=7, loc="left")
        if thumb.image is not None:
            ax.imshow(thumb.image)
        else:
            ax.text(0.5, 0.5, thumb.note, ha="center", va="center", fontsize=7, wrap=True,
                    transform=ax.transAxes)


def plot_segment(pyplot: Any, seg: SegmentSeries, rows: list[dict[str, Any]],
                 title: str) -> Any:
    """The figure of one segment's findings (``rows``: findings as dicts): a panel per column,
    then a row of frames per video finding (:func:`plan_frames`)."""
    panels = _panels(seg, rows)
    plans = plan_frames(seg, rows)
    lines = [f"[{r['severity']}] {r['check']}: {r['message']}" for r in rows][:MAX_MESSAGES]
    count = max(len(panels), 1)
    fig = pyplot.figure(layout="constrained",
                        figsize=(10, 2.8 * count + FRAME_ROW_IN * len(plans) + 0.25 * len(lines)))
    grid = fig.add_gridspec(count + len(plans), MAX_FRAMES,
                            height_ratios=[2.8] * count + [FRAME_ROW_IN] * len(plans))
    axes = [fig.add_subplot(grid[i, :]) for i in range(count)]
    for ax, column in zip(axes, panels, strict=False):
        _draw_panel(ax, seg, column, rows)
    if not panels:
        axes[0].text(0.5, 0.5, "no numeric column", ha="center", transform=axes[0].transAxes)
    for j, plan in enumerate(plans):
        _draw_frames([fig.add_subplot(grid[count + j, k]) for k in range(MAX_FRAMES)], plan,
                     decode_plan(seg, plan))
    fig.suptitle(title, fontsize=10)
    if lines:
        fig.text(0.01, 0.0, "\n".join(line[:160] for line in lines), fontsize=7, va="bottom",
                 family="monospace")
        fig.get_layout_engine().set(rect=(0, 0.02 * len(lines) + 0.02, 1, 1))
    return fig


def plot_findings(source: DatasetView | Slice, result: CurationResult, out: str | Path, *,
                  segments: Sequence[str] | None = None) -> list[Path]:
    """Write ``<out>/<segment>.png`` for each flagged segment of ``result`` (verdict ``review``
    or ``exclude``; or the ``segments`` given) and return the paths.

    Raises:
        ImportError: matplotlib is missing (``rayform[plot]``).
    """
    pyplot = require_pyplot()
    view = source.view() if isinstance(source, Slice) else source
    wanted = list(segments) if segments is not None else \
        [v.segment for v in result.verdicts if v.verdict != "ok"]
    findings = result.findings.to_pylist()
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    columns = numeric_columns(view)
    written = []
    for sid in wanted:
        rows = [r for r in findings if r["segment"] == sid]
        seg = load_series(view, sid, columns)
        verdict = next((v.verdict for v in result.verdicts if v.segment == sid), "?")
        fig = plot_segment(pyplot, seg, rows, f"{result.dataset} @ {result.version}: {sid} "
                                              f"({verdict}, {len(rows)} finding(s))")
        path = folder / file_name(sid)
        fig.savefig(path, dpi=80)
        pyplot.close(fig)
        written.append(path)
    return written
