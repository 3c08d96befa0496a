"""GOP-aware decode plans: group a block's video requests into runs decoded once each.

A *run* is one forward pass of a decoder from a keyframe: every request of the block whose frames
come from the same group of pictures (or from GOPs that follow each other with nothing skipped)
joins the same run, and the run captures every frame any of them wants. Each run is independent
(its own decoder session), so a block costs one decode per GOP touched, not one per sample.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from rayform.decoders._base import DecodeRequest
from rayform.decoders._video_asset import AssetPackets

# A frame a request wants: a batch row (packet streams) or (asset key, presentation index).
FrameKey = int | tuple[str, int]


@dataclass(slots=True, kw_only=True)
class PacketRun:
    """Rows ``start_row..end_row`` of one segment's packet stream, decoded from ``start_row``.

    Attributes:
        segment_id: the segment.
        start_row: the keyframe row the run starts at.
        end_row: the last row to feed (the last wanted frame).
        wanted_rows: rows whose frames are captured.
        keyframe_rows: rows known to be keyframes (the starts of the merged requests).
        trusted: some request vouched that ``start_row`` is a keyframe (``starts_at_keyframe``).
    """

    segment_id: str
    start_row: int
    end_row: int
    wanted_rows: set[int] = field(default_factory=set)
    keyframe_rows: set[int] = field(default_factory=set)
    trusted: bool = False


@dataclass(slots=True, kw_only=True)
class AssetRun:
    """A forward decode of one video file from the keyframe at decode position ``start``.

    Attributes:
        segment_id: a segment the file belongs to (for messages).
        asset_key: the file's content hash.
        packets: the file's packet table.
        start: decode position of the keyframe to start from.
        end: the largest decode position of a wanted frame.
        wanted: presentation indices of the frames to capture.
    """

    segment_id: str
    asset_key: str
    packets: AssetPackets
    start: int
    end: int
    wanted: set[int] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class Unresolved:
    """Why a request gets no frames: ``"keyframe"`` (nothing decodable before it) or ``"empty"``."""

    reason: str


def last_nonempty_rows(nonempty: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """For each row, the latest row at or before it holding a packet; -1 where none."""
    rows = np.where(nonempty, np.arange(len(nonempty), dtype=np.int64), -1)
    return np.maximum.accumulate(rows) if len(rows) else rows


def plan_packet_runs(
    requests: Sequence[DecodeRequest], nonempty: npt.NDArray[np.bool_]
) -> tuple[list[PacketRun], list[list[FrameKey] | Unresolved]]:
    """Group packet-stream requests by (segment, keyframe row) and merge touching groups.

    Args:
        requests: the block's requests (any order).
        nonempty: ``bool[num_rows]`` the batch row holds a packet.

    Returns:
        The runs, and per request the frame keys (batch rows) of its outputs or why it has none.
    """
    latest = last_nonempty_rows(nonempty)
    groups: dict[tuple[str, int], PacketRun] = {}
    keys: list[list[FrameKey] | Unresolved] = []
    for request in requests:
        start = request.decode_row_indices[0] if request.decode_row_indices else min(
            request.output_row_indices)
        rows = [int(latest[r]) for r in request.output_row_indices]
        if min(rows) < start:
            keys.append(Unresolved("empty"))
            continue
        run = groups.get((request.segment_id, start))
        if run is None:
            run = PacketRun(segment_id=request.segment_id, start_row=start, end_row=start,
                            keyframe_rows={start})
            groups[(request.segment_id, start)] = run
        run.wanted_rows.update(rows)
        run.end_row = max(run.end_row, *rows)
        run.trusted = run.trusted or request.starts_at_keyframe
        keys.append(list(rows))
    runs: list[PacketRun] = []
    for (segment_id, _), run in sorted(groups.items()):
        last = runs[-1] if runs else None
        if last is not None and last.segment_id == segment_id and run.start_row <= last.end_row + 1:
            last.end_row = max(last.end_row, run.end_row)
            last.wanted_rows |= run.wanted_rows
            last.keyframe_rows |= run.keyframe_rows
        else:
            runs.append(run)
    return runs, keys


def plan_asset_runs(
    requests: Sequence[DecodeRequest],
    timestamps_ns: npt.NDArray[np.int64],
    asset_of: Callable[[str], tuple[str, AssetPackets]],
) -> tuple[list[AssetRun], list[list[FrameKey] | Unresolved]]:
    """Group video-asset requests by (file, keyframe) and merge touching groups.

    Args:
        requests: the block's requests (any order).
        timestamps_ns: ``int64[num_rows]`` each batch row's frame timestamp in its file.
        asset_of: segment id to ``(asset key, packet table)``.

    Returns:
        The runs, and per request the frame keys of its outputs or why it has none.
    """
    groups: dict[tuple[str, int], AssetRun] = {}
    keys: list[list[FrameKey] | Unresolved] = []
    for request in requests:
        asset_key, packets = asset_of(request.segment_id)
        rows = np.asarray(request.output_row_indices, dtype=np.int64)
        frames = packets.frame_at(timestamps_ns[rows])
        first = int(frames.min())
        if first < 0 or packets.start_of[first] < 0:
            keys.append(Unresolved("keyframe"))
            continue
        start = int(packets.start_of[first])
        run = groups.get((asset_key, start))
        if run is None:
            run = AssetRun(segment_id=request.segment_id, asset_key=asset_key, packets=packets,
                           start=start, end=start)
            groups[(asset_key, start)] = run
        wanted = [int(f) for f in frames]
        run.wanted.update(wanted)
        run.end = max(run.end, int(packets.presentation_to_decode[frames].max()))
        keys.append([(asset_key, f) for f in wanted])
    runs: list[AssetRun] = []
    for (asset_key, _), run in sorted(groups.items()):
        last = runs[-1] if runs else None
        if last is not None and last.asset_key == asset_key and run.start <= last.end + 1:
            last.end = max(last.end, run.end)
            last.wanted |= run.wanted
        else:
            runs.append(run)
    return runs, keys
