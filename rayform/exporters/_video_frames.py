"""Decoded frames for export, one per requested row, from the three shapes video takes.

Requests are row positions of the field's column, non-decreasing (latest-at of an ascending
grid), so every source decodes forward once and repeats a frame when a row is asked again.
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from rayform._optional import require
from rayform.errors import DecodeError
from rayform.media._video_codec import open_decoder


class BlobRows(Protocol):
    """Row ``i`` as the bytes of one encoded packet or image."""

    def __len__(self) -> int: ...

    def __getitem__(self, row: int) -> bytes: ...


def _av() -> Any:
    return require("av", extra="video", feature="Exporting video")


def asset_frames(path: Path, wanted_pts_ns: npt.NDArray[np.int64]) -> Iterator[Any]:
    """Frames of an MP4 asset at the given presentation times (ns, non-decreasing)."""
    av = _av()
    if not len(wanted_pts_ns):
        return
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        tb = stream.time_base
        half_tick_ns = max(1, int(0.5e9 * tb))
        first_ticks = round(int(wanted_pts_ns[0]) / 1e9 / tb)
        container.seek(first_ticks, stream=stream, backward=True, any_frame=False)
        i = 0
        last: Any = None
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            t_ns = round(frame.pts * tb * 1_000_000_000)
            while i < len(wanted_pts_ns) and t_ns - int(wanted_pts_ns[i]) > half_tick_ns:
                if last is None:
                    raise DecodeError(f"{path}: no frame at {int(wanted_pts_ns[i])} ns")
                yield last
                i += 1
            while i < len(wanted_pts_ns) and abs(t_ns - int(wanted_pts_ns[i])) <= half_tick_ns:
                yield frame
                i += 1
            last = frame
            if i >= len(wanted_pts_ns):
                return
        if i < len(wanted_pts_ns):
            if last is None:
                raise DecodeError(f"{path}: decoded no frame at or after {wanted_pts_ns[i]} ns")
            for _ in range(i, len(wanted_pts_ns)):
                yield last


def stream_frames(samples: BlobRows, is_keyframe: npt.NDArray[np.bool_], codec: str,
                  rows: npt.NDArray[np.int64]) -> Iterator[Any]:
    """Frames of a packet stream (one packet per row, decode order = presentation order)."""
    av = _av()
    if not len(rows):
        return
    start = int(rows[0])
    keys = np.flatnonzero(is_keyframe[: start + 1])
    start = int(keys[-1]) if len(keys) else 0
    stop = int(rows[-1]) + 1
    ctx = open_decoder(codec)
    decoded: deque[tuple[int, Any]] = deque()
    next_row = start
    want = 0
    last: tuple[int, Any] | None = None

    def drain() -> Iterator[Any]:
        nonlocal want, last
        while decoded:
            row, frame = decoded.popleft()
            last = (row, frame)
            while want < len(rows) and int(rows[want]) == row:
                yield frame
                want += 1

    try:
        for row in range(start, stop):
            for frame in ctx.decode(av.Packet(samples[row])):
                decoded.append((next_row, frame))
                next_row += 1
            yield from drain()
        for frame in ctx.decode(None):
            decoded.append((next_row, frame))
            next_row += 1
        yield from drain()
    except av.error.FFmpegError as err:
        raise DecodeError(f"{codec} packet stream: cannot decode rows {start}..{stop}: {err}") \
            from err
    while want < len(rows):
        if last is None:
            raise DecodeError(f"{codec} packet stream: no frame decoded for row {int(rows[want])}")
        yield last[1]
        want += 1


def image_frames(blobs: BlobRows, rows: npt.NDArray[np.int64]) -> Iterator[Any]:
    """Frames of encoded images (JPEG/PNG), decoded with Pillow."""
    av = _av()
    image_mod: Any = require("PIL.Image", extra="image", feature="Exporting encoded images")
    cached_row = -1
    cached: Any = None
    for row in rows:
        if int(row) != cached_row:
            try:
                with image_mod.open(io.BytesIO(blobs[int(row)])) as img:
                    rgb = np.asarray(img.convert("RGB"))
            except (OSError, ValueError) as err:
                raise DecodeError(f"encoded image at row {int(row)} cannot be decoded: {err}") \
                    from err
            cached = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            cached_row = int(row)
        yield cached
