"""Video codec names and PyAV decoder contexts: which FFmpeg decoder serves which codec."""

from __future__ import annotations

from typing import Any, Final

from rayform.errors import ConfigError

# Our codec names (Rerun's VideoCodec spelling) and their common aliases.
CODEC_ALIASES: Final[dict[str, str]] = {
    "h264": "h264",
    "avc": "h264",
    "avc1": "h264",
    "h265": "h265",
    "hevc": "h265",
    "hvc1": "h265",
    "hev1": "h265",
    "av1": "av1",
    "av01": "av1",
    "libdav1d": "av1",
    "libaom-av1": "av1",
}

# FFmpeg decoders to try for each codec, best first (libdav1d is the fast software AV1 decoder;
# FFmpeg's native "av1" decoder only works with hardware acceleration in most builds).
_DECODERS: Final[dict[str, tuple[str, ...]]] = {
    "h264": ("h264",),
    "h265": ("hevc",),
    "av1": ("libdav1d", "libaom-av1", "av1"),
}


class UnknownCodecError(ConfigError):
    """No FFmpeg decoder in this PyAV build handles the codec."""


def require_av() -> Any:
    """Import PyAV or explain how to install it."""
    try:
        import av
    except ImportError as err:  # pragma: no cover - av is a declared extra
        raise ImportError("VideoFrameDecoder needs PyAV: pip install 'rayform[video]'") from err
    return av


def canonical_codec(name: str) -> str:
    """Our name for a codec (``"h264"``, ``"h265"``, ``"av1"``), or the lowercased input."""
    key = name.strip().lower()
    return CODEC_ALIASES.get(key, key)


def decoder_names(codec: str) -> tuple[str, ...]:
    """FFmpeg decoder names to try for ``codec``, best first."""
    canonical = canonical_codec(codec)
    return _DECODERS.get(canonical, (canonical,))


def open_decoder(codec: str, *, thread_count: int = 1, extradata: bytes | None = None) -> Any:
    """Create a PyAV decoding ``CodecContext`` for ``codec``.

    Args:
        codec: a codec name or alias (``h264``, ``h265``/``hevc``, ``av1``) or an FFmpeg
            decoder name.
        thread_count: FFmpeg decoding threads; ``1`` keeps the decoder free of frame delay,
            ``0`` lets FFmpeg choose.
        extradata: codec configuration from a container (``avcC``/``hvcC``/``av1C``), if any.

    Raises:
        UnknownCodecError: no decoder for ``codec`` in this PyAV build.
    """
    av = require_av()
    last: Exception | None = None
    for name in decoder_names(codec):
        try:
            ctx = av.CodecContext.create(name, "r")
        except (ValueError, av.FFmpegError) as err:  # unknown decoder name
            last = err
            continue
        if name == "libdav1d":
            # Emit each frame as soon as its temporal unit is decoded (no frame pipelining).
            ctx.options = {"max_frame_delay": "1"}
        ctx.thread_count = thread_count
        if thread_count != 1:
            ctx.thread_type = "AUTO"
        if extradata:
            ctx.extradata = extradata
        return ctx
    raise UnknownCodecError(
        f"no FFmpeg decoder for video codec {codec!r} in this PyAV build (tried "
        f"{', '.join(decoder_names(codec))}); use one of 'h264', 'h265', 'av1' or an FFmpeg "
        f"decoder name listed in av.codecs_available"
    ) from last
