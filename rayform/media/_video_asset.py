"""Video assets (MP4 files kept as-is): probe their frame index and read their packets.

:func:`probe_video_asset` is what importers call to log an MP4 with
``RecordingWriter.log_video_asset(..., frame_timestamps_ns=info.frame_timestamps_ns,
is_keyframe=info.is_keyframe)``. :class:`AssetPackets` is the decoder's view of the same file: the
packet table in decode order (offsets into the memory-mapped file), so that a decode can start at
any keyframe without a container seek, B-frames included.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from rayform.errors import (
    CorruptRecordingError,
    SourceNotFoundError,
)
from rayform.media._video_codec import canonical_codec, require_av

# A row's VideoFrameReference:timestamp names the frame whose pts (ns) is at most this much later:
# importers that compute timestamps as frame_index / fps in floating point land a few ns off.
FRAME_MATCH_TOLERANCE_NS: Final = 100_000


def pts_to_ns(pts: npt.NDArray[np.int64], time_base: Fraction) -> npt.NDArray[np.int64]:
    """Presentation timestamps in stream units to integer nanoseconds (rounded to nearest)."""
    num, den = time_base.numerator, time_base.denominator
    scaled = pts.astype(object) * (num * 1_000_000_000) + den // 2
    return np.asarray(scaled // den, dtype=np.int64)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class VideoAssetInfo:
    """What an importer needs to log a video file as an asset.

    Attributes:
        frame_timestamps_ns: ``int64[N]`` presentation time of each frame inside the file
            (pts × time base, in ns), ascending (presentation order).
        is_keyframe: ``bool[N]`` the frame can start a decode (a sync sample).
        codec: ``"h264"``, ``"h265"``, ``"av1"`` or the FFmpeg codec name.
        width: frame width in pixels.
        height: frame height in pixels.
        pixel_format: the decoder's pixel format, e.g. ``"yuv420p"``.
        time_base: the stream's time base (seconds per pts unit).
        average_rate_hz: the average frame rate, if the container states one.
        has_b_frames: some frames are stored out of presentation order (pts ≠ dts).
        stream_index: the video stream's index in the container.
    """

    frame_timestamps_ns: npt.NDArray[np.int64]
    is_keyframe: npt.NDArray[np.bool_]
    codec: str
    width: int
    height: int
    pixel_format: str
    time_base: Fraction
    average_rate_hz: float | None
    has_b_frames: bool
    stream_index: int

    @property
    def num_frames(self) -> int:
        return len(self.frame_timestamps_ns)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class AssetPackets:
    """The packets of a video file's first video stream, in decode order.

    Attributes:
        path: the file.
        codec: the FFmpeg codec name of the stream (e.g. ``"h264"``, ``"hevc"``, ``"av1"``).
        extradata: the codec configuration record from the container, if any.
        pts: ``int64[N]`` presentation timestamps (stream units) in decode order.
        dts: ``int64[N]`` decode timestamps.
        is_keyframe: ``bool[N]``.
        offset: ``int64[N]`` byte offset of each packet in the file.
        size: ``int64[N]`` byte size of each packet.
        presentation_pts: ``int64[N]`` the pts sorted (presentation order).
        presentation_ns: ``int64[N]`` the same in ns.
        presentation_to_decode: ``int64[N]`` decode position of each presented frame.
        start_of: ``int64[N]`` for each presented frame, the decode position of the keyframe to
            start decoding from (the latest keyframe presented at or before it).
    """

    path: Path
    codec: str
    extradata: bytes | None
    time_base: Fraction
    pts: npt.NDArray[np.int64]
    dts: npt.NDArray[np.int64]
    is_keyframe: npt.NDArray[np.bool_]
    offset: npt.NDArray[np.int64]
    size: npt.NDArray[np.int64]
    presentation_pts: npt.NDArray[np.int64]
    presentation_ns: npt.NDArray[np.int64]
    presentation_to_decode: npt.NDArray[np.int64]
    start_of: npt.NDArray[np.int64]
    _mapping: mmap.mmap | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.pts)

    def packet_bytes(self, position: int) -> bytes:
        """The encoded bytes of the packet at decode ``position``."""
        start = int(self.offset[position])
        assert self._mapping is not None, "AssetPackets was closed"
        return self._mapping[start:start + int(self.size[position])]

    def frame_at(self, timestamp_ns: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Presentation index of the frame each timestamp names (latest pts ≤ it); -1 if none."""
        return np.searchsorted(self.presentation_ns, timestamp_ns + FRAME_MATCH_TOLERANCE_NS,
                               side="right").astype(np.int64) - 1


def _open_stream(path: Path) -> Any:
    av = require_av()
    if not path.is_file():
        raise SourceNotFoundError(f"video file {str(path)!r} does not exist")
    try:
        container = av.open(str(path))
    except (av.FFmpegError, UnicodeDecodeError) as err:  # PyAV decodes damaged tags as UTF-8
        raise CorruptRecordingError(f"{str(path)!r} is not a readable video file: {err}") from err
    if not container.streams.video:
        container.close()
        raise CorruptRecordingError(f"{str(path)!r} has no video stream")
    return container


def _demux(path: Path) -> tuple[Any, dict[str, Any]]:
    """Demux the first video stream (no decoding): per-packet arrays in decode order."""
    av = require_av()
    container = _open_stream(path)
    try:
        stream = container.streams.video[0]
        rows: list[tuple[int, int, bool, int, int]] = []
        try:
            for packet in container.demux(stream):
                if packet.size == 0:
                    continue
                pts = packet.pts if packet.pts is not None else packet.dts
                dts = packet.dts if packet.dts is not None else pts
                if pts is None:
                    raise CorruptRecordingError(
                        f"{str(path)!r}: a video packet has neither pts nor dts"
                    )
                rows.append((pts, dts, packet.is_keyframe, packet.pos, packet.size))
        except av.FFmpegError as err:
            raise CorruptRecordingError(f"{str(path)!r}: demuxing failed: {err}") from err
        if not rows:
            raise CorruptRecordingError(f"{str(path)!r}: the video stream has no frames")
        table = np.array(rows, dtype=np.int64)
        ctx = stream.codec_context
        meta = {
            "codec": ctx.name,
            "extradata": bytes(ctx.extradata) if ctx.extradata else None,
            "time_base": Fraction(stream.time_base) if stream.time_base else Fraction(1, 90_000),
            "width": ctx.width,
            "height": ctx.height,
            "pixel_format": ctx.pix_fmt or "",
            "average_rate_hz": float(stream.average_rate) if stream.average_rate else None,
            "stream_index": stream.index,
        }
        return table, meta
    finally:
        container.close()


def probe_video_asset(path: str | os.PathLike[str]) -> VideoAssetInfo:
    """Read a video file's frame index (no decoding): timestamps, keyframes, codec and size.

    Uses the first video stream; other streams (audio) are ignored.

    Raises:
        SourceNotFoundError: no such file.
        CorruptRecordingError: not a video file, or its stream cannot be demuxed.
    """
    table, meta = _demux(Path(path))
    pts = table[:, 0]
    order = np.argsort(pts, kind="stable")
    return VideoAssetInfo(
        frame_timestamps_ns=pts_to_ns(pts[order], meta["time_base"]),
        is_keyframe=table[order, 2].astype(bool),
        codec=_ffmpeg_to_codec(meta["codec"]),
        width=meta["width"],
        height=meta["height"],
        pixel_format=meta["pixel_format"],
        time_base=meta["time_base"],
        average_rate_hz=meta["average_rate_hz"],
        has_b_frames=bool(np.any(pts != table[:, 1])) or bool(np.any(np.diff(pts) < 0)),
        stream_index=meta["stream_index"],
    )


def _ffmpeg_to_codec(name: str) -> str:
    if name in ("libdav1d", "libaom-av1", "av1"):
        return "av1"
    return canonical_codec(name)


def load_asset_packets(path: str | os.PathLike[str]) -> AssetPackets:
    """Index a video file's packets for decoding and memory-map it.

    Raises:
        SourceNotFoundError: no such file.
        CorruptRecordingError: not a video file, or its packets are not stored contiguously.
    """
    file_path = Path(path)
    table, meta = _demux(file_path)
    pts, dts = table[:, 0].copy(), table[:, 1].copy()
    is_keyframe = table[:, 2].astype(bool)
    offset, size = table[:, 3].copy(), table[:, 4].copy()
    if np.any(offset < 0):
        raise CorruptRecordingError(
            f"{str(file_path)!r}: the container does not give packet byte positions; remux it to "
            "MP4 (ffmpeg -i in -c copy out.mp4)"
        )
    order = np.argsort(pts, kind="stable")
    presentation_ns = pts_to_ns(pts[order], meta["time_base"])
    # For each presented frame, the latest keyframe presented at or before it.
    key_presented = is_keyframe[order]
    last_key = np.maximum.accumulate(np.where(key_presented, np.arange(len(order)), -1))
    start_of = np.where(last_key >= 0, order[np.maximum(last_key, 0)], -1).astype(np.int64)
    with file_path.open("rb") as handle:  # the map keeps its own descriptor
        mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    return AssetPackets(
        path=file_path,
        codec=meta["codec"],
        extradata=meta["extradata"],
        time_base=meta["time_base"],
        pts=pts,
        dts=dts,
        is_keyframe=is_keyframe,
        offset=offset,
        size=size,
        presentation_pts=pts[order],
        presentation_ns=presentation_ns,
        presentation_to_decode=order.astype(np.int64),
        start_of=start_of,
        _mapping=mapping,
    )
