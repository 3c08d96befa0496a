"""Video checks: the file's frames against the rows (exact, from the container index), and a
sample of the decoded frames for identical-frame runs beyond the dataset's own pattern and
black cameras.

``--video sample`` decodes GOP heads: one per second of video (8 at most per camera), each the
keyframe at or before the sampled time and the two frames after it, so a head costs a seek and
three frames and nothing decoded is thrown away; two heads a second apart that are each still
and identical to each other count as a camera frozen between them. ``--video full`` decodes
every frame.

Identical consecutive frames are normal in some recordings (the real Unitree AV1 episodes have
56 of 220 consecutive pairs pixel-identical, never two pairs in a row), so a run is flagged only
when it is longer than the longest run the other segments show.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from rayform.curation._check import Check
from rayform.curation._context import Context, runs
from rayform.curation._finding import Finding
from rayform.curation._series import SegmentSeries
from rayform.errors import RayformError

SAMPLE_EVERY_S = 1.0    # --video sample: one GOP head per second of video …
SAMPLE_HEADS = 8        # … at most this many per camera, evenly spread …
HEAD_FRAMES = 3         # … each its keyframe and the frames after it, this many in all
IDENTICAL_MIN_PAIRS = 2  # never flag fewer identical pairs in a row than this
BLACK_LEVEL = 8.0       # mean luma under this is a black frame …
BLACK_MIN_S = 0.5       # … for at least this long
MATCH_TOLERANCE_NS = 1_000_000
T = TypeVar("T")


def file_of(seg: SegmentSeries, entity: str) -> Any:
    """The local path of the camera's video asset, or None (no asset, or no segment data)."""
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
        path = file_of(seg, entity)
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


def sample_heads(stamps: npt.NDArray[np.int64], is_keyframe: npt.NDArray[np.bool_],
                 first: int, count: int, mode: str) -> list[tuple[int, int]]:
    """Half-open ranges of file frame indices to decode for the frames ``first..first+count``.

    ``full``: all of them. ``sample``: GOP heads, one per second of video (at most
    :data:`SAMPLE_HEADS` evenly spread): the keyframe at or before each sampled time and the
    frames after it, :data:`HEAD_FRAMES` in all, so a head decodes nothing it does not use.
    """
    if mode != "sample" or count <= SAMPLE_HEADS * HEAD_FRAMES:
        return [(first, first + count)]
    span_s = (int(stamps[first + count - 1]) - int(stamps[first])) / 1e9
    heads = int(min(SAMPLE_HEADS, max(2, np.ceil(span_s / SAMPLE_EVERY_S))))
    targets = np.linspace(first, first + count - HEAD_FRAMES, heads).astype(int)
    keys = np.flatnonzero(is_keyframe[first:first + count]) + first
    out: list[tuple[int, int]] = []
    for target in targets:
        before = keys[keys <= target]
        start = int(before[-1]) if len(before) else first
        if out and start < out[-1][1]:
            continue  # the same GOP as the previous head
        out.append((start, min(start + HEAD_FRAMES, first + count)))
    return out


def decode_ranges(path: Any, info: Any, ranges: list[tuple[int, int]],
                  convert: Callable[[Any], T]) -> list[tuple[int, T]]:
    """``(file frame index, convert(frame))`` for the frames of each half-open range of file
    frame indices: a range not at the file's start is decoded from the keyframe at or before
    it (a seek), and decoding stops at its last frame (nothing past it is decoded)."""
    from rayform.media._video_asset import pts_to_ns
    from rayform.media._video_codec import require_av

    av = require_av()
    stamps = info.frame_timestamps_ns
    out: list[tuple[int, T]] = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for start, stop in ranges:
            if start > 0:
                target = int(stamps[start]) * info.time_base.denominator // (
                    info.time_base.numerator * 1_000_000_000)
                container.seek(target, stream=stream, backward=True, any_frame=False)
            for frame in container.decode(stream):
                if frame.pts is None:
                    continue
                ns = int(pts_to_ns(np.array([frame.pts], dtype=np.int64), info.time_base)[0])
                number = int(np.searchsorted(stamps, ns - MATCH_TOLERANCE_NS))
                if number >= stop:
                    break
                if number >= start:
                    out.append((number, convert(frame)))
                if number + 1 >= stop:
                    break  # the range is complete: decode no frame past it
    return out


def _luma_heads(path: Any, refs: npt.NDArray[np.int64], mode: str, info: Any
                ) -> list[tuple[int, npt.NDArray[np.uint8]]]:
    """Decoded luma planes ``(frame number, plane)`` of the sampled frames (numbers count from
    the segment's first frame in the file); each head is decoded from its keyframe (a seek)."""
    stamps = info.frame_timestamps_ns
    lo = int(np.searchsorted(stamps, int(refs.min()) - MATCH_TOLERANCE_NS))
    hi = int(np.searchsorted(stamps, int(refs.max()) + MATCH_TOLERANCE_NS, side="right"))
    count = min(hi - lo, len(refs))
    if count <= 0:
        return []
    heads = sample_heads(stamps, info.is_keyframe, lo, count, mode)
    return [(number - lo, plane) for number, plane in decode_ranges(path, info, heads, _luma)]


def _frozen_pairs(planes: list[tuple[int, npt.NDArray[np.uint8]]], size: int
                  ) -> npt.NDArray[np.bool_]:
    """``pairs[n]``: frames ``n`` and ``n + 1`` are pixel-identical. Between two sampled heads
    that are each identical throughout and identical to each other, every pair counts as
    identical: a camera frozen from one sampled second to the next."""
    pairs = np.zeros(size, dtype=bool)
    heads: list[list[tuple[int, npt.NDArray[np.uint8]]]] = []
    for number, plane in planes:
        if heads and number == heads[-1][-1][0] + 1:
            heads[-1].append((number, plane))
        else:
            heads.append([(number, plane)])
    still = []
    for head in heads:
        same = [np.array_equal(p0, p1) for (_, p0), (_, p1) in itertools.pairwise(head)]
        for (n0, _), flag in zip(head, same, strict=False):
            if flag and n0 < size:
                pairs[n0] = True
        still.append(len(head) > 1 and all(same))
    for i in range(len(heads) - 1):
        a, b = heads[i], heads[i + 1]
        if still[i] and still[i + 1] and np.array_equal(a[-1][1], b[0][1]):
            pairs[a[-1][0]:min(b[0][0], size)] = True
    return pairs


def _dark_runs(planes: list[tuple[int, npt.NDArray[np.uint8]]], size: int
               ) -> list[tuple[int, int]]:
    """Runs of black frames; consecutive sampled frames both black make one run between them."""
    out: list[tuple[int, int]] = []
    for number, plane in planes:
        if number >= size or float(plane.mean()) >= BLACK_LEVEL:
            out.append((-1, -1))
            continue
        if out and out[-1][0] >= 0:
            out[-1] = (out[-1][0], number + 1)
        else:
            out.append((number, number + 1))
    return [r for r in out if r[0] >= 0]


def _content(ctx: Context, seg: SegmentSeries) -> dict[str, dict[str, Any]]:
    """Per camera: identical-pair runs and black runs (frame numbers), cached per segment."""
    key = (seg.segment_id, "video_content")
    cached: Any = ctx.features.get(key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    result: dict[str, dict[str, Any]] = {}
    for entity, (rows, refs) in seg.video_timestamps.items():
        path = file_of(seg, entity)
        if path is None or not len(refs):
            continue
        try:
            planes = _luma_heads(path, refs, ctx.video, _probe(ctx, path))
        except (RayformError, OSError, ValueError) as err:
            result[entity] = {"error": str(err)}
            continue
        size = max(len(rows), 1)
        result[entity] = {"pairs": runs(_frozen_pairs(planes, size)),
                          "dark": _dark_runs(planes, size), "rows": rows,
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
          how="decoded luma (1/4 resolution) of consecutive frames (--video sample: a GOP head "
          "of 3 frames per second, 8 at most): runs of identical pairs longer than the other "
          "segments' longest; mean luma for black",
          threshold=f">= max({IDENTICAL_MIN_PAIRS}, usual + 1) pairs; luma < {BLACK_LEVEL:g} "
          f"for {BLACK_MIN_S:g} s", cost="video", scope="segment", run_segment=identical),
]
