"""Writing MP4 files for export: packet remux (no re-encoding) or encoding with PyAV."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rayform._optional import require
from rayform.errors import ConfigError
from rayform.media._video_encode import available_video_codecs, video_encoder_name
from rayform.media._x264_cpu import reproducible_x264_params


@dataclass(frozen=True, slots=True, kw_only=True)
class VideoEncoding:
    """How exported video is encoded when it cannot be remuxed.

    Attributes:
        codec: ``"h264"``, ``"h265"`` or ``"av1"`` (the encoder is the one
            :func:`rayform.media._video_encode.video_encoder_name` picks), or an FFmpeg encoder name.
        pix_fmt: the encoded pixel format.
        gop_size: frames per keyframe interval (LeRobot's default is 2: cheap random access).
        crf: constant rate factor (quality; lower is better).
        options: extra encoder options (``{"preset": "veryfast"}``).
        remux: copy the source packets into the new file, without re-encoding, whenever the
            source is an MP4 asset whose frames map one to one onto the export grid.
    """

    codec: str = "h264"
    pix_fmt: str = "yuv420p"
    gop_size: int = 2
    crf: int = 23
    options: dict[str, str] = field(default_factory=dict)
    remux: bool = True

    def __post_init__(self) -> None:
        if self.gop_size < 1:
            raise ConfigError(f"VideoEncoding.gop_size must be >= 1, got {self.gop_size}")
        if not 0 <= self.crf <= 63:
            raise ConfigError(f"VideoEncoding.crf must be in [0, 63], got {self.crf}")


def _av() -> Any:
    return require("av", extra="video", feature="Exporting video")


def rate_fraction(fps: float) -> Fraction:
    """``fps`` as a fraction with a small denominator (``29.97`` -> ``2997/100``)."""
    return Fraction(fps).limit_denominator(1001)


def encoder_options(encoder: str, *, gop: int, crf: int) -> dict[str, str]:
    """Options for a training-friendly stream: fixed GOP, no B-frames, no scene-cut keyframes."""
    if encoder == "libx264":
        return {"preset": "veryfast", "crf": str(crf),
                "x264-params": (f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes=0"
                                f"{reproducible_x264_params()}")}
    if encoder == "libx265":
        return {"preset": "veryfast", "crf": str(crf),
                "x265-params": f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes=0:"
                               "open-gop=0:log-level=error"}
    if encoder == "libsvtav1":
        return {"preset": "10", "crf": str(crf), "svtav1-params": f"keyint={gop}:scd=0"}
    return {"crf": str(crf), "g": str(gop), "bf": "0"}


def encoder_name(codec: str) -> str:
    """The FFmpeg encoder for ``codec`` (a codec name or an encoder name).

    Raises:
        ConfigError: this PyAV build cannot encode it.
    """
    name = video_encoder_name(codec)
    if name is not None:
        return name
    if codec in _av().codecs_available:
        return codec
    raise ConfigError(f"VideoEncoding: no encoder for {codec!r} in this PyAV build; "
                      f"available: {list(available_video_codecs())}")


class VideoEncoder:
    """Encodes frames at a constant rate into an MP4 file: frame ``k`` at ``k / fps`` seconds."""

    def __init__(self, path: Path, *, fps: float, width: int, height: int,
                 encoding: VideoEncoding) -> None:
        av = _av()
        encoder = encoder_name(encoding.codec)
        self._path = path
        self._container = av.open(str(path), "w", format="mp4")
        rate = rate_fraction(fps)
        self._stream = self._container.add_stream(encoder, rate=rate)
        self._stream.width = width - width % 2
        self._stream.height = height - height % 2
        self._stream.pix_fmt = encoding.pix_fmt
        self._time_base = 1 / rate
        self._stream.time_base = self._time_base
        ctx = self._stream.codec_context
        ctx.time_base = self._time_base
        ctx.gop_size = encoding.gop_size
        ctx.max_b_frames = 0
        self._stream.options = {**encoder_options(encoder, gop=encoding.gop_size,
                                                  crf=encoding.crf), **encoding.options}
        if encoder == "libsvtav1":
            os.environ.setdefault("SVT_LOG", "1")
        self._count = 0

    @property
    def codec_name(self) -> str:
        return str(self._stream.codec_context.name)

    @property
    def width(self) -> int:
        return int(self._stream.width)

    @property
    def height(self) -> int:
        return int(self._stream.height)

    def add(self, frame: Any) -> None:
        """Encode a copy of one ``av.VideoFrame`` as the next frame.

        The encoder gets its own copy: PyAV encoders release the frames they are given, and
        callers pass the same decoded frame again to repeat it.
        """
        if frame.width != self.width or frame.height != self.height \
                or frame.format.name != self._stream.pix_fmt:
            frame = frame.reformat(width=self.width, height=self.height,
                                   format=self._stream.pix_fmt)
        copy = _av().VideoFrame.from_ndarray(frame.to_ndarray(), format=self._stream.pix_fmt)
        copy.pts = self._count
        copy.time_base = self._time_base
        self._count += 1
        for packet in self._stream.encode(copy):
            self._container.mux(packet)

    def add_rgb(self, rgb: npt.NDArray[np.uint8]) -> None:
        """Encode one ``uint8[H, W, 3]`` RGB image as the next frame."""
        self.add(_av().VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24"))

    def close(self) -> int:
        """Flush the encoder and close the file; returns the number of frames written."""
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.close()
        return self._count


def remux_frames(source: Path, dest: Path, *, first_pts: int, last_pts: int) -> int:
    """Copy the packets of ``source``'s first video stream with pts in ``[first_pts, last_pts]``.

    Timestamps are shifted so that the first frame is at 0. The caller guarantees that the range
    starts at a keyframe and decodes on its own (no reference outside it).

    Returns:
        The number of packets written.
    """
    av = _av()
    written = 0
    with av.open(str(source)) as inp, av.open(str(dest), "w", format="mp4") as out:
        stream = inp.streams.video[0]
        target = out.add_stream_from_template(stream, opaque=True)
        for packet in inp.demux(stream):
            if packet.pts is None or not first_pts <= packet.pts <= last_pts:
                continue
            packet.pts -= first_pts
            if packet.dts is not None:
                packet.dts -= first_pts
            packet.stream = target
            out.mux(packet)
            written += 1
    return written
