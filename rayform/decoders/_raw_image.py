"""RawImageDecoder: raw pixel buffers (Rerun's ``Image:buffer`` + ``Image:format``) to ``[C, H, W]``.

An ``Image:buffer`` row holds one frame's pixels, tightly packed, interleaved ``[H, W, C]``; the
sibling ``Image:format`` column (Rerun's ``ImageFormat``: ``width``, ``height``, ``color_model``,
``channel_datatype``, ``pixel_format``) says how to read them. Rerun's ``ImageDecoder`` only opens
encoded blobs (a raw buffer is not a file PIL can open), so raw frames get this decoder: its output
is the stored values unchanged, in the stored datatype, with the channels in RGB(A) order.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from rayform.decoders._arrow import BlobReader
from rayform.decoders._base import ColumnDecoder, DecodeRequest, FieldBatch
from rayform.errors import ConfigError
from rayform.recording._columns import IMAGE_FORMAT, column_name, entity_of
from rayform.recording._image_format import CHANNEL_DATATYPES, COLOR_MODELS


@dataclass(frozen=True, slots=True)
class RawImageFormat:
    """How to read one raw frame: ``height × width × channels`` values of ``dtype``."""

    width: int
    height: int
    channels: int
    dtype: np.dtype[Any]
    order: tuple[int, ...] | None  # channel permutation to RGB(A), None when already so

    @property
    def frame_bytes(self) -> int:
        return self.width * self.height * self.channels * self.dtype.itemsize

    @classmethod
    def parse(cls, value: Mapping[str, Any], where: str) -> RawImageFormat:
        """A Rerun ``ImageFormat`` struct (a mapping of its fields) checked and resolved.

        Raises:
            ConfigError: a field is missing or out of range, or the format is a ``pixel_format``
                (YUV, Bayer …) this decoder does not convert.
        """
        pixel_format = value.get("pixel_format")
        if pixel_format is not None:
            raise ConfigError(f"{where}: pixel_format {pixel_format} (YUV / Bayer) is not "
                              "decoded by RawImageDecoder; only color_model + channel_datatype "
                              "formats (L, RGB, RGBA, BGR, BGRA) are")
        width, height = value.get("width"), value.get("height")
        model, datatype = value.get("color_model"), value.get("channel_datatype")
        if not isinstance(width, int) or not isinstance(height, int) or width <= 0 or height <= 0:
            raise ConfigError(f"{where}: width and height must be positive integers, got "
                              f"{width!r} × {height!r}")
        if model not in COLOR_MODELS:
            raise ConfigError(f"{where}: color_model {model!r} is not one of Rerun's "
                              f"{ {k: v[0] for k, v in COLOR_MODELS.items()} }")
        if datatype not in CHANNEL_DATATYPES:
            raise ConfigError(f"{where}: channel_datatype {datatype!r} is not one of Rerun's "
                              f"{sorted(CHANNEL_DATATYPES)}")
        _, channels, order = COLOR_MODELS[model]
        return cls(width=width, height=height, channels=channels,
                   dtype=np.dtype(CHANNEL_DATATYPES[datatype]), order=order)

    def decode(self, blob: memoryview) -> torch.Tensor | None:
        """The frame as a contiguous ``[C, H, W]`` tensor; ``None`` when its length is wrong."""
        if len(blob) != self.frame_bytes:
            return None
        hwc = np.frombuffer(blob, dtype=self.dtype).reshape(self.height, self.width,
                                                            self.channels)
        if self.order is not None:
            hwc = hwc[:, :, list(self.order)]
        # A copy of its own (the buffer is the recording's read-only memory), planar, native order.
        chw = np.empty((self.channels, self.height, self.width), self.dtype.newbyteorder("="))
        chw[...] = hwc.transpose(2, 0, 1)
        return torch.from_numpy(chw)


class RawImageDecoder(ColumnDecoder):
    """Decode raw ``Image:buffer`` rows to ``[C, H, W]`` tensors of the stored datatype.

    The format comes from ``image_format`` when given (a mapping with Rerun's ``ImageFormat``
    fields), else from the segment's sibling ``<entity>:Image:format`` column (static or one row
    per frame; every row of a segment must agree). With a window the output is ``[T, C, H, W]``.
    A null or empty row gives ``None`` (missing data); a buffer whose length is not
    ``width × height × channels × datatype size`` gives ``None`` and is reported as a failure
    (:meth:`FieldBatch.report_failure`), so that a rayform dataset raises
    :class:`~rayform.errors.DecodeError`, skips or keeps it as its ``on_decode_error`` says.

    Raises (from ``decode``):
        ConfigError: no format (no ``image_format`` and no ``Image:format`` column), a format
            that varies within a segment, or one this decoder cannot read.
    """

    def __init__(self, image_format: Mapping[str, Any] | None = None) -> None:
        self._fixed = (None if image_format is None
                       else RawImageFormat.parse(image_format, "RawImageDecoder(image_format)"))
        self._formats: dict[tuple[str, str], RawImageFormat] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "RawImageDecoder()" if self._fixed is None else \
            f"RawImageDecoder(image_format={self._fixed})"

    def decode(self, batch: FieldBatch, requests: Sequence[DecodeRequest]
               ) -> Sequence[torch.Tensor | None]:
        out: list[torch.Tensor | None] = []
        if not requests:
            return out
        path = batch.path or "Image:buffer"
        reader = BlobReader(batch.column) if batch.select is None else None
        for request in requests:
            fmt = self._format_of(batch, request.segment_id)
            if reader is None:
                source = BlobReader(batch.take_output_rows(request))
                rows: Sequence[int] = range(len(request.output_row_indices))
            else:
                rows, source = request.output_row_indices, reader
            frames: list[torch.Tensor] = []
            for row in rows:
                blob = source.blob(row)
                if blob is None:
                    break
                frame = fmt.decode(blob)
                if frame is None:
                    batch.report_failure(request, f"{path}: batch row {row} holds {len(blob)} "
                                         f"bytes, its Image:format needs {fmt.frame_bytes} "
                                         f"({fmt.height}×{fmt.width}×{fmt.channels} "
                                         f"{fmt.dtype.name})")
                    break
                frames.append(frame)
            if len(frames) != len(rows):
                out.append(None)
            elif batch.is_windowed:
                out.append(torch.stack(frames))
            else:
                out.append(frames[0])
        return out

    def _format_of(self, batch: FieldBatch, segment_id: str) -> RawImageFormat:
        if self._fixed is not None:
            return self._fixed
        if batch.open_segment is None or batch.path is None:
            raise ConfigError("RawImageDecoder needs image_format=… outside a dataset (no "
                              f"segment to read Image:format from; segment {segment_id!r})")
        column = column_name(entity_of(batch.path), IMAGE_FORMAT)
        key = (segment_id, column)
        with self._lock:
            known = self._formats.get(key)
        if known is not None:
            return known
        fmt = _segment_format(batch.open_segment(segment_id), column, segment_id)
        with self._lock:
            self._formats[key] = fmt
        return fmt


def _segment_format(segment: Any, column: str, segment_id: str) -> RawImageFormat:
    """The one format of ``column`` in a segment (its static value, or its rows, all equal)."""
    where = f"segment {segment_id!r}: {column}"
    if not segment.has_column(column):
        raise ConfigError(f"{where} is missing: a raw Image:buffer needs its Image:format "
                          "(width, height, color_model, channel_datatype), or pass "
                          "RawImageDecoder(image_format=…)")
    values: list[Any] = []
    for _, table in segment.files():
        if column in table.column_names:
            chunks = table.column(column).chunks
            for chunk in chunks:
                flat = chunk.flatten() if pa.types.is_list(chunk.type) else chunk
                values.extend(flat.drop_null().to_pylist())
    distinct = {tuple(sorted(v.items())) for v in values if isinstance(v, dict)}
    if not distinct:
        raise ConfigError(f"{where} has no value")
    if len(distinct) > 1:
        raise ConfigError(f"{where} varies within the segment ({len(distinct)} formats); "
                          "RawImageDecoder reads one format per segment")
    return RawImageFormat.parse(dict(distinct.pop()), where)
