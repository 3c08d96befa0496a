"""Encode RGB frames to training-friendly video (no B-frames, fixed GOP) with PyAV.

Used by tests, ``rayform demo`` and the LeRobot exporter::

    packets, is_keyframe = encode_video_packets(frames, codec="h264", gop=30, fps=30)
    rec.log_video_stream("/cam", timelines=..., samples=packets, is_keyframe=is_keyframe,
                         codec="h264")
    write_video_mp4("cam.mp4", frames, codec="av1", gop=2, fps=30)

Packets are self-contained random-access streams: every keyframe carries its parameter sets
(H.264 SPS/PPS, H.265 VPS/SPS/PPS, the AV1 sequence header), H.264/H.265 in Annex B framing,
one packet per frame with presentation order equal to decode order.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from rayform.errors import ConfigError
from rayform.media._video_codec import canonical_codec, require_av
from rayform.media._x264_cpu import reproducible_x264_params

# FFmpeg encoders for each codec, best first.
_ENCODERS: Final[dict[str, tuple[str, ...]]] = {
    "h264": ("libx264",),
    "h265": ("libx265",),
    "av1": ("libsvtav1", "libaom-av1"),
}


def video_encoder_name(codec: str) -> str | None:
    """The FFmpeg encoder this PyAV build would use for ``codec``, or ``None`` if it has none."""
    av = require_av()
    for name in _ENCODERS.get(canonical_codec(codec), ()):
        if name in av.codecs_available:
            return name
    return None


def available_video_codecs() -> tuple[str, ...]:
    """The codecs (``"h264"``, ``"h265"``, ``"av1"``) this PyAV build can encode."""
    return tuple(c for c in _ENCODERS if video_encoder_name(c) is not None)


def _encoder_options(encoder: str, *, gop: int, crf: int | None) -> dict[str, str]:
    if encoder == "libx264":
        opts = {"preset": "veryfast",
                "x264-params": (f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes=0"
                                f"{reproducible_x264_params()}")}
    elif encoder == "libx265":
        opts = {"preset": "veryfast",
                "x265-params": (f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes=0:"
                                "open-gop=0:repeat-headers=1:log-level=error")}
    elif encoder == "libsvtav1":
        # pred-struct=1: low delay, so each packet shows one frame in order.
        opts = {"preset": "10", "svtav1-params": f"keyint={gop}:scd=0:pred-struct=1"}
    elif encoder == "libaom-av1":
        opts = {"cpu-used": "8", "lag-in-frames": "0", "usage": "realtime"}
    else:  # pragma: no cover - _ENCODERS lists only the above
        opts = {}
    if crf is not None:
        opts["crf"] = str(crf)
    return opts


def _check_frames(frames: Sequence[npt.NDArray[np.uint8]] | npt.NDArray[np.uint8],
                  ) -> tuple[int, int]:
    if len(frames) == 0:
        raise ConfigError("encode_video_packets: frames is empty; give at least one [H, W, 3] frame")
    first = np.asarray(frames[0])
    if first.ndim != 3 or first.shape[2] != 3 or first.dtype != np.uint8:
        raise ConfigError(
            f"video frames must be uint8 RGB arrays of shape [H, W, 3], got {first.dtype} "
            f"{first.shape}"
        )
    height, width = int(first.shape[0]), int(first.shape[1])
    if height % 2 or width % 2:
        raise ConfigError(
            f"video frames must have an even width and height for yuv420p, got {width}x{height}; "
            "crop or pad by one pixel"
        )
    return height, width


def _setup(ctx: Any, encoder: str, *, width: int, height: int, gop: int, fps: int,
           crf: int | None) -> None:
    ctx.width = width
    ctx.height = height
    ctx.pix_fmt = "yuv420p"
    ctx.time_base = Fraction(1, fps)
    ctx.framerate = Fraction(fps, 1)
    ctx.gop_size = gop
    ctx.max_b_frames = 0
    # Tag the stream BT.601 limited range (what the RGB to YUV conversion above produces), so
    # that decoders and Yuv420Frame.to_rgb need not guess.
    ctx.colorspace = 5  # AVCOL_SPC_BT470BG (BT.601)
    ctx.color_range = 1  # AVCOL_RANGE_MPEG (limited)
    ctx.options = _encoder_options(encoder, gop=gop, crf=crf)
    if encoder == "libsvtav1":
        # SVT-AV1 prints its whole configuration to stderr unless told otherwise.
        os.environ.setdefault("SVT_LOG", "1")


def _resolve_encoder(codec: str, gop: int, fps: int) -> str:
    if gop < 1:
        raise ConfigError(f"gop must be >= 1 frame, got {gop!r}")
    if fps < 1:
        raise ConfigError(f"fps must be a positive integer, got {fps!r}")
    encoder = video_encoder_name(codec)
    if encoder is None:
        raise ConfigError(
            f"no encoder for video codec {codec!r} in this PyAV build; available: "
            f"{list(available_video_codecs())}"
        )
    return encoder


def _yuv_frames(frames: Iterable[npt.NDArray[np.uint8]]) -> Iterable[Any]:
    av = require_av()
    for i, rgb in enumerate(frames):
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        frame = frame.reformat(format="yuv420p")
        frame.pts = i
        yield frame


def encode_video_packets(
    frames: Sequence[npt.NDArray[np.uint8]] | npt.NDArray[np.uint8],
    *,
    codec: str = "h264",
    gop: int = 30,
    fps: int = 30,
    crf: int | None = None,
) -> tuple[list[bytes], npt.NDArray[np.bool_]]:
    """Encode RGB frames to one packet per frame, ready for ``RecordingWriter.log_video_stream``.

    Args:
        frames: ``N`` uint8 RGB frames ``[H, W, 3]`` (a list or an ``[N, H, W, 3]`` array), with
            even ``H`` and ``W``.
        codec: ``"h264"``, ``"h265"`` or ``"av1"`` (see :func:`available_video_codecs`).
        gop: frames per group of pictures: a keyframe every ``gop`` frames (1 = all intra).
        fps: frame rate written into the stream's timing.
        crf: constant rate factor (quality; lower is better); the encoder's default if ``None``.

    Returns:
        ``(packets, is_keyframe)``: ``N`` packets (bytes, in display order) and their
        ``bool[N]`` keyframe flags.

    Raises:
        ConfigError: bad frames or options, or no encoder for ``codec``.
    """
    height, width = _check_frames(frames)
    encoder = _resolve_encoder(codec, gop, fps)
    av = require_av()
    ctx = av.CodecContext.create(encoder, "w")
    _setup(ctx, encoder, width=width, height=height, gop=gop, fps=fps, crf=crf)
    packets: list[Any] = []
    for frame in _yuv_frames(frames):
        packets.extend(ctx.encode(frame))
    packets.extend(ctx.encode(None))
    if len(packets) != len(frames):
        raise ConfigError(  # pragma: no cover - guarded by the encoder options above
            f"{encoder} produced {len(packets)} packets for {len(frames)} frames"
        )
    packets.sort(key=lambda p: p.pts)
    return [bytes(p) for p in packets], np.array([p.is_keyframe for p in packets], dtype=bool)


def write_video_mp4(
    path: str | os.PathLike[str],
    frames: Sequence[npt.NDArray[np.uint8]] | npt.NDArray[np.uint8],
    *,
    codec: str = "h264",
    gop: int = 30,
    fps: int = 30,
    crf: int | None = None,
) -> Path:
    """Encode RGB frames into an MP4 file (no B-frames, a keyframe every ``gop`` frames).

    Frame ``i`` is presented at ``i / fps`` seconds. Arguments as :func:`encode_video_packets`.

    Returns:
        The path written.
    """
    height, width = _check_frames(frames)
    encoder = _resolve_encoder(codec, gop, fps)
    av = require_av()
    out = Path(path)
    with av.open(str(out), "w", format="mp4") as container:
        stream = container.add_stream(encoder, rate=fps)
        _setup(stream.codec_context, encoder, width=width, height=height, gop=gop, fps=fps,
               crf=crf)
        for frame in _yuv_frames(frames):
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return out
