"""The frames ``rayform curate --plot`` shows for a segment's video findings.

For each of a segment's first :data:`MAX_VIDEO_FINDINGS` video findings (checks ``video.*``)
with a row range on a camera: the frames of the row before the range, its first row, its last
row and the row after it (:data:`MAX_FRAMES` at most, clipped to the segment), each decoded as a
small RGB thumbnail. Only those frames are decoded: each run of consecutive frames from the
keyframe at or before it (:func:`rayform.curation._checks_video.decode_ranges`). A frame that
cannot be decoded (no frame at the row's time, an unreadable file) comes back as a note.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rayform.curation._checks_video import MATCH_TOLERANCE_NS, decode_ranges, file_of
from rayform.curation._series import SegmentSeries
from rayform.errors import RayformError

MAX_VIDEO_FINDINGS = 2  # video findings given a row of frames per segment …
MAX_FRAMES = 4          # … each this many frames at most
THUMB_WIDTH = 160       # thumbnail width in pixels (height keeps the aspect)
CAMERA_SUFFIX = ":VideoFrameReference:timestamp"
ROLES = ("before", "first", "last", "after")


@dataclass(frozen=True, slots=True, kw_only=True)
class FramePlan:
    """The frames to show for one video finding: its rows, and each row's frame time."""

    check: str
    entity: str
    rows: tuple[int, ...]
    roles: tuple[str, ...]
    stamps_ns: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Thumbnail:
    """One shown frame: its row, its role in the range, the image or why there is none."""

    row: int
    role: str
    image: npt.NDArray[np.uint8] | None
    note: str = ""


def plan_frames(seg: SegmentSeries, findings: list[dict[str, Any]]) -> list[FramePlan]:
    """The rows whose frames to show for ``findings`` (the segment's findings as dicts): the
    row before each video finding's range, its first and last rows and the row after it."""
    out: list[FramePlan] = []
    for r in findings:
        if len(out) >= MAX_VIDEO_FINDINGS:
            break
        column = r["column"] or ""
        entity = column.removesuffix(CAMERA_SUFFIX)
        if (not r["check"].startswith("video.") or r["start_row"] is None
                or not column.endswith(CAMERA_SUFFIX) or entity not in seg.video_timestamps):
            continue
        rows, refs = seg.video_timestamps[entity]
        if not len(rows):
            continue
        first = int(np.searchsorted(rows, r["start_row"]))
        after = int(np.searchsorted(rows, r["end_row"]))
        chosen: dict[int, str] = {}
        for pos, role in zip((first - 1, first, after - 1, after), ROLES, strict=True):
            if 0 <= pos < len(rows):
                chosen.setdefault(pos, role)
        picked = sorted(chosen)[:MAX_FRAMES]
        out.append(FramePlan(check=r["check"], entity=entity,
                             rows=tuple(int(rows[p]) for p in picked),
                             roles=tuple(chosen[p] for p in picked),
                             stamps_ns=tuple(int(refs[p]) for p in picked)))
    return out


def _thumbnail(frame: Any) -> npt.NDArray[np.uint8]:
    height = max(1, round(frame.height * THUMB_WIDTH / max(frame.width, 1)))
    image: npt.NDArray[np.uint8] = frame.to_ndarray(format="rgb24", width=THUMB_WIDTH,
                                                    height=height)
    return image


def _runs(numbers: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for n in sorted(set(numbers)):
        if out and n == out[-1][1]:
            out[-1] = (out[-1][0], n + 1)
        else:
            out.append((n, n + 1))
    return out


def decode_plan(seg: SegmentSeries, plan: FramePlan) -> list[Thumbnail]:
    """The plan's frames as thumbnails (a note in place of each frame that cannot be had)."""
    from rayform.media import probe_video_asset

    def missing(note: str) -> list[Thumbnail]:
        return [Thumbnail(row=row, role=role, image=None, note=note)
                for row, role in zip(plan.rows, plan.roles, strict=True)]

    path = file_of(seg, plan.entity)
    if path is None:
        return missing("no video file")
    try:
        info = probe_video_asset(path)
        stamps = info.frame_timestamps_ns
        numbers: list[int | None] = []
        for ns in plan.stamps_ns:
            k = int(np.searchsorted(stamps, ns - MATCH_TOLERANCE_NS))
            numbers.append(k if k < len(stamps) and abs(int(stamps[k]) - ns)
                           <= MATCH_TOLERANCE_NS else None)
        decoded = dict(decode_ranges(path, info, _runs([n for n in numbers if n is not None]),
                                     _thumbnail))
    except (RayformError, OSError, ValueError) as err:
        return missing(f"not decoded: {str(err)[:60]}")
    out = []
    for row, role, ns, number in zip(plan.rows, plan.roles, plan.stamps_ns, numbers,
                                     strict=True):
        image = decoded.get(number) if number is not None else None
        note = "" if image is not None else \
            f"no frame at {ns / 1e9:.3f} s" if number is None else "not decoded"
        out.append(Thumbnail(row=row, role=role, image=image, note=note))
    return out
