"""GOP-aware decode plans: group a block's video requests into runs decoded once each.

A *run* is one forward pass of a decoder from a keyframe: every request of the block whose frames
come from the same group of pictures joins the same run, and the run captures every frame any of
them wants, so a block costs one decode per GOP touched, not one per sample. Runs are independent,
so :func:`schedule_runs` can share them out between decode threads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from rayform.decoders._base import DecodeRequest
from rayform.decoders._requests import CodedIds, RequestArrays
from rayform.media._video_asset import AssetPackets

# A frame a request wants: a batch row (packet streams) or (asset key, presentation index).
FrameKey = int | tuple[str, int]


@dataclass(slots=True, kw_only=True)
class PacketRun:
    """Rows ``start..end`` of one segment's packet stream, decoded forward from ``start``.

    Attributes:
        segment_id: the segment (also the stream runs are merged within).
        start: the keyframe row the run starts at.
        end: the last row to feed (the last wanted frame).
        wanted_rows: rows whose frames are captured.
        keyframe_rows: rows known to be keyframes (the starts of the merged requests).
        trusted: some request vouched that ``start`` is a keyframe (``starts_at_keyframe``).
    """

    segment_id: str
    start: int
    end: int
    wanted_rows: set[int] = field(default_factory=set)
    keyframe_rows: set[int] = field(default_factory=set)
    trusted: bool = False

    @property
    def stream(self) -> str:
        return self.segment_id

    def absorb(self, other: PacketRun) -> None:
        """Continue this run through ``other`` (which starts at or before this run's end + 1)."""
        self.end = max(self.end, other.end)
        self.wanted_rows |= other.wanted_rows
        self.keyframe_rows |= other.keyframe_rows


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

    @property
    def stream(self) -> str:
        return self.asset_key

    def absorb(self, other: AssetRun) -> None:
        """Continue this run through ``other`` (which starts at or before this run's end + 1)."""
        self.end = max(self.end, other.end)
        self.wanted |= other.wanted


@dataclass(frozen=True, slots=True)
class Unresolved:
    """Why a request gets no frames: ``"keyframe"`` (nothing decodable before it), ``"empty"``
    (no packet since its keyframe) or ``"asset"`` (its video file cannot be read)."""

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
    if isinstance(requests, RequestArrays) and requests.decode_starts is not None:
        return _plan_packet_arrays(requests, latest)
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
            run = PacketRun(segment_id=request.segment_id, start=start, end=start,
                            keyframe_rows={start})
            groups[(request.segment_id, start)] = run
        run.wanted_rows.update(rows)
        run.end = max(run.end, *rows)
        run.trusted = run.trusted or request.starts_at_keyframe
        keys.append(list(rows))
    return [run for _, run in sorted(groups.items())], keys


def _plan_packet_arrays(requests: RequestArrays, latest: npt.NDArray[np.int64]
                        ) -> tuple[list[PacketRun], list[list[FrameKey] | Unresolved]]:
    """:func:`plan_packet_runs` on the request arrays, without a DecodeRequest per request."""
    assert requests.decode_starts is not None and requests.decode_stops is not None
    outputs = requests.output_rows
    if not len(outputs):
        return [], []
    starts = np.where(requests.decode_stops > requests.decode_starts, requests.decode_starts,
                      outputs.min(axis=1))
    rows = latest[outputs]
    ok = rows.min(axis=1) >= starts
    ids = requests.segment_ids
    if isinstance(ids, CodedIds):  # the pipeline's: one code per segment already
        segment = ids.codes
    else:
        codes: dict[str, int] = {}
        segment = np.fromiter((codes.setdefault(s, len(codes)) for s in ids),
                              dtype=np.int64, count=len(outputs))
    chosen = np.flatnonzero(ok)
    order = chosen[np.lexsort((starts[chosen], segment[chosen]))]
    edges = np.flatnonzero((np.diff(starts[order]) != 0) | (np.diff(segment[order]) != 0)) + 1
    runs: list[PacketRun] = []
    for members in np.split(order, edges) if len(order) else []:
        start = int(starts[members[0]])
        wanted = rows[members]
        runs.append(PacketRun(segment_id=requests.segment_ids[int(members[0])], start=start,
                              end=max(start, int(wanted.max())),
                              wanted_rows=set(wanted.ravel().tolist()), keyframe_rows={start},
                              trusted=requests.starts_at_keyframe))
    runs.sort(key=lambda run: (run.segment_id, run.start))
    keys: list[list[FrameKey] | Unresolved] = [
        list(r) if good else Unresolved("empty")
        for r, good in zip(rows.tolist(), ok.tolist(), strict=True)]
    return runs, keys


def plan_asset_runs(
    requests: Sequence[DecodeRequest],
    timestamps_ns: npt.NDArray[np.int64],
    asset_of: Callable[[str], tuple[str, AssetPackets] | None],
) -> tuple[list[AssetRun], list[list[FrameKey] | Unresolved]]:
    """Group video-asset requests by (file, keyframe) and merge touching groups.

    Args:
        requests: the block's requests (any order).
        timestamps_ns: ``int64[num_rows]`` each batch row's frame timestamp in its file.
        asset_of: segment id to ``(asset key, packet table)``, ``None`` if the file is unusable.

    Returns:
        The runs, and per request the frame keys of its outputs or why it has none.
    """
    groups: dict[tuple[str, int], AssetRun] = {}
    keys: list[list[FrameKey] | Unresolved] = []
    for request in requests:
        asset = asset_of(request.segment_id)
        if asset is None:
            keys.append(Unresolved("asset"))
            continue
        asset_key, packets = asset
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
    return [run for _, run in sorted(groups.items())], keys


Run = TypeVar("Run", PacketRun, AssetRun)


def _merge(runs: list[Run], *, gap: int) -> list[Run]:
    """Merge runs of one stream whose start is at most ``gap`` past the previous run's end."""
    merged: list[Run] = []
    for run in runs:
        last = merged[-1] if merged else None
        if last is not None and last.stream == run.stream and run.start <= last.end + gap:
            last.absorb(run)
        else:
            merged.append(run)
    return merged


def _chains(runs: Sequence[Run]) -> int:
    """How many decoders ``runs`` (sorted, non-overlapping) need: runs of one stream that follow
    each other without a gap are decoded by one."""
    return 1 + sum(not (b.stream == a.stream and b.start <= a.end + 1)
                   for a, b in pairwise(runs))


def schedule_runs(runs: list[Run], *, parts: int) -> list[list[Run]]:
    """Split a block's runs (sorted by stream, then start) into decode jobs for ``parts`` slots.

    Runs that overlap are merged first (their shared frames are decoded once). Runs that follow
    each other without a gap are decoded by one decoder (it carries on through the keyframe: the
    same frames, one decoder fewer). When that leaves at least ``parts`` independent chains
    (random access), each chain is a job and the longest come first, so that threads taking jobs
    from one queue finish together. Otherwise (a few long sequential stretches) the runs are cut
    into ``parts`` contiguous jobs of similar decoding work (packets fed).
    """
    merged = _merge(runs, gap=0)
    if parts <= 1 or len(merged) <= 1:
        return [_merge(merged, gap=1)] if merged else []
    if _chains(merged) >= parts:
        chains = _merge(merged, gap=1)
        return [[run] for run in sorted(chains, key=lambda run: run.start - run.end)]
    cost = np.array([run.end - run.start + 1 for run in merged], dtype=np.float64)
    bounds = np.searchsorted(np.cumsum(cost), np.arange(1, parts) * cost.sum() / parts)
    cuts: list[int] = sorted({int(b) + 1 for b in bounds if 0 <= b < len(merged) - 1})
    edges = [0, *cuts, len(merged)]
    return [_merge(merged[a:b], gap=1) for a, b in pairwise(edges) if b > a]
