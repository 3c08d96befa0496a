"""Frame index of a video file (pts, keyframe flags), read by demuxing without decoding.

A thin view over :func:`rayform.media._video_asset.probe_video_asset` (the decoders' own
probe, so importers and the video decoder agree on frame timestamps and codec names), plus what
importers and exporters also need: pts in stream ticks, audio presence and a truncation check.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rayform._optional import require
from rayform.errors import CorruptRecordingError, SourceNotFoundError
from rayform.media._video_asset import probe_video_asset


@dataclass(frozen=True, slots=True, kw_only=True)
class VideoProbe:
    """What a video file holds, frame by frame, in presentation order.

    Attributes:
        codec: canonical codec name (``"h264"``, ``"h265"``, ``"av1"``, ``"vp9"`` …).
        width: frame width in pixels.
        height: frame height in pixels.
        pix_fmt: the stream's pixel format (``"yuv420p"``), or ``None`` when unknown.
        time_base: seconds per pts tick.
        pts_ns: ``int64[N]`` presentation timestamps in nanoseconds, ascending.
        is_keyframe: ``bool[N]`` keyframe flag of each frame.
        rate_hz: the stream's average frame rate, or ``None`` when unknown.
        has_audio: the file also has an audio stream (ignored by rayform).
        has_b_frames: decode order differs from presentation order.
    """

    codec: str
    width: int
    height: int
    pix_fmt: str | None
    time_base: Fraction
    pts_ns: npt.NDArray[np.int64]
    is_keyframe: npt.NDArray[np.bool_]
    rate_hz: float | None
    has_audio: bool
    has_b_frames: bool

    def __post_init__(self) -> None:
        if self.pts_ns.shape != self.is_keyframe.shape or self.pts_ns.ndim != 1:
            raise ValueError(
                f"VideoProbe: pts_ns {self.pts_ns.shape} and is_keyframe {self.is_keyframe.shape} "
                "must be 1-D arrays of the same length"
            )

    @property
    def num_frames(self) -> int:
        return len(self.pts_ns)

    @property
    def pts(self) -> npt.NDArray[np.int64]:
        """Presentation timestamps in ``time_base`` ticks (the inverse of ``pts_ns``' rounding)."""
        return self.to_ticks(self.pts_ns)

    def to_ticks(self, ns: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Nanoseconds to ``time_base`` ticks, rounded to the nearest tick."""
        num = self.time_base.numerator * 1_000_000_000
        den = self.time_base.denominator
        return np.array([(int(v) * den + num // 2) // num for v in np.atleast_1d(ns)],
                        dtype=np.int64)


def probe_video(path: Path) -> VideoProbe:
    """Index the frames of the first video stream of ``path``.

    Raises:
        ImportError: PyAV is not installed.
        CorruptRecordingError: the file cannot be opened, has no video stream, or is truncated.
    """
    av: Any = require("av", extra="video", feature="Reading video files")
    try:
        info = probe_video_asset(path)
    except SourceNotFoundError as err:
        raise CorruptRecordingError(str(err)) from err
    try:
        with av.open(str(path)) as container:
            expected = int(container.streams.video[0].frames or 0)
            has_audio = bool(container.streams.audio)
    except (av.error.FFmpegError, OSError, IndexError, UnicodeDecodeError) as err:
        raise CorruptRecordingError(f"{path}: not a readable video file: {err}") from err
    if expected and info.num_frames < expected:
        raise CorruptRecordingError(
            f"{path}: the video index lists {expected} frames but only {info.num_frames} could "
            "be read; the file is truncated")
    return VideoProbe(
        codec=info.codec,
        width=info.width,
        height=info.height,
        pix_fmt=info.pixel_format or None,
        time_base=info.time_base,
        pts_ns=np.asarray(info.frame_timestamps_ns, dtype=np.int64),
        is_keyframe=np.asarray(info.is_keyframe, dtype=bool),
        rate_hz=info.average_rate_hz,
        has_audio=has_audio,
        has_b_frames=info.has_b_frames,
    )
