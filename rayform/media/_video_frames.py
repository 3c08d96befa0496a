"""Between Arrow, PyAV and numpy: packet bytes out of a column, decoded frames into arrays."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rayform.media._video_bitstream import is_annex_b, length_prefixed_to_annex_b
from rayform.media._video_codec import canonical_codec

# AVColorSpace -> Yuv420Frame.color_space
_COLOR_SPACES: Final[dict[int, str]] = {1: "bt709", 5: "bt601", 6: "bt601", 9: "bt2020",
                                        10: "bt2020"}
# AVColorRange -> Yuv420Frame.color_range
_COLOR_RANGES: Final[dict[int, str]] = {1: "limited", 2: "full"}


def is_packet_column(column_type: pa.DataType) -> bool:
    """``List<Binary>`` (or ``List<List<uint8>>``): one encoded packet per row."""
    inner = column_type.value_type
    if pa.types.is_binary(inner) or pa.types.is_large_binary(inner):
        return True
    return bool((pa.types.is_list(inner) or pa.types.is_large_list(inner))
                and pa.types.is_uint8(inner.value_type))


def is_timestamp_column(column_type: pa.DataType) -> bool:
    """``List<Int64>`` (or timestamp/duration): a video asset's per-frame timestamps."""
    inner = column_type.value_type
    return bool(pa.types.is_integer(inner) or pa.types.is_timestamp(inner)
                or pa.types.is_duration(inner))


def first_timestamps(column: pa.Array) -> npt.NDArray[np.int64]:
    """The first value of each row as int64 (ns); rows without one read as a very early time."""
    out = np.full(len(column), np.iinfo(np.int64).min // 2, dtype=np.int64)
    offsets = column.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    values = column.values
    if not pa.types.is_int64(values.type):
        values = values.view(pa.int64()) if values.type.bit_width == 64 else values.cast(pa.int64())
    flat = values.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    valid = column.is_valid().to_numpy(zero_copy_only=False) & (offsets[1:] > offsets[:-1])
    out[valid] = flat[offsets[:-1][valid]]
    return out


class PacketColumn:
    """Random access to the packet bytes of a ``VideoStream:sample`` column's rows.

    A row holding several blobs is read as their concatenation; null and empty rows hold no
    packet. H.264/H.265 packets in length-prefixed (AVCC) framing are rewritten as Annex B.
    """

    def __init__(self, column: pa.Array, codec: str) -> None:
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        self._codec = canonical_codec(codec)
        outer = column.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        inner = column.values
        if pa.types.is_binary(inner.type) or pa.types.is_large_binary(inner.type):
            width = np.int64 if pa.types.is_large_binary(inner.type) else np.int32
            buffers = inner.buffers()
            inner_offsets = np.frombuffer(buffers[1], dtype=width)[
                inner.offset:inner.offset + len(inner) + 1].astype(np.int64)
            data = buffers[2]
        else:  # list<uint8> blobs
            values = inner.values
            inner_offsets = inner.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
            inner_offsets += values.offset
            data = values.buffers()[1]
        self._data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(
            0, np.uint8)
        self._start = inner_offsets[outer[:-1]]
        self._stop = inner_offsets[outer[1:]]
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        self.nonempty: npt.NDArray[np.bool_] = valid & (self._stop > self._start)
        self._rewrite = self._length_prefixed()

    def __len__(self) -> int:
        return len(self.nonempty)

    def packet(self, row: int) -> bytes:
        """The packet of ``row`` (empty bytes for a row without one)."""
        if not self.nonempty[row]:
            return b""
        data = self._data[self._start[row]:self._stop[row]].tobytes()
        if self._codec in ("h264", "h265") and not is_annex_b(data):
            data = length_prefixed_to_annex_b(data)
        return data

    def feed(self, first: int, last: int) -> Iterator[tuple[int, npt.NDArray[np.uint8] | bytes]]:
        """``(row, packet)`` for the rows ``first..last`` that hold one, in order: what
        :meth:`packet` gives, as a view of the column's memory where no rewrite is needed (the
        decoder copies it once into its own packet, with no ``bytes`` in between)."""
        stop = last + 1
        rewrite = self._rewrite
        starts = self._start[first:stop].tolist()
        stops = self._stop[first:stop].tolist()
        data = self._data
        for offset, present in enumerate(self.nonempty[first:stop].tolist()):
            if present:
                row = first + offset
                if rewrite is not None and rewrite[row]:
                    yield row, self.packet(row)
                else:
                    yield row, data[starts[offset]:stops[offset]]

    def _length_prefixed(self) -> npt.NDArray[np.bool_] | None:
        """Per row, whether :meth:`packet` rewrites it (H.264/H.265 not in Annex B framing);
        ``None`` when no row needs it."""
        if self._codec not in ("h264", "h265"):
            return None
        data, start = self._data, self._start
        head = np.zeros((len(start), 4), dtype=np.uint8)
        for k in range(4):  # the first bytes of every packet (0 past a short one)
            inside = self.nonempty & (start + k < self._stop)
            head[inside, k] = data[start[inside] + k]
        annex_b = (head[:, 0] == 0) & (head[:, 1] == 0) & (
            (head[:, 2] == 1) | ((head[:, 2] == 0) & (head[:, 3] == 1)))
        rewrite = self.nonempty & ~annex_b
        return rewrite if rewrite.any() else None


@dataclass(frozen=True, slots=True)
class YuvPlanes:
    """One frame's 8-bit 4:2:0 planes: ``y [1, H, W]``, ``uv [2, ceil(H/2), ceil(W/2)]``."""

    y: npt.NDArray[np.uint8]
    uv: npt.NDArray[np.uint8]
    color_space: str
    color_range: str

    @property
    def shape(self) -> tuple[int, ...]:
        return self.y.shape


def color_metadata(frame: Any) -> tuple[str, str]:
    """``(color_space, color_range)`` of a decoded frame, in :class:`Yuv420Frame` terms."""
    space = _COLOR_SPACES.get(int(frame.colorspace), "unspecified")
    color_range = _COLOR_RANGES.get(int(frame.color_range), "unspecified")
    if color_range == "unspecified" and frame.format.name.startswith("yuvj"):
        color_range = "full"
    return space, color_range


def _plane(plane: Any, height: int, width: int) -> npt.NDArray[np.uint8]:
    raw = np.frombuffer(plane, dtype=np.uint8)
    return raw[: height * plane.line_size].reshape(height, plane.line_size)[:, :width]


def frame_to_rgb(frame: Any, reformatter: Any) -> npt.NDArray[np.uint8]:
    """A decoded frame as uint8 RGB ``[H, W, 3]`` (FFmpeg's rgb24 conversion), in its own memory."""
    rgb = reformatter.reformat(frame, format="rgb24", threads=1)
    # The plane's memory as an array (what to_ndarray returns, at a third of its call cost).
    return _plane(rgb.planes[0], rgb.height, rgb.width * 3).reshape(rgb.height, rgb.width, 3)


def yuv_shapes(height: int, width: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The shapes of a frame's ``y`` and ``uv`` planes in :class:`YuvPlanes`."""
    return (1, height, width), (2, (height + 1) // 2, (width + 1) // 2)


def frame_to_yuv(frame: Any, reformatter: Any, *,
                 out: tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]] | None = None
                 ) -> YuvPlanes:
    """A decoded frame as 8-bit 4:2:0 planes (converted first if it is another format).

    Args:
        frame: an ``av.VideoFrame``.
        reformatter: a ``VideoReformatter`` for frames in another pixel format.
        out: ``(y, uv)`` arrays of :func:`yuv_shapes` to write into; new ones if ``None``.
    """
    space, color_range = color_metadata(frame)
    if frame.format.name not in ("yuv420p", "yuvj420p"):
        frame = reformatter.reformat(frame, format="yuv420p", threads=1)
    height, width = frame.height, frame.width
    chroma_h, chroma_w = (height + 1) // 2, (width + 1) // 2
    if out is None:
        y = np.empty((1, height, width), dtype=np.uint8)
        uv = np.empty((2, chroma_h, chroma_w), dtype=np.uint8)
    else:
        y, uv = out
    y[0] = _plane(frame.planes[0], height, width)
    uv[0] = _plane(frame.planes[1], chroma_h, chroma_w)
    uv[1] = _plane(frame.planes[2], chroma_h, chroma_w)
    return YuvPlanes(y=y, uv=uv, color_space=space, color_range=color_range)
