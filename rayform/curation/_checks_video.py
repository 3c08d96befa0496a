"""Video checks: the file's frames against the rows (exact, from the container index), and a
sample of the decoded frames for identical-frame runs beyond the dataset's own pattern and
black cameras.

Identical consecutive frames are normal in some recordings (the real Unitree AV1 episodes have
56 of 220 consecutive pairs pixel-identical, never two pairs in a row), so a run is flagged only
when it is longer than the longest run the other segments show.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import numpy.typing as npt

from rayform.curation._check import Check
from rayform.curation._context import Context, runs
from rayform.curation._finding import Finding
from rayform.curation._series import SegmentSeries
from rayform.errors import RayformError

SAMPLE_WINDOWS = 4      # --video sample: this many windows of consecutive frames per camera …
SAMPLE_FRAMES = 10      # … of this many frames each
IDENTICAL_MIN_PAIRS = 2  # never flag fewer identical pairs in a row than this
BLACK_LEVEL = 8.0       # mean luma under this is a black frame …
BLACK_MIN_S = 0.5       # … for at least this long
MATCH_TOLERANCE_NS = 1_000_000


def _file_of(seg: SegmentSeries, entity: str) -> Any:
    digest = seg.video_assets.get(entity)
    if digest is None or seg.data is None:
        return None
    return seg.data.asset_path(digest)


def _probe(ctx: Context, path: Any) -> Any:
    """The file's frame index (demuxed once per run: both video checks use it)."""
    from rayform.media import probe_video_asset

    key = (str(path), "probe")
    if key not in ctx.features:
        ctx.features[key] = probe_video_asset(path)
    return ctx.features[key]


def frames(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    """The container's frames against the rows' frame references (no decoding). A file no other
    segment uses is the episode's alone, so all its frames count; a shared one (LeRobot v3.0
    packs episodes into one file) counts the frames within the episode's span."""
    shared = {d for sid, other in ctx.segments.items() if sid != seg.segment_id
              for d in other.video_assets.values()}
    out = []
    for entity, (rows, refs) in seg.video_timestamps.items():
        path = _file_of(seg, entity)
        if path is None or not len(refs):
            continue
        column = f"{entity}:VideoFrameReference:timestamp"
        try:
            info = _probe(ctx, path)
        except (RayformError, OSError) as err:
            out.append(Finding(check="video.frames", severity="error", segment=seg.segment_id,
                               column=column, message=f"camera {entity!r}: video unreadable: {err}"))
            continue
        stamps = info.frame_timestamps_ns
        lo, hi = int(refs.min()) - MATCH_TOLERANCE_NS, int(refs.max()) + MATCH_TOLERANCE_NS
        inside = stamps if seg.video_assets[entity] not in shared \
            else stamps[(stamps >= lo) & (stamps <= hi)]
        pos = np.clip(np.searchsorted(inside, refs), 0, max(len(inside) - 1, 0))
        near = np.minimum(np.abs(inside[pos] - refs) if len(inside) else np.inf,
                          np.abs(inside[np.maximum(pos - 1, 0)] - refs) if len(inside) else np.inf)
        for a, b in runs(near > MATCH_TOLERANCE_NS):
            out.append(Finding(
                check="video.frames", severity="error", segment=seg.segment_id, column=column,
                start_row=int(rows[a]), end_row=int(rows[b - 1]) + 1, value=float(b - a),
                threshold=0.0, exclude_range=True,
                message=(f"camera {entity!r}: rows {rows[a]}..{rows[b - 1]} name frames at "
                         f"{refs[a] / 1e9:.4f} s.. that the video file does not have")))
        if len(inside) != len(refs):
            dup = np.flatnonzero(np.diff(inside) <= MATCH_TOLERANCE_NS)
            named = f"; frame {int(dup[0])} is repeated" if len(dup) else ""
            where = "in the episode's span " if seg.video_assets[entity] in shared else ""
            out.append(Finding(
                check="video.frames", severity="error", segment=seg.segment_id, column=column,
                value=float(len(inside)), threshold=float(len(refs)),
                message=(f"camera {entity!r}: the video file has {len(inside)} frames "
                         f"{where}for {len(refs)} rows{named}")))
    return out


def _luma(frame: Any) -> npt.NDArray[np.uint8]:
    plane = frame.planes[0]
    data = np.frombuffer(plane, dtype=np.uint8).reshape(-1, plane.line_size)
    return data[:frame.height, :frame.width][::4, ::4].copy()


def _windows(count: int, mode: str) -> list[tuple[int, int]]:
    """Half-open frame ranges to decode: everything, or a few evenly spaced windows."""
    if mode != "sample" or count <= SAMPLE_WINDOWS * SAMPLE_FRAMES:
        return [(0, count)]
    starts = np.linspace(0, count - SAMPLE_FRAMES, SAMPLE_WINDOWS).astype(int)
    return [(int(a), int(a) + SAMPLE_FRAMES) for a in starts]


def _luma_windows(path: Any, count: int, mode: str, info: Any
                  ) -> list[tuple[int, npt.NDArray[np.uint8]]]:
    """Decoded luma planes ``(frame number, plane)`` of the frames in each window; a window is
    decoded from the keyframe before it (a seek), so a sample costs about its own frames."""
    from rayform.media._video_asset import pts_to_ns
    from rayform.media._video_codec import require_av

    av = require_av()
    stamps = info.frame_timestamps_ns
    out: list[tuple[int, npt.NDArray[np.uint8]]] = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for first, stop in _windows(min(count, len(stamps)), mode):
            if first > 0:
                target = int(stamps[first]) * info.time_base.denominator // (
                    info.time_base.numerator * 1_000_000_000)
                container.seek(target, stream=stream, backward=True, any_frame=False)
            for frame in container.decode(stream):
                if frame.pts is None:
                    continue
                ns = int(pts_to_ns(np.array([frame.pts], dtype=np.int64), info.time_base)[0])
                number = int(np.searchsorted(stamps, ns - MATCH_TOLERANCE_NS))
                if number >= stop:
                    break
                if number >= first:
                    out.append((number, _luma(frame)))
    return out


def _content(ctx: Context, seg: SegmentSeries) -> dict[str, dict[str, Any]]:
    """Per camera: identical-pair runs and black runs (frame numbers), cached per segment."""
    key = (seg.segment_id, "video_content")
    cached: Any = ctx.features.get(key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    result: dict[str, dict[str, Any]] = {}
    for entity, (rows, _) in seg.video_timestamps.items():
        path = _file_of(seg, entity)
        if path is None:
            continue
        try:
            planes = _luma_windows(path, len(rows), ctx.video, _probe(ctx, path))
        except (RayformError, OSError, ValueError) as err:
            result[entity] = {"error": str(err)}
            continue
        identical: list[tuple[int, int]] = []
        for (n0, p0), (n1, p1) in itertools.pairwise(planes):
            if n1 == n0 + 1 and np.array_equal(p0, p1):
                identical.append((n0, n1))
        pairs = np.zeros(max(len(rows), 1), dtype=bool)
        for n0, _ in identical:
            if n0 < len(pairs):
                pairs[n0] = True
        dark = np.zeros(max(len(rows), 1), dtype=bool)
        for number, plane in planes:
            if number < len(dark) and float(plane.mean()) < BLACK_LEVEL:
                dark[number] = True
        result[entity] = {"pairs": runs(pairs), "dark": runs(dark), "rows": rows,
                          "decoded": len(planes)}
    ctx.features[key] = result
    return result


def identical(ctx: Context, seg: SegmentSeries) -> list[Finding]:
    if ctx.video == "off":
        return []
    own = _content(ctx, seg)
    out = []
    for entity, info in own.items():
        if "error" in info:
            continue
        usual = 1
        for sid, other in ctx.segments.items():
            if sid != seg.segment_id and entity in other.video_timestamps:
                theirs = _content(ctx, other).get(entity, {})
                usual = max([usual, *[b - a for a, b in theirs.get("pairs", [])]])
        limit = max(IDENTICAL_MIN_PAIRS, usual + 1)
        rows = info["rows"]
        for a, b in info["pairs"]:
            if b - a < limit:
                continue
            out.append(Finding(
                check="video.identical", severity="warning", segment=seg.segment_id,
                column=f"{entity}:VideoFrameReference:timestamp",
                start_row=int(rows[min(a, len(rows) - 1)]),
                end_row=int(rows[min(b, len(rows) - 1)]) + 1, value=float(b - a + 1),
                threshold=float(limit + 1), baseline=float(usual + 1), exclude_range=True,
                message=(f"camera {entity!r}: frames {a}..{b} ({b - a + 1}) are pixel-identical; "
                         f"the other segments repeat at most {usual + 1} in a row (frozen "
                         "camera or duplicated frames)")))
        rate = float(seg.properties.get("fps") or ctx.nominal_rate_hz or 30.0)
        for a, b in info["dark"]:
            if (b - a) / rate < BLACK_MIN_S:
                continue
            out.append(Finding(
                check="video.black", severity="warning", segment=seg.segment_id,
                column=f"{entity}:VideoFrameReference:timestamp",
                start_row=int(rows[min(a, len(rows) - 1)]),
                end_row=int(rows[min(b - 1, len(rows) - 1)]) + 1, value=float(b - a),
                threshold=BLACK_LEVEL, exclude_range=True,
                message=f"camera {entity!r}: frames {a}..{b - 1} are black"))
    return out


CHECKS = [
    Check(id="video.frames", detects="video frames missing, extra or repeated against the rows",
          how="the container's frame timestamps (demuxed, not decoded) against every row's "
          "frame reference", threshold="exact (1 ms)", cost="video", scope="segment",
          run_segment=frames),
    Check(id="video.identical", detects="frozen camera / duplicated frames, black camera",
          how="decoded luma (1/4 resolution) of consecutive frames: runs of identical pairs "
          "longer than the other segments' longest; mean luma for black",
          threshold=f">= max({IDENTICAL_MIN_PAIRS}, usual + 1) pairs; luma < {BLACK_LEVEL:g} "
          f"for {BLACK_MIN_S:g} s", cost="video", scope="segment", run_segment=identical),
]
