"""Camera bytes for the browser: encoded images as they are, video as files served with ranges.

- An encoded image (JPEG, PNG …) is served as stored, with its media type when it is one a
  browser shows (never ``text/html``: the type comes from an allow-list).
- A packet stream is remuxed into an MP4 with PyAV, packets copied, not decoded (H.264, H.265,
  AV1); a video asset is its own MP4. Both are served with HTTP ranges (Starlette's FileResponse),
  so the browser seeks without downloading the whole file.
- Where the browser cannot play the codec (the page asks it with ``canPlayType``), the video is
  transcoded once to VP9 in WebM (libvpx, real-time settings).

Generated files live in ``<cache>/ui/video/`` named by the segment version (16 hex digits,
checked when its record was parsed) and a hash of the entity: nothing from a request or a
recording becomes part of a path.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rayform.catalog import SegmentData
from rayform.errors import DecodeError
from rayform.recording._columns import (
    ENCODED_IMAGE_BLOB,
    ENCODED_IMAGE_MEDIA_TYPE,
    VIDEO_SAMPLE,
    column_name,
)
from rayform.ui._episode import Axis, asset_digest, stream_codec

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/webp", "image/gif", "image/bmp"})
_MAGIC = ((b"\xff\xd8\xff", "image/jpeg"), (b"\x89PNG\r\n\x1a\n", "image/png"),
          (b"RIFF", "image/webp"), (b"GIF8", "image/gif"), (b"BM", "image/bmp"))
# FFmpeg's names of the codecs an MP4 may carry, and the RFC 6381 string the page asks about.
_MUXED = {"h264": "h264", "h265": "hevc", "av1": "av1"}
MIME_CODECS = {"h264": 'video/mp4; codecs="avc1.640028"', "h265": 'video/mp4; codecs="hvc1.1.6.L93.B0"',
               "av1": 'video/mp4; codecs="av01.0.05M.08"', "vp9": 'video/mp4; codecs="vp09.00.10.08"'}
_TICKS = 90_000  # the MP4 time base of remuxed streams (1/90000 s)


class MediaNotFoundError(LookupError):
    """The segment has no such camera or frame (the page answers 404)."""


def image_bytes(data: SegmentData, entity: str, timeline: str, row: int) -> tuple[bytes, str]:
    """The encoded image of row ``row`` of ``entity`` and its media type."""
    column = column_name(entity, ENCODED_IMAGE_BLOB)
    if not data.has_column(column):
        raise MediaNotFoundError(f"segment {data.segment_id!r} has no image entity {entity!r}")
    rows = data.column(column, timeline)
    if not 0 <= row < len(rows):
        raise MediaNotFoundError(f"{entity!r} has rows 0..{len(rows) - 1}, not {row}")
    cell = rows.values[row].as_py()
    blob = bytes(cell[0] if isinstance(cell, list) and cell else cell or b"")
    media_type = None
    type_column = column_name(entity, ENCODED_IMAGE_MEDIA_TYPE)
    if data.has_column(type_column):
        types = data.column(type_column, timeline)
        if len(types):
            pos = min(row, len(types) - 1) if not types.is_static else 0
            value = types.values[pos].as_py()
            media_type = value[0] if isinstance(value, list) and value else value
    if media_type not in IMAGE_TYPES:
        media_type = next((t for magic, t in _MAGIC if blob.startswith(magic)),
                          "application/octet-stream")
    return blob, str(media_type)


def asset_codec(path: Path) -> str | None:
    """The codec of an MP4's first video stream (our names), ``None`` when unreadable."""
    from rayform.media._video_codec import canonical_codec, require_av

    av = require_av()
    try:
        with av.open(str(path)) as container:
            name = str(container.streams.video[0].codec_context.name)
    except (av.error.FFmpegError, IndexError, OSError):
        return None
    try:
        return canonical_codec({"hevc": "h265", "libdav1d": "av1", "libaom-av1": "av1"}
                               .get(name, name))
    except ValueError:
        return name


class VideoFiles:
    """The video files of the cameras, made on first request and kept under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def _path(self, data: SegmentData, entity: str, suffix: str) -> Path:
        digest = hashlib.sha256(entity.encode()).hexdigest()[:16]
        return self.root / f"{data.version}-{digest}{suffix}"

    def playable(self, data: SegmentData, entity: str, axis: Axis) -> tuple[Path, str]:
        """The camera as a file the browser may play without transcoding, and its media type.

        Raises:
            MediaNotFoundError: ``entity`` is not a video camera of the segment.
        """
        info = data.record.entities.get(entity)
        if info is None:
            raise MediaNotFoundError(f"segment {data.segment_id!r} has no entity {entity!r}")
        if VIDEO_SAMPLE in info.components:
            path = self._path(data, entity, ".mp4")
            with self._lock(str(path)):
                if not path.is_file():
                    _write_atomic(path, lambda tmp: remux_stream(data, entity, axis, tmp))
            return path, "video/mp4"
        digest = asset_digest(data, entity, axis.timeline)
        if digest is None:
            raise MediaNotFoundError(f"{entity!r} of segment {data.segment_id!r} is not a video")
        return data.asset_path(digest), "video/mp4"

    def transcoded(self, data: SegmentData, entity: str, axis: Axis) -> Path:
        """The camera transcoded to VP9 in WebM, same timestamps (for browsers without its codec)."""
        source, _ = self.playable(data, entity, axis)
        path = self._path(data, entity, ".webm")
        with self._lock(str(path)):
            if not path.is_file():
                _write_atomic(path, lambda tmp: transcode_vp9(source, tmp))
        return path


def _write_atomic(path: Path, write: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _strictly_increasing(ticks: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    out = ticks.copy()
    for i in range(1, len(out)):
        if out[i] <= out[i - 1]:
            out[i] = out[i - 1] + 1
    return out


def remux_stream(data: SegmentData, entity: str, axis: Axis, out_path: Path) -> None:
    """Copy a packet stream's packets into an MP4, timed from its first frame (no decoding but
    the first keyframe's, for the picture size)."""
    from rayform.media._video_bitstream import detect_gop_start
    from rayform.media._video_codec import open_decoder, require_av
    from rayform.media._video_frames import PacketColumn

    av = require_av()
    codec = stream_codec(data, entity, axis.timeline)
    if codec not in _MUXED:
        raise DecodeError(f"{entity!r}: {codec} packets cannot be put into an MP4")
    rows = data.column(column_name(entity, VIDEO_SAMPLE), axis.timeline)
    packets = PacketColumn(rows.values, codec)
    blobs = [packets.packet(i) for i in range(len(rows))]
    keep = [i for i in range(len(rows)) if len(blobs[i])]
    if not keep:
        raise MediaNotFoundError(f"{entity!r} of segment {data.segment_id!r} has no packets")
    seconds = axis.seconds(rows.index[keep])
    ticks = _strictly_increasing(np.round((seconds - seconds[0]) * _TICKS).astype(np.int64))
    decoder = open_decoder(codec)
    size = None
    for i in keep:
        for frame in decoder.decode(av.Packet(blobs[i])):
            size = (frame.width, frame.height)
            break
        if size:
            break
    if size is None:
        raise DecodeError(f"{entity!r} of segment {data.segment_id!r}: no frame decodes")
    rate = max(1, round(1 / float(np.median(np.diff(seconds))))) if len(seconds) > 1 else 30
    time_base = Fraction(1, _TICKS)
    with av.open(str(out_path), "w", format="mp4", options={"movflags": "faststart"}) as out:
        stream = out.add_stream(_MUXED[codec], rate=rate)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        stream.time_base = time_base
        for pos, i in enumerate(keep):
            packet = av.Packet(blobs[i])
            packet.pts = packet.dts = int(ticks[pos])
            packet.time_base = time_base
            packet.stream = stream
            packet.is_keyframe = bool(detect_gop_start(blobs[i], codec))
            out.mux(packet)


def transcode_vp9(source: Path, out_path: Path) -> None:
    """Decode ``source`` and encode it to VP9 in WebM with the same frame times."""
    from rayform.media._video_codec import require_av

    av = require_av()
    with av.open(str(source)) as src, av.open(str(out_path), "w", format="webm") as out:
        inp = src.streams.video[0]
        inp.thread_type = "AUTO"
        stream = out.add_stream("libvpx-vp9", rate=inp.average_rate or 30)
        stream.width = inp.codec_context.width
        stream.height = inp.codec_context.height
        stream.pix_fmt = "yuv420p"
        stream.time_base = Fraction(1, 1000)
        stream.options = {"deadline": "realtime", "cpu-used": "8", "row-mt": "1", "crf": "32",
                          "b": "0"}
        last = -1
        for frame in src.decode(inp):
            if frame.pts is None:
                continue
            ms = max(last + 1, round(float(frame.pts * inp.time_base) * 1000))
            last = ms
            image = frame.reformat(format="yuv420p")
            image.pts = ms
            image.time_base = stream.time_base
            for packet in stream.encode(image):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
